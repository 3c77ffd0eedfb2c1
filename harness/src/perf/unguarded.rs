//! What the database's guards cost: a copy of the schema with them removed,
//! for the load phase to run the same cells on, beside the real one.
//!
//! The gate keeps its strongest rules in Postgres (CHECK constraints,
//! foreign keys, triggers), and every write statement pays for them: each
//! statement prepares every CHECK expression of its table, runs a query per
//! foreign key and calls each trigger. [`strip`] removes all of them from one
//! fresh database (never the template, never a database anything else uses),
//! so the load phase can say how fast the same statements go without them,
//! and so what share of the gate's time the guards are and what the
//! statements alone allow. It is a measurement, not a configuration: nothing
//! ever serves from such a database.
//!
//! Guarantees:
//! - After [`strip`], the database has no CHECK constraint and no foreign key
//!   in `public`, and no enabled trigger but those in [`COMPUTING_TRIGGERS`]
//!   (they fill in columns and rows the gate does not write itself, so the
//!   gate cannot run without them; they refuse nothing). Keys, unique
//!   indexes and NOT NULL stay: the gate's `ON CONFLICT` statements and its
//!   idempotency depend on them.
//! - A trigger of that list the schema no longer has is an error naming it,
//!   never a silent run with a different schema.
//! - All of it happens in one transaction: a failure leaves the database as
//!   it was.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, Executor, PgConnection};

/// The triggers that compute rather than guard, kept enabled: (table,
/// trigger). `ledger_head_for_new_tenant` opens a new tenant's ledger chain;
/// `delegation_derived_columns` fills a new hop's `claim_paise` and `depth`;
/// the `world_stamp_follows_*` triggers keep `tenants.world_digest`, the
/// stamp a proposal compares its gate's cached world with.
pub const COMPUTING_TRIGGERS: &[(&str, &str)] = &[
    ("tenants", "ledger_head_for_new_tenant"),
    ("delegations", "delegation_derived_columns"),
    ("catalog_items", "world_stamp_follows_catalog"),
    ("catalog_items", "world_stamp_follows_catalog_truncate"),
    ("policy_versions", "world_stamp_follows_policy"),
];

/// The guards a database holds in `public`, read from its catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guards {
    pub checks: usize,
    pub foreign_keys: usize,
    /// Enabled triggers other than the internal ones behind foreign keys,
    /// as `table.trigger`, sorted.
    pub triggers: Vec<String>,
}

/// Reads what guards the database `conn` is connected to holds.
pub async fn guards(conn: &mut PgConnection) -> Result<Guards> {
    let (checks, foreign_keys): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE contype = 'c'), count(*) FILTER (WHERE contype = 'f') \
           FROM pg_constraint WHERE connamespace = 'public'::regnamespace",
    )
    .fetch_one(&mut *conn)
    .await
    .context("counting the schema's constraints")?;
    let triggers: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname || '.' || t.tgname FROM pg_trigger t \
           JOIN pg_class c ON c.oid = t.tgrelid \
          WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal \
            AND t.tgenabled <> 'D' ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .context("listing the schema's triggers")?;
    Ok(Guards {
        checks: usize::try_from(checks)?,
        foreign_keys: usize::try_from(foreign_keys)?,
        triggers,
    })
}

/// Removes every guard from the database at `url` (a role that owns its
/// tables), keeping [`COMPUTING_TRIGGERS`]; returns what it removed.
pub async fn strip(url: &str) -> Result<Guards> {
    let mut conn = PgConnection::connect(url)
        .await
        .context("connecting to the copy whose guards are removed")?;
    let before = guards(&mut conn).await?;
    for (table, trigger) in COMPUTING_TRIGGERS {
        let name = format!("{table}.{trigger}");
        if !before.triggers.contains(&name) {
            bail!(
                "the schema has no enabled trigger {name}, which the copy without guards \
                 keeps (perf::unguarded::COMPUTING_TRIGGERS names it): update the list"
            );
        }
    }
    let drops: Vec<String> = sqlx::query_scalar(
        "SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', conrelid::regclass, conname) \
           FROM pg_constraint \
          WHERE connamespace = 'public'::regnamespace AND contype IN ('c', 'f') \
          ORDER BY contype, conname",
    )
    .fetch_all(&mut conn)
    .await
    .context("listing the constraints to drop")?;
    let disables: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT format('ALTER TABLE %I DISABLE TRIGGER USER', c.relname) \
           FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
          WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal",
    )
    .fetch_all(&mut conn)
    .await
    .context("listing the tables with triggers")?;
    let mut tx = conn.begin().await?;
    for sql in drops.iter().chain(&disables) {
        tx.execute(sqlx::AssertSqlSafe(sql.as_str()))
            .await
            .with_context(|| format!("removing a guard: {sql}"))?;
    }
    for (table, trigger) in COMPUTING_TRIGGERS {
        tx.execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} ENABLE TRIGGER {trigger}"
        )))
        .await
        .with_context(|| format!("keeping {table}.{trigger}"))?;
    }
    tx.commit().await.context("committing the removal")?;
    let kept: Vec<String> = COMPUTING_TRIGGERS
        .iter()
        .map(|(table, trigger)| format!("{table}.{trigger}"))
        .collect();
    Ok(Guards {
        checks: before.checks,
        foreign_keys: before.foreign_keys,
        triggers: before
            .triggers
            .into_iter()
            .filter(|t| !kept.contains(t))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `url` with its database replaced by `database`.
    fn on(url: &str, database: &str) -> Result<String> {
        super::super::load::with_database(url, database)
    }

    #[tokio::test]
    async fn the_copy_keeps_only_the_computing_triggers_and_no_check_or_foreign_key() -> Result<()>
    {
        let server = crate::db::Server::open("the unguarded-copy test").await?;
        let owner = gate::db::server_urls(&server.url).await?.owner;
        let kept_db = gate::db::fresh_database(&server.url).await?;
        let bare_db = gate::db::fresh_database(&server.url).await?;

        let removed = strip(&on(&owner, bare_db.name())?).await?;
        let mut bare = PgConnection::connect(&on(&owner, bare_db.name())?).await?;
        let after = guards(&mut bare).await?;
        let mut kept = PgConnection::connect(&on(&owner, kept_db.name())?).await?;
        let schema = guards(&mut kept).await?;

        let computing: Vec<String> = {
            let mut v: Vec<String> = COMPUTING_TRIGGERS
                .iter()
                .map(|(t, g)| format!("{t}.{g}"))
                .collect();
            v.sort();
            v
        };
        assert_eq!(after.checks, 0, "CHECK constraints left: {after:?}");
        assert_eq!(after.foreign_keys, 0, "foreign keys left: {after:?}");
        assert_eq!(after.triggers, computing);
        // What was removed is all the schema has: the real copy still holds it.
        assert_eq!(removed.checks, schema.checks);
        assert_eq!(removed.foreign_keys, schema.foreign_keys);
        assert!(
            removed.checks > 20 && removed.foreign_keys > 20,
            "{removed:?}"
        );
        assert!(
            removed
                .triggers
                .contains(&"payment_requests.request_state_transition".to_string()),
            "{removed:?}"
        );
        assert_eq!(
            removed.triggers.len() + computing.len(),
            schema.triggers.len()
        );

        // The copy still computes (a new tenant gets its ledger chain), and a
        // row the real schema refuses by name goes in.
        bare.execute("INSERT INTO tenants (id) VALUES ('t-bare')")
            .await?;
        let heads: i64 =
            sqlx::query_scalar("SELECT count(*) FROM ledger_head WHERE tenant_id = 't-bare'")
                .fetch_one(&mut bare)
                .await?;
        assert_eq!(heads, 1);
        kept.execute("INSERT INTO tenants (id) VALUES ('t-kept')")
            .await?;
        let refused = kept
            .execute("UPDATE ledger_head SET seq = -1")
            .await
            .err()
            .and_then(|e| {
                e.as_database_error()
                    .and_then(|d| d.constraint().map(String::from))
            });
        assert_eq!(refused.as_deref(), Some("ck_ledger_head_seq"));
        bare.execute("UPDATE ledger_head SET seq = -1").await?;

        bare.close().await?;
        kept.close().await?;
        bare_db.drop().await?;
        kept_db.drop().await?;
        server.close();
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_computing_trigger_is_named() -> Result<()> {
        let server = crate::db::Server::open("the unguarded-copy test").await?;
        let owner = gate::db::server_urls(&server.url).await?.owner;
        let db = gate::db::fresh_database(&server.url).await?;
        let url = on(&owner, db.name())?;
        let mut conn = PgConnection::connect(&url).await?;
        conn.execute("ALTER TABLE delegations DISABLE TRIGGER delegation_derived_columns")
            .await?;
        let err = strip(&url).await.err().map(|e| format!("{e:#}"));
        let still = guards(&mut conn).await?;
        conn.close().await?;
        db.drop().await?;
        server.close();
        let err = err.unwrap_or_default();
        assert!(
            err.contains("delegations.delegation_derived_columns"),
            "{err}"
        );
        assert!(
            still.checks > 0,
            "a refused strip removed guards: {still:?}"
        );
        Ok(())
    }
}
