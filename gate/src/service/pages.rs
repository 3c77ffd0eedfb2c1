//! What the read-only pages show (the console and a request's receipt):
//! reads scoped by tenant, nothing else.
//!
//! Guarantees:
//! - Every statement here is a `SELECT` with `tenant_id = $1`: another
//!   tenant's request is never shown and is answered exactly as a missing
//!   one (`None`). Nothing here writes, signs or decides.
//! - [`console`] lists a tenant's requests newest first (by `created_at`,
//!   then id), filtered by state, agent and reason (each an exact match),
//!   one page of at most [`PAGE_SIZE`] at a time, and says whether a next
//!   page exists; [`refusal_counts`] counts the tenant's requests by the
//!   reason of their first decision.
//! - [`receipt`] gathers one request's records and its ledger entries, each
//!   with its inclusion proof against the newest KEPT checkpoint that covers
//!   it (`log_checkpoints`), computed from the ledger as it is now. Whether
//!   that proof reaches the checkpoint's signed root is for the reader to
//!   check (the receipt's verify button does, in the browser): a changed
//!   ledger row gives a proof that does not, and nothing here hides it. With
//!   no kept checkpoint covering the entries, the receipt says so and
//!   carries no proof (signing one would be a write).
//! - [`raw_proposal`] and [`raw_events`] return the bytes the gate kept as
//!   received (the proposal's body; each applied event's body and signature
//!   header), untouched: a page or a bundle decides how to show them.

use chrono::{DateTime, Utc};
use serde_json::Value;
use spendgate_verify::merkle::hash_to_base64;
use sqlx::PgPool;

use super::error::ServiceError;
use super::tlog;
use super::views::is_plausible_id;

/// Requests per console page.
pub const PAGE_SIZE: i64 = 50;

/// The console's filters; `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleFilter {
    pub state: Option<String>,
    pub agent: Option<String>,
    pub reason: Option<String>,
    /// Zero-based page number.
    pub page: u32,
}

/// One request as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConsoleRow {
    pub id: String,
    pub state: String,
    pub decision: String,
    /// The first decision's reason code, if any.
    pub reason: Option<String>,
    /// The latest refusal that moved the state, if any.
    pub state_reason: Option<String>,
    pub amount_paise: Option<i64>,
    pub currency: Option<String>,
    pub agent_id: String,
    pub created_at: DateTime<Utc>,
}

/// One page of the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsolePage {
    pub rows: Vec<ConsoleRow>,
    /// Whether a next page exists.
    pub more: bool,
}

fn db(action: &'static str) -> impl FnOnce(sqlx::Error) -> ServiceError {
    move |e| ServiceError::from_sqlx(action, e)
}

/// One page of the tenant's requests, newest first.
pub async fn console(
    pool: &PgPool,
    tenant: &str,
    filter: &ConsoleFilter,
) -> Result<ConsolePage, ServiceError> {
    let mut rows: Vec<ConsoleRow> = sqlx::query_as(
        "SELECT id, state, decision, reason, state_reason, amount_paise, currency, agent_id, \
                created_at \
         FROM payment_requests \
         WHERE tenant_id = $1 \
           AND ($2::text IS NULL OR state = $2) \
           AND ($3::text IS NULL OR agent_id = $3) \
           AND ($4::text IS NULL OR reason = $4 OR state_reason = $4) \
         ORDER BY created_at DESC, id DESC LIMIT $5 OFFSET $6",
    )
    .bind(tenant)
    .bind(filter.state.as_deref())
    .bind(filter.agent.as_deref())
    .bind(filter.reason.as_deref())
    .bind(PAGE_SIZE + 1)
    .bind(i64::from(filter.page) * PAGE_SIZE)
    .fetch_all(pool)
    .await
    .map_err(db("listing the tenant's requests"))?;
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    Ok(ConsolePage { rows, more })
}

/// The tenant's requests counted by their first decision's reason (refusals
/// and step-ups), most frequent first.
pub async fn refusal_counts(
    pool: &PgPool,
    tenant: &str,
) -> Result<Vec<(String, i64)>, ServiceError> {
    sqlx::query_as(
        "SELECT reason, count(*) FROM payment_requests \
         WHERE tenant_id = $1 AND reason IS NOT NULL \
         GROUP BY reason ORDER BY count(*) DESC, reason",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await
    .map_err(db("counting the tenant's refusals"))
}

/// A ledger entry of the request, with its proof when one exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptEntry {
    pub seq: i64,
    pub kind: String,
    pub at: DateTime<Utc>,
    /// The entry's stored text: the bytes the log's leaf hashes.
    pub text: String,
    pub prev_hash: String,
    pub hash: String,
    /// The inclusion path (standard base64 hashes, leaf to root) against
    /// [`Receipt::checkpoint`]; `None` when no kept checkpoint covers it.
    pub path: Option<Vec<String>>,
}

/// One request's records, as the receipt page shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The request row (derived purchase, decision, reason, state).
    pub request: Value,
    /// The proposal as the ledger recorded it (the `proposal` entry's body).
    pub proposal: Value,
    /// The proposal's body exactly as received, when the gate kept it.
    pub proposal_raw: Option<Vec<u8>>,
    pub policy: Value,
    pub delegation: Value,
    pub approvals: Vec<Value>,
    pub authority: Value,
    pub orders: Vec<Value>,
    pub events: Vec<Value>,
    /// The applied provider events' bodies and signature headers, as received.
    pub raw_events: Vec<RawEvent>,
    pub entries: Vec<ReceiptEntry>,
    /// The newest kept checkpoint covering the entries (the signed note).
    pub checkpoint: Option<tlog::StoredCheckpoint>,
    /// Why the entries carry no proof, when they do not.
    pub unproved: Option<String>,
}

/// The rows of `sql` (one of this module's record queries: it selects
/// `to_jsonb(..)::text` and binds the tenant as `$1` and the request as
/// `$2`), as JSON values. `spendgate evidence` reads its bundle with it too.
pub async fn json_rows(
    pool: &PgPool,
    sql: &'static str,
    tenant: &str,
    request: &str,
) -> Result<Vec<Value>, ServiceError> {
    let texts: Vec<String> = sqlx::query_scalar(sql)
        .bind(tenant)
        .bind(request)
        .fetch_all(pool)
        .await
        .map_err(db("reading a request's records"))?;
    texts
        .iter()
        .map(|t| {
            serde_json::from_str(t).map_err(|e| ServiceError::Corrupt {
                what: format!("a record of request {request} is not JSON: {e}"),
            })
        })
        .collect()
}

fn one(mut values: Vec<Value>) -> Value {
    if values.is_empty() {
        Value::Null
    } else {
        values.swap_remove(0)
    }
}

pub const REQUEST_SQL: &str =
    "SELECT to_jsonb(r)::text FROM payment_requests r WHERE r.tenant_id = $1 AND r.id = $2";
pub const POLICY_SQL: &str = "SELECT to_jsonb(p)::text FROM policy_versions p \
     JOIN payment_requests r ON r.tenant_id = p.tenant_id AND r.policy_version = p.version \
     WHERE r.tenant_id = $1 AND r.id = $2";
pub const DELEGATION_SQL: &str = "SELECT to_jsonb(d)::text FROM delegations d \
     JOIN payment_requests r ON r.tenant_id = d.tenant_id AND r.delegation_id = d.id \
     WHERE r.tenant_id = $1 AND r.id = $2";
pub const APPROVALS_SQL: &str = "SELECT to_jsonb(a)::text FROM approvals a \
     WHERE a.tenant_id = $1 AND a.request_id = $2 ORDER BY a.approved_at, a.id";
pub const AUTHORITY_SQL: &str = "SELECT to_jsonb(c)::text FROM checkout_authorities c \
     WHERE c.tenant_id = $1 AND c.request_id = $2";
pub const ORDERS_SQL: &str = "SELECT to_jsonb(o)::text FROM provider_orders o \
     WHERE o.tenant_id = $1 AND o.request_id = $2 ORDER BY o.created_at";
pub const PAYMENTS_SQL: &str = "SELECT to_jsonb(p)::text FROM provider_payments p \
     WHERE p.tenant_id = $1 AND p.request_id = $2 ORDER BY p.recorded_at";
pub const EVENTS_SQL: &str = "SELECT to_jsonb(e)::text FROM provider_events e \
     WHERE e.tenant_id = $1 AND e.request_id = $2 ORDER BY e.received_at";

/// A provider event's bytes as received.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RawEvent {
    /// The SHA-256 (hex) of the event's id: how it is named.
    pub event_id_sha256: String,
    pub body: Vec<u8>,
    /// The `X-Razorpay-Signature` header's value.
    pub signature: Vec<u8>,
}

/// The proposal's body exactly as received; `None` when the gate did not
/// keep it (a body past the boundary's limit, or no such request).
pub async fn raw_proposal(
    pool: &PgPool,
    tenant: &str,
    request: &str,
) -> Result<Option<Vec<u8>>, ServiceError> {
    sqlx::query_scalar("SELECT body FROM request_bodies WHERE tenant_id = $1 AND request_id = $2")
        .bind(tenant)
        .bind(request)
        .fetch_optional(pool)
        .await
        .map_err(db("reading a proposal's bytes"))
}

/// The request's applied provider events' bodies and signature headers,
/// as received, in the order they arrived.
pub async fn raw_events(
    pool: &PgPool,
    tenant: &str,
    request: &str,
) -> Result<Vec<RawEvent>, ServiceError> {
    sqlx::query_as(
        "SELECT b.event_id_sha256, b.body, b.signature FROM provider_event_bodies b \
         JOIN provider_events e ON e.tenant_id = b.tenant_id AND e.event_id_sha256 = b.event_id_sha256 \
         WHERE b.tenant_id = $1 AND e.request_id = $2 ORDER BY e.received_at, b.event_id_sha256",
    )
    .bind(tenant)
    .bind(request)
    .fetch_all(pool)
    .await
    .map_err(db("reading provider events' bytes"))
}

#[derive(sqlx::FromRow)]
struct EntryRow {
    seq: i64,
    kind: String,
    at: DateTime<Utc>,
    entry: String,
    prev_hash: String,
    hash: String,
}

/// The receipt of `request` of `tenant`; `None` when the tenant has no such request.
pub async fn receipt(
    pool: &PgPool,
    tenant: &str,
    request: &str,
) -> Result<Option<Receipt>, ServiceError> {
    if !is_plausible_id(request) {
        return Ok(None);
    }
    let request_row = one(json_rows(pool, REQUEST_SQL, tenant, request).await?);
    if request_row.is_null() {
        return Ok(None);
    }
    let rows: Vec<EntryRow> = sqlx::query_as(
        "SELECT seq, kind, at, entry, prev_hash, hash FROM ledger_entries \
         WHERE tenant_id = $1 AND (entry::jsonb ->> 'subject' = $2 \
            OR entry::jsonb -> 'body' ->> 'request' = $2) ORDER BY seq",
    )
    .bind(tenant)
    .bind(request)
    .fetch_all(pool)
    .await
    .map_err(db("reading a request's ledger entries"))?;
    let (checkpoint, paths, unproved) = proofs(pool, tenant, &rows).await?;
    let mut proposal = Value::Null;
    let mut entries = Vec::with_capacity(rows.len());
    for (row, path) in rows.into_iter().zip(paths) {
        if proposal.is_null() && row.kind == "proposal" {
            proposal = serde_json::from_str::<Value>(&row.entry)
                .map(|v| v["body"].clone())
                .unwrap_or(Value::Null);
        }
        entries.push(ReceiptEntry {
            seq: row.seq,
            kind: row.kind,
            at: row.at,
            text: row.entry,
            prev_hash: row.prev_hash,
            hash: row.hash,
            path,
        });
    }
    Ok(Some(Receipt {
        request: request_row,
        proposal,
        proposal_raw: raw_proposal(pool, tenant, request).await?,
        policy: one(json_rows(pool, POLICY_SQL, tenant, request).await?),
        delegation: one(json_rows(pool, DELEGATION_SQL, tenant, request).await?),
        approvals: json_rows(pool, APPROVALS_SQL, tenant, request).await?,
        authority: one(json_rows(pool, AUTHORITY_SQL, tenant, request).await?),
        orders: json_rows(pool, ORDERS_SQL, tenant, request).await?,
        events: json_rows(pool, EVENTS_SQL, tenant, request).await?,
        raw_events: raw_events(pool, tenant, request).await?,
        entries,
        checkpoint,
        unproved,
    }))
}

type Proofs = (
    Option<tlog::StoredCheckpoint>,
    Vec<Option<Vec<String>>>,
    Option<String>,
);

/// Each entry's path against the newest kept checkpoint covering them all,
/// computed from the ledger as it is now.
async fn proofs(pool: &PgPool, tenant: &str, rows: &[EntryRow]) -> Result<Proofs, ServiceError> {
    let none = |why: String| (None, vec![None; rows.len()], Some(why));
    let Some(need) = rows.iter().map(|r| r.seq).max() else {
        return Ok(none("the request has no ledger entry".to_owned()));
    };
    let log = |e: tlog::LogError| ServiceError::Corrupt {
        what: e.to_string(),
    };
    let Some(checkpoint) = tlog::latest_checkpoint(pool, tenant, need as u64)
        .await
        .map_err(log)?
    else {
        return Ok(none(format!(
            "no kept checkpoint covers entry {need} yet (`spendgate serve` signs one within its \
             checkpoint interval; `spendgate log checkpoint` signs one now)"
        )));
    };
    let leaves = match tlog::leaves(pool, tenant).await {
        Ok(leaves) => leaves,
        Err(e @ tlog::LogError::Gap { .. }) => return Ok(none(e.to_string())),
        Err(e) => return Err(log(e)),
    };
    let tree = tlog::tree_of(&leaves);
    if checkpoint.size > tree.len() {
        return Ok(none(format!(
            "the checkpoint covers {} entries but the ledger now holds {}",
            checkpoint.size,
            tree.len()
        )));
    }
    let mut paths = Vec::with_capacity(rows.len());
    for row in rows {
        let path = tree
            .inclusion_proof(row.seq as u64 - 1, checkpoint.size)
            .map_err(|e| ServiceError::Corrupt {
                what: format!("tenant {tenant}'s log: {e}"),
            })?;
        paths.push(Some(path.iter().map(hash_to_base64).collect()));
    }
    Ok((Some(checkpoint), paths, None))
}

impl<P: crate::provider::PaymentProvider> super::Gate<P> {
    /// One page of the tenant's requests (see [`console`]).
    pub async fn console_page(
        &self,
        tenant: &str,
        filter: &ConsoleFilter,
    ) -> Result<ConsolePage, ServiceError> {
        console(&self.pool, tenant, filter).await
    }

    /// The tenant's requests by reason (see [`refusal_counts`]).
    pub async fn refusal_counts(&self, tenant: &str) -> Result<Vec<(String, i64)>, ServiceError> {
        refusal_counts(&self.pool, tenant).await
    }

    /// The receipt of one request of the tenant (see [`receipt`]), read
    /// after the committed queued ledger entries are integrated.
    pub async fn receipt(
        &self,
        tenant: &str,
        request: &str,
    ) -> Result<Option<Receipt>, ServiceError> {
        self.integrate().await?;
        receipt(&self.pool, tenant, request).await
    }
}
