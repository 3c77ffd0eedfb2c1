//! `approve`: a human agrees to a step-up request.
//!
//! Guarantees: the approver is resolved inside the REQUEST's tenant
//! (`TENANT_MISMATCH` for a human of another tenant); the requesting agent
//! cannot approve (`APPROVAL_BY_REQUESTER`); only a human who may approve can
//! (`APPROVER_NOT_PERMITTED`). The request is locked and re-read: a request
//! that already has an approval is `APPROVAL_ALREADY_USED`, one that is not
//! awaiting approval `APPROVAL_NOT_PENDING`. The approval row is written
//! (`uq_live_approval` holds one per request) and consumed at once
//! (`ck_approval_consumed_once`): approval RE-EVALUATES the request against
//! the state at that moment (velocity and the denial rate aside: they limit
//! new proposals) and reserves the budgets then, in the same transaction. A
//! purchase that no longer hashes to what was proposed is refused
//! `AUTHORITY_PURCHASE_CHANGED`; any other refusal moves the request to
//! DENIED. A pending request whose terms do not verify against the gate's
//! MAC (`row_mac`, keyed from the ledger key) as the step-up the gate
//! recorded (a row a database login inserted or edited) is refused
//! `AUTHORITY_PURCHASE_CHANGED` before any approval is written, and left as
//! it is; an approved request's MAC is rewritten to its authorized standing
//! with the move. Every approval attempt is appended to the ledger.

use serde_json::json;

use super::budget;
use super::decide::{self, Moment};
use super::decision_state::{self, Ask};
use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::{RequestKey, lock};
use super::requests::{self, Transition};
use super::rows::RequestRow;
use super::world;
use super::{Gate, Outcome};
use crate::proposal::PurchaseProposal;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;

impl<P: PaymentProvider> Gate<P> {
    /// `approver` approves the step-up request `request_id`. Allow: the request
    /// is AUTHORIZED; deny: refused with the reason (the request may have moved
    /// to DENIED on re-evaluation).
    pub async fn approve(
        &self,
        tenant: &str,
        request_id: &str,
        approver: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin_in(tenant, "approving").await?;
        let refuse = |tenant: Option<&str>, reason: Reason| {
            Entry::new(
                tenant,
                "approval.refused",
                request_id,
                json!({"request": request_id, "approver": approver, "decision": Decision::Deny(reason)}),
            )
        };
        let who = identity::resolve(&mut tx, tenant, approver).await?;
        if who == Err(Reason::TenantUnknown) {
            tx.rollback().await.ctx("ending a refused approval")?;
            return Ok(Outcome::refused(Reason::TenantUnknown));
        }
        let Some(found) = requests::find(&mut tx, tenant, request_id).await? else {
            return self
                .refuse(
                    tx,
                    now,
                    refuse(Some(tenant), Reason::ApprovalNotPending),
                    Reason::ApprovalNotPending,
                )
                .await;
        };
        let tenant = found.tenant_id.clone();
        let refusal = match who {
            Err(reason) => Some(reason),
            Ok(Who::Agent) if approver == found.agent_id => Some(Reason::ApprovalByRequester),
            Ok(w) if !w.may_approve() => Some(Reason::ApproverNotPermitted),
            Ok(_) => None,
        };
        if let Some(reason) = refusal {
            return self
                .refuse(tx, now, refuse(Some(&tenant), reason), reason)
                .await;
        }

        let request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &tenant,
                request: request_id,
            },
        )
        .await
        .ctx("locking the request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("request {request_id} vanished"),
        })?;
        let already: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM approvals WHERE tenant_id = $1 AND request_id = $2)",
        )
        .bind(&tenant)
        .bind(request_id)
        .fetch_one(&mut *tx)
        .await
        .ctx("looking for an earlier approval")?;
        let refusal = if already {
            Some(Reason::ApprovalAlreadyUsed)
        } else if request.state != RequestState::PendingApproval {
            Some(Reason::ApprovalNotPending)
        } else {
            None
        };
        if let Some(reason) = refusal {
            return self
                .refuse(tx, now, refuse(Some(&tenant), reason), reason)
                .await;
        }
        if !request.mac_holds(self.ledger_key(), ledger::STANDING_AWAITING) {
            // Terms the gate did not record: nothing is approved on them.
            let reason = Reason::AuthorityPurchaseChanged;
            return self
                .refuse(tx, now, refuse(Some(&tenant), reason), reason)
                .await;
        }
        if request.lifetime_over(now) {
            // Waited for a human past its lifetime: it expires instead.
            let reason = Reason::ApprovalNotPending;
            Transition::new(&request, RequestState::Expired)
                .because(reason)
                .apply(&mut tx, now)
                .await?;
            let mut entry = refuse(Some(&tenant), reason);
            entry.body["request_state"] = json!(RequestState::Expired);
            return self.refuse(tx, now, entry, reason).await;
        }

        let approval_id: String = sqlx::query_scalar(
            "INSERT INTO approvals (tenant_id, request_id, approver_id, approved_at) \
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(&tenant)
        .bind(request_id)
        .bind(approver)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .ctx("recording the approval")?;
        sqlx::query(
            "UPDATE approvals SET consumptions = consumptions + 1, consumed_at = $3 \
             WHERE tenant_id = $1 AND id = $2",
        )
        .bind(&tenant)
        .bind(&approval_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .ctx("consuming the approval")?;

        let Reevaluated {
            decision,
            evaluation,
            leaf,
            version,
            mandate,
            reserved,
        } = reevaluate(
            &mut tx,
            &request,
            now,
            self.mandate_keys(),
            self.ledger_key(),
        )
        .await?;
        let entries = vec![
            Entry::new(
                Some(&tenant),
                "approval",
                request_id,
                json!({"request": request_id, "approval": approval_id, "approver": approver}),
            ),
            Entry::new(
                Some(&tenant),
                "decision",
                request_id,
                json!({
                    "request": request_id,
                    "decision": decision,
                    "evaluation": evaluation,
                    "policy_version": version,
                    "mandate": mandate,
                    "delegation": leaf,
                    "state": if decision == Decision::Allow { RequestState::Authorized } else { RequestState::Denied },
                    "reserved_paise": reserved,
                    "on": "approval",
                }),
            ),
        ];
        ledger::append(&mut tx, self.ledger_key(), now, entries).await?;
        tx.commit().await.ctx("committing an approval")?;
        Ok(Outcome {
            decision,
            id: Some(request_id.to_owned()),
            constraint: None,
        })
    }
}

/// What re-evaluating an approved request decided.
struct Reevaluated {
    decision: Decision,
    evaluation: crate::policy::Evaluation,
    leaf: Option<String>,
    version: Option<i32>,
    /// The digest of the signed mandate the decision applied.
    mandate: Option<String>,
    reserved: i64,
}

/// Re-decides an approved request and moves it to AUTHORIZED or DENIED.
async fn reevaluate(
    tx: &mut sqlx::PgConnection,
    request: &RequestRow,
    now: chrono::DateTime<chrono::Utc>,
    keys: &mandate::Keyring,
    ledger_key: &ledger::LedgerKey,
) -> Result<Reevaluated, ServiceError> {
    let tenant = request.tenant_id.as_str();
    let proposal = match (&request.sku, request.quantity, &request.purpose) {
        (Some(sku), Some(q), Some(purpose)) => PurchaseProposal {
            sku: sku.clone(),
            quantity: u32::try_from(q).unwrap_or(0),
            purpose: purpose.clone(),
        },
        _ => {
            return Err(ServiceError::Corrupt {
                what: format!("pending request {} has no proposal", request.id),
            });
        }
    };
    // The policy and the catalog in one plain read, before the day lock (as
    // `propose` reads them): the catalog stays out of the tenant's critical
    // section.
    let (policy, catalog) = world::policy_and_catalog(tx, tenant, true, keys, ledger_key).await?;
    // The day and the agent's hops locked, then their chains read, in one
    // round trip (velocity and the denial rate do not count at approval).
    let judge = decide::judges(policy.as_ref());
    let state = decision_state::read(
        tx,
        Ask {
            tenant,
            agent: &request.agent_id,
            day: now.date_naive(),
            policy: policy.as_ref(),
            judge,
            counted: Moment::Approval.counted(now, policy.as_ref()),
            key: None,
        },
    )
    .await?;
    let today = state.today;
    let decided = decide::decide_with_catalog(
        &request.agent_id,
        &proposal,
        policy.as_ref(),
        // Read whenever the policy is enforceable; without one, decide
        // refuses before it looks at a catalog.
        &catalog.unwrap_or_default(),
        state.chains,
        &state.recent.spend_state(today.reserved_paise),
        now,
    );
    let purchase = decided.evaluation.purchase.clone();
    let mut decision = match decided.evaluation.decision {
        // The amount still needs a human, and one just agreed.
        Decision::StepUp(_) | Decision::Allow => Decision::Allow,
        refusal => refusal,
    };
    if decision == Decision::Allow
        && purchase.as_ref().map(|p| p.digest()) != request.purchase_digest
    {
        decision = Decision::Deny(Reason::AuthorityPurchaseChanged);
    }
    let mut reserved = 0;
    if let (Decision::Allow, Some(p), Some(leaf)) = (decision, &purchase, &decided.leaf) {
        let wanted = today.reservation(leaf, p.amount_paise);
        match budget::reserve(tx, tenant, &wanted, today.cap_paise).await? {
            Ok(()) => {
                // Authorized by the gate: the terms as recorded, under the
                // version that decided them.
                let authorized = ledger::RequestTerms {
                    policy_version: decided.policy_version.or(request.policy_version),
                    ..request.terms(ledger::STANDING_ALLOWED)
                }
                .mac(ledger_key);
                Transition::new(request, RequestState::Authorized)
                    .taking(&wanted)
                    .under_policy(decided.policy_version)
                    .sealed(&authorized)
                    .apply(tx, now)
                    .await?;
                reserved = p.amount_paise;
            }
            Err(reason) => decision = Decision::Deny(reason),
        }
    } else if decision == Decision::Allow {
        decision = Decision::Deny(Reason::DelegationMissing);
    }
    if let Decision::Deny(reason) | Decision::StepUp(reason) = decision {
        Transition::new(request, RequestState::Denied)
            .because(reason)
            .apply(tx, now)
            .await?;
    }
    Ok(Reevaluated {
        decision,
        evaluation: decided.evaluation,
        leaf: decided.leaf,
        version: decided.policy_version,
        mandate: decided.mandate,
        reserved,
    })
}
