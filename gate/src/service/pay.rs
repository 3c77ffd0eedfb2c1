//! `pay`: consumes the checkout authority and creates exactly one provider order.
//!
//! Guarantees: the authority is read under its lock, in the statement that
//! locks it (with the agent that asked for its request); a consumed one is
//! `AUTHORITY_ALREADY_USED`, one past its 15 minutes `AUTHORITY_EXPIRED`
//! (the request then EXPIRES and its budgets come back). An authority
//! whose terms do not verify against the gate's MAC (`row_mac`, keyed with
//! the ledger key, which the database never holds) is
//! `AUTHORITY_PURCHASE_CHANGED` (recorded; the request is left as it is,
//! nothing released on an edited row's word), and so is an authority whose
//! request's terms or standing do not verify against its MAC as one the
//! gate authorized, before the purchase is
//! re-derived or any provider is called. The policy version,
//! the purchase's hash and the whole delegation chain are checked again at
//! consumption (`AUTHORITY_POLICY_CHANGED`, `AUTHORITY_PURCHASE_CHANGED`,
//! `DELEGATION_*`; the request is then CANCELLED and released). The
//! consumption (`ck_authority_consumed_once`) and the move to
//! PROVIDER_PENDING commit BEFORE the provider is called, so however many
//! callers race, one consumes and the provider is asked once. The order is
//! created through [`PaymentProvider`] with the authority id as its receipt
//! (so reconcile can find it again) and recorded under
//! `uq_provider_order_per_authority`, once, whoever records it first (pay or
//! reconcile). The answer must be the order asked for (`matches_request`:
//! receipt, merchant, amount, currency), else it is never recorded; an
//! answer whose id is already another authority's order (or that differs
//! from the order this authority already has) is the same mismatch, never a
//! database error. A
//! provider that definitely made no order (a 4xx, a mismatching answer) is
//! `PROVIDER_REJECTED`: the request FAILS and its budgets come back. One that
//! did not answer in time, failed with a 5xx or could not be reached may
//! have made the order: `PROVIDER_UNAVAILABLE`, and the request stays
//! PROVIDER_PENDING with its budget reserved until a capture or reconcile
//! settles it — never CAPTURED, never silently released. Both are refusal
//! outcomes, not engine errors.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::checkout::{ends_in, still_valid};
use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::{AuthorityKey, RequestKey, lock};
use super::requests::Transition;
use super::rows::{AuthorityRow, AuthorityWithRequester, RequestRow};
use super::{Gate, Outcome};
use crate::provider::{OrderRequest, PaymentProvider, ProviderError, ProviderOrder};
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;

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
        let (authority, _request) = match self.consume(tenant, authority_id, actor, now).await? {
            Ok(consumed) => consumed,
            Err(reason) => return Ok(Outcome::refused(reason)),
        };
        let order_request = OrderRequest {
            receipt: authority.id.clone(),
            merchant: authority.merchant_id.clone(),
            amount_paise: authority.amount_paise,
            currency: authority.currency.clone(),
        };
        let answered = tokio::time::timeout(
            self.provider_timeout(),
            self.provider().create_order(&order_request),
        )
        .await;
        let created = match answered {
            Ok(Ok(order)) => matches_request(&order, &order_request).map(|()| order),
            Ok(Err(e)) => Err(e),
            Err(_elapsed) => Err(ProviderError::Timeout),
        };
        match created {
            Ok(order) => self.record_order(&authority, &order.id).await,
            Err(cause) if cause.is_definite_refusal() => {
                tracing::warn!(authority = %authority.id, "the provider refused the order: {cause}");
                self.provider_rejected(&authority, &cause).await?;
                Ok(Outcome::refused(Reason::ProviderRejected))
            }
            Err(cause) => {
                tracing::warn!(authority = %authority.id, "no order from the provider: {cause}");
                self.record_provider_failure(&authority, &cause).await?;
                Ok(Outcome::refused(Reason::ProviderUnavailable))
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
        let mut tx = self
            .begin_in(tenant, "consuming a checkout authority")
            .await?;
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
            self.close_refused(tx, now, refuse(None, Reason::TenantUnknown))
                .await?;
            return Ok(Err(Reason::TenantUnknown));
        }
        // The authority, locked where it is found, and the agent that asked
        // for its request: one statement.
        let found: Option<AuthorityWithRequester> = if crate::ident::is_ident(authority_id) {
            lock(
                &mut tx,
                AuthorityKey {
                    tenant,
                    authority: authority_id,
                },
            )
            .await
            .ctx("locking the checkout authority")?
        } else {
            None
        };
        let Some(AuthorityWithRequester {
            authority,
            requester,
        }) = found
        else {
            self.close_refused(tx, now, refuse(Some(tenant), Reason::RequestNotAuthorized))
                .await?;
            return Ok(Err(Reason::RequestNotAuthorized));
        };
        let tenant = authority.tenant_id.clone();
        let mut consumer_is_agent = false;
        {
            // An authority is consumed by the agent that asked for it, or by
            // a human of the tenant who may approve.
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
        if authority.consumptions > 0 {
            self.close_refused(tx, now, refuse(Some(&tenant), Reason::AuthorityAlreadyUsed))
                .await?;
            return Ok(Err(Reason::AuthorityAlreadyUsed));
        }
        let request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &tenant,
                request: &authority.request_id,
            },
        )
        .await
        .ctx("locking the request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the request of authority {authority_id} vanished"),
        })?;
        let expired = now > authority.expires_at;
        let refusal = if request.state != RequestState::CheckoutIssued {
            Some((Reason::RequestNotAuthorized, None))
        } else if expired {
            Some((Reason::AuthorityExpired, Some(RequestState::Expired)))
        } else if !authority.mac_holds(self.ledger_key()) {
            // Terms the gate did not write (an edited amount, merchant,
            // currency, digest or expiry): never sent to the provider. The
            // request is left as it is: what its row says it reserves may
            // be edited too, so nothing is released on its word.
            Some((Reason::AuthorityPurchaseChanged, None))
        } else if !request.mac_holds(self.ledger_key(), ledger::STANDING_ALLOWED) {
            // A request whose terms or standing the gate did not write: as
            // an edited authority, refused and left as it is.
            Some((Reason::AuthorityPurchaseChanged, None))
        } else {
            still_valid(
                &mut tx,
                self.world_readers(),
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
                Transition::new(&request, to)
                    .because(reason)
                    .apply(&mut tx, now)
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
                "state": RequestState::ProviderPending,
            }),
        );
        Transition::new(&request, RequestState::ProviderPending)
            .apply_recording(&mut tx, now, self.ledger_key(), vec![entry])
            .await?;
        tx.commit().await.ctx("committing a consumed authority")?;
        Ok(Ok((authority, request)))
    }

    /// The second transaction: record the order the provider created, under
    /// its request's lock. Recorded whatever the request's state by then (a
    /// concurrent reconcile may have recorded it first, or settled the
    /// request): an order that exists at the provider is always on the books.
    pub(crate) async fn record_order(
        &self,
        authority: &AuthorityRow,
        order_id: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self
            .begin_in(&authority.tenant_id, "recording a provider order")
            .await?;
        let _request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &authority.tenant_id,
                request: &authority.request_id,
            },
        )
        .await
        .ctx("locking the order's request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the request of authority {} vanished", authority.id),
        })?;
        let inserted = insert_order(&mut tx, authority, order_id, now).await?;
        if !inserted && !order_is_authoritys(&mut tx, authority, order_id).await? {
            // The id is already another authority's order, or this authority
            // already has a different one: the provider mixed up its answers.
            drop(tx);
            let cause = ProviderError::Mismatch {
                order_id: order_id.to_owned(),
            };
            tracing::warn!(authority = %authority.id, "the provider's order is not this authority's: {cause}");
            self.provider_rejected(authority, &cause).await?;
            return Ok(Outcome::refused(Reason::ProviderRejected));
        }
        if inserted {
            let entry = Entry::new(
                Some(&authority.tenant_id),
                "order.created",
                order_id,
                json!({
                    "order": order_id,
                    "authority": authority.id,
                    "request": authority.request_id,
                    "merchant": authority.merchant_id,
                    "amount_paise": authority.amount_paise,
                    "currency": authority.currency,
                }),
            );
            ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        }
        tx.commit().await.ctx("committing a provider order")?;
        Ok(Outcome::ok(order_id.to_owned()))
    }

    /// The provider definitely made no order: the request FAILS and its
    /// budgets come back (`PROVIDER_REJECTED`).
    async fn provider_rejected(
        &self,
        authority: &AuthorityRow,
        cause: &ProviderError,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut tx = self
            .begin_in(&authority.tenant_id, "recording a provider refusal")
            .await?;
        let request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &authority.tenant_id,
                request: &authority.request_id,
            },
        )
        .await
        .ctx("locking the request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the request of authority {} vanished", authority.id),
        })?;
        let mut body = json!({
            "authority": authority.id,
            "request": authority.request_id,
            "error": cause.to_string(),
            "decision": Decision::Deny(Reason::ProviderRejected),
        });
        // Only a request still waiting on this answer fails; one that a
        // concurrent reconcile or capture already settled keeps its state.
        if request.state == RequestState::ProviderPending {
            Transition::new(&request, RequestState::Failed)
                .because(Reason::ProviderRejected)
                .apply(&mut tx, now)
                .await?;
            body["state"] = json!(RequestState::Failed);
            body["released_paise"] = json!(request.reserved_paise);
        }
        let entry = Entry::new(
            Some(&authority.tenant_id),
            "provider.rejected",
            &authority.id,
            body,
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a provider refusal")
    }

    /// No answer, or a 5xx: the request stays PROVIDER_PENDING with its
    /// reservations until a capture or reconcile settles it
    /// (`PROVIDER_UNAVAILABLE`).
    async fn record_provider_failure(
        &self,
        authority: &AuthorityRow,
        cause: &ProviderError,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut tx = self
            .begin_in(&authority.tenant_id, "recording a provider failure")
            .await?;
        let entry = Entry::new(
            Some(&authority.tenant_id),
            "provider.error",
            &authority.id,
            json!({
                "authority": authority.id,
                "request": authority.request_id,
                "error": cause.to_string(),
                "decision": Decision::Deny(Reason::ProviderUnavailable),
                "state": RequestState::ProviderPending,
                "reserved_paise": authority.amount_paise,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a provider failure")
    }
}

/// Inserts the order row for `authority`; false when the authority already
/// has an order (`uq_provider_order_per_authority`) or the id is already
/// recorded (`pk_provider_orders`, `uq_provider_order_id`), perhaps for
/// another authority: a conflict is an answer, never an engine error.
/// `fk_provider_order_matches_authority` makes the row carry exactly the
/// authority's request, merchant, amount and currency.
pub(crate) async fn insert_order(
    conn: &mut sqlx::PgConnection,
    authority: &AuthorityRow,
    order_id: &str,
    now: DateTime<Utc>,
) -> Result<bool, ServiceError> {
    let inserted: Option<String> = sqlx::query_scalar(
        "INSERT INTO provider_orders (tenant_id, provider_order_id, authority_id, request_id, \
         merchant_id, amount_paise, currency, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT DO NOTHING \
         RETURNING provider_order_id",
    )
    .bind(&authority.tenant_id)
    .bind(order_id)
    .bind(&authority.id)
    .bind(&authority.request_id)
    .bind(&authority.merchant_id)
    .bind(authority.amount_paise)
    .bind(&authority.currency)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await
    .ctx("recording the provider order")?;
    Ok(inserted.is_some())
}

/// Whether `order_id` is recorded as `authority`'s own order.
async fn order_is_authoritys(
    conn: &mut sqlx::PgConnection,
    authority: &AuthorityRow,
    order_id: &str,
) -> Result<bool, ServiceError> {
    let owner: Option<(String, String)> = sqlx::query_as(
        "SELECT tenant_id, authority_id FROM provider_orders WHERE provider_order_id = $1",
    )
    .bind(order_id)
    .fetch_optional(&mut *conn)
    .await
    .ctx("reading the provider order's owner")?;
    Ok(owner.is_some_and(|(tenant, id)| tenant == authority.tenant_id && id == authority.id))
}

/// The provider's answer must be the order asked for: the same receipt (the
/// authority), merchant, amount and currency. Anything else is refused as
/// [`ProviderError::Mismatch`]; the answer is never recorded.
pub(crate) fn matches_request(
    order: &ProviderOrder,
    request: &OrderRequest,
) -> Result<(), ProviderError> {
    if order.receipt != request.receipt
        || order.merchant != request.merchant
        || order.amount_paise != request.amount_paise
        || order.currency != request.currency
    {
        return Err(ProviderError::Mismatch {
            order_id: order.id.clone(),
        });
    }
    Ok(())
}
