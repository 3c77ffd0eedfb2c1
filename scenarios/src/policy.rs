//! The tenant policy as a world file and `set_policy` spell it.
//!
//! Guarantees: [`WorldPolicy`] has exactly the spec's keys, all required;
//! [`PolicyPatch`] has the same keys, all optional; both refuse unknown
//! keys. [`WorldPolicy::apply`] replaces exactly the fields a patch names.
//! The harness converts these to the gate's own policy type.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// At most `max_proposals` proposals per agent in any `window_minutes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Velocity {
    pub max_proposals: u32,
    pub window_minutes: u32,
}

/// At most `max_denials` refusals per agent in any `window_minutes`; the next
/// proposal is refused `DENIAL_RATE_LIMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenialRate {
    pub max_denials: u32,
    pub window_minutes: u32,
}

/// A tenant's policy, every key required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldPolicy {
    pub currency: String,
    pub per_transaction_cap_paise: i64,
    pub daily_cap_paise: i64,
    pub approval_threshold_paise: i64,
    pub allowed_merchants: Vec<String>,
    pub allowed_categories: Vec<String>,
    pub valid_from: DateTime<Utc>,
    pub valid_until: DateTime<Utc>,
    pub velocity: Velocity,
    pub denial_rate: DenialRate,
}

/// The body of a `set_policy` step: any subset of the policy's keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_transaction_cap_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_cap_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_threshold_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_merchants: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_categories: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Velocity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial_rate: Option<DenialRate>,
}

impl WorldPolicy {
    /// This policy with every field the patch names replaced.
    pub fn apply(&self, patch: &PolicyPatch) -> WorldPolicy {
        WorldPolicy {
            currency: patch
                .currency
                .clone()
                .unwrap_or_else(|| self.currency.clone()),
            per_transaction_cap_paise: patch
                .per_transaction_cap_paise
                .unwrap_or(self.per_transaction_cap_paise),
            daily_cap_paise: patch.daily_cap_paise.unwrap_or(self.daily_cap_paise),
            approval_threshold_paise: patch
                .approval_threshold_paise
                .unwrap_or(self.approval_threshold_paise),
            allowed_merchants: patch
                .allowed_merchants
                .clone()
                .unwrap_or_else(|| self.allowed_merchants.clone()),
            allowed_categories: patch
                .allowed_categories
                .clone()
                .unwrap_or_else(|| self.allowed_categories.clone()),
            valid_from: patch.valid_from.unwrap_or(self.valid_from),
            valid_until: patch.valid_until.unwrap_or(self.valid_until),
            velocity: patch.velocity.unwrap_or(self.velocity),
            denial_rate: patch.denial_rate.unwrap_or(self.denial_rate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> WorldPolicy {
        crate::yaml::from_str(
            "currency: INR\nper_transaction_cap_paise: 300000\ndaily_cap_paise: 500000\n\
             approval_threshold_paise: 100000\nallowed_merchants: [cloudco]\n\
             allowed_categories: [food]\nvalid_from: 2026-01-01T00:00:00Z\n\
             valid_until: 2026-12-31T23:59:59Z\nvelocity: {max_proposals: 20, window_minutes: 60}\n\
             denial_rate: {max_denials: 5, window_minutes: 60}\n",
        )
        .unwrap()
    }

    #[test]
    fn apply_replaces_only_named_fields() {
        let patch: PolicyPatch =
            crate::yaml::from_str("daily_cap_paise: 1\nallowed_merchants: []").unwrap();
        let p = base().apply(&patch);
        assert_eq!(p.daily_cap_paise, 1);
        assert!(p.allowed_merchants.is_empty());
        assert_eq!(p.per_transaction_cap_paise, 300000);
        assert_eq!(p.allowed_categories, vec!["food".to_string()]);
    }

    #[test]
    fn unknown_policy_key_is_refused() {
        let err = crate::yaml::from_str::<PolicyPatch>("daily_cap: 1").unwrap_err();
        assert!(
            err.to_string().contains("unknown field `daily_cap`"),
            "{err}"
        );
        let mut text = crate::yaml::to_string(&base()).unwrap();
        text.push_str("spend_limit: 5\n");
        assert!(crate::yaml::from_str::<WorldPolicy>(&text).is_err());
    }

    #[test]
    fn world_policy_requires_every_key() {
        let err = crate::yaml::from_str::<WorldPolicy>("currency: INR").unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
    }
}
