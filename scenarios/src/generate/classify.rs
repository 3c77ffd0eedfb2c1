//! Which taxonomy class a generated refusal belongs to.
//!
//! Guarantees: every reason the oracle can produce for a generated scenario
//! maps to a class id that exists in `scenarios/taxonomy.yaml` (a test
//! checks this against the committed taxonomy).

use gate_core::Reason;

/// The taxonomy class of an attack whose decisive refusal is `reason`.
pub fn class_of(reason: Reason) -> &'static str {
    use Reason::*;
    match reason {
        ProposalMalformed => "tool-boundary.malformed-body",
        ProposalUnknownField => "tool-boundary.extra-field",
        ProposalTooLarge => "tool-boundary.oversized-body",
        QuantityInvalid | AmountOverflow => "tool-boundary.numeric-confusion",
        QuantityExceedsMax => "tool-boundary.quantity-inflation",
        SkuUnknown => "tool-boundary.hallucinated-sku",
        SkuUnavailable => "tool-boundary.unavailable-sku",
        PurposeInvalid => "tool-boundary.purpose-abuse",
        ActorUnknown | ActorNotPermitted => "tool-boundary.actor-spoofing",
        TenantUnknown | TenantMismatch => "database-constraint.cross-tenant-access",
        CurrencyNotAllowed => "policy.currency-substitution",
        MerchantNotAllowed => "policy.merchant-substitution",
        CategoryNotAllowed => "policy.category-scope-drift",
        AmountExceedsTransactionCap => "policy.amount-over-cap",
        DailyBudgetExhausted => "policy.daily-budget-evasion",
        PolicyNotYetValid
        | PolicyExpired
        | PolicyInvalid
        | PriceInvalid
        | MandateSignatureInvalid
        | MandateSignerNotPermitted
        | MandateConstraintUnknown => "policy.validity-window",
        VelocityLimit => "policy.velocity-flood",
        DenialRateLimit => "policy.denial-probing",
        ApprovalRequired => "policy.step-up-evasion",
        DelegationMissing => "delegation.missing",
        DelegationBudgetExhausted => "delegation.budget-exhaustion",
        DelegationSkuOutOfScope => "delegation.sku-scope-escape",
        DelegationRevoked | DelegationChainBroken => "delegation.revocation-mid-chain",
        DelegationExpired => "delegation.expired",
        DelegationWidens | DelegationInvalid | DelegationDepthExceeded => "delegation.widening",
        DelegationGrantorNotPermitted => "delegation.self-granted-authority",
        ApprovalByRequester => "approval.self-approval",
        ApproverNotPermitted => "approval.unauthorized-approver",
        ApprovalAlreadyUsed => "approval.reused-approval",
        ApprovalNotPending => "approval.not-pending",
        RequestNotAuthorized => "checkout-authority.unauthorized-request",
        AuthorityExpired => "checkout-authority.expired",
        AuthorityAlreadyUsed => "checkout-authority.reuse",
        AuthorityPurchaseChanged => "checkout-authority.purchase-changed",
        AuthorityPolicyChanged => "checkout-authority.policy-drift",
        WebhookSignatureInvalid => "provider-event.forged-signature",
        WebhookDuplicate => "provider-event.duplicate-delivery",
        WebhookAmountMismatch | WebhookCurrencyMismatch => "provider-event.amount-mismatch",
        WebhookUnknownOrder => "provider-event.unknown-order",
        WebhookEventIgnored | WebhookMalformed => "provider-event.malformed-or-ignored",
        WebhookStale | WebhookPostDated => "provider-event.stale-or-post-dated",
        StateTransitionInvalid | ProviderRejected | ProviderUnavailable => {
            "provider-event.out-of-order"
        }
        IdempotencyKeyReused => "ledger.idempotency-key-collision",
    }
}
