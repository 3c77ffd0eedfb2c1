//! A further captured payment of an order the gate already holds captured,
//! reported in a signed body written into a corpus file (`webhook.raw`):
//! money that moved twice for one order.
//!
//! Guarantees (spec, "Lifetimes and money that has moved" and the
//! `captured_paise` invariant): a fresh, well-formed capture of a recorded,
//! captured order, for its own amount and currency, under a payment id the
//! books do not hold yet (neither the order's first capture, whose id a
//! `webhook` step derives from the order alone, nor a further one) is money
//! on the books: it is accepted, its amount is counted again on the
//! request's day and hop past any cap or budget, and `captured_paise` counts
//! it. Every other signed body is left to the caller's reading. The
//! provider's order ids are the in-process provider's: `order_test_` and
//! the order's number, from 1, in the order the provider created them.

use sha2::{Digest, Sha256};

use super::Outcome;
use super::envelope;
use super::rules::{POST_DATED_MINUTES, STALE_MINUTES};
use super::state::{OrderState, State};

/// The in-process provider's id of the `index`-th order it created (from 0).
fn provider_order_id(index: usize) -> String {
    format!("order_test_{:06}", index + 1)
}

/// The payment id of an order's capture as a `webhook` step reports it:
/// Razorpay's shape, `pay_` and 14 hex characters of SHA-256("c:" + order).
fn first_capture_id(order_id: &str) -> String {
    let digest = Sha256::digest(format!("c:{order_id}"));
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("pay_{}", &hex[..14])
}

/// Books `raw` when it is a further captured payment of a captured order;
/// `None` leaves the body to the caller.
pub fn further_payment(state: &mut State, raw: &[u8], event_id: &str) -> Option<Outcome> {
    let e = envelope::read(raw).ok()?;
    if e.event == "payment.failed" || state.events.contains(event_id) {
        return None;
    }
    let age_minutes = (state.now.timestamp() - e.created_at).div_euclid(60);
    if age_minutes > STALE_MINUTES || -age_minutes > POST_DATED_MINUTES {
        return None;
    }
    let oi = (0..state.orders.len()).find(|&i| provider_order_id(i) == e.order_id)?;
    let order = &state.orders[oi];
    let fresh = e.payment_id != first_capture_id(&e.order_id)
        && !order.further_payments.contains(&e.payment_id);
    if !order.recorded
        || order.state != OrderState::Captured
        || order.amount != e.amount
        || order.currency != e.currency
        || !fresh
    {
        return None;
    }
    let ri = state.authorities[order.authority].request;
    state.orders[oi].further_payments.push(e.payment_id);
    state.requests[ri].reserved += e.amount;
    state.events.insert(event_id.to_string());
    Some(Outcome::ok())
}
