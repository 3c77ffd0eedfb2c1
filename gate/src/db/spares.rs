//! Spare databases: a test database handed back clean is emptied and kept
//! on the server for the next test, of any process, instead of being
//! dropped and made again (`CREATE DATABASE .. TEMPLATE` costs 30 to 150 ms
//! on these machines, emptying one a few). Compiled only with the
//! `test-support` feature.
//!
//! Guarantees:
//! - A spare is named `spendgate_spare_<key>_<8 hex>_<8 hex>`, `<key>`
//!   naming the template (and so the migration set) it was cloned from and
//!   the build that shelved it (`factory`), then the second it was shelved
//!   and 32 random bits; only a database of that template, handed back by
//!   that build, is ever claimed as one.
//! - Spares do not pile up on a server that outlives its test runs (a
//!   developer's): every [`shelve`] first drops the spares, and the hidden
//!   databases of processes that died half-way, that are older than
//!   [`SPARE_LIFETIME`], of any template and build.
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
pub(super) const MAX_SPARES: i64 = 32;

/// A spare (or a hidden database) older than this is dropped by the next
/// [`shelve`] on its server: its build is most likely gone.
pub const SPARE_LIFETIME: Duration = Duration::from_secs(3600);

/// How long [`shelve`] waits for sessions that just closed to leave.
const LEAVING_PATIENCE: Duration = Duration::from_millis(250);

/// Postgres SQLSTATE `object_in_use`: the database (or a template being
/// cloned) has other sessions.
pub(super) const OBJECT_IN_USE: &str = "55006";

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

/// Seconds since the Unix epoch, as spare names carry them.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `<prefix><key>_<seconds, 8 hex>_<8 random hex>`; `None` when the
/// system has no randomness to give.
fn dated_name(prefix: &str, key: &str, secs: u64) -> Option<String> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).ok()?;
    Some(format!("{prefix}{key}_{secs:08x}_{}", hex::encode(bytes)))
}

/// The second a spare or hidden database was named in, read back from its
/// name; `None` for any other name.
fn named_at(name: &str) -> Option<u64> {
    if !(name.starts_with(SPARE_PREFIX) || name.starts_with(HIDDEN_PREFIX)) {
        return None;
    }
    let mut parts = name.rsplit('_');
    let (random, secs) = (parts.next()?, parts.next()?);
    let hex8 = |s: &str| s.len() == 8 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !(hex8(random) && hex8(secs)) {
        return None;
    }
    u64::from_str_radix(secs, 16).ok()
}

/// Of `names`, the spares and hidden databases named more than
/// [`SPARE_LIFETIME`] before `now`.
fn expired(names: &[String], now: u64) -> Vec<&str> {
    names
        .iter()
        .filter(|n| named_at(n).is_some_and(|t| t.saturating_add(SPARE_LIFETIME.as_secs()) < now))
        .map(String::as_str)
        .collect()
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
    let listed: Result<Vec<String>, _> = sqlx::query_scalar(
        "SELECT datname::text FROM pg_database \
         WHERE starts_with(datname, $1) OR starts_with(datname, $2)",
    )
    .bind(SPARE_PREFIX)
    .bind(HIDDEN_PREFIX)
    .fetch_all(&mut *admin)
    .await;
    let Ok(listed) = listed else {
        return Shelf::NotKept(name.to_string());
    };
    let now = now_secs();
    for old in expired(&listed, now) {
        let sql = format!("DROP DATABASE IF EXISTS {}", quote_ident(old));
        if let Err(e) = admin.execute(sqlx::AssertSqlSafe(sql)).await {
            tracing::debug!("could not drop the expired spare {old}: {e}");
        }
    }
    let ours = format!("{SPARE_PREFIX}{key}_");
    let held = listed.iter().filter(|n| n.starts_with(&ours)).count();
    if i64::try_from(held).map_or(true, |n| n >= MAX_SPARES) {
        return Shelf::NotKept(name.to_string());
    }
    let (Some(hidden), Some(spare)) = (
        dated_name(HIDDEN_PREFIX, key, now),
        dated_name(SPARE_PREFIX, key, now),
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
    let pause = Duration::from_millis(5);
    match execute_when_alone(admin, &sql, LEAVING_PATIENCE, pause).await {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("could not rename database {from}: {e}");
            false
        }
    }
}

/// Runs `sql` (a statement that needs a database nobody else is in), trying
/// again every `pause` while Postgres answers `object_in_use` (SQLSTATE
/// 55006), until `patience` has passed; then, or on any other error, the
/// error.
pub(super) async fn execute_when_alone(
    conn: &mut PgConnection,
    sql: &str,
    patience: Duration,
    pause: Duration,
) -> Result<(), sqlx::Error> {
    let deadline = Instant::now() + patience;
    loop {
        match conn.execute(sqlx::AssertSqlSafe(sql)).await {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some(OBJECT_IN_USE) && Instant::now() < deadline =>
            {
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_names_match_their_template_pattern_only() {
        let name = dated_name(SPARE_PREFIX, "a1ac56fef12a", 0x6750_0000).unwrap_or_default();
        assert_eq!(name.len(), "spendgate_spare_a1ac56fef12a_".len() + 17);
        assert!(name.len() < 64, "Postgres truncates names at 63 bytes");
        assert_eq!(
            pattern("a1ac56fef12a"),
            "spendgate\\_spare\\_a1ac56fef12a\\_%"
        );
        assert_ne!(
            dated_name(SPARE_PREFIX, "k", 1),
            dated_name(SPARE_PREFIX, "k", 1)
        );
    }

    #[test]
    fn spares_and_hidden_databases_expire_after_their_lifetime_and_nothing_else_does() {
        let life = SPARE_LIFETIME.as_secs();
        let now = 0x6800_0000;
        let named = |prefix: &str, secs: u64| dated_name(prefix, "abc_1234abcd", secs);
        let names: Vec<String> = [
            named(SPARE_PREFIX, now - life - 1),
            named(HIDDEN_PREFIX, now - life - 60),
            named(SPARE_PREFIX, now - life),
            named(SPARE_PREFIX, now),
            Some(format!("spendgate_t_1_2_{:08x}_{:08x}", now - 2 * life, 0)),
            Some("spendgate_spare_short_1_2".to_string()),
        ]
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(names.len(), 6);
        assert_eq!(named_at(&names[0]), Some(now - life - 1));
        assert_eq!(expired(&names, now), [names[0].as_str(), names[1].as_str()]);
        assert_eq!(named_at("spendgate_spare_x_zzzzzzzz_00000000"), None);
    }

    /// On the server: a shelve drops an expired spare of another key, keeps
    /// a fresh one of another key, and shelves its own database (a reset
    /// that only opens and commits a transaction, on a database cloned from
    /// template0).
    #[tokio::test]
    async fn a_shelve_sweeps_expired_spares_of_any_key_and_keeps_fresh_ones()
    -> Result<(), Box<dyn std::error::Error>> {
        let Some(url) = crate::db::test_admin_url()? else {
            return Ok(());
        };
        let server = crate::db::server_urls(&url).await?.owner;
        let mut admin = PgConnection::connect_with(&super::super::connect::parse(&server)?).await?;
        let key = format!(
            "sweep{:08x}_00000000",
            now_secs() as u32 ^ std::process::id()
        );
        let other = format!("other{}", &key[5..]);
        let life = SPARE_LIFETIME.as_secs();
        let names = [
            dated_name(SPARE_PREFIX, &other, now_secs() - life - 5),
            dated_name(SPARE_PREFIX, &other, now_secs()),
            dated_name("spendgate_t_", &key, 0),
        ];
        let [Some(old), Some(fresh), Some(mine)] = names else {
            return Err("no randomness".into());
        };
        for name in [&old, &fresh, &mine] {
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "CREATE DATABASE {} TEMPLATE template0",
                    quote_ident(name)
                )))
                .await?;
        }
        let reset = Reset::from_sql("BEGIN;\nCOMMIT;\n").ok_or("a reset")?;
        let shelf = shelve(&server, &key, &reset, &mine).await;
        let left: Vec<String> = sqlx::query_scalar(
            "SELECT datname::text FROM pg_database \
             WHERE strpos(datname, $1) > 0 OR strpos(datname, $2) > 0 ORDER BY 1",
        )
        .bind(&key)
        .bind(&other)
        .fetch_all(&mut admin)
        .await?;
        for name in &left {
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {}",
                    quote_ident(name)
                )))
                .await?;
        }
        admin.close().await?;
        assert_eq!(shelf, Shelf::Kept);
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.contains(&fresh), "{left:?}");
        assert!(
            left.iter()
                .any(|n| n.starts_with(&format!("{SPARE_PREFIX}{key}_"))),
            "{left:?}"
        );
        Ok(())
    }

    #[test]
    fn identifiers_are_quoted_with_their_quotes_doubled() {
        assert_eq!(quote_ident("plain"), "\"plain\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
