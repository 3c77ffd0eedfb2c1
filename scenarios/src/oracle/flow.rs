//! After the proposal: approval, checkout authority, payment and provider
//! events.
//!
//! Guarantees: only an approving human of the request's tenant, never the
//! requester, approves, and only a pending request; approval re-evaluates the
//! request (policy, catalog, budgets, chain) and reserves on success. A
//! checkout authority is issued once, to the requester, for an authorized
//! request whose chain is live, whose price and policy version have not
//! moved; it is spent once, within 15 minutes (inclusive), under the same
//! conditions; a request whose authority expired, or whose chain, price or
//! policy moved under it at checkout or payment, ends there and its
//! reservation is released. A provider event is checked signature first,
//! then body and type, event id, timestamp (24 h back, 5 min ahead,
//! inclusive), order, amount and currency; a capture is booked once,
//! whatever came before it, and a failed attempt moves nothing (the order
//! can still be paid, so the reservation stays). What the provider answers
//! a `pay` is [`super::provider`]'s.
//!
//! Every operation is scoped to the caller's tenant: an unknown tenant is
//! `TENANT_UNKNOWN`, and another tenant's request or authority is exactly a
//! missing one. An authorized request lives [`REQUEST_LIFETIME_HOURS`] from
//! authorization, inclusive: at that instant it may still be checked out,
//! one second later it is EXPIRED and its reservation released (lazily at
//! checkout, or by the `expire` sweep); a request waiting for a human waits
//! as long from its proposal, and an approval after that ends it
//! (`APPROVAL_NOT_PENDING`), as does the sweep. Checkout and pay check the policy's
//! validity window again (`POLICY_NOT_YET_VALID`, `POLICY_EXPIRED`) and end
//! the request when it fails. `cancel` ends a request that holds no consumed
//! authority, by the requesting agent or an approving human of its tenant.

use chrono::Duration;
use gate_core::Reason;

use super::OracleError;
use super::Outcome;
use super::chain;
use super::payments;
use super::proposal;
use super::rules::{
    AUTHORITY_MINUTES, POST_DATED_MINUTES, REQUEST_LIFETIME_HOURS, STALE_MINUTES, end,
};
use super::state::{Authority, Order, OrderState, RequestState, State};
use crate::verbs::{Approve, Checkout, Pay, Signature, Webhook};

/// The request a step names, if it belongs to the caller's tenant.
pub fn scoped(state: &State, request: Option<usize>, tenant: &str) -> Option<usize> {
    request.filter(|&ri| state.requests[ri].tenant == tenant)
}

/// Whether a request has outlived its lifetime: an authorized one from its
/// authorization, one waiting for a human from its proposal.
fn lapsed(state: &State, ri: usize) -> bool {
    let r = &state.requests[ri];
    let since = match r.state {
        RequestState::Authorized => r.authorized_at,
        RequestState::Pending => Some(r.created_at),
        _ => None,
    };
    since.is_some_and(|t| state.now > t + Duration::hours(REQUEST_LIFETIME_HOURS))
}

/// The policy's validity window at the gate's clock.
fn window(state: &State, tenant: &str) -> Result<(), Reason> {
    let Some(t) = state.tenant(tenant) else {
        return Err(Reason::TenantUnknown);
    };
    if state.now < t.policy.valid_from {
        return Err(Reason::PolicyNotYetValid);
    }
    if state.now > t.policy.valid_until {
        return Err(Reason::PolicyExpired);
    }
    Ok(())
}

/// The expiry sweep: authorized requests past their lifetime, and requests
/// whose checkout authority lapsed unused, end and release their budgets.
pub fn expire(state: &mut State, tenant: Option<&str>) {
    let lapsed_authorities: Vec<usize> = state
        .authorities
        .iter()
        .filter(|a| !a.used && state.now > a.issued_at + Duration::minutes(AUTHORITY_MINUTES))
        .map(|a| a.request)
        .collect();
    for ri in 0..state.requests.len() {
        if tenant.is_some_and(|t| state.requests[ri].tenant != t) {
            continue;
        }
        let checked_out = state.requests[ri].state == RequestState::CheckedOut
            && lapsed_authorities.contains(&ri);
        if lapsed(state, ri) || checked_out {
            end(state, ri);
        }
    }
}

/// `cancel`: the requesting agent, or a human of the tenant who may approve.
pub fn cancel(state: &mut State, tenant: &str, actor: &str, request: Option<usize>) -> Outcome {
    if state.tenant(tenant).is_none() {
        return Outcome::deny(Reason::TenantUnknown);
    }
    let Some(ri) = scoped(state, request, tenant) else {
        return Outcome::deny(Reason::StateTransitionInvalid);
    };
    let req = state.requests[ri].clone();
    let permitted = match state.tenant_of(actor) {
        None => Err(Reason::ActorUnknown),
        Some(t) if t.id != tenant => Err(Reason::TenantMismatch),
        Some(_) if actor == req.actor || state.may_approve(tenant, actor) => Ok(()),
        Some(_) => Err(Reason::ActorNotPermitted),
    };
    if let Err(r) = permitted {
        return Outcome::deny(r);
    }
    if lapsed(state, ri) {
        end(state, ri);
        return Outcome::deny(Reason::StateTransitionInvalid);
    }
    match req.state {
        RequestState::Pending | RequestState::Authorized | RequestState::CheckedOut => {
            end(state, ri);
            Outcome::ok()
        }
        _ => Outcome::deny(Reason::StateTransitionInvalid),
    }
}

fn price_now(state: &State, tenant: &str, sku: &str) -> Option<i64> {
    state
        .tenant(tenant)?
        .catalog
        .iter()
        .find(|i| i.sku == sku)
        .map(|i| i.price_paise)
}

pub fn approve(state: &mut State, tenant: &str, a: &Approve, request: Option<usize>) -> Outcome {
    if state.tenant(tenant).is_none() {
        return Outcome::deny(Reason::TenantUnknown);
    }
    let Some(ri) = scoped(state, request, tenant) else {
        return Outcome::deny(Reason::ApprovalNotPending);
    };
    let req = state.requests[ri].clone();
    if a.approver == req.actor {
        return Outcome::deny(Reason::ApprovalByRequester);
    }
    if !state.may_approve(&req.tenant, &a.approver) {
        return Outcome::deny(Reason::ApproverNotPermitted);
    }
    if req.state != RequestState::Pending {
        return Outcome::deny(if req.approved {
            Reason::ApprovalAlreadyUsed
        } else {
            Reason::ApprovalNotPending
        });
    }
    if lapsed(state, ri) {
        // Waited for a human past its lifetime: it ends instead.
        end(state, ri);
        return Outcome::deny(Reason::ApprovalNotPending);
    }
    let asked = req
        .purchase
        .clone()
        .expect("a pending request has a purchase");
    let verdict = proposal::purchase_checks(state, &req.tenant, &asked.sku, asked.quantity)
        .and_then(|now| {
            if now.unit_price != asked.unit_price {
                Err(Reason::AuthorityPurchaseChanged)
            } else {
                Ok(now)
            }
        })
        .and_then(|now| {
            chain::authority(state, &req.tenant, &req.actor, &now.sku, now.amount).map(|d| (now, d))
        });
    let version = state.tenant(&req.tenant).map_or(0, |t| t.policy_version);
    let today = state.today();
    let r = &mut state.requests[ri];
    match verdict {
        Err(reason) => {
            r.state = RequestState::Denied;
            Outcome::deny(reason)
        }
        Ok((purchase, delegation)) => {
            r.reserved = purchase.amount;
            r.reserved_day = Some(today);
            r.delegation = Some(delegation);
            r.state = RequestState::Authorized;
            r.approved = true;
            r.policy_version = version;
            r.authorized_at = Some(state.now);
            r.purchase = Some(purchase);
            Outcome::allow()
        }
    }
}

/// Who may issue a checkout authority: a human of the request's tenant who
/// may approve (the agent that asked never authorizes its own checkout).
fn checkout_actor(state: &State, tenant: &str, actor: &str) -> Result<(), Reason> {
    match state.tenant_of(actor) {
        None => Err(Reason::ActorUnknown),
        Some(t) if t.id != tenant => Err(Reason::TenantMismatch),
        Some(_) if state.may_approve(tenant, actor) => Ok(()),
        Some(_) => Err(Reason::ActorNotPermitted),
    }
}

/// Who may consume an authority: the agent that asked, or a human of the
/// tenant who may approve.
fn pay_actor(state: &State, tenant: &str, requester: &str, actor: &str) -> Result<(), Reason> {
    match state.tenant_of(actor) {
        None => Err(Reason::ActorUnknown),
        Some(t) if t.id != tenant => Err(Reason::TenantMismatch),
        Some(_) if actor == requester || state.may_approve(tenant, actor) => Ok(()),
        Some(_) => Err(Reason::ActorNotPermitted),
    }
}

/// Chain, price and policy version still what they were.
fn unchanged(state: &State, ri: usize, policy_version: u32) -> Result<(), Reason> {
    let req = &state.requests[ri];
    if let Some(d) = &req.delegation {
        chain::still_live(state, d)?;
    }
    let purchase = req
        .purchase
        .as_ref()
        .expect("an authorized request has a purchase");
    if price_now(state, &req.tenant, &purchase.sku) != Some(purchase.unit_price) {
        return Err(Reason::AuthorityPurchaseChanged);
    }
    let version = state.tenant(&req.tenant).map_or(0, |t| t.policy_version);
    if version != policy_version {
        return Err(Reason::AuthorityPolicyChanged);
    }
    Ok(())
}

pub fn checkout(
    state: &mut State,
    tenant: &str,
    c: &Checkout,
    request: Option<usize>,
) -> (Outcome, Option<usize>) {
    if state.tenant(tenant).is_none() {
        return (Outcome::deny(Reason::TenantUnknown), None);
    }
    let Some(ri) = scoped(state, request, tenant) else {
        return (Outcome::deny(Reason::RequestNotAuthorized), None);
    };
    let req = state.requests[ri].clone();
    if let Err(r) = checkout_actor(state, &req.tenant, &c.actor) {
        return (Outcome::deny(r), None);
    }
    if lapsed(state, ri) {
        end(state, ri);
        return (Outcome::deny(Reason::RequestNotAuthorized), None);
    }
    if req.state != RequestState::Authorized {
        return (Outcome::deny(Reason::RequestNotAuthorized), None);
    }
    if let Err(r) = window(state, &req.tenant) {
        end(state, ri);
        return (Outcome::deny(r), None);
    }
    if let Err(r) = unchanged(state, ri, req.policy_version) {
        end(state, ri);
        return (Outcome::deny(r), None);
    }
    let version = state.tenant(&req.tenant).map_or(0, |t| t.policy_version);
    state.authorities.push(Authority {
        request: ri,
        issued_at: state.now,
        policy_version: version,
        used: false,
    });
    state.requests[ri].state = RequestState::CheckedOut;
    (Outcome::ok(), Some(state.authorities.len() - 1))
}

pub fn pay(
    state: &mut State,
    tenant: &str,
    p: &Pay,
    authority: Option<usize>,
) -> (Outcome, Option<usize>) {
    if state.tenant(tenant).is_none() {
        return (Outcome::deny(Reason::TenantUnknown), None);
    }
    let authority =
        authority.filter(|&ai| state.requests[state.authorities[ai].request].tenant == tenant);
    let Some(ai) = authority else {
        return (Outcome::deny(Reason::RequestNotAuthorized), None);
    };
    let auth = state.authorities[ai].clone();
    let req = state.requests[auth.request].clone();
    if let Some(actor) = &p.actor
        && let Err(r) = pay_actor(state, &req.tenant, &req.actor, actor)
    {
        return (Outcome::deny(r), None);
    }
    if auth.used {
        return (Outcome::deny(Reason::AuthorityAlreadyUsed), None);
    }
    if state.now > auth.issued_at + Duration::minutes(AUTHORITY_MINUTES) {
        end(state, auth.request);
        return (Outcome::deny(Reason::AuthorityExpired), None);
    }
    if state.requests[auth.request].state != RequestState::CheckedOut {
        // Ended since checkout (cancelled, or swept).
        return (Outcome::deny(Reason::RequestNotAuthorized), None);
    }
    if let Err(r) = window(state, &req.tenant) {
        end(state, auth.request);
        return (Outcome::deny(r), None);
    }
    if let Err(r) = unchanged(state, auth.request, auth.policy_version) {
        end(state, auth.request);
        return (Outcome::deny(r), None);
    }
    let purchase = req.purchase.expect("a checked-out request has a purchase");
    super::provider::create_order(state, ai, purchase.amount, purchase.currency)
}

/// A provider event for the order a step named. A signed capture of a real
/// order for its own amount and currency is the customer paying at the
/// provider first, whatever the gate then says of the event. An order the
/// gate has not recorded (its answer came late) takes only a capture, which
/// is kept for reconcile; anything else about it is `WEBHOOK_UNKNOWN_ORDER`.
pub fn webhook(
    state: &mut State,
    step: usize,
    w: &Webhook,
    order: Option<usize>,
    event_id: &str,
) -> Result<Outcome, OracleError> {
    // A header written in a corpus file cannot know the bench's secret.
    if w.signature_header.is_some() || w.signature() != Signature::Valid {
        return Ok(Outcome::deny(Reason::WebhookSignatureInvalid));
    }
    let receipt = w
        .receipt
        .as_ref()
        .and_then(|r| state.produced.get(r))
        .and_then(|p| p.authority)
        .map(payments::authority_id);
    if let Some(raw) = w.raw_bytes_for(Some(receipt.as_deref().unwrap_or("missing"))) {
        return Ok(payments::raw_event(state, &raw, event_id));
    }
    let _ = step;
    let capture = matches!(w.event(), "payment.captured" | "order.paid");
    let as_ordered = |o: &Order| {
        w.amount_paise.unwrap_or(o.amount) == o.amount
            && w.currency.as_deref().unwrap_or(&o.currency) == o.currency
    };
    if let Some(oi) = order
        && capture
        && as_ordered(&state.orders[oi])
    {
        state.orders[oi].provider_paid = true;
    }
    let failed = w.event() == "payment.failed";
    if !capture && !failed {
        return Ok(Outcome::deny(Reason::WebhookEventIgnored));
    }
    if state.events.contains(event_id) {
        return Ok(Outcome::deny(Reason::WebhookDuplicate));
    }
    let offset = w.offset_minutes();
    if offset < -STALE_MINUTES {
        return Ok(Outcome::deny(Reason::WebhookStale));
    }
    if offset > POST_DATED_MINUTES {
        return Ok(Outcome::deny(Reason::WebhookPostDated));
    }
    let Some(oi) = order else {
        return Ok(Outcome::deny(Reason::WebhookUnknownOrder));
    };
    let o = state.orders[oi].clone();
    if !o.recorded {
        // Kept only as the provider sends it: a capture carrying its order
        // entity, which only an event for the order's own amount does.
        if failed || !as_ordered(&o) {
            return Ok(Outcome::deny(Reason::WebhookUnknownOrder));
        }
        state.events.insert(event_id.to_string());
        return Ok(Outcome::ok());
    }
    if w.amount_paise.unwrap_or(o.amount) != o.amount {
        return Ok(Outcome::deny(Reason::WebhookAmountMismatch));
    }
    if w.currency.as_deref().unwrap_or(&o.currency) != o.currency {
        return Ok(Outcome::deny(Reason::WebhookCurrencyMismatch));
    }
    // Money that has moved (spec): a failed attempt moves nothing (the order
    // can still be paid, the reservation stays); a capture is recorded once,
    // whatever came before it.
    state.events.insert(event_id.to_string());
    if capture {
        state.orders[oi].state = OrderState::Captured;
    }
    Ok(Outcome::ok())
}
