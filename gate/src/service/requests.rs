//! Payment request rows: recording a proposal and moving it through its states.
//!
//! Guarantees: a request is inserted PROPOSED and then moved, in the same
//! transaction, by [`transition`] — the one function that changes a
//! request's state. Leaving a reserving state (AUTHORIZED, CHECKOUT_ISSUED,
//! PROVIDER_PENDING, CAPTURED) for any other releases the daily and the
//! delegation budget together with the state change; entering AUTHORIZED
//! records the reservation just taken. The database's
//! `request_state_transition` and `ck_request_reservation_matches_state`
//! refuse anything else.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::budget::{self, Reservation};
use super::error::{Ctx, ServiceError};
use super::rows::{REQUEST_COLUMNS, RequestRow, state};
use crate::catalog::Purchase;
use crate::ident::is_ident;
use crate::proposal::PurchaseProposal;
use crate::reason::{Decision, Reason};

/// A proposal about to be recorded.
pub(crate) struct NewRequest<'a> {
    pub tenant: &'a str,
    pub agent: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub body_sha256: &'a str,
    pub proposal: Option<&'a PurchaseProposal>,
    pub purchase: Option<&'a Purchase>,
    pub decision: Decision,
    pub policy_version: Option<i32>,
    pub now: DateTime<Utc>,
}

/// Inserts the request (PROPOSED) and returns it.
pub(crate) async fn insert(
    conn: &mut PgConnection,
    new: &NewRequest<'_>,
) -> Result<RequestRow, ServiceError> {
    let quantity = new
        .proposal
        .map(|p| i32::try_from(p.quantity))
        .transpose()
        .map_err(|_| ServiceError::Corrupt {
            what: "a quantity past the boundary's limit reached the database".to_owned(),
        })?;
    let sql = format!(
        "INSERT INTO payment_requests (tenant_id, agent_id, idempotency_key, body_sha256, sku, \
         quantity, purpose, merchant_id, currency, amount_paise, purchase_digest, decision, reason, \
         state, policy_version, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'PROPOSED', $14, $15, $15) \
         RETURNING {REQUEST_COLUMNS}"
    );
    sqlx::query_as(&sql)
        .bind(new.tenant)
        .bind(new.agent)
        .bind(new.idempotency_key)
        .bind(new.body_sha256)
        // A sku that is not an identifier is unknown, and is never stored.
        .bind(
            new.proposal
                .map(|p| p.sku.as_str())
                .filter(|sku| is_ident(sku)),
        )
        .bind(quantity)
        .bind(new.proposal.map(|p| p.purpose.as_str()))
        .bind(new.purchase.map(|p| p.merchant.as_str()))
        .bind(new.purchase.map(|p| p.currency.as_str()))
        .bind(new.purchase.map(|p| p.amount_paise))
        .bind(new.purchase.map(Purchase::digest))
        .bind(new.decision.kind())
        .bind(new.decision.reason().map(Reason::code))
        .bind(new.policy_version)
        .bind(new.now)
        .fetch_one(conn)
        .await
        .ctx("recording the proposal")
}

/// The request with this id in `tenant`; another tenant's request is
/// answered exactly as a missing one.
pub(crate) async fn find(
    conn: &mut PgConnection,
    tenant: &str,
    id: &str,
) -> Result<Option<RequestRow>, ServiceError> {
    if !is_ident(tenant) || !is_ident(id) {
        return Ok(None);
    }
    let sql =
        format!("SELECT {REQUEST_COLUMNS} FROM payment_requests WHERE tenant_id = $1 AND id = $2");
    sqlx::query_as(&sql)
        .bind(tenant)
        .bind(id)
        .fetch_optional(conn)
        .await
        .ctx("reading a request")
}

/// The request an agent recorded under an idempotency key.
pub(crate) async fn by_idempotency_key(
    conn: &mut PgConnection,
    tenant: &str,
    agent: &str,
    key: &str,
) -> Result<Option<RequestRow>, ServiceError> {
    let sql = format!(
        "SELECT {REQUEST_COLUMNS} FROM payment_requests \
         WHERE tenant_id = $1 AND agent_id = $2 AND idempotency_key = $3"
    );
    sqlx::query_as(&sql)
        .bind(tenant)
        .bind(agent)
        .bind(key)
        .fetch_optional(conn)
        .await
        .ctx("looking up an idempotency key")
}

/// How a transition changes what the request holds.
pub(crate) enum Hold<'a> {
    /// Keep the reservation the row already has (or none).
    Keep,
    /// The reservation just taken (entering AUTHORIZED).
    Take(&'a Reservation),
}

/// Moves `request` to `to`; releases its reservation when `to` holds none.
pub(crate) async fn transition(
    conn: &mut PgConnection,
    request: &RequestRow,
    to: &'static str,
    reason: Option<Reason>,
    hold: Hold<'_>,
    policy_version: Option<i32>,
    now: DateTime<Utc>,
) -> Result<(), ServiceError> {
    let keeps = state::RESERVING.contains(&to);
    let (reserved, day, hop) = match hold {
        Hold::Take(r) => (r.amount_paise, Some(r.day), Some(r.delegation_id.clone())),
        Hold::Keep if keeps => (
            request.reserved_paise,
            request.reserved_day,
            request.delegation_id.clone(),
        ),
        Hold::Keep => {
            budget::release(conn, request).await?;
            (0, request.reserved_day, request.delegation_id.clone())
        }
    };
    sqlx::query(
        "UPDATE payment_requests SET state = $3, state_reason = COALESCE($4, state_reason), \
         reserved_paise = $5, reserved_day = $6, delegation_id = $7, \
         policy_version = COALESCE($8, policy_version), updated_at = $9, \
         authorized_at = CASE WHEN $3 = 'AUTHORIZED' THEN $9 ELSE authorized_at END \
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(&request.tenant_id)
    .bind(&request.id)
    .bind(to)
    .bind(reason.map(Reason::code))
    .bind(reserved)
    .bind(day)
    .bind(hop)
    .bind(policy_version)
    .bind(now)
    .execute(conn)
    .await
    .ctx("moving a request to its next state")?;
    Ok(())
}
