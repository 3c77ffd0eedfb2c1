//! State that stays true over time: an authorized request lives 24 hours,
//! checkout and pay check the policy window again, the expiry sweep ends
//! what outlived its time, revocation gives back what the branch did not
//! use, a day's cap never adds two currencies, and every operation stays in
//! its caller's tenant. Each boundary is tested at the exact instant, one
//! second before and one second after.

use crate::support::*;
use chrono::Duration;
use gate::PolicyPatch;
use gate::service::Grant;
use gate::{Decision, Reason};

async fn allowed(w: &World, sku: &str) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose(sku, 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    Ok(request_id(&p))
}

async fn state_of(
    w: &World,
    request: &str,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    Ok(w.gate
        .request_state("acme", request)
        .await?
        .unwrap_or_default())
}

async fn reserved_today(w: &World) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COALESCE(sum(reserved_paise), 0)::bigint FROM daily_spend")
        .fetch_one(w.pool())
        .await
}

#[tokio::test]
async fn an_authorized_request_lives_exactly_twenty_four_hours() -> TestResult {
    on_world(async |w| {
        let on_time = allowed(w, "SNACK-BOX").await?;
        let late = allowed(w, "SNACK-BOX").await?;
        w.clock.advance(Duration::hours(24) - Duration::seconds(1));
        w.clock.advance(Duration::seconds(1));
        assert!(
            w.gate
                .checkout("acme", &on_time, "finance-lead")
                .await?
                .is_ok(),
            "exactly 24 hours is inside the lifetime"
        );
        w.clock.advance(Duration::seconds(1));
        let o = w.gate.checkout("acme", &late, "finance-lead").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::RequestNotAuthorized));
        assert_eq!(state_of(w, &late).await?, "EXPIRED");
        assert_eq!(
            reserved_today(w).await?,
            25000,
            "only the checked-out one holds"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_expiry_sweep_ends_what_outlived_its_time_and_releases_it() -> TestResult {
    on_world(async |w| {
        let authorized = allowed(w, "SNACK-BOX").await?;
        let pending = w.propose("CLOUD-STARTER", 2).await?;
        assert!(
            matches!(pending.decision, Decision::StepUp(_)),
            "{pending:?}"
        );
        let pending = request_id(&pending);
        w.clock.advance(Duration::hours(24));
        assert_eq!(
            w.gate.expire_sweep("acme").await?,
            0,
            "nothing is past its time yet"
        );
        w.clock.advance(Duration::seconds(1));
        assert_eq!(w.gate.expire_sweep("acme").await?, 2);
        assert_eq!(state_of(w, &authorized).await?, "EXPIRED");
        assert_eq!(state_of(w, &pending).await?, "EXPIRED");
        assert_eq!(reserved_today(w).await?, 0);
        assert_eq!(
            w.gate.expire_sweep("acme").await?,
            0,
            "a second sweep ends nothing"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pay_checks_the_policy_window_again() -> TestResult {
    on_world(async |w| {
        // The standard policy is valid until 2026-12-31T23:59:59Z.
        w.clock.set("2026-12-31T23:50:00Z".parse()?);
        let request = allowed(w, "SNACK-BOX").await?;
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        w.clock.set("2026-12-31T23:59:59Z".parse()?);
        let second = allowed(w, "SNACK-BOX").await?;
        let second_authority = id(&w.gate.checkout("acme", &second, "finance-lead").await?);
        assert!(
            w.gate
                .pay("acme", &second_authority, "finance-lead")
                .await?
                .is_ok(),
            "the last second of the window is inside it"
        );
        w.clock.set("2027-01-01T00:00:00Z".parse()?);
        let o = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::PolicyExpired));
        assert_eq!(state_of(w, &request).await?, "EXPIRED");
        assert_eq!(
            w.gate.provider().orders().len(),
            1,
            "no order past the window"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn checkout_checks_the_policy_window_again() -> TestResult {
    on_world(async |w| {
        w.clock.set("2026-12-31T23:59:00Z".parse()?);
        let request = allowed(w, "SNACK-BOX").await?;
        w.clock.advance(Duration::seconds(60));
        let o = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::PolicyExpired));
        assert_eq!(state_of(w, &request).await?, "EXPIRED");
        assert_eq!(reserved_today(w).await?, 0, "its reservations came back");
        Ok(())
    })
    .await
}

fn grant(id: &str, from: &str, to: &str, budget: i64) -> Grant {
    Grant {
        id: id.into(),
        from: from.into(),
        to: to.into(),
        budget_paise: budget,
        skus: None,
        expires_at: None,
    }
}

async fn allocated(w: &World, hop: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT allocated_paise FROM delegations WHERE tenant_id = 'acme' AND id = $1",
    )
    .bind(hop)
    .fetch_one(w.pool())
    .await
}

#[tokio::test]
async fn revoking_an_unspent_child_returns_its_allocation_to_the_parent() -> TestResult {
    on_world(async |w| {
        // d-buyer holds 200000; the child takes 150000 of it.
        assert!(
            w.gate
                .grant_as_written(
                    "acme",
                    &grant("d-child", "d-buyer", "procurement-agent", 150_000)
                )
                .await?
                .is_ok()
        );
        let p = w.propose("CLOUD-STARTER", 1).await?;
        assert_eq!(
            p.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted)
        );
        assert!(
            w.gate
                .revoke("acme", "d-child", "finance-lead")
                .await?
                .is_ok()
        );
        assert_eq!(allocated(w, "d-buyer").await?, 0);
        allowed(w, "CLOUD-STARTER").await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_reservation_under_a_revoked_branch_comes_back_when_its_request_ends() -> TestResult {
    on_world(async |w| {
        assert!(
            w.gate
                .grant_as_written(
                    "acme",
                    &grant("d-child", "d-buyer", "procurement-agent", 100_000)
                )
                .await?
                .is_ok()
        );
        assert!(
            w.gate
                .grant_as_written(
                    "acme",
                    &grant("d-leaf", "d-child", "renewals-agent", 80_000)
                )
                .await?
                .is_ok()
        );
        let p = w.propose_as("renewals-agent", "CLOUD-STARTER", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        let held = request_id(&p);
        assert!(
            w.gate
                .revoke("acme", "d-child", "finance-lead")
                .await?
                .is_ok()
        );
        assert_eq!(
            allocated(w, "d-buyer").await?,
            60_000,
            "the held 60000 stays claimed"
        );
        assert!(w.gate.cancel("acme", &held, "finance-lead").await?.is_ok());
        assert_eq!(
            allocated(w, "d-buyer").await?,
            0,
            "and comes back when the request ends"
        );
        // Revoking the parent of a revoked hop later still keeps the sums exact.
        assert!(
            w.gate
                .revoke("acme", "d-buyer", "finance-lead")
                .await?
                .is_ok()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_days_cap_never_adds_two_currencies() -> TestResult {
    on_world(async |w| {
    let cap = PolicyPatch {
        daily_cap_paise: Some(61_000),
        ..Default::default()
    };
    assert!(w.gate.set_policy("acme", &cap).await?.is_ok());
    allowed(w, "CLOUD-STARTER").await?; // 60000 INR
    let usd = PolicyPatch {
        currency: Some("USD".into()),
        ..Default::default()
    };
    assert!(w.gate.set_policy("acme", &usd).await?.is_ok());
    // 2000 cents: 60000 + 2000 would pass 61000 if paise and cents were added.
    allowed(w, "CLOUD-USD").await?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT currency::text, reserved_paise FROM daily_spend WHERE tenant_id = 'acme' ORDER BY currency",
    )
    .fetch_all(w.pool())
    .await?;
    assert_eq!(rows, vec![("INR".into(), 60_000), ("USD".into(), 2_000)]);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ids_are_random_and_another_tenants_objects_are_missing() -> TestResult {
    on_world(async |w| {
        let a = allowed(w, "SNACK-BOX").await?;
        let b = allowed(w, "SNACK-BOX").await?;
        for id in [&a, &b] {
            assert!(id.starts_with("req_") && id.len() == 36, "{id}");
            assert!(id[4..].bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        assert_ne!(a[..20], b[..20], "not a counter");
        // globex's people and agents cannot reach acme's request by its id.
        let o = w.gate.checkout("globex", &a, "globex-finance").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::RequestNotAuthorized));
        let o = w.gate.expire("globex", &a).await?;
        assert_eq!(o.decision, Decision::Deny(Reason::StateTransitionInvalid));
        let o = w.gate.cancel("globex", &a, "globex-finance").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::StateTransitionInvalid));
        assert_eq!(w.gate.request_state("globex", &a).await?, None);
        assert_eq!(state_of(w, &a).await?, "AUTHORIZED", "untouched");
        let authority = id(&w.gate.checkout("acme", &a, "finance-lead").await?);
        let o = w.gate.pay("globex", &authority, "globex-finance").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::RequestNotAuthorized));
        // pay needs an actor.
        let o = w.gate.pay("acme", &authority, "").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::ActorUnknown));
        assert!(w.gate.pay("acme", &authority, "buyer-agent").await?.is_ok());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_step_up_waits_for_a_human_twenty_four_hours_at_most() -> TestResult {
    on_world(async |w| {
        let two = body("CLOUD-STARTER", 2);
        let propose = || w.gate.propose("acme", "buyer-agent", &two, None);
        let on_time = request_id(&propose().await?);
        let late = request_id(&propose().await?);
        w.clock.advance(Duration::hours(24));
        assert!(
            w.gate
                .approve("acme", &on_time, "finance-lead")
                .await?
                .is_ok(),
            "exactly 24 hours is inside the lifetime"
        );
        w.clock.advance(Duration::seconds(1));
        let o = w.gate.approve("acme", &late, "finance-lead").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::ApprovalNotPending));
        assert_eq!(state_of(w, &late).await?, "EXPIRED");
        Ok(())
    })
    .await
}
