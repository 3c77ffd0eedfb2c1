//! `harness ledger verify` and `harness ledger anchor`: check the gate's
//! ledger, one keyed hash chain per tenant, and keep its heads elsewhere.
//!
//! Guarantees:
//! - Both connect to `DATABASE_URL` (or, with `--database NAME`, to the
//!   database NAME on the same server) and hash with the gate's ledger key:
//!   `SPENDGATE_LEDGER_KEY` (its bytes, at least 16), or else the key the gate
//!   derives from its webhook secret `SPENDGATE_WEBHOOK_SECRET`. Without
//!   either there is nothing to verify with: an error (exit 2), never
//!   "intact". The key, the secret and the URL's password are never printed.
//! - `verify` walks every chain (or `--tenant`'s) with
//!   `gate::service::verify_ledger` and prints one line per chain: its
//!   entries and head when intact, or its FIRST broken entry and what is
//!   wrong with it. With `--anchor FILE` (what `anchor` printed earlier) it
//!   also names a chain cut below, or rewritten at, its anchored head.
//!   Exit 0 when every chain is intact, 1 when one is not.
//! - `anchor` verifies every chain first and prints the heads as JSON only
//!   when all are intact (a broken ledger is not worth anchoring: exit 1).
//! - A database that cannot be reached or read, or an anchor file that
//!   cannot be read or is malformed (the error names the file and the
//!   field), is an error (exit 2, from `main`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use gate::service::{Anchor, LedgerKey, LedgerReport};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The ledger key, as the gate was given it.
pub const LEDGER_KEY_ENV: &str = "SPENDGATE_LEDGER_KEY";
/// The gate's webhook secret, from which its default ledger key is derived.
pub const WEBHOOK_SECRET_ENV: &str = "SPENDGATE_WEBHOOK_SECRET";

/// `harness ledger ...`
#[derive(Debug, Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    command: LedgerCommand,
}

#[derive(Debug, Subcommand)]
enum LedgerCommand {
    /// Walk each tenant's chain with the ledger key and name its first broken
    /// entry (exit 1 when one is broken).
    Verify(VerifyArgs),
    /// Verify, then print each tenant's head (tenant, seq, hash) as JSON, to
    /// keep outside the database for `verify --anchor`.
    Anchor(Target),
}

/// Which database, and which key.
#[derive(Debug, Args)]
struct Target {
    /// The database, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    #[command(flatten)]
    target: Target,
    /// Verify only this tenant's chain.
    #[arg(long, value_name = "TENANT")]
    tenant: Option<String>,
    /// An anchor printed earlier by `harness ledger anchor`: also name a chain
    /// cut below, or rewritten at, the head it records.
    #[arg(long, value_name = "FILE")]
    anchor: Option<PathBuf>,
}

pub fn run(args: LedgerArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        LedgerCommand::Verify(verify) => runtime.block_on(verify_ledger(verify)),
        LedgerCommand::Anchor(target) => runtime.block_on(anchor_ledger(target)),
    }
}

/// The ledger key from the environment (see the module docs).
fn ledger_key() -> Result<LedgerKey> {
    let set = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(key) = set(LEDGER_KEY_ENV) {
        return LedgerKey::new(key.as_encoded_bytes()).context(LEDGER_KEY_ENV);
    }
    if let Some(secret) = set(WEBHOOK_SECRET_ENV) {
        return Ok(LedgerKey::derived_from_secret(secret.as_encoded_bytes()));
    }
    bail!(
        "no ledger key: set {LEDGER_KEY_ENV} to the key the gate was given \
         (Gate::with_ledger_key), or {WEBHOOK_SECRET_ENV} to the webhook secret it derives \
         its default key from"
    )
}

/// Reads and checks an anchor file; errors name the file and the field.
fn read_anchor(path: &Path) -> Result<Anchor> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the anchor file {}", path.display()))?;
    Anchor::parse(&text).with_context(|| format!("the anchor file {}", path.display()))
}

async fn connect(target: &Target) -> Result<(PgPool, String)> {
    let url = crate::db::lasting_url("ledger")?;
    let shown = gate::db::redact_url(&url);
    let mut options: PgConnectOptions = url
        .parse()
        .with_context(|| format!("DATABASE_URL {shown} is not a Postgres URL"))?;
    if let Some(name) = &target.database {
        options = options.database(name);
    }
    let described = match &target.database {
        Some(name) => format!("database {name} on {shown}"),
        None => shown.clone(),
    };
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {described}"))?;
    Ok((pool, described))
}

/// One line per chain, and whether all are intact.
fn print_report(report: &LedgerReport) -> bool {
    for chain in &report.chains {
        match &chain.first_break {
            None => println!(
                "{}: intact, {} entries, head {} {}",
                chain.tenant, chain.entries, chain.last_seq, chain.last_hash
            ),
            Some(broken) => println!(
                "{}: BROKEN at entry {}: {} ({} entries before it verified)",
                chain.tenant, broken.seq, broken.problem, chain.entries
            ),
        }
        if let Some(cut) = &chain.anchor_break {
            println!(
                "{}: BROKEN against the anchor at entry {}: {}",
                chain.tenant, cut.seq, cut.problem
            );
        }
    }
    let broken = report.chains.iter().filter(|c| !c.intact()).count();
    if broken == 0 {
        println!(
            "ledger intact: {} chains, {} entries",
            report.chains.len(),
            report.entries
        );
    } else {
        println!(
            "ledger BROKEN: {broken} of {} chains ({} entries verified)",
            report.chains.len(),
            report.entries
        );
    }
    broken == 0
}

async fn verify_ledger(args: VerifyArgs) -> Result<ExitCode> {
    let key = ledger_key()?;
    let anchor = args.anchor.as_deref().map(read_anchor).transpose()?;
    let (pool, described) = connect(&args.target).await?;
    let report = gate::service::verify_ledger(&pool, &key, args.tenant.as_deref(), anchor.as_ref())
        .await
        .with_context(|| format!("reading the ledger of {described}"))?;
    pool.close().await;
    Ok(if print_report(&report) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn anchor_ledger(target: Target) -> Result<ExitCode> {
    let key = ledger_key()?;
    let (pool, described) = connect(&target).await?;
    let report = gate::service::verify_ledger(&pool, &key, None, None)
        .await
        .with_context(|| format!("reading the ledger of {described}"))?;
    pool.close().await;
    if !report.intact() {
        for broken in report.breaks() {
            eprintln!(
                "{}: BROKEN at entry {}: {}",
                broken.tenant, broken.seq, broken.problem
            );
        }
        eprintln!("the ledger is broken: no anchor printed (verify and repair it first)");
        return Ok(ExitCode::from(1));
    }
    println!("{}", report.anchor().to_json());
    Ok(ExitCode::SUCCESS)
}
