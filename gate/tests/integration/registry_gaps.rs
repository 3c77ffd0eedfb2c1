//! Tests written for guards of mutations/registry.yaml whose deletion no other
//! test noticed. Each test names the registry entry it catches.

use std::time::Duration;

use crate::support::*;
use gate::PolicyPatch;
use gate::service::Grant;
use gate::{Decision, Reason};

/// The tenant ids no identifier may be (each holds a NUL, which Postgres
/// cannot store: one that reached SQL would be a database error).
fn hostile_tenants() -> [&'static str; 3] {
    ["acme\0", "\0", "ac\0me"]
}

async fn ledger_rows(w: &World) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.pool())
        .await
}

async fn allocated(w: &World, hop: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT allocated_paise FROM delegations WHERE tenant_id = 'acme' AND id = $1",
    )
    .bind(hop)
    .fetch_one(w.pool())
    .await
}

fn grant(id: &str, from: &str, budget_paise: i64) -> Grant {
    Grant {
        id: id.into(),
        from: from.into(),
        to: "procurement-agent".into(),
        budget_paise,
        skus: None,
        expires_at: None,
    }
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

/// `authority-policy-started`: the standard policy starts at
/// 2026-01-01T00:00:00Z. A request authorized at that very instant, whose
/// clock then steps back one second, is before the window at checkout and at
/// payment: refused POLICY_NOT_YET_VALID, the request EXPIRES, its budgets
/// come back, and no provider order is made.
#[tokio::test]
async fn checkout_and_pay_refuse_before_the_policy_window_starts() -> TestResult {
    on_world(async |w| {
        let start: chrono::DateTime<chrono::Utc> = "2026-01-01T00:00:00Z".parse()?;
        w.clock.set(start);
        let propose = || async {
            let p = w.propose("SNACK-BOX", 1).await?;
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
        assert_eq!(state_of(w, &for_checkout).await?, "EXPIRED");

        let o = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(o.decision, Decision::Deny(Reason::PolicyNotYetValid));
        assert_eq!(state_of(w, &for_pay).await?, "EXPIRED");
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
        Ok(())
    })
    .await
}

/// `identity-tenant-exists-ident`, `expire-sweep-tenant-ident`,
/// `expire-lapsed-tenant-ident`: a tenant id outside the grammar given to an
/// operator's call (price, policy, cancel, expire, grant, the expiry sweeps) is an
/// unknown tenant, answered without a database error and without a write.
#[tokio::test]
async fn hostile_tenants_in_operator_calls_are_unknown_tenants() -> TestResult {
    on_world(async |w| {
        let before = ledger_rows(w).await?;
        for bad in hostile_tenants() {
            for o in [
                w.gate.set_price(bad, "CLOUD-STARTER", 100).await?,
                w.gate.cancel(bad, "req_x", "finance-lead").await?,
                w.gate.expire(bad, "req_x").await?,
                w.gate.set_policy(bad, &PolicyPatch::default()).await?,
            ] {
                assert_eq!(
                    o.decision,
                    Decision::Deny(Reason::TenantUnknown),
                    "{bad:?}: {o:?}"
                );
            }
            assert_eq!(w.gate.expire_sweep(bad).await?, 0, "{bad:?}");
            assert_eq!(w.gate.expire_lapsed(bad).await?, 0, "{bad:?}");
        }
        assert_eq!(ledger_rows(w).await?, before, "nothing written");
        // A grant is answered TENANT_UNKNOWN too (it still appends a tenant-less
        // ledger entry, which is why it is outside the count above).
        for bad in hostile_tenants() {
            let o = w
                .gate
                .grant_as_written(bad, &grant("d-new", "finance-lead", 1000))
                .await?;
            assert_eq!(o.decision, Decision::Deny(Reason::TenantUnknown), "{bad:?}");
        }
        Ok(())
    })
    .await
}

/// `row-lock-branch`: revocation locks the branch it revokes. Two
/// revocations of one unspent child, both in flight before either decides,
/// end one after the other: both are answered, and the child's allocation
/// goes back to its parent once (unlocked, both would read the child as live
/// and return it twice).
#[tokio::test]
async fn two_revocations_of_one_branch_at_once_return_its_allocation_once() -> TestResult {
    on_world(async |w| {
        assert!(
            w.gate
                .grant_as_written("acme", &grant("d-child", "d-buyer", 150_000))
                .await?
                .is_ok()
        );
        let before = allocated(w, "d-buyer").await?;
        // Hold the child's row so that both revocations are under way first.
        let mut holder = w.pool().begin().await?;
        sqlx::query(
            "SELECT id FROM delegations WHERE tenant_id = 'acme' AND id = 'd-child' FOR UPDATE",
        )
        .execute(&mut *holder)
        .await?;
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let gate = w.gate.clone();
                tokio::spawn(async move { gate.revoke("acme", "d-child", "finance-lead").await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "both revocations wait for the held row"
        );
        holder.rollback().await?;
        for t in tasks {
            let o = t.await??;
            assert!(o.is_ok(), "{o:?}");
        }
        assert_eq!(
            allocated(w, "d-buyer").await?,
            before - 150_000,
            "the child's allocation came back once"
        );
        Ok(())
    })
    .await
}
