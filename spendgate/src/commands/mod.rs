//! One module per command; [`run`] dispatches and owns the async runtime.
//!
//! Guarantees: every command that writes or verifies the ledger builds its
//! gate through [`open_gate`], which requires `ledger_key` and
//! `webhook_secret` from the configuration and never derives one from the
//! other; `mcp` alone reads no configuration file (an agent's host holds
//! only the agent's key and the service's URL).

mod config_check;
mod evidence;
mod keys;
mod ledger;
mod log;
pub(crate) mod mandate;
pub(crate) mod mandate_ap2;
mod mcp;
mod migrate;
mod reconcile;
mod serve;
mod tenant;

use std::process::ExitCode;
use std::sync::Arc;

use gate::service::{Gate, LedgerKey, SystemClock};
use sqlx::PgPool;

use crate::cli::{Cli, Command};
use crate::config::{Config, Name};
use crate::error::Failure;
use crate::provider::Provider;

/// Runs `cli`'s command to its exit code.
pub fn run(cli: Cli) -> Result<ExitCode, Failure> {
    if let Command::Mcp = cli.command {
        return mcp::run();
    }
    let config = Config::load(cli.config.as_deref(), &|name| std::env::var(name).ok())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(format!("starting the async runtime: {e}")))?;
    runtime.block_on(async move {
        match cli.command {
            Command::Migrate => migrate::run(&config).await,
            Command::Serve(args) => serve::run(&config, &args).await,
            Command::Keys(command) => keys::run(&config, command).await,
            Command::Tenant(command) => tenant::run(&config, command).await,
            Command::Ledger(command) => ledger::run(&config, command).await,
            Command::Log(command) => log::run(&config, command).await,
            Command::Evidence(args) => evidence::run(&config, &args).await,
            Command::Reconcile(args) => reconcile::run(&config, &args).await,
            Command::Config(command) => config_check::run(&config, command),
            Command::Mcp => mcp::run(),
            Command::Mandate(command) => mandate::run(&config, command).await,
        }
    })
}

/// The ledger key from the configuration.
pub fn ledger_key(config: &Config) -> Result<LedgerKey, Failure> {
    let bytes = config.ledger_key()?;
    LedgerKey::new(&bytes).map_err(|e| Failure::Other(format!("{}: {e}", Name::LedgerKey.name())))
}

/// Integrates every committed queued ledger entry into its chain when the
/// configuration holds the ledger key (what `log` and `evidence` run before
/// they read the log); a queued row left out is named on stderr.
pub async fn integrate_if_keyed(config: &Config, pool: &sqlx::PgPool) -> Result<(), Failure> {
    let Ok(key) = ledger_key(config) else {
        return Ok(());
    };
    let done = gate::service::integrate(pool, &key)
        .await
        .map_err(|e| Failure::database("integrating the queued ledger entries", e))?;
    for refused in &done.refused {
        eprintln!("{}: QUEUED ROW REFUSED: {refused}", refused.tenant);
    }
    match done.failed.into_iter().next() {
        Some((tenant, e)) => Err(Failure::database(
            format!("integrating tenant {tenant}'s queued ledger entries"),
            e,
        )),
        None => Ok(()),
    }
}

/// The log key from the configuration.
pub fn log_key(config: &Config) -> Result<gate::service::tlog::LogKey, Failure> {
    let bytes = config.log_key()?;
    gate::service::tlog::LogKey::new(&bytes)
        .map_err(|e| Failure::Other(format!("{}: {e}", Name::LogKey.name())))
}

/// The gate over `pool` with the configured provider, webhook secrets and
/// ledger key, on the system clock.
pub fn open_gate(config: &Config, pool: PgPool) -> Result<Gate<Provider>, Failure> {
    let key = ledger_key(config)?;
    let secret = config.webhook_secret()?;
    let previous = config.webhook_secret_previous()?;
    let provider = Provider::from_config(config, &pool)?;
    let keys = mandate::keys_of_config(config)?;
    let gate = Gate::open(pool, provider, secret, key, Arc::new(SystemClock))
        .map_err(|e| Failure::Other(format!("{}: {e}", Name::WebhookSecret.name())))?
        .with_mandate_keys(keys)
        .with_row_security(config.row_security()?);
    match previous {
        None => Ok(gate),
        Some(previous) => gate
            .with_previous_webhook_secret(previous)
            .map_err(|e| Failure::Other(format!("{}: {e}", Name::WebhookSecretPrevious.name()))),
    }
}
