//! One decision, with the state read from the database under lock.
//!
//! Guarantees: the pure [`crate::policy::evaluate`] decides; this module only
//! gathers its inputs. The caller holds the tenant's day lock; the agent's
//! delegation hops are locked here (through [`super::lock`], oldest first)
//! before their chains are read, so the budgets a decision relies on cannot
//! move before the reservation is taken in the same transaction. When the
//! agent holds several delegations, the first whose chain authorizes the
//! purchase is used; if none does, the refusal is the oldest one's. A
//! missing or unparsable policy refuses (`POLICY_INVALID`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::error::{Ctx, ServiceError};
use super::lock::{AgentHopsKey, lock_all};
use super::rows::AgentHop;
use super::world::{self, CurrentPolicy, RecentOf};
use crate::catalog::Catalog;
use crate::delegation::DelegationChain;
use crate::policy::{Evaluation, Inputs, evaluate};
use crate::proposal::PurchaseProposal;
use crate::reason::{Decision, Layer, Reason};

/// What was decided, and against what.
#[derive(Debug, Clone)]
pub(crate) struct Decided {
    pub evaluation: Evaluation,
    /// The hop whose chain the decision used.
    pub leaf: Option<String>,
    pub policy_version: Option<i32>,
}

/// Whether velocity and the denial rate count: they limit new proposals,
/// not the approval of one already recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moment {
    Proposal,
    Approval,
}

pub(crate) fn refused(reason: Reason) -> Evaluation {
    Evaluation {
        decision: Decision::Deny(reason),
        purchase: None,
        limit: None,
    }
}

/// One decision for `agent`'s `proposal` against the tenant's `catalog`, as
/// the caller read it with the policy (`world::policy_and_catalog`: a plain
/// read, taken before the day lock, which keeps it out of the tenant's
/// critical section).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn decide_with_catalog(
    conn: &mut PgConnection,
    tenant: &str,
    agent: &str,
    proposal: &PurchaseProposal,
    policy: Option<&CurrentPolicy>,
    catalog: Catalog,
    spent_today_paise: i64,
    now: DateTime<Utc>,
    moment: Moment,
) -> Result<Decided, ServiceError> {
    let Some(current) = policy else {
        return Ok(Decided {
            evaluation: refused(Reason::PolicyInvalid),
            leaf: None,
            policy_version: None,
        });
    };
    let version = Some(current.version);
    let policy = match &current.policy {
        Ok(p) => p,
        Err(reason) => {
            return Ok(Decided {
                evaluation: refused(*reason),
                leaf: None,
                policy_version: version,
            });
        }
    };
    // Velocity and the denial rate count this agent's recorded proposals,
    // read with the chains below (under the caller's day lock).
    let recent_of = (moment == Moment::Proposal).then(|| RecentOf {
        agent,
        since: world::window_start(now, policy),
    });
    // Every hop the agent holds, locked deepest first (the lock order), then
    // tried in the order they were granted. Only a hop locked here may be
    // spent from: one granted after the lock was taken waits for the next
    // proposal (spending it unlocked would take a hop out of order).
    // The locked rows are the agent's hops (no second read of them), and
    // every one's chain is read in one statement, oldest leaf first.
    let locked: Vec<AgentHop> = lock_all(conn, AgentHopsKey { tenant, agent })
        .await
        .ctx("locking the agent's delegations")?;
    let leaves: Vec<String> = locked.into_iter().map(|hop| hop.id).collect();
    let (chains, recent) = world::chains(conn, tenant, &leaves, recent_of).await?;
    let spend = recent.unwrap_or_default().spend_state(spent_today_paise);
    let judge = |chain: &DelegationChain| {
        evaluate(&Inputs {
            actor: agent,
            proposal,
            catalog: &catalog,
            policy,
            chain,
            spend: &spend,
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
        };
        match decided.evaluation.decision {
            Decision::Deny(r) if r.layer() == Layer::Delegation => {
                first_refusal.get_or_insert(decided);
            }
            _ => return Ok(decided),
        }
    }
    Ok(first_refusal.unwrap_or_else(|| Decided {
        evaluation: judge(&DelegationChain::default()),
        leaf: None,
        policy_version: version,
    }))
}
