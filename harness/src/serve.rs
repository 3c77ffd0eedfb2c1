//! `harness serve`: the gate over HTTP (the `wire` crate), on a loopback port by default.
//!
//! Guarantees: connects to `DATABASE_URL` and applies the migrations, builds
//! the gate (the one place the harness does: [`build_gate`]) with the
//! in-process provider and the webhook secret from `SPENDGATE_WEBHOOK_SECRET`
//! (refused when unset or empty; never printed), binds `--bind`
//! (127.0.0.1:8080 by default), and serves until SIGTERM or Ctrl-C, letting
//! the requests in flight finish. The URL's password is never printed.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use gate::provider::InProcessProvider;
use gate::service::{Gate, SystemClock};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The variable holding the provider's webhook secret.
pub const WEBHOOK_SECRET_ENV: &str = "SPENDGATE_WEBHOOK_SECRET";

/// `harness serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: String,
    /// Seconds one request may take before it is answered 503 TIMEOUT.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    /// Authenticated requests served at once; the rest wait their turn.
    /// /healthz takes none of these, nor does the provider's webhook.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Provider webhooks (the one route open without a key) served at
    /// once, apart from --concurrency.
    #[arg(long, value_name = "N", default_value_t = 8)]
    webhook_concurrency: usize,
    /// Seconds a client has to send its whole body (read before it takes
    /// a permit); past it, 408 BODY_TIMEOUT.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    body_deadline_secs: u64,
    /// The database to serve, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
    /// Connections to the database the gate may hold: size it for the
    /// server (a few per CPU), not for the clients; requests past it wait
    /// for a connection.
    #[arg(long, value_name = "N", default_value_t = POOL_SIZE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pool: u32,
    /// How many of one tenant's proposals may hold a connection at once;
    /// the rest wait in the gate, so one busy tenant never holds the pool.
    /// A tenant's proposals are decided one at a time under its day lock
    /// whatever this is. At most 65536 (more turns than connections is no
    /// limit at all).
    #[arg(long, value_name = "N", default_value_t = gate::service::DEFAULT_TURNS_PER_TENANT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    turns_per_tenant: usize,
}

/// Connects to `DATABASE_URL` (or to the database `database` on the same
/// server) as the application role, after applying the migrations as the
/// owner (`MIGRATION_DATABASE_URL`, or both derived from an administrator's
/// URL: `gate::db::server_urls`).
pub async fn connect(command: &str, database: Option<&str>) -> Result<PgPool> {
    connect_with_pool(command, database, POOL_SIZE).await
}

/// As [`connect`], with a pool of `size` connections.
pub async fn connect_with_pool(command: &str, database: Option<&str>, size: u32) -> Result<PgPool> {
    let url = crate::db::lasting_url(command)?;
    let shown = gate::db::redact_url(&url);
    let urls = gate::db::server_urls(&url).await?;
    let options = |url: &str| -> Result<PgConnectOptions> {
        let options: PgConnectOptions = url
            .parse()
            .with_context(|| format!("DATABASE_URL {shown} is not a Postgres URL"))?;
        Ok(match database {
            Some(name) => options.database(name),
            None => options,
        })
    };
    let owner = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options(&urls.owner)?)
        .await
        .with_context(|| format!("connecting to {shown} as the owner"))?;
    gate::db::migrate(&owner).await?;
    owner.close().await;
    let pool = gate::db::pool_options(size)
        .connect_with(options(&urls.app)?)
        .await
        .with_context(|| format!("connecting to {shown}"))?;
    Ok(pool)
}

/// Connections the served gate may hold unless `--pool` says otherwise.
const POOL_SIZE: u32 = 16;

/// The webhook secret from the environment.
pub fn webhook_secret() -> Result<Vec<u8>> {
    let secret = std::env::var(WEBHOOK_SECRET_ENV).unwrap_or_default();
    if secret.trim().is_empty() {
        bail!(
            "{WEBHOOK_SECRET_ENV} is not set: it verifies the provider's webhooks and keys \
             checkout authority ids (use at least 32 random bytes)"
        );
    }
    Ok(secret.into_bytes())
}

/// The one place the harness builds a served gate.
pub fn build_gate(pool: PgPool, secret: Vec<u8>) -> Result<Gate<InProcessProvider>> {
    Ok(Gate::new(
        pool,
        InProcessProvider::new(),
        secret,
        Arc::new(SystemClock),
    )?)
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let secret = webhook_secret()?;
    let pool = connect_with_pool("serve", args.database.as_deref(), args.pool).await?;
    let gate = Arc::new(build_gate(pool, secret)?.with_turns_per_tenant(args.turns_per_tenant));
    let listener = tokio::net::TcpListener::bind(&args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    let config = wire::WireConfig {
        provider_mode: "in-process",
        request_timeout: Duration::from_secs(args.timeout_secs.max(1)),
        concurrency_limit: args.concurrency.max(1),
        webhook_concurrency_limit: args.webhook_concurrency.max(1),
        body_deadline: Duration::from_secs(args.body_deadline_secs.max(1)),
    };
    eprintln!(
        "spendgate listening on http://{} (provider: in-process; SIGTERM or Ctrl-C stops it)",
        listener.local_addr()?
    );
    wire::serve(listener, gate.clone(), config, wire::shutdown_signal())
        .await
        .context("serving")?;
    gate.pool().close().await;
    eprintln!("spendgate stopped: every request in flight was answered");
    Ok(ExitCode::SUCCESS)
}
