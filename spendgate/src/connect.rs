//! The database connections a command holds.
//!
//! Guarantees: the gate's commands connect as the application role
//! (`database_url`) and never migrate; the onboarding commands (`tenant
//! apply`, `keys`) connect as the onboarding role (`onboard_database_url`);
//! `spendgate migrate` alone connects as the owner
//! (`migration_database_url`). A gate is served only on a schema
//! whose migrations are all applied: otherwise the command stops and says to
//! run `spendgate migrate`. Errors show URLs redacted.

use gate::service::ledger::{EVERY_TENANT, row_token};
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::config::Config;
use crate::error::Failure;

/// A pool of `size` connections as the application role, on a current
/// schema. With a ledger key configured, every connection carries the
/// every-tenant row-security token (a startup parameter), so that the
/// commands that read across tenants (`ledger`, `log`, `evidence`, ...) see
/// every tenant's rows where `row_security` is on.
pub async fn app_pool(config: &Config, size: u32) -> Result<PgPool, Failure> {
    let token = crate::gate_of_config::ledger_key(config)
        .ok()
        .map(|key| row_token(&key, EVERY_TENANT));
    pool_at(config.database_url()?, size, token).await
}

/// A pool of `size` connections as the onboarding role, on a current schema.
pub async fn onboard_pool(config: &Config, size: u32) -> Result<PgPool, Failure> {
    pool_at(config.onboard_database_url()?, size, None).await
}

async fn pool_at(url: String, size: u32, token: Option<String>) -> Result<PgPool, Failure> {
    let shown = gate::db::redact_url(&url);
    let mut options: PgConnectOptions = url
        .parse()
        .map_err(|e| Failure::Input(format!("{shown} is not a Postgres URL: {e}")))?;
    if let Some(token) = token {
        options = options.options([("spendgate.tenant_token", token)]);
    }
    let pool = gate::db::pool_options(size)
        .connect_with(options)
        .await
        .map_err(|e| Failure::database(format!("connecting to {shown}"), e))?;
    check_schema_current(&pool, &shown).await?;
    Ok(pool)
}

/// Applies the migrations as the owner; the versions applied by this run.
pub async fn migrate(config: &Config) -> Result<Vec<i64>, Failure> {
    let url = config.migration_database_url()?;
    let shown = gate::db::redact_url(&url);
    let pool = gate::db::connect(&url)
        .await
        .map_err(|e| Failure::database(format!("connecting to {shown} as the owner"), e))?;
    let before = applied(&pool).await.unwrap_or_default();
    gate::db::migrate(&pool)
        .await
        .map_err(|e| Failure::database(format!("migrating {shown}"), e))?;
    // Row-level security as `row_security` says, on every tenant table.
    sqlx::query("SELECT spendgate_row_security($1)")
        .bind(config.row_security()?)
        .execute(&pool)
        .await
        .map_err(|e| Failure::database(format!("applying row_security to {shown}"), e))?;
    let after = applied(&pool)
        .await
        .map_err(|e| Failure::database(format!("reading the migrations of {shown}"), e))?;
    pool.close().await;
    Ok(after.into_iter().filter(|v| !before.contains(v)).collect())
}

/// The versions of the migrations applied to `pool`'s database.
async fn applied(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await
}

/// Refuses a schema that lacks one of this build's migrations.
async fn check_schema_current(pool: &PgPool, shown: &str) -> Result<(), Failure> {
    let applied = applied(pool).await.map_err(|e| {
        Failure::Other(format!(
            "{shown} holds no spendgate schema ({e}): run `spendgate migrate` first"
        ))
    })?;
    let missing: Vec<i64> = gate::db::MIGRATOR
        .iter()
        .map(|m| m.version)
        .filter(|v| !applied.contains(v))
        .collect();
    if let Some(first) = missing.first() {
        return Err(Failure::Other(format!(
            "{shown} lacks {} of this build's migrations (the first: {first}): \
             run `spendgate migrate`",
            missing.len()
        )));
    }
    Ok(())
}
