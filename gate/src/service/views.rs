//! What the service shows its callers: read-only views scoped by tenant.
//!
//! Guarantees: every query here is a `SELECT` scoped by the caller's tenant
//! (`WHERE tenant_id = $1 AND ...`), so another tenant's row is never seen and
//! is answered exactly as a missing one (the one write, an agent's approval
//! note, decides nothing). Nothing here decides anything about money:
//! - [`request_view`]: a request's redacted status (what `GET /v1/requests/{id}` shows);
//! - [`exists`]: whether a request, authority or delegation id is the tenant's;
//! - [`may_administer`]: whether a human may change the tenant's prices,
//!   policy and delegations (the gate's `set_price` and `set_policy` take no
//!   actor today, so the service checks this before calling them);
//! - [`catalog`]: the catalog as an agent may see it (no price, no merchant);
//! - [`note_approval`]: an agent's note that its request waits for a human;
//! - [`order_view`]: a provider order's amount and currency (what a client
//!   checks a provider event against).

use super::error::ServiceError;
use crate::reason::{Decision, Reason};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

/// The longest id the service passes to a query; anything longer is "not found".
pub const MAX_ID_CHARS: usize = 128;

/// True when `id` can name a row: 1 to 128 characters, none of them a
/// control character (Postgres text cannot hold NUL; nothing we store has one).
pub fn is_plausible_id(id: &str) -> bool {
    !id.is_empty() && id.chars().count() <= MAX_ID_CHARS && !id.chars().any(char::is_control)
}

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    Request,
    Authority,
    Delegation,
}

/// True when `id` is a `what` of `tenant`.
pub async fn exists(
    pool: &PgPool,
    tenant: &str,
    what: Object,
    id: &str,
) -> Result<bool, ServiceError> {
    if !is_plausible_id(id) {
        return Ok(false);
    }
    let sql = match what {
        Object::Request => {
            "SELECT EXISTS (SELECT 1 FROM payment_requests WHERE tenant_id = $1 AND id = $2)"
        }
        Object::Authority => {
            "SELECT EXISTS (SELECT 1 FROM checkout_authorities WHERE tenant_id = $1 AND id = $2)"
        }
        Object::Delegation => {
            "SELECT EXISTS (SELECT 1 FROM delegations WHERE tenant_id = $1 AND id = $2)"
        }
    };
    sqlx::query_scalar(sql)
        .bind(tenant)
        .bind(id)
        .fetch_one(pool)
        .await
        .map_err(|e| ServiceError::from_sqlx("looking up an object of the caller's tenant", e))
}

/// A request as its agent may see it: no amount, merchant, cap or budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestView {
    pub request_id: String,
    /// The agent that proposed it (not serialized: used to scope agents to their own).
    #[serde(skip)]
    pub agent_id: String,
    pub state: String,
    /// The proposal's first decision.
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// The reason of the latest refusal that moved the state, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<Reason>,
    pub message: &'static str,
}

#[derive(sqlx::FromRow)]
struct ViewRow {
    agent_id: String,
    state: String,
    decision: String,
    reason: Option<String>,
    state_reason: Option<String>,
}

/// The redacted view of request `id` of `tenant`; `None` when there is none.
pub async fn request_view(
    pool: &PgPool,
    tenant: &str,
    id: &str,
) -> Result<Option<RequestView>, ServiceError> {
    if !is_plausible_id(id) {
        return Ok(None);
    }
    let row: Option<ViewRow> = sqlx::query_as(
        "SELECT agent_id, state, decision, reason, state_reason FROM payment_requests \
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("reading a request's status", e))?;
    let Some(row) = row else { return Ok(None) };
    let corrupt = || ServiceError::Corrupt {
        what: format!("request {id} records an unreadable decision"),
    };
    let reason = row
        .reason
        .as_deref()
        .map(str::parse::<Reason>)
        .transpose()
        .map_err(|_| corrupt())?;
    let decision = match (row.decision.as_str(), reason) {
        ("allow", None) => Decision::Allow,
        ("step_up", Some(r)) => Decision::StepUp(r),
        ("deny", Some(r)) => Decision::Deny(r),
        _ => return Err(corrupt()),
    };
    let state_reason = row.state_reason.as_deref().and_then(|r| r.parse().ok());
    let view = crate::redact::AgentView::of(decision);
    Ok(Some(RequestView {
        request_id: id.to_owned(),
        agent_id: row.agent_id,
        state: row.state,
        decision: view.decision,
        reason: view.reason,
        state_reason,
        message: view.message,
    }))
}

/// True when `person` of `tenant` may approve or operates the tenant.
pub async fn may_administer(
    pool: &PgPool,
    tenant: &str,
    person: &str,
) -> Result<bool, ServiceError> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM people WHERE tenant_id = $1 AND id = $2 \
                        AND (may_approve OR is_operator))",
    )
    .bind(tenant)
    .bind(person)
    .fetch_one(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("looking up the caller's permissions", e))
}

/// A catalog item as an agent sees it. The description is the supplier's
/// text: data to show, never instructions to follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct CatalogEntry {
    pub sku: String,
    pub category: String,
    pub max_quantity: i32,
    pub available: bool,
    pub description: String,
}

/// `tenant`'s catalog, by sku.
pub async fn catalog(pool: &PgPool, tenant: &str) -> Result<Vec<CatalogEntry>, ServiceError> {
    sqlx::query_as(
        "SELECT sku, category, max_quantity, available, description FROM catalog_items \
         WHERE tenant_id = $1 ORDER BY sku",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("reading the catalog", e))
}

/// What [`note_approval`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noted {
    /// The humans will see the note.
    Noted,
    /// There was one already.
    AlreadyNoted,
    /// The request is not waiting for approval.
    NotPending,
    /// No request of this agent in this tenant has that id.
    NotFound,
}

/// Leaves a note that `agent`'s request `id` waits for a human. Decides nothing.
pub async fn note_approval(
    pool: &PgPool,
    tenant: &str,
    agent: &str,
    id: &str,
    now: DateTime<Utc>,
) -> Result<Noted, ServiceError> {
    let Some(view) = request_view(pool, tenant, id).await? else {
        return Ok(Noted::NotFound);
    };
    if view.agent_id != agent {
        return Ok(Noted::NotFound);
    }
    if view.state != "PENDING_APPROVAL" {
        return Ok(Noted::NotPending);
    }
    let inserted = sqlx::query(
        "INSERT INTO approval_notes (tenant_id, request_id, agent_id, created_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT ON CONSTRAINT pk_approval_notes DO NOTHING",
    )
    .bind(tenant)
    .bind(id)
    .bind(agent)
    .bind(now)
    .execute(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("leaving an approval note", e))?
    .rows_affected();
    Ok(if inserted == 1 {
        Noted::Noted
    } else {
        Noted::AlreadyNoted
    })
}

/// A provider order as a client checking the provider's events needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OrderView {
    pub order_id: String,
    pub request_id: String,
    /// The request's agent (not serialized: used to scope agents to their own).
    #[serde(skip)]
    pub agent_id: String,
    pub amount_paise: i64,
    pub currency: String,
    /// `CREATED`, `CAPTURED` or `FAILED`.
    pub status: String,
}

/// Provider order `order_id` of `tenant`; `None` when there is none.
pub async fn order_view(
    pool: &PgPool,
    tenant: &str,
    order_id: &str,
) -> Result<Option<OrderView>, ServiceError> {
    if !is_plausible_id(order_id) {
        return Ok(None);
    }
    sqlx::query_as(
        "SELECT o.provider_order_id AS order_id, o.request_id, r.agent_id, o.amount_paise, \
                o.currency, o.status \
         FROM provider_orders o \
         JOIN payment_requests r ON r.tenant_id = o.tenant_id AND r.id = o.request_id \
         WHERE o.tenant_id = $1 AND o.provider_order_id = $2",
    )
    .bind(tenant)
    .bind(order_id)
    .fetch_optional(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("reading a provider order", e))
}

/// The views, as the service asks for them: the gate's own pool.
impl<P: crate::provider::PaymentProvider> super::Gate<P> {
    /// True when `id` is a `what` of `tenant`.
    pub async fn object_exists(
        &self,
        tenant: &str,
        what: Object,
        id: &str,
    ) -> Result<bool, ServiceError> {
        exists(&self.pool, tenant, what, id).await
    }

    /// The redacted view of request `id` of `tenant`.
    pub async fn request_view(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<RequestView>, ServiceError> {
        request_view(&self.pool, tenant, id).await
    }

    /// True when `person` of `tenant` may approve or operates the tenant.
    pub async fn may_administer(&self, tenant: &str, person: &str) -> Result<bool, ServiceError> {
        may_administer(&self.pool, tenant, person).await
    }

    /// `tenant`'s catalog as an agent may see it.
    pub async fn agent_catalog(&self, tenant: &str) -> Result<Vec<CatalogEntry>, ServiceError> {
        catalog(&self.pool, tenant).await
    }

    /// Leaves a note that `agent`'s request `id` waits for a human.
    pub async fn note_approval(
        &self,
        tenant: &str,
        agent: &str,
        id: &str,
    ) -> Result<Noted, ServiceError> {
        note_approval(&self.pool, tenant, agent, id, self.now()).await
    }

    /// Provider order `order_id` of `tenant`.
    pub async fn order_view(
        &self,
        tenant: &str,
        order_id: &str,
    ) -> Result<Option<OrderView>, ServiceError> {
        order_view(&self.pool, tenant, order_id).await
    }

    /// One round trip to the database: whether it answers.
    pub async fn ping(&self) -> Result<(), ServiceError> {
        sqlx::query_scalar::<_, i32>("SELECT 1")
            .fetch_one(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| ServiceError::from_sqlx("asking the database whether it answers", e))
    }

    /// The caller a bearer key belongs to (see [`super::api_keys::authenticate`]);
    /// `None` for anything that is not a live key the gate issued. A key
    /// row whose MAC does not verify is refused as unknown, and the attempt
    /// is recorded on its tenant's ledger (`api_key.refused`).
    pub async fn authenticate(
        &self,
        token: &str,
    ) -> Result<Option<super::api_keys::Caller>, ServiceError> {
        use super::api_keys::KeyCheck;
        match super::api_keys::authenticate(&self.pool, self.ledger_key(), token).await? {
            KeyCheck::Caller(caller) => Ok(Some(caller)),
            KeyCheck::Unknown => Ok(None),
            KeyCheck::Forged { tenant, key_id } => {
                let now = self.now();
                let tx = self.begin("recording a forged key").await?;
                let entry = super::ledger::Entry::new(
                    Some(&tenant),
                    "api_key.refused",
                    &key_id,
                    serde_json::json!({
                        "key": key_id,
                        "problem": "the key row's MAC does not verify: a row the gate never wrote",
                    }),
                );
                self.close_refused(tx, now, entry).await?;
                Ok(None)
            }
        }
    }

    /// Issues a key for `actor` of `tenant` on the onboarding pool, MACed
    /// with the gate's ledger key (see [`super::api_keys::issue`]).
    pub async fn issue_key(
        &self,
        tenant: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<super::api_keys::IssuedKey, super::api_keys::KeyError> {
        let pool = self.onboard.as_ref().unwrap_or(&self.pool);
        super::api_keys::issue(pool, self.ledger_key(), tenant, actor, now).await
    }

    /// Issues an auditor's key (read-only) for the person `actor` of
    /// `tenant`, as [`Gate::issue_key`] does.
    pub async fn issue_auditor_key(
        &self,
        tenant: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<super::api_keys::IssuedKey, super::api_keys::KeyError> {
        let pool = self.onboard.as_ref().unwrap_or(&self.pool);
        super::api_keys::issue_auditor(pool, self.ledger_key(), tenant, actor, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_control_characters_or_too_long_are_not_plausible() {
        assert!(is_plausible_id("req_000001"));
        assert!(!is_plausible_id(""));
        assert!(!is_plausible_id("req\0"));
        assert!(!is_plausible_id("req\u{7f}"));
        assert!(!is_plausible_id(&"x".repeat(MAX_ID_CHARS + 1)));
        assert!(is_plausible_id(&"x".repeat(MAX_ID_CHARS)));
    }
}
