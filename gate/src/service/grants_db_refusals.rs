//! Tests of `grants::insert_delegation`'s mapping from a database refusal to
//! a reason, where the mapping lives, with the database doing the refusing.
//!
//! Guarantees: every arm of the mapping is reached by a grant that the
//! database itself refuses, and each comes back as its spec reason with the
//! name of the constraint or trigger that refused. The gate's own checks in
//! `Gate::grant` refuse most of these grants before the insert, so the
//! integration tests reach these arms only through races; here the insert is
//! called directly, skipping those checks, so each arm is proven on its own.
//! A test file of its own, so that adding to it leaves `grants.rs` (and the
//! outside audit's verdicts over it) unchanged.

use std::sync::Arc;

use chrono::Duration;
use sqlx::Connection;

use super::clock::ManualClock;
use super::grants::{Under, insert_delegation};
use super::{Gate, standard};
use crate::grant::Grant;
use crate::provider::InProcessProvider;
use crate::reason::Reason;

pub(super) type TestResult = Result<(), Box<dyn std::error::Error>>;

fn grant(id: &str, from: &str, to: &str, budget_paise: i64) -> Grant {
    Grant {
        id: id.to_owned(),
        from: from.to_owned(),
        to: to.to_owned(),
        budget_paise,
        skus: None,
        expires_at: None,
    }
}

/// Runs `check` on a connection to a fresh database seeded with the standard
/// world (acme: `d-buyer`, 200000, from finance-lead to buyer-agent); no
/// database configured skips it, as every database test does. Shared with
/// `budget_db_refusals`.
pub(super) async fn on_standard_world(
    check: impl AsyncFnOnce(&mut sqlx::PgConnection) -> TestResult,
) -> TestResult {
    let Some(db) = crate::db::fresh_test_database().await? else {
        return Ok(());
    };
    let clock = Arc::new(ManualClock::new(standard::now()));
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        b"spendgate-grants-db-refusals-secret-0123456789".to_vec(),
        clock,
    )?;
    gate.seed(&standard::seed()).await?;
    let mut conn = db.pool().acquire().await?;
    check(&mut conn).await
}

/// Inserts `g` under acme in a transaction of its own and returns the refusal.
async fn refusal_of(
    conn: &mut sqlx::PgConnection,
    g: &Grant,
    root: bool,
) -> Result<Option<(Reason, String)>, Box<dyn std::error::Error>> {
    let mut tx = conn.begin().await?;
    let under = if root {
        Under::Root { grantor: &g.from }
    } else {
        Under::Parent(&g.from)
    };
    let out = insert_delegation(&mut tx, "acme", &g.terms(), under, standard::now()).await?;
    tx.commit().await?;
    Ok(out.err())
}

fn refused(reason: Reason, constraint: &str) -> Option<(Reason, String)> {
    Some((reason, constraint.to_owned()))
}

#[tokio::test]
async fn a_grant_the_database_accepts_is_written() -> TestResult {
    on_standard_world(async |conn| {
        let g = grant("d-child", "d-buyer", "procurement-agent", 50000);
        assert_eq!(refusal_of(conn, &g, false).await?, None);
        let written: i64 = sqlx::query_scalar(
            "SELECT budget_paise FROM delegations WHERE tenant_id = 'acme' AND id = 'd-child'",
        )
        .fetch_one(&mut *conn)
        .await?;
        assert_eq!(written, 50000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn each_database_refusal_of_a_grant_comes_back_as_its_reason_and_guard() -> TestResult {
    let scoped = |mut g: Grant, sku: &str| {
        g.skus = Some(vec![sku.to_owned()]);
        g
    };
    use Reason::DelegationWidens;
    use Reason::{DelegationBudgetExhausted, DelegationGrantorNotPermitted, DelegationInvalid};
    // In order: (why, the grant, a root hop, the refusal expected; None is accepted).
    let cases = [
        (
            "within the parent's budget",
            grant("d-most", "d-buyer", "procurement-agent", 150000),
            false,
            None,
        ),
        (
            "more than the parent has left (within its budget)",
            grant("d-big", "d-buyer", "renewals-agent", 60000),
            false,
            refused(
                DelegationBudgetExhausted,
                "ck_delegation_budget_partitioned",
            ),
        ),
        (
            "nothing to spend",
            grant("d-zero", "d-buyer", "procurement-agent", 0),
            false,
            refused(DelegationWidens, "ck_delegation_budget_positive"),
        ),
        (
            "the parent allows every sku",
            scoped(
                grant("d-wide", "d-buyer", "procurement-agent", 1000),
                "CLOUD-TEAM",
            ),
            false,
            None,
        ),
        (
            "a sku the parent does not cover",
            scoped(
                grant("d-wider", "d-wide", "renewals-agent", 500),
                "GPU-HOUR",
            ),
            false,
            refused(DelegationWidens, "delegation_attenuates"),
        ),
        (
            "a root hop from a human who may not approve",
            grant("d-intern", "intern", "buyer-agent", 1000),
            true,
            refused(DelegationGrantorNotPermitted, "delegation_attenuates"),
        ),
        // The trigger refuses it before the grantor's foreign key is checked.
        (
            "a root hop from a grantor who is nobody in the tenant",
            grant("d-stranger", "globex-finance", "buyer-agent", 1000),
            true,
            refused(DelegationGrantorNotPermitted, "delegation_attenuates"),
        ),
        (
            "an id already taken (a concurrent twin's)",
            grant("d-buyer", "d-buyer", "buyer-agent", 1000),
            false,
            refused(DelegationInvalid, "pk_delegations"),
        ),
        // A root hop is the onboarding role's; this connection is the
        // runtime role's.
        (
            "a root hop inserted as the runtime role",
            grant("d-new-root", "finance-lead", "buyer-agent", 1000),
            true,
            refused(
                DelegationGrantorNotPermitted,
                "delegation_root_by_onboarding",
            ),
        ),
    ];
    on_standard_world(async |conn| {
        for (why, g, root, expected) in &cases {
            assert_eq!(refusal_of(conn, g, *root).await?, *expected, "{why}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_grant_under_a_revoked_hop_is_refused_as_revoked() -> TestResult {
    on_standard_world(async |conn| {
        let g = grant("d-child", "d-buyer", "procurement-agent", 1000);
        assert_eq!(refusal_of(conn, &g, false).await?, None);
        sqlx::query(
            "UPDATE delegations SET revoked_at = now(), revoked_by = 'finance-lead' WHERE tenant_id = 'acme' AND id = 'd-child'",
        )
        .execute(&mut *conn)
        .await?;
        let g = grant("d-under-revoked", "d-child", "renewals-agent", 500);
        assert_eq!(
            refusal_of(conn, &g, false).await?,
            refused(Reason::DelegationRevoked, "delegation_attenuates")
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_chain_deeper_than_eight_hops_is_refused_as_too_deep() -> TestResult {
    on_standard_world(async |conn| {
        // d-buyer is hop 1; hops 2 to 8 go in, the ninth is refused.
        let mut parent = "d-buyer".to_owned();
        for depth in 2..=8 {
            let id = format!("d-depth-{depth}");
            let g = grant(&id, &parent, "procurement-agent", 100);
            assert_eq!(refusal_of(conn, &g, false).await?, None, "hop {depth}");
            parent = id;
        }
        let g = grant("d-depth-9", &parent, "procurement-agent", 100);
        assert_eq!(
            refusal_of(conn, &g, false).await?,
            refused(Reason::DelegationDepthExceeded, "ck_delegation_depth")
        );
        Ok(())
    })
    .await
}

/// A hop may not outlive its parent: `delegation_attenuates` refuses it as widening.
#[tokio::test]
async fn a_grant_that_outlives_its_parent_widens() -> TestResult {
    on_standard_world(async |conn| {
        let mut g = grant("d-short", "d-buyer", "procurement-agent", 1000);
        g.expires_at = Some(standard::now() + Duration::hours(1));
        assert_eq!(refusal_of(conn, &g, false).await?, None);
        let mut g = grant("d-long", "d-short", "renewals-agent", 500);
        g.expires_at = Some(standard::now() + Duration::hours(2));
        assert_eq!(
            refusal_of(conn, &g, false).await?,
            refused(Reason::DelegationWidens, "delegation_attenuates")
        );
        Ok(())
    })
    .await
}
