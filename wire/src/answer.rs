//! What the service answers: a status and a JSON body, never a stack trace.
//!
//! Guarantees:
//! - A refusal is `{"decision": "deny", "reason": CODE, "message": ...}`. The
//!   status follows from the code alone ([`status_of`] for the gate's
//!   reasons, [`WireCode::status`] for the service's own), as the table in
//!   `docs/http.md` lists; `every_reason_has_a_documented_status` pins the two together.
//! - An engine error ([`engine_error`]) is 503 `ENGINE_UNAVAILABLE` with a
//!   fresh request id, in the body and in `x-request-id`; the error's text
//!   (sqlx's, serde's, the provider's) goes to `tracing` under that id and
//!   never to the client.
//! - Messages are fixed sentences: nothing a client sent is echoed back.

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gate::reason::{Decision, Reason};
use gate::redact::AgentView;
use gate::service::{Outcome, ServiceError};
use rand::Rng as _;
use rand::rand_core::UnwrapErr;
use rand::rngs::SysRng;
use serde_json::{Value, json};

/// The HTTP status of a gate refusal.
pub fn status_of(reason: Reason) -> StatusCode {
    use Reason::*;
    match reason {
        ProposalTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ProposalMalformed | ProposalUnknownField | QuantityInvalid | QuantityExceedsMax
        | SkuUnknown | SkuUnavailable | PurposeInvalid | AmountOverflow => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ActorUnknown | ActorNotPermitted | TenantUnknown | TenantMismatch => StatusCode::FORBIDDEN,
        PriceInvalid | PolicyInvalid | DelegationInvalid => StatusCode::UNPROCESSABLE_ENTITY,
        VelocityLimit | DenialRateLimit => StatusCode::TOO_MANY_REQUESTS,
        CurrencyNotAllowed
        | MerchantNotAllowed
        | CategoryNotAllowed
        | AmountExceedsTransactionCap
        | DailyBudgetExhausted
        | PolicyNotYetValid
        | PolicyExpired
        | ApprovalRequired => StatusCode::FORBIDDEN,
        DelegationMissing
        | DelegationBudgetExhausted
        | DelegationSkuOutOfScope
        | DelegationRevoked
        | DelegationExpired
        | DelegationWidens
        | DelegationGrantorNotPermitted
        | DelegationDepthExceeded
        | DelegationChainBroken => StatusCode::FORBIDDEN,
        ApprovalByRequester | ApproverNotPermitted => StatusCode::FORBIDDEN,
        MandateSignatureInvalid | MandateSignerNotPermitted => StatusCode::FORBIDDEN,
        MandateConstraintUnknown => StatusCode::UNPROCESSABLE_ENTITY,
        ApprovalAlreadyUsed | ApprovalNotPending => StatusCode::CONFLICT,
        RequestNotAuthorized
        | AuthorityAlreadyUsed
        | AuthorityPurchaseChanged
        | AuthorityPolicyChanged => StatusCode::CONFLICT,
        AuthorityExpired => StatusCode::GONE,
        WebhookSignatureInvalid | WebhookMalformed => StatusCode::BAD_REQUEST,
        // Acknowledged: a 2xx stops the provider retrying what is already done or never acts.
        WebhookDuplicate | WebhookEventIgnored => StatusCode::OK,
        WebhookAmountMismatch
        | WebhookCurrencyMismatch
        | WebhookUnknownOrder
        | WebhookStale
        | WebhookPostDated => StatusCode::UNPROCESSABLE_ENTITY,
        StateTransitionInvalid => StatusCode::CONFLICT,
        ProviderRejected => StatusCode::BAD_GATEWAY,
        ProviderUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        IdempotencyKeyReused => StatusCode::CONFLICT,
    }
}

/// Refusals of the service itself, before (or instead of) the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireCode {
    /// No credential, or one that is malformed, unknown or revoked.
    Unauthenticated,
    /// No such object in the caller's tenant (another tenant's included), or no such route.
    NotFound,
    /// The route exists, the method does not.
    MethodNotAllowed,
    /// The body is not declared `application/json`.
    ContentTypeUnsupported,
    /// A body past the route's limit (the agent's propose says `PROPOSAL_TOO_LARGE`).
    BodyTooLarge,
    /// A human route's body does not parse into what the route takes.
    BodyInvalid,
    /// A header the route reads is repeated or holds a value it cannot take.
    HeaderInvalid,
    /// The request took longer than the service's timeout.
    Timeout,
    /// The body did not arrive whole before the body deadline.
    BodyTimeout,
    /// The gate could not decide (database or provider down): retry later.
    EngineUnavailable,
}

impl WireCode {
    /// Every code, for the documentation test.
    pub const ALL: &'static [WireCode] = &[
        WireCode::Unauthenticated,
        WireCode::NotFound,
        WireCode::MethodNotAllowed,
        WireCode::ContentTypeUnsupported,
        WireCode::BodyTooLarge,
        WireCode::BodyInvalid,
        WireCode::HeaderInvalid,
        WireCode::Timeout,
        WireCode::BodyTimeout,
        WireCode::EngineUnavailable,
    ];

    pub fn code(self) -> &'static str {
        match self {
            WireCode::Unauthenticated => "UNAUTHENTICATED",
            WireCode::NotFound => "NOT_FOUND",
            WireCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            WireCode::ContentTypeUnsupported => "CONTENT_TYPE_UNSUPPORTED",
            WireCode::BodyTooLarge => "BODY_TOO_LARGE",
            WireCode::BodyInvalid => "BODY_INVALID",
            WireCode::HeaderInvalid => "HEADER_INVALID",
            WireCode::Timeout => "TIMEOUT",
            WireCode::BodyTimeout => "BODY_TIMEOUT",
            WireCode::EngineUnavailable => "ENGINE_UNAVAILABLE",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            WireCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            WireCode::NotFound => StatusCode::NOT_FOUND,
            WireCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            WireCode::ContentTypeUnsupported => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            WireCode::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            WireCode::BodyInvalid => StatusCode::UNPROCESSABLE_ENTITY,
            WireCode::HeaderInvalid => StatusCode::BAD_REQUEST,
            WireCode::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            WireCode::Timeout | WireCode::EngineUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn message(self) -> &'static str {
        match self {
            WireCode::Unauthenticated => "A valid bearer API key is required.",
            WireCode::NotFound => "Not found.",
            WireCode::MethodNotAllowed => "This route does not take that method.",
            WireCode::ContentTypeUnsupported => "The body must be sent as application/json.",
            WireCode::BodyTooLarge => "The body is too large.",
            WireCode::BodyInvalid => "The body is not what this route takes.",
            WireCode::HeaderInvalid => "A header holds a value this route cannot take.",
            WireCode::Timeout => "The request took too long; nothing is known to have changed.",
            WireCode::BodyTimeout => {
                "The body did not arrive in time; nothing was done. Send it again, whole."
            }
            WireCode::EngineUnavailable => "The gate could not decide; retry later.",
        }
    }

    /// The answer for this code.
    pub fn response(self) -> Response {
        let mut response = (
            self.status(),
            Json(json!({"decision": "deny", "reason": self.code(), "message": self.message()})),
        )
            .into_response();
        if self == WireCode::Unauthenticated {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// A fresh request id: 16 hex characters from the OS's random source.
pub fn new_request_id() -> String {
    let mut bytes = [0u8; 8];
    UnwrapErr(SysRng).fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// 503 with a request id; the error's text goes to the log only.
pub fn engine_error(action: &'static str, error: &ServiceError) -> Response {
    let request_id = new_request_id();
    tracing::error!(%request_id, action, error = %error, "the gate could not decide");
    let code = WireCode::EngineUnavailable;
    let mut response = (
        code.status(),
        Json(json!({
            "decision": "error",
            "reason": code.code(),
            "message": code.message(),
            "request_id": request_id,
        })),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// The status of a decision: allow 200 (or `allowed`), step-up 202, refusal per [`status_of`].
pub fn decision_status(decision: Decision, allowed: StatusCode) -> StatusCode {
    match decision {
        Decision::Allow => allowed,
        Decision::StepUp(_) => StatusCode::ACCEPTED,
        Decision::Deny(reason) => status_of(reason),
    }
}

/// A human route's answer for the gate's [`Outcome`]; `done` is the
/// message when the call did what it asked: what it did.
pub fn outcome(outcome: &Outcome, done: &'static str) -> Response {
    let view = AgentView::of(outcome.decision);
    let message = if outcome.decision == Decision::Allow {
        done
    } else {
        view.message
    };
    let mut body = json!({"decision": view.decision, "message": message});
    if let Some(reason) = view.reason {
        body["reason"] = Value::from(reason.code());
    }
    if let Some(id) = &outcome.id {
        body["id"] = Value::from(id.as_str());
    }
    if let Some(constraint) = &outcome.constraint {
        body["constraint"] = Value::from(constraint.as_str());
    }
    (
        decision_status(outcome.decision, StatusCode::OK),
        Json(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/http.md lists every code with its status; this reads the table back.
    #[test]
    fn every_reason_has_a_documented_status() {
        let doc = include_str!("../../docs/http.md");
        let rows: Vec<(String, u16)> = doc
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let code = cells.get(1)?.trim_matches('`');
                let status: u16 = cells.get(2)?.parse().ok()?;
                Some((code.to_owned(), status))
            })
            .collect();
        let documented = |code: &str| {
            rows.iter()
                .find(|(c, _)| c == code)
                .map(|(_, s)| *s)
                .unwrap_or_else(|| panic!("docs/http.md lists no status for {code}"))
        };
        for reason in Reason::ALL {
            assert_eq!(
                documented(reason.code()),
                status_of(*reason).as_u16(),
                "{reason}"
            );
        }
        for code in WireCode::ALL {
            assert_eq!(
                documented(code.code()),
                code.status().as_u16(),
                "{}",
                code.code()
            );
        }
    }

    #[test]
    fn no_wire_code_collides_with_a_gate_reason() {
        for code in WireCode::ALL {
            assert!(code.code().parse::<Reason>().is_err(), "{}", code.code());
        }
    }

    #[test]
    fn request_ids_are_sixteen_hex_and_differ() {
        let (a, b) = (new_request_id(), new_request_id());
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
