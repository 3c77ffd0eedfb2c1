//! AP2 v0.2 open payment mandates, verified and mapped onto the gate's
//! policy document.
//!
//! An AP2 open payment mandate is an SD-JWT (RFC 9901) signed ES256 by the
//! human's key; its one disclosed `delegate_payload` element is the mandate
//! (`vct` `mandate.payment.open.1`), whose `constraints` bound what an agent
//! may pay. [`import`] verifies the signature under the issuer's key the
//! caller holds, puts the disclosures in place, and maps the constraints
//! onto the gate's policy keys:
//!
//! | AP2 | gate policy key | how |
//! |---|---|---|
//! | `payment.amount_range.max` (integer minor units) | `per_transaction_cap_paise` | the same number; a cap is inclusive in both |
//! | `payment.amount_range.currency` | `currency` | the same code |
//! | `payment.amount_range.min` | — | absent or 0: nothing; above 0: `MANDATE_CONSTRAINT_UNKNOWN` (the gate has no lower bound) |
//! | `payment.budget.max` (major units, a decimal) | `daily_cap_paise`, and [`Mapping::delegation_budget_paise`] | see below |
//! | `payment.allowed_payees.allowed[].id` | `allowed_merchants` | the ids, in order, once each; a payee without an id: `MANDATE_CONSTRAINT_UNKNOWN` |
//! | `payment.execution_date.not_before` | `valid_from` | RFC 3339, or a date's first second (UTC) |
//! | `payment.execution_date.not_after`, `exp` | `valid_until` | the earlier of the two; a date's last second, 23:59:59 UTC |
//! | `payment.agent_recurrence {frequency, max_occurrences}` | `velocity {max_proposals, window_minutes}` | DAILY 1440, WEEKLY 10080, BIWEEKLY 20160, MONTHLY 44640 (31 days), ON_DEMAND the mandate's whole window when it is at most 31 days; QUARTERLY, ANNUALLY or a longer ON_DEMAND with a count: `MANDATE_CONSTRAINT_UNKNOWN` |
//! | `payment.reference`, `payment.allowed_payment_instruments`, `payment.allowed_pisps`, any other type, a pre-set `payee`, `payment_amount`, `payment_instrument`, `pisp` or `execution_date` | — | `MANDATE_CONSTRAINT_UNKNOWN` |
//!
//! **The budget.** `payment.budget` is cumulative: the total of every payment
//! made under the mandate. The gate keeps two totals atomically in
//! Postgres: the tenant's spend per UTC day and currency (`daily_cap_paise`,
//! a conditional upsert checked by `ck_daily_spend_within_cap`) and a
//! delegation's spend over its whole life (its budget,
//! `ck_delegation_budget_partitioned`). The nearest of these to a
//! cumulative budget is the delegation's budget, which is not a policy key:
//! the import returns it as [`Mapping::delegation_budget_paise`], and the
//! caller grants the agent a delegation of at most that. The policy's
//! daily cap becomes the lower of the base policy's and the budget (no day
//! can spend more than the whole budget); where the mandate's window lies
//! within one UTC day, that daily cap alone is the budget exactly.
//!
//! **Velocity.** AP2 counts payments in a calendar period; the gate counts
//! proposals (refused ones too) in a sliding window as long as the longest
//! such period, which counts at least as many: the mapped limit is never
//! looser.
//!
//! **Money** is read from its decimal text, never through a binary float
//! (`0.29` major units is 29 minor units, where the reference SDK's
//! `int(max * 100)` gives 28), and an amount with a fraction of a minor
//! unit (`0.295`, or `0.5` for a field in minor units) is refused
//! `POLICY_INVALID`, never rounded. Minor units per currency follow ISO
//! 4217 ([`money::minor_unit_exponent`]).
//!
//! **Refusals** are [`ImportError`]s, each with the gate's reason code:
//! `MANDATE_SIGNATURE_INVALID` (UCP's placeholder
//! `header.payload.signature~kb_signature`, a malformed token, an `alg`
//! other than ES256, a signature that does not verify under the issuer's
//! key, a disclosure the signed digests do not account for, a key-binding
//! JWT), `POLICY_EXPIRED` (`exp` passed), `MANDATE_CONSTRAINT_UNKNOWN` (above)
//! and `POLICY_INVALID` (not an open payment mandate, money refused, two
//! currencies, a date that names no instant, an empty window). A refused
//! import produces no policy document.
//!
//! Guarantees: pure (no I/O, clock, randomness or network: the caller
//! passes the instant `exp` is judged at); a mapped document sets only
//! the gate's policy keys ([`mapping::POLICY_KEYS`]); every constraint is
//! mapped onto a limit at least as strict or the import is refused.

#![forbid(unsafe_code)]

mod error;
mod json;
pub mod mapping;
pub mod money;
mod sdjwt;

use chrono::{DateTime, Utc};

pub use error::{
    ImportError, MANDATE_CONSTRAINT_UNKNOWN, MANDATE_SIGNATURE_INVALID, POLICY_EXPIRED,
    POLICY_INVALID,
};
pub use mapping::{Mapping, POLICY_KEYS};
pub use sdjwt::{IssuerKey, MAX_TOKEN_BYTES, UCP_PLACEHOLDER};

/// Verifies `token` (an AP2 open payment mandate: the issuer-signed
/// SD-JWT in compact form, ending in `~`) under `key`, and maps it.
/// `now` is the instant its `exp` is judged at.
pub fn import(token: &str, key: &IssuerKey, now: DateTime<Utc>) -> Result<Mapping, ImportError> {
    let payload = sdjwt::verify(token, key)?;
    mapping::map_payload(&payload, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    /// The open payment mandate printed in AP2's `docs/ap2/payment_mandate.md`
    /// ("Open Payment Mandate SD-JWT plus disclosures"), byte for byte.
    const AP2_SAMPLE: &str = include_str!("../tests/fixtures/ap2_open_payment_mandate.sdjwt");

    #[test]
    fn ap2s_sample_mandate_resolves_and_is_refused_for_its_reference() {
        let parts = sdjwt::split(AP2_SAMPLE).unwrap();
        let payload = sdjwt::resolve(&parts).unwrap();
        let mandate = &payload.get("delegate_payload").unwrap();
        let json::Json::Array(items) = mandate else {
            panic!("delegate_payload is an array")
        };
        assert_eq!(
            items[0].get("vct").and_then(json::Json::as_str),
            Some("mandate.payment.open.1")
        );
        // The payee was a disclosure inside the disclosed mandate.
        let text = format!("{payload:?}");
        assert!(text.contains("merchant_1"), "{text}");
        // Judged before its exp (1777345957): its payment.reference binds it
        // to one checkout, which the gate has no counterpart for.
        let before_exp = DateTime::from_timestamp(1_777_342_400, 0).unwrap();
        let refused = mapping::map_payload(&payload, before_exp).unwrap_err();
        assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
        assert!(
            refused.to_string().contains("payment.reference"),
            "{refused}"
        );
        let after_exp = DateTime::from_timestamp(1_777_345_958, 0).unwrap();
        assert_eq!(
            mapping::map_payload(&payload, after_exp).unwrap_err(),
            ImportError::Expired(DateTime::from_timestamp(1_777_345_957, 0).unwrap())
        );
    }

    #[test]
    fn ap2s_sample_mandate_does_not_verify_under_another_key() {
        // AP2 does not publish the sample's issuer key; under any other key
        // the signature is refused before a claim is read.
        let secret: [u8; 32] = sha2::Sha256::digest(b"not the sample's issuer").into();
        let signing = p256::ecdsa::SigningKey::from_slice(&secret).unwrap();
        let key = IssuerKey::from_verifying_key(*signing.verifying_key());
        let refused = import(AP2_SAMPLE, &key, Utc::now()).unwrap_err();
        assert_eq!(refused, ImportError::SignatureInvalid);
        assert_eq!(refused.reason(), MANDATE_SIGNATURE_INVALID);
    }

    #[test]
    fn a_changed_sample_disclosure_is_refused() {
        // One character of the payee's disclosure changed: its digest is no
        // longer the one the mandate carries.
        let tampered = AP2_SAMPLE.replacen("~WyJzOVdQ", "~WyJzOVdR", 1);
        assert_ne!(tampered, AP2_SAMPLE);
        let parts = sdjwt::split(&tampered).unwrap();
        let refused = sdjwt::resolve(&parts).unwrap_err();
        assert!(
            matches!(refused, ImportError::DisclosureInvalid(_)),
            "{refused}"
        );
    }
}
