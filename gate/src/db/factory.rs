//! The test-database factory: fresh, migrated databases of their own, for
//! tests and the benchmark. Compiled only with the `test-support` feature.
//!
//! Guarantees:
//! - [`fresh_database`] hands out a uniquely named, fully migrated, empty
//!   database: a spare an earlier test handed back (`super::spares`: emptied
//!   by the template's reset script, claimed by renaming it) or else a new
//!   clone of the template (`CREATE DATABASE .. TEMPLATE ..`), all of it
//!   done as the owner, so the owner owns the database and everything in it. Its [`FreshDatabase::pool`] connects as the APPLICATION role (what
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
//! - [`FreshDatabase::drop`] hands the database back: kept as a spare when
//!   its template carries a reset script (in its comment, written when the
//!   template is built), no guard was dropped from it, nobody else is still
//!   connected and the reset accepts it (`super::reset`: the schema still
//!   has the template's fingerprint); otherwise removed (`DROP DATABASE ..
//!   WITH (FORCE)`, Postgres 13 or later, as the owner: the owner is a
//!   member of the application role, which lets it end the application's
//!   sessions). A `FreshDatabase` that goes out of scope without it (a test
//!   that panicked) is dropped on a helper thread, best effort, never kept.
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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres};

use super::connect::{
    CONNECT_TIMEOUT, DATABASE_URL_ENV, MIGRATOR, POOL_SIZE, migrate, parse, pool, redact_url,
};
use super::drop_guards::{DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, drop_guards};
use super::error::{DbError, connect_error, query_error};
use super::reset::Reset;
use super::roles::{ServerUrls, server_urls};
use super::spares::{self, Shelf, quote_ident};

/// Set to `1` to skip database tests when `DATABASE_URL` is not set.
pub const SKIP_ENV: &str = "SPENDGATE_SKIP_DB";

/// How long a clone keeps trying, in all, while its template is busy.
/// Postgres itself waits about 5 s for the template's other sessions to go
/// before it answers `object_in_use`, so this is two or three attempts.
const BUSY_TEMPLATE_PATIENCE: Duration = Duration::from_secs(10);

/// A template's comment starts with this line when the rest is the reset
/// script of its schema (`super::reset`): only then are its clones reused.
const RESET_COMMENT: &str = "spendgate reset script v1: empties a clone of this template\n";

/// What a database needs to go back on the shelf: its template's key (the
/// hex of `spendgate_tpl_<hex>`) and the template's reset script.
#[derive(Debug, Clone)]
struct Reuse {
    key: String,
    reset: Reset,
}

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
    /// How to empty it for the shelf; `None`: it is dropped, never reused.
    reuse: Option<Reuse>,
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

    /// Closes the pools and hands the database back: emptied and kept as a
    /// spare for the next [`fresh_database`] when it can be (cloned from a
    /// template with a reset script, no guard dropped, nobody else
    /// connected, and its schema still the template's; `super::spares`),
    /// otherwise dropped, terminating any other session on it.
    pub async fn drop(mut self) -> Result<(), DbError> {
        self.dropped = true;
        self.pool.close().await;
        self.owner_pool.close().await;
        let mut name = self.name.clone();
        if let Some(reuse) = self.reuse.as_ref() {
            match spares::shelve(&self.owner_url, &reuse.key, &reuse.reset, &name).await {
                Shelf::Kept => return Ok(()),
                Shelf::NotKept(now) => name = now,
            }
        }
        drop_database(&self.owner_url, &name).await
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
        let (template, reset) = ensure_template(&owner, &owner_options, &shown).await?;
        let key = spare_key(&template);
        let name = new_name();
        let claimed = match reset {
            Some(_) => spares::claim(&owner, &key, &name).await?,
            None => false,
        };
        if !claimed {
            create_named(&owner, Some(&template), &name).await?;
        }
        Ok::<_, DbError>((name, reset.map(|reset| Reuse { key, reset })))
    }
    .await;
    owner.close().await;
    let (name, reuse) = created?;
    let wanted = std::env::var(DROP_GUARDS_ENV).unwrap_or_default();
    // A database some guards were dropped from is never reused.
    let reuse = reuse.filter(|_| wanted.trim().is_empty());
    let db = open(urls, &app_options, &owner_options, name, reuse).await?;
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
    open(&urls, &owner_options, &owner_options, created?, None).await
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
    format!(
        "{TEMPLATE_PREFIX}{}",
        &hex::encode(migrations_digest())[..12]
    )
}

/// Every template's name starts with this.
const TEMPLATE_PREFIX: &str = "spendgate_tpl_";

fn migrations_digest() -> [u8; 32] {
    let mut hash = Sha256::new();
    for m in MIGRATOR.iter() {
        hash.update(m.version.to_be_bytes());
        hash.update(m.description.as_bytes());
        hash.update(&*m.checksum);
    }
    hash.finalize().into()
}

/// Makes sure the migrated template of this build exists; returns its name
/// and its reset script, if it has one.
async fn ensure_template(
    admin: &PgPool,
    admin_options: &PgConnectOptions,
    shown: &str,
) -> Result<(String, Option<Reset>), DbError> {
    let name = template_name();
    let reset = ensure_template_named(admin, admin_options, shown, &name).await?;
    Ok((name, reset))
}

/// Makes sure a migrated template called `name` exists, building it when it
/// does not under an advisory lock keyed by the name (so that racing test
/// processes build it once); returns its reset script, if it has one.
async fn ensure_template_named(
    admin: &PgPool,
    admin_options: &PgConnectOptions,
    shown: &str,
    name: &str,
) -> Result<Option<Reset>, DbError> {
    if let Some(state) = template_state(admin, name).await?
        && state.ready
    {
        return Ok(state.reset);
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
    let reset = built?;
    unlocked?;
    Ok(reset)
}

/// A template database as `pg_database` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TemplateState {
    /// Marked as a template (every migration applied).
    ready: bool,
    /// The reset script its comment carries, if it carries one.
    reset: Option<Reset>,
}

/// The state of the database called `name`, when there is one.
async fn template_state<'c>(
    executor: impl Executor<'c, Database = Postgres>,
    name: &str,
) -> Result<Option<TemplateState>, DbError> {
    let row: Option<(bool, Option<String>)> = sqlx::query_as(
        "SELECT datistemplate, shobj_description(oid, 'pg_database') \
         FROM pg_database WHERE datname = $1",
    )
    .bind(name)
    .fetch_optional(executor)
    .await
    .map_err(query_error(format!("looking up template {name}")))?;
    Ok(row.map(|(ready, comment)| TemplateState {
        ready,
        reset: comment
            .as_deref()
            .and_then(|c| c.strip_prefix(RESET_COMMENT))
            .and_then(Reset::from_sql),
    }))
}

/// A string as an SQL literal (quotes doubled; standard-conforming strings).
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Builds the template; the caller holds the advisory lock. Returns its
/// reset script: `None` when the migrations leave rows behind (see
/// `super::reset`), so its clones are never reused.
async fn build_template(
    conn: &mut PgConnection,
    admin_options: &PgConnectOptions,
    name: &str,
    shown: &str,
) -> Result<Option<Reset>, DbError> {
    let quoted = quote_ident(name);
    match template_state(&mut *conn, name).await? {
        Some(TemplateState { ready: true, reset }) => return Ok(reset),
        // A builder died half-way: start again.
        Some(TemplateState { ready: false, .. }) => drop_with(conn, name).await?,
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
    let migrated = match migrate(&template).await {
        Ok(()) => reset_of(&template).await,
        Err(e) => Err(e),
    };
    template.close().await;
    let reset = match migrated {
        Ok(reset) => reset,
        Err(e) => {
            drop_with(conn, name).await?;
            return Err(e);
        }
    };
    if let Some(reset) = &reset {
        let comment = format!("{RESET_COMMENT}{}", reset.sql());
        conn.execute(sqlx::AssertSqlSafe(format!(
            "COMMENT ON DATABASE {quoted} IS {}",
            quote_literal(&comment)
        )))
        .await
        .map_err(query_error(format!("recording the reset script of {name}")))?;
    }
    conn.execute(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE {quoted} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
    )))
    .await
    .map_err(query_error(format!("marking {name} as a template")))?;
    Ok(reset)
}

/// The reset script of a freshly migrated database (`None` when its
/// migrations left rows behind).
async fn reset_of(db: &PgPool) -> Result<Option<Reset>, DbError> {
    let mut conn = db
        .acquire()
        .await
        .map_err(query_error("connecting to read the schema"))?;
    Reset::for_schema(&mut conn, true)
        .await
        .map_err(query_error("reading the schema for its reset script"))
}

/// The key of the spares a database of `template` may be claimed from and
/// kept as: the template's hex (its migration set) and 8 hex of this
/// process's executable (its path, size and modification time). So a test
/// binary built from other code, a mutant of this very module say, never
/// claims what this one shelved, nor the other way round.
fn spare_key(template: &str) -> String {
    static BUILD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let build = BUILD.get_or_init(|| {
        let mut hash = Sha256::new();
        if let Ok(exe) = std::env::current_exe() {
            hash.update(exe.as_os_str().as_encoded_bytes());
            if let Ok(meta) = exe.metadata() {
                hash.update(meta.len().to_be_bytes());
                let modified = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
                hash.update(modified.map_or(0, |d| d.as_nanos()).to_be_bytes());
            }
        }
        hex::encode(&hash.finalize()[..4])
    });
    let tpl = template.strip_prefix(TEMPLATE_PREFIX).unwrap_or(template);
    format!("{tpl}_{build}")
}

/// A new database name of this process: `spendgate_t_<pid>_<n>_<hex>`.
fn new_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "spendgate_t_{}_{}_{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a uniquely named database from `template` (or `template0`) and returns its name.
async fn create_database(admin: &PgPool, template: Option<&str>) -> Result<String, DbError> {
    let name = new_name();
    create_named(admin, template, &name).await?;
    Ok(name)
}

/// Creates the database `name` from `template` (or `template0`).
async fn create_named(admin: &PgPool, template: Option<&str>, name: &str) -> Result<(), DbError> {
    let template = template.unwrap_or("template0");
    let sql = format!(
        "CREATE DATABASE {} TEMPLATE {}",
        quote_ident(name),
        quote_ident(template)
    );
    let mut conn = admin.acquire().await.map_err(|cause| DbError::Query {
        action: format!("connecting to create database {name}"),
        cause,
    })?;
    let pause = Duration::from_millis(100);
    spares::execute_when_alone(&mut conn, &sql, BUSY_TEMPLATE_PATIENCE, pause)
        .await
        .map_err(|cause| DbError::Query {
            action: format!("creating database {name} from {template}"),
            cause,
        })
}

async fn open(
    urls: &ServerUrls,
    app_options: &PgConnectOptions,
    owner_options: &PgConnectOptions,
    name: String,
    reuse: Option<Reuse>,
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
                reuse,
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
    fn spare_keys_name_the_template_and_this_build() {
        let key = spare_key(&template_name());
        let (tpl, build) = key.split_once('_').unwrap_or_default();
        assert_eq!(format!("{TEMPLATE_PREFIX}{tpl}"), template_name());
        assert_eq!(build.len(), 8);
        assert_eq!(spare_key(&template_name()), key, "stable within a process");
        assert!(spare_key("spendgate_tpl_000000000000").starts_with("000000000000_"));
        // The longest name a spare gets stays within Postgres' 63 bytes.
        assert!(format!("spendgate_reset_{key}_{:016x}", u64::MAX).len() <= 63);
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
        let ready = |state: Option<TemplateState>| state.map(|s| s.ready);
        let built = ensure_template_named(&admin, &options, "test", &name).await?;
        assert_eq!(ready(template_state(&admin, &name).await?), Some(true));
        // It carries the reset script its clones are emptied with, the one
        // the build returned, and a second call reads that one back.
        let carried = template_state(&admin, &name).await?.and_then(|s| s.reset);
        assert!(
            built.is_some(),
            "the template was built without a reset script"
        );
        assert_eq!(carried, built);
        let found = ensure_template_named(&admin, &options, "test", &name).await?;
        assert_eq!(found, built);
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
            ensure_template(&admin, &options, "test").await?.0,
            template_name()
        );
        admin.close().await;
        Ok(())
    }

    // ---- spares: a database handed back is emptied and kept ------------------

    /// The owner's options, the owner's URL, this build's template and its
    /// reset script, and a spare key no other test or process uses (so no
    /// one else claims what these tests shelve).
    async fn shelf()
    -> Result<Option<(PgPool, PgConnectOptions, String, String, Reset, String)>, DbError> {
        let Some(url) = test_admin_url()? else {
            return Ok(None);
        };
        let urls = server_urls(&url).await?;
        let options = parse(&urls.owner)?;
        let admin = pool(options.clone(), &redact_url(&urls.owner), 4).await?;
        let (template, reset) = ensure_template(&admin, &options, "test").await?;
        let reset = reset.ok_or_else(|| DbError::Query {
            action: "this build's template carries no reset script".into(),
            cause: sqlx::Error::RowNotFound,
        })?;
        Ok(Some((
            admin,
            options,
            urls.owner,
            template,
            reset,
            unique("k"),
        )))
    }

    async fn count_like(admin: &PgPool, prefix: &str) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)")
            .bind(prefix)
            .fetch_one(admin)
            .await
    }

    async fn exists(admin: &PgPool, name: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(admin)
            .await
    }

    /// A database with rows in it, handed back, is emptied and kept under
    /// its template's spare name; claimed again it is empty and its DELETE
    /// guards are back on; and a second claim finds nothing left to take.
    #[tokio::test]
    async fn a_database_handed_back_is_emptied_kept_and_handed_out_again() -> DbResult {
        let Some((admin, options, server, template, reset, key)) = shelf().await? else {
            return Ok(());
        };
        let used = create_database(&admin, Some(&template)).await?;
        let mut conn = PgConnection::connect_with(&options.clone().database(&used)).await?;
        sqlx::query("INSERT INTO tenants (id) VALUES ('acme'), ('globex')")
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        assert_eq!(
            spares::shelve(&server, &key, &reset, &used).await,
            Shelf::Kept
        );
        assert!(!exists(&admin, &used).await?, "{used} is still there");
        let prefix = format!("spendgate_spare_{key}_");
        assert_eq!(count_like(&admin, &prefix).await?, 1);
        let again = new_name();
        assert!(spares::claim(&admin, &key, &again).await?);
        assert!(
            !spares::claim(&admin, &key, &new_name()).await?,
            "one spare, two claims"
        );
        let mut conn = PgConnection::connect_with(&options.clone().database(&again)).await?;
        let tenants: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants")
            .fetch_one(&mut conn)
            .await?;
        let triggers = "SELECT tgrelid::regclass::text, tgname::text, tgenabled::text \
                        FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2";
        let after: Vec<(String, String, String)> =
            sqlx::query_as(triggers).fetch_all(&mut conn).await?;
        conn.close().await?;
        let fresh = create_database(&admin, Some(&template)).await?;
        let mut conn = PgConnection::connect_with(&options.clone().database(&fresh)).await?;
        let before: Vec<(String, String, String)> =
            sqlx::query_as(triggers).fetch_all(&mut conn).await?;
        conn.close().await?;
        for name in [&again, &fresh] {
            drop_with(&mut *admin.acquire().await?, name).await?;
        }
        admin.close().await;
        assert_eq!(tenants, 0);
        assert!(
            before.iter().any(|t| t.2 == "A"),
            "no ALWAYS trigger: {before:?}"
        );
        assert_eq!(after, before, "every trigger as the template has it");
        Ok(())
    }

    /// Two processes claiming the one spare at once: exactly one gets it.
    #[tokio::test]
    async fn of_two_claims_racing_for_one_spare_exactly_one_wins() -> DbResult {
        let Some((admin, _, server, template, reset, key)) = shelf().await? else {
            return Ok(());
        };
        let used = create_database(&admin, Some(&template)).await?;
        assert_eq!(
            spares::shelve(&server, &key, &reset, &used).await,
            Shelf::Kept
        );
        let (a, b) = (new_name(), new_name());
        let (got_a, got_b) = tokio::join!(
            spares::claim(&admin, &key, &a),
            spares::claim(&admin, &key, &b)
        );
        let (got_a, got_b) = (got_a?, got_b?);
        for (got, name) in [(got_a, &a), (got_b, &b)] {
            assert_eq!(exists(&admin, name).await?, got);
            if got {
                drop_with(&mut *admin.acquire().await?, name).await?;
            }
        }
        admin.close().await;
        assert!(got_a ^ got_b, "claims: {got_a} and {got_b}");
        Ok(())
    }

    /// A database someone is still connected to is not kept (a late write
    /// could land after its reset): it comes back under its own name.
    #[tokio::test]
    async fn a_database_with_a_session_still_on_it_is_not_kept() -> DbResult {
        let Some((admin, options, server, template, reset, key)) = shelf().await? else {
            return Ok(());
        };
        let used = create_database(&admin, Some(&template)).await?;
        let lingering = PgConnection::connect_with(&options.clone().database(&used)).await?;
        let shelf = spares::shelve(&server, &key, &reset, &used).await;
        lingering.close().await?;
        drop_with(&mut *admin.acquire().await?, &used).await?;
        let kept = count_like(&admin, &format!("spendgate_spare_{key}_")).await?;
        admin.close().await;
        assert_eq!((shelf, kept), (Shelf::NotKept(used), 0));
        Ok(())
    }

    /// A database holding what a DELETE cannot take back (here a large
    /// object) is refused by the reset and not kept; it comes back under
    /// its hidden name, for the caller to drop.
    #[tokio::test]
    async fn a_database_the_reset_refuses_is_not_kept() -> DbResult {
        let Some((admin, options, server, template, reset, key)) = shelf().await? else {
            return Ok(());
        };
        let used = create_database(&admin, Some(&template)).await?;
        let mut conn = PgConnection::connect_with(&options.clone().database(&used)).await?;
        sqlx::query("SELECT lo_create(0)")
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        let shelf = spares::shelve(&server, &key, &reset, &used).await;
        let Shelf::NotKept(now) = shelf else {
            admin.close().await;
            panic!("a database with a large object was kept");
        };
        drop_with(&mut *admin.acquire().await?, &now).await?;
        let kept = count_like(&admin, &format!("spendgate_spare_{key}_")).await?;
        admin.close().await;
        assert!(now.starts_with("spendgate_reset_"), "{now}");
        assert_eq!(kept, 0);
        Ok(())
    }

    /// `FreshDatabase::drop` keeps a database whose rows its owner changed,
    /// and drops one whose schema its owner changed (here a computing
    /// trigger turned off, over a connection of its own): no reset takes
    /// that back, and the next test would get a database without it.
    #[tokio::test]
    async fn a_fresh_database_whose_schema_was_changed_is_dropped_not_kept() -> DbResult {
        let Some((admin, _, server, template, reset, key)) = shelf().await? else {
            return Ok(());
        };
        let urls = server_urls(&server).await?;
        let (app, owner) = (parse(&urls.app)?, parse(&urls.owner)?);
        let prefix = format!("spendgate_spare_{key}_");
        let mut kept = Vec::new();
        for change_schema in [false, true] {
            let name = create_database(&admin, Some(&template)).await?;
            let reuse = Some(Reuse {
                key: key.clone(),
                reset: reset.clone(),
            });
            let db = open(&urls, &app, &owner, name.clone(), reuse).await?;
            let mut conn = PgConnection::connect_with(db.owner_connect_options()).await?;
            conn.execute("INSERT INTO tenants (id) VALUES ('acme')")
                .await?;
            if change_schema {
                conn.execute("ALTER TABLE delegations DISABLE TRIGGER delegation_derived_columns")
                    .await?;
            }
            conn.close().await?;
            db.drop().await?;
            assert!(!exists(&admin, &name).await?, "{name} is still there");
            kept.push(count_like(&admin, &prefix).await?);
        }
        for spare in sqlx::query_scalar::<_, String>(
            "SELECT datname::text FROM pg_database WHERE starts_with(datname, $1)",
        )
        .bind(&prefix)
        .fetch_all(&admin)
        .await?
        {
            drop_with(&mut *admin.acquire().await?, &spare).await?;
        }
        admin.close().await;
        assert_eq!(kept, [1, 1], "kept with rows, dropped with a trigger off");
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
                .is_some_and(|c| c == spares::OBJECT_IN_USE),
            _ => false,
        };
        drop_with(&mut *admin.acquire().await?, &template).await?;
        admin.close().await;
        assert!(busy, "not the busy error within 60 s");
        Ok(())
    }
}
