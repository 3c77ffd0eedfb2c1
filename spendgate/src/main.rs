//! `spendgate`: what an operator runs. The gate over HTTP, its migrations,
//! onboarding, keys, the ledger's check, reconcile, and the agent's MCP tools.
//!
//! Guarantees: a thin entry point. It parses the command line
//! ([`cli::Cli`]), runs the command ([`commands::run`]) and turns a
//! [`error::Failure`] into one line on stderr and its exit code: 0 success,
//! 1 a check failed, 2 the command could not run. Logs go to stderr.
#![forbid(unsafe_code)]

mod cli;
mod commands;
mod config;
mod connect;
mod error;
mod gate_of_config;
mod provider;
mod world_file;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SPENDGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match commands::run(cli) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("spendgate: {failure}");
            failure.exit_code()
        }
    }
}
