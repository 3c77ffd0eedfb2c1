//! The ledger: append-only and hash-chained.
//!
//! Guarantees:
//! - [`append`] writes entries numbered one after the last, each holding the
//!   previous entry's hash and its own, `hash = SHA-256(prev_hash || entry)`
//!   where `entry` is the canonical JSON stored verbatim. It takes the ledger
//!   head's row lock (through [`super::lock`]) and is the last thing an
//!   operation does before it commits, so appends are serialized, the chain
//!   never forks, and an entry exists exactly when the operation it records
//!   committed. The database refuses UPDATE, DELETE and TRUNCATE of entries
//!   (`ledger_append_only`).
//! - [`verify`] walks every entry in order and names the FIRST broken one: a
//!   missing number, a `prev_hash` that is not the previous entry's hash, a
//!   hash that does not match the stored entry, columns that disagree with
//!   the hashed entry, or a head row that does not point at the last entry.
//!   It reads in pages, so a long ledger is never loaded whole.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};

use super::error::{Ctx, ServiceError};
use super::lock::lock;
use super::rows::LedgerHeadRow;

/// The hash before the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const PAGE: i64 = 1000;

/// One thing that happened, before it is numbered and hashed.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
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
    tenant: Option<String>,
    kind: String,
    subject: String,
    body: Value,
}

/// `SHA-256(prev_hash || entry)`, lower-case hex.
pub fn chain_hash(prev_hash: &str, entry: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(prev_hash.as_bytes());
    hash.update(entry.as_bytes());
    hex::encode(hash.finalize())
}

/// The instant as stored: microsecond precision, like `timestamptz`.
fn stored_instant(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(at.timestamp_micros()).unwrap_or(at)
}

fn instant_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Appends `entries` at `at`. Call it last, just before committing.
pub(crate) async fn append(
    conn: &mut PgConnection,
    at: DateTime<Utc>,
    entries: Vec<Entry>,
) -> Result<(), ServiceError> {
    if entries.is_empty() {
        return Ok(());
    }
    let head: LedgerHeadRow = lock(conn, &[])
        .await
        .ctx("locking the ledger head")?
        .ok_or(ServiceError::LedgerHeadMissing)?;
    let at = stored_instant(at);
    let (mut seq, mut prev) = (head.seq, head.hash);
    for e in entries {
        seq += 1;
        let canonical = Canonical {
            seq,
            at: instant_text(at),
            tenant: e.tenant.clone(),
            kind: e.kind.to_owned(),
            subject: e.subject,
            body: e.body,
        };
        let text = serde_json::to_string(&canonical).map_err(|e| ServiceError::Corrupt {
            what: format!("a ledger entry does not serialize: {e}"),
        })?;
        let hash = chain_hash(&prev, &text);
        sqlx::query(
            "INSERT INTO ledger_entries (seq, tenant_id, kind, at, entry, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(seq)
        .bind(&e.tenant)
        .bind(e.kind)
        .bind(at)
        .bind(&text)
        .bind(&prev)
        .bind(&hash)
        .execute(&mut *conn)
        .await
        .ctx("appending to the ledger")?;
        prev = hash;
    }
    sqlx::query("UPDATE ledger_head SET seq = $1, hash = $2 WHERE singleton")
        .bind(seq)
        .bind(&prev)
        .execute(&mut *conn)
        .await
        .ctx("moving the ledger head")?;
    Ok(())
}

/// The first entry that does not hold, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerBreak {
    pub seq: i64,
    pub problem: String,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerReport {
    /// Entries read.
    pub entries: u64,
    /// The last entry's hash ([`GENESIS_HASH`] for an empty ledger).
    pub last_hash: String,
    /// The first broken entry, if any.
    pub first_break: Option<LedgerBreak>,
}

impl LedgerReport {
    pub fn intact(&self) -> bool {
        self.first_break.is_none()
    }
}

#[derive(sqlx::FromRow)]
struct StoredEntry {
    seq: i64,
    tenant_id: Option<String>,
    kind: String,
    at: DateTime<Utc>,
    entry: String,
    prev_hash: String,
    hash: String,
}

/// Checks one stored entry against the running chain.
fn check(row: &StoredEntry, expected_seq: i64, prev: &str) -> Result<(), LedgerBreak> {
    let broken = |problem: String| LedgerBreak {
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
    if chain_hash(prev, &row.entry) != row.hash {
        return Err(broken(
            "its hash does not match its contents (the entry was changed)".to_owned(),
        ));
    }
    let canonical: Canonical = serde_json::from_str(&row.entry)
        .map_err(|e| broken(format!("its entry is not a ledger entry: {e}")))?;
    let columns_agree = canonical.seq == row.seq
        && canonical.kind == row.kind
        && canonical.tenant == row.tenant_id
        && canonical.at == instant_text(row.at);
    if !columns_agree {
        return Err(broken(
            "its columns (seq, kind, tenant, at) disagree with the hashed entry".to_owned(),
        ));
    }
    Ok(())
}

/// Walks the whole ledger and names the first broken entry.
pub async fn verify(pool: &PgPool) -> Result<LedgerReport, ServiceError> {
    let mut report = LedgerReport {
        entries: 0,
        last_hash: GENESIS_HASH.to_owned(),
        first_break: None,
    };
    let mut last_seq = 0i64;
    loop {
        let page: Vec<StoredEntry> = sqlx::query_as(
            "SELECT seq, tenant_id, kind, at, entry, prev_hash, hash FROM ledger_entries \
             WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(last_seq)
        .bind(PAGE)
        .fetch_all(pool)
        .await
        .ctx("reading the ledger")?;
        let Some(last) = page.last() else { break };
        let next_page_from = last.seq;
        for row in &page {
            if let Err(found) = check(row, last_seq + 1, &report.last_hash) {
                report.first_break = Some(found);
                return Ok(report);
            }
            report.entries += 1;
            report.last_hash = row.hash.clone();
            last_seq = row.seq;
        }
        debug_assert_eq!(next_page_from, last_seq);
    }
    let head: Option<(i64, String)> = sqlx::query_as("SELECT seq, hash FROM ledger_head")
        .fetch_optional(pool)
        .await
        .ctx("reading the ledger head")?;
    report.first_break = match head {
        None => Some(LedgerBreak {
            seq: last_seq + 1,
            problem: "the ledger head row is missing".to_owned(),
        }),
        Some((seq, _)) if seq > last_seq => Some(LedgerBreak {
            seq: last_seq + 1,
            problem: format!(
                "the head says the ledger ends at entry {seq}, but entry {} is missing",
                last_seq + 1
            ),
        }),
        Some((seq, _)) if seq < last_seq => Some(LedgerBreak {
            seq: seq + 1,
            problem: format!(
                "entry {} is not recorded in the ledger head (head at {seq})",
                seq + 1
            ),
        }),
        Some((_, hash)) if hash != report.last_hash => Some(LedgerBreak {
            seq: last_seq,
            problem: "the ledger head's hash is not the last entry's hash".to_owned(),
        }),
        Some(_) => None,
    };
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: i64, prev: &str, body: &str) -> StoredEntry {
        let at: DateTime<Utc> = "2026-09-03T10:00:00Z".parse().unwrap();
        let canonical = Canonical {
            seq,
            at: instant_text(at),
            tenant: Some("acme".into()),
            kind: "k".into(),
            subject: "s".into(),
            body: Value::String(body.into()),
        };
        let entry = serde_json::to_string(&canonical).unwrap();
        StoredEntry {
            seq,
            tenant_id: Some("acme".into()),
            kind: "k".into(),
            at,
            hash: chain_hash(prev, &entry),
            entry,
            prev_hash: prev.into(),
        }
    }

    #[test]
    fn an_intact_entry_checks_and_each_kind_of_tampering_is_named() {
        let e = stored(1, GENESIS_HASH, "x");
        assert_eq!(check(&e, 1, GENESIS_HASH), Ok(()));
        assert!(
            check(&e, 2, GENESIS_HASH)
                .unwrap_err()
                .problem
                .contains("missing")
        );
        let mut changed = stored(1, GENESIS_HASH, "x");
        changed.entry = changed.entry.replace("\"x\"", "\"y\"");
        assert!(
            check(&changed, 1, GENESIS_HASH)
                .unwrap_err()
                .problem
                .contains("hash")
        );
        let mut moved = stored(1, GENESIS_HASH, "x");
        moved.kind = "other".into();
        assert!(
            check(&moved, 1, GENESIS_HASH)
                .unwrap_err()
                .problem
                .contains("columns")
        );
        let other_prev = chain_hash(GENESIS_HASH, "something");
        assert!(
            check(&e, 1, &other_prev)
                .unwrap_err()
                .problem
                .contains("prev_hash")
        );
    }
}
