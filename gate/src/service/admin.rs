//! The tenant's own changes: catalog prices, policy versions, and ending
//! requests that will not proceed.
//!
//! Guarantees: `publish_mandate` publishes a signed mandate only when its
//! signer is a human of the tenant who may approve, its signature verifies
//! under that human's configured key, and its version is above the one in
//! force, checked under the tenant row's lock, so two publications cannot
//! take the same number and an older mandate sent again publishes nothing
//! (never edits a version; the database refuses that too); every authority
//! issued under an older version is thereby refused `AUTHORITY_POLICY_CHANGED`. `set_price`
//! changes one catalog row of one tenant and writes its MAC
//! (`ledger::catalog_item_mac`) with the new price; a row whose MAC does not
//! verify (written or edited without the ledger key) is refused
//! `PRICE_INVALID`, never given the gate's MAC, and a row that changed
//! between its read and the write is not written (`SKU_UNKNOWN`). `expire` and `cancel` move a request
//! that has not reached the provider to EXPIRED or CANCELLED and release its
//! budgets in the same transaction; `expire_lapsed` does so for every request
//! whose checkout authority ran out unused. Each change is appended to the ledger.

use serde_json::json;

use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::{RequestKey, TenantKey, lock};
use super::requests::{self, Transition};
use super::rows::{REQUEST_LIFETIME_HOURS, RequestRow, TenantRow};
use super::world::CatalogRow;
use super::{Gate, Outcome};
use crate::ident::is_ident;
use crate::policy::Policy;
#[cfg(any(test, feature = "test-support"))]
use crate::policy::PolicyPatch;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;
#[cfg(any(test, feature = "test-support"))]
use mandate::Mandate;
use mandate::{MandateError, SignedMandate};

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
        let mut tx = self.begin_in(tenant, "changing a price").await?;
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
        let current: Option<CatalogRow> = sqlx::query_as(
            "SELECT sku, merchant_id, price_paise, currency, category, max_quantity, available, \
             description, row_mac FROM catalog_items WHERE tenant_id = $1 AND sku = $2",
        )
        .bind(tenant)
        .bind(sku)
        .fetch_optional(&mut *tx)
        .await
        .ctx("reading a catalog row")?;
        let current = current.map(CatalogRow::into_item);
        let row_verifies = current.as_ref().is_none_or(|(item, mac)| {
            ledger::catalog_item_mac_holds(self.ledger_key(), tenant, item, mac.as_deref())
        });
        if !row_verifies {
            // A row the gate did not write: its terms are not given the
            // gate's MAC by a price change.
            return self
                .refuse(
                    tx,
                    now,
                    refuse(true, Reason::PriceInvalid),
                    Reason::PriceInvalid,
                )
                .await;
        }
        let changed = match current {
            None => 0,
            Some((mut item, _)) => {
                item.price_paise = price_paise;
                let max_quantity = i32::try_from(item.max_quantity).unwrap_or(i32::MAX);
                sqlx::query(
                    "UPDATE catalog_items SET price_paise = $3, row_mac = $4 \
                      WHERE tenant_id = $1 AND sku = $2 AND merchant_id = $5 \
                        AND rtrim(currency) = $6 AND category = $7 AND max_quantity = $8 \
                        AND available = $9",
                )
                .bind(tenant)
                .bind(sku)
                .bind(price_paise)
                .bind(ledger::catalog_item_mac(self.ledger_key(), tenant, &item))
                .bind(&item.merchant)
                .bind(&item.currency)
                .bind(&item.category)
                .bind(max_quantity)
                .bind(item.available)
                .execute(&mut *tx)
                .await
                .ctx("changing a price")?
                .rows_affected()
            }
        };
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

    /// Publishes a signed mandate as the policy of `tenant` (the caller's);
    /// the outcome's id is the version published. Refused, with nothing
    /// published: `TENANT_UNKNOWN`; `TENANT_MISMATCH` when the mandate names
    /// another tenant; `MANDATE_SIGNER_NOT_PERMITTED` when the signer is
    /// not a human of the tenant who may approve or has no configured key;
    /// `MANDATE_SIGNATURE_INVALID` when the signature is missing, malformed
    /// or not by the signer's key; `POLICY_INVALID` when the version is not
    /// above the one in force (an older mandate sent again) or the policy
    /// does not validate.
    pub async fn publish_mandate(
        &self,
        tenant: &str,
        signed: &SignedMandate,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let m = &signed.mandate;
        let mut tx = self.begin_in(tenant, "publishing a mandate").await?;
        let refuse = |known: bool, reason: Reason| {
            Entry::new(
                known.then_some(tenant),
                "policy.refused",
                tenant,
                json!({
                    "version": m.version,
                    "signer": m.signer,
                    "policy": m.policy,
                    "decision": Decision::Deny(reason),
                }),
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
            let reason = Reason::TenantUnknown;
            return self.refuse(tx, now, refuse(false, reason), reason).await;
        }
        if m.tenant != tenant {
            let reason = Reason::TenantMismatch;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        let signer_may_approve = matches!(
            identity::resolve(&mut tx, tenant, &m.signer).await?,
            Ok(who @ Who::Person { .. }) if who.may_approve()
        );
        if !signer_may_approve {
            let reason = Reason::MandateSignerNotPermitted;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        let verified = signed.verify(self.mandate_keys());
        if matches!(verified, Err(MandateError::NoKey { .. })) {
            let reason = Reason::MandateSignerNotPermitted;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        if verified.is_err() {
            let reason = Reason::MandateSignatureInvalid;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        let digest = verified.map(|v| v.digest).unwrap_or_default();
        let in_force: Option<i32> =
            sqlx::query_scalar("SELECT max(version) FROM policy_versions WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_one(&mut *tx)
                .await
                .ctx("reading the version in force")?;
        let version = i32::try_from(m.version).unwrap_or(0);
        if version <= in_force.unwrap_or(0) {
            let reason = Reason::PolicyInvalid;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        let publishable = serde_json::from_value::<Policy>(m.policy.clone())
            .is_ok_and(|p| p.publishable().is_ok());
        if !publishable {
            let reason = Reason::PolicyInvalid;
            return self.refuse(tx, now, refuse(true, reason), reason).await;
        }
        sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at, signer, signature) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tenant)
        .bind(version)
        .bind(&m.policy)
        .bind(now)
        .bind(&m.signer)
        .bind(&signed.signature)
        .execute(&mut *tx)
        .await
        .ctx("publishing a policy version")?;
        let entry = Entry::new(
            Some(tenant),
            "policy.published",
            version.to_string(),
            json!({
                "version": version,
                "signer": m.signer,
                "mandate": digest,
                "signature": signed.signature,
                "policy": m.policy,
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a policy version")?;
        Ok(Outcome::ok(version.to_string()))
    }

    /// The tenant's latest policy version as stored: its number and its
    /// policy document (whether or not its signature verifies), `None` when
    /// the tenant has none. What a human patches to write the next mandate.
    pub async fn policy_document(
        &self,
        tenant: &str,
    ) -> Result<Option<(i32, serde_json::Value)>, ServiceError> {
        if !is_ident(tenant) {
            return Ok(None);
        }
        sqlx::query_as(
            "SELECT version, policy FROM policy_versions WHERE tenant_id = $1 \
             ORDER BY version DESC LIMIT 1",
        )
        .bind(tenant)
        .fetch_optional(&self.pool)
        .await
        .ctx("reading the policy document")
    }

    /// Tests' and the corpus's shorthand for a human's publication: the
    /// stored policy with `patch` applied ([`PolicyPatch::applied_to`]),
    /// as the next version, signed with the world key
    /// ([`mandate::world_secret`]) of the tenant's first human who may
    /// approve (by id), and published through [`Gate::publish_mandate`].
    #[cfg(any(test, feature = "test-support"))]
    pub async fn set_policy(
        &self,
        tenant: &str,
        patch: &PolicyPatch,
    ) -> Result<Outcome, ServiceError> {
        let (version, document) = self
            .policy_document(tenant)
            .await?
            .unwrap_or((0, json!({})));
        let signer: Option<String> = if is_ident(tenant) {
            sqlx::query_scalar(
                "SELECT id FROM people WHERE tenant_id = $1 AND may_approve ORDER BY id LIMIT 1",
            )
            .bind(tenant)
            .fetch_optional(&self.pool)
            .await
            .ctx("reading the tenant's first approver")?
        } else {
            None
        };
        let signer = signer.unwrap_or_default();
        let unsigned = Mandate::new(
            tenant,
            i64::from(version) + 1,
            signer.as_str(),
            patch.applied_to(&document),
        );
        let signed = unsigned
            .sign(&mandate::world_secret(tenant, &signer))
            .map_err(|e| ServiceError::Corrupt {
                what: format!("a mandate does not canonicalize: {e}"),
            })?;
        self.publish_mandate(tenant, &signed).await
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
        let mut tx = self.begin_in(tenant, "ending a request").await?;
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
