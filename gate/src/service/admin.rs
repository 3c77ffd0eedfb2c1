//! The tenant's own changes: catalog prices, policy versions, and ending
//! requests that will not proceed.
//!
//! Guarantees: `set_policy` publishes version + 1 (never edits a version;
//! the database refuses that too) under the tenant row's lock, so two
//! publications cannot take the same number; every authority issued under an
//! older version is thereby refused `AUTHORITY_POLICY_CHANGED`. `set_price`
//! changes one catalog row of one tenant. `expire` and `cancel` move a request
//! that has not reached the provider to EXPIRED or CANCELLED and release its
//! budgets in the same transaction; `expire_lapsed` does so for every request
//! whose checkout authority ran out unused. Each change is appended to the ledger.

use serde_json::json;

use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::{RequestKey, TenantKey, lock};
use super::request_state::RequestState;
use super::requests::{self, Transition};
use super::rows::{REQUEST_LIFETIME_HOURS, RequestRow, TenantRow};
use super::world;
use super::{Gate, Outcome};
use crate::ident::is_ident;
use crate::policy::PolicyPatch;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};

/// States from which a request may still be expired or cancelled.
const ENDABLE: [RequestState; 3] = [
    RequestState::PendingApproval,
    RequestState::Authorized,
    RequestState::CheckoutIssued,
];

impl<P: PaymentProvider> Gate<P> {
    /// The merchant changes a price. Refused `PRICE_INVALID` for a price
    /// that is not a positive amount, `SKU_UNKNOWN` for a sku the tenant does
    /// not sell (or that is not an identifier).
    pub async fn set_price(
        &self,
        tenant: &str,
        sku: &str,
        price_paise: i64,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("changing a price").await?;
        let refuse = |known: bool, reason: Reason| {
            Entry::new(
                known.then_some(tenant),
                "catalog.price_refused",
                sku,
                json!({"sku": sku, "price_paise": price_paise, "decision": Decision::Deny(reason)}),
            )
        };
        if !identity::tenant_exists(&mut tx, tenant).await? {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(false, Reason::TenantUnknown),
                    Reason::TenantUnknown,
                )
                .await;
        }
        let refusal = if price_paise <= 0 {
            Some(Reason::PriceInvalid)
        } else if !is_ident(sku) {
            Some(Reason::SkuUnknown)
        } else {
            None
        };
        if let Some(reason) = refusal {
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        let changed = sqlx::query(
            "UPDATE catalog_items SET price_paise = $3 WHERE tenant_id = $1 AND sku = $2",
        )
        .bind(tenant)
        .bind(sku)
        .bind(price_paise)
        .execute(&mut *tx)
        .await
        .ctx("changing a price")?
        .rows_affected();
        if changed == 0 {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(true, Reason::SkuUnknown),
                    Reason::SkuUnknown,
                )
                .await;
        }
        let entry = Entry::new(
            Some(tenant),
            "catalog.price_changed",
            sku,
            json!({"sku": sku, "price_paise": price_paise}),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a price change")?;
        Ok(Outcome::ok(sku.to_owned()))
    }

    /// Publishes the current policy with `patch` applied as a new version; the
    /// outcome's id is the new version number.
    pub async fn set_policy(
        &self,
        tenant: &str,
        patch: &PolicyPatch,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("publishing a policy").await?;
        let refuse = |known: bool, reason: Reason| {
            Entry::new(
                known.then_some(tenant),
                "policy.refused",
                tenant,
                json!({"patch": patch, "decision": Decision::Deny(reason)}),
            )
        };
        let locked: Option<TenantRow> = if is_ident(tenant) {
            lock(&mut tx, TenantKey { tenant })
                .await
                .ctx("locking the tenant")?
        } else {
            None
        };
        if locked.is_none() {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(false, Reason::TenantUnknown),
                    Reason::TenantUnknown,
                )
                .await;
        }
        let current = world::current_policy(&mut tx, tenant).await?;
        let Some((version, Ok(policy))) = current.map(|c| (c.version, c.policy)) else {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(true, Reason::PolicyInvalid),
                    Reason::PolicyInvalid,
                )
                .await;
        };
        let next = version + 1;
        let patched = policy.patched(patch);
        if !patch.readable() || patched.publishable().is_err() {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(true, Reason::PolicyInvalid),
                    Reason::PolicyInvalid,
                )
                .await;
        }
        let patched = serde_json::to_value(patched).map_err(|e| ServiceError::Corrupt {
            what: format!("a patched policy does not serialize: {e}"),
        })?;
        sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(tenant)
        .bind(next)
        .bind(&patched)
        .bind(now)
        .execute(&mut *tx)
        .await
        .ctx("publishing a policy version")?;
        let entry = Entry::new(
            Some(tenant),
            "policy.published",
            next.to_string(),
            json!({"version": next, "patch": patch, "policy": patched}),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a policy version")?;
        Ok(Outcome::ok(next.to_string()))
    }

    /// Expires a request that has not reached the provider, releasing its budgets.
    pub async fn expire(&self, tenant: &str, request_id: &str) -> Result<Outcome, ServiceError> {
        self.end(tenant, request_id, None, RequestState::Expired)
            .await
    }

    /// Cancels a request that has not reached the provider, releasing its
    /// budgets. `actor` is the requesting agent or a human of its tenant.
    pub async fn cancel(
        &self,
        tenant: &str,
        request_id: &str,
        actor: &str,
    ) -> Result<Outcome, ServiceError> {
        self.end(tenant, request_id, Some(actor), RequestState::Cancelled)
            .await
    }

    /// Expires every request of `tenant` whose checkout authority ran out
    /// unused; returns how many.
    pub async fn expire_lapsed(&self, tenant: &str) -> Result<u64, ServiceError> {
        if !is_ident(tenant) {
            return Ok(0);
        }
        let now = self.now();
        let lapsed: Vec<String> = sqlx::query_scalar(
            "SELECT r.id FROM payment_requests r JOIN checkout_authorities a \
               ON a.tenant_id = r.tenant_id AND a.request_id = r.id \
             WHERE r.tenant_id = $1 AND r.state = 'CHECKOUT_ISSUED' AND a.consumptions = 0 \
               AND a.expires_at < $2 ORDER BY r.id",
        )
        .bind(tenant)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .ctx("looking for lapsed authorities")?;
        let mut ended = 0;
        for id in lapsed {
            if self.expire(tenant, &id).await?.is_ok() {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// The expiry sweep at the gate's clock: ends every request of `tenant`
    /// whose checkout authority ran out unused, and every request that
    /// outlived its lifetime (24 hours in PENDING_APPROVAL since it was
    /// proposed, or in AUTHORIZED since it was authorized), releasing their
    /// budgets. Returns how many requests it ended; running it twice ends
    /// nothing more.
    pub async fn expire_sweep(&self, tenant: &str) -> Result<u64, ServiceError> {
        if !is_ident(tenant) {
            return Ok(0);
        }
        let now = self.now();
        let limit = now - chrono::Duration::hours(REQUEST_LIFETIME_HOURS);
        let outlived: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM payment_requests WHERE tenant_id = $1 \
               AND ((state = 'PENDING_APPROVAL' AND created_at < $2) \
                 OR (state = 'AUTHORIZED' AND authorized_at < $2)) ORDER BY id",
        )
        .bind(tenant)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .ctx("looking for requests past their lifetime")?;
        let mut ended = self.expire_lapsed(tenant).await?;
        for id in outlived {
            if self.expire(tenant, &id).await?.is_ok() {
                ended += 1;
            }
        }
        Ok(ended)
    }

    async fn end(
        &self,
        tenant: &str,
        request_id: &str,
        actor: Option<&str>,
        to: RequestState,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("ending a request").await?;
        let kind = if to == RequestState::Expired {
            "expiry.refused"
        } else {
            "cancellation.refused"
        };
        let refuse = |known: bool, reason: Reason| {
            Entry::new(
                known.then_some(tenant),
                kind,
                request_id,
                json!({"request": request_id, "actor": actor, "decision": Decision::Deny(reason)}),
            )
        };
        if !identity::tenant_exists(&mut tx, tenant).await? {
            let reason = Reason::TenantUnknown;
            return self.refuse(tx, now, refuse(false, reason), reason).await;
        }
        let Some(found) = requests::find(&mut tx, tenant, request_id).await? else {
            let reason = Reason::StateTransitionInvalid;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        };
        if let Some(actor) = actor {
            let refusal = match identity::resolve(&mut tx, tenant, actor).await? {
                Err(reason) => Some(reason),
                // The requesting agent, or a human who may approve.
                Ok(Who::Agent) if actor != found.agent_id => Some(Reason::ActorNotPermitted),
                Ok(who @ Who::Person { .. }) if !who.may_approve() => {
                    Some(Reason::ActorNotPermitted)
                }
                Ok(_) => None,
            };
            if let Some(reason) = refusal {
                return self.refuse(tx, now, refuse(true, reason), reason).await;
            }
        }
        let request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant,
                request: request_id,
            },
        )
        .await
        .ctx("locking the request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("request {request_id} vanished"),
        })?;
        if !ENDABLE.contains(&request.state) {
            let reason = Reason::StateTransitionInvalid;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        Transition::new(&request, to).apply(&mut tx, now).await?;
        let entry = Entry::new(
            Some(tenant),
            if to == RequestState::Expired {
                "request.expired"
            } else {
                "request.cancelled"
            },
            request_id,
            json!({
                "request": request_id,
                "actor": actor,
                "from": request.state,
                "state": to,
                "released_paise": request.reserved_paise,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing the end of a request")?;
        Ok(Outcome::ok(request_id.to_owned()))
    }
}
