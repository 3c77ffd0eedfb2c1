//! A payment request's state, typed.
//!
//! Guarantees: [`RequestState`] has exactly the states the
//! `request_state_transition` trigger and the `payment_requests.state`
//! check know, spelled as they spell them (SCREAMING_SNAKE_CASE) in the
//! database, the ledger and the corpus (which deserializes a scenario's
//! `request_states` into this type); a stored or written spelling that is
//! not one of them is an error ([`UnknownState`]), never a default: the
//! gate reads a stored state through [`TryFrom<String>`], so a row holding
//! another spelling is a decode error. Which states hold a reservation
//! is [`RequestState::reserves`], the one list the transition and the
//! `ck_request_reservation_matches_state` check agree on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The state of a payment request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RequestState {
    Proposed,
    PendingApproval,
    Authorized,
    CheckoutIssued,
    ProviderPending,
    Captured,
    Failed,
    Denied,
    Expired,
    Cancelled,
    /// Money reached a request that had already ended: a human decides.
    NeedsReview,
}

impl RequestState {
    /// Every state, in the order a request meets them.
    pub const ALL: [RequestState; 11] = [
        RequestState::Proposed,
        RequestState::PendingApproval,
        RequestState::Authorized,
        RequestState::CheckoutIssued,
        RequestState::ProviderPending,
        RequestState::Captured,
        RequestState::Failed,
        RequestState::Denied,
        RequestState::Expired,
        RequestState::Cancelled,
        RequestState::NeedsReview,
    ];

    /// States that hold a reservation of the request's amount.
    pub const RESERVING: [RequestState; 4] = [
        RequestState::Authorized,
        RequestState::CheckoutIssued,
        RequestState::ProviderPending,
        RequestState::Captured,
    ];

    /// The spelling of the database, the ledger and the corpus.
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestState::Proposed => "PROPOSED",
            RequestState::PendingApproval => "PENDING_APPROVAL",
            RequestState::Authorized => "AUTHORIZED",
            RequestState::CheckoutIssued => "CHECKOUT_ISSUED",
            RequestState::ProviderPending => "PROVIDER_PENDING",
            RequestState::Captured => "CAPTURED",
            RequestState::Failed => "FAILED",
            RequestState::Denied => "DENIED",
            RequestState::Expired => "EXPIRED",
            RequestState::Cancelled => "CANCELLED",
            RequestState::NeedsReview => "NEEDS_REVIEW",
        }
    }

    /// Whether a request in this state holds its reservation.
    pub fn reserves(self) -> bool {
        RequestState::RESERVING.contains(&self)
    }
}

impl fmt::Display for RequestState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state spelling that is not one of [`RequestState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown request state `{0}`")]
pub struct UnknownState(pub String);

impl FromStr for RequestState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RequestState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

impl TryFrom<String> for RequestState {
    type Error = UnknownState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_spelling_and_serde() {
        for state in RequestState::ALL {
            assert_eq!(state.as_str().parse::<RequestState>(), Ok(state));
            assert_eq!(
                serde_json::to_string(&state).unwrap(),
                format!("\"{}\"", state.as_str())
            );
            assert_eq!(state.to_string(), state.as_str());
            let back: RequestState =
                serde_json::from_str(&format!("\"{}\"", state.as_str())).unwrap();
            assert_eq!(back, state);
        }
        assert!(serde_json::from_str::<RequestState>("\"Captured\"").is_err());
    }

    #[test]
    fn an_unknown_spelling_is_an_error() {
        assert_eq!(
            "captured".parse::<RequestState>(),
            Err(UnknownState("captured".into()))
        );
        assert!("".parse::<RequestState>().is_err());
        assert_eq!(
            RequestState::try_from("CAPTURED\0".to_string()),
            Err(UnknownState("CAPTURED\0".into()))
        );
        assert_eq!(
            RequestState::try_from("NEEDS_REVIEW".to_string()),
            Ok(RequestState::NeedsReview)
        );
    }

    #[test]
    fn only_the_four_money_states_reserve() {
        let reserving: Vec<RequestState> = RequestState::ALL
            .into_iter()
            .filter(|s| s.reserves())
            .collect();
        assert_eq!(reserving, RequestState::RESERVING);
        assert!(!RequestState::NeedsReview.reserves());
    }
}
