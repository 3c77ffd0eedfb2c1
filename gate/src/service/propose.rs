//! `propose`: the agent-facing call.
//!
//! Guarantees, in the spec's order: the tool boundary (the raw bytes parse
//! into `{sku, quantity, purpose}` or are refused), then identity and tenancy
//! (`TENANT_UNKNOWN`, `ACTOR_UNKNOWN`, `TENANT_MISMATCH`, and
//! `ACTOR_NOT_PERMITTED` for a human: humans do not use the agent-facing
//! call), then the idempotency key (the same key with the same bytes returns
//! the FIRST decision and writes nothing; the same key with other bytes is
//! `IDEMPOTENCY_KEY_REUSED`; copies sent at once decide one at a time under
//! the key's own lock, so they get one decision whatever races them, never
//! an engine error), then the pure engine with the spend state read
//! under the tenant's day lock. On allow, the daily and delegation budgets
//! are reserved in the same transaction as the request row (a refusal by the
//! database becomes the matching budget refusal). Every proposal from a known
//! agent is recorded (it counts towards velocity; a refusal towards the
//! denial rate); every proposal, known agent or not, and its full decision
//! are queued for the ledger (a recorded request's entries in the very
//! statement that records it: one round trip fewer). A recorded request keeps its body exactly as
//! received (`request_bodies`, in that same statement) when the body is
//! within the tool boundary's limit; a proposal refused before a request
//! exists (an unknown tenant or actor) keeps only its digest in the ledger.
//! The agent is told only the redacted view.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;

use super::budget;
use super::current_policy::CurrentPolicy;
use super::decide::{self, Moment, refused};
use super::decision_state::{self, Ask, FirstRequest, ProposalState, State};
use super::error::{Ctx, ServiceError};
use super::identity;
use super::ledger::{self, Entry};
use super::lock::lock_idempotency_key;
use super::requests::{self, Birth, NewRequest};
use super::world::{TenantCatalog, World};
use super::{Gate, ProposeOutcome};
use crate::ident::Ident;
use crate::proposal::{MAX_BODY_BYTES, parse_proposal};
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;
use crate::spend::{SpendState, reopens_at};

impl<P: PaymentProvider> Gate<P> {
    /// The agent-facing call: `raw_body` exactly as the agent sent it.
    pub async fn propose(
        &self,
        tenant: &str,
        actor: &str,
        raw_body: &[u8],
        idempotency_key: Option<&str>,
    ) -> Result<ProposeOutcome, ServiceError> {
        let now = self.now();
        let body_sha256 = hex::encode(Sha256::digest(raw_body));
        let parsed = parse_proposal(raw_body);
        // Held until the proposal is decided: the tenant's proposals past its
        // turns wait here, without a connection (see `turns`).
        let _turn = self.turns().take(tenant).await;
        let mut tx = self.begin_in(tenant, "proposing").await?;

        // A key outside the identifier grammar is never looked up or stored:
        // the proposal is recorded without it and refused PROPOSAL_MALFORMED.
        let key_malformed = idempotency_key.is_some_and(|k| Ident::parse_key(k).is_none());
        let mut stored_key = idempotency_key.filter(|_| !key_malformed);
        let mut forced = parsed.as_ref().err().copied();
        if key_malformed {
            forced = forced.or(Some(Reason::ProposalMalformed));
        }
        // The caller, whether the policy and catalog this gate last read for
        // the tenant are still its own, and then the day and the agent's
        // hops locked and everything the decision reads (the key's first
        // request, the chains, the agent's recent proposals): one round trip
        // (see `locked_state`).
        let found = match identity::refused_unasked(&mut tx, tenant, actor).await? {
            Some(refusal) => Err(refusal),
            None => {
                // Copies of one keyed proposal decide one at a time, whatever
                // races them (a new policy, another currency, midnight):
                // each later copy reads the first one's request.
                if let Some(key) = stored_key {
                    lock_idempotency_key(&mut tx, tenant, actor, key)
                        .await
                        .ctx("locking the idempotency key")?;
                }
                let may_judge = forced.is_none();
                self.locked_state(&mut tx, tenant, actor, stored_key, may_judge, now)
                    .await?
            }
        };
        let (world, state) = match found {
            Ok(found) => found,
            Err(refusal) => {
                let reason = parsed.as_ref().err().copied().unwrap_or(refusal);
                let ledger_tenant = (refusal != Reason::TenantUnknown).then_some(tenant);
                let entry = Entry::new(
                    ledger_tenant,
                    "proposal.refused",
                    actor,
                    json!({
                        "tenant": tenant,
                        "actor": actor,
                        "idempotency_key": idempotency_key,
                        "body_sha256": body_sha256,
                        "body_bytes": raw_body.len(),
                        "decision": Decision::Deny(reason),
                    }),
                );
                self.close_refused(tx, now, entry).await?;
                return Ok(ProposeOutcome::new(None, Decision::Deny(reason), false));
            }
        };
        let policy = world.as_ref().and_then(|w| w.policy.as_ref());
        if stored_key.is_some()
            && let Some(first) = &state.first
        {
            if first.body_sha256 == body_sha256 {
                tx.rollback().await.ctx("ending a replay")?;
                return replay(first);
            }
            stored_key = None;
            forced = forced.or(Some(Reason::IdempotencyKeyReused));
        }
        let today = state.today;

        let proposal = parsed.ok();
        let spend = state.recent.spend_state(today.reserved_paise);
        let decided = match (forced, &proposal) {
            (None, Some(p)) => decide::decide_with_catalog(
                actor,
                p,
                policy,
                // Kept whenever the policy is enforceable; without a policy
                // decide refuses first.
                world
                    .as_ref()
                    .and_then(|w| w.catalog.as_ref())
                    .unwrap_or(&TenantCatalog::default()),
                state.chains,
                &spend,
                now,
            ),
            (reason, _) => decide::Decided {
                evaluation: refused(reason.unwrap_or(Reason::ProposalMalformed)),
                leaf: None,
                policy_version: policy.map(|p| p.version),
                mandate: policy.and_then(|p| p.mandate.clone()),
            },
        };

        let mut decision = decided.evaluation.decision;
        let mut reservation = None;
        if let (Decision::Allow, Some(purchase), Some(leaf)) =
            (decision, &decided.evaluation.purchase, &decided.leaf)
        {
            let wanted = today.reservation(leaf, purchase.amount_paise);
            match budget::reserve(&mut tx, tenant, &wanted, today.cap_paise).await? {
                Ok(()) => reservation = Some(wanted),
                Err(reason) => decision = Decision::Deny(reason),
            }
        }

        // Every proposal is born in its decision's state, in one statement:
        // an allowed one AUTHORIZED, holding the reservation just taken.
        let (born, to) = match (decision, &reservation) {
            (Decision::Allow, Some(r)) => (Birth::Authorized(r), RequestState::Authorized),
            (Decision::StepUp(_), _) => (Birth::PendingApproval, RequestState::PendingApproval),
            (d, _) => {
                let reason = d.reason().unwrap_or(Reason::DelegationMissing);
                decision = Decision::Deny(reason);
                (Birth::Denied(reason), RequestState::Denied)
            }
        };
        // The id is drawn here, so that the entries naming it are made
        // before the one statement that writes the request and queues them.
        let id = requests::new_id()?;
        let entries = vec![
            Entry::new(
                Some(tenant),
                "proposal",
                &id,
                json!({
                    "request": id,
                    "actor": actor,
                    "idempotency_key": stored_key,
                    "body_sha256": body_sha256,
                    "body_bytes": raw_body.len(),
                    "proposal": proposal,
                }),
            ),
            Entry::new(
                Some(tenant),
                "decision",
                &id,
                json!({
                    "request": id,
                    "decision": decision,
                    "evaluation": decided.evaluation,
                    "policy_version": decided.policy_version,
                    "mandate": decided.mandate,
                    "delegation": decided.leaf,
                    "state": to,
                    "reserved_paise": reservation.as_ref().map_or(0, |r| r.amount_paise),
                }),
            ),
        ];
        let queued = ledger::Queued::new(self.ledger_key(), tenant, now, &entries)?;
        let row = requests::insert(
            &mut tx,
            &NewRequest {
                id: &id,
                tenant,
                agent: actor,
                idempotency_key: stored_key,
                body_sha256: &body_sha256,
                body: (raw_body.len() <= MAX_BODY_BYTES).then_some(raw_body),
                proposal: proposal.as_ref(),
                purchase: decided.evaluation.purchase.as_ref(),
                decision,
                policy_version: decided.policy_version,
                born,
                now,
                mac_key: self.ledger_key(),
            },
            Some(&queued),
        )
        .await?;
        tx.commit().await.ctx("committing a proposal")?;
        let mut outcome = ProposeOutcome::new(Some(row.id), decision, false);
        outcome.retry_at = decision
            .reason()
            .and_then(|reason| retry_at(reason, policy, &spend, now));
        Ok(outcome)
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// The caller, then the decision's state locked and read under the
    /// tenant's policy and catalog as they are (see
    /// [`decision_state::read_for_proposal`]), for `agent`'s proposal in
    /// `tenant` today under `key`; `may_judge`: the proposal parsed and its
    /// key was usable, so the engine will judge it if the policy lets it.
    /// The policy and the window come from the world this gate keeps for the
    /// tenant. When that world is not the tenant's any more (or was never
    /// read), the first call sends it and locks nothing, and the second locks
    /// under its terms, as a proposal that reads the policy in a statement
    /// before the lock always did.
    async fn locked_state(
        &self,
        tx: &mut PgConnection,
        tenant: &str,
        agent: &str,
        key: Option<&str>,
        may_judge: bool,
        now: DateTime<Utc>,
    ) -> Result<Result<(Option<Arc<World>>, State), Reason>, ServiceError> {
        let mut world = self.worlds().get(tenant);
        let mut lock_anyway = false;
        loop {
            let policy = world.as_ref().and_then(|w| w.policy.as_ref());
            let judge = may_judge && decide::judges(policy);
            let ask = Ask {
                tenant,
                agent,
                day: now.date_naive(),
                policy,
                judge,
                counted: Moment::Proposal.counted(now, policy).filter(|_| judge),
                key,
            };
            let digest = world.as_ref().map(|w| w.digest.as_str());
            match decision_state::read_for_proposal(
                tx,
                ask,
                digest,
                lock_anyway,
                self.mandate_keys(),
                self.ledger_key(),
            )
            .await?
            {
                ProposalState::Locked(state) => return Ok(Ok((world, state))),
                ProposalState::Refused(reason) => return Ok(Err(reason)),
                ProposalState::Stale(read) if !lock_anyway => {
                    let read = Arc::new(read);
                    self.worlds().put(tenant, Arc::clone(&read));
                    world = Some(read);
                    lock_anyway = true;
                }
                ProposalState::Stale(_) => {
                    return Err(ServiceError::Corrupt {
                        what: format!("a proposal's state in {tenant} was not locked"),
                    });
                }
            }
        }
    }
}

/// When a rate refusal's window next lets a proposal through; `None` for
/// any other reason. The refused proposal is recorded, and counts (towards
/// velocity, and as a denial towards the denial rate), so it is in the
/// window too.
fn retry_at(
    reason: Reason,
    policy: Option<&CurrentPolicy>,
    spend: &SpendState,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let policy = policy?.policy.as_ref().ok()?;
    let with_this = |events: &[DateTime<Utc>]| {
        let mut all = events.to_vec();
        all.push(now);
        all
    };
    match reason {
        Reason::VelocityLimit => reopens_at(
            &with_this(&spend.proposals),
            now,
            policy.velocity.window_minutes,
            policy.velocity.max_proposals,
        ),
        Reason::DenialRateLimit => reopens_at(
            &with_this(&spend.denials),
            now,
            policy.denial_rate.window_minutes,
            policy.denial_rate.max_denials,
        ),
        _ => None,
    }
}

/// The first decision recorded under an idempotency key.
fn replay(first: &FirstRequest) -> Result<ProposeOutcome, ServiceError> {
    let decision = stored_decision(&first.decision, first.reason.as_deref()).ok_or_else(|| {
        ServiceError::Corrupt {
            what: format!("request {} records an unreadable decision", first.id),
        }
    })?;
    Ok(ProposeOutcome::new(Some(first.id.clone()), decision, true))
}

/// A decision as a request row stores it.
pub(crate) fn stored_decision(kind: &str, reason: Option<&str>) -> Option<Decision> {
    let reason = reason.map(str::parse::<Reason>).transpose().ok()?;
    match (kind, reason) {
        ("allow", None) => Some(Decision::Allow),
        ("step_up", Some(r)) => Some(Decision::StepUp(r)),
        ("deny", Some(r)) => Some(Decision::Deny(r)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_step_up_and_a_stored_deny_replay_as_themselves() {
        assert_eq!(
            stored_decision("step_up", Some("APPROVAL_REQUIRED")),
            Some(Decision::StepUp(Reason::ApprovalRequired))
        );
        assert_eq!(
            stored_decision("deny", Some("SKU_UNKNOWN")),
            Some(Decision::Deny(Reason::SkuUnknown))
        );
        assert_eq!(stored_decision("allow", None), Some(Decision::Allow));
    }

    #[test]
    fn a_stored_decision_that_does_not_hang_together_is_unreadable() {
        for (kind, reason) in [
            ("allow", Some("SKU_UNKNOWN")),
            ("step_up", None),
            ("deny", None),
            ("deny", Some("NOT_A_REASON")),
            ("approve", Some("SKU_UNKNOWN")),
            ("", None),
        ] {
            assert_eq!(stored_decision(kind, reason), None, "{kind} {reason:?}");
        }
    }

    /// The first request of a key, as `propose` stored a refused or
    /// stepped-up proposal.
    fn row(decision: &str, reason: Option<&str>) -> FirstRequest {
        FirstRequest {
            id: "req-1".into(),
            decision: decision.into(),
            reason: reason.map(Into::into),
            body_sha256: "00".repeat(32),
        }
    }

    #[test]
    fn replaying_a_stored_step_up_or_deny_returns_it_marked_as_a_replay() {
        let replayed = replay(&row("step_up", Some("APPROVAL_REQUIRED"))).unwrap();
        assert_eq!(
            replayed.decision,
            Decision::StepUp(Reason::ApprovalRequired)
        );
        assert_eq!(replayed.request_id.as_deref(), Some("req-1"));
        assert!(replayed.replayed);
        let replayed = replay(&row("deny", Some("VELOCITY_LIMIT"))).unwrap();
        assert_eq!(replayed.decision, Decision::Deny(Reason::VelocityLimit));
        assert!(replayed.replayed);
    }

    #[test]
    fn replaying_an_unreadable_row_is_a_corrupt_error_never_a_decision() {
        assert!(matches!(
            replay(&row("step_up", None)),
            Err(ServiceError::Corrupt { .. })
        ));
    }
}
