//! `spendgate log checkpoint | public-key | prove | consistency`.
//!
//! Guarantees: each tenant's log is its ledger seen as an RFC 6962 tree
//! (`gate::service::tlog`), computed from the entries when a command asks
//! for it; nothing here runs on an operation's commit path. Signing needs
//! `log_key` (required: without it there is no key to sign with, an error).
//! `checkpoint` signs the tree's current size and root, keeps the note and
//! prints it; `public-key` prints the verifier key a third party checks
//! with; `prove` writes an entry's tlog proof; `consistency` prints the
//! consistency proof from an older size. A ledger that no longer has the
//! root of a kept checkpoint, or that misses an entry, is a failed check
//! (exit 1) naming the tenant and the size; an unknown tenant or entry
//! cannot run (exit 2).

use std::path::Path;
use std::process::ExitCode;

use gate::service::tlog::{self, LogError};
use sqlx::PgPool;

use crate::cli::LogCommand;
use crate::config::Config;
use crate::error::Failure;

/// A log error as the command's failure: a broken or rewritten ledger is a
/// failed check, the rest could not run.
pub fn failure(e: LogError) -> Failure {
    match e {
        LogError::Rewritten { .. } | LogError::Gap { .. } => Failure::CheckFailed(e.to_string()),
        LogError::Database { action, cause } => Failure::database(action, cause),
        LogError::NoSuchEntry { .. } | LogError::NoCheckpoint { .. } => {
            Failure::Input(e.to_string())
        }
        other => Failure::Other(other.to_string()),
    }
}

/// Refuses a tenant the database does not hold.
pub async fn known_tenant(pool: &PgPool, tenant: &str) -> Result<(), Failure> {
    let known: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)")
        .bind(tenant)
        .fetch_one(pool)
        .await
        .map_err(|e| Failure::database("looking the tenant up", e))?;
    if known {
        Ok(())
    } else {
        Err(Failure::Input(format!("tenant {tenant:?} is not a tenant")))
    }
}

pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes)
        .map_err(|e| Failure::Other(format!("cannot write {}: {e}", path.display())))
}

pub async fn run(config: &Config, command: LogCommand) -> Result<ExitCode, Failure> {
    if let LogCommand::PublicKey { tenant } = &command {
        let key = crate::gate_of_config::log_key(config)?;
        println!("{}", key.verifier(tenant).map_err(failure)?.to_text());
        return Ok(ExitCode::SUCCESS);
    }
    let pool = crate::connect::app_pool(config, 1).await?;
    let result = match crate::gate_of_config::integrate_if_keyed(config, &pool).await {
        Ok(()) => run_on(config, &pool, command).await,
        Err(e) => Err(e),
    };
    pool.close().await;
    result
}

async fn run_on(config: &Config, pool: &PgPool, command: LogCommand) -> Result<ExitCode, Failure> {
    let now = chrono::Utc::now();
    match command {
        LogCommand::PublicKey { .. } => Ok(ExitCode::SUCCESS),
        LogCommand::Checkpoint { tenant } => {
            let key = crate::gate_of_config::log_key(config)?;
            let tenants: Vec<String> = match tenant {
                Some(t) => {
                    known_tenant(pool, &t).await?;
                    vec![t]
                }
                None => sqlx::query_scalar("SELECT id FROM tenants ORDER BY id")
                    .fetch_all(pool)
                    .await
                    .map_err(|e| Failure::database("listing the tenants", e))?,
            };
            for t in tenants {
                let signed = tlog::sign_checkpoint(pool, &key, &t, now)
                    .await
                    .map_err(failure)?;
                print!("{}", signed.note);
            }
            Ok(ExitCode::SUCCESS)
        }
        LogCommand::Prove { tenant, seq, out } => {
            let key = crate::gate_of_config::log_key(config)?;
            known_tenant(pool, &tenant).await?;
            let (_, proofs) = tlog::prove_inclusion(pool, &key, &tenant, &[seq], now)
                .await
                .map_err(failure)?;
            let text: String = proofs.iter().map(|p| p.proof.to_text()).collect();
            match out {
                Some(path) => write_file(&path, text.as_bytes())?,
                None => print!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        LogCommand::Consistency {
            tenant,
            from,
            to,
            checkpoint_out,
        } => {
            known_tenant(pool, &tenant).await?;
            let (checkpoint, proof) = tlog::prove_consistency(pool, &tenant, from, to)
                .await
                .map_err(failure)?;
            if let Some(path) = checkpoint_out {
                write_file(&path, checkpoint.note.as_bytes())?;
            }
            print!("{}", proof.to_text());
            Ok(ExitCode::SUCCESS)
        }
    }
}
