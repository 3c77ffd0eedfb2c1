//! Races, raced for real: 64 tokio tasks at once (released together by a
//! barrier), each operation on its own pooled connection (pool of 20),
//! against one daily budget, one delegation budget, one approval, one
//! checkout authority, one provider event and one parent's partition. No
//! budget is exceeded by a single paisa, exactly one consumption wins, and
//! exactly one provider order exists. Two races bypass the gate and race raw
//! SQL against the database's own constraints.

use std::future::Future;
use std::sync::Arc;

use crate::support::*;
use gate::policy::{DenialRate, Velocity};
use gate::service::Grant;
use gate::service::webhook::EVENT_CAPTURED;
use gate::{Decision, PolicyPatch, Reason};
use tokio::sync::Barrier;

const RACERS: usize = 64;
const POOL: u32 = 20;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Runs `f(i)` for i in 0..64 at once and returns every result.
async fn race<T, F, Fut>(f: F) -> Result<Vec<T>, Error>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut tasks = Vec::with_capacity(RACERS);
    for i in 0..RACERS {
        let barrier = barrier.clone();
        let run = f(i);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            run.await
        }));
    }
    let mut out = Vec::with_capacity(RACERS);
    for t in tasks {
        out.push(t.await??);
    }
    Ok(out)
}

fn count<T: PartialEq>(items: &[T], x: &T) -> usize {
    items.iter().filter(|i| *i == x).count()
}

/// The decisions of 64 proposals at once by `agent` of `acme`, each of
/// `quantity` of `sku`, without an idempotency key.
async fn race_proposals(
    w: &World,
    agent: &'static str,
    sku: &'static str,
    quantity: u32,
) -> Result<Vec<Decision>, Error> {
    let gate = w.gate.clone();
    race(move |_| {
        let gate = gate.clone();
        async move {
            Ok(gate
                .propose("acme", agent, &body(sku, quantity), None)
                .await?
                .decision)
        }
    })
    .await
}

/// Velocity and the denial rate out of the way, so that budgets bind.
async fn no_rate_limits(w: &World) -> TestResult {
    let patch = PolicyPatch {
        velocity: Some(Velocity {
            max_proposals: 1000,
            window_minutes: 60,
        }),
        denial_rate: Some(DenialRate {
            max_denials: 1000,
            window_minutes: 60,
        }),
        ..Default::default()
    };
    assert!(w.gate.set_policy("acme", &patch).await?.is_ok());
    Ok(())
}

async fn authorized_sum(w: &World) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE(sum(amount_paise), 0)::bigint FROM payment_requests \
         WHERE tenant_id = 'acme' AND state = 'AUTHORIZED'",
    )
    .fetch_one(w.pool())
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_proposals_never_overspend_the_daily_budget() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        no_rate_limits(w).await?;
        let big = Grant {
            id: "d-big".into(),
            from: "finance-lead".into(),
            to: "procurement-agent".into(),
            budget_paise: 10_000_000,
            skus: None,
            expires_at: None,
        };
        assert!(w.gate.grant_as_written("acme", &big).await?.is_ok());
        let decisions = race_proposals(w, "procurement-agent", "CLOUD-STARTER", 1).await?;
        // 8 × 60000 = 480000 ≤ 500000 < 9 × 60000.
        assert_eq!(count(&decisions, &Decision::Allow), 8, "{decisions:?}");
        assert_eq!(
            count(&decisions, &Decision::Deny(Reason::DailyBudgetExhausted)),
            56
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 480000);
        assert_eq!(authorized_sum(w).await?, 480000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-big").await?,
            Some(480000)
        );
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_proposals_never_overspend_a_delegation() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        no_rate_limits(w).await?;
        let decisions = race_proposals(w, "buyer-agent", "SNACK-BOX", 3).await?;
        // d-buyer: 2 × 75000 = 150000 ≤ 200000 < 3 × 75000.
        assert_eq!(count(&decisions, &Decision::Allow), 2, "{decisions:?}");
        assert_eq!(
            count(
                &decisions,
                &Decision::Deny(Reason::DelegationBudgetExhausted)
            ),
            62
        );
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(150000)
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 150000);
        Ok(())
    })
    .await
}

/// Velocity counts recorded proposals, read under the tenant's day lock in a
/// statement that starts after the lock is granted: a proposal that waited
/// sees every one committed before it, so no twin slips past the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_proposals_never_pass_the_velocity_limit() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        let patch = PolicyPatch {
            velocity: Some(Velocity {
                max_proposals: 20,
                window_minutes: 60,
            }),
            denial_rate: Some(DenialRate {
                max_denials: 1000,
                window_minutes: 60,
            }),
            ..Default::default()
        };
        assert!(w.gate.set_policy("acme", &patch).await?.is_ok());
        let decisions = race_proposals(w, "buyer-agent", "SNACK-BOX", 1).await?;
        // The first 20 are judged on their merits (d-buyer affords 8 of
        // 25000); every later one meets 20 recorded proposals.
        assert_eq!(
            count(&decisions, &Decision::Deny(Reason::VelocityLimit)),
            44,
            "{decisions:?}"
        );
        assert_eq!(count(&decisions, &Decision::Allow), 8, "{decisions:?}");
        assert_eq!(w.gate.spent_today_paise("acme").await?, 200000);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_replays_of_one_idempotency_key_record_one_request() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        no_rate_limits(w).await?;
        let gate = w.gate.clone();
        let outcomes = race(move |_| {
            let gate = gate.clone();
            async move {
                Ok(gate
                    .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), Some("once"))
                    .await?)
            }
        })
        .await?;
        assert!(outcomes.iter().all(|o| o.decision == Decision::Allow));
        assert_eq!(outcomes.iter().filter(|o| !o.replayed).count(), 1);
        let ids: std::collections::BTreeSet<_> =
            outcomes.iter().map(|o| o.request_id.clone()).collect();
        assert_eq!(ids.len(), 1);
        assert_eq!(w.gate.spent_today_paise("acme").await?, 25000);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_approvals_of_one_request_authorize_it_once() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        let p = w.propose("CLOUD-TEAM", 1).await?;
        let request = request_id(&p);
        let gate = w.gate.clone();
        let decisions = race(move |_| {
            let (gate, request) = (gate.clone(), request.clone());
            async move {
                Ok(gate
                    .approve("acme", &request, "finance-lead")
                    .await?
                    .decision)
            }
        })
        .await?;
        assert_eq!(count(&decisions, &Decision::Allow), 1, "{decisions:?}");
        assert_eq!(
            count(&decisions, &Decision::Deny(Reason::ApprovalAlreadyUsed)),
            63
        );
        let approvals: i64 = sqlx::query_scalar("SELECT count(*) FROM approvals")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(approvals, 1);
        assert_eq!(w.gate.spent_today_paise("acme").await?, 180000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(180000)
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_checkouts_of_one_request_issue_one_authority() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        let request = request_id(&w.propose("CLOUD-STARTER", 1).await?);
        let gate = w.gate.clone();
        let outcomes = race(move |_| {
            let (gate, request) = (gate.clone(), request.clone());
            async move { Ok(gate.checkout("acme", &request, "finance-lead").await?) }
        })
        .await?;
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| o.reason() == Some(Reason::RequestNotAuthorized))
                .count(),
            63
        );
        let authorities: i64 = sqlx::query_scalar("SELECT count(*) FROM checkout_authorities")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(authorities, 1);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_payments_with_one_authority_make_one_provider_order() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        let request = request_id(&w.propose("CLOUD-STARTER", 1).await?);
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        let gate = w.gate.clone();
        let outcomes = race(move |_| {
            let (gate, authority) = (gate.clone(), authority.clone());
            async move { Ok(gate.pay("acme", &authority, "finance-lead").await?) }
        })
        .await?;
        assert_eq!(
            outcomes.iter().filter(|o| o.is_ok()).count(),
            1,
            "{outcomes:?}"
        );
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| o.reason() == Some(Reason::AuthorityAlreadyUsed))
                .count(),
            63
        );
        assert_eq!(
            w.gate.provider().orders().len(),
            1,
            "the provider was asked once"
        );
        assert_eq!(w.gate.provider_order_count("acme").await?, 1);
        let consumed: i16 = sqlx::query_scalar("SELECT consumptions FROM checkout_authorities")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(consumed, 1);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_deliveries_of_one_capture_capture_once() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        let (request, _, order) = paid_order(w).await?;
        let gate = w.gate.clone();
        let (raw, sig) = event(w, "evt_race", EVENT_CAPTURED, &order, 60000);
        let outcomes = race(move |_| {
            let (gate, raw, sig) = (gate.clone(), raw.clone(), sig.clone());
            async move { Ok(gate.webhook(&raw, Some(&sig), Some("evt_race")).await?) }
        })
        .await?;
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| o.reason() == Some(Reason::WebhookDuplicate))
                .count(),
            63
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_sibling_grants_never_oversubscribe_their_parent() -> TestResult {
    on_world_with_pool(POOL, async |w| {
    let gate = w.gate.clone();
    let outcomes = race(move |i| {
        let gate = gate.clone();
        async move {
            let g = Grant {
                id: format!("d-sib-{i:02}"),
                from: "d-buyer".into(),
                to: "procurement-agent".into(),
                budget_paise: 30000,
                skus: None,
                expires_at: None,
            };
            Ok(gate.grant_as_written("acme", &g).await?)
        }
    })
    .await?;
    // 6 × 30000 = 180000 ≤ 200000 < 7 × 30000.
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        6,
        "{outcomes:?}"
    );
    for refused in outcomes.iter().filter(|o| !o.is_ok()) {
        assert_eq!(refused.reason(), Some(Reason::DelegationBudgetExhausted));
        assert_eq!(
            refused.constraint.as_deref(),
            Some("ck_delegation_budget_partitioned")
        );
    }
    let allocated: i64 =
        sqlx::query_scalar("SELECT allocated_paise FROM delegations WHERE id = 'd-buyer'")
            .fetch_one(w.pool())
            .await?;
    let children: i64 = sqlx::query_scalar("SELECT COALESCE(sum(budget_paise), 0)::bigint FROM delegations WHERE parent_id = 'd-buyer'")
        .fetch_one(w.pool())
        .await?;
    assert_eq!((allocated, children), (180000, 180000));
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ck_daily_spend_within_cap_holds_against_racing_raw_writers() -> TestResult {
    on_world_with_pool(POOL, async |w| {
        without_counter_triggers(w).await?;
    sqlx::query("INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) VALUES ('acme', '2026-09-03', 'INR', 0, 500000)")
        .execute(w.pool())
        .await?;
    let pool = w.pool().clone();
    let results = race(move |_| {
        let pool = pool.clone();
        async move {
            // No condition at all: only the CHECK stands in the way.
            let r = sqlx::query("UPDATE daily_spend SET reserved_paise = reserved_paise + 60000 WHERE tenant_id = 'acme'")
                .execute(&pool)
                .await;
            Ok(match r {
                Ok(_) => None,
                Err(e) => Some(e.as_database_error().and_then(|d| d.constraint()).unwrap_or("?").to_owned()),
            })
        }
    })
    .await?;
    assert_eq!(count(&results, &None), 8);
    assert_eq!(
        count(&results, &Some("ck_daily_spend_within_cap".to_owned())),
        56
    );
    let reserved: i64 = sqlx::query_scalar("SELECT reserved_paise FROM daily_spend")
        .fetch_one(w.pool())
        .await?;
    assert_eq!(reserved, 480000);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delegation_attenuates_holds_against_racing_raw_inserts() -> TestResult {
    on_world_with_pool(POOL, async |w| {
    let pool = w.pool().clone();
    let results = race(move |i| {
        let pool = pool.clone();
        async move {
            let r = sqlx::query(
                "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
                 VALUES ('acme', $1, 'd-buyer', 'procurement-agent', 30000, now())",
            )
            .bind(format!("d-raw-{i:02}"))
            .execute(&pool)
            .await;
            Ok(r.is_ok())
        }
    })
    .await?;
    assert_eq!(count(&results, &true), 6);
    let allocated: i64 =
        sqlx::query_scalar("SELECT allocated_paise FROM delegations WHERE id = 'd-buyer'")
            .fetch_one(w.pool())
            .await?;
    assert_eq!(allocated, 180000);
        Ok(())
    })
    .await
}
