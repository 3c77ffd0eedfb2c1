//! The simulated provider, as the oracle models it: how it answers a `pay`,
//! the customer paying at the provider, and the reconcile job.
//!
//! Guarantees (spec, "Lifetimes and money that has moved" and the verbs
//! `provider`, `provider_capture`, `reconcile`):
//! - a mode set with `times: n` answers the next `n` calls that reach the
//!   provider, then `ok` again; a `pay` refused before it reaches the
//!   provider uses none of them;
//! - `ok` creates the order and the gate records it; `late` creates it but
//!   the gate does not hear of it (`PROVIDER_UNAVAILABLE`); `timeout` and
//!   `unavailable` create nothing (`PROVIDER_UNAVAILABLE`); in all three the
//!   request stays pending with its reservations and its authority spent;
//!   `reject` creates nothing and ends the request, releasing what it held
//!   (`PROVIDER_REJECTED`); so does `mismatch` (the answer is not the order
//!   asked for, and the gate records nothing): for `amount`, `currency`,
//!   `merchant` and `receipt` always, and for `id` when the latest order of
//!   another authority is one the gate recorded (its id is taken) or there
//!   is none (the provider answers as `reject`); an `id` mismatch with an
//!   order the gate never heard of is not modelled;
//! - reconcile settles every pending request (of one tenant, or of all): the
//!   order the provider holds for its authority is recorded, with its
//!   capture when the customer paid; with no order and the authority's
//!   [`AUTHORITY_MINUTES`](super::rules::AUTHORITY_MINUTES) over, the
//!   request ends and its reservations are released; otherwise nothing
//!   changes. Running it again changes nothing.

use chrono::Duration;
use gate_core::Reason;

use super::Outcome;
use super::payments;
use super::rules::{AUTHORITY_MINUTES, end};
use super::state::{Order, OrderState, RequestState, State};
use crate::verbs::{MismatchField, Provider, ProviderMode};

/// `provider`: how the next `pay` calls are answered.
pub fn set_mode(state: &mut State, p: &Provider) -> Outcome {
    state.provider_mode = p.mode();
    state.provider_field = p.field;
    state.provider_times = p.times;
    Outcome::ok()
}

/// Takes one call's mode, counting down `times`.
fn next_mode(state: &mut State) -> ProviderMode {
    let mode = state.provider_mode;
    if let Some(left) = state.provider_times.as_mut() {
        *left = left.saturating_sub(1);
        if *left == 0 {
            state.provider_mode = ProviderMode::Ok;
            state.provider_times = None;
        }
    }
    mode
}

/// A `pay` that passed every check of the gate reaches the provider with
/// authority `ai`: the answer, and the order the step names (the one the
/// provider created, whether or not the gate heard of it).
pub fn create_order(
    state: &mut State,
    ai: usize,
    amount: i64,
    currency: String,
) -> (Outcome, Option<usize>) {
    let ri = state.authorities[ai].request;
    state.authorities[ai].used = true;
    state.requests[ri].state = RequestState::Paid;
    let mode = next_mode(state);
    let mut order = |recorded: bool| {
        state.orders.push(Order {
            amount,
            currency: currency.clone(),
            state: OrderState::Created,
            authority: ai,
            recorded,
            provider_paid: false,
            further_payments: Vec::new(),
            capture_id: None,
        });
        Some(state.orders.len() - 1)
    };
    match mode {
        ProviderMode::Ok => (Outcome::ok(), order(true)),
        ProviderMode::Late => (Outcome::deny(Reason::ProviderUnavailable), order(false)),
        ProviderMode::Timeout | ProviderMode::Unavailable => {
            (Outcome::deny(Reason::ProviderUnavailable), None)
        }
        ProviderMode::Reject => {
            end(state, ri);
            (Outcome::deny(Reason::ProviderRejected), None)
        }
        ProviderMode::Mismatch => {
            let taken = state.orders.iter().rev().find(|o| o.authority != ai);
            if state.provider_field == Some(MismatchField::Id) && taken.is_some_and(|o| !o.recorded)
            {
                state.unsupported = Some(
                    "a provider answering with the id of an order the gate never recorded".into(),
                );
            }
            end(state, ri);
            (Outcome::deny(Reason::ProviderRejected), None)
        }
    }
}

/// `provider_capture`: the customer pays the order (a paid order stays paid).
pub fn capture(state: &mut State, order: usize) -> Outcome {
    state.orders[order].provider_paid = true;
    Outcome::ok()
}

/// `reconcile`, for `tenant` or (`None`) every tenant.
pub fn reconcile(state: &mut State, tenant: Option<&str>) -> Outcome {
    let in_scope = |state: &State, ri: usize| tenant.is_none_or(|t| state.requests[ri].tenant == t);
    let pending: Vec<usize> = (0..state.requests.len())
        .filter(|&ri| state.requests[ri].state == RequestState::Paid && in_scope(state, ri))
        .collect();
    // Authorities with a capture kept for them, whatever their request's
    // state: booked, not left off the books.
    let kept: Vec<usize> = state
        .kept
        .iter()
        .filter(|k| !k.settled && in_scope(state, state.authorities[k.authority].request))
        .map(|k| k.authority)
        .collect();
    for ai in kept {
        if state.requests[state.authorities[ai].request].state != RequestState::Paid {
            payments::book_kept(state, ai);
        }
    }
    for ri in pending {
        let Some(ai) = state.authorities.iter().position(|a| a.request == ri) else {
            continue;
        };
        match state.orders.iter().position(|o| o.authority == ai) {
            Some(oi) => {
                let order = &mut state.orders[oi];
                order.recorded = true;
                if order.provider_paid && order.state == OrderState::Created {
                    order.state = OrderState::Captured;
                }
                payments::book_kept(state, ai);
            }
            None => {
                payments::book_kept(state, ai);
                let expires =
                    state.authorities[ai].issued_at + Duration::minutes(AUTHORITY_MINUTES);
                if state.now > expires {
                    end(state, ri);
                }
            }
        }
    }
    Outcome::ok()
}
