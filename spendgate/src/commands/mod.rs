//! One module per command; [`run`] dispatches and owns the async runtime.
//!
//! Guarantees: every command that writes or verifies the ledger builds its
//! gate through [`crate::gate_of_config::open_gate`]; `mcp` alone reads no
//! configuration file (an agent's host holds only the agent's key and the
//! service's URL).

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

use crate::cli::{Cli, Command};
use crate::config::Config;
use crate::error::Failure;

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
