//! Migrated databases handed from scenario to scenario: the bench's clean
//! world without a `CREATE DATABASE` per scenario.
//!
//! Guarantees:
//! - A database is leased to one scenario at a time. It comes back through
//!   [`DatabasePool::give_back`], which empties it before anyone else gets it:
//!   one statement, run by the tables' owner in one transaction, deletes
//!   every row of every table the migrations made (`_sqlx_migrations`
//!   aside), referencing tables first, restarts every sequence, and
//!   disables the tables' DELETE guards only inside that transaction
//!   (`ledger_append_only` and its kin stay in force for every other
//!   session, and are back before it commits).
//! - A database is reused only when the migrations left every table empty
//!   (checked once, when the pool first opens one), and only after a run
//!   that ended cleanly: a run that errored, panicked or timed out, or a
//!   reset that failed, drops its database instead, and the next lease
//!   makes a fresh one. So a scenario never sees what another left behind.
//! - Every database the pool made is dropped by [`DatabasePool::close`] (and,
//!   failing that, when the pool is dropped: `FreshDatabase`'s own `Drop`).

use std::sync::Mutex;

use gate::db::{DbError, FreshDatabase, fresh_database};
use sqlx::PgPool;

/// The statement that empties one of the pool's databases.
#[derive(Debug, Clone)]
struct Reset {
    sql: String,
}

impl Reset {
    /// Reads the schema of `db` (as its owner) and writes the reset
    /// statement; `None` when a table holds rows straight after migrating
    /// (data the migrations put there, which a reset would lose).
    async fn for_schema(owner: &PgPool, require_empty: bool) -> Result<Option<Reset>, sqlx::Error> {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
               AND c.relname <> '_sqlx_migrations' ORDER BY 1",
        )
        .fetch_all(owner)
        .await?;
        for table in tables.iter().filter(|_| require_empty) {
            let filled: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT EXISTS (SELECT 1 FROM {table})"
            )))
            .fetch_one(owner)
            .await?;
            if filled {
                tracing::info!(
                    "{table} holds rows after migrating: each scenario gets a new database"
                );
                return Ok(None);
            }
        }
        let sequences: Vec<String> = sqlx::query_scalar(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind = 'S' ORDER BY 1",
        )
        .fetch_all(owner)
        .await?;
        // Tables with a user trigger that fires on DELETE (bit 3 of tgtype):
        // the append-only guards, which refuse the empty-out itself.
        let guarded: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT format('%I.%I', n.nspname, c.relname) FROM pg_trigger t \
             JOIN pg_class c ON c.oid = t.tgrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND NOT t.tgisinternal \
               AND (t.tgtype & 8) <> 0 ORDER BY 1",
        )
        .fetch_all(owner)
        .await?;
        // Every foreign key between two different tables: (referencing, referenced).
        let references: Vec<(String, String)> = sqlx::query_as(
            "SELECT format('%I.%I', cn.nspname, c.relname), format('%I.%I', fn.nspname, f.relname) \
             FROM pg_constraint k \
             JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace \
             JOIN pg_class f ON f.oid = k.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace \
             WHERE k.contype = 'f' AND k.conrelid <> k.confrelid ORDER BY 1, 2",
        )
        .fetch_all(owner)
        .await?;
        let Some(order) = referencing_first(&tables, &references) else {
            tracing::info!("the foreign keys form a cycle: each scenario gets a new database");
            return Ok(None);
        };
        Ok(Some(Reset {
            sql: reset_sql(&order, &guarded, &sequences),
        }))
    }
}

/// The statement that empties the tables `order` lists (referencing tables
/// before the tables they reference, so every foreign key holds after each
/// DELETE), with the DELETE guards of `guarded` off only inside its one
/// transaction, and every sequence restarted.
///
/// Why DELETE and not TRUNCATE: a TRUNCATE gives each table and index a new
/// file; for these small tables it cost 40 to 63 ms where the DELETEs cost
/// 1.5 ms (pgbench over both statements on one throwaway server, 2026-12-02).
fn reset_sql(order: &[String], guarded: &[String], sequences: &[String]) -> String {
    let mut sql = String::from("BEGIN;\n");
    for table in guarded {
        sql.push_str(&format!("ALTER TABLE {table} DISABLE TRIGGER USER;\n"));
    }
    for table in order {
        sql.push_str(&format!("DELETE FROM {table};\n"));
    }
    for sequence in sequences {
        sql.push_str(&format!("ALTER SEQUENCE {sequence} RESTART;\n"));
    }
    for table in guarded {
        sql.push_str(&format!("ALTER TABLE {table} ENABLE TRIGGER USER;\n"));
    }
    sql.push_str("COMMIT;\n");
    sql
}

/// `tables` ordered so that every table comes before each table it
/// references (`references` holds (referencing, referenced) pairs); `None`
/// when the references form a cycle. Ties keep the order of `tables`.
fn referencing_first(tables: &[String], references: &[(String, String)]) -> Option<Vec<String>> {
    let mut left: Vec<&String> = tables.iter().collect();
    let mut order = Vec::with_capacity(tables.len());
    while !left.is_empty() {
        // A table nothing still left references can go now.
        let free = left.iter().position(|t| {
            !references
                .iter()
                .any(|(from, to)| to == *t && from != *t && left.contains(&from))
        })?;
        order.push(left.remove(free).clone());
    }
    Some(order)
}

/// Whether databases are reused, once the pool knows.
#[derive(Debug, Clone)]
enum Reuse {
    Unknown,
    Yes(Reset),
    No,
}

/// Databases for scenarios, reused after an empty-out when that is safe.
#[derive(Debug)]
pub struct DatabasePool {
    url: String,
    state: Mutex<(Reuse, Vec<FreshDatabase>)>,
}

/// How a leased database's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The run finished (passing or failing its expectations): reusable.
    Clean,
    /// An engine error, a panic or a timeout: its database is dropped.
    Broken,
}

impl DatabasePool {
    /// A pool on the server `url` names; it opens databases as they are asked for.
    pub fn new(url: &str) -> Self {
        DatabasePool {
            url: url.to_string(),
            state: Mutex::new((Reuse::Unknown, Vec::new())),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut (Reuse, Vec<FreshDatabase>)) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// An empty, migrated database for one scenario.
    pub async fn lease(&self) -> Result<FreshDatabase, DbError> {
        if let Some(db) = self.with(|s| s.1.pop()) {
            return Ok(db);
        }
        let db = fresh_database(&self.url).await?;
        if matches!(self.with(|s| s.0.clone()), Reuse::Unknown) {
            let reuse = match Reset::for_schema(db.owner_pool(), true).await {
                Ok(Some(reset)) => Reuse::Yes(reset),
                Ok(None) => Reuse::No,
                Err(e) => {
                    tracing::warn!(
                        "could not read the schema to reuse databases ({e}); each scenario gets a new one"
                    );
                    Reuse::No
                }
            };
            self.with(|s| s.0 = reuse);
        }
        Ok(db)
    }

    /// Takes a leased database back: emptied for the next scenario, or dropped.
    pub async fn give_back(&self, db: FreshDatabase, end: RunEnd) {
        let reset = match self.with(|s| s.0.clone()) {
            Reuse::Yes(reset) if end == RunEnd::Clean => reset,
            _ => return drop_now(db).await,
        };
        match sqlx::raw_sql(sqlx::AssertSqlSafe(reset.sql.as_str()))
            .execute(db.owner_pool())
            .await
        {
            Ok(_) => self.with(|s| s.1.push(db)),
            Err(e) => {
                tracing::warn!("could not empty database {} for reuse: {e}", db.name());
                drop_now(db).await;
            }
        }
    }

    /// Drops every database the pool holds.
    pub async fn close(&self) {
        let held = self.with(|s| std::mem::take(&mut s.1));
        for db in held {
            drop_now(db).await;
        }
    }
}

/// Empties `db` as a database handed back to the pool is emptied, and says
/// how long that statement took (reading the schema first is not counted).
/// For `harness perf`, which weighs it against a new database per scenario.
pub async fn time_reset(db: &FreshDatabase) -> Result<f64, String> {
    let reset = Reset::for_schema(db.owner_pool(), false)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the schema could not be read")?;
    let t = std::time::Instant::now();
    sqlx::raw_sql(sqlx::AssertSqlSafe(reset.sql.as_str()))
        .execute(db.owner_pool())
        .await
        .map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_secs_f64())
}

async fn drop_now(db: FreshDatabase) {
    let name = db.name().to_string();
    if let Err(e) = db.drop().await {
        tracing::warn!("could not drop scenario database {name}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn referencing_tables_are_emptied_before_what_they_reference() {
        let tables = names(&["tenants", "agents", "requests", "ledger"]);
        let refs = pairs(&[
            ("agents", "tenants"),
            ("requests", "agents"),
            ("requests", "tenants"),
            ("ledger", "requests"),
        ]);
        let order = referencing_first(&tables, &refs).expect("no cycle");
        assert_eq!(order, names(&["ledger", "requests", "agents", "tenants"]));
    }

    #[test]
    fn a_table_referencing_itself_is_no_cycle_and_unrelated_tables_keep_their_order() {
        let tables = names(&["b", "delegations", "a"]);
        let refs = pairs(&[("delegations", "delegations")]);
        assert_eq!(referencing_first(&tables, &refs), Some(tables.clone()));
    }

    #[test]
    fn a_cycle_between_tables_has_no_order() {
        let tables = names(&["a", "b", "c"]);
        let refs = pairs(&[("a", "b"), ("b", "a")]);
        assert_eq!(referencing_first(&tables, &refs), None);
    }

    #[test]
    fn the_reset_lifts_the_guards_only_inside_its_transaction() {
        let sql = reset_sql(
            &names(&["ledger", "tenants"]),
            &names(&["ledger"]),
            &names(&["seq"]),
        );
        let lines: Vec<&str> = sql.lines().collect();
        assert_eq!(
            lines,
            [
                "BEGIN;",
                "ALTER TABLE ledger DISABLE TRIGGER USER;",
                "DELETE FROM ledger;",
                "DELETE FROM tenants;",
                "ALTER SEQUENCE seq RESTART;",
                "ALTER TABLE ledger ENABLE TRIGGER USER;",
                "COMMIT;",
            ]
        );
    }
}
