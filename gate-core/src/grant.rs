//! A delegation hop as a world file and a scenario's `grant` step write it
//! ([`Grant`]), and the terms a new hop grants ([`HopTerms`]).
//!
//! Guarantees: plain data. A [`Grant`] accepts no key but its own, and its
//! terms never name who grants the hop: the gate takes the grantor from
//! its caller, never from these values.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A delegation hop as a world file's `delegations` and a scenario's
/// `grant` step write it: `from` is a human who may approve (a root hop made
/// by that human) or the id of a live delegation of the same tenant (a hop
/// below it, made by the tenant's operator). The gate's own call takes the
/// caller and the parent apart (the gate's `grant`); only the seed and a test
/// driver read `from`. No other key is accepted; absent options are not
/// serialized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub id: String,
    /// A human who may approve (root hop) or the id of a live delegation.
    pub from: String,
    /// The agent that may spend under it.
    pub to: String,
    pub budget_paise: i64,
    /// `None` means every sku the parent allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skus: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl Grant {
    /// The hop's terms: everything but who grants it.
    pub fn terms(&self) -> HopTerms {
        HopTerms {
            id: self.id.clone(),
            to: self.to.clone(),
            budget_paise: self.budget_paise,
            skus: self.skus.clone(),
            expires_at: self.expires_at,
        }
    }
}

/// What a new hop grants: its id, its grantee and its limits. Who grants it
/// is no term: it is the caller of the gate's `grant` (a root hop) or the
/// parent delegation the caller names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HopTerms {
    pub id: String,
    /// The agent that may spend under it.
    pub to: String,
    pub budget_paise: i64,
    /// `None` means every sku the parent allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skus: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}
