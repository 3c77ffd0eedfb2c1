//! The gaps an outside mutation audit (cargo-mutants) found in the
//! database-backed gate, each closed by a test named for what it proves:
//! approval counts today's spend in the engine itself (not only through the
//! database's refusal further down) and records the decision it took; the
//! boundaries that a mutant could move so that the gate refuses too much
//! (a hop with exactly nothing left, through checkout and pay; a child
//! granted its untouched parent's whole budget; a zero approval threshold; a
//! body of exactly 4096 bytes); a release that finds only one of its two
//! rows is an error that gives nothing back; an agent without a
//! delegation is still held to the denial rate; and a ninth hop is refused
//! by the engine before the database sees it.

use crate::support::*;
use gate::proposal::MAX_BODY_BYTES;
use gate::service::{Grant, ServiceError};
use gate::{Decision, PolicyPatch, Reason};
use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

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

/// buyer-agent proposes CLOUD-TEAM x1 (180000 paise, over the approval threshold).
async fn step_up(w: &World) -> Res<String> {
    let p = w.propose("CLOUD-TEAM", 1).await?;
    assert_eq!(p.decision, Decision::StepUp(Reason::ApprovalRequired));
    Ok(request_id(&p))
}

/// `agent` proposes `sku` x`quantity`, which must be allowed; returns the request.
async fn allowed(w: &World, agent: &str, sku: &str, quantity: u32) -> Res<String> {
    let p = w
        .gate
        .propose("acme", agent, &body(sku, quantity), None)
        .await?;
    assert_eq!(
        p.decision,
        Decision::Allow,
        "{agent} {sku} x{quantity}: {p:?}"
    );
    Ok(request_id(&p))
}

/// Checks out and pays `request` as finance-lead; both must succeed.
async fn checkout_and_pay(w: &World, request: &str) -> TestResult {
    let c = w.gate.checkout("acme", request, "finance-lead").await?;
    assert!(c.is_ok(), "checkout of {request}: {c:?}");
    let paid = w.gate.pay("acme", &id(&c), "finance-lead").await?;
    assert!(paid.is_ok(), "pay of {request}: {paid:?}");
    Ok(())
}

/// The body of the last ledger entry of `kind` about `subject`.
async fn last_entry(w: &World, kind: &str, subject: &str) -> Res<Value> {
    w.gate.integrate().await?;
    let texts: Vec<String> =
        sqlx::query_scalar("SELECT entry FROM ledger_entries WHERE kind = $1 ORDER BY seq DESC")
            .bind(kind)
            .fetch_all(w.owner())
            .await?;
    for text in texts {
        let entry: Value = serde_json::from_str(&text)?;
        if entry["subject"] == subject {
            return Ok(entry["body"].clone());
        }
    }
    Err(format!("no {kind} entry about {subject}").into())
}

/// Grants procurement-agent its own root delegation and spends 400000 paise
/// of acme's 500000 daily cap through it (four SNACK-BOX x4, each at the
/// approval threshold).
async fn spend_400000_elsewhere(w: &World) -> TestResult {
    let g = w
        .gate
        .grant_as_written(
            "acme",
            &grant("d-proc-own", "finance-lead", "procurement-agent", 400000),
        )
        .await?;
    assert!(g.is_ok(), "{g:?}");
    for _ in 0..4 {
        allowed(w, "procurement-agent", "SNACK-BOX", 4).await?;
    }
    assert_eq!(w.gate.spent_today_paise("acme").await?, 400000);
    Ok(())
}

#[tokio::test]
async fn approval_counts_todays_spend_in_the_engine_and_records_the_cap_it_ran_into() -> TestResult
{
    on_world(async |w| {
        let request = step_up(w).await?;
        spend_400000_elsewhere(w).await?;
        // 400000 + 180000 is over the 500000 cap.
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Deny(Reason::DailyBudgetExhausted));
        // The engine itself refused, knowing what the day already held: an engine
        // that ignored today's spend would have said step_up and left the refusal
        // to the database's conditional reservation, with no cap in the record.
        let decision = last_entry(w, "decision", &request).await?;
        assert_eq!(decision["on"], "approval");
        assert_eq!(
            decision["decision"],
            json!(Decision::Deny(Reason::DailyBudgetExhausted))
        );
        assert_eq!(decision["evaluation"]["decision"], "deny");
        assert_eq!(decision["evaluation"]["reason"], "DAILY_BUDGET_EXHAUSTED");
        assert_eq!(
            decision["evaluation"]["limit"],
            json!({"limit": 500000, "used": 400000, "requested": 180000})
        );
        assert_eq!(decision["state"], "DENIED");
        assert_eq!(decision["reserved_paise"], 0);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("DENIED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 400000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn at_approval_a_day_over_its_cap_is_named_before_an_exhausted_delegation() -> TestResult {
    on_world(async |w| {
        let request = step_up(w).await?;
        spend_400000_elsewhere(w).await?;
        // buyer-agent spends 25000 of d-buyer's 200000: 175000 left, less than
        // the 180000 awaiting approval, so the delegation would refuse too.
        allowed(w, "buyer-agent", "SNACK-BOX", 1).await?;
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(
            a.decision,
            Decision::Deny(Reason::DailyBudgetExhausted),
            "the daily cap comes before the delegation in the spec's order"
        );
        let decision = last_entry(w, "decision", &request).await?;
        assert_eq!(
            decision["evaluation"]["limit"],
            json!({"limit": 500000, "used": 425000, "requested": 180000})
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_approval_records_the_decision_it_took_and_the_budget_it_reserved() -> TestResult {
    on_world(async |w| {
        let request = step_up(w).await?;
        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert!(a.is_ok(), "{a:?}");
        let approval = last_entry(w, "approval", &request).await?;
        assert_eq!(approval["approver"], "finance-lead");
        assert_eq!(approval["request"], request.as_str());
        let decision = last_entry(w, "decision", &request).await?;
        assert_eq!(decision["on"], "approval");
        assert_eq!(decision["decision"], json!(Decision::Allow));
        // The engine's own verdict (a human is needed) is kept beside the outcome.
        assert_eq!(decision["evaluation"]["decision"], "step_up");
        assert_eq!(decision["evaluation"]["purchase"]["amount_paise"], 180000);
        assert_eq!(decision["state"], "AUTHORIZED");
        assert_eq!(decision["reserved_paise"], 180000);
        assert_eq!(decision["delegation"], "d-buyer");
        assert_eq!(decision["policy_version"], 1);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("AUTHORIZED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 180000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_leaf_that_spent_its_last_paisa_still_checks_out_and_pays() -> TestResult {
    on_world(async |w| {
        allowed(w, "buyer-agent", "SNACK-BOX", 4).await?;
        let last = allowed(w, "buyer-agent", "SNACK-BOX", 4).await?;
        let spent = w.gate.invariants("acme").await?.delegation_spent_paise;
        assert_eq!(
            spent.get("d-buyer"),
            Some(&200000),
            "d-buyer has exactly 0 left"
        );
        checkout_and_pay(w, &last).await?;
        let more = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(
            more.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted),
            "but not one paisa more"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_child_granted_its_untouched_parents_whole_budget_spends_through_a_parent_with_nothing_left()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let g = w
        .gate
        .grant_as_written(
            "acme",
            &grant("d-all", "d-buyer", "procurement-agent", 200000),
        )
        .await?;
    assert!(
        g.is_ok(),
        "exactly the parent's budget is no widening: {g:?}"
    );
    // d-buyer has allocated everything: a middle hop with exactly 0 left.
    let request = allowed(&w, "procurement-agent", "SNACK-BOX", 4).await?;
    checkout_and_pay(&w, &request).await?;
    w.drop().await
}

#[tokio::test]
async fn a_zero_approval_threshold_is_published_and_sends_every_purchase_to_a_human() -> TestResult
{
    on_world(async |w| {
        let o = w
            .gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    approval_threshold_paise: Some(0),
                    ..Default::default()
                },
            )
            .await?;
        assert!(o.is_ok(), "a human approves every purchase: {o:?}");
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::StepUp(Reason::ApprovalRequired));
        let a = w
            .gate
            .approve("acme", &request_id(&p), "finance-lead")
            .await?;
        assert!(a.is_ok(), "{a:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_body_of_exactly_4096_bytes_is_proposed_and_one_byte_more_is_too_large() -> TestResult {
    on_world(async |w| {
        let mut exact = body("SNACK-BOX", 1);
        exact.resize(MAX_BODY_BYTES, b' ');
        assert_eq!(exact.len(), 4096);
        let p = w.gate.propose("acme", "buyer-agent", &exact, None).await?;
        assert_eq!(p.decision, Decision::Allow);
        exact.push(b' ');
        let p = w.gate.propose("acme", "buyer-agent", &exact, None).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::ProposalTooLarge));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_release_that_finds_only_one_of_its_two_rows_is_corrupt_and_gives_nothing_back()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let request = allowed(&w, "buyer-agent", "SNACK-BOX", 1).await?;
    // The day's row goes; the hop's row stays.
    let gone = sqlx::query("DELETE FROM daily_spend WHERE tenant_id = 'acme'")
        .execute(w.owner())
        .await?;
    assert_eq!(gone.rows_affected(), 1);
    match w.gate.expire("acme", &request).await {
        Err(ServiceError::Corrupt { what }) => assert!(what.contains(&request), "{what}"),
        other => panic!("expected a Corrupt error, got {other:?}"),
    }
    let spent = w.gate.invariants("acme").await?.delegation_spent_paise;
    assert_eq!(
        spent.get("d-buyer"),
        Some(&25000),
        "the hop's half was not given back"
    );
    assert_eq!(
        w.gate.request_state("acme", &request).await?.as_deref(),
        Some("AUTHORIZED"),
        "the request did not end"
    );
    match w.gate.cancel("acme", &request, "buyer-agent").await {
        Err(ServiceError::Corrupt { .. }) => {}
        other => panic!("cancelling must fail the same way, got {other:?}"),
    }
    w.drop().await
}

#[tokio::test]
async fn an_agent_whose_oldest_delegation_is_spent_buys_through_its_next_one() -> TestResult {
    on_world(async |w| {
        // d-buyer (200000) is spent to its last paisa.
        allowed(w, "buyer-agent", "SNACK-BOX", 4).await?;
        allowed(w, "buyer-agent", "SNACK-BOX", 4).await?;
        let g = w
            .gate
            .grant_as_written(
                "acme",
                &grant("d-extra", "finance-lead", "buyer-agent", 100000),
            )
            .await?;
        assert!(g.is_ok(), "{g:?}");
        // d-buyer refuses (DELEGATION_BUDGET_EXHAUSTED); the gate must go on to
        // d-extra rather than answer with the oldest delegation's refusal.
        let request = allowed(w, "buyer-agent", "SNACK-BOX", 1).await?;
        let decision = last_entry(w, "decision", &request).await?;
        assert_eq!(decision["delegation"], "d-extra");
        let spent = w.gate.invariants("acme").await?.delegation_spent_paise;
        assert_eq!(spent.get("d-buyer"), Some(&200000));
        assert_eq!(spent.get("d-extra"), Some(&25000));
        Ok(())
    })
    .await
}

/// An id already granted is refused by the gate's own check, before the
/// database's primary key would refuse it: the outcome names no constraint,
/// and the hop the id names is untouched.
#[tokio::test]
async fn a_reused_delegation_id_is_refused_before_the_database_sees_it() -> TestResult {
    on_world(async |w| {
        let again = w
            .gate
            .grant_as_written(
                "acme",
                &grant("d-buyer", "finance-lead", "buyer-agent", 1000),
            )
            .await?;
        assert_eq!(again.decision, Decision::Deny(Reason::DelegationInvalid));
        assert_eq!(
            again.constraint, None,
            "the gate refuses a reused id itself; the primary key is only the backstop"
        );
        let budget: i64 = sqlx::query_scalar(
            "SELECT budget_paise FROM delegations WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(budget, 200000);
        Ok(())
    })
    .await
}

/// An agent that holds no delegation is still held to the rate limits. Its
/// denied proposals are recorded, and its recent ones are read on their own
/// when it has no hop to read them with (`world::recent`). So once it has
/// five denials in the hour, the next proposal is refused
/// DENIAL_RATE_LIMIT, not DELEGATION_MISSING again.
#[tokio::test]
async fn an_agent_without_a_delegation_is_still_held_to_the_denial_rate() -> TestResult {
    on_world(async |w| {
        for i in 0..5 {
            let p = w.propose_as("renewals-agent", "SNACK-BOX", 1).await?;
            assert_eq!(
                p.decision,
                Decision::Deny(Reason::DelegationMissing),
                "proposal {i}"
            );
        }
        let p = w.propose_as("renewals-agent", "SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DenialRateLimit));
        Ok(())
    })
    .await
}

/// A ninth hop is refused by the engine, from the chain above its parent,
/// before the database sees the grant: the refusal names no constraint. (The
/// database's `ck_delegation_depth` would refuse it too, for the same
/// reason, so only the constraint tells who refused.)
#[tokio::test]
async fn a_ninth_hop_is_refused_by_the_engine_before_the_database_sees_it() -> TestResult {
    on_world(async |w| {
        let mut parent = "d-buyer".to_owned();
        for hop in 2..=8 {
            let id = format!("d-deep{hop}");
            let o = w
                .gate
                .grant_as_written("acme", &grant(&id, &parent, "procurement-agent", 1000))
                .await?;
            assert!(o.is_ok(), "hop {hop}: {o:?}");
            parent = id;
        }
        let ninth = w
            .gate
            .grant_as_written(
                "acme",
                &grant("d-deep9", &parent, "procurement-agent", 1000),
            )
            .await?;
        assert_eq!(
            ninth.decision,
            Decision::Deny(Reason::DelegationDepthExceeded)
        );
        assert_eq!(ninth.constraint, None, "refused by the database: {ninth:?}");
        Ok(())
    })
    .await
}
