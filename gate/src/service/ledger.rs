//! The ledger: append-only, one keyed hash chain per tenant.
//!
//! Guarantees:
//! - Every tenant has its own chain: entries `(tenant, 1), (tenant, 2), ...`
//!   and one head row holding the number and hash of the tenant's latest
//!   entry (the database creates it with the tenant). There is no global
//!   head and no global sequence, so tenants never queue on each other.
//! - Each entry holds the previous entry's hash and its own,
//!   `hash = HMAC-SHA256(ledger key, prev_hash || entry)`, where `entry` is
//!   the canonical JSON stored verbatim (it names the tenant, the number and
//!   the instant, so an entry cannot be moved, renumbered or re-dated). The
//!   [`LedgerKey`] is held by the gate and never stored in the database: the
//!   database's owner can edit rows, but cannot compute a hash that verifies.
//! - [`append`] queues an operation's entries in its own transaction
//!   (`ledger_queue`), each with a random id and the gate's MAC over
//!   tenant, id, kind, instant, subject and body; it reads and locks no
//!   head, so a tenant's operations do not serialize on its chain. The
//!   sequencer, [`integrate`], numbers and chains the committed queued
//!   entries after the head, writes them and moves the head in one
//!   transaction under the head's lock, and deletes them from the queue:
//!   an entry is in the chain exactly once when the operation it records
//!   committed and an integration ran since, and a crash in between loses
//!   nothing (the entries wait in the queue). It chains in no row whose MAC
//!   fails or whose id is already in the ledger (a database login's forgery
//!   or copy), and names each. An entry with no tenant is NOT written: a call naming an
//!   unknown tenant has no chain to record it under, so it writes nothing
//!   (the spec's one exception to "every refusal is on the ledger"). The
//!   database refuses UPDATE, DELETE and TRUNCATE of entries
//!   (`ledger_append_only`), an entry of a chain without a head
//!   (`fk_ledger_entry_head`, `fk_ledger_queue_head`), and any change to a
//!   queued row but its deletion once integrated
//!   (`ledger_queue_integrated_only`).
//! - [`verify`] integrates first, names every queued row left out, then
//!   walks each chain in order, with the key, and names the FIRST
//!   broken entry of each (tenant, number, problem): a missing number, a
//!   `prev_hash` that is not the previous entry's hash, a hash that the key
//!   does not give for the stored entry (a forged or edited entry, even one
//!   re-hashed with plain SHA-256), columns that disagree with the hashed
//!   entry, or a head row that is missing, behind, ahead of, or at another
//!   hash than the last entry. Given an [`Anchor`] (heads printed earlier and
//!   kept outside the database) it also names a chain cut below its anchored
//!   head, or rewritten at it: the one thing a keyed chain cannot show by
//!   itself, since deleting a tail and moving the head back needs no key.
//!   Each chain is read in pages inside one read-only snapshot, so a long
//!   ledger is never loaded whole and concurrent appends never look like
//!   breaks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::postgres::PgArguments;
use sqlx::{PgConnection, PgPool, Postgres};

use super::error::{Ctx, ServiceError};
use super::lock::{LedgerHeadKey, lock_all};
use super::rows::{AuthorityRow, LedgerHeadRow, RequestRow};

/// The hash before the first entry of every chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const PAGE: i64 = 1000;
/// The domain the tests' ledger key is derived under (see [`LedgerKey::derived_from_secret`]).
#[cfg(any(test, feature = "test-support"))]
const KEY_DOMAIN: &[u8] = b"spendgate/ledger-key/v1";
/// SHA-256's block size: HMAC's key is padded (or hashed) to this.
const BLOCK: usize = 64;

/// The secret the chain hashes are keyed with. The gate holds it; the
/// database never sees it. Its `Debug` never shows it.
#[derive(Clone)]
pub struct LedgerKey {
    mac: Hmac<Sha256>,
    /// Keys [`row_mac`]: `HMAC-SHA256(ledger key, ROW_MAC_DOMAIN)`, so no
    /// row MAC is ever a chain hash.
    row: Hmac<Sha256>,
}

/// A ledger key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerKeyError {
    #[error(
        "a ledger key must be at least {min} bytes; this one is {len} (use 32 random bytes)",
        min = LedgerKey::MIN_LEN
    )]
    TooShort { len: usize },
}

/// HMAC-SHA256 keyed with `key`, built the way RFC 2104 builds it (a key
/// longer than a block is hashed, a shorter one is zero-padded), so it
/// cannot fail for any key length.
fn hmac_with(key: &[u8]) -> Hmac<Sha256> {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    <Hmac<Sha256> as KeyInit>::new(&block.into())
}

impl LedgerKey {
    /// The shortest key accepted.
    pub const MIN_LEN: usize = 32;

    /// A key of the given bytes (at least [`Self::MIN_LEN`]).
    pub fn new(bytes: &[u8]) -> Result<Self, LedgerKeyError> {
        if bytes.len() < Self::MIN_LEN {
            return Err(LedgerKeyError::TooShort { len: bytes.len() });
        }
        let mac = hmac_with(bytes);
        Ok(LedgerKey {
            row: row_key(&mac),
            mac,
        })
    }

    /// The default key: `HMAC-SHA256(secret, "spendgate/ledger-key/v1")`.
    ///
    /// The trade-off: one secret to keep instead of two, and the database
    /// still cannot forge the ledger. But whoever holds the webhook secret
    /// (which the payment provider also holds) can then compute ledger hashes
    /// too, and rotating that secret changes the key, so the old chains
    /// verify only under the old secret. Give the ledger its own key
    /// ([`super::Gate::with_ledger_key`], `SPENDGATE_LEDGER_KEY`) when either
    /// matters. The domain string keeps the two uses apart: the ledger key is
    /// never the webhook secret itself, and no webhook signature or authority
    /// id is a ledger hash. Only for tests and the corpus: a served gate is
    /// given a key of its own.
    #[cfg(any(test, feature = "test-support"))]
    pub fn derived_from_secret(secret: &[u8]) -> Self {
        let mut mac = hmac_with(secret);
        mac.update(KEY_DOMAIN);
        let mac = hmac_with(&mac.finalize().into_bytes());
        LedgerKey {
            row: row_key(&mac),
            mac,
        }
    }
}

/// The domain of the key [`row_mac`] is computed with.
const ROW_MAC_DOMAIN: &[u8] = b"spendgate/row-mac/v1";

/// The row MAC key of a ledger key: `HMAC-SHA256(ledger key, ROW_MAC_DOMAIN)`.
fn row_key(ledger: &Hmac<Sha256>) -> Hmac<Sha256> {
    let mut mac = ledger.clone();
    mac.update(ROW_MAC_DOMAIN);
    hmac_with(&mac.finalize().into_bytes())
}

/// The MAC of one row that authorizes money (an API key, a checkout
/// authority), keyed with the ledger key's row key: `HMAC-SHA256(row key,
/// table || field ...)`, each part preceded by its length (8 bytes, big
/// endian), so no two lists of fields share an input. Lower-case hex.
pub fn row_mac(key: &LedgerKey, table: &str, fields: &[&str]) -> String {
    let mut mac = key.row.clone();
    for part in std::iter::once(table).chain(fields.iter().copied()) {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    hex::encode(mac.finalize().into_bytes())
}

/// The scope of the row-security token that opens every tenant's rows: the
/// gate's paths that must find a tenant first (a key by its digest, an
/// event by its order, reconcile, the audit).
pub const EVERY_TENANT: &str = "*";

/// The domain of the row-security tokens.
const ROW_TOKEN_DOMAIN: &str = "spendgate/row-security/v1";

/// The token that opens `scope`'s rows (a tenant's id, or [`EVERY_TENANT`])
/// to the runtime role under row-level security
/// (`migrations/*_row_security.sql`): [`row_mac`] over the domain
/// `spendgate/row-security/v1` and `scope`. Only the holder of the ledger
/// key can compute it; the database keeps only its SHA-256
/// ([`row_token_digest`]).
pub fn row_token(key: &LedgerKey, scope: &str) -> String {
    row_mac(key, ROW_TOKEN_DOMAIN, &[scope])
}

/// What the database keeps of a row-security token: its SHA-256, lower-case
/// hex (the digest `spendgate_tenant()` compares).
pub fn row_token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether `stored` is the MAC [`row_mac`] gives for the row, compared in
/// constant time; a missing MAC verifies as nothing.
pub fn row_mac_holds(key: &LedgerKey, table: &str, fields: &[&str], stored: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    let Some(stored) = stored else {
        return false;
    };
    let expected = row_mac(key, table, fields);
    expected.len() == stored.len() && bool::from(expected.as_bytes().ct_eq(stored.as_bytes()))
}

/// The terms of a checkout authority its MAC covers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuthorityTerms<'a> {
    pub tenant: &'a str,
    pub id: &'a str,
    pub request: &'a str,
    pub digest: &'a str,
    pub amount_paise: i64,
    pub currency: &'a str,
    pub merchant: &'a str,
    pub policy_version: i32,
    pub expires_at: DateTime<Utc>,
}

impl AuthorityTerms<'_> {
    fn fields(&self) -> [String; 9] {
        [
            self.tenant.to_owned(),
            self.id.to_owned(),
            self.request.to_owned(),
            self.digest.to_owned(),
            self.amount_paise.to_string(),
            self.currency.to_owned(),
            self.merchant.to_owned(),
            self.policy_version.to_string(),
            self.expires_at.timestamp_micros().to_string(),
        ]
    }

    /// The MAC the gate stores with the authority.
    pub fn mac(&self, key: &LedgerKey) -> String {
        row_mac(key, "checkout_authorities", &as_strs(&self.fields()))
    }

    /// Whether `stored` is this authority's MAC.
    pub fn verifies(&self, key: &LedgerKey, stored: Option<&str>) -> bool {
        row_mac_holds(
            key,
            "checkout_authorities",
            &as_strs(&self.fields()),
            stored,
        )
    }
}

impl AuthorityRow {
    /// Whether the stored MAC is the one `key` gives for the row's terms:
    /// an authority whose terms a database login edited does not verify.
    pub(crate) fn mac_holds(&self, key: &LedgerKey) -> bool {
        AuthorityTerms {
            tenant: &self.tenant_id,
            id: &self.id,
            request: &self.request_id,
            digest: &self.purchase_digest,
            amount_paise: self.amount_paise,
            currency: &self.currency,
            merchant: &self.merchant_id,
            policy_version: self.policy_version,
            expires_at: self.expires_at,
        }
        .verifies(key, self.row_mac.as_deref())
    }
}

/// An API key row's MAC fields, in their one order: `kind` is text, so any
/// kind of actor is covered.
pub fn api_key_mac_fields(
    id: &str,
    tenant: &str,
    kind: &str,
    actor: &str,
    digest: &str,
) -> [String; 5] {
    [
        id.to_owned(),
        tenant.to_owned(),
        kind.to_owned(),
        actor.to_owned(),
        digest.to_owned(),
    ]
}

/// A catalog row's MAC fields, in their one order: the tenant and every
/// column the derivation of a purchase reads (the description decides
/// nothing and is not covered).
pub fn catalog_item_mac_fields(tenant: &str, item: &crate::catalog::CatalogItem) -> [String; 8] {
    [
        tenant.to_owned(),
        item.sku.clone(),
        item.merchant.clone(),
        item.price_paise.to_string(),
        item.currency.clone(),
        item.category.clone(),
        item.max_quantity.to_string(),
        item.available.to_string(),
    ]
}

/// The MAC the gate stores with a catalog row of `tenant`.
pub fn catalog_item_mac(
    key: &LedgerKey,
    tenant: &str,
    item: &crate::catalog::CatalogItem,
) -> String {
    row_mac(
        key,
        "catalog_items",
        &as_strs(&catalog_item_mac_fields(tenant, item)),
    )
}

/// Whether `stored` is the MAC of `tenant`'s catalog row `item`: a row a
/// database login wrote or edited does not verify.
pub fn catalog_item_mac_holds(
    key: &LedgerKey,
    tenant: &str,
    item: &crate::catalog::CatalogItem,
    stored: Option<&str>,
) -> bool {
    row_mac_holds(
        key,
        "catalog_items",
        &as_strs(&catalog_item_mac_fields(tenant, item)),
        stored,
    )
}

/// The standing of a request the gate authorized (at birth or at approval):
/// the only standing checkout and pay accept.
pub const STANDING_ALLOWED: &str = "allow";

/// The standing of a request whose first decision asked for a human: the
/// only standing approval accepts.
pub const STANDING_AWAITING: &str = "step_up";

/// The terms of a payment request its MAC covers: what its decision
/// derived, under which policy version, and the gate's standing of it
/// ([`STANDING_ALLOWED`] once authorized; else its first decision's kind).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestTerms<'a> {
    pub tenant: &'a str,
    pub id: &'a str,
    pub agent: &'a str,
    pub sku: Option<&'a str>,
    pub quantity: Option<i32>,
    pub merchant: Option<&'a str>,
    pub amount_paise: Option<i64>,
    pub currency: Option<&'a str>,
    pub digest: Option<&'a str>,
    pub policy_version: Option<i32>,
    pub standing: &'a str,
}

/// A column that may be NULL, as a MAC field: `-` for NULL, `+` and the
/// value otherwise, so no value reads as NULL.
fn nullable(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("+{}", v.to_string()))
}

impl RequestTerms<'_> {
    fn fields(&self) -> [String; 11] {
        [
            self.tenant.to_owned(),
            self.id.to_owned(),
            self.agent.to_owned(),
            nullable(self.sku),
            nullable(self.quantity),
            nullable(self.merchant),
            nullable(self.amount_paise),
            nullable(self.currency),
            nullable(self.digest),
            nullable(self.policy_version),
            self.standing.to_owned(),
        ]
    }

    /// The MAC the gate stores with the request.
    pub fn mac(&self, key: &LedgerKey) -> String {
        row_mac(key, "payment_requests", &as_strs(&self.fields()))
    }

    /// Whether `stored` is this request's MAC.
    pub fn verifies(&self, key: &LedgerKey, stored: Option<&str>) -> bool {
        row_mac_holds(key, "payment_requests", &as_strs(&self.fields()), stored)
    }
}

impl RequestRow {
    /// The row's terms, under `standing`.
    pub(crate) fn terms<'a>(&'a self, standing: &'a str) -> RequestTerms<'a> {
        RequestTerms {
            tenant: &self.tenant_id,
            id: &self.id,
            agent: &self.agent_id,
            sku: self.sku.as_deref(),
            quantity: self.quantity,
            merchant: self.merchant_id.as_deref(),
            amount_paise: self.amount_paise,
            currency: self.currency.as_deref(),
            digest: self.purchase_digest.as_deref(),
            policy_version: self.policy_version,
            standing,
        }
    }

    /// Whether the stored MAC is the one `key` gives for the row's terms
    /// under `standing`: a request a database login inserted, edited or
    /// moved to a state the gate did not give it does not verify.
    pub(crate) fn mac_holds(&self, key: &LedgerKey, standing: &str) -> bool {
        self.terms(standing).verifies(key, self.row_mac.as_deref())
    }
}

/// `fields` as the `&str`s [`row_mac`] takes.
pub(crate) fn as_strs<const N: usize>(fields: &[String; N]) -> [&str; N] {
    std::array::from_fn(|i| fields[i].as_str())
}

impl fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LedgerKey(..)")
    }
}

/// One thing that happened, before it is numbered and hashed.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The chain it belongs to; `None` (no known tenant) is not written.
    pub tenant: Option<String>,
    pub kind: &'static str,
    pub subject: String,
    pub body: Value,
}

impl Entry {
    pub fn new(
        tenant: Option<&str>,
        kind: &'static str,
        subject: impl Into<String>,
        body: Value,
    ) -> Self {
        Entry {
            tenant: tenant.map(str::to_owned),
            kind,
            subject: subject.into(),
            body,
        }
    }
}

/// The hashed form of an entry; its compact JSON is what `entry` stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Canonical {
    seq: i64,
    at: String,
    tenant: String,
    kind: String,
    subject: String,
    body: Value,
}

/// `HMAC-SHA256(key, prev_hash || entry)`, lower-case hex. `prev_hash` is
/// always 64 hex characters, so the concatenation is unambiguous.
pub fn chain_hash(key: &LedgerKey, prev_hash: &str, entry: &str) -> String {
    let mut mac = key.mac.clone();
    mac.update(prev_hash.as_bytes());
    mac.update(entry.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The instant as stored: microsecond precision, like `timestamptz`.
pub(crate) fn stored_instant(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at)
}

fn instant_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Queues `entries` at `at`, each for its tenant's chain, with the gate's
/// MAC under `key`: one INSERT per tenant into `ledger_queue`, no head read
/// or lock. The sequencer ([`integrate`]) numbers and chains them later.
///
/// Entries without a tenant are skipped: there is no chain to record them
/// under (a call naming an unknown tenant writes nothing; its callers pass
/// `None` for it). A tenant without a head row (gone, or never a tenant) is
/// [`ServiceError::LedgerHeadMissing`] (`fk_ledger_queue_head`): its chain
/// cannot be continued, and the caller's transaction, this append included,
/// is rolled back.
pub(crate) async fn append(
    conn: &mut PgConnection,
    key: &LedgerKey,
    at: DateTime<Utc>,
    entries: Vec<Entry>,
) -> Result<(), ServiceError> {
    let mut chains: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for e in entries {
        if let Some(tenant) = e.tenant.clone() {
            chains.entry(tenant).or_default().push(e);
        }
    }
    for (tenant, entries) in chains {
        let queued = Queued::new(key, &tenant, at, &entries)?;
        let sql = format!("WITH {} SELECT count(*) FROM queued", Queued::CTES);
        queued
            .bind(sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql)))
            .fetch_one(&mut *conn)
            .await
            .ctx("queueing ledger entries")?;
    }
    Ok(())
}

/// One tenant's entries of one operation, each with a random id and the
/// gate's MAC, ready to go into `ledger_queue`: by [`append`], or carried
/// by another statement of the operation (`requests::insert`) as
/// [`Queued::CTES`], which saves a round trip.
#[derive(Debug)]
pub(crate) struct Queued {
    tenant: String,
    at: DateTime<Utc>,
    ids: Vec<String>,
    kinds: Vec<String>,
    subjects: Vec<String>,
    bodies: Vec<String>,
    macs: Vec<String>,
}

impl Queued {
    /// One common table expression, `queued`, binding `$1` to `$7`: it
    /// inserts the entries into the queue in their order.
    pub const CTES: &'static str = "queued AS ( \
             INSERT INTO ledger_queue (tenant_id, entry_id, ord, kind, at, subject, body, row_mac) \
             SELECT $1, u.id, u.n, u.kind, $2, u.subject, u.body, u.mac \
             FROM UNNEST($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) \
               WITH ORDINALITY AS u(id, kind, subject, body, mac, n) \
             RETURNING 1)";
    /// How many parameters [`Queued::CTES`] binds: a carrying statement's
    /// own are numbered after them.
    pub const PARAMS: usize = 7;

    /// `entries` (all of `tenant`'s) at `at`, each given a fresh random id
    /// and its MAC.
    pub fn new(
        key: &LedgerKey,
        tenant: &str,
        at: DateTime<Utc>,
        entries: &[Entry],
    ) -> Result<Self, ServiceError> {
        let at = stored_instant(at);
        let mut queued = Queued {
            tenant: tenant.to_owned(),
            at,
            ids: Vec::with_capacity(entries.len()),
            kinds: Vec::with_capacity(entries.len()),
            subjects: Vec::with_capacity(entries.len()),
            bodies: Vec::with_capacity(entries.len()),
            macs: Vec::with_capacity(entries.len()),
        };
        for e in entries {
            let mut bits = [0u8; 16];
            getrandom::fill(&mut bits).map_err(ServiceError::Randomness)?;
            let id = hex::encode(bits);
            let corrupt = |e: serde_json::Error| ServiceError::Corrupt {
                what: format!("a ledger entry does not serialize: {e}"),
            };
            // Both as JSON text: a subject may hold any character, NUL
            // included, which a text column cannot.
            let subject = serde_json::to_string(&e.subject).map_err(corrupt)?;
            let body = serde_json::to_string(&e.body).map_err(corrupt)?;
            let mac = queue_mac(key, tenant, &id, e.kind, at, &subject, &body);
            queued.ids.push(id);
            queued.kinds.push(e.kind.to_owned());
            queued.subjects.push(subject);
            queued.bodies.push(body);
            queued.macs.push(mac);
        }
        Ok(queued)
    }

    /// Binds [`Queued::CTES`]' parameters, `$1` to `$7`, to `query`.
    pub fn bind<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, Postgres, O, PgArguments>,
    ) -> sqlx::query::QueryAs<'q, Postgres, O, PgArguments> {
        query
            .bind(&self.tenant)
            .bind(self.at)
            .bind(&self.ids)
            .bind(&self.kinds)
            .bind(&self.subjects)
            .bind(&self.bodies)
            .bind(&self.macs)
    }
}

/// The MAC of one queued entry: [`row_mac`] over `ledger_queue`, tenant,
/// id, kind, instant (microseconds), subject and body.
fn queue_mac(
    key: &LedgerKey,
    tenant: &str,
    id: &str,
    kind: &str,
    at: DateTime<Utc>,
    subject: &str,
    body: &str,
) -> String {
    row_mac(
        key,
        "ledger_queue",
        &[
            tenant,
            id,
            kind,
            &at.timestamp_micros().to_string(),
            subject,
            body,
        ],
    )
}

// ---- the sequencer -------------------------------------------------------------

/// A queued entry [`integrate`] did not chain in, and why. It stays in the
/// queue (the database lets nothing but its integration delete it) and is
/// named again by every integration and every [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueRefusal {
    pub tenant: String,
    pub entry_id: String,
    pub problem: String,
}

impl fmt::Display for QueueRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tenant {}'s queued ledger entry {} {}: it is not integrated",
            self.tenant, self.entry_id, self.problem
        )
    }
}

/// What one [`integrate`] did.
#[derive(Debug, Default)]
pub struct Integrated {
    /// Entries chained into the ledger.
    pub entries: u64,
    /// Queued rows left out.
    pub refused: Vec<QueueRefusal>,
    /// Tenants whose queue could not be integrated this time, and why.
    pub failed: Vec<(String, ServiceError)>,
}

#[derive(sqlx::FromRow)]
struct QueuedRow {
    tenant_id: String,
    entry_id: String,
    kind: String,
    at: DateTime<Utc>,
    subject: String,
    body: String,
    row_mac: String,
    integrated: bool,
}

/// The sequencer: integrates every tenant's committed queued entries into
/// its chain.
///
/// In one transaction for every tenant with queued rows: their heads are
/// locked (through [`super::lock`], in tenant order), the queue's committed
/// rows of those tenants read in the order they were queued, each whose MAC
/// holds and whose id is not in the ledger already is numbered after its
/// tenant's head, chained under `key` and written to `ledger_entries` with
/// its id, each head moved to its last, and those rows deleted from the
/// queue: a few statements whatever the number of tenants. Should that
/// transaction fail, each tenant is integrated again in one of its own, so a
/// fault of one tenant's rows holds back no other tenant. Rows committed
/// meanwhile are read by the next integration (nothing is skipped by a
/// watermark); two sequencers at once wait on the heads' locks, and the
/// second reads the queue after the first committed, so no entry is
/// integrated twice and no chain forks. A row whose MAC fails, whose id is
/// already integrated (a copy) or whose body is not JSON is left in the
/// queue and named ([`QueueRefusal`]).
pub async fn integrate(pool: &PgPool, key: &LedgerKey) -> Result<Integrated, ServiceError> {
    let tenants: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT tenant_id FROM ledger_queue ORDER BY tenant_id")
            .fetch_all(pool)
            .await
            .ctx("finding the tenants with queued ledger entries")?;
    let mut done = Integrated::default();
    if tenants.is_empty() {
        return Ok(done);
    }
    match integrate_tenants(pool, key, &tenants).await {
        Ok(batch) => done.add(batch),
        Err(e) if tenants.len() == 1 => done.failed.push((tenants[0].clone(), e)),
        Err(_) => {
            for tenant in tenants {
                match integrate_tenants(pool, key, std::slice::from_ref(&tenant)).await {
                    Ok(batch) => done.add(batch),
                    Err(e) => done.failed.push((tenant, e)),
                }
            }
        }
    }
    Ok(done)
}

impl Integrated {
    fn add(&mut self, batch: Integrated) {
        self.entries += batch.entries;
        self.refused.extend(batch.refused);
        self.failed.extend(batch.failed);
    }
}

/// One transaction of [`integrate`] over `tenants`.
async fn integrate_tenants(
    pool: &PgPool,
    key: &LedgerKey,
    tenants: &[String],
) -> Result<Integrated, ServiceError> {
    let mut done = Integrated::default();
    let mut tx = pool
        .begin()
        .await
        .ctx("integrating queued ledger entries")?;
    let heads: Vec<LedgerHeadRow> = lock_all(&mut tx, LedgerHeadKey { tenants })
        .await
        .ctx("locking the tenants' ledger heads")?;
    for tenant in tenants {
        if !heads.iter().any(|h| &h.tenant_id == tenant) {
            done.failed
                .push((tenant.clone(), ServiceError::LedgerHeadMissing));
        }
    }
    let locked: Vec<&str> = heads.iter().map(|h| h.tenant_id.as_str()).collect();
    let queued: Vec<QueuedRow> = sqlx::query_as(
        "SELECT q.tenant_id, q.entry_id, q.kind, q.at, q.subject, q.body, q.row_mac, \
                EXISTS (SELECT 1 FROM ledger_entries e \
                         WHERE e.tenant_id = q.tenant_id AND e.entry_id = q.entry_id) \
                  AS integrated \
           FROM ledger_queue q WHERE q.tenant_id = ANY($1) \
          ORDER BY q.tenant_id, q.queued_at, q.ord",
    )
    .bind(&locked)
    .fetch_all(&mut *tx)
    .await
    .ctx("reading the tenants' queued ledger entries")?;
    let mut chains: HashMap<&str, (i64, String)> = heads
        .iter()
        .map(|h| (h.tenant_id.as_str(), (h.seq, h.hash.clone())))
        .collect();
    let mut rows = Rows::default();
    for q in queued {
        let Some((seq, prev)) = chains.get_mut(q.tenant_id.as_str()) else {
            continue;
        };
        let problem = if !q.mac_holds(key) {
            Some("does not carry the gate's MAC (forged or changed)")
        } else if q.integrated {
            Some("is a copy of an entry already in the ledger")
        } else {
            None
        };
        let parsed = (
            serde_json::from_str::<String>(&q.subject),
            serde_json::from_str::<Value>(&q.body),
        );
        let (subject, body) = match (problem, parsed) {
            (None, (Ok(subject), Ok(body))) => (subject, body),
            (problem, _) => {
                done.refused.push(QueueRefusal {
                    tenant: q.tenant_id.clone(),
                    entry_id: q.entry_id,
                    problem: problem
                        .unwrap_or("has a subject or body that is not JSON")
                        .to_owned(),
                });
                continue;
            }
        };
        *seq += 1;
        let canonical = Canonical {
            seq: *seq,
            at: instant_text(q.at),
            tenant: q.tenant_id.clone(),
            kind: q.kind.clone(),
            subject,
            body,
        };
        let text = serde_json::to_string(&canonical).map_err(|e| ServiceError::Corrupt {
            what: format!("a ledger entry does not serialize: {e}"),
        })?;
        let hash = chain_hash(key, prev, &text);
        rows.tenants.push(q.tenant_id);
        rows.seqs.push(*seq);
        rows.kinds.push(q.kind);
        rows.ats.push(q.at);
        rows.texts.push(text);
        rows.prevs.push(std::mem::replace(prev, hash.clone()));
        rows.hashes.push(hash);
        rows.ids.push(q.entry_id);
    }
    if rows.ids.is_empty() {
        tx.rollback()
            .await
            .ctx("integrating queued ledger entries")?;
        return Ok(done);
    }
    let moved: Vec<(&str, i64, &str)> = heads
        .iter()
        .filter_map(|h| {
            let (seq, hash) = chains.get(h.tenant_id.as_str())?;
            (*seq != h.seq).then_some((h.tenant_id.as_str(), *seq, hash.as_str()))
        })
        .collect();
    // The heads move first: `fk_ledger_entry_head` is checked at the end of
    // the statement.
    sqlx::query(
        "WITH moved AS ( \
             UPDATE ledger_head h SET seq = m.seq, hash = m.hash \
               FROM UNNEST($1::text[], $2::bigint[], $3::text[]) AS m(tenant_id, seq, hash) \
              WHERE h.tenant_id = m.tenant_id) \
         INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash, entry_id) \
         SELECT u.tenant_id, u.seq, u.kind, u.at, u.entry, u.prev_hash, u.hash, u.id \
           FROM UNNEST($4::text[], $5::bigint[], $6::text[], $7::timestamptz[], $8::text[], \
                       $9::text[], $10::text[], $11::text[]) \
                AS u(tenant_id, seq, kind, at, entry, prev_hash, hash, id)",
    )
    .bind(moved.iter().map(|m| m.0).collect::<Vec<_>>())
    .bind(moved.iter().map(|m| m.1).collect::<Vec<_>>())
    .bind(moved.iter().map(|m| m.2).collect::<Vec<_>>())
    .bind(&rows.tenants)
    .bind(&rows.seqs)
    .bind(&rows.kinds)
    .bind(&rows.ats)
    .bind(&rows.texts)
    .bind(&rows.prevs)
    .bind(&rows.hashes)
    .bind(&rows.ids)
    .execute(&mut *tx)
    .await
    .ctx("writing integrated ledger entries")?;
    sqlx::query(
        "DELETE FROM ledger_queue q USING UNNEST($1::text[], $2::text[]) AS d(tenant_id, entry_id) \
          WHERE q.tenant_id = d.tenant_id AND q.entry_id = d.entry_id",
    )
    .bind(&rows.tenants)
    .bind(&rows.ids)
    .execute(&mut *tx)
    .await
    .ctx("removing integrated entries from the ledger queue")?;
    tx.commit()
        .await
        .ctx("committing integrated ledger entries")?;
    done.entries = rows.ids.len() as u64;
    Ok(done)
}

impl QueuedRow {
    fn mac_holds(&self, key: &LedgerKey) -> bool {
        let at = self.at.timestamp_micros().to_string();
        row_mac_holds(
            key,
            "ledger_queue",
            &[
                &self.tenant_id,
                &self.entry_id,
                &self.kind,
                &at,
                &self.subject,
                &self.body,
            ],
            Some(&self.row_mac),
        )
    }
}

/// The newly integrated entries, column by column, for one INSERT.
#[derive(Debug, Default)]
struct Rows {
    tenants: Vec<String>,
    seqs: Vec<i64>,
    kinds: Vec<String>,
    ats: Vec<DateTime<Utc>>,
    texts: Vec<String>,
    prevs: Vec<String>,
    hashes: Vec<String>,
    ids: Vec<String>,
}

async fn tenant_exists(conn: &mut PgConnection, tenant: &str) -> Result<bool, ServiceError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)")
        .bind(tenant)
        .fetch_one(conn)
        .await
        .ctx("looking up the tenant of a ledger entry")
}

// ---- anchors -----------------------------------------------------------------

/// What `harness ledger anchor` prints, for safekeeping outside the database.
pub const ANCHOR_FORMAT: &str = "spendgate-ledger-anchor/1";

/// One chain's head: its tenant, its last entry's number and hash (0 and
/// [`GENESIS_HASH`] for an empty chain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainHead {
    pub tenant: String,
    pub seq: i64,
    pub hash: String,
}

/// Every chain's head at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anchor {
    pub format: String,
    pub heads: Vec<ChainHead>,
}

/// An anchor file that cannot be used; each names the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("field `{field}`: {problem}")]
    Field { field: String, problem: String },
}

fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The object at `path`, refusing any field not in `allowed`.
fn object<'v>(
    value: &'v Value,
    path: &str,
    allowed: &[&str],
) -> Result<&'v serde_json::Map<String, Value>, AnchorError> {
    let field = |problem: String| AnchorError::Field {
        field: if path.is_empty() { "(top level)" } else { path }.to_owned(),
        problem,
    };
    let map = value
        .as_object()
        .ok_or_else(|| field(format!("is {value}, expected an object")))?;
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        let at = if path.is_empty() {
            unknown.clone()
        } else {
            format!("{path}.{unknown}")
        };
        return Err(AnchorError::Field {
            field: at,
            problem: format!(
                "is not a field of an anchor (expected {})",
                allowed.join(", ")
            ),
        });
    }
    Ok(map)
}

/// The field `name` of `map` (at `path`), which must be there.
fn member<'v>(
    map: &'v serde_json::Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<(&'v Value, String), AnchorError> {
    let at = if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    };
    match map.get(name) {
        Some(value) => Ok((value, at)),
        None => Err(AnchorError::Field {
            field: at,
            problem: "is missing".to_owned(),
        }),
    }
}

fn text_of(value: &Value, at: String) -> Result<String, AnchorError> {
    match value.as_str() {
        Some(text) => Ok(text.to_owned()),
        None => Err(AnchorError::Field {
            field: at,
            problem: format!("is {value}, expected a string"),
        }),
    }
}

impl Anchor {
    /// The anchor of these heads.
    pub fn of(heads: Vec<ChainHead>) -> Self {
        Anchor {
            format: ANCHOR_FORMAT.to_owned(),
            heads,
        }
    }

    /// Reads an anchor, refusing anything it cannot vouch for and naming the
    /// field at fault: a missing or unknown field, a value of the wrong type,
    /// another format, an empty or repeated tenant, a number that is negative
    /// or not a whole number, or a hash that is not 64 lower-case hex digits
    /// (or not [`GENESIS_HASH`] at number 0).
    pub fn parse(text: &str) -> Result<Self, AnchorError> {
        let value: Value = serde_json::from_str(text)?;
        let top = object(&value, "", &["format", "heads"])?;
        let (format, at) = member(top, "", "format")?;
        let format = text_of(format, at.clone())?;
        if format != ANCHOR_FORMAT {
            return Err(AnchorError::Field {
                field: at,
                problem: format!("is {format:?}, expected {ANCHOR_FORMAT:?}"),
            });
        }
        let (heads, at) = member(top, "", "heads")?;
        let heads = heads.as_array().ok_or_else(|| AnchorError::Field {
            field: at,
            problem: format!("is {heads}, expected a list"),
        })?;
        let mut parsed = Vec::with_capacity(heads.len());
        let mut seen = BTreeSet::new();
        for (index, head) in heads.iter().enumerate() {
            let path = format!("heads[{index}]");
            let head = object(head, &path, &["tenant", "seq", "hash"])?;
            let bad = |name: &str, problem: String| AnchorError::Field {
                field: format!("{path}.{name}"),
                problem,
            };
            let (tenant, at) = member(head, &path, "tenant")?;
            let tenant = text_of(tenant, at)?;
            if tenant.is_empty() {
                return Err(bad("tenant", "is empty".to_owned()));
            }
            if !seen.insert(tenant.clone()) {
                return Err(bad(
                    "tenant",
                    format!("tenant {tenant:?} is anchored twice"),
                ));
            }
            let (seq, _) = member(head, &path, "seq")?;
            let seq = match seq.as_i64() {
                Some(n) if n >= 0 => n,
                _ => {
                    return Err(bad(
                        "seq",
                        format!("is {seq}, expected a whole number from 0 up"),
                    ));
                }
            };
            let (hash, at) = member(head, &path, "hash")?;
            let hash = text_of(hash, at)?;
            if !is_hash(&hash) {
                return Err(bad(
                    "hash",
                    format!("{hash:?} is not 64 lower-case hex digits"),
                ));
            }
            if seq == 0 && hash != GENESIS_HASH {
                return Err(bad(
                    "hash",
                    "an empty chain (seq 0) has the genesis hash, all zeros".to_owned(),
                ));
            }
            parsed.push(ChainHead { tenant, seq, hash });
        }
        Ok(Anchor {
            format,
            heads: parsed,
        })
    }

    /// The anchor as `harness ledger anchor` prints it: JSON, one head a line.
    pub fn to_json(&self) -> String {
        let heads: Vec<String> = self
            .heads
            .iter()
            .map(|h| {
                format!(
                    "    {{\"tenant\": {}, \"seq\": {}, \"hash\": {}}}",
                    Value::from(h.tenant.as_str()),
                    h.seq,
                    Value::from(h.hash.as_str())
                )
            })
            .collect();
        let heads = if heads.is_empty() {
            "[]".to_owned()
        } else {
            format!("[\n{}\n  ]", heads.join(",\n"))
        };
        format!(
            "{{\n  \"format\": {},\n  \"heads\": {heads}\n}}",
            Value::from(self.format.as_str())
        )
    }

    /// The anchored head of `tenant`, if any.
    pub fn head_of(&self, tenant: &str) -> Option<&ChainHead> {
        self.heads.iter().find(|h| h.tenant == tenant)
    }
}

// ---- verification ------------------------------------------------------------

/// The first entry of a chain that does not hold, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerBreak {
    pub tenant: String,
    pub seq: i64,
    pub problem: String,
}

/// What [`verify`] found in one tenant's chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    pub tenant: String,
    /// Entries that verified, from the first up to the first break.
    pub entries: u64,
    /// The last entry that verified (0 and [`GENESIS_HASH`] before the first).
    pub last_seq: i64,
    pub last_hash: String,
    /// The first broken entry, or a head that does not point at the last entry.
    pub first_break: Option<LedgerBreak>,
    /// With an anchor: the chain was cut below, or rewritten at, its anchored head.
    pub anchor_break: Option<LedgerBreak>,
}

impl ChainReport {
    pub fn intact(&self) -> bool {
        self.first_break.is_none() && self.anchor_break.is_none()
    }

    /// The verified head, as an anchor records it.
    pub fn head(&self) -> ChainHead {
        ChainHead {
            tenant: self.tenant.clone(),
            seq: self.last_seq,
            hash: self.last_hash.clone(),
        }
    }
}

/// What [`verify`] found, chain by chain in tenant order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerReport {
    pub chains: Vec<ChainReport>,
    /// Entries that verified, over every chain.
    pub entries: u64,
    /// Queued rows the integration before the walk left out.
    pub queue: Vec<QueueRefusal>,
}

impl LedgerReport {
    pub fn intact(&self) -> bool {
        self.chains.iter().all(ChainReport::intact) && self.queue.is_empty()
    }

    /// Every break found: each chain's first break, then its anchor break.
    pub fn breaks(&self) -> impl Iterator<Item = &LedgerBreak> {
        self.chains
            .iter()
            .flat_map(|c| c.first_break.iter().chain(c.anchor_break.iter()))
    }

    /// The first break, in tenant order.
    pub fn first_break(&self) -> Option<&LedgerBreak> {
        self.breaks().next()
    }

    /// The chain of `tenant`, if it was verified.
    pub fn chain(&self, tenant: &str) -> Option<&ChainReport> {
        self.chains.iter().find(|c| c.tenant == tenant)
    }

    /// The verified heads, as an anchor.
    pub fn anchor(&self) -> Anchor {
        Anchor::of(self.chains.iter().map(ChainReport::head).collect())
    }
}

#[derive(sqlx::FromRow)]
struct StoredEntry {
    seq: i64,
    kind: String,
    at: DateTime<Utc>,
    entry: String,
    prev_hash: String,
    hash: String,
}

/// Checks one stored entry of `tenant`'s chain against the running chain.
fn check(
    key: &LedgerKey,
    tenant: &str,
    row: &StoredEntry,
    expected_seq: i64,
    prev: &str,
) -> Result<(), LedgerBreak> {
    let broken = |problem: String| LedgerBreak {
        tenant: tenant.to_owned(),
        seq: expected_seq,
        problem,
    };
    if row.seq != expected_seq {
        return Err(broken(format!(
            "entry {expected_seq} is missing (the next entry is {})",
            row.seq
        )));
    }
    if row.prev_hash != prev {
        return Err(broken(
            "its prev_hash is not the previous entry's hash".to_owned(),
        ));
    }
    if chain_hash(key, prev, &row.entry) != row.hash {
        return Err(broken(
            "its hash is not the keyed hash of its contents (the entry was forged or changed)"
                .to_owned(),
        ));
    }
    let canonical: Canonical = serde_json::from_str(&row.entry)
        .map_err(|e| broken(format!("its entry is not a ledger entry: {e}")))?;
    let columns_agree = canonical.seq == row.seq
        && canonical.kind == row.kind
        && canonical.tenant == tenant
        && canonical.at == instant_text(row.at);
    if !columns_agree {
        return Err(broken(
            "its columns (seq, kind, tenant, at) disagree with the hashed entry".to_owned(),
        ));
    }
    Ok(())
}

/// Where the head row says the chain ends, against where the walk ended.
fn head_break(
    walked: &ChainReport,
    head: Option<(i64, String)>,
    tenant_known: bool,
) -> Option<LedgerBreak> {
    let last = walked.last_seq;
    let broken = |seq: i64, problem: String| {
        Some(LedgerBreak {
            tenant: walked.tenant.clone(),
            seq,
            problem,
        })
    };
    match head {
        // No tenant, no head, no entry: there is no chain (only an anchor can miss it).
        None if last == 0 && !tenant_known => None,
        None => broken(last + 1, "the chain's head row is missing".to_owned()),
        Some((seq, _)) if seq > last => broken(
            last + 1,
            format!(
                "entry {} is missing: the head says the chain ends at entry {seq}",
                last + 1
            ),
        ),
        Some((seq, _)) if seq < last => broken(
            seq + 1,
            format!(
                "entry {} is past the head: the head says the chain ends at entry {seq}",
                seq + 1
            ),
        ),
        Some((_, hash)) if hash != walked.last_hash => broken(
            last,
            "the head's hash is not this entry's hash (the head was moved)".to_owned(),
        ),
        Some(_) => None,
    }
}

/// Walks one tenant's chain inside one read-only snapshot.
async fn verify_chain(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: &str,
    tenant_known: bool,
    anchored: Option<&ChainHead>,
) -> Result<ChainReport, ServiceError> {
    let mut tx = pool.begin().await.ctx("starting to read the ledger")?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await
        .ctx("taking a snapshot of the ledger")?;
    let head: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, hash FROM ledger_head WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_optional(&mut *tx)
            .await
            .ctx("reading a ledger head")?;
    let mut report = ChainReport {
        tenant: tenant.to_owned(),
        entries: 0,
        last_seq: 0,
        last_hash: GENESIS_HASH.to_owned(),
        first_break: None,
        anchor_break: None,
    };
    'walk: loop {
        let page: Vec<StoredEntry> = sqlx::query_as(
            "SELECT seq, kind, at, entry, prev_hash, hash FROM ledger_entries \
             WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .bind(tenant)
        .bind(report.last_seq)
        .bind(PAGE)
        .fetch_all(&mut *tx)
        .await
        .ctx("reading the ledger")?;
        if page.is_empty() {
            break;
        }
        for row in &page {
            if let Err(found) = check(key, tenant, row, report.last_seq + 1, &report.last_hash) {
                report.first_break = Some(found);
                break 'walk;
            }
            report.entries += 1;
            report.last_seq = row.seq;
            report.last_hash.clone_from(&row.hash);
        }
    }
    if report.first_break.is_none() {
        report.first_break = head_break(&report, head, tenant_known);
    }
    if let Some(anchored) = anchored.filter(|a| a.seq > 0) {
        report.anchor_break = anchor_break(&mut tx, tenant, anchored).await?;
    }
    tx.rollback().await.ctx("ending a read of the ledger")?;
    Ok(report)
}

/// The anchored entry must still be there, with the anchored hash.
async fn anchor_break(
    conn: &mut PgConnection,
    tenant: &str,
    anchored: &ChainHead,
) -> Result<Option<LedgerBreak>, ServiceError> {
    let (at_anchor, last): (Option<String>, Option<i64>) = sqlx::query_as(
        "SELECT (SELECT hash FROM ledger_entries WHERE tenant_id = $1 AND seq = $2), \
                (SELECT max(seq) FROM ledger_entries WHERE tenant_id = $1)",
    )
    .bind(tenant)
    .bind(anchored.seq)
    .fetch_one(conn)
    .await
    .ctx("reading the anchored entry")?;
    let broken = |seq: i64, problem: String| LedgerBreak {
        tenant: tenant.to_owned(),
        seq,
        problem,
    };
    Ok(match (at_anchor, last.unwrap_or(0)) {
        (None, last) if last < anchored.seq => Some(broken(
            last + 1,
            format!(
                "the tail was cut: the anchor records entry {} and the chain now ends at \
                 entry {last}",
                anchored.seq
            ),
        )),
        (None, _) => Some(broken(
            anchored.seq,
            "the entry the anchor records is gone".to_owned(),
        )),
        (Some(hash), _) if hash != anchored.hash => Some(broken(
            anchored.seq,
            "its hash is not the one the anchor records (the chain was rewritten)".to_owned(),
        )),
        (Some(_), _) => None,
    })
}

/// Every tenant that has, or should have, a chain: the tenants, the heads,
/// the tenants named by entries (read through the index, one probe each).
async fn chain_tenants(
    pool: &PgPool,
) -> Result<(BTreeSet<String>, BTreeSet<String>), ServiceError> {
    let known: Vec<String> = sqlx::query_scalar("SELECT id FROM tenants")
        .fetch_all(pool)
        .await
        .ctx("listing the tenants")?;
    let chained: Vec<String> = sqlx::query_scalar(
        "WITH RECURSIVE t (tenant_id) AS ( \
             (SELECT tenant_id FROM ledger_entries ORDER BY tenant_id LIMIT 1) \
             UNION ALL \
             SELECT (SELECT e.tenant_id FROM ledger_entries e WHERE e.tenant_id > t.tenant_id \
                     ORDER BY e.tenant_id LIMIT 1) \
             FROM t WHERE t.tenant_id IS NOT NULL) \
         SELECT tenant_id FROM t WHERE tenant_id IS NOT NULL \
         UNION SELECT tenant_id FROM ledger_head",
    )
    .fetch_all(pool)
    .await
    .ctx("listing the ledger's chains")?;
    let known: BTreeSet<String> = known.into_iter().collect();
    let mut all = known.clone();
    all.extend(chained);
    Ok((all, known))
}

/// Verifies the chain of `tenant`, or every chain when `tenant` is `None`,
/// under `key`; with an `anchor`, also checks each anchored head (a tenant
/// the anchor names is verified even when nothing of it is left).
pub async fn verify(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: Option<&str>,
    anchor: Option<&Anchor>,
) -> Result<LedgerReport, ServiceError> {
    let integrated = integrate(pool, key).await?;
    if let Some((_, failed)) = integrated.failed.into_iter().next() {
        return Err(failed);
    }
    let queue = integrated
        .refused
        .into_iter()
        .filter(|r| tenant.is_none_or(|t| t == r.tenant))
        .collect();
    let (tenants, known) = match tenant {
        Some(t) => {
            let mut conn = pool.acquire().await.ctx("reading the ledger")?;
            let exists = tenant_exists(&mut conn, t).await?;
            let one = BTreeSet::from([t.to_owned()]);
            (one.clone(), if exists { one } else { BTreeSet::new() })
        }
        None => {
            let (mut all, known) = chain_tenants(pool).await?;
            if let Some(anchor) = anchor {
                all.extend(anchor.heads.iter().map(|h| h.tenant.clone()));
            }
            (all, known)
        }
    };
    let mut report = LedgerReport {
        chains: Vec::with_capacity(tenants.len()),
        entries: 0,
        queue,
    };
    for t in &tenants {
        let anchored = anchor.and_then(|a| a.head_of(t));
        let chain = verify_chain(pool, key, t, known.contains(t), anchored).await?;
        report.entries += chain.entries;
        report.chains.push(chain);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LedgerKey {
        LedgerKey::new(b"0123456789abcdef-test-key-of-32+bytes").unwrap()
    }

    fn stored(seq: i64, prev: &str, body: &str) -> StoredEntry {
        let at: DateTime<Utc> = "2026-09-03T10:00:00.123456Z".parse().unwrap();
        let canonical = Canonical {
            seq,
            at: instant_text(at),
            tenant: "acme".into(),
            kind: "k".into(),
            subject: "s".into(),
            body: Value::String(body.into()),
        };
        let entry = serde_json::to_string(&canonical).unwrap();
        StoredEntry {
            seq,
            kind: "k".into(),
            at,
            hash: chain_hash(&key(), prev, &entry),
            entry,
            prev_hash: prev.into(),
        }
    }

    fn problem(found: Result<(), LedgerBreak>) -> String {
        found.unwrap_err().problem
    }

    #[test]
    fn an_intact_entry_checks_and_each_kind_of_tampering_is_named() {
        let k = key();
        let e = stored(1, GENESIS_HASH, "x");
        assert_eq!(check(&k, "acme", &e, 1, GENESIS_HASH), Ok(()));
        assert!(problem(check(&k, "acme", &e, 2, GENESIS_HASH)).contains("missing"));
        let mut changed = stored(1, GENESIS_HASH, "x");
        changed.entry = changed.entry.replace("\"x\"", "\"y\"");
        assert!(problem(check(&k, "acme", &changed, 1, GENESIS_HASH)).contains("forged"));
        let mut moved = stored(1, GENESIS_HASH, "x");
        moved.kind = "other".into();
        assert!(problem(check(&k, "acme", &moved, 1, GENESIS_HASH)).contains("columns"));
        let other_prev = chain_hash(&k, GENESIS_HASH, "something");
        assert!(problem(check(&k, "acme", &e, 1, &other_prev)).contains("prev_hash"));
        // Renumbered: the stored number is where the walk expects it, the
        // hashed one is not.
        let mut renumbered = stored(1, GENESIS_HASH, "x");
        renumbered.seq = 2;
        assert!(problem(check(&k, "acme", &renumbered, 2, GENESIS_HASH)).contains("columns"));
        let in_another_chain = check(&k, "globex", &e, 1, GENESIS_HASH).unwrap_err();
        assert_eq!(
            (in_another_chain.tenant.as_str(), in_another_chain.seq),
            ("globex", 1)
        );
        assert!(in_another_chain.problem.contains("columns"));
    }

    /// `at` is covered: the stored instant is compared with the hashed one
    /// to the microsecond (an `instant_text` that lost it would not notice).
    #[test]
    fn an_entry_re_dated_by_a_microsecond_is_named() {
        let k = key();
        let mut e = stored(1, GENESIS_HASH, "x");
        assert_eq!(instant_text(e.at), "2026-09-03T10:00:00.123456Z");
        e.at += chrono::Duration::microseconds(1);
        assert!(problem(check(&k, "acme", &e, 1, GENESIS_HASH)).contains("columns"));
    }

    /// A hash computed without the key (plain SHA-256, or HMAC under another
    /// key) does not verify, even over the right entry and previous hash.
    #[test]
    fn a_hash_computed_without_the_key_does_not_verify() {
        let k = key();
        let mut e = stored(1, GENESIS_HASH, "x");
        let mut plain = Sha256::new();
        plain.update(GENESIS_HASH.as_bytes());
        plain.update(e.entry.as_bytes());
        e.hash = hex::encode(plain.finalize());
        assert!(problem(check(&k, "acme", &e, 1, GENESIS_HASH)).contains("forged"));
        let other = LedgerKey::new(b"another key of at least 32 bytes!!").unwrap();
        e.hash = chain_hash(&other, GENESIS_HASH, &e.entry);
        assert!(problem(check(&k, "acme", &e, 1, GENESIS_HASH)).contains("forged"));
    }

    #[test]
    fn the_padded_hmac_is_rfc_2104_hmac_for_every_key_length() {
        for len in [0, 1, 16, 32, 63, 64, 65, 200] {
            let key = vec![0x5au8; len];
            let mut ours = hmac_with(&key);
            let mut reference = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
            ours.update(b"message");
            reference.update(b"message");
            assert_eq!(
                ours.finalize().into_bytes(),
                reference.finalize().into_bytes(),
                "key of {len} bytes"
            );
        }
    }

    #[test]
    fn the_derived_key_is_separated_from_the_secret_and_keyed_by_it() {
        let secret = b"whsec_test_spendgate_of_32_bytes_or_more";
        let derived = LedgerKey::derived_from_secret(secret);
        let raw = LedgerKey::new(secret).unwrap();
        let h = |k: &LedgerKey| chain_hash(k, GENESIS_HASH, "{}");
        assert_ne!(h(&derived), h(&raw), "the derived key is not the secret");
        assert_eq!(h(&derived), h(&LedgerKey::derived_from_secret(secret)));
        assert_ne!(
            h(&derived),
            h(&LedgerKey::derived_from_secret(b"whsec_other_secret"))
        );
        // HMAC(secret, domain) as the key, exactly.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap();
        mac.update(KEY_DOMAIN);
        let expected = LedgerKey::new(&mac.finalize().into_bytes()).unwrap();
        assert_eq!(h(&derived), h(&expected));
        assert_eq!(format!("{derived:?}"), "LedgerKey(..)");
    }

    #[test]
    fn a_short_ledger_key_is_refused() {
        assert_eq!(
            LedgerKey::new(b"short").unwrap_err(),
            LedgerKeyError::TooShort { len: 5 }
        );
        assert!(LedgerKey::new(&[0u8; LedgerKey::MIN_LEN]).is_ok());
    }

    fn walked(last_seq: i64, last_hash: &str) -> ChainReport {
        ChainReport {
            tenant: "acme".into(),
            entries: last_seq as u64,
            last_seq,
            last_hash: last_hash.into(),
            first_break: None,
            anchor_break: None,
        }
    }

    #[test]
    fn the_head_must_point_at_the_last_entry() {
        let h = "a".repeat(64);
        let w = walked(5, &h);
        assert_eq!(head_break(&w, Some((5, h.clone())), true), None);
        let seq_of = |b: Option<LedgerBreak>| b.map(|b| (b.seq, b.problem));
        let missing = seq_of(head_break(&w, None, true)).unwrap();
        assert_eq!(missing.0, 6);
        assert!(missing.1.contains("head row is missing"));
        let ahead = seq_of(head_break(&w, Some((7, h.clone())), true)).unwrap();
        assert_eq!(ahead.0, 6);
        assert!(ahead.1.contains("entry 6 is missing") && ahead.1.contains("entry 7"));
        let behind = seq_of(head_break(&w, Some((3, h.clone())), true)).unwrap();
        assert_eq!(behind.0, 4);
        assert!(behind.1.contains("entry 4 is past the head") && behind.1.contains("entry 3"));
        let moved = seq_of(head_break(&w, Some((5, "b".repeat(64))), true)).unwrap();
        assert_eq!(moved.0, 5);
        assert!(moved.1.contains("hash"));
        // No tenant, no head, no entries: no chain to break.
        assert_eq!(head_break(&walked(0, GENESIS_HASH), None, false), None);
        // Entries left by a tenant that is gone still need their head.
        assert!(head_break(&w, None, false).is_some());
    }

    fn anchor_text(heads: &str) -> String {
        format!("{{\"format\": \"{ANCHOR_FORMAT}\", \"heads\": [{heads}]}}")
    }

    #[test]
    fn an_anchor_round_trips_and_each_malformed_field_is_named() {
        let good = Anchor::of(vec![
            ChainHead {
                tenant: "acme".into(),
                seq: 12,
                hash: "ab".repeat(32),
            },
            ChainHead {
                tenant: "globex".into(),
                seq: 0,
                hash: GENESIS_HASH.into(),
            },
        ]);
        assert_eq!(Anchor::parse(&good.to_json()).unwrap(), good);
        let h = "ab".repeat(32);
        assert_eq!(
            good.to_json(),
            format!(
                "{{\n  \"format\": \"{ANCHOR_FORMAT}\",\n  \"heads\": [\n    \
                 {{\"tenant\": \"acme\", \"seq\": 12, \"hash\": \"{h}\"}},\n    \
                 {{\"tenant\": \"globex\", \"seq\": 0, \"hash\": \"{GENESIS_HASH}\"}}\n  ]\n}}"
            )
        );
        let empty = Anchor::of(Vec::new());
        assert_eq!(Anchor::parse(&empty.to_json()).unwrap(), empty);
        let odd = Anchor::of(vec![ChainHead {
            tenant: "a\"b\\c".into(),
            seq: 1,
            hash: h.clone(),
        }]);
        assert_eq!(Anchor::parse(&odd.to_json()).unwrap(), odd);
        assert_eq!(good.head_of("globex").map(|h| h.seq), Some(0));
        assert!(good.head_of("nobody").is_none());

        let err = |text: &str| Anchor::parse(text).unwrap_err().to_string();
        let h = "ab".repeat(32);
        let head = |tenant: &str, seq: &str, hash: &str| {
            format!(r#"{{"tenant": {tenant}, "seq": {seq}, "hash": {hash}}}"#)
        };
        let cases: Vec<(String, &str)> = vec![
            (
                "not json".into(),
                "not JSON: expected ident at line 1 column 2",
            ),
            (
                "[]".into(),
                "field `(top level)`: is [], expected an object",
            ),
            (r#"{"heads": []}"#.into(), "field `format`: is missing"),
            (
                r#"{"format": 1, "heads": []}"#.into(),
                "field `format`: is 1, expected a string",
            ),
            (
                r#"{"format": "v0", "heads": []}"#.into(),
                "field `format`: is \"v0\", expected",
            ),
            (
                format!(r#"{{"format": "{ANCHOR_FORMAT}"}}"#),
                "field `heads`: is missing",
            ),
            (
                format!(r#"{{"format": "{ANCHOR_FORMAT}", "heads": {{}}}}"#),
                "field `heads`: is {}, expected a list",
            ),
            (
                format!(r#"{{"format": "{ANCHOR_FORMAT}", "heads": [], "at": 1}}"#),
                "field `at`: is not a field",
            ),
            (
                anchor_text(r#"{"tenant": "acme", "seq": 1}"#),
                "field `heads[0].hash`: is missing",
            ),
            (
                anchor_text(&format!(
                    r#"{{"tenant": "a", "seq": 1, "hash": "{h}", "x": 1}}"#
                )),
                "field `heads[0].x`: is not a field",
            ),
            (
                anchor_text(&head("7", "1", &format!("\"{h}\""))),
                "field `heads[0].tenant`: is 7, expected a string",
            ),
            (
                anchor_text(&head("\"\"", "1", &format!("\"{h}\""))),
                "field `heads[0].tenant`: is empty",
            ),
            (
                anchor_text(&format!(
                    "{}, {}",
                    head("\"acme\"", "1", &format!("\"{h}\"")),
                    head("\"acme\"", "2", &format!("\"{h}\""))
                )),
                "field `heads[1].tenant`: tenant \"acme\" is anchored twice",
            ),
            (
                anchor_text(&head("\"a\"", "-1", &format!("\"{h}\""))),
                "field `heads[0].seq`: is -1, expected a whole number",
            ),
            (
                anchor_text(&head("\"a\"", "1e99", &format!("\"{h}\""))),
                "field `heads[0].seq`: is 1e+99",
            ),
            (
                anchor_text(&head("\"a\"", "1.5", &format!("\"{h}\""))),
                "field `heads[0].seq`: is 1.5",
            ),
            (
                anchor_text(&head("\"a\"", "\"1\"", &format!("\"{h}\""))),
                "field `heads[0].seq`: is \"1\"",
            ),
            (
                anchor_text(&head("\"a\"", "1", &format!("\"{}\"", h.to_uppercase()))),
                "field `heads[0].hash`: \"ABAB",
            ),
            (
                anchor_text(&head("\"a\"", "1", "\"ab\"")),
                "field `heads[0].hash`: \"ab\" is not 64",
            ),
            (
                anchor_text(&head("\"a\"", "0", &format!("\"{h}\""))),
                "field `heads[0].hash`: an empty chain",
            ),
        ];
        for (text, expected) in cases {
            let got = err(&text);
            assert!(
                got.contains(expected),
                "{text}\n  gave: {got}\n  want: {expected}"
            );
        }
    }
}
