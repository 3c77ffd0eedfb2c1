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
//! - [`append`] takes the row lock of each head it writes to, in tenant
//!   order, and nothing else of the ledger's. It writes a tenant's entries
//!   and moves its head in one statement that only moves a head still at the
//!   number and hash the entries were chained from: first the head the key's
//!   last append left (a hint, which saves the round trip that reads the
//!   head), and when that head has moved, the head read under its lock
//!   (through [`super::lock`]). It is the last thing an operation does
//!   before it commits, or rides on the operation's last INSERT (a
//!   [`Chained`] append: `propose` writes its request and its entries in one
//!   statement), so a chain never forks and an entry exists exactly when
//!   the operation it records committed. An entry with no tenant is NOT written: a call naming an
//!   unknown tenant has no chain to record it under, so it writes nothing
//!   (the spec's one exception to "every refusal is on the ledger"). The
//!   database refuses UPDATE, DELETE and TRUNCATE of entries
//!   (`ledger_append_only`) and an entry of a chain without a head
//!   (`fk_ledger_entry_head`).
//! - [`verify`] walks each chain in order, with the key, and names the FIRST
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
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, SecondsFormat, Utc};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::postgres::PgArguments;
use sqlx::{PgConnection, PgPool, Postgres};

use super::error::{Ctx, ServiceError};
use super::lock::{LedgerHeadKey, lock};
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
///
/// A key also remembers, for each tenant, the head its last append left
/// (clones share what it remembers). [`append`] chains from that head first
/// and saves the round trip that reads the head; it is a hint, never
/// trusted: the write moves the head only if the head is still there, and
/// otherwise the head is read under its lock and the entries chained again.
#[derive(Clone)]
pub struct LedgerKey {
    mac: Hmac<Sha256>,
    /// Keys [`row_mac`]: `HMAC-SHA256(ledger key, ROW_MAC_DOMAIN)`, so no
    /// row MAC is ever a chain hash.
    row: Hmac<Sha256>,
    last_heads: Arc<Mutex<HashMap<String, LedgerHeadRow>>>,
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
            last_heads: Arc::default(),
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
            last_heads: Arc::default(),
        }
    }

    /// The head this key's last append to `tenant`'s chain left, if any.
    fn last_head(&self, tenant: &str) -> Option<LedgerHeadRow> {
        let heads = self
            .last_heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        heads.get(tenant).cloned()
    }

    /// Forgets the head remembered for `tenant`'s chain.
    fn forget(&self, tenant: &str) {
        let mut heads = self
            .last_heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        heads.remove(tenant);
    }

    /// Remembers `head` as the head of `tenant`'s chain after an append.
    fn remember(&self, tenant: &str, head: LedgerHeadRow) {
        let mut heads = self
            .last_heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        heads.insert(tenant.to_owned(), head);
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

/// Appends `entries` at `at`, each to its tenant's chain, hashed under
/// `key`. Call it last, just before committing.
///
/// Entries without a tenant are skipped: there is no chain to record them
/// under (a call naming an unknown tenant writes nothing; its callers pass
/// `None` for it). A tenant without a head row (gone, or never a tenant) is
/// [`ServiceError::LedgerHeadMissing`]: its chain cannot be continued, and
/// the caller's transaction, this append included, is rolled back.
pub(crate) async fn append(
    conn: &mut PgConnection,
    key: &LedgerKey,
    at: DateTime<Utc>,
    entries: Vec<Entry>,
) -> Result<(), ServiceError> {
    // Grouped by tenant, in tenant order: several heads are locked in one
    // order, so two multi-tenant appends never wait on each other in a cycle.
    let mut chains: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for e in entries {
        if let Some(tenant) = e.tenant.clone() {
            chains.entry(tenant).or_default().push(e);
        }
    }
    let at = stored_instant(at);
    for (tenant, entries) in chains {
        // The head this key's last append left, when it is still the head:
        // one statement. Otherwise (no hint, or the head moved since) the
        // head is locked and read, and the entries chained from it.
        let hinted = match key.last_head(&tenant) {
            Some(hint) => write(conn, key, &tenant, at, hint, &entries).await?,
            None => None,
        };
        let end = match hinted {
            Some(end) => end,
            None => {
                let head: LedgerHeadRow = lock(conn, LedgerHeadKey { tenant: &tenant })
                    .await
                    .ctx("locking the tenant's ledger head")?
                    .ok_or(ServiceError::LedgerHeadMissing)?;
                write(conn, key, &tenant, at, head, &entries)
                    .await?
                    .ok_or(ServiceError::LedgerHeadMissing)?
            }
        };
        // Remembered before the caller commits: if it rolls back instead,
        // the next append finds the head elsewhere and reads it.
        key.remember(&tenant, end);
    }
    Ok(())
}

/// One tenant's entries chained from a head, ready to go in with the head's
/// move in one statement: by [`write`] alone, or carried by another
/// statement (`requests::insert`) as [`Chained::CTES`], which saves that
/// statement's round trip.
#[derive(Debug)]
pub(crate) struct Chained {
    tenant: String,
    at: DateTime<Utc>,
    from: LedgerHeadRow,
    rows: Rows,
    end: LedgerHeadRow,
}

impl Chained {
    /// Two common table expressions, binding `$1` to `$11`: `moved` moves
    /// the head to the last entry, only if it is still at the head the
    /// entries were chained from (a head another transaction holds is waited
    /// for, then compared as it committed), and `appended` writes the
    /// entries behind a head that moved, and none otherwise. The head moves
    /// first: `fk_ledger_entry_head` is checked at the end of the statement.
    pub const CTES: &'static str = "moved AS ( \
             UPDATE ledger_head SET seq = $8, hash = $9 \
              WHERE tenant_id = $1 AND seq = $10 AND hash = $11 \
             RETURNING tenant_id), \
         appended AS ( \
             INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
             SELECT moved.tenant_id, u.seq, u.kind, $2, u.entry, u.prev_hash, u.hash \
             FROM moved, UNNEST($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) \
               WITH ORDINALITY AS u(seq, kind, entry, prev_hash, hash, n) ORDER BY u.n)";
    /// How many parameters [`Chained::CTES`] binds: a carrying statement's
    /// own are numbered after them.
    pub const PARAMS: usize = 11;

    /// Numbers and hashes `entries` (all of `tenant`'s) from `from`, at `at`.
    fn new(
        key: &LedgerKey,
        tenant: &str,
        at: DateTime<Utc>,
        from: LedgerHeadRow,
        entries: &[Entry],
    ) -> Result<Self, ServiceError> {
        let at = stored_instant(at);
        let (mut seq, mut prev) = (from.seq, from.hash.clone());
        let mut rows = Rows::default();
        for e in entries {
            seq += 1;
            let canonical = Canonical {
                seq,
                at: instant_text(at),
                tenant: tenant.to_owned(),
                kind: e.kind.to_owned(),
                subject: e.subject.clone(),
                body: e.body.clone(),
            };
            let text = serde_json::to_string(&canonical).map_err(|e| ServiceError::Corrupt {
                what: format!("a ledger entry does not serialize: {e}"),
            })?;
            let hash = chain_hash(key, &prev, &text);
            rows.seqs.push(seq);
            rows.kinds.push(e.kind.to_owned());
            rows.texts.push(text);
            rows.prevs.push(std::mem::replace(&mut prev, hash.clone()));
            rows.hashes.push(hash);
        }
        Ok(Chained {
            tenant: tenant.to_owned(),
            at,
            from,
            rows,
            end: LedgerHeadRow { seq, hash: prev },
        })
    }

    /// Binds [`Chained::CTES`]' parameters, `$1` to `$11`, to `query`.
    pub fn bind<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, Postgres, O, PgArguments>,
    ) -> sqlx::query::QueryAs<'q, Postgres, O, PgArguments> {
        query
            .bind(&self.tenant)
            .bind(self.at)
            .bind(&self.rows.seqs)
            .bind(&self.rows.kinds)
            .bind(&self.rows.texts)
            .bind(&self.rows.prevs)
            .bind(&self.rows.hashes)
            .bind(self.end.seq)
            .bind(&self.end.hash)
            .bind(self.from.seq)
            .bind(&self.from.hash)
    }

    /// After the statement that carried it ran: whether the head `moved`
    /// (and the entries went in). A move is remembered as the tenant's head
    /// for the key's next append.
    pub fn landed(self, key: &LedgerKey, moved: bool) -> bool {
        if moved {
            // Remembered before the caller commits: if it rolls back
            // instead, the next append finds the head elsewhere and reads it.
            key.remember(&self.tenant, self.end);
        } else {
            // The head moved on: the next append reads it under its lock
            // instead of trying the remembered one again.
            key.forget(&self.tenant);
        }
        moved
    }
}

/// `tenant`'s `entries`, chained from the head this key's last append left
/// (see [`LedgerKey`]), for a statement that carries them
/// ([`Chained::CTES`]); `None` when the key remembers no head for the
/// tenant. Whether they went in is the carrying statement's to tell
/// ([`Chained::landed`]); when they did not, [`append`] them as usual.
pub(crate) fn chain_from_last_head(
    key: &LedgerKey,
    tenant: &str,
    at: DateTime<Utc>,
    entries: &[Entry],
) -> Result<Option<Chained>, ServiceError> {
    key.last_head(tenant)
        .map(|head| Chained::new(key, tenant, at, head, entries))
        .transpose()
}

/// Chains `entries` from `head` and, in one statement, writes them and moves
/// `tenant`'s head to the last of them, only if the head is still at
/// `head`'s number and hash. Returns the new head, or `None` when the head
/// was elsewhere and nothing was written.
async fn write(
    conn: &mut PgConnection,
    key: &LedgerKey,
    tenant: &str,
    at: DateTime<Utc>,
    head: LedgerHeadRow,
    entries: &[Entry],
) -> Result<Option<LedgerHeadRow>, ServiceError> {
    let chained = Chained::new(key, tenant, at, head, entries)?;
    let sql = format!("WITH {} SELECT count(*) FROM moved", Chained::CTES);
    let (moved,): (i64,) = chained
        .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)))
        .fetch_one(&mut *conn)
        .await
        .ctx("appending to the ledger")?;
    Ok((moved == 1).then_some(chained.end))
}

/// One tenant's new entries, column by column, for one INSERT.
#[derive(Debug, Default)]
struct Rows {
    seqs: Vec<i64>,
    kinds: Vec<String>,
    texts: Vec<String>,
    prevs: Vec<String>,
    hashes: Vec<String>,
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
}

impl LedgerReport {
    pub fn intact(&self) -> bool {
        self.chains.iter().all(ChainReport::intact)
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

    // ---- the remembered head -------------------------------------------------

    type DbResult = Result<(), Box<dyn std::error::Error>>;

    /// A fresh database seeded with the standard world, the secret its gate
    /// keys the ledger from, and a connection to it; `None` when no
    /// database is configured (the test then passes without running, as
    /// every database test does).
    async fn seeded()
    -> Result<Option<(crate::db::FreshDatabase, Vec<u8>)>, Box<dyn std::error::Error>> {
        use super::super::{Gate, clock::ManualClock, standard};
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(None);
        };
        let secret = b"spendgate-ledger-hint-test-secret-0123456789".to_vec();
        let clock = Arc::new(ManualClock::new(standard::now()));
        let gate = Gate::new(
            db.pool().clone(),
            crate::provider::InProcessProvider::new(),
            secret.clone(),
            clock,
        )?;
        gate.seed(&standard::seed()).await?;
        Ok(Some((db, secret)))
    }

    fn probe(what: &str) -> Vec<Entry> {
        vec![Entry::new(
            Some("acme"),
            "probe",
            what,
            Value::String(what.into()),
        )]
    }

    /// `key` appends `what` to acme's chain in a transaction of its own,
    /// committed or rolled back.
    async fn append_one(
        conn: &mut PgConnection,
        key: &LedgerKey,
        what: &str,
        commit: bool,
    ) -> DbResult {
        use sqlx::Connection;
        let mut tx = conn.begin().await?;
        append(&mut tx, key, super::super::standard::now(), probe(what)).await?;
        if commit {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(())
    }

    /// The head a key remembers is never trusted. `a` remembers a head whose
    /// transaction rolled back; `b` (the same secret, a memory of its own)
    /// then writes that number at another hash. `a`'s next append must not
    /// chain from the head it remembers (the number matches, the hash does
    /// not), nor `b`'s from its own once `a` has moved the head on (the
    /// number is behind): each reads the head under its lock instead, and the
    /// chain verifies whole, in the order the appends committed.
    #[tokio::test]
    async fn a_remembered_head_that_moved_is_read_again_and_the_chain_stays_whole() -> DbResult {
        let Some((db, secret)) = seeded().await? else {
            return Ok(());
        };
        let (a, b) = (
            LedgerKey::derived_from_secret(&secret),
            LedgerKey::derived_from_secret(&secret),
        );
        let mut conn = db.pool().acquire().await?;
        append_one(&mut conn, &a, "rolled back", false).await?;
        append_one(&mut conn, &b, "b first", true).await?;
        let (remembered, there) = (a.last_head("acme"), b.last_head("acme"));
        let (Some(remembered), Some(there)) = (remembered, there) else {
            return Err("both keys remember a head after appending".into());
        };
        assert_eq!(remembered.seq, there.seq);
        assert_ne!(remembered.hash, there.hash);
        for (key, what) in [(&a, "a after"), (&b, "b after"), (&b, "b again")] {
            append_one(&mut conn, key, what, true).await?;
        }
        let report = verify(db.pool(), &a, Some("acme"), None).await?;
        assert!(report.intact(), "{report:#?}");
        let subjects: Vec<String> = sqlx::query_scalar(
            "SELECT entry::json->>'subject' FROM ledger_entries \
             WHERE tenant_id = 'acme' AND kind = 'probe' ORDER BY seq",
        )
        .fetch_all(&mut *conn)
        .await?;
        assert_eq!(subjects, ["b first", "a after", "b after", "b again"]);
        drop(conn);
        db.drop().await?;
        Ok(())
    }

    /// What the hint saves: with the head it remembers still the head, an
    /// append reads the head row once fewer than without one (the read
    /// under the lock), counted by Postgres in the appending transaction.
    #[tokio::test]
    async fn a_current_remembered_head_saves_the_read_of_the_head() -> DbResult {
        use sqlx::Connection;
        let Some((db, secret)) = seeded().await? else {
            return Ok(());
        };
        let key = LedgerKey::derived_from_secret(&secret);
        let mut conn = db.pool().acquire().await?;
        let mut reads = Vec::new();
        for what in ["first, nothing remembered", "second, the head remembered"] {
            let mut tx = conn.begin().await?;
            let scans = "SELECT COALESCE(idx_scan, 0) + COALESCE(seq_scan, 0) \
                         FROM pg_stat_xact_user_tables WHERE relname = 'ledger_head'";
            let before: i64 = sqlx::query_scalar(scans).fetch_one(&mut *tx).await?;
            append(&mut tx, &key, super::super::standard::now(), probe(what)).await?;
            let after: i64 = sqlx::query_scalar(scans).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            reads.push(after - before);
        }
        assert_eq!(reads[1] + 1, reads[0], "reads of ledger_head: {reads:?}");
        drop(conn);
        db.drop().await?;
        Ok(())
    }
}
