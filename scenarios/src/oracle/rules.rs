//! The oracle's fixed lifetimes and limits, and the one way a request ends
//! before payment.
//!
//! Guarantees: every lifetime the oracle checks (authority, request, provider
//! event age) is written once, here, in the spec's units; [`end`] is the only
//! place a request is ended unpaid, and it always releases the whole
//! reservation with it, so a release can never be forgotten or doubled.

use super::state::{RequestState, State};

/// Minutes a checkout authority lives.
pub const AUTHORITY_MINUTES: i64 = 15;
/// Oldest provider event accepted, in minutes.
pub const STALE_MINUTES: i64 = 24 * 60;
/// Furthest ahead a provider event may be, in minutes.
pub const POST_DATED_MINUTES: i64 = 5;
/// How long an authorized request waits for its checkout.
pub const REQUEST_LIFETIME_HOURS: i64 = 24;

/// Ends a request before payment and releases what it reserved.
pub(super) fn end(state: &mut State, ri: usize) {
    let r = &mut state.requests[ri];
    r.state = RequestState::Ended;
    r.reserved = 0;
}
