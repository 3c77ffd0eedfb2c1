//! `approve` against Postgres: who may approve, once, and re-evaluation at
//! the moment of approval (budgets are reserved then, not at proposal).

use crate::support::*;
use gate::service::Grant;
use gate::{Decision, PolicyPatch, Reason};

async fn step_up(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-TEAM", 1).await?;
    assert_eq!(p.decision, Decision::StepUp(Reason::ApprovalRequired));
    Ok(request_id(&p))
}

#[tokio::test]
async fn only_a_human_of_the_tenant_who_may_approve_and_is_not_the_requester_approves() -> TestResult
{
    on_world(async |w| {
        let request = step_up(w).await?;
        for (approver, reason) in [
            ("buyer-agent", Reason::ApprovalByRequester),
            ("procurement-agent", Reason::ApproverNotPermitted),
            ("intern", Reason::ApproverNotPermitted),
            ("globex-finance", Reason::TenantMismatch),
            ("nobody", Reason::ActorUnknown),
        ] {
            let a = w.gate.approve("acme", &request, approver).await?;
            assert_eq!(a.decision, Decision::Deny(reason), "{approver}");
        }
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PENDING_APPROVAL")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 0);
        assert!(
            w.gate
                .approve("acme", &request, "finance-lead")
                .await?
                .is_ok()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_approval_is_used_once() -> TestResult {
    on_world(async |w| {
        let request = step_up(w).await?;
        assert!(
            w.gate
                .approve("acme", &request, "finance-lead")
                .await?
                .is_ok()
        );
        let again = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(again.decision, Decision::Deny(Reason::ApprovalAlreadyUsed));
        assert_eq!(
            w.gate.spent_today_paise("acme").await?,
            180000,
            "reserved once"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_request_that_is_not_awaiting_approval_cannot_be_approved() -> TestResult {
    on_world(async |w| {
        let expired = step_up(w).await?;
        assert!(w.gate.expire("acme", &expired).await?.is_ok());
        let a = w.gate.approve("acme", &expired, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Deny(Reason::ApprovalNotPending));
        let allowed = request_id(&w.propose("SNACK-BOX", 1).await?);
        let denied = request_id(&w.propose("USB-HUB", 1).await?);
        for request in [allowed.as_str(), denied.as_str(), "req_999999"] {
            let a = w.gate.approve("acme", request, "finance-lead").await?;
            assert_eq!(
                a.decision,
                Decision::Deny(Reason::ApprovalNotPending),
                "{request}"
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn approval_re_evaluates_against_the_budget_at_that_moment() -> TestResult {
    on_world(async |w| {
        let request = step_up(w).await?; // 180000 of d-buyer's 200000
        // Meanwhile the agent spends 50000 of the delegation.
        assert_eq!(w.propose("SNACK-BOX", 2).await?.decision, Decision::Allow);
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(
            a.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted)
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("DENIED")
        );
        assert_eq!(
            w.gate.spent_today_paise("acme").await?,
            50000,
            "nothing reserved for the denied request"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn approval_re_evaluates_against_the_policy_and_the_chain_at_that_moment() -> TestResult {
    on_world(async |w| {
        let capped = step_up(w).await?;
        let revoked = step_up(w).await?;
        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    per_transaction_cap_paise: Some(150000),
                    ..Default::default()
                },
            )
            .await?;
        let a = w.gate.approve("acme", &capped, "finance-lead").await?;
        assert_eq!(
            a.decision,
            Decision::Deny(Reason::AmountExceedsTransactionCap)
        );
        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    per_transaction_cap_paise: Some(300000),
                    ..Default::default()
                },
            )
            .await?;
        assert!(
            w.gate
                .revoke("acme", "d-buyer", "finance-lead")
                .await?
                .is_ok()
        );
        let a = w.gate.approve("acme", &revoked, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Deny(Reason::DelegationRevoked));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_approval_of_a_purchase_whose_price_moved_is_refused() -> TestResult {
    on_world(async |w| {
        let request = step_up(w).await?;
        assert!(
            w.gate
                .set_price("acme", "CLOUD-TEAM", 170000)
                .await?
                .is_ok()
        );
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Deny(Reason::AuthorityPurchaseChanged));
        assert_eq!(w.gate.spent_today_paise("acme").await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_approved_request_uses_a_new_delegation_granted_meanwhile() -> TestResult {
    on_world(async |w| {
        let p = w.propose_as("procurement-agent", "CLOUD-TEAM", 1).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DelegationMissing));
        let grant = Grant {
            id: "d-proc".into(),
            from: "d-buyer".into(),
            to: "procurement-agent".into(),
            budget_paise: 190000,
            skus: None,
            expires_at: None,
        };
        assert!(w.gate.grant_as_written("acme", &grant).await?.is_ok());
        let p = w.propose_as("procurement-agent", "CLOUD-TEAM", 1).await?;
        assert_eq!(p.decision, Decision::StepUp(Reason::ApprovalRequired));
        assert!(
            w.gate
                .approve("acme", &request_id(&p), "finance-lead")
                .await?
                .is_ok()
        );
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-proc").await?,
            Some(180000)
        );
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(0)
        );
        Ok(())
    })
    .await
}

/// `(state_reason, policy_version)` of a request, as the row holds them.
async fn reason_and_version(
    w: &World,
    request: &str,
) -> Result<(Option<String>, Option<i32>), sqlx::Error> {
    sqlx::query_as(
        "SELECT state_reason, policy_version FROM payment_requests \
         WHERE tenant_id = 'acme' AND id = $1",
    )
    .bind(request)
    .fetch_one(w.pool())
    .await
}

#[tokio::test]
async fn an_approval_records_the_policy_it_decided_under_and_a_refusal_its_reason() -> TestResult {
    on_world(async |w| {
        let allowed = step_up(w).await?;
        let refused = step_up(w).await?;
        let (_, proposed_under) = reason_and_version(w, &allowed).await?;
        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    per_transaction_cap_paise: Some(250000),
                    ..Default::default()
                },
            )
            .await?;
        let current: i32 =
            sqlx::query_scalar("SELECT max(version) FROM policy_versions WHERE tenant_id = 'acme'")
                .fetch_one(w.pool())
                .await?;
        assert_ne!(
            proposed_under,
            Some(current),
            "set_policy published a new version"
        );
        let a = w.gate.approve("acme", &allowed, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Allow);
        assert_eq!(
            reason_and_version(w, &allowed).await?,
            (None, Some(current))
        );
        // The sealed terms name the version that approved them, so the
        // checkout under that same version finds its seal intact.
        let c = w.gate.checkout("acme", &allowed, "finance-lead").await?;
        assert!(c.is_ok(), "approved under the current policy: {c:?}");

        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    per_transaction_cap_paise: Some(150000),
                    ..Default::default()
                },
            )
            .await?;
        let a = w.gate.approve("acme", &refused, "finance-lead").await?;
        assert_eq!(
            a.decision,
            Decision::Deny(Reason::AmountExceedsTransactionCap)
        );
        let (reason, _) = reason_and_version(w, &refused).await?;
        assert_eq!(reason.as_deref(), Some("AMOUNT_EXCEEDS_TRANSACTION_CAP"));
        Ok(())
    })
    .await
}
