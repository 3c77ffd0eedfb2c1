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
//! - [`fresh_database`] hands out a new, uniquely named, fully migrated
//!   database cloned from a template (`CREATE DATABASE .. TEMPLATE ..`). The
//!   template is named after a hash of the migrations
//!   (`spendgate_tpl_<12 hex>`, see [`template_name`]), built at most once per
//!   migration set even when many test processes race for it (a Postgres
//!   advisory lock), and marked as a template only after every migration
//!   applied; a half-built one is dropped and rebuilt. Nobody may connect to it,
//!   so cloning never finds it busy (and retries for a while if it does).
//! - [`FreshDatabase::drop`] removes the database (`DROP DATABASE .. WITH
//!   (FORCE)`, Postgres 13 or later). A `FreshDatabase` that goes out of scope
//!   without it (a test that panicked) is dropped on a helper thread, best effort.
//!
//! ```no_run
//! # async fn demo(admin_url: &str) -> Result<(), gate::db::DbError> {
//! // admin_url: any database of the server, e.g. DATABASE_URL.
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
//! The mutation runner's schema-guard contract (`mutations/src/drop_guards.rs`):
//! when `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,...]` is set (KIND is
//! `constraint`, `trigger` or `index`), [`fresh_database`] drops each named
//! object from the NEW database (never the template) before handing it out,
//! with `ALTER TABLE t DROP CONSTRAINT n`, `DROP TRIGGER n ON t` or `DROP INDEX
//! n` (no `IF EXISTS`: a name the migrations do not create is an error), and
//! appends `dropped KIND:TABLE:NAME` (or `failed KIND:TABLE:NAME: <error>`,
//! then returns [`DbError::DropGuard`]) to the file `SPENDGATE_DROP_GUARDS_LOG`
//! names. Unset or empty: nothing happens. Only the runner sets these, on the
//! test processes that judge one schema guard; [`empty_database`] ignores them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres};

/// Every migration of `migrations/`, embedded at build time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// The variable naming the server tests and the harness use.
pub const DATABASE_URL_ENV: &str = "DATABASE_URL";
/// Set to `1` to skip database tests when `DATABASE_URL` is not set.
pub const SKIP_ENV: &str = "SPENDGATE_SKIP_DB";
/// The mutation runner's list of schema objects a fresh database goes without.
pub const DROP_GUARDS_ENV: &str = "SPENDGATE_DROP_GUARDS";
/// The file [`fresh_database`] reports each drop to (see the module docs).
pub const DROP_GUARDS_LOG_ENV: &str = "SPENDGATE_DROP_GUARDS_LOG";

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
}

/// Replaces the password of a Postgres URL (userinfo or `password=` parameter) with `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let start = scheme_end + 3;
        let end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@') {
            if let Some(colon) = out[start..start + at].find(':') {
                out.replace_range(start + colon + 1..start + at, "***");
            }
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

/// A database of its own, migrated, dropped by [`FreshDatabase::drop`].
pub struct FreshDatabase {
    name: String,
    admin_url: String,
    options: PgConnectOptions,
    pool: PgPool,
    dropped: bool,
}

impl FreshDatabase {
    /// A pool of up to 10 connections to this database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The database's name (`spendgate_t_<pid>_<n>_<hex>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How to connect to this database, for a second pool or a single connection.
    pub fn connect_options(&self) -> &PgConnectOptions {
        &self.options
    }

    /// Closes the pool and drops the database, terminating any other session on it.
    pub async fn drop(mut self) -> Result<(), DbError> {
        self.dropped = true;
        self.pool.close().await;
        drop_database(&self.admin_url, &self.name).await
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
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(drop_database(&admin_url, &name))
                .map_err(|e| e.to_string())
        })
        .join();
        if let Ok(Err(message)) = outcome {
            eprintln!("warning: could not drop database {}: {message}", self.name);
        }
    }
}

/// A new database cloned from the migrated template of this build (created first if needed).
pub async fn fresh_database(admin_url: &str) -> Result<FreshDatabase, DbError> {
    let admin_options = parse(admin_url)?;
    let shown = redact_url(admin_url);
    let admin = pool(admin_options.clone(), &shown, 2).await?;
    let created = async {
        let template = ensure_template(&admin, &admin_options, &shown).await?;
        create_database(&admin, Some(&template)).await
    }
    .await;
    admin.close().await;
    let db = open(admin_url, &admin_options, created?).await?;
    let wanted = std::env::var(DROP_GUARDS_ENV).unwrap_or_default();
    if wanted.trim().is_empty() {
        return Ok(db);
    }
    let log = std::env::var_os(DROP_GUARDS_LOG_ENV).map(std::path::PathBuf::from);
    match drop_guards(db.pool(), &wanted, log.as_deref()).await {
        Ok(()) => Ok(db),
        Err(e) => {
            // Best effort: the drop failure is the error worth reporting.
            let _ = db.drop().await;
            Err(e)
        }
    }
}

/// A schema object the mutation runner asks a fresh database to go without.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DropGuard {
    /// `constraint`, `trigger` or `index`.
    kind: &'static str,
    table: String,
    name: String,
}

impl DropGuard {
    /// `KIND:TABLE:NAME`, as the runner wrote it.
    fn spec(&self) -> String {
        format!("{}:{}:{}", self.kind, self.table, self.name)
    }

    /// The one statement that drops the object.
    fn sql(&self) -> String {
        match self.kind {
            "constraint" => format!("ALTER TABLE {} DROP CONSTRAINT {}", self.table, self.name),
            "trigger" => format!("DROP TRIGGER {} ON {}", self.name, self.table),
            _ => format!("DROP INDEX {}", self.name),
        }
    }
}

/// A plain (optionally schema-qualified) SQL identifier, safe to splice into DDL.
fn is_sql_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Parses `KIND:TABLE:NAME[,KIND:TABLE:NAME...]`; `Err((item, why))` names the bad item.
fn parse_drop_guards(value: &str) -> Result<Vec<DropGuard>, (String, String)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let bad = |why: &str| (item.to_owned(), why.to_owned());
            let mut parts = item.splitn(3, ':');
            let (Some(kind), Some(table), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("not KIND:TABLE:NAME"));
            };
            let kind = match kind {
                "constraint" => "constraint",
                "trigger" => "trigger",
                "index" => "index",
                _ => return Err(bad("KIND is not constraint, trigger or index")),
            };
            if !is_sql_name(table) || !is_sql_name(name) {
                return Err(bad("TABLE and NAME must be plain SQL identifiers"));
            }
            Ok(DropGuard {
                kind,
                table: table.to_owned(),
                name: name.to_owned(),
            })
        })
        .collect()
}

/// Appends one line to the runner's log (best effort: a log that cannot be
/// written leaves no `dropped` line, which the runner reports as an error).
fn log_line(log: Option<&std::path::Path>, line: &str) {
    use std::io::Write;
    if let Some(path) = log {
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            eprintln!("warning: cannot append to {}: {e}", path.display());
        }
    }
}

/// Drops every object `wanted` names from the database of `pool`, logging each.
async fn drop_guards(
    pool: &PgPool,
    wanted: &str,
    log: Option<&std::path::Path>,
) -> Result<(), DbError> {
    let guards = parse_drop_guards(wanted).map_err(|(spec, message)| {
        log_line(log, &format!("failed {spec}: {message}"));
        DbError::DropGuard { spec, message }
    })?;
    for guard in guards {
        let spec = guard.spec();
        match pool.execute(guard.sql().as_str()).await {
            Ok(_) => log_line(log, &format!("dropped {spec}")),
            Err(cause) => {
                let message = cause.to_string().replace('\n', " ");
                log_line(log, &format!("failed {spec}: {message}"));
                return Err(DbError::DropGuard { spec, message });
            }
        }
    }
    Ok(())
}

/// A new database with no migrations applied (cloned from `template0`), for testing migrations.
pub async fn empty_database(admin_url: &str) -> Result<FreshDatabase, DbError> {
    let admin_options = parse(admin_url)?;
    let admin = pool(admin_options.clone(), &redact_url(admin_url), 1).await?;
    let created = create_database(&admin, None).await;
    admin.close().await;
    open(admin_url, &admin_options, created?).await
}

/// The admin URL for database tests: `DATABASE_URL`; `Ok(None)` (after saying
/// the test is skipped) when it is unset and `SPENDGATE_SKIP_DB=1`; otherwise
/// [`DbError::NotConfigured`].
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
    conn.execute(format!("CREATE DATABASE {quoted} TEMPLATE template0").as_str())
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
    conn.execute(
        format!("ALTER DATABASE {quoted} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").as_str(),
    )
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
        match admin.execute(sql.as_str()).await {
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
    admin_url: &str,
    admin_options: &PgConnectOptions,
    name: String,
) -> Result<FreshDatabase, DbError> {
    let options = admin_options.clone().database(&name);
    let shown = format!("{} (database {name})", redact_url(admin_url));
    match pool(options.clone(), &shown, FRESH_POOL_SIZE).await {
        Ok(pool) => Ok(FreshDatabase {
            name,
            admin_url: admin_url.to_owned(),
            options,
            pool,
            dropped: false,
        }),
        Err(e) => {
            // Best effort: the connection error is the one worth reporting.
            let _ = drop_database(admin_url, &name).await;
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
    conn.execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(name)).as_str())
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

    #[test]
    fn drop_guard_lists_parse_into_ddl_and_refuse_anything_else() {
        let parsed = parse_drop_guards(
            " constraint:ledger:ck_amount_positive,trigger:ledger_entries:ledger_append_only,,\
             index:approvals:uq_live_approval ",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let sql: Vec<String> = parsed.iter().map(DropGuard::sql).collect();
        assert_eq!(
            sql,
            [
                "ALTER TABLE ledger DROP CONSTRAINT ck_amount_positive",
                "DROP TRIGGER ledger_append_only ON ledger_entries",
                "DROP INDEX uq_live_approval",
            ]
        );
        assert_eq!(
            parsed[1].spec(),
            "trigger:ledger_entries:ledger_append_only"
        );
        assert_eq!(parse_drop_guards(""), Ok(Vec::new()));
        assert_eq!(
            parse_drop_guards("public.approvals:x").map_err(|(_, why)| why),
            Err("not KIND:TABLE:NAME".to_owned())
        );
        for bad in [
            "view:a:b",
            "constraint:a;drop table x:b",
            "index:t:\"x\"",
            "trigger::x",
        ] {
            let err = parse_drop_guards(bad).map(|_| ()).unwrap_err();
            assert_eq!(err.0, bad, "{bad}");
        }
        assert!(parse_drop_guards("constraint:public.t:ck_x").is_ok());
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
        drop_guards(db.pool(), wanted, Some(&log)).await?;
        sqlx::query("INSERT INTO tenants (id) VALUES ('  ')")
            .execute(db.pool())
            .await?;
        sqlx::query("DELETE FROM ledger_entries")
            .execute(db.pool())
            .await?;
        let missing = drop_guards(db.pool(), "index:approvals:uq_no_such_index", Some(&log)).await;
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
