//! Tests written for guards of mutations/registry.yaml whose deletion no other
//! test noticed. Each test names the registry entry it catches.

mod support;

use gate::{Decision, Reason};
use support::*;

async fn state_of(
    w: &World,
    request: &str,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    Ok(w.gate
        .request_state("acme", request)
        .await?
        .unwrap_or_default())
}

/// `authority-policy-started`: the standard policy starts at
/// 2026-01-01T00:00:00Z. A request authorized at that very instant, whose
/// clock then steps back one second, is before the window at checkout and at
/// payment: refused POLICY_NOT_YET_VALID, the request EXPIRES, its budgets
/// come back, and no provider order is made.
#[tokio::test]
async fn checkout_and_pay_refuse_before_the_policy_window_starts() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let start: chrono::DateTime<chrono::Utc> = "2026-01-01T00:00:00Z".parse()?;
    w.clock.set(start);
    let propose = || async {
        let p = w
            .gate
            .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), None)
            .await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(request_id(&p))
    };
    let for_checkout = propose().await?;
    let for_pay = propose().await?;
    let authority = id(&w.gate.checkout("acme", &for_pay, "finance-lead").await?);

    w.clock.set(start - chrono::Duration::seconds(1));
    let o = w
        .gate
        .checkout("acme", &for_checkout, "finance-lead")
        .await?;
    assert_eq!(o.decision, Decision::Deny(Reason::PolicyNotYetValid));
    assert_eq!(state_of(&w, &for_checkout).await?, "EXPIRED");

    let o = w.gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(o.decision, Decision::Deny(Reason::PolicyNotYetValid));
    assert_eq!(state_of(&w, &for_pay).await?, "EXPIRED");
    assert!(
        w.gate.provider().orders().is_empty(),
        "no order before the window"
    );

    let reserved: i64 =
        sqlx::query_scalar("SELECT COALESCE(sum(reserved_paise), 0)::bigint FROM daily_spend")
            .fetch_one(w.pool())
            .await?;
    assert_eq!(reserved, 0, "both reservations came back");

    // The window's first second is inside it.
    w.clock.set(start);
    let again = propose().await?;
    assert!(
        w.gate
            .checkout("acme", &again, "finance-lead")
            .await?
            .is_ok()
    );
    w.drop().await
}
