//! The payload of each verb of the spec's step table.
//!
//! Guarantees: one struct per verb with exactly the spec's field names
//! (plus nothing), each refusing unknown keys; defaults that the spec states
//! (`webhook.event` = `payment.captured`, `signature` = `valid`,
//! `created_at_offset_minutes` = 0) are exposed through accessors, and the
//! raw optional fields are kept so a corpus round-trips unchanged.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// `propose`: the agent-facing call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Propose {
    pub actor: String,
    /// A mapping sent as JSON. Exactly one of `body` and `raw` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// A string sent as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Defaults to the world's first tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl Propose {
    /// The bytes the agent sends: `raw` as is, or `body` as compact JSON.
    pub fn wire_body(&self) -> String {
        match (&self.raw, &self.body) {
            (Some(raw), _) => raw.clone(),
            (None, Some(body)) => body.to_string(),
            (None, None) => String::new(),
        }
    }
}

/// `approve`: a human approves a step-up request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// The name of an earlier `propose` step.
    pub request: String,
    pub approver: String,
}

/// `checkout`: issue the single-use checkout authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkout {
    /// The name of an earlier `propose` step.
    pub request: String,
    pub actor: String,
}

/// `pay`: consume an authority, creating one provider order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pay {
    /// The name of an earlier `checkout` step.
    pub authority: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// How a webhook is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Signature {
    #[default]
    Valid,
    Invalid,
    Missing,
}

/// `webhook`: a provider event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// The name of an earlier `pay` step.
    pub order: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_offset_minutes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl Webhook {
    /// The event type, `payment.captured` by default.
    pub fn event(&self) -> &str {
        self.event.as_deref().unwrap_or("payment.captured")
    }

    /// The signature mode, `valid` by default.
    pub fn signature(&self) -> Signature {
        self.signature.unwrap_or_default()
    }

    /// The event's timestamp offset from the gate's clock, 0 by default.
    pub fn offset_minutes(&self) -> i64 {
        self.created_at_offset_minutes.unwrap_or(0)
    }
}

/// `grant`: a delegation hop made by the tenant's operator.
pub type Grant = crate::world::Delegation;

/// `revoke`: revoke one hop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoke {
    pub delegation: String,
    pub actor: String,
}

/// `set_price`: the merchant changes the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPrice {
    pub sku: String,
    pub price_paise: i64,
}

/// `advance_clock`: move the gate's clock forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvanceClock {
    pub minutes: u64,
}

/// `replay`: send an earlier step's request again, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    pub of: String,
}

/// A timestamp helper for callers that build grants.
pub fn rfc3339(ts: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
