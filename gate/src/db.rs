//! Postgres access: the embedded migrations, connection errors that say what
//! went wrong, and fresh migrated databases for tests and the benchmark.
//!
//! Guarantees:
//! - [`MIGRATOR`] embeds every file of `migrations/` at build time (the crate's
//!   build script rebuilds when that folder changes).
//! - [`connect`] returns a pool that has answered, or a [`DbError`] that says
//!   whether the server is down or unreachable ([`DbError::Unreachable`]) or was
//!   reached and refused us ([`DbError::Rejected`]). Every error names the URL
//!   with its password replaced by `***` ([`redact_url`]); none panics.
//! - [`migrate`] applies the migrations; a failure names the migration
//!   (version and description) in [`DbError::Migration`].
//! - Two roles ([`OWNER_ROLE`], [`APP_ROLE`]): the migrations run as the
//!   owner, the gate connects as the application role, which owns nothing and
//!   holds only the privileges the gate uses (`migrations/*_roles.sql`).
//!   [`DATABASE_URL_ENV`] names the application's URL and
//!   [`MIGRATION_DATABASE_URL_ENV`] the owner's. [`server_urls`] resolves the
//!   pair: both from the environment when `MIGRATION_DATABASE_URL` is set;
//!   otherwise the one URL given is taken for an administrator's (the
//!   throwaway cluster's superuser, `docker compose`'s `postgres`), the two
//!   roles are created if missing ([`ensure_roles`]), and both URLs are
//!   derived from it by changing only the user ([`with_user`]).
//! - [`fresh_database`] hands out a new, uniquely named, fully migrated
//!   database cloned from a template (`CREATE DATABASE .. TEMPLATE ..`), all
//!   of it done as the owner, so the owner owns the database and everything
//!   in it. Its [`FreshDatabase::pool`] connects as the APPLICATION role (what
//!   the gate and every gate test use); [`FreshDatabase::owner_pool`] connects
//!   as the owner, for the few tests that must act as the owner (a guard
//!   violated by a statement the application may not even issue) and for the
//!   mutation runner's drops below. The template is named after a hash of
//!   the migrations (`spendgate_tpl_<12 hex>`, see [`template_name`]), built at
//!   most once per migration set even when many test processes race for it
//!   (a Postgres advisory lock), and marked as a template only after every
//!   migration applied; a half-built one is dropped and rebuilt. Nobody may
//!   connect to it, so cloning never finds it busy (and retries for a while
//!   if it does).
//! - [`FreshDatabase::drop`] removes the database (`DROP DATABASE .. WITH
//!   (FORCE)`, Postgres 13 or later, as the owner: the owner is a member of
//!   the application role, which lets it end the application's sessions). A
//!   `FreshDatabase` that goes out of scope without it (a test that panicked)
//!   is dropped on a helper thread, best effort.
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
//!
//! Tests use [`fresh_test_database`]: it reads `DATABASE_URL`, and when that is
//! not set it fails with [`DbError::NotConfigured`] (a clear message, never a
//! silent pass) unless `SPENDGATE_SKIP_DB=1`, in which case it says the test was
//! skipped and returns `Ok(None)`.
//!
//! The mutation runner's schema-guard contract (the `drop-guards` crate, the
//! one codec the runner and this module share):
//! when `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,...]` is set (KIND is
//! `constraint`, `trigger` or `index`), [`fresh_database`] drops each named
//! object from the NEW database (never the template) before handing it out,
//! connected as the owner (dropping a constraint or trigger needs ownership),
//! with `ALTER TABLE t DROP CONSTRAINT n`, `DROP TRIGGER n ON t` or `DROP INDEX
//! n` (no `IF EXISTS`: a name the migrations do not create is an error), and
//! appends `dropped KIND:TABLE:NAME` (or `failed KIND:TABLE:NAME: <error>`,
//! then returns [`DbError::DropGuard`]) to the file `SPENDGATE_DROP_GUARDS_LOG`
//! names. Unset or empty: nothing happens. Only the runner sets these, on the
//! test processes that judge one schema guard; [`empty_database`] ignores them.
//! An [`empty_database`] (no migrations yet) is for testing the migrations,
//! which run as the owner: both its pools connect as the owner.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres};

use drop_guards::{LogLine, is_sql_name};

/// Every migration of `migrations/`, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// The variable naming the application's URL (the role the gate connects as).
pub const DATABASE_URL_ENV: &str = "DATABASE_URL";
/// The variable naming the owner's URL (the role the migrations run as).
pub const MIGRATION_DATABASE_URL_ENV: &str = "MIGRATION_DATABASE_URL";
/// The role that runs the migrations and owns every table.
pub const OWNER_ROLE: &str = "spendgate_owner";
/// The role the gate connects as: owns nothing, holds only what the gate uses.
pub const APP_ROLE: &str = "spendgate_app";
/// Set to `1` to skip database tests when `DATABASE_URL` is not set.
pub const SKIP_ENV: &str = "SPENDGATE_SKIP_DB";
/// The mutation runner's list of schema objects a fresh database goes without.
pub use drop_guards::DROP_GUARDS_ENV;
/// The file [`fresh_database`] reports each drop to (see the module docs).
pub use drop_guards::DROP_GUARDS_LOG_ENV;

/// How long to wait for a connection before calling the server unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections per fresh database pool (room for concurrent scenario steps).
const FRESH_POOL_SIZE: u32 = 10;
/// Postgres SQLSTATE `object_in_use`: the template is being accessed.
const OBJECT_IN_USE: &str = "55006";
/// Postgres SQLSTATE `cannot_connect_now`: the server is starting or stopping.
const CANNOT_CONNECT_NOW: &str = "57P03";

/// What can go wrong talking to Postgres. URLs are always shown redacted.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// `DATABASE_URL` is not set and `SPENDGATE_SKIP_DB=1` is not either.
    #[error(
        "DATABASE_URL is not set: this test needs a Postgres server. Run the tests with \
         `make verify` (it starts a throwaway cluster), or start one yourself with \
         `export \"$(cargo run -q -p harness -- db up)\"`, or set SPENDGATE_SKIP_DB=1 to skip \
         the database tests"
    )]
    NotConfigured,
    /// The URL does not parse as a Postgres URL.
    #[error("invalid database URL {url}: {cause}")]
    InvalidUrl { url: String, cause: sqlx::Error },
    /// Nothing answered: the server is down, the socket or host is wrong, or it timed out.
    #[error(
        "the database at {url} is down or unreachable: {cause} (is Postgres running? \
         `cargo run -q -p harness -- db up` starts a throwaway cluster)"
    )]
    Unreachable { url: String, cause: sqlx::Error },
    /// The server answered but refused the connection (role, password, database name).
    #[error("the database at {url} refused the connection: {cause}")]
    Rejected { url: String, cause: sqlx::Error },
    /// A named migration failed or no longer matches what the database recorded.
    #[error("migration {version} ({description}) failed: {cause}")]
    Migration {
        version: i64,
        description: String,
        cause: MigrateError,
    },
    /// Applying migrations failed before any one migration ran.
    #[error("applying migrations failed: {cause}")]
    Migrate { cause: MigrateError },
    /// A statement of this module failed; `action` says which.
    #[error("{action} failed: {cause}")]
    Query { action: String, cause: sqlx::Error },
    /// The mutation runner's `SPENDGATE_DROP_GUARDS` could not be honoured: it
    /// does not parse, or an object it names could not be dropped.
    #[error("SPENDGATE_DROP_GUARDS: {spec}: {message}")]
    DropGuard { spec: String, message: String },
    /// The owner's and application's roles or URLs could not be worked out.
    #[error("database roles on {url}: {message}")]
    Roles { url: String, message: String },
}

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
    pool(parse(url)?, &redact_url(url), FRESH_POOL_SIZE).await
}

/// Applies every pending migration of [`MIGRATOR`] to `pool`'s database.
pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await.map_err(migration_error)
}

/// The template database for this build's migrations: `spendgate_tpl_<12 hex>`,
/// the hex taken from a SHA-256 over every migration's version, description and checksum.
pub fn template_name() -> String {
    format!("spendgate_tpl_{}", &hex::encode(migrations_digest())[..12])
}

/// The two URLs of one server: the application role's and the owner's.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrls {
    /// Where the gate connects: `DATABASE_URL`, as [`APP_ROLE`].
    pub app: String,
    /// Where the migrations run: `MIGRATION_DATABASE_URL`, as [`OWNER_ROLE`].
    pub owner: String,
}

/// Shows both URLs redacted.
impl std::fmt::Debug for ServerUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerUrls")
            .field("app", &redact_url(&self.app))
            .field("owner", &redact_url(&self.owner))
            .finish()
    }
}

/// The URLs to use for `url` (normally `DATABASE_URL`): `url` and
/// `MIGRATION_DATABASE_URL` when that is set; otherwise `url` is taken for an
/// administrator's and [`ensure_roles`] creates the roles (if missing) and
/// derives both URLs from it.
pub async fn server_urls(url: &str) -> Result<ServerUrls, DbError> {
    match given_urls(url, std::env::var(MIGRATION_DATABASE_URL_ENV).ok()) {
        Some(urls) => Ok(urls),
        None => ensure_roles(url).await,
    }
}

/// Both URLs when the owner's is given (and not blank); `None`: derive them.
fn given_urls(url: &str, owner: Option<String>) -> Option<ServerUrls> {
    owner
        .filter(|u| !u.trim().is_empty())
        .map(|owner| ServerUrls {
            app: url.to_owned(),
            owner,
        })
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

/// Makes the owner a member of `role` unless it already is.
async fn grant_membership(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    role: &str,
    what: &'static str,
) -> Result<(), DbError> {
    let member: bool = sqlx::query_scalar("SELECT pg_has_role($1, $2, 'MEMBER')")
        .bind(OWNER_ROLE)
        .bind(role)
        .fetch_one(&mut **tx)
        .await
        .map_err(query_error(what))?;
    if !member {
        (&mut **tx)
            .execute(sqlx::AssertSqlSafe(format!("GRANT {role} TO {OWNER_ROLE}")))
            .await
            .map_err(query_error(what))?;
    }
    Ok(())
}

/// Connected through `admin_url` (a role that may create roles, unless both
/// exist already): creates [`OWNER_ROLE`] (`LOGIN CREATEDB`) and [`APP_ROLE`]
/// (`LOGIN`) if missing, makes the owner a member of the application role (so
/// it may end the application's sessions when it drops a test database), and
/// returns both URLs derived from `admin_url` ([`with_user`]). A role it
/// creates gets the password of `admin_url`, if that has one, so the derived
/// URLs log in. Safe to run from many processes at once (an advisory lock).
pub async fn ensure_roles(admin_url: &str) -> Result<ServerUrls, DbError> {
    let urls = ServerUrls {
        app: with_user(admin_url, APP_ROLE)?,
        owner: with_user(admin_url, OWNER_ROLE)?,
    };
    let shown = redact_url(admin_url);
    let mut conn = PgConnection::connect_with(&parse(admin_url)?)
        .await
        .map_err(|cause| connect_error(&shown, cause))?;
    let ensured = create_roles(&mut conn, &shown, url_password(admin_url)).await;
    let _ = conn.close().await;
    ensured.map(|()| urls)
}

/// The advisory lock key [`ensure_roles`] serializes on ("spendgate roles").
const ROLES_LOCK: i64 = 0x7370_656e_6472_6f6c;

async fn create_roles(
    conn: &mut PgConnection,
    shown: &str,
    password: Option<String>,
) -> Result<(), DbError> {
    let mut tx = conn
        .begin()
        .await
        .map_err(query_error("starting the role transaction"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(ROLES_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(query_error("taking the roles lock"))?;
    let (me, may_create): (String, bool) = sqlx::query_as(
        "SELECT rolname::text, rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(query_error("reading the connected role"))?;
    for (role, attributes) in [(OWNER_ROLE, "LOGIN CREATEDB"), (APP_ROLE, "LOGIN")] {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
                .bind(role)
                .fetch_one(&mut *tx)
                .await
                .map_err(query_error(format!("looking up role {role}")))?;
        if exists {
            continue;
        }
        if !may_create {
            return Err(DbError::Roles {
                url: shown.to_owned(),
                message: format!(
                    "{MIGRATION_DATABASE_URL_ENV} is not set, so this URL was taken for an \
                     administrator's, but role {role} does not exist and {me} may not create \
                     it: create {OWNER_ROLE} and {APP_ROLE} (README, \"Deploying\") and set \
                     {DATABASE_URL_ENV} and {MIGRATION_DATABASE_URL_ENV}"
                ),
            });
        }
        let sql: String = sqlx::query_scalar(
            "SELECT format('CREATE ROLE %I ' || $2 || CASE WHEN $3::text IS NULL THEN '' \
             ELSE format(' PASSWORD %L', $3::text) END, $1::text)",
        )
        .bind(role)
        .bind(attributes)
        .bind(password.as_deref())
        .fetch_one(&mut *tx)
        .await
        .map_err(query_error(format!("quoting the creation of role {role}")))?;
        tx.execute(sqlx::AssertSqlSafe(sql))
            .await
            .map_err(query_error(format!("creating role {role}")))?;
    }
    if may_create {
        grant_membership(
            &mut tx,
            APP_ROLE,
            "making the owner a member of the application role",
        )
        .await?;
        // DROP DATABASE .. WITH (FORCE) also ends an autovacuum worker busy in
        // the database, which belongs to no role the owner is a member of.
        grant_membership(
            &mut tx,
            "pg_signal_backend",
            "letting the owner end sessions in its databases",
        )
        .await?;
    }
    tx.commit()
        .await
        .map_err(query_error("committing the roles"))
}

/// The password of a URL's userinfo, percent-decoded, if it has one.
fn url_password(url: &str) -> Option<String> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let userinfo = &url[start..start + url[start..end].rfind('@')?];
    let (_, encoded) = userinfo.split_once(':')?;
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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

/// Appends one line to the runner's log (best effort: a log that cannot be
/// written leaves no `dropped` line, which the runner reports as an error).
fn log_line(log: Option<&std::path::Path>, line: &LogLine) {
    if let Some(path) = log
        && let Err(e) = drop_guards::append_log(path, line)
    {
        eprintln!("warning: cannot append to {}: {e}", path.display());
    }
}

/// Drops every object `wanted` names from the database of `pool`, logging
/// each. `wanted` is decoded by the contract's one codec (`drop_guards`): an
/// item it refuses is logged and returned as [`DbError::DropGuard`].
async fn drop_guards(
    pool: &PgPool,
    wanted: &str,
    log: Option<&std::path::Path>,
) -> Result<(), DbError> {
    let specs = drop_guards::decode(wanted).map_err(|(item, refusal)| {
        let message = refusal.to_string();
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
    })?;
    for spec in specs {
        match pool.execute(sqlx::AssertSqlSafe(spec.sql())).await {
            Ok(_) => log_line(log, &LogLine::Dropped(spec)),
            Err(cause) => {
                let message = cause.to_string().replace('\n', " ");
                let item = spec.to_string();
                log_line(
                    log,
                    &LogLine::Failed {
                        item: item.clone(),
                        message: message.clone(),
                    },
                );
                return Err(DbError::DropGuard {
                    spec: item,
                    message,
                });
            }
        }
    }
    Ok(())
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

fn parse(url: &str) -> Result<PgConnectOptions, DbError> {
    url.parse().map_err(|cause| DbError::InvalidUrl {
        url: redact_url(url),
        cause,
    })
}

async fn pool(options: PgConnectOptions, shown: &str, size: u32) -> Result<PgPool, DbError> {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|cause| connect_error(shown, cause))
}

fn connect_error(shown: &str, cause: sqlx::Error) -> DbError {
    let url = shown.to_owned();
    let unreachable = match &cause {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(e) => e.code().as_deref() == Some(CANNOT_CONNECT_NOW),
        _ => false,
    };
    if unreachable {
        DbError::Unreachable { url, cause }
    } else {
        DbError::Rejected { url, cause }
    }
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

fn query_error(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> DbError {
    let action = action.into();
    move |cause| DbError::Query { action, cause }
}

/// Makes sure the migrated template of this build exists; returns its name.
async fn ensure_template(
    admin: &PgPool,
    admin_options: &PgConnectOptions,
    shown: &str,
) -> Result<String, DbError> {
    let name = template_name();
    if template_state(admin, &name).await? == Some(true) {
        return Ok(name);
    }
    let digest = migrations_digest();
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
    let built = build_template(&mut conn, admin_options, &name, shown).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .execute(&mut *conn)
        .await
        .map_err(query_error("releasing the template lock"));
    built?;
    unlocked?;
    Ok(name)
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
    let mut attempts = 0;
    loop {
        match admin.execute(sqlx::AssertSqlSafe(sql.as_str())).await {
            Ok(_) => return Ok(name),
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some(OBJECT_IN_USE) && attempts < 100 =>
            {
                attempts += 1;
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
    let opened = pool(options.clone(), &shown, FRESH_POOL_SIZE).await;
    match opened {
        Ok(pool) => {
            let owner_pool = PgPoolOptions::new()
                .max_connections(FRESH_POOL_SIZE)
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

    /// The drop hook against a real database: each object goes, each drop is
    /// logged, and a name the migrations do not create is a logged error.
    #[tokio::test]
    async fn the_drop_hook_drops_logs_and_fails_loudly() -> Result<(), Box<dyn std::error::Error>> {
        let Some(db) = fresh_test_database().await? else {
            return Ok(());
        };
        let log = std::env::temp_dir().join(format!(
            "spendgate-drop-hook-{}-{}.log",
            std::process::id(),
            db.name()
        ));
        let wanted =
            "constraint:tenants:ck_tenants_id_not_blank,trigger:ledger_entries:ledger_append_only";
        drop_guards(db.owner_pool(), wanted, Some(&log)).await?;
        sqlx::query("INSERT INTO tenants (id) VALUES ('  ')")
            .execute(db.pool())
            .await?;
        sqlx::query("DELETE FROM ledger_entries")
            .execute(db.owner_pool())
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
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[0],
            "dropped constraint:tenants:ck_tenants_id_not_blank"
        );
        assert_eq!(
            lines[1],
            "dropped trigger:ledger_entries:ledger_append_only"
        );
        assert!(
            lines[2].starts_with("failed index:approvals:uq_no_such_index: "),
            "{text}"
        );
        db.drop().await?;
        Ok(())
    }

    #[test]
    fn with_user_changes_the_user_and_nothing_else() {
        let ok = |url: &str, user: &str| with_user(url, user).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            ok("postgresql://postgres@%2Ftmp%2Fpg:5432/postgres", APP_ROLE),
            "postgresql://spendgate_app@%2Ftmp%2Fpg:5432/postgres"
        );
        assert_eq!(
            ok(
                "postgres://postgres:sp%40nd@localhost:5432/postgres?sslmode=disable",
                OWNER_ROLE
            ),
            "postgres://spendgate_owner:sp%40nd@localhost:5432/postgres?sslmode=disable"
        );
        assert_eq!(
            ok("postgres://localhost/db", APP_ROLE),
            "postgres://spendgate_app@localhost/db"
        );
        assert_eq!(
            ok(
                "postgres:///db?host=/tmp&user=postgres&password=x",
                APP_ROLE
            ),
            "postgres:///db?host=/tmp&user=spendgate_app&password=x"
        );
        for (url, user) in [
            ("mysql://root@localhost/db", APP_ROLE),
            ("not a url", APP_ROLE),
            ("postgres://localhost/db", "app; DROP ROLE x"),
            ("postgres://localhost/db", "a.b"),
        ] {
            assert!(
                matches!(with_user(url, user), Err(DbError::Roles { .. })),
                "{url} / {user}"
            );
        }
    }

    #[test]
    fn the_password_of_a_url_is_percent_decoded() {
        assert_eq!(
            url_password("postgres://u:sp%40nd%3A1@h/db").as_deref(),
            Some("sp@nd:1")
        );
        assert_eq!(url_password("postgres://u@h/db"), None);
        assert_eq!(url_password("postgres://h/db"), None);
        assert_eq!(
            url_password("postgres://u:%zz@h/db").as_deref(),
            Some("%zz")
        );
    }

    #[test]
    fn a_given_owner_url_is_used_as_is_and_a_missing_one_means_derive() {
        assert_eq!(
            given_urls("postgres://app@h/db", Some("postgres://own@h/db".into())),
            Some(ServerUrls {
                app: "postgres://app@h/db".into(),
                owner: "postgres://own@h/db".into()
            })
        );
        assert_eq!(given_urls("postgres://a@h/db", Some("  ".into())), None);
        assert_eq!(given_urls("postgres://a@h/db", None), None);
        let shown = format!(
            "{:?}",
            ServerUrls {
                app: "postgres://a:s3cret@h/db".into(),
                owner: "postgres://o:s3cret@h/db".into()
            }
        );
        assert!(!shown.contains("s3cret"), "{shown}");
    }

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
}
