//! Typed rows of the gate's tables, as the service reads them.
//!
//! Guarantees: each struct lists exactly the columns it is read from (its
//! `SELECT` text lives beside it, so the struct and the query cannot drift
//! apart), and the rows that are ever locked say how in [`Lockable`], with
//! the one key type that names each ([`Lockable::Key`]); the only way to lock
//! one is [`super::lock::lock`] (or `lock_all`), which re-reads it.

use chrono::{DateTime, NaiveDate, Utc};

use super::lock::{
    AuthorityKey, BranchKey, LedgerHeadKey, Lockable, RequestKey, Strength, TenantKey,
};
use crate::delegation::DelegationHop;
use crate::request_state::RequestState;

/// A tenant row (locked to serialize policy publication).
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct TenantRow {
    #[allow(dead_code)]
    pub id: String,
}

impl Lockable for TenantRow {
    type Key<'k> = TenantKey<'k>;
    const SELECT: &'static str = "SELECT id FROM tenants";
    const STRENGTH: Strength = Strength::NoKeyUpdate;
}

/// One hop of a delegation branch: the hop named by the key and every hop
/// below it, locked deepest first.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct BranchRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub claim_paise: i64,
    pub spent_paise: i64,
    pub revoked: bool,
}

impl Lockable for BranchRow {
    type Key<'k> = BranchKey<'k>;
    const SELECT: &'static str = "SELECT id, parent_id, claim_paise, spent_paise, \
        revoked_at IS NOT NULL AS revoked FROM delegations";
    const ORDER: &'static str = " ORDER BY depth DESC, id";
}

/// One payment request.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct RequestRow {
    pub tenant_id: String,
    pub id: String,
    pub agent_id: String,
    pub sku: Option<String>,
    pub quantity: Option<i32>,
    pub purpose: Option<String>,
    pub merchant_id: Option<String>,
    pub currency: Option<String>,
    pub amount_paise: Option<i64>,
    pub purchase_digest: Option<String>,
    #[sqlx(try_from = "String")]
    pub state: RequestState,
    pub policy_version: Option<i32>,
    pub delegation_id: Option<String>,
    pub reserved_day: Option<NaiveDate>,
    pub reserved_paise: i64,
    pub created_at: DateTime<Utc>,
    pub authorized_at: Option<DateTime<Utc>>,
    /// The gate's MAC over the request's terms (`ledger::RequestTerms`).
    pub row_mac: Option<String>,
}

/// How long a request may wait, in PENDING_APPROVAL since it was proposed or
/// in AUTHORIZED since it was authorized, before it expires.
pub const REQUEST_LIFETIME_HOURS: i64 = 24;

impl RequestRow {
    /// True once the request has outlived its lifetime in its current state
    /// (the limit itself is still inside it).
    pub fn lifetime_over(&self, now: DateTime<Utc>) -> bool {
        let since = match self.state {
            RequestState::PendingApproval => Some(self.created_at),
            RequestState::Authorized => self.authorized_at,
            _ => None,
        };
        since.is_some_and(|t| now > t + chrono::Duration::hours(REQUEST_LIFETIME_HOURS))
    }
}

pub(crate) const REQUEST_COLUMNS: &str = "tenant_id, id, agent_id, sku, quantity, \
    purpose, merchant_id, currency, amount_paise, purchase_digest, state, \
    policy_version, delegation_id, reserved_day, reserved_paise, created_at, authorized_at, \
    row_mac";

impl Lockable for RequestRow {
    type Key<'k> = RequestKey<'k>;
    const SELECT: &'static str = "SELECT tenant_id, id, agent_id, sku, quantity, \
        purpose, merchant_id, currency, amount_paise, purchase_digest, state, \
        policy_version, delegation_id, reserved_day, reserved_paise, created_at, authorized_at, \
        row_mac FROM payment_requests";
}

/// One delegation hop.
#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub(crate) struct DelegationRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub grantee_id: String,
    pub budget_paise: i64,
    pub allocated_paise: i64,
    pub spent_paise: i64,
    pub skus: Option<Vec<String>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

pub(crate) const DELEGATION_COLUMNS: &str = "id, parent_id, grantee_id, budget_paise, \
    allocated_paise, spent_paise, skus, expires_at, revoked_at";

impl DelegationRow {
    /// The hop as the pure engine sees it.
    pub fn to_hop(&self) -> DelegationHop {
        DelegationHop {
            id: self.id.clone(),
            parent: self.parent_id.clone(),
            grantee: self.grantee_id.clone(),
            budget_paise: self.budget_paise,
            allocated_paise: self.allocated_paise,
            spent_paise: self.spent_paise,
            skus: self.skus.clone(),
            expires_at: self.expires_at,
            revoked: self.revoked_at.is_some(),
        }
    }
}

/// One checkout authority.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AuthorityRow {
    pub tenant_id: String,
    pub id: String,
    pub request_id: String,
    pub merchant_id: String,
    pub amount_paise: i64,
    pub currency: String,
    pub purchase_digest: String,
    pub policy_version: i32,
    pub expires_at: DateTime<Utc>,
    pub consumptions: i16,
    /// The gate's MAC over the authority's terms (`ledger::row_mac`).
    pub row_mac: Option<String>,
}

pub(crate) const AUTHORITY_COLUMNS: &str = "tenant_id, id, request_id, merchant_id, amount_paise, \
    currency, purchase_digest, policy_version, expires_at, consumptions, row_mac";

impl Lockable for AuthorityRow {
    type Key<'k> = AuthorityKey<'k>;
    const SELECT: &'static str = "SELECT tenant_id, id, request_id, merchant_id, amount_paise, \
        currency, purchase_digest, policy_version, expires_at, consumptions, row_mac \
        FROM checkout_authorities";
}

/// A checkout authority with the agent that asked for its request, as a
/// payment locks it: who may consume it is known from the one statement that
/// locks it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AuthorityWithRequester {
    #[sqlx(flatten)]
    pub authority: AuthorityRow,
    pub requester: Option<String>,
}

impl Lockable for AuthorityWithRequester {
    type Key<'k> = AuthorityKey<'k>;
    /// Only the authority is locked: the request's agent is read by a scalar
    /// subquery, which a row-lock clause does not reach (the request is
    /// locked after the authority, in the lock order).
    const SELECT: &'static str = "SELECT tenant_id, id, request_id, merchant_id, amount_paise, \
        currency, purchase_digest, policy_version, expires_at, consumptions, row_mac, \
        (SELECT r.agent_id FROM payment_requests r \
          WHERE r.tenant_id = a.tenant_id AND r.id = a.request_id) AS requester \
        FROM checkout_authorities a";
}

/// A tenant's ledger head: the number and hash of the latest entry of its chain.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct LedgerHeadRow {
    pub tenant_id: String,
    pub seq: i64,
    pub hash: String,
}

impl Lockable for LedgerHeadRow {
    type Key<'k> = LedgerHeadKey<'k>;
    const SELECT: &'static str = "SELECT tenant_id, seq, hash FROM ledger_head";
    const ORDER: &'static str = " ORDER BY tenant_id";
}

/// A provider order, as the gate recorded it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct OrderRow {
    pub tenant_id: String,
    pub provider_order_id: String,
    pub request_id: String,
    pub amount_paise: i64,
    pub currency: String,
}
