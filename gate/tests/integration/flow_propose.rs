//! `propose` against Postgres: precedence of the first checks, idempotency,
//! velocity and the denial rate as recorded rows, reservations, redaction
//! and the ledger.

use crate::support::*;
use gate::{Decision, Reason};

#[tokio::test]
async fn an_allowed_proposal_reserves_the_daily_and_delegation_budgets() -> TestResult {
    on_world(async |w| {
        let p = w.propose("SNACK-BOX", 4).await?;
        assert_eq!(p.decision, Decision::Allow);
        assert_eq!(
            w.gate
                .request_state("acme", &request_id(&p))
                .await?
                .as_deref(),
            Some("AUTHORIZED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 100000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(100000)
        );
        assert_eq!(
            w.gate.spent_today_paise("globex").await?,
            0,
            "tenants do not share a day"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn identity_and_tenancy_refuse_in_order_and_the_tool_boundary_wins() -> TestResult {
    on_world(async |w| {
        let ok = body("SNACK-BOX", 1);
        let cases: &[(&str, &str, &[u8], Reason)] = &[
            ("nope", "buyer-agent", &ok, Reason::TenantUnknown),
            ("acme", "ghost-agent", &ok, Reason::ActorUnknown),
            ("acme", "globex-agent", &ok, Reason::TenantMismatch),
            ("acme", "globex-finance", &ok, Reason::TenantMismatch),
            ("acme", "finance-lead", &ok, Reason::ActorNotPermitted),
            ("acme", "intern", &ok, Reason::ActorNotPermitted),
            (
                "acme",
                "ghost-agent",
                br#"{"sku":"SNACK-BOX","quantity":1,"purpose":"x","amount_paise":1}"#,
                Reason::ProposalUnknownField,
            ),
        ];
        for (tenant, actor, raw, reason) in cases {
            let p = w.gate.propose(tenant, actor, raw, None).await?;
            assert_eq!(p.decision, Decision::Deny(*reason), "{tenant}/{actor}");
            assert_eq!(
                p.request_id, None,
                "no request is recorded for an unknown caller"
            );
        }
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_requests")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(rows, 0);
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_tool_boundary_refuses_a_known_agent_and_records_it() -> TestResult {
    on_world(async |w| {
        let p = w
            .gate
            .propose(
                "acme",
                "buyer-agent",
                br#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"x","merchant":"attacker-llc"}"#,
                None,
            )
            .await?;
        assert_eq!(p.decision, Decision::Deny(Reason::ProposalUnknownField));
        assert_eq!(
            w.gate
                .request_state("acme", &request_id(&p))
                .await?
                .as_deref(),
            Some("DENIED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_idempotent_replay_returns_the_first_decision_and_writes_nothing() -> TestResult {
    on_world(async |w| {
        let raw = body("CLOUD-STARTER", 1);
        let first = w
            .gate
            .propose("acme", "buyer-agent", &raw, Some("key-1"))
            .await?;
        assert_eq!(first.decision, Decision::Allow);
        let count = || async {
            let requests: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_requests")
                .fetch_one(w.pool())
                .await?;
            let ledger: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
                .fetch_one(w.ledger().await?)
                .await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((requests, ledger))
        };
        let before = count().await?;
        // Spend most of the delegation so a fresh decision would differ.
        let more = w.propose("SNACK-BOX", 4).await?;
        assert_eq!(more.decision, Decision::Allow);
        let before_replay = count().await?;
        assert_ne!(before, before_replay);
        let again = w
            .gate
            .propose("acme", "buyer-agent", &raw, Some("key-1"))
            .await?;
        assert_eq!(
            (again.decision, again.request_id.clone(), again.replayed),
            (Decision::Allow, first.request_id.clone(), true)
        );
        assert_eq!(count().await?, before_replay, "a replay writes nothing new");
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000 + 100000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_same_key_with_another_body_is_refused_and_recorded() -> TestResult {
    on_world(async |w| {
        w.gate
            .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), Some("key-1"))
            .await?;
        let other = w
            .gate
            .propose("acme", "buyer-agent", &body("SNACK-BOX", 2), Some("key-1"))
            .await?;
        assert_eq!(other.decision, Decision::Deny(Reason::IdempotencyKeyReused));
        assert_eq!(w.gate.spent_today_paise("acme").await?, 25000);
        // One byte of whitespace is another body.
        let mut spaced = body("SNACK-BOX", 1);
        spaced.push(b' ');
        let spaced = w
            .gate
            .propose("acme", "buyer-agent", &spaced, Some("key-1"))
            .await?;
        assert_eq!(
            spaced.decision,
            Decision::Deny(Reason::IdempotencyKeyReused)
        );
        // Keys belong to one agent: another agent may use the same key.
        let other_agent = w
            .gate
            .propose(
                "globex",
                "globex-agent",
                &body("SNACK-BOX", 1),
                Some("key-1"),
            )
            .await?;
        assert_eq!(other_agent.decision, Decision::Allow);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_twenty_first_proposal_in_an_hour_is_refused_velocity() -> TestResult {
    on_world(async |w| {
        let patch = gate::PolicyPatch {
            denial_rate: Some(gate::policy::DenialRate {
                max_denials: 100,
                window_minutes: 60,
            }),
            ..Default::default()
        };
        w.gate.set_policy("acme", &patch).await?;
        // 20 proposals, each recorded whatever its decision (d-buyer runs out after 8).
        for i in 0..20 {
            let p = w.propose("SNACK-BOX", 1).await?;
            let expected = if i < 8 {
                Decision::Allow
            } else {
                Decision::Deny(Reason::DelegationBudgetExhausted)
            };
            assert_eq!(p.decision, expected, "proposal {i}");
        }
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::VelocityLimit));
        w.clock.advance_minutes(60);
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(
            p.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted),
            "the window moved on"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn five_refusals_refuse_the_sixth_proposal_until_the_window_passes() -> TestResult {
    on_world(async |w| {
        for _ in 0..5 {
            let p = w.propose("USB-HUB", 1).await?;
            assert_eq!(p.decision, Decision::Deny(Reason::MerchantNotAllowed));
        }
        let sixth = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(sixth.decision, Decision::Deny(Reason::DenialRateLimit));
        w.clock.advance_minutes(60);
        let later = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(later.decision, Decision::Allow);
        Ok(())
    })
    .await
}

/// acme's policy, allowing an agent three proposals an hour.
async fn three_proposals_an_hour(w: &World) -> TestResult {
    let published = w
        .gate
        .set_policy(
            "acme",
            &gate::PolicyPatch {
                velocity: Some(gate::policy::Velocity {
                    max_proposals: 3,
                    window_minutes: 60,
                }),
                ..Default::default()
            },
        )
        .await?;
    assert!(published.is_ok(), "{published:?}");
    Ok(())
}

#[tokio::test]
async fn velocity_counts_recorded_proposals_of_this_agent_only() -> TestResult {
    on_world(async |w| {
        three_proposals_an_hour(w).await?;
        for _ in 0..3 {
            assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        }
        let fourth = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(fourth.decision, Decision::Deny(Reason::VelocityLimit));
        let other = w.propose_as("procurement-agent", "SNACK-BOX", 1).await?;
        assert_eq!(
            other.decision,
            Decision::Deny(Reason::DelegationMissing),
            "another agent has its own count"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_daily_cap_is_inclusive_across_agents() -> TestResult {
    on_world(async |w| {
        w.gate
            .grant_as_written(
                "acme",
                &gate::service::Grant {
                    id: "d-proc".into(),
                    from: "finance-lead".into(),
                    to: "procurement-agent".into(),
                    budget_paise: 1_000_000,
                    skus: None,
                    expires_at: None,
                },
            )
            .await?;
        // d-buyer: 200000 in 8 snack boxes; procurement: 300000 more = 500000 exactly.
        for _ in 0..8 {
            assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        }
        for qty in [4, 4, 4] {
            let p = w.propose_as("procurement-agent", "SNACK-BOX", qty).await?;
            assert_eq!(p.decision, Decision::Allow);
        }
        assert_eq!(w.gate.spent_today_paise("acme").await?, 500000);
        let over = w.propose_as("procurement-agent", "SNACK-BOX", 1).await?;
        assert_eq!(over.decision, Decision::Deny(Reason::DailyBudgetExhausted));
        // The next UTC day is a new budget.
        w.clock.advance_minutes(14 * 60);
        let tomorrow = w.propose_as("procurement-agent", "SNACK-BOX", 1).await?;
        assert_eq!(tomorrow.decision, Decision::Allow);
        assert_eq!(w.gate.spent_today_paise("acme").await?, 25000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_agent_view_never_quotes_a_number_and_the_ledger_has_the_cap() -> TestResult {
    on_world(async |w| {
        let p = w.propose("GPU-HOUR", 1).await?;
        assert_eq!(
            p.decision,
            Decision::Deny(Reason::AmountExceedsTransactionCap)
        );
        let told = serde_json::to_string(&p.view)?;
        assert!(!told.chars().any(|c| c.is_ascii_digit()), "{told}");
        let entry: String = sqlx::query_scalar(
            "SELECT entry FROM ledger_entries WHERE kind = 'decision' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        assert!(entry.contains("\"limit\":300000"), "{entry}");
        assert!(entry.contains("\"requested\":450000"), "{entry}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_injected_catalog_text_changes_nothing() -> TestResult {
    on_world(async |w| {
        let p = w.propose("RUNNER-PRO", 50).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::QuantityExceedsMax));
        let p = w.propose("RUNNER-PRO", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        let (merchant, amount): (String, i64) =
            sqlx::query_as("SELECT merchant_id, amount_paise FROM payment_requests WHERE id = $1")
                .bind(request_id(&p))
                .fetch_one(w.pool())
                .await?;
        assert_eq!((merchant.as_str(), amount), ("cloudco", 50000));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_policy_that_does_not_parse_refuses() -> TestResult {
    on_world(async |w| {
    sqlx::query("INSERT INTO policy_versions (tenant_id, version, policy, published_at) VALUES ('acme', 2, '{\"spending_limit\": 1}', now())")
        .execute(w.pool())
        .await?;
    let p = w.propose("SNACK-BOX", 1)
        .await?;
    assert_eq!(p.decision, Decision::Deny(Reason::PolicyInvalid));
        Ok(())
    })
    .await
}

#[test]
fn the_standard_world_file_has_the_values_these_tests_rely_on() {
    // The tests seed `scenarios/worlds/standard.yaml` itself; this pins the
    // values of it that the spec fixes and the assertions here assume.
    let world = gate::service::standard::world();
    assert_eq!(world.now.to_rfc3339(), "2026-09-03T10:00:00+00:00");
    let ids: Vec<&str> = world.tenants.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["acme", "globex"]);
    let acme = &world.tenants[0];
    let price = |sku: &str| acme.item(sku).map(|i| i.price_paise);
    assert_eq!(price("CLOUD-STARTER"), Some(60000));
    assert_eq!(price("SNACK-BOX"), Some(25000));
    assert_eq!(price("GPU-HOUR"), Some(450000));
    assert_eq!(acme.catalog.len(), 8);
    assert_eq!(acme.policy.daily_cap_paise, 500000);
    assert_eq!(acme.policy.per_transaction_cap_paise, 300000);
    assert_eq!(acme.policy.approval_threshold_paise, 100000);
    assert_eq!(acme.policy.velocity.max_proposals, 20);
    assert_eq!(acme.policy.denial_rate.max_denials, 5);
    let d_buyer = &acme.delegations[0];
    assert_eq!(
        (
            d_buyer.id.as_str(),
            d_buyer.from.as_str(),
            d_buyer.to.as_str()
        ),
        ("d-buyer", "finance-lead", "buyer-agent")
    );
    assert_eq!(d_buyer.budget_paise, 200000);
}

/// A rate refusal says when its window next lets a proposal through: the
/// refused proposal counts too, so with three allowed an hour and four in
/// the window, the second-oldest must leave it; at that instant a
/// proposal is decided again. Any other outcome says nothing.
#[tokio::test]
async fn a_velocity_refusal_says_when_the_window_reopens() -> TestResult {
    on_world(async |w| {
        three_proposals_an_hour(w).await?;
        let t0 = w.gate.now();
        for _ in 0..3 {
            let p = w.propose("SNACK-BOX", 1).await?;
            assert_eq!((p.decision, p.retry_at), (Decision::Allow, None));
            w.clock.advance_minutes(1);
        }
        let fourth = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(fourth.decision, Decision::Deny(Reason::VelocityLimit));
        let reopens = t0 + chrono::Duration::minutes(61);
        assert_eq!(fourth.retry_at, Some(reopens));
        w.clock.set(reopens);
        let again = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(again.decision, Decision::Allow, "decided again at retry_at");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_denial_rate_refusal_says_when_the_window_reopens() -> TestResult {
    on_world(async |w| {
        let t0 = w.gate.now();
        for _ in 0..5 {
            let p = w.propose("USB-HUB", 1).await?;
            assert_eq!(p.decision, Decision::Deny(Reason::MerchantNotAllowed));
            assert_eq!(p.retry_at, None, "not a rate refusal");
            w.clock.advance_minutes(1);
        }
        let sixth = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(sixth.decision, Decision::Deny(Reason::DenialRateLimit));
        let reopens = t0 + chrono::Duration::minutes(61);
        assert_eq!(sixth.retry_at, Some(reopens));
        w.clock.set(reopens);
        assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        Ok(())
    })
    .await
}
