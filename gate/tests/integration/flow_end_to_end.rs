//! The whole flow against Postgres: propose → (approve) → checkout → pay →
//! signed capture → CAPTURED, and the invariants read back from the rows.

use crate::support::*;
use gate::service::webhook::{EVENT_CAPTURED, EVENT_FAILED};
use gate::{Decision, Reason};

#[tokio::test]
async fn a_purchase_goes_from_proposal_to_capture() -> TestResult {
    on_world(async |w| {
        let (request, _authority, order) = paid_order(w).await?;
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        let (body, sig) = event(w, "evt_1", EVENT_CAPTURED, &order, 60000);
        let hook = w.gate.webhook(&body, Some(&sig), Some("evt_1")).await?;
        assert!(hook.is_ok(), "{hook:?}");
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!(inv.provider_orders, 1);
        assert_eq!(inv.captured_paise, 60000);
        assert_eq!(inv.spent_today_paise, 60000);
        assert_eq!(inv.delegation_spent_paise.get("d-buyer"), Some(&60000));
        assert!(inv.ledger_intact, "{:?}", inv.ledger_break);
        assert_eq!(w.gate.provider().orders().len(), 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_step_up_purchase_is_approved_then_paid_and_captured() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-TEAM", 1).await?;
        assert_eq!(p.decision, Decision::StepUp(Reason::ApprovalRequired));
        assert_eq!(
            w.gate.spent_today_paise("acme").await?,
            0,
            "nothing is reserved before approval"
        );
        let request = request_id(&p);
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Allow, "{a:?}");
        assert_eq!(w.gate.spent_today_paise("acme").await?, 180000);
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        let paid = w.gate.pay("acme", &id(&c), "finance-lead").await?;
        let (body, sig) = event(w, "evt_team", EVENT_CAPTURED, &id(&paid), 180000);
        assert!(
            w.gate
                .webhook(&body, Some(&sig), Some("evt_team"))
                .await?
                .is_ok()
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!((inv.provider_orders, inv.captured_paise), (1, 180000));
        assert_eq!(inv.delegation_spent_paise.get("d-buyer"), Some(&180000));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_failed_payment_attempt_keeps_the_request_pending_with_both_budgets() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let (body, sig) = event(w, "evt_fail", EVENT_FAILED, &order, 60000);
        assert!(
            w.gate
                .webhook(&body, Some(&sig), Some("evt_fail"))
                .await?
                .is_ok()
        );
        // One failed attempt: the order can still be paid, so nothing is released.
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!((inv.spent_today_paise, inv.captured_paise), (60000, 0));
        assert_eq!(inv.delegation_spent_paise.get("d-buyer"), Some(&60000));
        assert_eq!(inv.provider_orders, 1);
        assert!(inv.ledger_intact);
        Ok(())
    })
    .await
}
