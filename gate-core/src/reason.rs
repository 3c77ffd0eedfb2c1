//! The closed set of refusal and step-up reasons, and the decision they ride in.
//!
//! Guarantees: every code named by `shared/spec/scenarios.md` exists here, is
//! serialized exactly as the spec spells it (SCREAMING_SNAKE_CASE), and parses
//! back from that spelling; an unknown spelling is an error, never a default.
//! Each reason belongs to exactly one [`Layer`], the layer that must stop it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The layer of the gate that owns a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    ToolBoundary,
    Identity,
    Policy,
    Delegation,
    Approval,
    CheckoutAuthority,
    ProviderEvent,
    Replay,
}

impl Layer {
    /// Every layer, in the order a proposal meets them.
    pub const ALL: [Layer; 8] = [
        Layer::ToolBoundary,
        Layer::Identity,
        Layer::Policy,
        Layer::Delegation,
        Layer::Approval,
        Layer::CheckoutAuthority,
        Layer::ProviderEvent,
        Layer::Replay,
    ];

    /// The kebab-case name used in reports and the taxonomy.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::ToolBoundary => "tool-boundary",
            Layer::Identity => "identity",
            Layer::Policy => "policy",
            Layer::Delegation => "delegation",
            Layer::Approval => "approval",
            Layer::CheckoutAuthority => "checkout-authority",
            Layer::ProviderEvent => "provider-event",
            Layer::Replay => "replay",
        }
    }
}

macro_rules! reasons {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal => $layer:ident, )*) => {
        /// A refusal or step-up reason. The set is closed: the loader of a
        /// scenario corpus refuses any code not listed here.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Reason {
            $( $(#[$doc])* #[serde(rename = $code)] $variant, )*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The code exactly as the spec spells it.
            pub fn code(self) -> &'static str {
                match self { $(Reason::$variant => $code,)* }
            }

            /// The layer that owns this refusal.
            pub fn layer(self) -> Layer {
                match self { $(Reason::$variant => Layer::$layer,)* }
            }
        }

        impl FromStr for Reason {
            type Err = UnknownReason;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($code => Ok(Reason::$variant),)*
                    other => Err(UnknownReason(other.to_string())),
                }
            }
        }
    };
}

reasons! {
    // tool boundary
    /// The body is not a JSON object of the expected shape.
    ProposalMalformed = "PROPOSAL_MALFORMED" => ToolBoundary,
    /// The body carries a field other than sku, quantity, purpose.
    ProposalUnknownField = "PROPOSAL_UNKNOWN_FIELD" => ToolBoundary,
    /// The raw body is over the size limit.
    ProposalTooLarge = "PROPOSAL_TOO_LARGE" => ToolBoundary,
    /// Quantity is zero, negative, fractional, not a number or absurd.
    QuantityInvalid = "QUANTITY_INVALID" => ToolBoundary,
    /// Quantity is above the catalog's maximum for this sku.
    QuantityExceedsMax = "QUANTITY_EXCEEDS_MAX" => ToolBoundary,
    /// The sku is not in this tenant's catalog.
    SkuUnknown = "SKU_UNKNOWN" => ToolBoundary,
    /// The sku exists but cannot be bought.
    SkuUnavailable = "SKU_UNAVAILABLE" => ToolBoundary,
    /// Purpose is empty, too long or holds control characters.
    PurposeInvalid = "PURPOSE_INVALID" => ToolBoundary,
    /// Price times quantity does not fit the amount type.
    AmountOverflow = "AMOUNT_OVERFLOW" => ToolBoundary,
    // identity and tenancy
    ActorUnknown = "ACTOR_UNKNOWN" => Identity,
    ActorNotPermitted = "ACTOR_NOT_PERMITTED" => Identity,
    TenantUnknown = "TENANT_UNKNOWN" => Identity,
    TenantMismatch = "TENANT_MISMATCH" => Identity,
    // policy
    CurrencyNotAllowed = "CURRENCY_NOT_ALLOWED" => Policy,
    MerchantNotAllowed = "MERCHANT_NOT_ALLOWED" => Policy,
    CategoryNotAllowed = "CATEGORY_NOT_ALLOWED" => Policy,
    AmountExceedsTransactionCap = "AMOUNT_EXCEEDS_TRANSACTION_CAP" => Policy,
    DailyBudgetExhausted = "DAILY_BUDGET_EXHAUSTED" => Policy,
    PolicyNotYetValid = "POLICY_NOT_YET_VALID" => Policy,
    PolicyExpired = "POLICY_EXPIRED" => Policy,
    VelocityLimit = "VELOCITY_LIMIT" => Policy,
    DenialRateLimit = "DENIAL_RATE_LIMIT" => Policy,
    /// The step-up reason: an amount above the approval threshold.
    ApprovalRequired = "APPROVAL_REQUIRED" => Policy,
    /// The tenant has no policy, or its policy does not parse: fail closed.
    PolicyInvalid = "POLICY_INVALID" => Policy,
    /// An operator's price change that is not a positive amount.
    PriceInvalid = "PRICE_INVALID" => Policy,
    /// A mandate with no signature, a malformed one, or one that is not by
    /// the named signer's key: nothing is published.
    MandateSignatureInvalid = "MANDATE_SIGNATURE_INVALID" => Policy,
    /// A mandate whose signer is not a human of the tenant who may approve
    /// and holds a configured key: nothing is published.
    MandateSignerNotPermitted = "MANDATE_SIGNER_NOT_PERMITTED" => Policy,
    /// An imported mandate (such as an AP2 open payment mandate) carries a
    /// constraint the gate cannot enforce: refused whole, nothing published.
    MandateConstraintUnknown = "MANDATE_CONSTRAINT_UNKNOWN" => Policy,
    // delegation
    DelegationMissing = "DELEGATION_MISSING" => Delegation,
    DelegationBudgetExhausted = "DELEGATION_BUDGET_EXHAUSTED" => Delegation,
    DelegationSkuOutOfScope = "DELEGATION_SKU_OUT_OF_SCOPE" => Delegation,
    DelegationRevoked = "DELEGATION_REVOKED" => Delegation,
    DelegationExpired = "DELEGATION_EXPIRED" => Delegation,
    DelegationWidens = "DELEGATION_WIDENS" => Delegation,
    DelegationGrantorNotPermitted = "DELEGATION_GRANTOR_NOT_PERMITTED" => Delegation,
    /// A grant whose id is not an identifier, or was ever used in the tenant (revoked ids included).
    DelegationInvalid = "DELEGATION_INVALID" => Delegation,
    /// A grant that would make a chain of more than eight hops.
    DelegationDepthExceeded = "DELEGATION_DEPTH_EXCEEDED" => Delegation,
    /// The chain handed to the engine does not link up (a hop's parent is not the hop above it).
    DelegationChainBroken = "DELEGATION_CHAIN_BROKEN" => Delegation,
    // approval
    ApprovalByRequester = "APPROVAL_BY_REQUESTER" => Approval,
    ApproverNotPermitted = "APPROVER_NOT_PERMITTED" => Approval,
    ApprovalAlreadyUsed = "APPROVAL_ALREADY_USED" => Approval,
    ApprovalNotPending = "APPROVAL_NOT_PENDING" => Approval,
    // checkout authority
    RequestNotAuthorized = "REQUEST_NOT_AUTHORIZED" => CheckoutAuthority,
    AuthorityExpired = "AUTHORITY_EXPIRED" => CheckoutAuthority,
    AuthorityAlreadyUsed = "AUTHORITY_ALREADY_USED" => CheckoutAuthority,
    AuthorityPurchaseChanged = "AUTHORITY_PURCHASE_CHANGED" => CheckoutAuthority,
    AuthorityPolicyChanged = "AUTHORITY_POLICY_CHANGED" => CheckoutAuthority,
    // provider events
    WebhookSignatureInvalid = "WEBHOOK_SIGNATURE_INVALID" => ProviderEvent,
    WebhookDuplicate = "WEBHOOK_DUPLICATE" => ProviderEvent,
    WebhookAmountMismatch = "WEBHOOK_AMOUNT_MISMATCH" => ProviderEvent,
    /// The event's currency differs from the server-derived order's.
    WebhookCurrencyMismatch = "WEBHOOK_CURRENCY_MISMATCH" => ProviderEvent,
    WebhookUnknownOrder = "WEBHOOK_UNKNOWN_ORDER" => ProviderEvent,
    WebhookEventIgnored = "WEBHOOK_EVENT_IGNORED" => ProviderEvent,
    WebhookStale = "WEBHOOK_STALE" => ProviderEvent,
    WebhookPostDated = "WEBHOOK_POST_DATED" => ProviderEvent,
    /// A signed event whose body does not parse or lacks a required field.
    WebhookMalformed = "WEBHOOK_MALFORMED" => ProviderEvent,
    StateTransitionInvalid = "STATE_TRANSITION_INVALID" => ProviderEvent,
    /// The provider refused to create the order: the request fails and its reservations are released.
    ProviderRejected = "PROVIDER_REJECTED" => ProviderEvent,
    /// No answer in time, or a 5xx: the request stays PROVIDER_PENDING until reconcile settles it.
    ProviderUnavailable = "PROVIDER_UNAVAILABLE" => ProviderEvent,
    // replay
    IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED" => Replay,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A reason code that is not in the closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason code `{0}`")]
pub struct UnknownReason(pub String);

/// What the gate decided about one proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", content = "reason", rename_all = "snake_case")]
pub enum Decision {
    /// The purchase may proceed to a checkout authority.
    Allow,
    /// A human who may approve must agree first.
    StepUp(Reason),
    /// Refused.
    Deny(Reason),
}

impl Decision {
    /// The reason, when there is one.
    pub fn reason(self) -> Option<Reason> {
        match self {
            Decision::Allow => None,
            Decision::StepUp(r) | Decision::Deny(r) => Some(r),
        }
    }

    /// `allow`, `step_up` or `deny`, as the corpus spells it.
    pub fn kind(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::StepUp(_) => "step_up",
            Decision::Deny(_) => "deny",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes the spec (`scenarios.md`, the corpus contract) lists,
    /// copied here: a contract is extended, never renamed.
    const SPEC_CODES: &[&str] = &[
        "PROPOSAL_MALFORMED",
        "PROPOSAL_UNKNOWN_FIELD",
        "PROPOSAL_TOO_LARGE",
        "QUANTITY_INVALID",
        "QUANTITY_EXCEEDS_MAX",
        "SKU_UNKNOWN",
        "SKU_UNAVAILABLE",
        "PURPOSE_INVALID",
        "ACTOR_UNKNOWN",
        "ACTOR_NOT_PERMITTED",
        "TENANT_UNKNOWN",
        "TENANT_MISMATCH",
        "CURRENCY_NOT_ALLOWED",
        "MERCHANT_NOT_ALLOWED",
        "CATEGORY_NOT_ALLOWED",
        "AMOUNT_EXCEEDS_TRANSACTION_CAP",
        "DAILY_BUDGET_EXHAUSTED",
        "POLICY_NOT_YET_VALID",
        "POLICY_EXPIRED",
        "VELOCITY_LIMIT",
        "DENIAL_RATE_LIMIT",
        "APPROVAL_REQUIRED",
        "DELEGATION_MISSING",
        "DELEGATION_BUDGET_EXHAUSTED",
        "DELEGATION_SKU_OUT_OF_SCOPE",
        "DELEGATION_REVOKED",
        "DELEGATION_EXPIRED",
        "DELEGATION_WIDENS",
        "DELEGATION_GRANTOR_NOT_PERMITTED",
        "APPROVAL_BY_REQUESTER",
        "APPROVER_NOT_PERMITTED",
        "APPROVAL_ALREADY_USED",
        "APPROVAL_NOT_PENDING",
        "MANDATE_SIGNATURE_INVALID",
        "MANDATE_SIGNER_NOT_PERMITTED",
        "MANDATE_CONSTRAINT_UNKNOWN",
        "REQUEST_NOT_AUTHORIZED",
        "AUTHORITY_EXPIRED",
        "AUTHORITY_ALREADY_USED",
        "AUTHORITY_PURCHASE_CHANGED",
        "AUTHORITY_POLICY_CHANGED",
        "WEBHOOK_SIGNATURE_INVALID",
        "WEBHOOK_DUPLICATE",
        "WEBHOOK_AMOUNT_MISMATCH",
        "WEBHOOK_UNKNOWN_ORDER",
        "WEBHOOK_EVENT_IGNORED",
        "WEBHOOK_STALE",
        "WEBHOOK_POST_DATED",
        "STATE_TRANSITION_INVALID",
        "IDEMPOTENCY_KEY_REUSED",
        "PRICE_INVALID",
        "POLICY_INVALID",
        "DELEGATION_INVALID",
        "DELEGATION_DEPTH_EXCEEDED",
        "WEBHOOK_MALFORMED",
        "WEBHOOK_CURRENCY_MISMATCH",
        "PROVIDER_REJECTED",
        "PROVIDER_UNAVAILABLE",
    ];

    #[test]
    fn every_spec_code_exists_and_round_trips() {
        for code in SPEC_CODES {
            let reason: Reason = code.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(reason.code(), *code);
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{code}\"")
            );
            let back: Reason = serde_json::from_str(&format!("\"{code}\"")).unwrap();
            assert_eq!(back, reason);
        }
    }

    /// The repository's own reference, `docs/scenario-format.md`, is
    /// generated from this enum (`harness scenario-format`; a drift test
    /// keeps it current). It must exist in every clone, list every code here
    /// and every code of the spec, and nothing that does not parse.
    #[test]
    fn the_generated_reference_lists_exactly_these_codes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario-format.md");
        let doc = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!("{path}: {e}; regenerate it with `cargo run -p harness -- scenario-format`")
        });
        let section = doc
            .split("## Reason codes")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("the reference has a `## Reason codes` section");
        let mut seen = std::collections::BTreeSet::new();
        for token in section.split('`').skip(1).step_by(2) {
            if token.len() > 3 && token.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                assert!(
                    token.parse::<Reason>().is_ok(),
                    "the reference lists {token}, which is not a Reason"
                );
                assert!(seen.insert(token), "the reference lists {token} twice");
            }
        }
        for reason in Reason::ALL {
            assert!(
                seen.contains(reason.code()),
                "the reference lacks {reason}: regenerate it"
            );
        }
        for code in SPEC_CODES {
            assert!(seen.contains(code), "the reference lacks the spec's {code}");
        }
    }

    #[test]
    fn codes_are_unique_and_screaming_snake_case() {
        let mut codes: Vec<&str> = Reason::ALL.iter().map(|r| r.code()).collect();
        assert!(
            codes
                .iter()
                .all(|c| c.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_'))
        );
        let n = codes.len();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), n);
    }

    #[test]
    fn an_unknown_code_is_an_error_not_a_default() {
        assert_eq!(
            "APPROVED_BY_CATALOG".parse::<Reason>(),
            Err(UnknownReason("APPROVED_BY_CATALOG".into()))
        );
        assert!("proposal_malformed".parse::<Reason>().is_err());
        assert!(serde_json::from_str::<Reason>("\"NOPE\"").is_err());
    }

    #[test]
    fn decisions_serialize_as_the_corpus_spells_them() {
        assert_eq!(
            serde_json::to_string(&Decision::Allow).unwrap(),
            r#"{"decision":"allow"}"#
        );
        assert_eq!(
            serde_json::to_string(&Decision::StepUp(Reason::ApprovalRequired)).unwrap(),
            r#"{"decision":"step_up","reason":"APPROVAL_REQUIRED"}"#
        );
        assert_eq!(Decision::Deny(Reason::SkuUnknown).kind(), "deny");
    }

    #[test]
    fn layers_follow_the_spec_grouping() {
        assert_eq!(Reason::PurposeInvalid.layer(), Layer::ToolBoundary);
        assert_eq!(Reason::TenantMismatch.layer(), Layer::Identity);
        assert_eq!(Reason::ApprovalRequired.layer(), Layer::Policy);
        assert_eq!(Reason::DelegationWidens.layer(), Layer::Delegation);
        assert_eq!(Reason::ApprovalNotPending.layer(), Layer::Approval);
        assert_eq!(
            Reason::AuthorityPolicyChanged.layer(),
            Layer::CheckoutAuthority
        );
        assert_eq!(Reason::StateTransitionInvalid.layer(), Layer::ProviderEvent);
        assert_eq!(Reason::IdempotencyKeyReused.layer(), Layer::Replay);
    }
}
