//! `spendgate evidence REQUEST --tenant T --out DIR`: one request's
//! evidence bundle.
//!
//! Guarantees:
//! - The bundle holds what the gate keeps of the request: the request row
//!   (the derived purchase, the decision and its reason, the state), the
//!   proposal as the ledger recorded it, the policy version in force, the
//!   delegation it was reserved under, the approvals, the checkout
//!   authority, the provider orders, payments and events, and every ledger
//!   entry that names the request (as its subject or as `body.request`),
//!   each verbatim with its `c2sp.org/tlog-proof@v1` proof against ONE
//!   signed checkpoint, written as `checkpoint` (the newest kept checkpoint
//!   covering them, or one signed now). `README.md` inside says what each
//!   file is and which key checks which.
//! - What the gate does not keep is not invented: the proposal's raw bytes
//!   (only their SHA-256 and the parsed proposal are kept) and the provider
//!   events' raw bodies and signature headers (only the body's SHA-256 is
//!   kept) are absent, and the README says so.
//! - The folder is created; an existing folder that is not empty is refused
//!   (exit 2), so a bundle is never a mix of two. An unknown tenant or
//!   request cannot run (exit 2); a ledger that no longer has the root of a
//!   kept checkpoint, or misses an entry, is a failed check (exit 1).
//! - The log's part (checkpoint, entries, proofs) is checked offline by
//!   `spendgate-verify verify-bundle DIR --key <the tenant's log key>`.

use std::path::Path;
use std::process::ExitCode;

use gate::service::pages::{
    self, APPROVALS_SQL, AUTHORITY_SQL, DELEGATION_SQL, EVENTS_SQL, ORDERS_SQL, PAYMENTS_SQL,
    POLICY_SQL, REQUEST_SQL,
};
use gate::service::tlog;
use serde_json::Value;
use spendgate_verify::bundle_dir::{CHECKPOINT, ENTRIES, ENTRY_EXT, PROOF_EXT};
use sqlx::PgPool;

use super::log::{failure, known_tenant, write_file};
use crate::cli::EvidenceArgs;
use crate::config::Config;
use crate::error::Failure;

/// The rows of one of the gate's record queries ([`pages`]) for `request`.
async fn rows(
    pool: &PgPool,
    sql: &'static str,
    tenant: &str,
    request: &str,
) -> Result<Vec<Value>, Failure> {
    pages::json_rows(pool, sql, tenant, request)
        .await
        .map_err(|e| Failure::database("reading the request's records", e))
}

fn json_file(dir: &Path, name: &str, value: &Value) -> Result<(), Failure> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::Other(format!("writing {name}: {e}")))?;
    text.push('\n');
    write_file(&dir.join(name), text.as_bytes())
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

pub async fn run(config: &Config, args: &EvidenceArgs) -> Result<ExitCode, Failure> {
    let key = super::log_key(config)?;
    let pool = crate::connect::app_pool(config, 1).await?;
    let result = write_bundle(&pool, &key, args).await;
    pool.close().await;
    result
}

async fn write_bundle(
    pool: &PgPool,
    key: &tlog::LogKey,
    args: &EvidenceArgs,
) -> Result<ExitCode, Failure> {
    let (tenant, request, dir) = (args.tenant.as_str(), args.request.as_str(), &args.out);
    known_tenant(pool, tenant).await?;
    let request_row = one_or_null(rows(pool, REQUEST_SQL, tenant, request).await?);
    if request_row.is_null() {
        return Err(Failure::Input(format!(
            "tenant {tenant:?} has no request {request:?}"
        )));
    }
    let seqs = tlog::request_entry_seqs(pool, tenant, request)
        .await
        .map_err(failure)?;
    let (checkpoint, proofs) = tlog::prove_inclusion(pool, key, tenant, &seqs, chrono::Utc::now())
        .await
        .map_err(failure)?;

    if dir.exists() {
        let mut listing = std::fs::read_dir(dir)
            .map_err(|e| Failure::Input(format!("cannot read {}: {e}", dir.display())))?;
        if listing.next().is_some() {
            return Err(Failure::Input(format!(
                "{} is not empty: a bundle is written to a new or empty folder",
                dir.display()
            )));
        }
    }
    let entries_dir = dir.join(ENTRIES);
    std::fs::create_dir_all(&entries_dir)
        .map_err(|e| Failure::Other(format!("cannot create {}: {e}", entries_dir.display())))?;

    let mut proposal = Value::Null;
    for p in &proofs {
        let stem = format!("{:06}", p.seq);
        write_file(
            &entries_dir.join(format!("{stem}.{ENTRY_EXT}")),
            p.entry.as_bytes(),
        )?;
        write_file(
            &entries_dir.join(format!("{stem}.{PROOF_EXT}")),
            p.proof.to_text().as_bytes(),
        )?;
        let parsed: Value = serde_json::from_str(&p.entry).unwrap_or(Value::Null);
        if proposal.is_null() && parsed["kind"] == "proposal" {
            proposal = serde_json::json!({
                "ledger_entry": format!("{ENTRIES}/{stem}.{ENTRY_EXT}"),
                "raw_body": null,
                "raw_body_stored": false,
                "body_sha256": parsed["body"]["body_sha256"],
                "body_bytes": parsed["body"]["body_bytes"],
                "proposal": parsed["body"]["proposal"],
                "idempotency_key": parsed["body"]["idempotency_key"],
                "actor": parsed["body"]["actor"],
            });
        }
    }
    write_file(&dir.join(CHECKPOINT), checkpoint.note.as_bytes())?;
    let verifier = key.verifier(tenant).map_err(failure)?.to_text();
    write_file(&dir.join("log-key.txt"), format!("{verifier}\n").as_bytes())?;

    json_file(dir, "request.json", &request_row)?;
    json_file(dir, "proposal.json", &proposal)?;
    json_file(
        dir,
        "policy.json",
        &one_or_null(rows(pool, POLICY_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "delegation.json",
        &one_or_null(rows(pool, DELEGATION_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "approvals.json",
        &Value::Array(rows(pool, APPROVALS_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "authority.json",
        &one_or_null(rows(pool, AUTHORITY_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "provider_orders.json",
        &Value::Array(rows(pool, ORDERS_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "provider_payments.json",
        &Value::Array(rows(pool, PAYMENTS_SQL, tenant, request).await?),
    )?;
    json_file(
        dir,
        "provider_events.json",
        &Value::Array(rows(pool, EVENTS_SQL, tenant, request).await?),
    )?;
    let readme = readme(tenant, request, &verifier, checkpoint.size, &proofs);
    write_file(&dir.join("README.md"), readme.as_bytes())?;
    println!(
        "wrote {}: request {request}, {} ledger entries proved against {} size {}",
        dir.display(),
        proofs.len(),
        tlog::origin(tenant),
        checkpoint.size
    );
    Ok(ExitCode::SUCCESS)
}

fn readme(
    tenant: &str,
    request: &str,
    verifier: &str,
    size: u64,
    proofs: &[tlog::Inclusion],
) -> String {
    let origin = tlog::origin(tenant);
    let seqs = proofs
        .iter()
        .map(|p| p.seq.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "# Evidence bundle: request {request} of tenant {tenant}\n\
\n\
Written by `spendgate evidence`. The log's part of it (the checkpoint, the\n\
entries and their proofs) is checked offline, with the log's public key\n\
only:\n\
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
| `request.json` | the request as the database holds it: the derived purchase (merchant, amount, currency, purchase digest), the decision and its reason, the state, the policy version, the delegation, the SHA-256 of the proposal's body | not signed: it must agree with the `proposal` and `decision` entries |\n\
| `proposal.json` | the proposal as the ledger recorded it: the parsed proposal (sku, quantity, purpose), the SHA-256 and length of the body received, the idempotency key and the actor | not signed by itself: it is read out of the `proposal` entry, which is proved |\n\
| `policy.json` | the policy version in force for the decision | not signed: its version is in the `decision` entry |\n\
| `delegation.json` | the delegation the request was reserved under (null when none) | not signed |\n\
| `approvals.json` | the approvals of the request (the human, the instant) | not signed: each is also an `approval` entry |\n\
| `authority.json` | the single-use checkout authority (null when none) | not signed: also the `authority.issued` and `authority.consumed` entries |\n\
| `provider_orders.json` | the provider order(s) made under the authority | not signed: also the `order.created` entry |\n\
| `provider_payments.json` | the payments the gate booked for the order | not signed |\n\
| `provider_events.json` | the provider's webhook events as the gate recorded them: event id, event, amount, currency, instants, outcome, SHA-256 of the raw body | not signed: also the `provider_event` entries |\n\
\n\
## What is not in this bundle, and why\n\
\n\
- **The proposal's raw bytes.** The gate keeps only their SHA-256\n\
  (`body_sha256`), their length and the parsed proposal; whoever holds the\n\
  bytes the agent sent can check them against that digest.\n\
- **The provider events' raw bodies and signature headers.** The gate\n\
  checks each webhook's HMAC-SHA256 signature (`X-Razorpay-Signature`) over\n\
  the raw body when it arrives, then keeps only the body's SHA-256. The\n\
  signature could be checked again only by someone given the webhook secret\n\
  (the provider and the gate share it; it is not a public key), and only\n\
  with the raw body, which is not kept.\n\
- **A signature over the mandate.** The policy and the delegation are the\n\
  gate's own records; no signer outside the gate signed them.\n\
\n\
## Which key checks which\n\
\n\
- The log key (public, above): the checkpoint's signature and, through it,\n\
  every entry's inclusion. A database owner who edits an entry cannot make\n\
  its proof verify against this checkpoint; one who rewrites the ledger and\n\
  has a new checkpoint signed is caught by any witness that kept an older\n\
  checkpoint (`spendgate log consistency --from SIZE`, then\n\
  `spendgate-verify witness`).\n\
- The ledger key (secret, the operator's): the HMAC chain (`prev_hash`,\n\
  `hash`) of the entries, checked by `spendgate ledger verify`, not here.\n\
- The webhook secret (secret, shared with the provider): the webhooks'\n\
  signatures, see above.\n"
    )
}
