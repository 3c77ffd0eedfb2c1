//! Spare databases: a test database handed back clean is emptied and kept
//! on the server for the next test, of any process, instead of being
//! dropped and made again (`CREATE DATABASE .. TEMPLATE` costs 30 to 150 ms
//! on these machines, emptying one a few). Compiled only with the
//! `test-support` feature.
//!
//! Guarantees:
//! - A spare is named `spendgate_spare_<key>_<16 hex>`, `<key>` naming the
//!   template (and so the migration set) it was cloned from and the build
//!   that shelved it (`factory`); only a database of that template, handed
//!   back by that build, is ever claimed as one.
//! - [`claim`] takes a spare by renaming it to the caller's new name. The
//!   rename is the claim: of two processes racing for one spare, one
//!   renames it and the other finds it gone and tries the next (or makes a
//!   new database). Nobody is connected to a spare, so a claimed one is
//!   exactly as its last [`shelve`] left it.
//! - [`shelve`] first renames the database to a hidden name, which succeeds
//!   only when no session is connected (sessions that just closed get a
//!   moment to leave). From then on nobody else can reach it, so no late
//!   write lands after the reset. It then runs the template's reset script
//!   (`super::reset`) on a connection of its own and renames the database
//!   to a spare name. Whatever fails on the way (a session that stays, a
//!   reset that refuses, more than [`MAX_SPARES`] spares already) leaves
//!   the database unshelved under the name [`Shelf::NotKept`] gives, for
//!   the caller to drop: a database is never kept unless its reset
//!   committed.

use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{Connection, Executor, PgConnection};

use super::error::query_error;
use super::reset::Reset;
use super::{DbError, redact_url};

/// A spare's name starts with this, then the template's key.
const SPARE_PREFIX: &str = "spendgate_spare_";

/// A database being emptied for the shelf is hidden under this prefix.
const HIDDEN_PREFIX: &str = "spendgate_reset_";

/// At most this many spares of one template stay on a server; a database
/// handed back beyond that is dropped.
pub const MAX_SPARES: i64 = 32;

/// How long [`shelve`] waits for sessions that just closed to leave.
const LEAVING_PATIENCE: Duration = Duration::from_millis(250);

/// Postgres SQLSTATE `object_in_use`: the database has other sessions.
const OBJECT_IN_USE: &str = "55006";

/// Postgres SQLSTATE `invalid_catalog_name`: no such database (any more).
const NO_SUCH_DATABASE: &str = "3D000";

/// What [`shelve`] did with a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shelf {
    /// Emptied and kept as a spare.
    Kept,
    /// Not kept: the database is still there under this name, to be dropped.
    NotKept(String),
}

/// A database or role name quoted as an SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The `LIKE` pattern of the spares of `key` (underscores escaped).
fn pattern(key: &str) -> String {
    format!("{}%", format!("{SPARE_PREFIX}{key}_").replace('_', "\\_"))
}

/// `<prefix><key>_<16 random hex>`; `None` when the system has no randomness to give.
fn random_name(prefix: &str, key: &str) -> Option<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).ok()?;
    Some(format!("{prefix}{key}_{}", hex::encode(bytes)))
}

/// Renames a spare of `key` to `name`; `false` when there is none to take.
pub async fn claim(admin: &PgPool, key: &str, name: &str) -> Result<bool, DbError> {
    let spares: Vec<String> = sqlx::query_scalar(
        "SELECT datname::text FROM pg_database WHERE datname LIKE $1 ORDER BY random() LIMIT 4",
    )
    .bind(pattern(key))
    .fetch_all(admin)
    .await
    .map_err(query_error("listing spare databases"))?;
    for spare in spares {
        let sql = format!(
            "ALTER DATABASE {} RENAME TO {}",
            quote_ident(&spare),
            quote_ident(name)
        );
        match admin.execute(sqlx::AssertSqlSafe(sql)).await {
            Ok(_) => return Ok(true),
            // Another process took it first.
            Err(sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some(NO_SUCH_DATABASE | OBJECT_IN_USE)) => {}
            Err(cause) => {
                return Err(DbError::Query {
                    action: format!("claiming spare database {spare}"),
                    cause,
                });
            }
        }
    }
    Ok(false)
}

/// Empties `name` (a database of template `key` whose own pools are closed)
/// with `reset` and keeps it as a spare; see the module doc. `server` is
/// the owner's URL (any database of the server).
pub async fn shelve(server: &str, key: &str, reset: &Reset, name: &str) -> Shelf {
    let not_kept = || Shelf::NotKept(name.to_string());
    let Ok(options) = super::connect::parse(server) else {
        return not_kept();
    };
    let mut admin = match PgConnection::connect_with(&options).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::debug!(
                "not shelving {name}: {} unreachable: {e}",
                redact_url(server)
            );
            return not_kept();
        }
    };
    let shelf = shelve_with(&mut admin, &options, key, reset, name).await;
    let _ = admin.close().await;
    shelf
}

async fn shelve_with(
    admin: &mut PgConnection,
    options: &PgConnectOptions,
    key: &str,
    reset: &Reset,
    name: &str,
) -> Shelf {
    let held: Result<i64, _> =
        sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname LIKE $1")
            .bind(pattern(key))
            .fetch_one(&mut *admin)
            .await;
    if !held.is_ok_and(|n| n < MAX_SPARES) {
        return Shelf::NotKept(name.to_string());
    }
    let (Some(hidden), Some(spare)) = (
        random_name(HIDDEN_PREFIX, key),
        random_name(SPARE_PREFIX, key),
    ) else {
        return Shelf::NotKept(name.to_string());
    };
    if !rename_when_alone(admin, name, &hidden).await {
        return Shelf::NotKept(name.to_string());
    }
    let emptied = async {
        let mut conn = PgConnection::connect_with(&options.clone().database(&hidden)).await?;
        let ran = reset.run(&mut conn).await;
        let closed = conn.close().await;
        ran.and(closed)
    }
    .await;
    if let Err(e) = emptied {
        tracing::debug!("not shelving {name}: its reset failed: {e}");
        return Shelf::NotKept(hidden);
    }
    if rename_when_alone(admin, &hidden, &spare).await {
        Shelf::Kept
    } else {
        Shelf::NotKept(hidden)
    }
}

/// Renames `from` to `to`, trying again for [`LEAVING_PATIENCE`] while
/// sessions that just closed are still leaving; `false` when it could not.
async fn rename_when_alone(admin: &mut PgConnection, from: &str, to: &str) -> bool {
    let sql = format!(
        "ALTER DATABASE {} RENAME TO {}",
        quote_ident(from),
        quote_ident(to)
    );
    let deadline = Instant::now() + LEAVING_PATIENCE;
    loop {
        match admin.execute(sqlx::AssertSqlSafe(sql.as_str())).await {
            Ok(_) => return true,
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some(OBJECT_IN_USE) && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => {
                tracing::debug!("could not rename database {from}: {e}");
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_names_match_their_template_pattern_only() {
        let name = random_name(SPARE_PREFIX, "a1ac56fef12a").unwrap_or_default();
        assert_eq!(name.len(), "spendgate_spare_a1ac56fef12a_".len() + 16);
        assert!(name.len() < 64, "Postgres truncates names at 63 bytes");
        assert_eq!(
            pattern("a1ac56fef12a"),
            "spendgate\\_spare\\_a1ac56fef12a\\_%"
        );
        assert_ne!(
            random_name(SPARE_PREFIX, "k"),
            random_name(SPARE_PREFIX, "k")
        );
    }

    #[test]
    fn identifiers_are_quoted_with_their_quotes_doubled() {
        assert_eq!(quote_ident("plain"), "\"plain\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
