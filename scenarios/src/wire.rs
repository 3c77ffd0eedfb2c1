//! A step's optional `wire` block: how the HTTP engine sends the step, and
//! what the service must answer (`scenarios/README.md`, "The wire block").
//!
//! Guarantees: the block's keys are closed (`as`, `key`, `headers`, `body`,
//! `status`, `reason`); `key` is one of `none`, `malformed`, `revoked`,
//! `unknown`; a header name is a valid HTTP token and every value is visible
//! ASCII or spaces (so each one can be sent as written); `status` is
//! 100..=599; `reason` is a code of `gate_core::Reason` or one of the service's
//! own [`WIRE_CODES`]. A step with a `wire` block and no `expect` is
//! *wire-only* ([`crate::Step::wire_only`]): it must say the `status` it
//! expects and may not be named, and engines other than the HTTP one (and the
//! oracle) skip it, because the service refuses it before the gate and
//! nothing moves. Only a wire-only step may change the credential (`as`,
//! `key`) or the body; a step with an `expect` may add headers, which must
//! change nothing the gate decides.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The service's own refusal codes (`docs/http.md`); the harness checks this
/// list against `wire::WireCode::ALL`.
pub const WIRE_CODES: [&str; 10] = [
    "UNAUTHENTICATED",
    "NOT_FOUND",
    "METHOD_NOT_ALLOWED",
    "CONTENT_TYPE_UNSUPPORTED",
    "BODY_TOO_LARGE",
    "BODY_INVALID",
    "HEADER_INVALID",
    "TIMEOUT",
    "BODY_TIMEOUT",
    "ENGINE_UNAVAILABLE",
];

/// In a header value, replaced by the valid signature of the body sent.
pub const SIGNATURE_PLACEHOLDER: &str = "$signature";

/// A credential other than the actor's own good key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyTrick {
    /// No `Authorization` header.
    None,
    /// `Authorization` that is no bearer key of the right shape.
    Malformed,
    /// A key of the actor (`as`, else the step's), revoked before the step.
    Revoked,
    /// A key of the right shape that was never issued.
    Unknown,
}

/// One header value, or several (the header repeated; `[]` removes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

impl HeaderValues {
    pub fn values(&self) -> Vec<&str> {
        match self {
            HeaderValues::One(v) => vec![v.as_str()],
            HeaderValues::Many(vs) => vs.iter().map(String::as_str).collect(),
        }
    }
}

/// The `wire` block of a step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireStep {
    /// Send with this actor's key (an actor of any tenant of the world)
    /// instead of the step's own actor's.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub as_actor: Option<String>,
    /// Send a credential that is not a good key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyTrick>,
    /// Headers set (replacing the engine's own of that name), repeated or removed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderValues>,
    /// The body sent instead of the one the engine builds from the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The HTTP status the service must answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The `reason` the answer must carry: a gate reason or a service code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl WireStep {
    /// Why the block cannot be sent as written, if it cannot.
    pub fn problem(&self) -> Option<String> {
        for (name, values) in &self.headers {
            if name.is_empty() || !name.bytes().all(is_token_char) {
                return Some(format!("header name {name:?} is not an HTTP token"));
            }
            if name.eq_ignore_ascii_case("authorization") {
                return Some("set the credential with `as` or `key`, not a header".into());
            }
            for v in values.values() {
                if !v.bytes().all(|b| b == b' ' || (0x21..=0x7e).contains(&b)) {
                    return Some(format!(
                        "header {name}: values are visible ASCII and spaces only"
                    ));
                }
            }
        }
        if let Some(status) = self.status
            && !(100..=599).contains(&status)
        {
            return Some(format!("status {status} is not an HTTP status"));
        }
        if let Some(reason) = &self.reason
            && gate_core::Reason::from_str(reason).is_err()
            && !WIRE_CODES.contains(&reason.as_str())
        {
            return Some(format!(
                "reason `{reason}` is neither a gate reason nor a service code ({})",
                WIRE_CODES.join(", ")
            ));
        }
        None
    }

    /// The header `name` as the block sets it, if it does (names compare
    /// case-insensitively).
    pub fn header(&self, name: &str) -> Option<&HeaderValues> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WireStep, crate::yaml::Error> {
        crate::yaml::from_str(text)
    }

    #[test]
    fn reads_every_key_and_refuses_unknown_ones() {
        let w = parse(
            "{as: buyer-agent, key: revoked, headers: {X-Tenant-Id: globex, X-Razorpay-Signature: [a, b]}, body: '{}', status: 401, reason: UNAUTHENTICATED}",
        )
        .unwrap();
        assert_eq!(w.as_actor.as_deref(), Some("buyer-agent"));
        assert_eq!(w.key, Some(KeyTrick::Revoked));
        assert_eq!(
            w.header("x-razorpay-signature").map(HeaderValues::values),
            Some(vec!["a", "b"])
        );
        assert_eq!(w.problem(), None);
        assert!(parse("{tenant: acme}").is_err());
        assert!(parse("{key: stolen}").is_err());
    }

    #[test]
    fn names_what_cannot_be_sent() {
        let bad = [
            "{headers: {'X Tenant': a}}",
            "{headers: {Authorization: 'Bearer x'}}",
            "{headers: {X-A: \"a\\tb\"}}",
            "{headers: {X-A: [\"\\u00e9\"]}}",
            "{status: 99}",
            "{status: 600}",
            "{reason: NOT_A_CODE}",
        ];
        for text in bad {
            let w = parse(text).unwrap();
            assert!(w.problem().is_some(), "{text}");
        }
        for good in [
            "{reason: ACTOR_NOT_PERMITTED}",
            "{reason: NOT_FOUND}",
            "{headers: {X-A: []}}",
        ] {
            assert_eq!(parse(good).unwrap().problem(), None, "{good}");
        }
    }
}
