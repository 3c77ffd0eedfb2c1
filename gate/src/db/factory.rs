//! The test-database factory: fresh, migrated databases of their own, for
//! tests and the benchmark. Compiled only with the `test-support` feature.
//!
//! Guarantees:
//! - [`fresh_database`] hands out a new, uniquely named, fully migrated
//!   database cloned from a template (`CREATE DATABASE .. TEMPLATE ..`), all
//!   of it done as the owner, so the owner owns the database and everything
//!   in it. Its [`FreshDatabase::pool`] connects as the APPLICATION role (what
//!   the gate and every gate test use); [`FreshDatabase::owner_pool`] connects
//!   as the owner, for the few tests that must act as the owner (a guard
//!   violated by a statement the application may not even issue) and for the
//!   mutation runner's drops. The template is named after a hash of the
//!   migrations (`spendgate_tpl_<12 hex>`, see [`template_name`]), built at
//!   most once per migration set even when many test processes race for it
//!   (a Postgres advisory lock), and marked as a template only after every
//!   migration applied; a half-built one is dropped and rebuilt. Nobody may
//!   connect to it, so cloning never finds it busy (if it does, the clone
//!   is tried again for `BUSY_TEMPLATE_PATIENCE`, then fails with the
//!   busy error).
//! - When the mutation runner asks for it (`SPENDGATE_DROP_GUARDS`, see
//!   `super::drop_guards`), [`fresh_database`] drops the named schema guards
//!   from the NEW database before handing it out, and fails rather than hand
//!   out a database that still has one. [`empty_database`] ignores the
//!   request.
//! - [`FreshDatabase::drop`] removes the database (`DROP DATABASE .. WITH
//!   (FORCE)`, Postgres 13 or later, as the owner: the owner is a member of
//!   the application role, which lets it end the application's sessions). A
//!   `FreshDatabase` that goes out of scope without it (a test that panicked)
//!   is dropped on a helper thread, best effort.
//! - [`fresh_test_database`] reads `DATABASE_URL`, and when that is not set it
//!   fails with [`DbError::NotConfigured`] (a clear message, never a silent
//!   pass) unless `SPENDGATE_SKIP_DB=1`, in which case it says the test was
//!   skipped and returns `Ok(None)`.
//! - An [`empty_database`] (no migrations yet) is for testing the migrations,
//!   which run as the owner: both its pools connect as the owner.
//!
//! ```no_run
//! # async fn demo(admin_url: &str) -> Result<(), gate::db::DbError> {
//! // admin_url: DATABASE_URL (with MIGRATION_DATABASE_URL set, or an administrator's).
//! let db = gate::db::fresh_database(admin_url).await?;
//! let pool = db.pool();
//! sqlx::query("INSERT INTO tenants (id) VALUES ('acme')")
//!     .execute(pool)
//!     .await
//!     .ok();
//! db.drop().await?;
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres};

use super::connect::{
    CONNECT_TIMEOUT, DATABASE_URL_ENV, MIGRATOR, POOL_SIZE, migrate, parse, pool, redact_url,
};
use super::drop_guards::{DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, drop_guards};
use super::error::{DbError, connect_error, query_error};
use super::roles::{ServerUrls, server_urls};

/// Set to `1` to skip database tests when `DATABASE_URL` is not set.
pub const SKIP_ENV: &str = "SPENDGATE_SKIP_DB";

/// Postgres SQLSTATE `object_in_use`: the template is being accessed.
const OBJECT_IN_USE: &str = "55006";

/// How long a clone keeps trying, in all, while its template is busy.
/// Postgres itself waits about 5 s for the template's other sessions to go
/// before it answers `object_in_use`, so this is two or three attempts.
const BUSY_TEMPLATE_PATIENCE: Duration = Duration::from_secs(10);

/// A database of its own, migrated, dropped by [`FreshDatabase::drop`].
pub struct FreshDatabase {
    name: String,
    /// The owner's URL (any database of the server): the drop connects there.
    owner_url: String,
    options: PgConnectOptions,
    owner_options: PgConnectOptions,
    pool: PgPool,
    owner_pool: PgPool,
    dropped: bool,
}

impl FreshDatabase {
    /// A pool of up to 10 connections to this database as the APPLICATION
    /// role (for an [`empty_database`], as the owner).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A pool of up to 10 connections to this database as the OWNER role,
    /// which may do what the application may not (DDL, any UPDATE or DELETE).
    /// It connects on first use.
    pub fn owner_pool(&self) -> &PgPool {
        &self.owner_pool
    }

    /// The database's name (`spendgate_t_<pid>_<n>_<hex>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How to connect to this database as [`FreshDatabase::pool`] does, for a
    /// second pool or a single connection.
    pub fn connect_options(&self) -> &PgConnectOptions {
        &self.options
    }

    /// How to connect to this database as the owner.
    pub fn owner_connect_options(&self) -> &PgConnectOptions {
        &self.owner_options
    }

    /// Closes the pools and drops the database, terminating any other session on it.
    pub async fn drop(mut self) -> Result<(), DbError> {
        self.dropped = true;
        self.pool.close().await;
        self.owner_pool.close().await;
        drop_database(&self.owner_url, &self.name).await
    }
}

/// Names the database only: the connect options would show the password.
impl std::fmt::Debug for FreshDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshDatabase")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let (owner_url, name) = (self.owner_url.clone(), self.name.clone());
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(drop_database(&owner_url, &name))
                .map_err(|e| e.to_string())
        })
        .join();
        if let Ok(Err(message)) = outcome {
            eprintln!("warning: could not drop database {}: {message}", self.name);
        }
    }
}

/// A new database cloned from the migrated template of this build (created
/// first if needed), on the server of `url` ([`server_urls`] says which roles).
pub async fn fresh_database(url: &str) -> Result<FreshDatabase, DbError> {
    fresh_database_with(&server_urls(url).await?).await
}

/// [`fresh_database`] with both URLs given.
pub async fn fresh_database_with(urls: &ServerUrls) -> Result<FreshDatabase, DbError> {
    let owner_options = parse(&urls.owner)?;
    let app_options = parse(&urls.app)?;
    let shown = redact_url(&urls.owner);
    let owner = pool(owner_options.clone(), &shown, 2).await?;
    let created = async {
        let template = ensure_template(&owner, &owner_options, &shown).await?;
        create_database(&owner, Some(&template)).await
    }
    .await;
    owner.close().await;
    let db = open(urls, &app_options, &owner_options, created?).await?;
    let wanted = std::env::var(DROP_GUARDS_ENV).unwrap_or_default();
    if wanted.trim().is_empty() {
        return Ok(db);
    }
    let log = std::env::var_os(DROP_GUARDS_LOG_ENV).map(std::path::PathBuf::from);
    match drop_guards(db.owner_pool(), &wanted, log.as_deref()).await {
        Ok(()) => Ok(db),
        Err(e) => {
            // Best effort: the drop failure is the error worth reporting.
            let _ = db.drop().await;
            Err(e)
        }
    }
}

/// A new database with no migrations applied (cloned from `template0`), for
/// testing migrations: made by, owned by and connected as the owner (both
/// pools), since the migrations run as the owner.
pub async fn empty_database(url: &str) -> Result<FreshDatabase, DbError> {
    let urls = server_urls(url).await?;
    let owner_options = parse(&urls.owner)?;
    let owner = pool(owner_options.clone(), &redact_url(&urls.owner), 1).await?;
    let created = create_database(&owner, None).await;
    owner.close().await;
    let urls = ServerUrls {
        app: urls.owner.clone(),
        owner: urls.owner,
    };
    open(&urls, &owner_options, &owner_options, created?).await
}

/// The URL for database tests: `DATABASE_URL` (the application's, with
/// `MIGRATION_DATABASE_URL` the owner's; or an administrator's alone, see
/// [`server_urls`]); `Ok(None)` (after saying the test is skipped) when it is
/// unset and `SPENDGATE_SKIP_DB=1`; otherwise [`DbError::NotConfigured`].
pub fn test_admin_url() -> Result<Option<String>, DbError> {
    resolve_test_url(
        std::env::var(DATABASE_URL_ENV).ok(),
        std::env::var(SKIP_ENV).ok(),
    )
}

/// [`fresh_database`] on [`test_admin_url`]: `Ok(None)` means "skipped".
pub async fn fresh_test_database() -> Result<Option<FreshDatabase>, DbError> {
    match test_admin_url()? {
        Some(url) => fresh_database(&url).await.map(Some),
        None => Ok(None),
    }
}

fn resolve_test_url(
    database_url: Option<String>,
    skip: Option<String>,
) -> Result<Option<String>, DbError> {
    match database_url {
        Some(url) if !url.trim().is_empty() => Ok(Some(url)),
        _ if skip.as_deref().map(str::trim) == Some("1") => {
            let test = std::thread::current()
                .name()
                .unwrap_or("this test")
                .to_owned();
            eprintln!("skipped {test}: DATABASE_URL is not set and {SKIP_ENV}=1");
            Ok(None)
        }
        _ => Err(DbError::NotConfigured),
    }
}

/// The template database for this build's migrations: `spendgate_tpl_<12 hex>`,
/// the hex taken from a SHA-256 over every migration's version, description and checksum.
pub fn template_name() -> String {
    format!("spendgate_tpl_{}", &hex::encode(migrations_digest())[..12])
}

fn migrations_digest() -> [u8; 32] {
    let mut hash = Sha256::new();
    for m in MIGRATOR.iter() {
        hash.update(m.version.to_be_bytes());
        hash.update(m.description.as_bytes());
        hash.update(&*m.checksum);
    }
    hash.finalize().into()
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Makes sure the migrated template of this build exists; returns its name.
async fn ensure_template(
    admin: &PgPool,
    admin_options: &PgConnectOptions,
    shown: &str,
) -> Result<String, DbError> {
    let name = template_name();
    ensure_template_named(admin, admin_options, shown, &name).await?;
    Ok(name)
}

/// Makes sure a migrated template called `name` exists, building it when it
/// does not under an advisory lock keyed by the name (so that racing test
/// processes build it once).
async fn ensure_template_named(
    admin: &PgPool,
    admin_options: &PgConnectOptions,
    shown: &str,
    name: &str,
) -> Result<(), DbError> {
    if template_state(admin, name).await? == Some(true) {
        return Ok(());
    }
    let digest = Sha256::digest(name.as_bytes());
    let mut key = [0u8; 8];
    key.copy_from_slice(&digest[..8]);
    let key = i64::from_be_bytes(key);
    let mut conn = admin
        .acquire()
        .await
        .map_err(|cause| connect_error(shown, cause))?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key)
        .execute(&mut *conn)
        .await
        .map_err(query_error("taking the template lock"))?;
    let built = build_template(&mut conn, admin_options, name, shown).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .execute(&mut *conn)
        .await
        .map_err(query_error("releasing the template lock"));
    built?;
    unlocked?;
    Ok(())
}

/// `Some(is_template)` when a database of that name exists.
async fn template_state<'c>(
    executor: impl Executor<'c, Database = Postgres>,
    name: &str,
) -> Result<Option<bool>, DbError> {
    sqlx::query_scalar("SELECT datistemplate FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(executor)
        .await
        .map_err(query_error(format!("looking up template {name}")))
}

/// Builds the template; the caller holds the advisory lock.
async fn build_template(
    conn: &mut PgConnection,
    admin_options: &PgConnectOptions,
    name: &str,
    shown: &str,
) -> Result<(), DbError> {
    let quoted = quote_ident(name);
    match template_state(&mut *conn, name).await? {
        Some(true) => return Ok(()),
        // A builder died half-way: start again.
        Some(false) => drop_with(conn, name).await?,
        None => {}
    }
    conn.execute(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE {quoted} TEMPLATE template0"
    )))
    .await
    .map_err(query_error(format!("creating template {name}")))?;
    let template = pool(
        admin_options.clone().database(name),
        &format!("{shown} (database {name})"),
        1,
    )
    .await?;
    let migrated = migrate(&template).await;
    template.close().await;
    if let Err(e) = migrated {
        drop_with(conn, name).await?;
        return Err(e);
    }
    conn.execute(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE {quoted} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
    )))
    .await
    .map_err(query_error(format!("marking {name} as a template")))?;
    Ok(())
}

/// Creates a uniquely named database from `template` (or `template0`) and returns its name.
async fn create_database(admin: &PgPool, template: Option<&str>) -> Result<String, DbError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "spendgate_t_{}_{}_{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let template = template.unwrap_or("template0");
    let sql = format!(
        "CREATE DATABASE {} TEMPLATE {}",
        quote_ident(&name),
        quote_ident(template)
    );
    let deadline = Instant::now() + BUSY_TEMPLATE_PATIENCE;
    loop {
        match admin.execute(sqlx::AssertSqlSafe(sql.as_str())).await {
            Ok(_) => return Ok(name),
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some(OBJECT_IN_USE) && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(cause) => {
                return Err(DbError::Query {
                    action: format!("creating database {name} from {template}"),
                    cause,
                });
            }
        }
    }
}

async fn open(
    urls: &ServerUrls,
    app_options: &PgConnectOptions,
    owner_options: &PgConnectOptions,
    name: String,
) -> Result<FreshDatabase, DbError> {
    let options = app_options.clone().database(&name);
    let owner_options = owner_options.clone().database(&name);
    let shown = format!("{} (database {name})", redact_url(&urls.app));
    let opened = pool(options.clone(), &shown, POOL_SIZE).await;
    match opened {
        Ok(pool) => {
            let owner_pool = PgPoolOptions::new()
                .max_connections(POOL_SIZE)
                .acquire_timeout(CONNECT_TIMEOUT)
                .connect_lazy_with(owner_options.clone());
            Ok(FreshDatabase {
                name,
                owner_url: urls.owner.clone(),
                options,
                owner_options,
                pool,
                owner_pool,
                dropped: false,
            })
        }
        Err(e) => {
            // Best effort: the connection error is the one worth reporting.
            let _ = drop_database(&urls.owner, &name).await;
            Err(e)
        }
    }
}

async fn drop_database(admin_url: &str, name: &str) -> Result<(), DbError> {
    let mut conn = PgConnection::connect_with(&parse(admin_url)?)
        .await
        .map_err(|cause| connect_error(&redact_url(admin_url), cause))?;
    let dropped = drop_with(&mut conn, name).await;
    let _ = conn.close().await;
    dropped
}

async fn drop_with(conn: &mut PgConnection, name: &str) -> Result<(), DbError> {
    conn.execute(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        quote_ident(name)
    )))
    .await
    .map(drop)
    .map_err(query_error(format!("dropping database {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_name_is_stable_and_well_formed() {
        let name = template_name();
        assert_eq!(name, template_name());
        let hex = name
            .strip_prefix("spendgate_tpl_")
            .unwrap_or_else(|| panic!("unexpected template name {name}"));
        assert_eq!(hex.len(), 12);
        assert!(
            hex.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }

    #[test]
    fn test_url_requires_database_url_unless_skipped() {
        assert!(matches!(
            resolve_test_url(None, None),
            Err(DbError::NotConfigured)
        ));
        assert!(matches!(
            resolve_test_url(Some("  ".into()), Some("0".into())),
            Err(DbError::NotConfigured)
        ));
        assert!(matches!(resolve_test_url(None, Some("1".into())), Ok(None)));
        assert_eq!(
            resolve_test_url(Some("postgres://x/y".into()), Some("1".into()))
                .ok()
                .flatten()
                .as_deref(),
            Some("postgres://x/y")
        );
        let message = DbError::NotConfigured.to_string();
        assert!(message.contains("DATABASE_URL is not set"), "{message}");
        assert!(message.contains("SPENDGATE_SKIP_DB=1"), "{message}");
    }

    // ---- templates and the busy-template retry, on the server ---------------

    type DbResult = Result<(), Box<dyn std::error::Error>>;

    /// The owner's pool and options on the test server; `None` when no
    /// database is configured (the test then passes without running).
    async fn owner() -> Result<Option<(PgPool, PgConnectOptions)>, DbError> {
        let Some(url) = test_admin_url()? else {
            return Ok(None);
        };
        let urls = server_urls(&url).await?;
        let options = parse(&urls.owner)?;
        let admin = pool(options.clone(), &redact_url(&urls.owner), 4).await?;
        Ok(Some((admin, options)))
    }

    fn unique(prefix: &str) -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{prefix}_{}_{nanos:x}", std::process::id())
    }

    async fn migrations_in(options: &PgConnectOptions, name: &str) -> Result<i64, DbError> {
        let db = pool(options.clone().database(name), name, 1).await?;
        let count = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
            .fetch_one(&db)
            .await
            .map_err(query_error("counting migrations"));
        db.close().await;
        count
    }

    /// A template that does not exist yet is built, migrated and marked as a
    /// template; asked again, it is found and left as it is. The build's own
    /// template is the one `template_name` names.
    #[tokio::test]
    async fn a_missing_template_is_built_migrated_and_marked_then_found() -> DbResult {
        let Some((admin, options)) = owner().await? else {
            return Ok(());
        };
        let name = unique("spendgate_tpl_test");
        assert_eq!(template_state(&admin, &name).await?, None);
        ensure_template_named(&admin, &options, "test", &name).await?;
        assert_eq!(template_state(&admin, &name).await?, Some(true));
        ensure_template_named(&admin, &options, "test", &name).await?;
        let clone = create_database(&admin, Some(&name)).await?;
        let applied = migrations_in(&options, &clone).await?;
        assert_eq!(applied, i64::try_from(MIGRATOR.iter().count())?);
        drop_with(&mut *admin.acquire().await?, &clone).await?;
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "ALTER DATABASE {} WITH IS_TEMPLATE false",
                quote_ident(&name)
            )))
            .await?;
        drop_with(&mut *admin.acquire().await?, &name).await?;
        assert_eq!(
            ensure_template(&admin, &options, "test").await?,
            template_name()
        );
        admin.close().await;
        Ok(())
    }

    /// A connection to `template` held by the caller: while it is open, a
    /// clone of `template` finds it busy (SQLSTATE 55006).
    async fn hold(options: &PgConnectOptions, template: &str) -> Result<PgConnection, DbError> {
        PgConnection::connect_with(&options.clone().database(template))
            .await
            .map_err(|cause| connect_error(template, cause))
    }

    /// A template busy for longer than Postgres waits (about 5 s) is tried
    /// again: the clone succeeds once the other session has gone.
    #[tokio::test]
    async fn a_template_busy_past_postgres_own_wait_is_tried_again() -> DbResult {
        let Some((admin, options)) = owner().await? else {
            return Ok(());
        };
        let template = create_database(&admin, None).await?;
        let held = hold(&options, &template).await?;
        let cloning = {
            let (admin, template) = (admin.clone(), template.clone());
            tokio::spawn(async move { create_database(&admin, Some(&template)).await })
        };
        tokio::time::sleep(Duration::from_secs(6)).await;
        held.close().await?;
        let clone = cloning.await??;
        for name in [&clone, &template] {
            drop_with(&mut *admin.acquire().await?, name).await?;
        }
        admin.close().await;
        Ok(())
    }

    /// A template that stays busy is given up on once the patience is spent
    /// (about ten seconds), with the busy error, never waited for forever.
    #[tokio::test]
    async fn a_template_busy_for_good_is_given_up_on_with_the_busy_error() -> DbResult {
        let Some((admin, options)) = owner().await? else {
            return Ok(());
        };
        let template = create_database(&admin, None).await?;
        let held = hold(&options, &template).await?;
        let outcome = tokio::time::timeout(
            Duration::from_secs(60),
            create_database(&admin, Some(&template)),
        )
        .await;
        held.close().await?;
        let busy = match outcome {
            Ok(Err(DbError::Query { cause, .. })) => cause
                .as_database_error()
                .and_then(|e| e.code())
                .is_some_and(|c| c == OBJECT_IN_USE),
            _ => false,
        };
        drop_with(&mut *admin.acquire().await?, &template).await?;
        admin.close().await;
        assert!(busy, "not the busy error within 60 s");
        Ok(())
    }
}
