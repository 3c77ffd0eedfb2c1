//! The privileges the runtime role (`spendgate_app`, the login `serve`
//! holds) is refused, each a guard of its own: the statement a schema guard
//! refuses (an append-only trigger, a check constraint) is refused first,
//! with SQLSTATE 42501, because the role may not send it at all. Each test
//! sends one such statement as the runtime role, inside a transaction that
//! holds acme's row token (so row-level security admits the row and the
//! privilege alone refuses it), asserts 42501, and that nothing changed.
//!
//! `mutations/registry.yaml` registers each privilege (`object_kind:
//! privilege`); granting it (`SPENDGATE_DROP_GUARDS=privilege:TABLE:PRIV`)
//! turns the refusal into the guard behind it, and the test fails.

use crate::db_roles::assert_denied;
use crate::stolen_login::{key, rows_as};
use crate::support::*;
use gate::service::ledger::row_token;

/// Sends `sql` as the runtime role with acme's row token and asserts it is
/// refused for want of privilege (42501); `count` (run as the owner) reads
/// the same before and after.
async fn refused_for_want_of_privilege(w: &World, sql: &str, count: &str) -> TestResult {
    let before: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count))
        .fetch_one(w.owner())
        .await?;
    assert!(before > 0, "{count}: nothing to change");
    let token = row_token(&key(), "acme");
    assert_denied(rows_as(w.pool(), Some(&token), sql).await, sql);
    let after: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count))
        .fetch_one(w.owner())
        .await?;
    assert_eq!(after, before, "{sql} changed {count}");
    Ok(())
}

#[tokio::test]
async fn the_runtime_role_may_not_update_a_ledger_entry() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        w.gate.integrate().await?;
        refused_for_want_of_privilege(
            w,
            "UPDATE ledger_entries SET entry = replace(entry, '60000', '1')",
            "SELECT count(*) FROM ledger_entries WHERE entry LIKE '%60000%'",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_delete_a_ledger_entry() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        w.gate.integrate().await?;
        refused_for_want_of_privilege(
            w,
            "DELETE FROM ledger_entries WHERE tenant_id = 'acme'",
            "SELECT count(*) FROM ledger_entries",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_truncate_the_ledger() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        w.gate.integrate().await?;
        refused_for_want_of_privilege(
            w,
            "TRUNCATE ledger_entries",
            "SELECT count(*) FROM ledger_entries",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_update_a_published_policy_version() -> TestResult {
    on_world(async |w| {
        refused_for_want_of_privilege(
            w,
            "UPDATE policy_versions SET policy = jsonb_set(policy, '{daily_cap_paise}', \
             '900000000') WHERE tenant_id = 'acme'",
            "SELECT count(*) FROM policy_versions WHERE (policy->>'daily_cap_paise') = '500000'",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_delete_a_published_policy_version() -> TestResult {
    on_world(async |w| {
        refused_for_want_of_privilege(
            w,
            "DELETE FROM policy_versions WHERE tenant_id = 'acme'",
            "SELECT count(*) FROM policy_versions",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_truncate_the_catalog() -> TestResult {
    on_world(async |w| {
        refused_for_want_of_privilege(
            w,
            "TRUNCATE catalog_items",
            "SELECT count(*) FROM catalog_items",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_insert_a_person_with_a_blank_name() -> TestResult {
    on_world(async |w| {
        refused_for_want_of_privilege(
            w,
            "INSERT INTO people (tenant_id, id, display_name, may_approve) \
             VALUES ('acme', 'mallory', '  ', true)",
            "SELECT count(*) FROM people",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_may_not_insert_a_merchant_with_a_blank_id() -> TestResult {
    on_world(async |w| {
        refused_for_want_of_privilege(
            w,
            "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('acme', '  ', 'shell')",
            "SELECT count(*) FROM merchants",
        )
        .await
    })
    .await
}
