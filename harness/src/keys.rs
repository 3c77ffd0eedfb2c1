//! `harness keys`: issue, list and revoke the bearer API keys of `harness serve`.
//!
//! Guarantees: `issue` prints the new key on stdout exactly once (only its
//! SHA-256 is stored; it cannot be shown again) for an agent or a human that
//! exists in the tenant, and refuses anything else; `revoke` takes the key or
//! its 16-hex id and ends it for good (a second revoke says so and changes
//! nothing); `list` shows ids, actors and dates, never a digest.

use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::Utc;
use clap::{Args, Subcommand};

/// `harness keys ...`
#[derive(Debug, Args)]
pub struct KeysArgs {
    /// The database, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME", global = true)]
    database: Option<String>,
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Issue a key for an agent or a human of a tenant; prints it once.
    Issue {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        actor: String,
    },
    /// Revoke a key, named by the key itself or its 16-hex id.
    Revoke { key: String },
    /// List a tenant's keys (ids, actors, dates).
    List {
        #[arg(long)]
        tenant: String,
    },
}

pub fn run(args: KeysArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(keys(args))
}

async fn keys(args: KeysArgs) -> Result<ExitCode> {
    let pool = crate::serve::connect("keys", args.database.as_deref()).await?;
    let now = Utc::now();
    let code = match args.command {
        KeysCommand::Issue { tenant, actor } => {
            let key = wire::keys::issue(&pool, &tenant, &actor, now).await?;
            eprintln!(
                "issued key {} for {} {} of tenant {} (shown once; only its SHA-256 is stored)",
                key.id,
                key.role.as_str(),
                key.actor,
                key.tenant
            );
            println!("{}", key.token);
            ExitCode::SUCCESS
        }
        KeysCommand::Revoke { key } => {
            if wire::keys::revoke(&pool, &key, now).await? {
                println!("revoked");
            } else {
                println!("already revoked: nothing changed");
            }
            ExitCode::SUCCESS
        }
        KeysCommand::List { tenant } => {
            for k in wire::keys::list(&pool, &tenant).await? {
                let state = k
                    .revoked_at
                    .map_or_else(|| "live".to_owned(), |t| format!("revoked {t}"));
                println!(
                    "{}  {:<6} {:<24} issued {}  {state}",
                    k.id, k.role, k.actor, k.created_at
                );
            }
            ExitCode::SUCCESS
        }
    };
    pool.close().await;
    Ok(code)
}
