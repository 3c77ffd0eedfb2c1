//! Clear errors and no half-written state: a database that is down or goes
//! away mid-operation, a migration that fails, and a ledger that cannot be
//! appended to. (A provider that times out or refuses: flow_provider.rs.)

use std::time::Duration;

use crate::support::*;
use gate::Decision;
use gate::db::DbError;
use gate::service::ServiceError;
use sqlx::Executor;

/// Nothing was written by a failed propose.
async fn nothing_written(w: &World, ledger_before: i64) -> TestResult {
    let requests: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_requests")
        .fetch_one(w.pool())
        .await?;
    let ledger: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.ledger().await?)
        .await?;
    let reserved: Option<i64> =
        sqlx::query_scalar("SELECT sum(reserved_paise)::bigint FROM daily_spend")
            .fetch_one(w.pool())
            .await?;
    let spent: i64 = sqlx::query_scalar("SELECT spent_paise FROM delegations WHERE id = 'd-buyer'")
        .fetch_one(w.pool())
        .await?;
    assert_eq!(
        (requests, ledger, reserved.unwrap_or(0), spent),
        (0, ledger_before, 0, 0)
    );
    Ok(())
}

async fn ledger_len(w: &World) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.ledger().await?)
        .await?)
}

#[tokio::test]
async fn a_database_that_is_down_is_a_clear_error() -> TestResult {
    let connected = gate::db::connect(DOWN_DATABASE_URL).await;
    assert!(
        matches!(connected, Err(DbError::Unreachable { .. })),
        "{connected:?}"
    );
    let gate = gate_over_a_database_that_is_down()?;
    // The error comes back in bounded time: a connection that cannot be
    // had is tried again only as often as the pool has connections.
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        gate.propose("acme", "buyer-agent", &body("SNACK-BOX", 1), None),
    )
    .await
    .map_err(|_| "a gate over a database that is down kept trying for 10 s")?;
    match err {
        Err(e @ ServiceError::DatabaseUnavailable { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("down or unreachable") && message.contains("proposing"),
                "{message}"
            );
        }
        other => panic!("expected DatabaseUnavailable, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_connection_lost_mid_operation_writes_nothing() -> TestResult {
    on_world(async |w| {
        let before = ledger_len(w).await?;
        // The server drops the gate's connection at the very last statement of
        // propose (the trigger is the owner's to create and drop).
        w.owner()
            .execute(
                "CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$; \
             CREATE TRIGGER die BEFORE INSERT ON ledger_queue FOR EACH ROW EXECUTE FUNCTION die();",
            )
            .await?;
        let err = w.propose("SNACK-BOX", 1).await;
        assert!(
            matches!(err, Err(ServiceError::DatabaseUnavailable { .. })),
            "{err:?}"
        );
        w.owner()
            .execute("DROP TRIGGER die ON ledger_queue")
            .await?;
        nothing_written(w, before).await?;
        // And the gate carries on once the database is back.
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        Ok(())
    })
    .await
}

/// A gate pool hands out an idle connection without a round trip to test it
/// first (`gate::db::pool_options`). One that died while it waited (a
/// server restart, an idle timeout) fails its `BEGIN`, which wrote nothing,
/// and the gate begins again on another connection: on a pool of `size`
/// whose every idle connection is dead (a restart ends them all), the next
/// proposal is still decided, exactly once, and no dead connection is used
/// again.
async fn every_idle_connection_dead_then_a_proposal(size: u32) -> TestResult {
    on_world_with_pool(size, async |w| {
        // Every connection of the pool opened and back in it, idle.
        let mut held = Vec::new();
        for _ in 0..size {
            held.push(w.pool().acquire().await?);
        }
        let mut dead = Vec::new();
        for conn in &mut held {
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut **conn)
                .await?;
            dead.push(pid);
        }
        drop(held);
        // Their backends are ended from another connection of the same role.
        let mut other =
            <sqlx::PgConnection as sqlx::Connection>::connect_with(w.db.connect_options()).await?;
        for &pid in &dead {
            let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
                .bind(pid)
                .fetch_one(&mut other)
                .await?;
            assert!(ended, "backend {pid} was not ended");
        }
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        let requests: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_requests")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(requests, 1, "the proposal was recorded once");
        let now: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(w.pool())
            .await?;
        assert!(
            !dead.contains(&now),
            "a dead connection was handed out again"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_connection_that_died_in_the_pool_is_replaced_before_the_operation_begins() -> TestResult
{
    every_idle_connection_dead_then_a_proposal(1).await
}

#[tokio::test]
async fn a_pool_whose_every_idle_connection_died_still_begins_the_next_operation() -> TestResult {
    every_idle_connection_dead_then_a_proposal(2).await
}

#[tokio::test]
async fn a_ledger_that_cannot_be_appended_to_writes_nothing() -> TestResult {
    on_world(async |w| {
        let before = ledger_len(w).await?;
        // Every entry references its chain's head (fk_ledger_entry_head): the
        // owner drops that constraint to take the heads away.
        w.owner()
            .execute(
                "ALTER TABLE ledger_entries DROP CONSTRAINT fk_ledger_entry_head; \
             DELETE FROM ledger_head",
            )
            .await?;
        let err = w.propose("SNACK-BOX", 1).await;
        assert!(
            matches!(err, Err(ServiceError::LedgerHeadMissing)),
            "{err:?}"
        );
        nothing_written(w, before).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_migration_that_fails_names_itself_and_leaves_nothing_behind() -> TestResult {
    let Some(url) = gate::db::test_admin_url()? else {
        return Ok(());
    };
    let db = gate::db::empty_database(&url).await?;
    // Something already in the way of the delegation migration.
    db.pool()
        .execute("CREATE TABLE delegations (x int)")
        .await?;
    let err = gate::db::migrate(db.pool()).await;
    match &err {
        Err(DbError::Migration {
            version,
            description,
            ..
        }) => {
            assert_eq!(*version, 20261129000010);
            assert_eq!(description, "policy delegation");
        }
        other => panic!("expected a named migration failure, got {other:?}"),
    }
    let message = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("20261129000010"), "{message}");
    let half: Option<String> = sqlx::query_scalar("SELECT to_regclass('policy_versions')::text")
        .fetch_one(db.pool())
        .await?;
    assert_eq!(
        half, None,
        "the failed migration's first table was rolled back with it"
    );
    db.drop().await?;
    Ok(())
}
