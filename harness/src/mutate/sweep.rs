//! Cleaning up after test processes the mutation runner killed.
//!
//! Guarantees: a test database is named `spendgate_t_<pid>_<n>_<hex>` after
//! the test process that made it (`gate::db::fresh_database`); a process the
//! runner kills (time limit, SIGINT/SIGTERM) cannot drop its own.
//! [`sweep_killed_test_databases`] drops exactly the databases of the
//! processes the runner reports it killed (`mutations::process::take_killed_pids`),
//! never one of a live process or of another run, and never a template. It is
//! best effort: a server that cannot be reached is reported, not fatal.

use std::ffi::OsString;

use sqlx::Executor;

/// The admin URL test processes used: the run's own `DATABASE_URL`, else the
/// environment's.
pub(crate) fn database_url(test_env: &[(OsString, OsString)]) -> Option<String> {
    test_env
        .iter()
        .find(|(k, _)| k == "DATABASE_URL")
        .map(|(_, v)| v.to_string_lossy().into_owned())
        .or_else(|| std::env::var(gate::db::DATABASE_URL_ENV).ok())
        .filter(|u| !u.trim().is_empty())
}

/// The database-name prefix of test process `pid`, as a LIKE pattern.
fn pattern(pid: u32) -> String {
    format!("spendgate\\_t\\_{pid}\\_%")
}

/// Drops the test databases of every test process the runner killed since
/// the last call; returns their names. Prints what it did on stderr.
pub(crate) fn sweep_killed_test_databases(url: Option<&str>) -> Vec<String> {
    let pids = mutations::process::take_killed_pids();
    let Some(url) = url else {
        return Vec::new();
    };
    if pids.is_empty() {
        return Vec::new();
    }
    let swept = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(sweep(url, &pids)));
    match swept {
        Ok(names) => {
            if !names.is_empty() {
                eprintln!(
                    "mutate: dropped {} test database(s) left by killed test processes: {}",
                    names.len(),
                    names.join(", ")
                );
            }
            names
        }
        Err(e) => {
            eprintln!(
                "mutate: warning: could not drop the test databases of killed test processes {pids:?}: {e}"
            );
            Vec::new()
        }
    }
}

async fn sweep(url: &str, pids: &[u32]) -> Result<Vec<String>, String> {
    // The owner made (and owns) the test databases, so the owner drops them.
    let owner = gate::db::server_urls(url)
        .await
        .map_err(|e| e.to_string())?
        .owner;
    let pool = gate::db::connect(&owner).await.map_err(|e| e.to_string())?;
    let mut dropped = Vec::new();
    for pid in pids {
        let names: Vec<String> =
            sqlx::query_scalar("SELECT datname::text FROM pg_database WHERE datname LIKE $1")
                .bind(pattern(*pid))
                .fetch_all(&pool)
                .await
                .map_err(|e| e.to_string())?;
        for name in names {
            let sql = format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                name.replace('"', "\"\"")
            );
            pool.execute(sqlx::AssertSqlSafe(sql))
                .await
                .map_err(|e| format!("dropping {name}: {e}"))?;
            dropped.push(name);
        }
    }
    pool.close().await;
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_names_one_process_only() {
        assert_eq!(pattern(42), "spendgate\\_t\\_42\\_%");
        let url = database_url(&[("DATABASE_URL".into(), "postgres://x/y".into())]);
        assert_eq!(url.as_deref(), Some("postgres://x/y"));
    }
}
