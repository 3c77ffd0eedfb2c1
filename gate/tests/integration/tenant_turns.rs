//! One busy tenant never holds the whole pool: its proposals past its
//! turns (`Gate::with_turns_per_tenant`, 2 by default) wait in the process
//! without a connection, so another tenant's proposal is decided while they
//! wait. Raced for real: acme's day is held locked from outside the gate,
//! six of acme's proposals (each one needing approval: decided, and not
//! counted as refusals) wait for it on a gate pool of three connections,
//! and globex's proposal must still be decided.

use std::time::Duration;

use crate::support::*;
use gate::{Decision, Reason};

/// acme's proposals in flight and waiting on its day in the database, with
/// acme's day held from outside, on a gate of `turns` turns per tenant
/// (`None`: the default) over a pool of three connections; globex's
/// proposal must be decided meanwhile, and acme's once the day is free.
async fn one_tenant_waits_within_its_turns(turns: Option<usize>, in_database: i64) -> TestResult {
    let Some(w) = world_configured(3, |gate| match turns {
        Some(n) => gate.with_turns_per_tenant(n),
        None => gate,
    })
    .await?
    else {
        return Ok(());
    };
    let gate = w.gate.clone();
    // acme's day is opened by one proposal, then held from outside the
    // gate (the owner's pool, which row-level security does not bind, not
    // the gate's three connections).
    let step_up = body("CLOUD-TEAM", 1);
    gate.propose("acme", "buyer-agent", &step_up, None).await?;
    let watcher = w.owner();
    let mut holder = watcher.begin().await?;
    sqlx::query("SELECT 1 FROM daily_spend WHERE tenant_id = 'acme' FOR UPDATE")
        .execute(&mut *holder)
        .await?;
    let waiting: Vec<_> = (0..6)
        .map(|_| {
            let (gate, step_up) = (gate.clone(), step_up.clone());
            tokio::spawn(async move { gate.propose("acme", "buyer-agent", &step_up, None).await })
        })
        .collect();
    // Until acme's turns wait on its day in the database.
    let mut seen = 0;
    for _ in 0..600 {
        seen = lock_waiters(watcher).await?;
        if seen >= in_database {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen, in_database,
        "acme's proposals waiting on its day in the database"
    );

    // A free connection serves globex while acme waits. A timeout is the
    // failure: without turns, acme's proposals hold all three.
    let globex = tokio::time::timeout(
        Duration::from_secs(30),
        gate.propose("globex", "globex-agent", &body("SNACK-BOX", 1), None),
    )
    .await;
    let globex = globex.map_err(|_| "globex waited behind acme's proposals")??;
    assert!(globex.request_id.is_some(), "{globex:?}");
    assert_eq!(
        lock_waiters(watcher).await?,
        in_database,
        "only acme's turns reached the database"
    );

    holder.rollback().await?;
    for proposal in waiting {
        let outcome = proposal.await??;
        assert_eq!(outcome.decision, Decision::StepUp(Reason::ApprovalRequired));
    }
    drop(gate);
    w.drop().await
}

#[tokio::test]
async fn a_tenant_waiting_for_its_day_holds_no_more_connections_than_its_turns() -> TestResult {
    one_tenant_waits_within_its_turns(None, 2).await
}

#[tokio::test]
async fn a_gate_of_one_turn_per_tenant_lets_one_proposal_per_tenant_wait_in_the_database()
-> TestResult {
    one_tenant_waits_within_its_turns(Some(1), 1).await
}
