//! The pure policy engine: one total function from a proposal and the state
//! around it to a [`Decision`].
//!
//! Guarantees: no I/O, no clock, no randomness, no model (a test parses this
//! file and fails the build if it reaches for any). Every input gets a
//! decision, and missing or malformed data refuses: a policy whose validity
//! window is reversed, whose caps are negative or whose currency is not a
//! currency code is `POLICY_INVALID`, never "no limit" (a stored policy
//! whose window does not parse as RFC 3339 does not deserialize, and the
//! service refuses it `POLICY_INVALID` too). Checks run in the
//! spec's order and the first refusal is the reason. Limits are inclusive:
//! an amount equal to a cap, a budget or the approval threshold is within it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::catalog::{self, Catalog, Purchase, is_currency_code};
use crate::delegation::DelegationChain;
use crate::proposal::PurchaseProposal;
use crate::reason::{Decision, Reason};
use crate::spend::{SpendState, count_in_window};

/// At most `max_proposals` proposals per agent in `window_minutes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Velocity {
    pub max_proposals: u32,
    pub window_minutes: u32,
}

/// At most `max_denials` refusals per agent in `window_minutes`; the next
/// proposal is refused `DENIAL_RATE_LIMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenialRate {
    pub max_denials: u32,
    pub window_minutes: u32,
}

/// A tenant's spending policy, with the spec's key names: the one type the
/// gate decides on, the database stores and a world file spells (every key
/// required, none other accepted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub currency: String,
    pub per_transaction_cap_paise: i64,
    pub daily_cap_paise: i64,
    pub approval_threshold_paise: i64,
    pub allowed_merchants: Vec<String>,
    pub allowed_categories: Vec<String>,
    /// RFC 3339, inclusive.
    pub valid_from: DateTime<Utc>,
    /// RFC 3339, inclusive.
    pub valid_until: DateTime<Utc>,
    pub velocity: Velocity,
    pub denial_rate: DenialRate,
}

/// A change to some policy fields (the body of `set_policy`, in the API and
/// in a scenario): any subset of the policy's keys, none other accepted.
/// Each `set_policy` publishes a new version. Serializes only the keys it
/// names.
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
    pub valid_from: Option<PatchInstant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<PatchInstant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub velocity: Option<Velocity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial_rate: Option<DenialRate>,
}

/// A patch's timestamp as written: an RFC 3339 instant, or text that is
/// not one. Decoding takes any string, so a patch naming a date that does
/// not exist (`yesterday`, a 13th month) is an answer, `POLICY_INVALID`
/// from [`Policy::patched`], like every other unenforceable policy, and
/// never a malformed request or a corpus that fails to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchInstant {
    /// An instant, as `DateTime<Utc>` reads RFC 3339.
    At(DateTime<Utc>),
    /// Text that names no instant, kept as written.
    Unreadable(String),
}

impl PolicyPatch {
    /// `document` (a policy's JSON) with every key this patch names
    /// replaced by the patch's value, as written: the document of the next
    /// mandate. A timestamp that is no instant stays the text it was, so
    /// the document does not parse as a [`Policy`] and is refused.
    pub fn applied_to(&self, document: &serde_json::Value) -> serde_json::Value {
        let mut out = document.clone();
        if let (Some(out), Ok(serde_json::Value::Object(keys))) =
            (out.as_object_mut(), serde_json::to_value(self))
        {
            out.extend(keys);
        }
        out
    }

    /// Whether every timestamp the patch names is an instant; a patch with
    /// one that is not is refused `POLICY_INVALID`.
    pub fn readable(&self) -> bool {
        self.valid_from
            .iter()
            .chain(&self.valid_until)
            .all(|at| at.instant().is_some())
    }
}

impl PatchInstant {
    /// The instant, or `None` for text that names none.
    pub fn instant(&self) -> Option<DateTime<Utc>> {
        match self {
            PatchInstant::At(at) => Some(*at),
            PatchInstant::Unreadable(_) => None,
        }
    }
}

impl From<DateTime<Utc>> for PatchInstant {
    fn from(at: DateTime<Utc>) -> Self {
        PatchInstant::At(at)
    }
}

impl std::str::FromStr for PatchInstant {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.parse::<DateTime<Utc>>() {
            Ok(at) => PatchInstant::At(at),
            Err(_) => PatchInstant::Unreadable(s.to_owned()),
        })
    }
}

impl Serialize for PatchInstant {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PatchInstant::At(at) => at.serialize(serializer),
            PatchInstant::Unreadable(text) => serializer.serialize_str(text),
        }
    }
}

impl<'de> Deserialize<'de> for PatchInstant {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let Ok(read) = text.parse::<PatchInstant>();
        Ok(read)
    }
}

impl Policy {
    /// This policy with every field `patch` names replaced. A timestamp the
    /// patch names that is no instant leaves that field as it was: a caller
    /// refuses such a patch first ([`PolicyPatch::readable`]).
    pub fn patched(&self, patch: &PolicyPatch) -> Policy {
        let p = patch.clone();
        let instant = |given: Option<PatchInstant>, current: DateTime<Utc>| {
            given.and_then(|g| g.instant()).unwrap_or(current)
        };
        Policy {
            currency: p.currency.unwrap_or_else(|| self.currency.clone()),
            per_transaction_cap_paise: p
                .per_transaction_cap_paise
                .unwrap_or(self.per_transaction_cap_paise),
            daily_cap_paise: p.daily_cap_paise.unwrap_or(self.daily_cap_paise),
            approval_threshold_paise: p
                .approval_threshold_paise
                .unwrap_or(self.approval_threshold_paise),
            allowed_merchants: p
                .allowed_merchants
                .unwrap_or_else(|| self.allowed_merchants.clone()),
            allowed_categories: p
                .allowed_categories
                .unwrap_or_else(|| self.allowed_categories.clone()),
            valid_from: instant(p.valid_from, self.valid_from),
            valid_until: instant(p.valid_until, self.valid_until),
            velocity: p.velocity.unwrap_or(self.velocity),
            denial_rate: p.denial_rate.unwrap_or(self.denial_rate),
        }
    }

    /// The validity window, or `POLICY_INVALID` when the policy cannot be
    /// enforced as written.
    pub fn validated(&self) -> Result<(DateTime<Utc>, DateTime<Utc>), Reason> {
        let (from, until) = (self.valid_from, self.valid_until);
        let caps = [
            self.per_transaction_cap_paise,
            self.daily_cap_paise,
            self.approval_threshold_paise,
        ];
        if from > until
            || caps.iter().any(|c| *c < 0)
            || !is_currency_code(&self.currency)
            || !rate_window_ok(self.velocity.window_minutes)
            || !rate_window_ok(self.denial_rate.window_minutes)
            || !is_operator_instant(from)
            || !is_operator_instant(until)
        {
            return Err(Reason::PolicyInvalid);
        }
        Ok((from, until))
    }

    /// Whether an operator may publish this policy: it must be enforceable
    /// ([`Policy::validated`]), its validity window must have a length (a
    /// window that ends where it starts, or before, is a mistake, never an
    /// intent), and every merchant and category it names must be an
    /// identifier. `POLICY_INVALID` otherwise, and nothing is published.
    pub fn publishable(&self) -> Result<(), Reason> {
        let (from, until) = self.validated()?;
        let names_ok = self
            .allowed_merchants
            .iter()
            .chain(&self.allowed_categories)
            .all(|name| crate::ident::is_ident(name));
        if from >= until || !names_ok {
            return Err(Reason::PolicyInvalid);
        }
        Ok(())
    }
}

/// Whether `at` is an instant an operator may send (a policy's window, a
/// delegation's expiry): from 1970-01-01T00:00:00Z to the last instant of
/// 9999-12-31, both inclusive. Anything else is `POLICY_INVALID` or
/// `DELEGATION_INVALID`, never a timestamp handed to the database.
pub fn is_operator_instant(at: DateTime<Utc>) -> bool {
    let year = chrono::Datelike::year(&at);
    (1970..=9999).contains(&year)
}

/// A rate window of at least a minute and at most [`MAX_RATE_WINDOW_MINUTES`].
fn rate_window_ok(minutes: u32) -> bool {
    (1..=MAX_RATE_WINDOW_MINUTES).contains(&minutes)
}

/// The longest velocity or denial-rate window: 31 days. A longer one is
/// refused `POLICY_INVALID` (a window of billions of minutes would reach
/// before any instant the database can store).
pub const MAX_RATE_WINDOW_MINUTES: u32 = 31 * 24 * 60;

/// Everything one decision depends on.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The agent making the proposal (already known to belong to the tenant).
    pub actor: &'a str,
    pub proposal: &'a PurchaseProposal,
    pub catalog: &'a Catalog,
    pub policy: &'a Policy,
    /// The actor's delegation chain, root first; empty when it holds none.
    pub chain: &'a DelegationChain,
    pub spend: &'a SpendState,
    pub now: DateTime<Utc>,
}

/// A cap that a refusal ran into. Goes to the ledger, never to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHit {
    pub limit: i64,
    pub used: i64,
    pub requested: i64,
}

/// The full decision, with what the server derived. The agent sees only
/// [`crate::redact::AgentView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluation {
    #[serde(flatten)]
    pub decision: Decision,
    pub purchase: Option<Purchase>,
    pub limit: Option<LimitHit>,
}

impl Evaluation {
    fn deny(reason: Reason, purchase: Option<Purchase>) -> Self {
        Evaluation {
            decision: Decision::Deny(reason),
            purchase,
            limit: None,
        }
    }
}

/// Decides one proposal (steps 4 to 10 of the spec's order; the tool
/// boundary, identity and idempotency come before and outside).
pub fn evaluate(inputs: &Inputs<'_>) -> Evaluation {
    let Inputs {
        actor,
        proposal,
        catalog,
        policy,
        chain,
        spend,
        now,
    } = *inputs;
    let (valid_from, valid_until) = match policy.validated() {
        Ok(window) => window,
        Err(reason) => return Evaluation::deny(reason, None),
    };
    let denials = count_in_window(&spend.denials, now, policy.denial_rate.window_minutes);
    if denials >= policy.denial_rate.max_denials as usize {
        return Evaluation::deny(Reason::DenialRateLimit, None);
    }
    let proposals = count_in_window(&spend.proposals, now, policy.velocity.window_minutes);
    if proposals >= policy.velocity.max_proposals as usize {
        return Evaluation::deny(Reason::VelocityLimit, None);
    }
    if now < valid_from {
        return Evaluation::deny(Reason::PolicyNotYetValid, None);
    }
    if now > valid_until {
        return Evaluation::deny(Reason::PolicyExpired, None);
    }
    let purchase = match catalog::derive(proposal, catalog) {
        Ok(p) => p,
        Err(reason) => return Evaluation::deny(reason, None),
    };
    if purchase.currency != policy.currency {
        return Evaluation::deny(Reason::CurrencyNotAllowed, Some(purchase));
    }
    if !policy.allowed_merchants.contains(&purchase.merchant) {
        return Evaluation::deny(Reason::MerchantNotAllowed, Some(purchase));
    }
    if !policy.allowed_categories.contains(&purchase.category) {
        return Evaluation::deny(Reason::CategoryNotAllowed, Some(purchase));
    }
    let amount = purchase.amount_paise;
    if amount > policy.per_transaction_cap_paise {
        let limit = LimitHit {
            limit: policy.per_transaction_cap_paise,
            used: 0,
            requested: amount,
        };
        return Evaluation {
            limit: Some(limit),
            ..Evaluation::deny(Reason::AmountExceedsTransactionCap, Some(purchase))
        };
    }
    if spend.spent_today_paise.checked_add(amount).is_none() {
        return Evaluation::deny(Reason::DailyBudgetExhausted, Some(purchase));
    }
    // Cannot wrap: the sum was checked just above.
    let after_today = spend.spent_today_paise.wrapping_add(amount);
    if spend.spent_today_paise < 0 || after_today > policy.daily_cap_paise {
        let limit = LimitHit {
            limit: policy.daily_cap_paise,
            used: spend.spent_today_paise,
            requested: amount,
        };
        return Evaluation {
            limit: Some(limit),
            ..Evaluation::deny(Reason::DailyBudgetExhausted, Some(purchase))
        };
    }
    if let Err(reason) = chain.authorize(actor, &purchase.sku, amount, now) {
        return Evaluation::deny(reason, Some(purchase));
    }
    let decision = if amount > policy.approval_threshold_paise {
        Decision::StepUp(Reason::ApprovalRequired)
    } else {
        Decision::Allow
    };
    Evaluation {
        decision,
        purchase: Some(purchase),
        limit: None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::tests::standard as standard_catalog;
    use crate::delegation::tests::{hop, now};
    use chrono::Duration;

    pub(crate) fn standard_policy() -> Policy {
        crate::standard_world::policy()
    }

    #[test]
    fn operators_instants_run_from_1970_to_the_end_of_9999() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        for inside in [
            "1970-01-01T00:00:00Z",
            "2026-09-03T10:00:00Z",
            "9999-12-31T23:59:59.999999Z",
        ] {
            assert!(is_operator_instant(at(inside)), "{inside}");
        }
        let outside = [
            at("1969-12-31T23:59:59.999999Z"),
            DateTime::<Utc>::from_timestamp(253_402_300_800, 0).unwrap(),
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        ];
        for t in outside {
            assert!(!is_operator_instant(t), "{t}");
            let mut p = standard_policy();
            p.valid_from = t.min(p.valid_from);
            p.valid_until = t.max(p.valid_until);
            assert_eq!(p.validated(), Err(Reason::PolicyInvalid), "{t}");
        }
    }

    pub(crate) fn d_buyer() -> DelegationChain {
        DelegationChain::new(vec![hop("d-buyer", None, "buyer-agent", 200000)])
    }

    struct World {
        catalog: Catalog,
        policy: Policy,
        chain: DelegationChain,
        spend: SpendState,
        now: DateTime<Utc>,
    }

    impl World {
        fn standard() -> Self {
            World {
                catalog: standard_catalog(),
                policy: standard_policy(),
                chain: d_buyer(),
                spend: SpendState::default(),
                now: now(),
            }
        }

        fn decide(&self, sku: &str, quantity: u32) -> Decision {
            let proposal = PurchaseProposal {
                sku: sku.into(),
                quantity,
                purpose: "test".into(),
            };
            evaluate(&Inputs {
                actor: "buyer-agent",
                proposal: &proposal,
                catalog: &self.catalog,
                policy: &self.policy,
                chain: &self.chain,
                spend: &self.spend,
                now: self.now,
            })
            .decision
        }
    }

    use Decision::{Allow, Deny, StepUp};

    #[test]
    fn an_ordinary_purchase_is_allowed() {
        assert_eq!(World::standard().decide("CLOUD-STARTER", 1), Allow);
        assert_eq!(World::standard().decide("SNACK-BOX", 4), Allow);
    }

    #[test]
    fn the_approval_threshold_is_inclusive() {
        let w = World::standard();
        assert_eq!(w.decide("SNACK-BOX", 4), Allow); // 100000 == threshold
        assert_eq!(w.decide("SNACK-BOX", 5), StepUp(Reason::ApprovalRequired)); // 125000
        assert_eq!(w.decide("CLOUD-TEAM", 1), StepUp(Reason::ApprovalRequired));
        assert_eq!(
            w.decide("CLOUD-STARTER", 2),
            StepUp(Reason::ApprovalRequired)
        );
    }

    #[test]
    fn currency_merchant_and_category_allowlists_refuse_in_order() {
        let w = World::standard();
        assert_eq!(w.decide("CLOUD-USD", 1), Deny(Reason::CurrencyNotAllowed));
        assert_eq!(w.decide("USB-HUB", 1), Deny(Reason::MerchantNotAllowed));
        let mut w = World::standard();
        w.policy.allowed_merchants.push("gadgetmart".into());
        assert_eq!(w.decide("USB-HUB", 1), Deny(Reason::CategoryNotAllowed));
    }

    #[test]
    fn the_per_transaction_cap_is_inclusive() {
        let mut w = World::standard();
        w.chain.hops[0].budget_paise = 1_000_000;
        assert_eq!(
            w.decide("GPU-HOUR", 1),
            Deny(Reason::AmountExceedsTransactionCap)
        );
        w.policy.per_transaction_cap_paise = 450000;
        assert_eq!(w.decide("GPU-HOUR", 1), StepUp(Reason::ApprovalRequired));
        w.policy.per_transaction_cap_paise = 449999;
        assert_eq!(
            w.decide("GPU-HOUR", 1),
            Deny(Reason::AmountExceedsTransactionCap)
        );
    }

    #[test]
    fn the_daily_cap_is_inclusive() {
        let mut w = World::standard();
        w.spend.spent_today_paise = 440000;
        assert_eq!(w.decide("CLOUD-STARTER", 1), Allow); // exactly 500000
        w.spend.spent_today_paise = 440001;
        assert_eq!(
            w.decide("CLOUD-STARTER", 1),
            Deny(Reason::DailyBudgetExhausted)
        );
    }

    #[test]
    fn a_corrupt_spend_state_refuses() {
        let mut w = World::standard();
        w.spend.spent_today_paise = i64::MAX;
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::DailyBudgetExhausted));
        w.spend.spent_today_paise = -1;
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::DailyBudgetExhausted));
    }

    #[test]
    fn the_validity_window_is_inclusive_at_both_ends() {
        let mut w = World::standard();
        w.now = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(w.decide("SNACK-BOX", 1), Allow);
        w.now -= Duration::seconds(1);
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::PolicyNotYetValid));
        w.now = "2026-12-31T23:59:59Z".parse().unwrap();
        assert_eq!(w.decide("SNACK-BOX", 1), Allow);
        w.now += Duration::seconds(1);
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::PolicyExpired));
    }

    #[test]
    fn a_policy_that_does_not_parse_refuses_rather_than_meaning_no_limit() {
        for broken in [
            |p: &mut Policy| p.valid_from = "2027-01-01T00:00:00Z".parse().unwrap(),
            |p: &mut Policy| p.daily_cap_paise = -1,
            |p: &mut Policy| p.per_transaction_cap_paise = -100,
            |p: &mut Policy| p.approval_threshold_paise = -1,
            |p: &mut Policy| p.currency = "rupees".into(),
            |p: &mut Policy| p.velocity.window_minutes = 0,
            |p: &mut Policy| p.denial_rate.window_minutes = 0,
        ] {
            let mut w = World::standard();
            broken(&mut w.policy);
            assert_eq!(
                w.decide("SNACK-BOX", 1),
                Deny(Reason::PolicyInvalid),
                "{:?}",
                w.policy
            );
        }
        // A window that is not RFC 3339 never becomes a policy at all (the
        // service refuses such a stored policy POLICY_INVALID).
        for (key, text) in [
            ("valid_until", ""),
            ("valid_from", "yesterday"),
            ("valid_until", "2026-13-01T00:00:00Z"),
        ] {
            let mut json = serde_json::to_value(standard_policy()).unwrap();
            json[key] = serde_json::json!(text);
            assert!(
                serde_json::from_value::<Policy>(json).is_err(),
                "{key}: {text}"
            );
        }
    }

    #[test]
    fn an_empty_allowlist_allows_nothing() {
        let mut w = World::standard();
        w.policy.allowed_merchants.clear();
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::MerchantNotAllowed));
    }

    #[test]
    fn the_twentieth_proposal_passes_and_the_twenty_first_is_refused() {
        let mut w = World::standard();
        w.spend.proposals = (0..19).map(|i| w.now - Duration::minutes(i)).collect();
        assert_eq!(w.decide("SNACK-BOX", 1), Allow);
        w.spend.proposals.push(w.now);
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::VelocityLimit));
        w.now += Duration::minutes(60);
        assert_eq!(w.decide("SNACK-BOX", 1), Allow, "the window moved on");
    }

    #[test]
    fn five_denials_refuse_the_sixth_proposal_and_a_denial_outside_the_window_does_not() {
        let mut w = World::standard();
        w.spend.denials = (0..4).map(|i| w.now - Duration::minutes(i)).collect();
        assert_eq!(w.decide("SNACK-BOX", 1), Allow);
        w.spend.denials.push(w.now - Duration::minutes(60));
        assert_eq!(w.decide("SNACK-BOX", 1), Allow, "60 minutes old is outside");
        w.spend.denials.push(w.now - Duration::minutes(59));
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::DenialRateLimit));
    }

    #[test]
    fn denial_rate_wins_over_velocity_and_both_over_everything_after() {
        let mut w = World::standard();
        w.spend.denials = vec![w.now; 5];
        w.spend.proposals = vec![w.now; 20];
        assert_eq!(w.decide("NOPE", 1), Deny(Reason::DenialRateLimit));
        w.spend.denials.clear();
        assert_eq!(w.decide("NOPE", 1), Deny(Reason::VelocityLimit));
    }

    #[test]
    fn the_policy_window_wins_over_the_catalog() {
        let mut w = World::standard();
        w.now = "2027-02-01T00:00:00Z".parse().unwrap();
        assert_eq!(w.decide("NOPE", 1), Deny(Reason::PolicyExpired));
    }

    #[test]
    fn catalog_refusals_come_before_allowlists() {
        let w = World::standard();
        assert_eq!(w.decide("NOPE", 1), Deny(Reason::SkuUnknown));
        assert_eq!(w.decide("LEGACY-PLAN", 1), Deny(Reason::SkuUnavailable));
        assert_eq!(w.decide("RUNNER-PRO", 50), Deny(Reason::QuantityExceedsMax));
        assert_eq!(w.decide("USB-HUB", 4), Deny(Reason::QuantityExceedsMax));
    }

    #[test]
    fn caps_win_over_delegation() {
        let mut w = World::standard();
        w.chain = DelegationChain::default();
        assert_eq!(
            w.decide("GPU-HOUR", 1),
            Deny(Reason::AmountExceedsTransactionCap)
        );
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::DelegationMissing));
    }

    #[test]
    fn the_delegation_budget_binds_below_the_daily_cap() {
        let mut w = World::standard();
        w.chain.hops[0].spent_paise = 180000;
        assert_eq!(
            w.decide("SNACK-BOX", 1),
            Deny(Reason::DelegationBudgetExhausted)
        );
        w.chain.hops[0].spent_paise = 175000;
        assert_eq!(
            w.decide("SNACK-BOX", 1),
            Allow,
            "the last paisa of the delegation"
        );
    }

    #[test]
    fn delegation_wins_over_step_up() {
        let mut w = World::standard();
        w.chain.hops[0].skus = Some(vec!["SNACK-BOX".into()]);
        assert_eq!(
            w.decide("CLOUD-TEAM", 1),
            Deny(Reason::DelegationSkuOutOfScope)
        );
    }

    #[test]
    fn a_refusal_records_the_cap_for_the_ledger() {
        let mut w = World::standard();
        w.spend.spent_today_paise = 450000;
        let proposal = PurchaseProposal {
            sku: "CLOUD-STARTER".into(),
            quantity: 1,
            purpose: "x".into(),
        };
        let e = evaluate(&Inputs {
            actor: "buyer-agent",
            proposal: &proposal,
            catalog: &w.catalog,
            policy: &w.policy,
            chain: &w.chain,
            spend: &w.spend,
            now: w.now,
        });
        assert_eq!(
            e.limit,
            Some(LimitHit {
                limit: 500000,
                used: 450000,
                requested: 60000
            })
        );
        assert_eq!(e.purchase.map(|p| p.amount_paise), Some(60000));
    }

    #[test]
    fn patching_changes_only_the_named_fields() {
        let p = standard_policy();
        let patched = p.patched(&PolicyPatch {
            daily_cap_paise: Some(1),
            ..PolicyPatch::default()
        });
        assert_eq!(patched.daily_cap_paise, 1);
        assert_eq!(
            patched.per_transaction_cap_paise,
            p.per_transaction_cap_paise
        );
        assert_eq!(p.patched(&PolicyPatch::default()), p);
    }

    #[test]
    fn a_patch_serializes_only_the_keys_it_names() {
        let patch = PolicyPatch {
            daily_cap_paise: Some(1),
            valid_until: Some("2026-12-31T23:59:59Z".parse().unwrap()),
            ..PolicyPatch::default()
        };
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            serde_json::json!({"daily_cap_paise": 1, "valid_until": "2026-12-31T23:59:59Z"})
        );
        let back: PolicyPatch =
            serde_json::from_value(serde_json::json!({"daily_cap_paise": 1})).unwrap();
        assert_eq!(back.daily_cap_paise, Some(1));
        assert!(
            serde_json::from_value::<PolicyPatch>(serde_json::json!({"daily_cap": 1})).is_err()
        );
    }

    #[test]
    fn policy_yaml_refuses_unknown_keys() {
        let json = serde_json::to_value(standard_policy()).unwrap();
        let mut obj = json.as_object().unwrap().clone();
        obj.insert("spending_limit".into(), serde_json::json!(5000000));
        assert!(serde_json::from_value::<Policy>(serde_json::Value::Object(obj)).is_err());
    }

    // The outside audit: boundaries that a mutant could move so
    // that the gate refuses too much.

    #[test]
    fn a_zero_approval_threshold_is_valid_and_sends_every_purchase_to_a_human() {
        let mut w = World::standard();
        w.policy.approval_threshold_paise = 0;
        assert!(
            w.policy.validated().is_ok(),
            "a zero threshold is enforceable"
        );
        assert_eq!(w.policy.publishable(), Ok(()), "and publishable");
        assert_eq!(w.decide("SNACK-BOX", 1), StepUp(Reason::ApprovalRequired));
        assert_eq!(
            w.decide("CLOUD-STARTER", 1),
            StepUp(Reason::ApprovalRequired)
        );
    }

    #[test]
    fn a_zero_cap_is_valid_and_refuses_by_that_cap_not_as_an_invalid_policy() {
        let mut w = World::standard();
        w.policy.per_transaction_cap_paise = 0;
        assert_eq!(w.policy.publishable(), Ok(()));
        assert_eq!(
            w.decide("SNACK-BOX", 1),
            Deny(Reason::AmountExceedsTransactionCap)
        );
        let mut w = World::standard();
        w.policy.daily_cap_paise = 0;
        assert_eq!(w.policy.publishable(), Ok(()));
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::DailyBudgetExhausted));
    }

    #[test]
    fn a_policy_window_of_a_single_instant_allows_at_that_instant_only() {
        let mut w = World::standard();
        let instant: DateTime<Utc> = "2026-09-03T10:00:00Z".parse().unwrap();
        w.policy.valid_from = instant;
        w.policy.valid_until = instant;
        w.now = instant;
        assert!(w.policy.validated().is_ok(), "from == until is enforceable");
        assert_eq!(w.decide("SNACK-BOX", 1), Allow);
        w.now += Duration::seconds(1);
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::PolicyExpired));
        w.now -= Duration::seconds(2);
        assert_eq!(w.decide("SNACK-BOX", 1), Deny(Reason::PolicyNotYetValid));
        assert_eq!(
            w.policy.publishable(),
            Err(Reason::PolicyInvalid),
            "an operator may not publish a window without length"
        );
    }
}
