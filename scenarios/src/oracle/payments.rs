//! A signed body written into a corpus file (`webhook.raw` / `raw_b64`), as
//! the gate answers it: the event envelope, then the order it names.
//!
//! Guarantees (spec, "Lifetimes and money that has moved", "Who may act, and
//! what no caller can name" and the `captured_paise` invariant), checked in
//! the gate's order:
//! - a body that is no well-formed envelope gets [`envelope::read`]'s
//!   reason; then a redelivered event id is `WEBHOOK_DUPLICATE`, an event
//!   older than 24 hours `WEBHOOK_STALE`, one more than 5 minutes ahead
//!   `WEBHOOK_POST_DATED`;
//! - a body naming an order the gate recorded is checked against it: its
//!   amount (`WEBHOOK_AMOUNT_MISMATCH`), its currency
//!   (`WEBHOOK_CURRENCY_MISMATCH`), and its payment id, which names one
//!   payment of one order: an id the books hold for another order is
//!   `WEBHOOK_MALFORMED` and moves nothing. Otherwise it is applied: a
//!   payment already on the books for this order changes nothing, a failed
//!   attempt changes nothing, the first capture captures the order, and a
//!   further capture under a new payment id is money booked past any cap or
//!   budget (counted again on the request's day and hop, and in
//!   `captured_paise`);
//! - a `payment.authorized` body naming a recorded order (which the gate
//!   captures through the provider) is not modelled;
//! - a capture naming an order the gate has not recorded is kept for
//!   reconcile when its order entity's receipt names a consumed authority,
//!   for that authority's amount and currency, under a payment id the books
//!   do not hold; reconcile books it on the authority's request, under the
//!   order recorded for the authority: it captures a request that still
//!   waits, and is counted past any cap (NEEDS_REVIEW) on one that moved on;
//! - a body naming any other order is `WEBHOOK_UNKNOWN_ORDER`.
//!
//! The provider's order ids are the in-process provider's: `order_test_`
//! and the order's number, from 1, in the order the provider created them.
//! The oracle's authority ids are [`authority_id`]'s, which a `receipt` step
//! fills into a body. A raw body moves no money at the simulated provider.

use gate_core::Reason;
use sha2::{Digest, Sha256};

use super::Outcome;
use super::envelope;
use super::rules::{POST_DATED_MINUTES, STALE_MINUTES};
use super::state::{Kept, OrderState, RequestState, State};

/// The in-process provider's id of the `index`-th order it created (from 0).
pub fn provider_order_id(index: usize) -> String {
    format!("order_test_{:06}", index + 1)
}

/// The payment id of an order's capture as a `webhook` step reports it:
/// Razorpay's shape, `pay_` and 14 hex characters of SHA-256("c:" + order).
fn first_capture_id(order_id: &str) -> String {
    let digest = Sha256::digest(format!("c:{order_id}"));
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("pay_{}", &hex[..14])
}

/// The id the oracle gives the `index`-th authority (from 0), as a `receipt`
/// step fills it into a body.
pub fn authority_id(index: usize) -> String {
    format!("auth_oracle_{index:06}")
}

/// The authority a receipt names, if it is one the oracle issued.
fn authority_of(state: &State, receipt: &str) -> Option<usize> {
    (0..state.authorities.len()).find(|&i| authority_id(i) == receipt)
}

/// The order whose payment the books hold under `payment_id`, if any: one a
/// signed body named, or the capture of a captured order reported without
/// one (a `webhook` step's, whose id derives from its order alone).
fn owner_of(state: &State, payment_id: &str) -> Option<usize> {
    if let Some(&oi) = state.payments.get(payment_id) {
        return Some(oi);
    }
    state.orders.iter().enumerate().find_map(|(i, o)| {
        (o.recorded
            && o.state == OrderState::Captured
            && o.capture_id.is_none()
            && first_capture_id(&provider_order_id(i)) == payment_id)
            .then_some(i)
    })
}

/// The gate's answer to a signed body given as is (its signature already
/// checked), and what it books.
pub fn raw_event(state: &mut State, raw: &[u8], event_id: &str) -> Outcome {
    let e = match envelope::read(raw) {
        Ok(e) => e,
        Err(reason) => return Outcome::deny(reason),
    };
    if state.events.contains(event_id) {
        return Outcome::deny(Reason::WebhookDuplicate);
    }
    let age_minutes = (state.now.timestamp() - e.created_at).div_euclid(60);
    if age_minutes > STALE_MINUTES {
        return Outcome::deny(Reason::WebhookStale);
    }
    if -age_minutes > POST_DATED_MINUTES {
        return Outcome::deny(Reason::WebhookPostDated);
    }
    let Some(oi) = (0..state.orders.len())
        .find(|&i| state.orders[i].recorded && provider_order_id(i) == e.order_id)
    else {
        return keep(state, e, event_id);
    };
    if e.event == "payment.authorized" {
        state.unsupported = Some("a signed payment.authorized body naming a recorded order".into());
        return Outcome::deny(Reason::WebhookUnknownOrder);
    }
    let order = &state.orders[oi];
    if order.amount != e.amount {
        return Outcome::deny(Reason::WebhookAmountMismatch);
    }
    if order.currency != e.currency {
        return Outcome::deny(Reason::WebhookCurrencyMismatch);
    }
    match owner_of(state, &e.payment_id) {
        Some(other) if other != oi => return Outcome::deny(Reason::WebhookMalformed),
        Some(_) => {
            // This order's own payment, reported again: nothing moves.
            state.events.insert(event_id.to_string());
            return Outcome::ok();
        }
        None => {}
    }
    state.events.insert(event_id.to_string());
    state.payments.insert(e.payment_id.clone(), oi);
    if e.event == "payment.failed" {
        // One failed attempt: the order can still be paid.
        return Outcome::ok();
    }
    let order = &mut state.orders[oi];
    if order.state == OrderState::Created {
        order.state = OrderState::Captured;
        order.capture_id = Some(e.payment_id);
        return Outcome::ok();
    }
    // Money that moved twice for one order: on the books past any cap.
    order.further_payments.push(e.payment_id);
    let ri = state.authorities[order.authority].request;
    state.requests[ri].reserved += e.amount;
    Outcome::ok()
}

/// A capture of an order the gate has not recorded: kept for reconcile when
/// its receipt names a consumed authority and it is for that authority's
/// amount and currency under a payment id the books do not hold; anything
/// else about an unrecorded order is `WEBHOOK_UNKNOWN_ORDER`.
fn keep(state: &mut State, e: envelope::Envelope, event_id: &str) -> Outcome {
    let capture = matches!(e.event.as_str(), "payment.captured" | "order.paid");
    let authority = e.receipt.as_deref().and_then(|r| authority_of(state, r));
    let Some(ai) = authority.filter(|&ai| capture && state.authorities[ai].used) else {
        return Outcome::deny(Reason::WebhookUnknownOrder);
    };
    let ri = state.authorities[ai].request;
    let Some(purchase) = state.requests[ri].purchase.as_ref() else {
        return Outcome::deny(Reason::WebhookUnknownOrder);
    };
    if purchase.amount != e.amount {
        return Outcome::deny(Reason::WebhookAmountMismatch);
    }
    if purchase.currency != e.currency {
        return Outcome::deny(Reason::WebhookCurrencyMismatch);
    }
    if owner_of(state, &e.payment_id).is_some() {
        return Outcome::deny(Reason::WebhookMalformed);
    }
    state.events.insert(event_id.to_string());
    state.kept.push(Kept {
        authority: ai,
        order_id: e.order_id,
        payment_id: e.payment_id,
        amount: e.amount,
        settled: false,
    });
    Outcome::ok()
}

/// Reconcile's booking of the captures kept for authority `ai` that are
/// still off the books, each on the request its receipt names, under the
/// order recorded for the authority: the first capture of an order whose
/// request still waits captures it; any other (the order captured already,
/// or the request ended) is money booked past any cap on the request's day
/// and hop. A kept capture whose payment id the books already hold is
/// settled without booking it again.
pub fn book_kept(state: &mut State, ai: usize) {
    let ri = state.authorities[ai].request;
    for k in 0..state.kept.len() {
        if state.kept[k].authority != ai || state.kept[k].settled {
            continue;
        }
        let kept = state.kept[k].clone();
        if owner_of(state, &kept.payment_id).is_some() {
            state.kept[k].settled = true;
            continue;
        }
        let recorded = state
            .orders
            .iter()
            .position(|o| o.authority == ai && o.recorded);
        let oi = match recorded {
            Some(oi) => oi,
            None => {
                match (0..state.orders.len()).find(|&i| {
                    state.orders[i].authority == ai && provider_order_id(i) == kept.order_id
                }) {
                    Some(oi) => {
                        state.orders[oi].recorded = true;
                        oi
                    }
                    None => {
                        state.unsupported =
                        Some("a kept capture of an order the provider never created for its authority".into());
                        return;
                    }
                }
            }
        };
        state.payments.insert(kept.payment_id.clone(), oi);
        state.kept[k].settled = true;
        let waits = state.requests[ri].state == RequestState::Paid;
        let order = &mut state.orders[oi];
        if order.state == OrderState::Created {
            order.state = OrderState::Captured;
            order.capture_id = Some(kept.payment_id);
            if waits {
                continue;
            }
        } else {
            order.further_payments.push(kept.payment_id);
        }
        // The request had moved on: counted again, past any cap.
        state.requests[ri].reserved += kept.amount;
    }
}
