//! `pay`: consumes the checkout authority and creates exactly one provider order.
//!
//! Guarantees: the authority is locked and re-read; a consumed one is
//! `AUTHORITY_ALREADY_USED`, one past its 15 minutes `AUTHORITY_EXPIRED`
//! (the request then EXPIRES and its budgets come back). The policy version,
//! the purchase's hash and the whole delegation chain are checked again at
//! consumption (`AUTHORITY_POLICY_CHANGED`, `AUTHORITY_PURCHASE_CHANGED`,
//! `DELEGATION_*`; the request is then CANCELLED and released). The
//! consumption (`ck_authority_consumed_once`) and the move to
//! PROVIDER_PENDING commit BEFORE the provider is called, so however many
//! callers race, one consumes and the provider is asked once. The order is
//! created through [`PaymentProvider`] with the authority id as its receipt
//! (a retry cannot make a second order) and recorded under
//! `uq_provider_order_per_authority`. A provider that fails or does not answer
//! in time is a [`ServiceError::Provider`]: the request stays PROVIDER_PENDING
//! with its budget reserved — never CAPTURED, never silently released.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::checkout::{ends_in, still_valid};
use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::lock;
use super::requests::{self, Hold};
use super::rows::{AUTHORITY_COLUMNS, AuthorityRow, RequestRow, state};
use super::{Gate, Outcome};
use crate::provider::{OrderRequest, PaymentProvider, ProviderError, ProviderOrder};
use crate::reason::{Decision, Reason};

impl<P: PaymentProvider> Gate<P> {
    /// `actor` consumes the authority `authority_id` of `tenant`; the
    /// outcome's id is the provider's order id. `actor` is the agent that
    /// asked for the purchase or a human of the tenant who may approve.
    pub async fn pay(
        &self,
        tenant: &str,
        authority_id: &str,
        actor: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let (authority, request) = match self.consume(tenant, authority_id, actor, now).await? {
            Ok(consumed) => consumed,
            Err(reason) => return Ok(Outcome::refused(reason)),
        };
        let order_request = OrderRequest {
            receipt: authority.id.clone(),
            merchant: authority.merchant_id.clone(),
            amount_paise: authority.amount_paise,
            currency: authority.currency.clone(),
        };
        let created = match tokio::time::timeout(
            self.provider_timeout(),
            self.provider().create_order(&order_request),
        )
        .await
        {
            Ok(Ok(order)) if matches_request(&order, &order_request) => Ok(order),
            Ok(Ok(order)) => Err(ProviderError::Rejected(format!(
                "order {} does not match the authority (receipt, merchant, amount or currency)",
                order.id
            ))),
            Ok(Err(e)) => Err(e),
            Err(_elapsed) => Err(ProviderError::Timeout),
        };
        match created {
            Ok(order) => self.record_order(&authority, &request, &order).await,
            Err(cause) => {
                if let Err(e) = self.record_provider_failure(&authority, &cause).await {
                    // The provider's failure is the error worth reporting; the
                    // request is PROVIDER_PENDING either way.
                    tracing::warn!(authority = %authority.id, "could not record a provider failure: {e}");
                }
                Err(ServiceError::Provider {
                    request_id: authority.request_id.clone(),
                    authority_id: authority.id.clone(),
                    cause,
                })
            }
        }
    }

    /// The first transaction: check and consume the authority, move the
    /// request to PROVIDER_PENDING. Committed before the provider is called.
    async fn consume(
        &self,
        tenant: &str,
        authority_id: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<(AuthorityRow, RequestRow), Reason>, ServiceError> {
        let mut tx = self.begin("consuming a checkout authority").await?;
        let refuse = |tenant: Option<&str>, reason: Reason| {
            Entry::new(
                tenant,
                "authority.refused",
                authority_id,
                json!({"authority": authority_id, "actor": actor, "decision": Decision::Deny(reason)}),
            )
        };
        let who = identity::resolve(&mut tx, tenant, actor).await?;
        if who == Err(Reason::TenantUnknown) {
            tx.rollback().await.ctx("ending a refused payment")?;
            return Ok(Err(Reason::TenantUnknown));
        }
        let sql = format!(
            "SELECT {AUTHORITY_COLUMNS} FROM checkout_authorities WHERE tenant_id = $1 AND id = $2"
        );
        let found: Option<AuthorityRow> = if crate::ident::is_ident(authority_id) {
            sqlx::query_as(&sql)
                .bind(tenant)
                .bind(authority_id)
                .fetch_optional(&mut *tx)
                .await
                .ctx("reading the checkout authority")?
        } else {
            None
        };
        let Some(found) = found else {
            self.close_refused(tx, now, refuse(Some(tenant), Reason::RequestNotAuthorized))
                .await?;
            return Ok(Err(Reason::RequestNotAuthorized));
        };
        let tenant = found.tenant_id.clone();
        let mut consumer_is_agent = false;
        {
            // An authority is consumed by the agent that asked for it, or by
            // a human of the tenant who may approve.
            let requester: Option<String> = sqlx::query_scalar(
                "SELECT agent_id FROM payment_requests WHERE tenant_id = $1 AND id = $2",
            )
            .bind(&tenant)
            .bind(&found.request_id)
            .fetch_optional(&mut *tx)
            .await
            .ctx("reading the requesting agent")?;
            let refusal = match who {
                Err(reason) => Some(reason),
                Ok(Who::Agent) if requester.as_deref() == Some(actor) => {
                    consumer_is_agent = true;
                    None
                }
                Ok(who) if !who.may_approve() => Some(Reason::ActorNotPermitted),
                Ok(_) => None,
            };
            if let Some(reason) = refusal {
                self.close_refused(tx, now, refuse(Some(&tenant), reason))
                    .await?;
                return Ok(Err(reason));
            }
        }
        let authority: AuthorityRow = lock(&mut tx, &[&tenant, authority_id])
            .await
            .ctx("locking the checkout authority")?
            .ok_or_else(|| ServiceError::Corrupt {
                what: format!("authority {authority_id} vanished"),
            })?;
        if authority.consumptions > 0 {
            self.close_refused(tx, now, refuse(Some(&tenant), Reason::AuthorityAlreadyUsed))
                .await?;
            return Ok(Err(Reason::AuthorityAlreadyUsed));
        }
        let request: RequestRow = lock(&mut tx, &[&tenant, &authority.request_id])
            .await
            .ctx("locking the request")?
            .ok_or_else(|| ServiceError::Corrupt {
                what: format!("the request of authority {authority_id} vanished"),
            })?;
        let expired = now > authority.expires_at;
        let refusal = if request.state != state::CHECKOUT_ISSUED {
            Some((Reason::RequestNotAuthorized, None))
        } else if expired {
            Some((Reason::AuthorityExpired, Some(state::EXPIRED)))
        } else {
            still_valid(
                &mut tx,
                &request,
                authority.policy_version,
                &authority.purchase_digest,
                now,
            )
            .await?
            .err()
            .map(|reason| (reason, Some(ends_in(reason))))
        };
        if let Some((reason, void)) = refusal {
            let mut entry = refuse(Some(&tenant), reason);
            if let Some(to) = void {
                requests::transition(&mut tx, &request, to, Some(reason), Hold::Keep, None, now)
                    .await?;
                entry.body["request_state"] = json!(to);
                entry.body["released_paise"] = json!(request.reserved_paise);
            }
            self.close_refused(tx, now, entry).await?;
            return Ok(Err(reason));
        }

        sqlx::query(
            "UPDATE checkout_authorities \
                SET consumptions = consumptions + 1, consumed_at = $3, consumed_by = $4, \
                    consumed_by_agent = $5 \
              WHERE tenant_id = $1 AND id = $2",
        )
        .bind(&tenant)
        .bind(authority_id)
        .bind(now)
        .bind((!consumer_is_agent).then_some(actor))
        .bind(consumer_is_agent.then_some(actor))
        .execute(&mut *tx)
        .await
        .ctx("consuming the checkout authority")?;
        requests::transition(
            &mut tx,
            &request,
            state::PROVIDER_PENDING,
            None,
            Hold::Keep,
            None,
            now,
        )
        .await?;
        let entry = Entry::new(
            Some(&tenant),
            "authority.consumed",
            authority_id,
            json!({
                "authority": authority_id,
                "request": authority.request_id,
                "actor": actor,
                "amount_paise": authority.amount_paise,
                "currency": authority.currency,
                "state": state::PROVIDER_PENDING,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a consumed authority")?;
        Ok(Ok((authority, request)))
    }

    /// The second transaction: record the order the provider created.
    async fn record_order(
        &self,
        authority: &AuthorityRow,
        request: &RequestRow,
        order: &ProviderOrder,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("recording a provider order").await?;
        sqlx::query(
            "INSERT INTO provider_orders (tenant_id, provider_order_id, authority_id, request_id, \
             merchant_id, amount_paise, currency, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&authority.tenant_id)
        .bind(&order.id)
        .bind(&authority.id)
        .bind(&request.id)
        .bind(&authority.merchant_id)
        .bind(authority.amount_paise)
        .bind(&authority.currency)
        .bind(now)
        .execute(&mut *tx)
        .await
        .ctx("recording the provider order")?;
        let entry = Entry::new(
            Some(&authority.tenant_id),
            "order.created",
            &order.id,
            json!({
                "order": order.id,
                "authority": authority.id,
                "request": request.id,
                "merchant": authority.merchant_id,
                "amount_paise": authority.amount_paise,
                "currency": authority.currency,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a provider order")?;
        Ok(Outcome::ok(order.id.clone()))
    }

    async fn record_provider_failure(
        &self,
        authority: &AuthorityRow,
        cause: &ProviderError,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut tx = self.begin("recording a provider failure").await?;
        let entry = Entry::new(
            Some(&authority.tenant_id),
            "provider.error",
            &authority.id,
            json!({
                "authority": authority.id,
                "request": authority.request_id,
                "error": cause.to_string(),
                "state": state::PROVIDER_PENDING,
                "reserved_paise": authority.amount_paise,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a provider failure")
    }
}

fn matches_request(order: &ProviderOrder, request: &OrderRequest) -> bool {
    order.receipt == request.receipt
        && order.merchant == request.merchant
        && order.amount_paise == request.amount_paise
        && order.currency == request.currency
}
