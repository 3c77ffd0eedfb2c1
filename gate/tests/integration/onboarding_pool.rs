//! The onboarding pool's transactions begin as the gate's own do
//! (`Gate::begin_onboarding`): past connections that died while idle, and
//! over a database that is down, with a clear error in bounded time.

use std::time::Duration;

use gate::service::ServiceError;

use crate::support::*;

/// Every connection of the onboarding pool opened, back in it idle, and its
/// backend ended (as a restart ends them all): registering the row tokens
/// still begins, on a new connection, and no dead one is handed out again.
#[tokio::test]
async fn an_onboarding_pool_whose_idle_connections_died_still_begins() -> TestResult {
    on_world(async |w| {
        let pool = w.gate.onboarding_pool();
        let size = pool.options().get_max_connections();
        let mut held = Vec::new();
        for _ in 0..size {
            held.push(pool.acquire().await?);
        }
        let mut dead = Vec::new();
        for conn in &mut held {
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut **conn)
                .await?;
            dead.push(pid);
        }
        drop(held);
        for &pid in &dead {
            let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
                .bind(pid)
                .fetch_one(w.owner())
                .await?;
            assert!(ended, "backend {pid} was not ended");
        }
        w.gate.register_row_tokens(&["acme".to_owned()]).await?;
        let now: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(pool)
            .await?;
        assert!(
            !dead.contains(&now),
            "a dead connection was handed out again"
        );
        Ok(())
    })
    .await
}

/// Over a database that is down, an onboarding transaction is the action's
/// clear error, tried only as often as the onboarding pool has connections
/// and once more (each try bounded by the pool's acquire timeout).
#[tokio::test]
async fn an_onboarding_transaction_over_a_database_that_is_down_is_a_clear_error() -> TestResult {
    let gate = gate_over_a_database_that_is_down()?;
    let registered = tokio::time::timeout(
        Duration::from_secs(25),
        gate.register_row_tokens(&["acme".to_owned()]),
    )
    .await
    .map_err(|_| "an onboarding transaction over a database that is down kept trying for 25 s")?;
    match registered {
        Err(e @ ServiceError::DatabaseUnavailable { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("writing the row-security tokens"),
                "{message}"
            );
        }
        other => panic!("expected DatabaseUnavailable, got {other:?}"),
    }
    Ok(())
}

/// Registering the row tokens writes, for each tenant named and for every
/// tenant, the digest of the token this gate's ledger key derives: a
/// deployment whose digests are gone (or were written under another key)
/// gets its own back.
#[tokio::test]
async fn registering_row_tokens_writes_this_gates_digests() -> TestResult {
    use gate::service::LedgerKey;
    use gate::service::ledger::{EVERY_TENANT, row_token, row_token_digest};
    on_world(async |w| {
        exec(w.owner(), "DELETE FROM row_tokens").await?;
        w.gate
            .register_row_tokens(&["acme".to_owned(), "globex".to_owned()])
            .await?;
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT scope, token_sha256 FROM row_tokens ORDER BY scope")
                .fetch_all(w.owner())
                .await?;
        let key = LedgerKey::derived_from_secret(SECRET);
        let mut want: Vec<(String, String)> = [EVERY_TENANT, "acme", "globex"]
            .iter()
            .map(|s| (s.to_string(), row_token_digest(&row_token(&key, s))))
            .collect();
        want.sort();
        assert_eq!(rows, want);
        Ok(())
    })
    .await
}
