//! Connecting to Postgres and migrating it, and the URL text both need.
//!
//! Guarantees:
//! - [`MIGRATOR`] embeds every file of `migrations/` at build time (the crate's
//!   build script rebuilds when that folder changes).
//! - [`pool_options`] is how every pool of the gate is built: `size`
//!   connections at most, [`CONNECT_TIMEOUT`] to get one, and no round trip
//!   before a connection is handed out (see its doc).
//! - [`connect`] returns a pool that has answered, or a [`DbError`] that says
//!   whether the server is down or unreachable ([`DbError::Unreachable`]) or was
//!   reached and refused us ([`DbError::Rejected`]). Every error names the URL
//!   with its password replaced by `***` ([`redact_url`]); none panics.
//! - [`migrate`] applies the migrations; a failure names the migration
//!   (version and description) in [`DbError::Migration`].
//! - [`with_user`] changes only the user of a URL (password, host, port,
//!   database and every parameter kept), and refuses a user that is not a
//!   plain role name.
//! - [`DATABASE_URL_ENV`] names the application's URL and
//!   [`MIGRATION_DATABASE_URL_ENV`] the owner's; which URL is which role's is
//!   worked out by [`super::server_urls`].

use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use drop_guards::is_sql_name;

use super::error::{DbError, connect_error};

/// Every migration of `migrations/`, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// The variable naming the application's URL (the role the gate connects as).
pub const DATABASE_URL_ENV: &str = "DATABASE_URL";
/// The variable naming the owner's URL (the role the migrations run as).
pub const MIGRATION_DATABASE_URL_ENV: &str = "MIGRATION_DATABASE_URL";
/// The variable naming the onboarding role's URL (tenants, keys, root
/// delegations).
pub const ONBOARD_DATABASE_URL_ENV: &str = "ONBOARD_DATABASE_URL";

/// How long to wait for a connection before calling the server unreachable.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections per pool (room for concurrent scenario steps).
pub(super) const POOL_SIZE: u32 = 10;

/// Replaces the password of a Postgres URL (userinfo or `password=` parameter) with `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let start = scheme_end + 3;
        let end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@')
            && let Some(colon) = out[start..start + at].find(':')
        {
            out.replace_range(start + colon + 1..start + at, "***");
        }
    }
    if let Some(query_start) = out.find('?') {
        let (head, query) = out.split_at(query_start + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

/// Connects to `url` (up to 10 connections), or says clearly why not.
pub async fn connect(url: &str) -> Result<PgPool, DbError> {
    pool(parse(url)?, &redact_url(url), POOL_SIZE).await
}

/// Applies every pending migration of [`MIGRATOR`] to `pool`'s database.
pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await.map_err(migration_error)
}

/// `url` with its user replaced by `user` (a `user=` query parameter if the
/// URL has one, else the user of its userinfo, inserted if absent); the
/// password, host, port, database and every other parameter are kept.
pub fn with_user(url: &str, user: &str) -> Result<String, DbError> {
    let invalid = |why: &str| DbError::Roles {
        url: redact_url(url),
        message: format!("cannot derive a URL for {user}: {why}"),
    };
    if !is_sql_name(user) || user.contains('.') {
        return Err(invalid("not a plain role name"));
    }
    let scheme_end = url
        .find("://")
        .filter(|&i| matches!(&url[..i], "postgres" | "postgresql"))
        .ok_or_else(|| invalid("not a postgres:// or postgresql:// URL"))?;
    if let Some(query_start) = url.find('?') {
        let (head, query) = url.split_at(query_start + 1);
        let mut replaced = false;
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("user", _)) => {
                    replaced = true;
                    format!("user={user}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        if replaced {
            return Ok(format!("{head}{}", pairs.join("&")));
        }
    }
    let start = scheme_end + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let authority = &url[start..end];
    let rest = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let password = userinfo.find(':').map_or("", |colon| &userinfo[colon..]);
            format!("{user}{password}@{}", &authority[at + 1..])
        }
        None => format!("{user}@{authority}"),
    };
    Ok(format!("{}{rest}{}", &url[..start], &url[end..]))
}

/// `url` as connect options, or [`DbError::InvalidUrl`] naming it redacted.
pub(super) fn parse(url: &str) -> Result<PgConnectOptions, DbError> {
    url.parse().map_err(|cause| DbError::InvalidUrl {
        url: redact_url(url),
        cause,
    })
}

/// The options of a gate's pool of at most `size` connections.
///
/// sqlx sends a connection a Sync and waits for the server's answer when it
/// goes back to the pool (always), and by default again each time it is
/// handed out: one round trip more per operation, before its first
/// statement. Here it is not sent on the way out. A connection that died
/// while idle in the pool (a server restart, an idle timeout) fails its
/// `BEGIN` instead, which wrote nothing; it is closed on its way back, and
/// the gate begins its transaction again on another connection
/// (`Gate::begin`).
pub fn pool_options(size: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(size.max(1))
        .acquire_timeout(CONNECT_TIMEOUT)
        .test_before_acquire(false)
}

/// A pool of `size` connections that has answered, or why not (`shown` is
/// the redacted URL the error names).
pub(super) async fn pool(
    options: PgConnectOptions,
    shown: &str,
    size: u32,
) -> Result<PgPool, DbError> {
    pool_options(size)
        .connect_with(options)
        .await
        .map_err(|cause| connect_error(shown, cause))
}

fn migration_error(cause: MigrateError) -> DbError {
    let version = match &cause {
        MigrateError::ExecuteMigration(_, v)
        | MigrateError::VersionMissing(v)
        | MigrateError::VersionMismatch(v)
        | MigrateError::VersionNotPresent(v)
        | MigrateError::Dirty(v) => *v,
        _ => return DbError::Migrate { cause },
    };
    let description = MIGRATOR.iter().find(|m| m.version == version).map_or_else(
        || "not in this build".to_owned(),
        |m| m.description.to_string(),
    );
    DbError::Migration {
        version,
        description,
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_pool_has_its_size_the_connect_timeout_and_no_round_trip_before_handing_out() {
        let options = pool_options(3);
        assert_eq!(options.get_max_connections(), 3);
        assert_eq!(options.get_acquire_timeout(), CONNECT_TIMEOUT);
        assert!(!options.get_test_before_acquire());
        // A pool of no connections would wait forever: it has one.
        assert_eq!(pool_options(0).get_max_connections(), 1);
    }

    #[test]
    fn redact_hides_userinfo_and_query_passwords() {
        assert_eq!(
            redact_url("postgres://app:s3cr@t@db.example:5432/x"),
            "postgres://app:***@db.example:5432/x"
        );
        assert_eq!(
            redact_url("postgresql://postgres@%2Ftmp%2Fpg:5432/postgres"),
            "postgresql://postgres@%2Ftmp%2Fpg:5432/postgres"
        );
        assert_eq!(
            redact_url("postgres:///db?host=/tmp&password=hunter2&user=u"),
            "postgres:///db?host=/tmp&password=***&user=u"
        );
    }

    #[test]
    fn with_user_changes_the_user_and_nothing_else() {
        let ok = |url: &str, user: &str| with_user(url, user).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            ok(
                "postgresql://postgres@%2Ftmp%2Fpg:5432/postgres",
                "spendgate_app"
            ),
            "postgresql://spendgate_app@%2Ftmp%2Fpg:5432/postgres"
        );
        assert_eq!(
            ok(
                "postgres://postgres:sp%40nd@localhost:5432/postgres?sslmode=disable",
                "spendgate_owner"
            ),
            "postgres://spendgate_owner:sp%40nd@localhost:5432/postgres?sslmode=disable"
        );
        assert_eq!(
            ok("postgres://localhost/db", "spendgate_app"),
            "postgres://spendgate_app@localhost/db"
        );
        assert_eq!(
            ok(
                "postgres:///db?host=/tmp&user=postgres&password=x",
                "spendgate_app"
            ),
            "postgres:///db?host=/tmp&user=spendgate_app&password=x"
        );
        for (url, user) in [
            ("mysql://root@localhost/db", "spendgate_app"),
            ("not a url", "spendgate_app"),
            ("postgres://localhost/db", "app; DROP ROLE x"),
            ("postgres://localhost/db", "a.b"),
        ] {
            assert!(
                matches!(with_user(url, user), Err(DbError::Roles { .. })),
                "{url} / {user}"
            );
        }
    }
}
