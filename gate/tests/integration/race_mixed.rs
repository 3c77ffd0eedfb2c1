//! One lock order, raced for real: 64 tasks released together by a barrier
//! mix every writing operation (set_policy, propose, approve, checkout, pay,
//! grant, revoke, cancel) in ONE tenant. The locks they take follow the one
//! order written in `gate::service::lock`, so no round may end in a deadlock
//! or any other engine error, and the books must balance afterwards: every
//! day's reservations and every hop's spend equal what the requests hold,
//! and every allocation equals its children's claims.
//!
//! `SPENDGATE_RACE_ROUNDS` (default 3) sets how many fresh worlds are raced.

use std::sync::Arc;

use crate::support::*;
use gate::policy::{DenialRate, Velocity};
use gate::service::Grant;
use gate::{Decision, PolicyPatch};
use tokio::sync::Barrier;

const RACERS: usize = 64;
const POOL: u32 = 24;

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn propose(w: &World, agent: &str, sku: &str, qty: u32) -> Result<Option<String>, Error> {
    let p = w.gate.propose("acme", agent, &body(sku, qty), None).await?;
    Ok(p.request_id
        .filter(|_| p.decision != Decision::Deny(gate::Reason::ActorUnknown)))
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

/// The state every round starts from: requests waiting for each operation.
struct Prepared {
    pending: Vec<String>,
    authorized: Vec<String>,
    authorities: Vec<String>,
}

async fn prepare(w: &World) -> Result<Prepared, Error> {
    let limits = PolicyPatch {
        daily_cap_paise: Some(100_000_000),
        per_transaction_cap_paise: Some(10_000_000),
        velocity: Some(Velocity {
            max_proposals: 10_000,
            window_minutes: 60,
        }),
        denial_rate: Some(DenialRate {
            max_denials: 10_000,
            window_minutes: 60,
        }),
        ..Default::default()
    };
    assert!(w.gate.set_policy("acme", &limits).await?.is_ok());
    for (id, to, budget) in [
        ("d-proc", "procurement-agent", 40_000_000),
        ("d-renew", "renewals-agent", 40_000_000),
    ] {
        assert!(
            w.gate
                .grant_as_written("acme", &grant(id, "finance-lead", to, budget))
                .await?
                .is_ok()
        );
    }
    let mut pending = Vec::new();
    let mut authorized = Vec::new();
    let mut authorities = Vec::new();
    for _ in 0..8 {
        // Above the approval threshold: waits for a human.
        if let Some(r) = propose(w, "procurement-agent", "CLOUD-TEAM", 1).await? {
            pending.push(r);
        }
        if let Some(r) = propose(w, "renewals-agent", "SNACK-BOX", 1).await? {
            authorized.push(r);
        }
        if let Some(r) = propose(w, "renewals-agent", "SNACK-BOX", 2).await? {
            let c = w.gate.checkout("acme", &r, "finance-lead").await?;
            authorities.push(id(&c));
        }
    }
    Ok(Prepared {
        pending,
        authorized,
        authorities,
    })
}

/// The mixed operations, one per racer.
async fn operation(w: Arc<World>, p: Arc<Prepared>, i: usize) -> Result<Decision, Error> {
    let k = i / 8;
    let o = match i % 8 {
        0 => {
            let patch = PolicyPatch {
                approval_threshold_paise: Some(100_000 + i as i64),
                ..Default::default()
            };
            w.gate.set_policy("acme", &patch).await?.decision
        }
        1 => {
            let agent = if k.is_multiple_of(2) {
                "procurement-agent"
            } else {
                "renewals-agent"
            };
            w.gate
                .propose("acme", agent, &body("SNACK-BOX", 1), None)
                .await?
                .decision
        }
        2 => {
            w.gate
                .approve("acme", &p.pending[k], "finance-lead")
                .await?
                .decision
        }
        3 => {
            w.gate
                .checkout("acme", &p.authorized[k], "finance-lead")
                .await?
                .decision
        }
        4 => {
            w.gate
                .pay("acme", &p.authorities[k], "finance-lead")
                .await?
                .decision
        }
        5 => {
            let parent = if k.is_multiple_of(2) {
                "d-proc"
            } else {
                "d-renew"
            };
            let to = if k.is_multiple_of(2) {
                "procurement-agent"
            } else {
                "renewals-agent"
            };
            w.gate
                .grant_as_written("acme", &grant(&format!("d-race-{k}"), parent, to, 50_000))
                .await?
                .decision
        }
        6 => {
            // Revoke a hop granted in this same round (or refuse: missing).
            w.gate
                .revoke("acme", &format!("d-race-{k}"), "finance-lead")
                .await?
                .decision
        }
        _ => {
            w.gate
                .cancel("acme", &p.authorized[k], "finance-lead")
                .await?
                .decision
        }
    };
    Ok(o)
}

/// Every paisa reserved is held by a request that still holds it, and every
/// allocation is exactly its children's claims.
async fn assert_books_balance(w: &World) -> Result<(), Error> {
    let (daily_off,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ( \
           SELECT d.tenant_id, d.day, d.currency, d.reserved_paise, \
                  COALESCE((SELECT sum(r.reserved_paise) FROM payment_requests r \
                    WHERE r.tenant_id = d.tenant_id AND r.reserved_day = d.day \
                      AND r.currency = d.currency), 0) AS held \
             FROM daily_spend d) x WHERE reserved_paise <> held",
    )
    .fetch_one(w.pool())
    .await?;
    assert_eq!(
        daily_off, 0,
        "a day's reservations differ from what requests hold"
    );
    let (hops_off,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM delegations d WHERE d.spent_paise <> COALESCE(( \
            SELECT sum(r.reserved_paise) FROM payment_requests r \
             WHERE r.tenant_id = d.tenant_id AND r.delegation_id = d.id), 0) \
           OR d.allocated_paise <> COALESCE(( \
            SELECT sum(c.claim_paise) FROM delegations c \
             WHERE c.tenant_id = d.tenant_id AND c.parent_id = d.id), 0)",
    )
    .fetch_one(w.pool())
    .await?;
    assert_eq!(hops_off, 0, "a hop's spend or allocation is off");
    let report = w.gate.verify_ledger().await?;
    assert!(report.intact(), "{report:?}");
    Ok(())
}

#[tokio::test]
async fn every_operation_at_once_in_one_tenant_ends_without_an_engine_error() -> TestResult {
    let rounds: usize = std::env::var("SPENDGATE_RACE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    for round in 0..rounds {
        let Some(w) = world_with_pool(POOL).await? else {
            return Ok(());
        };
        let w = Arc::new(w);
        let prepared = Arc::new(prepare(&w).await?);
        let barrier = Arc::new(Barrier::new(RACERS));
        let mut tasks = Vec::with_capacity(RACERS);
        for i in 0..RACERS {
            let (w, p, barrier) = (w.clone(), prepared.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                operation(w, p, i).await
            }));
        }
        let mut errors = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await? {
                Ok(_) => {}
                Err(e) => errors.push(format!("racer {i} (op {}): {e}", i % 8)),
            }
        }
        assert!(
            errors.is_empty(),
            "round {round}: engine errors: {errors:#?}"
        );
        assert_books_balance(&w).await?;
        let w = Arc::try_unwrap(w).map_err(|_| "the world is still shared")?;
        w.drop().await?;
    }
    Ok(())
}
