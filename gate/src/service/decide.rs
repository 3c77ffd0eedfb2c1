//! One decision, on the state read under the tenant's locks.
//!
//! Guarantees: the pure [`crate::policy::evaluate`] decides; this module
//! only chooses which of the agent's delegations it judges. The caller read
//! the chains and the spend state with [`super::decision_state::read`],
//! which locked the tenant's day and the agent's hops first, so the budgets
//! a decision relies on cannot move before the reservation is taken in the
//! same transaction. When the agent holds several delegations, the first
//! whose chain authorizes the purchase is used; if none does, the refusal is
//! the oldest one's. A missing or unparsable policy refuses
//! (`POLICY_INVALID`); under an enforceable one, a proposal for a sku whose
//! catalog row does not verify against the gate's MAC refuses
//! (`PRICE_INVALID`): no purchase is derived from a price the gate did not
//! write.

use chrono::{DateTime, Utc};

use super::current_policy::CurrentPolicy;
use super::world::{self, TenantCatalog};
use crate::delegation::DelegationChain;
use crate::policy::{Evaluation, Inputs, evaluate};
use crate::proposal::PurchaseProposal;
use crate::reason::{Decision, Layer, Reason};
use crate::spend::SpendState;

/// What was decided, and against what.
#[derive(Debug, Clone)]
pub(crate) struct Decided {
    pub evaluation: Evaluation,
    /// The hop whose chain the decision used.
    pub leaf: Option<String>,
    pub policy_version: Option<i32>,
    /// The digest of the signed mandate the decision applied.
    pub mandate: Option<String>,
}

/// Whether velocity and the denial rate count: they limit new proposals,
/// not the approval of one already recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moment {
    Proposal,
    Approval,
}

/// Which of an agent's recorded proposals a decision reads: those made
/// after `since` (the start of the longer of the policy's two windows), and
/// of them at most the newest `proposals`, and the newest `denials` of the
/// refused ones: the policy's velocity and denial-rate limits.
///
/// The engine only asks whether a window holds its limit, and a window's
/// proposals are the newest ones after `since`, so the newest `limit` of
/// them decide exactly as all of them would: the count it sees is
/// min(count, limit), which reaches the limit exactly when the count does.
/// Reading no more than that keeps an agent that goes on proposing past its
/// limits (each refusal is recorded too) from making every later decision
/// of its tenant read its whole flood under the tenant's day lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    pub since: DateTime<Utc>,
    pub proposals: u32,
    pub denials: u32,
}

impl Moment {
    /// Which of the agent's recorded proposals count towards a decision at
    /// `now` under `policy` (see [`Counted`]), or `None` when none count: at
    /// an approval, or without an enforceable policy (which refuses first).
    pub fn counted(self, now: DateTime<Utc>, policy: Option<&CurrentPolicy>) -> Option<Counted> {
        let policy = policy?.policy.as_ref().ok()?;
        (self == Moment::Proposal).then(|| Counted {
            since: world::window_start(now, policy),
            proposals: policy.velocity.max_proposals,
            denials: policy.denial_rate.max_denials,
        })
    }
}

/// Whether [`decide_with_catalog`] will judge delegation chains under
/// `policy`: only an enforceable policy gets that far.
pub(crate) fn judges(policy: Option<&CurrentPolicy>) -> bool {
    policy.is_some_and(|p| p.policy.is_ok())
}

pub(crate) fn refused(reason: Reason) -> Evaluation {
    Evaluation {
        decision: Decision::Deny(reason),
        purchase: None,
        limit: None,
    }
}

/// One decision for `agent`'s `proposal` against the tenant's `catalog`
/// (read with the policy by `world::policy_and_catalog`, a plain read before
/// the locks), on the `chains` and `spend` state read under the locks by
/// [`super::decision_state::read`]: each chain is the agent's hop, with the
/// chain above it, the oldest hop first.
pub(crate) fn decide_with_catalog(
    agent: &str,
    proposal: &PurchaseProposal,
    policy: Option<&CurrentPolicy>,
    catalog: &TenantCatalog,
    chains: Vec<(String, DelegationChain)>,
    spend: &SpendState,
    now: DateTime<Utc>,
) -> Decided {
    let Some(current) = policy else {
        return Decided {
            evaluation: refused(Reason::PolicyInvalid),
            leaf: None,
            policy_version: None,
            mandate: None,
        };
    };
    let version = Some(current.version);
    let mandate = current.mandate.clone();
    let policy = match &current.policy {
        Ok(p) => p,
        Err(reason) => {
            return Decided {
                evaluation: refused(*reason),
                leaf: None,
                policy_version: version,
                mandate,
            };
        }
    };
    if catalog.unverified(&proposal.sku) {
        return Decided {
            evaluation: refused(Reason::PriceInvalid),
            leaf: None,
            policy_version: version,
            mandate,
        };
    }
    let catalog = &catalog.items;
    let judge = |chain: &DelegationChain| {
        evaluate(&Inputs {
            actor: agent,
            proposal,
            catalog,
            policy,
            chain,
            spend,
            now,
        })
    };
    let mut first_refusal: Option<Decided> = None;
    for (leaf, chain) in chains {
        let evaluation = judge(&chain);
        let decided = Decided {
            evaluation,
            leaf: Some(leaf),
            policy_version: version,
            mandate: mandate.clone(),
        };
        match decided.evaluation.decision {
            Decision::Deny(r) if r.layer() == Layer::Delegation => {
                first_refusal.get_or_insert(decided);
            }
            _ => return decided,
        }
    }
    first_refusal.unwrap_or_else(|| Decided {
        evaluation: judge(&DelegationChain::default()),
        leaf: None,
        policy_version: version,
        mandate,
    })
}
