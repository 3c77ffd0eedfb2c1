//! The mutation runner's drop-guards hook: a fresh test database can be
//! handed out without some of its schema guards.
//!
//! Guarantees (the contract is the `drop-guards` crate, the one codec the
//! runner and this module share):
//! - when `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,...]` is set (KIND is
//!   `constraint`, `trigger`, `index`, `policy` or `privilege`),
//!   [`drop_guards()`] drops each named object from the database of the pool
//!   it is given (the factory gives it the NEW database's owner pool, never
//!   the template's: dropping a constraint or trigger, or granting a
//!   privilege on a table, needs ownership), with `ALTER TABLE t DROP
//!   CONSTRAINT n`, `DROP TRIGGER n ON t`, `DROP INDEX n`, `DROP POLICY n ON
//!   t`, or `GRANT P ON TABLE t TO spendgate_app` ([`APP_ROLE`], the role the
//!   gate connects as: a withheld privilege is a guard, and dropping it
//!   grants it). There is no `IF EXISTS`: a name the migrations do not create
//!   is an error.
//! - Each object dropped appends `dropped KIND:TABLE:NAME` to the file
//!   `SPENDGATE_DROP_GUARDS_LOG` names; the first that cannot be dropped (or
//!   an item the codec refuses) appends `failed KIND:TABLE:NAME: <error>` and
//!   returns [`DbError::DropGuard`], so a guard that was not really dropped is
//!   never judged as if it were.
//! - Only the runner sets these variables, on the test processes that judge
//!   one schema guard. Nothing of a normal build calls this hook (not
//!   [`super::migrate`], not [`super::connect()`]): it is compiled only with the
//!   `test-support` feature, through [`super::fresh_database`].

use ::drop_guards::LogLine;
use sqlx::Executor;
use sqlx::postgres::PgPool;

use super::error::DbError;
use super::roles::APP_ROLE;

/// The mutation runner's list of schema objects a fresh database goes without.
pub use ::drop_guards::DROP_GUARDS_ENV;
/// The file the hook reports each drop to (see the module docs).
pub use ::drop_guards::DROP_GUARDS_LOG_ENV;

/// Appends one line to the runner's log (best effort: a log that cannot be
/// written leaves no `dropped` line, which the runner reports as an error).
fn log_line(log: Option<&std::path::Path>, line: &LogLine) {
    if let Some(path) = log
        && let Err(e) = ::drop_guards::append_log(path, line)
    {
        eprintln!("warning: cannot append to {}: {e}", path.display());
    }
}

/// Logs `failed ITEM: MESSAGE` and returns it as [`DbError::DropGuard`].
fn failed(log: Option<&std::path::Path>, item: String, message: String) -> DbError {
    let message = message.replace('\n', " ");
    log_line(
        log,
        &LogLine::Failed {
            item: item.clone(),
            message: message.clone(),
        },
    );
    DbError::DropGuard {
        spec: item,
        message,
    }
}

/// Drops every object `wanted` names from the database of `pool`, logging
/// each. `wanted` is decoded by the contract's one codec (`drop_guards`): an
/// item it refuses is logged and returned as [`DbError::DropGuard`].
pub(super) async fn drop_guards(
    pool: &PgPool,
    wanted: &str,
    log: Option<&std::path::Path>,
) -> Result<(), DbError> {
    let specs = ::drop_guards::decode(wanted)
        .map_err(|(item, refusal)| failed(log, item, refusal.to_string()))?;
    for spec in specs {
        let sql = spec
            .sql(APP_ROLE)
            .map_err(|refusal| failed(log, spec.to_string(), refusal.to_string()))?;
        match pool.execute(sqlx::AssertSqlSafe(sql)).await {
            Ok(_) => log_line(log, &LogLine::Dropped(spec)),
            Err(cause) => return Err(failed(log, spec.to_string(), cause.to_string())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drop hook against a real database: each object goes, each drop is
    /// logged, and a name the migrations do not create is a logged error.
    #[tokio::test]
    async fn the_drop_hook_drops_logs_and_fails_loudly() -> Result<(), Box<dyn std::error::Error>> {
        let Some(db) = super::super::fresh_test_database().await? else {
            return Ok(());
        };
        let log = std::env::temp_dir().join(format!(
            "spendgate-drop-hook-{}-{}.log",
            std::process::id(),
            db.name()
        ));
        let may_update = "SELECT has_table_privilege($1, 'public.ledger_entries', 'UPDATE')";
        let before: bool = sqlx::query_scalar(may_update)
            .bind(APP_ROLE)
            .fetch_one(db.owner_pool())
            .await?;
        assert!(!before, "the runtime role may not UPDATE the ledger");
        let wanted = "constraint:tenants:ck_tenants_id_not_blank,trigger:ledger_entries:ledger_append_only,privilege:ledger_entries:UPDATE";
        drop_guards(db.owner_pool(), wanted, Some(&log)).await?;
        sqlx::query("INSERT INTO tenants (id) VALUES ('  ')")
            .execute(db.owner_pool())
            .await?;
        sqlx::query("DELETE FROM ledger_entries")
            .execute(db.owner_pool())
            .await?;
        // The privilege went to the runtime role: its own login may now
        // UPDATE the ledger (no row left to change, so none changes).
        let after: bool = sqlx::query_scalar(may_update)
            .bind(APP_ROLE)
            .fetch_one(db.owner_pool())
            .await?;
        assert!(after, "the runtime role was granted UPDATE on the ledger");
        sqlx::query("UPDATE ledger_entries SET kind = kind")
            .execute(db.pool())
            .await?;
        let missing = drop_guards(
            db.owner_pool(),
            "index:approvals:uq_no_such_index",
            Some(&log),
        )
        .await;
        assert!(
            matches!(&missing, Err(DbError::DropGuard { spec, .. }) if spec == "index:approvals:uq_no_such_index"),
            "{missing:?}"
        );
        let text = std::fs::read_to_string(&log)?;
        std::fs::remove_file(&log)?;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(
            lines[0],
            "dropped constraint:tenants:ck_tenants_id_not_blank"
        );
        assert_eq!(
            lines[1],
            "dropped trigger:ledger_entries:ledger_append_only"
        );
        assert_eq!(lines[2], "dropped privilege:ledger_entries:UPDATE");
        assert!(
            lines[3].starts_with("failed index:approvals:uq_no_such_index: "),
            "{text}"
        );
        db.drop().await?;
        Ok(())
    }
}
