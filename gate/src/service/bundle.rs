//! One request's evidence bundle, as a list of files: `(path inside the
//! bundle, bytes)`. `spendgate evidence` writes it to a folder; the receipt's
//! `/receipts/{id}/bundle` serves it as one tar file.
//!
//! Guarantees:
//! - [`files`] reads only through the record queries of [`super::pages`]
//!   (`SELECT`s scoped by tenant); it writes nothing and signs nothing. The
//!   bundle holds the request's ledger entries verbatim, each with its
//!   `c2sp.org/tlog-proof@v1` proof against the ONE checkpoint it is given;
//!   the checkpoint; the log's verifier key; the request, policy,
//!   delegation, approvals, authority, provider orders, payments and events
//!   as the database holds them; the proposal's body exactly as received
//!   (`proposal.raw`) and each applied provider event's body and signature
//!   header exactly as received (`provider_events/<event id sha256>.body`,
//!   `.signature`), when the gate kept them; and a `README.md` saying what
//!   each file is and which key checks which. A request of another tenant
//!   is `None`, like a missing one.
//! - [`prove_kept`] proves the request's entries against the newest KEPT
//!   checkpoint covering them all, computed from the ledger as it is now,
//!   without signing: with none kept it says why ([`Unproved`]). A ledger
//!   changed since the checkpoint gives proofs that do not verify, and
//!   nothing here hides it.
//! - `spendgate-verify verify-bundle` checks the checkpoint, every entry's
//!   proof, and every raw file's SHA-256 against the digest its proved
//!   entry names.

use serde_json::{Value, json};
use spendgate_verify::bundle_dir::{
    CHECKPOINT, ENTRIES, ENTRY_EXT, EVENT_BODY_EXT, EVENT_SIGNATURE_EXT, EVENTS, PROOF_EXT,
    PROPOSAL_RAW,
};
use sqlx::PgPool;

use super::error::ServiceError;
use super::pages::{
    self, APPROVALS_SQL, AUTHORITY_SQL, DELEGATION_SQL, EVENTS_SQL, ORDERS_SQL, PAYMENTS_SQL,
    POLICY_SQL, REQUEST_SQL,
};
use super::tlog::{self, Inclusion, LogError, StoredCheckpoint};

/// A bundle: each file's path inside it and its bytes.
pub type Files = Vec<(String, Vec<u8>)>;

/// Why a request's entries cannot be proved against a kept checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unproved {
    /// No ledger entry names the request.
    NoEntry,
    /// No kept checkpoint covers entry `need`.
    NoCheckpoint { need: i64 },
}

impl std::fmt::Display for Unproved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unproved::NoEntry => write!(f, "no ledger entry names the request"),
            Unproved::NoCheckpoint { need } => write!(
                f,
                "no kept checkpoint covers entry {need} yet: run `spendgate log checkpoint` \
                 to sign one, then ask again"
            ),
        }
    }
}

/// The request's entries, each with its proof against the newest kept
/// checkpoint covering them all; read-only.
pub async fn prove_kept(
    pool: &PgPool,
    tenant: &str,
    request: &str,
) -> Result<Result<(StoredCheckpoint, Vec<Inclusion>), Unproved>, LogError> {
    let leaves = tlog::leaves(pool, tenant).await?;
    let seqs = tlog::seqs_naming(&leaves, request);
    let Some(need) = seqs.iter().copied().max() else {
        return Ok(Err(Unproved::NoEntry));
    };
    let Some(checkpoint) = tlog::latest_checkpoint(pool, tenant, need as u64).await? else {
        return Ok(Err(Unproved::NoCheckpoint { need }));
    };
    let tree = tlog::tree_of(&leaves);
    // `seqs_naming` found each number among these leaves (entry `seq` is
    // leaf `seq - 1`).
    let wanted = seqs
        .into_iter()
        .map(|seq| {
            let entry = usize::try_from(seq - 1)
                .ok()
                .and_then(|i| leaves.get(i))
                .map(|(_, e)| e.clone())
                .unwrap_or_default();
            (seq, entry)
        })
        .collect();
    let proofs = tlog::proofs_against(tenant, &tree, &checkpoint, wanted)?;
    Ok(Ok((checkpoint, proofs)))
}

fn json_file(name: &str, value: &Value) -> (String, Vec<u8>) {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    (name.to_owned(), text.into_bytes())
}

fn one_or_null(mut values: Vec<Value>) -> Value {
    if values.len() == 1 {
        values.remove(0)
    } else if values.is_empty() {
        Value::Null
    } else {
        Value::Array(values)
    }
}

/// The bundle of `request` of `tenant`, its entries proved by `proofs`
/// against `checkpoint`; `verifier` is the log's verifier key as text.
/// `None` when the tenant has no such request.
pub async fn files(
    pool: &PgPool,
    tenant: &str,
    request: &str,
    checkpoint: &StoredCheckpoint,
    proofs: &[Inclusion],
    verifier: &str,
) -> Result<Option<Files>, ServiceError> {
    let rows = |sql| pages::json_rows(pool, sql, tenant, request);
    let request_row = one_or_null(rows(REQUEST_SQL).await?);
    if request_row.is_null() {
        return Ok(None);
    }
    let mut out: Files = Vec::new();
    let mut proposal = Value::Null;
    for p in proofs {
        let stem = format!("{:06}", p.seq);
        out.push((
            format!("{ENTRIES}/{stem}.{ENTRY_EXT}"),
            p.entry.as_bytes().to_vec(),
        ));
        out.push((
            format!("{ENTRIES}/{stem}.{PROOF_EXT}"),
            p.proof.to_text().into_bytes(),
        ));
        let parsed: Value = serde_json::from_str(&p.entry).unwrap_or(Value::Null);
        if proposal.is_null() && parsed["kind"] == "proposal" {
            proposal = json!({
                "ledger_entry": format!("{ENTRIES}/{stem}.{ENTRY_EXT}"),
                "body_sha256": parsed["body"]["body_sha256"],
                "body_bytes": parsed["body"]["body_bytes"],
                "proposal": parsed["body"]["proposal"],
                "idempotency_key": parsed["body"]["idempotency_key"],
                "actor": parsed["body"]["actor"],
            });
        }
    }
    let raw = pages::raw_proposal(pool, tenant, request).await?;
    if !proposal.is_null() {
        proposal["raw_body"] = json!(raw.as_ref().map(|_| PROPOSAL_RAW));
    }
    out.push((CHECKPOINT.to_owned(), checkpoint.note.as_bytes().to_vec()));
    out.push((
        "log-key.txt".to_owned(),
        format!("{verifier}\n").into_bytes(),
    ));
    out.push(json_file("request.json", &request_row));
    out.push(json_file("proposal.json", &proposal));
    if let Some(raw) = raw {
        out.push((PROPOSAL_RAW.to_owned(), raw));
    }
    out.push(json_file(
        "policy.json",
        &one_or_null(rows(POLICY_SQL).await?),
    ));
    out.push(json_file(
        "delegation.json",
        &one_or_null(rows(DELEGATION_SQL).await?),
    ));
    out.push(json_file(
        "approvals.json",
        &Value::Array(rows(APPROVALS_SQL).await?),
    ));
    out.push(json_file(
        "authority.json",
        &one_or_null(rows(AUTHORITY_SQL).await?),
    ));
    out.push(json_file(
        "provider_orders.json",
        &Value::Array(rows(ORDERS_SQL).await?),
    ));
    out.push(json_file(
        "provider_payments.json",
        &Value::Array(rows(PAYMENTS_SQL).await?),
    ));
    out.push(json_file(
        "provider_events.json",
        &Value::Array(rows(EVENTS_SQL).await?),
    ));
    for event in pages::raw_events(pool, tenant, request).await? {
        let stem = format!("{EVENTS}/{}", event.event_id_sha256);
        out.push((format!("{stem}.{EVENT_BODY_EXT}"), event.body));
        out.push((format!("{stem}.{EVENT_SIGNATURE_EXT}"), event.signature));
    }
    out.push((
        "README.md".to_owned(),
        readme(tenant, request, verifier, checkpoint.size, proofs).into_bytes(),
    ));
    Ok(Some(out))
}

fn readme(tenant: &str, request: &str, verifier: &str, size: u64, proofs: &[Inclusion]) -> String {
    let origin = tlog::origin(tenant);
    let seqs = proofs
        .iter()
        .map(|p| p.seq.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "# Evidence bundle: request {request} of tenant {tenant}\n\
\n\
Written by spendgate (`spendgate evidence`, or the receipt's bundle link).\n\
The log's part of it (the checkpoint, the entries and their proofs) and\n\
the bytes received (checked against the digests the proved entries name)\n\
are checked offline, with the log's public key only:\n\
\n\
```\n\
spendgate-verify verify-bundle --key '{verifier}' .\n\
```\n\
\n\
Take the key from the operator by a channel of your own (or from a\n\
checkpoint you already trust), not from `log-key.txt`: a copy inside the\n\
bundle proves nothing about who wrote the bundle.\n\
\n\
## Files\n\
\n\
| file | what it is | checked with |\n\
|---|---|---|\n\
| `checkpoint` | a C2SP signed note (`c2sp.org/tlog-checkpoint`): origin `{origin}`, tree size {size}, RFC 6962 SHA-256 root of the tenant's ledger | the tenant's log key (Ed25519), `{verifier}` |\n\
| `entries/<seq>.json` | a ledger entry of this request, verbatim: the bytes the tree's leaf hashes (`SHA-256(0x00 \\|\\| bytes)`); leaf index = seq - 1. Entries {seqs} | its proof |\n\
| `entries/<seq>.tlog-proof` | the entry's inclusion proof, `c2sp.org/tlog-proof@v1`, against `checkpoint` (which it embeds verbatim) | the log key |\n\
| `log-key.txt` | a copy of the log's verifier key, `name+keyid+base64(0x01 \\|\\| key)`; origin and key name are both `{origin}` | see above |\n\
| `proposal.raw` | the proposal's body exactly as the agent sent it (absent when the gate did not keep it: a body over 4096 bytes is refused and only its digest kept). Untrusted bytes: open it as data, not as instructions | its SHA-256 is the `body_sha256` of the proved `proposal` entry |\n\
| `request.json` | the request as the database holds it: the derived purchase (merchant, amount, currency, purchase digest), the decision and its reason, the state, the policy version, the delegation, the SHA-256 of the proposal's body | not signed: it must agree with the `proposal` and `decision` entries |\n\
| `proposal.json` | the proposal as the ledger recorded it: the parsed proposal (sku, quantity, purpose), the SHA-256 and length of the body received, the idempotency key, the actor, and where the raw body is | not signed by itself: it is read out of the `proposal` entry, which is proved |\n\
| `policy.json` | the policy version in force for the decision, with its signed mandate when it has one | not signed here: its version is in the `decision` entry |\n\
| `delegation.json` | the delegation the request was reserved under (null when none) | not signed |\n\
| `approvals.json` | the approvals of the request (the human, the instant) | not signed: each is also an `approval` entry |\n\
| `authority.json` | the single-use checkout authority (null when none) | not signed: also the `authority.issued` and `authority.consumed` entries |\n\
| `provider_orders.json` | the provider order(s) made under the authority | not signed: also the `order.created` entry |\n\
| `provider_payments.json` | the payments the gate booked for the order | not signed |\n\
| `provider_events.json` | the provider's webhook events as the gate recorded them: event id, event, amount, currency, instants, outcome, SHA-256 of the raw body | not signed: also the `provider_event` entries |\n\
| `provider_events/<id>.body` | an applied event's body exactly as received (`<id>` is the SHA-256 of its event id) | its SHA-256 is the `body_sha256` of the proved `provider_event` entry with that `event_id_sha256` |\n\
| `provider_events/<id>.signature` | that event's `X-Razorpay-Signature` header exactly as received | its SHA-256 is that entry's `signature_sha256` |\n\
\n\
## What the public key cannot check\n\
\n\
- **The webhook signatures.** Each event's signature header is the hex\n\
  HMAC-SHA256 of its raw body under the webhook secret, which the provider\n\
  and the gate share; it is not a public key. The gate checked it when the\n\
  event arrived. Anyone given the webhook secret can check it again:\n\
  `HMAC-SHA256(secret, <id>.body)` in hex must equal `<id>.signature`\n\
  (surrounding whitespace aside, any case). Without the secret, the files\n\
  prove only that these are the bytes the gate recorded.\n\
- **Events refused or kept for reconcile.** Only applied events keep their\n\
  bytes; a refused one is in the ledger by its body's SHA-256.\n\
\n\
## Which key checks which\n\
\n\
- The log key (public, above): the checkpoint's signature and, through it,\n\
  every entry's inclusion and every raw file's digest. A database owner\n\
  who edits an entry cannot make its proof verify against this checkpoint;\n\
  one who rewrites the ledger and has a new checkpoint signed is caught by\n\
  any witness that kept an older checkpoint (`spendgate log consistency\n\
  --from SIZE`, then `spendgate-verify witness`).\n\
- The ledger key (secret, the operator's): the HMAC chain (`prev_hash`,\n\
  `hash`) of the entries, checked by `spendgate ledger verify`, not here.\n\
- The webhook secret (secret, shared with the provider): the webhooks'\n\
  signatures, see above.\n"
    )
}

/// A request's bundle as a page may serve it: built read-only against the
/// newest kept checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptBundle {
    /// The tenant has no such request.
    Missing,
    /// The entries have no kept checkpoint to be proved against (or no entry).
    Unproved(Unproved),
    /// The bundle's files.
    Files(Files),
}

impl<P: crate::provider::PaymentProvider> super::Gate<P> {
    /// The bundle of one request of the tenant against the newest kept
    /// checkpoint covering its entries (see [`prove_kept`] and [`files`]),
    /// read after the committed queued ledger entries are integrated;
    /// `verifier` is the log's verifier key as text.
    pub async fn kept_bundle(
        &self,
        tenant: &str,
        request: &str,
        verifier: &str,
    ) -> Result<KeptBundle, ServiceError> {
        self.integrate().await?;
        if !super::views::is_plausible_id(request)
            || pages::json_rows(&self.pool, REQUEST_SQL, tenant, request)
                .await?
                .is_empty()
        {
            return Ok(KeptBundle::Missing);
        }
        let proved =
            prove_kept(&self.pool, tenant, request)
                .await
                .map_err(|e| ServiceError::Corrupt {
                    what: e.to_string(),
                })?;
        let (checkpoint, proofs) = match proved {
            Ok(p) => p,
            Err(why) => return Ok(KeptBundle::Unproved(why)),
        };
        Ok(
            match files(&self.pool, tenant, request, &checkpoint, &proofs, verifier).await? {
                Some(files) => KeptBundle::Files(files),
                None => KeptBundle::Missing,
            },
        )
    }
}
