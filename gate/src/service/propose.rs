//! `propose`: the agent-facing call.
//!
//! Guarantees, in the spec's order: the tool boundary (the raw bytes parse
//! into `{sku, quantity, purpose}` or are refused), then identity and tenancy
//! (`TENANT_UNKNOWN`, `ACTOR_UNKNOWN`, `TENANT_MISMATCH`, and
//! `ACTOR_NOT_PERMITTED` for a human: humans do not use the agent-facing
//! call), then the idempotency key (the same key with the same bytes returns
//! the FIRST decision and writes nothing; the same key with other bytes is
//! `IDEMPOTENCY_KEY_REUSED`), then the pure engine with the spend state read
//! under the tenant's day lock. On allow, the daily and delegation budgets
//! are reserved in the same transaction as the request row (a refusal by the
//! database becomes the matching budget refusal). Every proposal from a known
//! agent is recorded (it counts towards velocity; a refusal towards the
//! denial rate); every proposal, known agent or not, and its full decision
//! are appended to the ledger (a recorded request's entries in the very
//! statement that records it when the ledger key remembers the tenant's
//! head: one round trip fewer). The agent is told only the redacted view.

use serde_json::json;
use sha2::{Digest, Sha256};

use super::budget;
use super::decide::{self, Moment, refused};
use super::decision_state::{self, Ask, FirstRequest};
use super::error::{Ctx, ServiceError};
use super::identity::Who;
use super::ledger::{self, Entry};
use super::request_state::RequestState;
use super::requests::{self, Birth, NewRequest, Transition};
use super::world;
use super::{Gate, ProposeOutcome};
use crate::ident::Ident;
use crate::proposal::parse_proposal;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};

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
        let mut tx = self.begin("proposing").await?;

        // The caller, and (when it may propose) the policy and the catalog:
        // plain reads, before the day lock, in one statement.
        let (who, policy, catalog) =
            world::caller_policy_and_catalog(&mut tx, tenant, actor, parsed.is_ok()).await?;
        let refusal = match who {
            Err(reason) => Some(reason),
            // Humans do not use the agent-facing call.
            Ok(who) if who != Who::Agent => Some(Reason::ActorNotPermitted),
            Ok(_) => None,
        };
        if let Some(refusal) = refusal {
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

        // A key outside the identifier grammar is never looked up or stored:
        // the proposal is recorded without it and refused PROPOSAL_MALFORMED.
        let key_malformed = idempotency_key.is_some_and(|k| Ident::parse_key(k).is_none());
        let mut stored_key = idempotency_key.filter(|_| !key_malformed);
        let mut forced = parsed.as_ref().err().copied();
        if key_malformed {
            forced = forced.or(Some(Reason::ProposalMalformed));
        }
        // The day and the agent's hops locked, then everything the decision
        // reads (the key's first request, the chains, the agent's recent
        // proposals), in one round trip.
        let judge = forced.is_none() && decide::judges(policy.as_ref());
        let state = decision_state::read(
            &mut tx,
            Ask {
                tenant,
                agent: actor,
                day: now.date_naive(),
                policy: policy.as_ref(),
                judge,
                since: Moment::Proposal
                    .counted_since(now, policy.as_ref())
                    .filter(|_| judge),
                key: stored_key,
            },
        )
        .await?;
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
        let decided = match (forced, &proposal) {
            (None, Some(p)) => decide::decide_with_catalog(
                actor,
                p,
                policy.as_ref(),
                // Read whenever the proposal parsed and the policy is
                // enforceable; without a policy decide refuses first.
                &catalog.unwrap_or_default(),
                state.chains,
                &state.recent.spend_state(today.reserved_paise),
                now,
            ),
            (reason, _) => decide::Decided {
                evaluation: refused(reason.unwrap_or(Reason::ProposalMalformed)),
                leaf: None,
                policy_version: policy.as_ref().map(|p| p.version),
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

        // A refused or stepped-up proposal is born in its state (one
        // statement); an allowed one is born PROPOSED and moves to AUTHORIZED
        // with the reservation just taken.
        let (born, to) = match (decision, &reservation) {
            (Decision::Allow, Some(_)) => (Birth::Proposed, RequestState::Authorized),
            (Decision::StepUp(_), _) => (Birth::PendingApproval, RequestState::PendingApproval),
            (d, _) => {
                let reason = d.reason().unwrap_or(Reason::DelegationMissing);
                decision = Decision::Deny(reason);
                (Birth::Denied(reason), RequestState::Denied)
            }
        };
        // The id is drawn here, so that the entries naming it are chained
        // and hashed before the one statement that writes the request and,
        // when the key remembers the tenant's head, the entries with it.
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
                    "delegation": decided.leaf,
                    "state": to,
                    "reserved_paise": reservation.as_ref().map_or(0, |r| r.amount_paise),
                }),
            ),
        ];
        let chained = ledger::chain_from_last_head(self.ledger_key(), tenant, now, &entries)?;
        let (row, moved) = requests::insert(
            &mut tx,
            &NewRequest {
                id: &id,
                tenant,
                agent: actor,
                idempotency_key: stored_key,
                body_sha256: &body_sha256,
                proposal: proposal.as_ref(),
                purchase: decided.evaluation.purchase.as_ref(),
                decision,
                policy_version: decided.policy_version,
                born,
                now,
            },
            chained.as_ref(),
        )
        .await?;
        if let (Birth::Proposed, Some(r)) = (born, &reservation) {
            Transition::new(&row, RequestState::Authorized)
                .taking(r)
                .apply(&mut tx, now)
                .await?;
        }
        let appended = chained.is_some_and(|c| c.landed(self.ledger_key(), moved));
        if !appended {
            ledger::append(&mut tx, self.ledger_key(), now, entries).await?;
        }
        tx.commit().await.ctx("committing a proposal")?;
        Ok(ProposeOutcome::new(Some(row.id), decision, false))
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
