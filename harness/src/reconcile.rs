//! `harness reconcile`: settle every PROVIDER_PENDING request against the provider.
//!
//! Guarantees: a thin wrapper over `gate::service::Gate::reconcile`. It
//! connects to `DATABASE_URL` (or `--database NAME` on the same server),
//! builds a gate with the provider that made the orders — Razorpay Test Mode
//! from `RAZORPAY_KEY_ID` / `RAZORPAY_KEY_SECRET` (a `rzp_live_` key is
//! refused before any request) — and the webhook secret from
//! `RAZORPAY_WEBHOOK_SECRET` (at least 32 bytes), on the system clock.
//! Without keys it refuses to run: reconciling against a provider that holds
//! none of the orders would fail every expired request. `--provider
//! in-process` says so explicitly (demonstrations and tests). It prints what
//! it did and the books as JSON; exit 0 when every request could be asked
//! about, 1 when the provider failed for some (they are left as they were),
//! 2 when it could not run. No key or secret is ever printed.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use gate::provider::{ENV_WEBHOOK_SECRET, InProcessProvider, PaymentProvider, RazorpayProvider};
use gate::service::{Gate, SystemClock};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Which provider to reconcile against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderChoice {
    /// Razorpay Test Mode (RAZORPAY_KEY_ID, RAZORPAY_KEY_SECRET).
    Razorpay,
    /// An in-process provider that holds no orders: every expired request fails.
    InProcess,
}

/// `harness reconcile`
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Only this tenant [default: every tenant].
    #[arg(long)]
    tenant: Option<String>,
    /// The database, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
    /// The provider that made the orders.
    #[arg(long, value_enum, default_value_t = ProviderChoice::Razorpay)]
    provider: ProviderChoice,
}

pub fn run(args: ReconcileArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(reconcile(args))
}

async fn reconcile(args: ReconcileArgs) -> Result<ExitCode> {
    let url = crate::db::lasting_url("reconcile")?;
    let shown = gate::db::redact_url(&url);
    let mut options: PgConnectOptions = url
        .parse()
        .with_context(|| format!("DATABASE_URL {shown} is not a Postgres URL"))?;
    if let Some(name) = &args.database {
        options = options.database(name);
    }
    let secret = std::env::var(ENV_WEBHOOK_SECRET)
        .ok()
        .filter(|s| !s.is_empty())
        .with_context(|| {
            format!("{ENV_WEBHOOK_SECRET} is not set: the gate needs its webhook secret")
        })?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {shown}"))?;
    let code = match args.provider {
        ProviderChoice::Razorpay => {
            let Some(provider) = RazorpayProvider::from_env().context("the Razorpay keys")? else {
                bail!(
                    "RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET are not set: reconcile must ask the \
                     provider that made the orders (--provider in-process reconciles against one \
                     that holds none)"
                );
            };
            settle(pool.clone(), provider, secret, args.tenant.as_deref()).await?
        }
        ProviderChoice::InProcess => {
            settle(
                pool.clone(),
                InProcessProvider::new(),
                secret,
                args.tenant.as_deref(),
            )
            .await?
        }
    };
    pool.close().await;
    Ok(code)
}

async fn settle<P: PaymentProvider + std::fmt::Debug>(
    pool: sqlx::PgPool,
    provider: P,
    secret: String,
    tenant: Option<&str>,
) -> Result<ExitCode> {
    let gate = Gate::new(pool, provider, secret.into_bytes(), Arc::new(SystemClock))
        .context("building the gate")?;
    let health = gate.provider_health();
    let done = gate.reconcile(tenant).await.context("reconciling")?;
    let books = gate.books(tenant).await.context("reading the books")?;
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "provider": health,
            "tenant": tenant,
            "reconciled": done,
            "books": books,
        }))?
    );
    Ok(if done.provider_errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
