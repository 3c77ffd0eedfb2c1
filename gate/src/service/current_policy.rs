//! A tenant's current policy as the gate enforces it: the version, the
//! policy or the reason it cannot be enforced, and the digest of the signed
//! mandate it came in.
//!
//! Guarantees: a stored version is enforceable only when its mandate's
//! signature verifies under the gate's keyring and its policy parses; any
//! other stored version is `POLICY_INVALID`, never a policy.

use crate::policy::Policy;
use crate::reason::Reason;
use mandate::{Keyring, Mandate, SignedMandate};

/// The tenant's current policy: its version, and the policy or why it cannot
/// be enforced, and the digest of the signed mandate it came in.
#[derive(Debug, Clone)]
pub(crate) struct CurrentPolicy {
    pub version: i32,
    pub policy: Result<Policy, Reason>,
    /// The digest of the mandate whose signature verified; `None` when the
    /// policy is not enforceable.
    pub mandate: Option<String>,
}

/// A stored policy version as [`super::world::latest_policy`] reads it: the policy
/// document, its signer and its signature.
#[derive(Debug, serde::Deserialize)]
struct StoredMandate {
    policy: serde_json::Value,
    signer: Option<String>,
    signature: Option<String>,
}

impl CurrentPolicy {
    /// A stored version (`json` as [`super::world::latest_policy`] reads it): the policy,
    /// or `POLICY_INVALID` when its mandate's signature does not verify under
    /// `keys` or the policy does not parse.
    pub(crate) fn parsed(
        tenant: &str,
        version: i32,
        json: serde_json::Value,
        keys: &Keyring,
    ) -> CurrentPolicy {
        let invalid = CurrentPolicy {
            version,
            policy: Err(Reason::PolicyInvalid),
            mandate: None,
        };
        let Ok(stored) = serde_json::from_value::<StoredMandate>(json) else {
            return invalid;
        };
        let signed = SignedMandate {
            mandate: Mandate::new(
                tenant,
                i64::from(version),
                stored.signer.unwrap_or_default(),
                stored.policy,
            ),
            signature: stored.signature,
        };
        let verified = signed.verify(keys);
        if verified.is_err() {
            return invalid;
        }
        let Ok(policy) = serde_json::from_value::<Policy>(signed.mandate.policy) else {
            return invalid;
        };
        CurrentPolicy {
            version,
            policy: Ok(policy),
            mandate: verified.ok().map(|v| v.digest),
        }
    }

    pub fn daily_cap(&self) -> i64 {
        self.policy.as_ref().map_or(0, |p| p.daily_cap_paise.max(0))
    }
}
