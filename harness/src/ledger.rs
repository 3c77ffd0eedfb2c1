//! `harness ledger verify`: walk the gate's hash-chained ledger.
//!
//! Guarantees: connects to `DATABASE_URL` (or, with `--database NAME`, to the
//! database NAME on the same server), walks every entry with
//! `gate::service::verify_ledger`, and prints one line: the number of entries
//! and the last hash when the chain is intact (exit 0), or the FIRST broken
//! entry and what is wrong with it (exit 1). A database that cannot be
//! reached or read is an error (exit 2, from `main`), never "intact". The
//! URL's password is never printed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// `harness ledger ...`
#[derive(Debug, Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    command: LedgerCommand,
}

#[derive(Debug, Subcommand)]
enum LedgerCommand {
    /// Walk the ledger's hash chain and name the first broken entry (exit 1 when broken).
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The database to verify, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

pub fn run(args: LedgerArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        LedgerCommand::Verify(verify) => runtime.block_on(verify_ledger(verify)),
    }
}

async fn verify_ledger(args: VerifyArgs) -> Result<ExitCode> {
    let url = std::env::var(gate::db::DATABASE_URL_ENV)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .context(
            "DATABASE_URL is not set: point it at the gate's Postgres server \
         (`export \"$(harness db up)\"` starts a throwaway one)",
        )?;
    let shown = gate::db::redact_url(&url);
    let mut options: PgConnectOptions = url
        .parse()
        .with_context(|| format!("DATABASE_URL {shown} is not a Postgres URL"))?;
    if let Some(name) = &args.database {
        options = options.database(name);
    }
    let target = match &args.database {
        Some(name) => format!("database {name} on {shown}"),
        None => shown.clone(),
    };
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {target}"))?;
    let report = gate::service::verify_ledger(&pool)
        .await
        .with_context(|| format!("reading the ledger of {target}"))?;
    pool.close().await;
    match &report.first_break {
        None => {
            println!(
                "ledger intact: {} entries, last hash {}",
                report.entries, report.last_hash
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(broken) => {
            println!(
                "ledger BROKEN at entry {}: {} ({} entries before it verified)",
                broken.seq, broken.problem, report.entries
            );
            Ok(ExitCode::from(1))
        }
    }
}
