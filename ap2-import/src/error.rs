//! Why an AP2 mandate is not imported: one variant per refusal, each
//! carrying the reason code the gate uses for it ([`ImportError::reason`]).
//!
//! Guarantees: every refusal of this crate is one of these variants; the
//! text names what was refused (a constraint's type, a field and the
//! number as written) and never carries key material.

use chrono::{DateTime, Utc};

/// The gate's reason for a mandate whose signature does not verify.
pub const MANDATE_SIGNATURE_INVALID: &str = "MANDATE_SIGNATURE_INVALID";
/// The gate's reason for a constraint with no counterpart in its policy.
pub const MANDATE_CONSTRAINT_UNKNOWN: &str = "MANDATE_CONSTRAINT_UNKNOWN";
/// The gate's reason for a policy that cannot be enforced as written.
pub const POLICY_INVALID: &str = "POLICY_INVALID";
/// The gate's reason for a policy whose validity is over.
pub const POLICY_EXPIRED: &str = "POLICY_EXPIRED";

/// A refused import.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The issuer's key file is neither an SPKI PEM nor an EC JWK of a
    /// P-256 point.
    #[error("the issuer key is not a P-256 public key (SPKI PEM or EC JWK): {0}")]
    IssuerKeyUnreadable(String),
    /// UCP's conformance placeholder, `header.payload.signature~kb_signature`.
    #[error(
        "the text is UCP's placeholder mandate `header.payload.signature~kb_signature`, not a signed mandate"
    )]
    Placeholder,
    /// Not a compact SD-JWT (segments, base64url, JSON).
    #[error("not a compact SD-JWT: {0}")]
    Malformed(String),
    /// The JWS header names an algorithm other than ES256.
    #[error(
        "the JWS algorithm is {0}; an AP2 mandate is signed ES256 and nothing else is accepted"
    )]
    AlgorithmNotAllowed(String),
    /// The ES256 signature does not verify under the issuer's key: a wrong
    /// key, a changed header or payload, a changed signature.
    #[error("the ES256 signature does not verify under the issuer's key")]
    SignatureInvalid,
    /// A disclosure the signed digests do not account for, or one that is
    /// used twice or clashes with a signed claim.
    #[error("disclosure refused: {0}")]
    DisclosureInvalid(String),
    /// A key-binding JWT follows the SD-JWT: the import takes the
    /// issuer-signed SD-JWT alone, ending in `~`.
    #[error(
        "a key-binding JWT follows the SD-JWT; import the issuer-signed SD-JWT alone (it ends in `~`)"
    )]
    KeyBindingPresent,
    /// The mandate's `exp` is before the instant it is judged at.
    #[error("the mandate expired at {0}")]
    Expired(DateTime<Utc>),
    /// Signed, but not an AP2 v0.2 open payment mandate as the schema
    /// writes one.
    #[error("not an AP2 open payment mandate: {0}")]
    NotOpenPaymentMandate(String),
    /// A constraint (or a claim that constrains) with no counterpart the
    /// gate enforces.
    #[error("{kind} has no counterpart in the gate's policy: {why}")]
    ConstraintUnknown { kind: String, why: String },
    /// Money written with a fraction of the currency's minor unit.
    #[error("{field} is {text}: a fraction of a minor unit of {currency}; refused, never rounded")]
    MoneyFraction {
        field: String,
        text: String,
        currency: String,
    },
    /// Money that is not a non-negative amount the gate can hold (a
    /// string, a negative number, more than 2^63 - 1 minor units).
    #[error("{field} is {text}: not an amount of money the gate can hold")]
    MoneyInvalid { field: String, text: String },
    /// Two currencies where the policy has one.
    #[error("currency mismatch: {0}")]
    CurrencyMismatch(String),
    /// Anything else that cannot become an enforceable policy (a date that
    /// names no instant, a reversed window, a base policy without the
    /// gate's keys).
    #[error("{0}")]
    Invalid(String),
}

impl ImportError {
    /// The gate's reason code for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            ImportError::IssuerKeyUnreadable(_)
            | ImportError::Placeholder
            | ImportError::Malformed(_)
            | ImportError::AlgorithmNotAllowed(_)
            | ImportError::SignatureInvalid
            | ImportError::DisclosureInvalid(_)
            | ImportError::KeyBindingPresent => MANDATE_SIGNATURE_INVALID,
            ImportError::Expired(_) => POLICY_EXPIRED,
            ImportError::ConstraintUnknown { .. } => MANDATE_CONSTRAINT_UNKNOWN,
            ImportError::NotOpenPaymentMandate(_)
            | ImportError::MoneyFraction { .. }
            | ImportError::MoneyInvalid { .. }
            | ImportError::CurrencyMismatch(_)
            | ImportError::Invalid(_) => POLICY_INVALID,
        }
    }

    pub(crate) fn unknown(kind: impl Into<String>, why: impl Into<String>) -> Self {
        ImportError::ConstraintUnknown {
            kind: kind.into(),
            why: why.into(),
        }
    }
}
