//! `checkout`: a human issues the single-use checkout authority.
//!
//! Guarantees: issued only by a human of the request's tenant (an agent is
//! `ACTOR_NOT_PERMITTED`), only for a request that is AUTHORIZED (else
//! `REQUEST_NOT_AUTHORIZED`; `uq_authority_per_request` holds one authority
//! per request even against another writer). Before issuing, the request is
//! re-checked against the world as it is now: a policy version published
//! since it was authorized is `AUTHORITY_POLICY_CHANGED`; a purchase that no
//! longer hashes to what was authorized (the catalog price moved, the sku
//! went away) is `AUTHORITY_PURCHASE_CHANGED`; the WHOLE delegation chain is
//! re-derived (a revoked or expired hop anywhere above the leaf refuses). Such
//! a request can never proceed, so it is CANCELLED and its budgets released
//! in the same transaction. The authority binds the SHA-256 of the canonical
//! purchase and the policy version, lives 15 minutes (`ck_authority_ttl`),
//! and has an unguessable id (an HMAC under the gate's secret).
//!
//! A request whose terms do not verify against the gate's MAC
//! (`row_mac`, keyed from the ledger key) as one the gate authorized (a row
//! a database login inserted, edited, or moved to AUTHORIZED itself) is
//! refused `AUTHORITY_PURCHASE_CHANGED` and recorded, before anything else
//! is done on its word: no authority, nothing released. A sku whose catalog
//! row does not verify derives no purchase: `AUTHORITY_PURCHASE_CHANGED`
//! (here and at pay).

use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;
use sqlx::PgConnection;

use super::error::{Ctx, ServiceError};
use super::identity;
use super::ledger::{self, Entry};
use super::lock::{RequestKey, lock};
use super::requests::Transition;
use super::rows::RequestRow;
use super::world;
use super::world::TenantCatalog;
use super::world_cache::WorldCache;
use super::{Gate, Outcome};
use crate::catalog::derive;
use crate::ident::is_ident;
use crate::proposal::PurchaseProposal;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;

/// How long a checkout authority lives.
pub const AUTHORITY_TTL_MINUTES: i64 = 15;

impl<P: PaymentProvider> Gate<P> {
    /// `actor` (a human) issues the checkout authority for `request_id`; the
    /// outcome's id is the authority id.
    pub async fn checkout(
        &self,
        tenant: &str,
        request_id: &str,
        actor: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self
            .begin_in(tenant, "issuing a checkout authority")
            .await?;
        let refuse = |tenant: Option<&str>, reason: Reason| {
            Entry::new(
                tenant,
                "checkout.refused",
                request_id,
                json!({"request": request_id, "actor": actor, "decision": Decision::Deny(reason)}),
            )
        };
        let who = identity::resolve(&mut tx, tenant, actor).await?;
        if who == Err(Reason::TenantUnknown) {
            tx.rollback().await.ctx("ending a refused checkout")?;
            return Ok(Outcome::refused(Reason::TenantUnknown));
        }
        // The request is locked where it is found: one statement. An id
        // that is not an identifier names no request (a tenant that is not
        // one was refused TENANT_UNKNOWN above).
        let found: Option<RequestRow> = if is_ident(request_id) {
            lock(
                &mut tx,
                RequestKey {
                    tenant,
                    request: request_id,
                },
            )
            .await
            .ctx("locking the request")?
        } else {
            None
        };
        let Some(request) = found else {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(Some(tenant), Reason::RequestNotAuthorized),
                    Reason::RequestNotAuthorized,
                )
                .await;
        };
        let tenant = request.tenant_id.clone();
        // The authority is issued by a human who may approve: never by an
        // agent, and never by a human who may not approve.
        let refusal = match who {
            Err(reason) => Some(reason),
            Ok(who) if !who.may_approve() => Some(Reason::ActorNotPermitted),
            Ok(_) => None,
        };
        if let Some(reason) = refusal {
            return self
                .refuse(tx, now, refuse(Some(&tenant), reason), reason)
                .await;
        }
        let (Some(version), Some(digest), Some(merchant), Some(amount), Some(currency)) = (
            request.policy_version,
            request.purchase_digest.clone(),
            request.merchant_id.clone(),
            request.amount_paise,
            request.currency.clone(),
        ) else {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(Some(&tenant), Reason::RequestNotAuthorized),
                    Reason::RequestNotAuthorized,
                )
                .await;
        };
        if request.state == RequestState::Authorized
            && !request.mac_holds(self.ledger_key(), ledger::STANDING_ALLOWED)
        {
            // Terms or a standing the gate did not write: no authority, and
            // nothing released on the row's word.
            let reason = Reason::AuthorityPurchaseChanged;
            return self
                .refuse(tx, now, refuse(Some(&tenant), reason), reason)
                .await;
        }
        if request.state == RequestState::Authorized && request.lifetime_over(now) {
            // Not checked out within its lifetime: it expires now, and its
            // budgets come back.
            let reason = Reason::RequestNotAuthorized;
            Transition::new(&request, RequestState::Expired)
                .because(reason)
                .apply(&mut tx, now)
                .await?;
            let mut entry = refuse(Some(&tenant), reason);
            entry.body["request_state"] = json!(RequestState::Expired);
            entry.body["released_paise"] = json!(request.reserved_paise);
            return self.refuse(tx, now, entry, reason).await;
        }
        if request.state != RequestState::Authorized {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(Some(&tenant), Reason::RequestNotAuthorized),
                    Reason::RequestNotAuthorized,
                )
                .await;
        }
        if let Err(reason) = still_valid(
            &mut tx,
            self.world_readers(),
            &request,
            version,
            &digest,
            now,
        )
        .await?
        {
            let to = ends_in(reason);
            Transition::new(&request, to)
                .because(reason)
                .apply(&mut tx, now)
                .await?;
            let mut entry = refuse(Some(&tenant), reason);
            entry.body["request_state"] = json!(to);
            entry.body["released_paise"] = json!(request.reserved_paise);
            return self.refuse(tx, now, entry, reason).await;
        }

        let authority_id = self.authority_id(&tenant, request_id, now);
        let expires_at = ledger::stored_instant(now + Duration::minutes(AUTHORITY_TTL_MINUTES));
        let row_mac = ledger::AuthorityTerms {
            tenant: &tenant,
            id: &authority_id,
            request: request_id,
            digest: &digest,
            amount_paise: amount,
            currency: &currency,
            merchant: &merchant,
            policy_version: version,
            expires_at,
        }
        .mac(self.ledger_key());
        sqlx::query(
            "INSERT INTO checkout_authorities (tenant_id, id, request_id, issued_by, merchant_id, \
             amount_paise, currency, purchase_digest, policy_version, issued_at, expires_at, \
             row_mac) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&tenant)
        .bind(&authority_id)
        .bind(request_id)
        .bind(actor)
        .bind(&merchant)
        .bind(amount)
        .bind(&currency)
        .bind(&digest)
        .bind(version)
        .bind(now)
        .bind(expires_at)
        .bind(&row_mac)
        .execute(&mut *tx)
        .await
        .ctx("issuing the checkout authority")?;
        let entry = Entry::new(
            Some(&tenant),
            "authority.issued",
            &authority_id,
            json!({
                "authority": authority_id,
                "request": request_id,
                "issued_by": actor,
                "merchant": merchant,
                "amount_paise": amount,
                "currency": currency,
                "purchase_digest": digest,
                "policy_version": version,
                "expires_at": expires_at,
            }),
        );
        Transition::new(&request, RequestState::CheckoutIssued)
            .apply_recording(&mut tx, now, self.ledger_key(), vec![entry])
            .await?;
        tx.commit().await.ctx("committing a checkout authority")?;
        Ok(Outcome::ok(authority_id))
    }

    /// An id nobody can guess without the gate's secret.
    fn authority_id(&self, tenant: &str, request_id: &str, now: DateTime<Utc>) -> String {
        let mac = Hmac::<Sha256>::new_from_slice(self.secret())
            .map(|mut mac| {
                mac.update(b"spendgate/authority-id/v1\0");
                mac.update(tenant.as_bytes());
                mac.update(b"\0");
                mac.update(request_id.as_bytes());
                mac.update(b"\0");
                mac.update(&now.timestamp_micros().to_be_bytes());
                hex::encode(mac.finalize().into_bytes())
            })
            // HMAC takes a key of any length; this branch cannot be reached.
            .unwrap_or_else(|_| format!("{tenant}-{request_id}"));
        format!("auth_{}", &mac[..mac.len().min(32)])
    }
}

/// What [`still_valid`] reads the world with: the worlds the gate keeps,
/// the humans' mandate keys a policy is checked under, and the ledger key
/// each catalog row's MAC is checked under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorldReaders<'a> {
    pub worlds: &'a WorldCache,
    pub keys: &'a mandate::Keyring,
    pub ledger: &'a ledger::LedgerKey,
}

impl<P: PaymentProvider> Gate<P> {
    /// This gate's [`WorldReaders`].
    pub(crate) fn world_readers(&self) -> WorldReaders<'_> {
        WorldReaders {
            worlds: self.worlds(),
            keys: self.mandate_keys(),
            ledger: self.ledger_key(),
        }
    }
}

/// The state a request that failed [`still_valid`] for `reason` ends in:
/// EXPIRED when the policy's validity window no longer holds it, CANCELLED
/// when the world it was authorized in has changed.
pub(crate) fn ends_in(reason: Reason) -> RequestState {
    match reason {
        Reason::PolicyExpired | Reason::PolicyNotYetValid => RequestState::Expired,
        _ => RequestState::Cancelled,
    }
}

/// Re-checks an authorized request against the world now: the policy
/// version and its validity window, the purchase's hash and the whole
/// delegation chain. The policy, the catalog and the chain are read in one
/// statement, the policy and the catalog only when the world `worlds` keeps
/// for the tenant is not the current one ([`world::world_and_chain`]); a
/// catalog comes with an enforceable policy only; a missing one derives
/// nothing, so the purchase would not match: fail closed. A catalog row
/// that does not verify against its MAC is not in the catalog read
/// ([`world::TenantCatalog`]), so it derives nothing either:
/// `AUTHORITY_PURCHASE_CHANGED`.
pub(crate) async fn still_valid(
    conn: &mut PgConnection,
    WorldReaders {
        worlds,
        keys,
        ledger,
    }: WorldReaders<'_>,
    request: &RequestRow,
    version: i32,
    digest: &str,
    now: DateTime<Utc>,
) -> Result<Result<(), Reason>, ServiceError> {
    let tenant = request.tenant_id.as_str();
    let (world, chain) = world::world_and_chain(
        conn,
        tenant,
        request.delegation_id.as_deref(),
        worlds.get(tenant),
        keys,
        ledger,
    )
    .await?;
    let Some(current) = &world.policy else {
        return Ok(Err(Reason::AuthorityPolicyChanged));
    };
    if current.version != version {
        return Ok(Err(Reason::AuthorityPolicyChanged));
    }
    let window = current
        .policy
        .as_ref()
        .map_err(|r| *r)
        .and_then(|p| p.validated());
    match window {
        Err(reason) => return Ok(Err(reason)),
        Ok((from, _)) if now < from => return Ok(Err(Reason::PolicyNotYetValid)),
        Ok((_, until)) if now > until => return Ok(Err(Reason::PolicyExpired)),
        Ok(_) => {}
    }
    let (Some(sku), Some(quantity), Some(purpose), Some(_leaf)) = (
        &request.sku,
        request.quantity,
        &request.purpose,
        &request.delegation_id,
    ) else {
        return Ok(Err(Reason::RequestNotAuthorized));
    };
    let proposal = PurchaseProposal {
        sku: sku.clone(),
        quantity: u32::try_from(quantity).unwrap_or(0),
        purpose: purpose.clone(),
    };
    let none = TenantCatalog::default();
    let catalog = world.catalog.as_ref().unwrap_or(&none);
    if !derive(&proposal, &catalog.items).is_ok_and(|purchase| purchase.digest() == digest) {
        return Ok(Err(Reason::AuthorityPurchaseChanged));
    }
    if let Err(reason) = chain.authorize(&request.agent_id, sku, 0, now) {
        return Ok(Err(reason));
    }
    Ok(Ok(()))
}
