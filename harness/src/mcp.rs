//! `harness mcp`: the agent's MCP tools (the `wire` crate's) over stdio, an
//! HTTP client of a running `harness serve`.
//!
//! Guarantees: what it holds is the service's URL (`SPENDGATE_URL`) and the
//! agent's key (`SPENDGATE_AGENT_KEY`, never an argument, never printed): no
//! database, no webhook secret, no migrations. It refuses to start (exit 2,
//! saying why) when `DATABASE_URL` is set (an agent host must not hold it),
//! when either variable is missing, when the service cannot be reached, or
//! when the service says the key is malformed, unknown, revoked or a
//! human's. stdout carries the protocol only: logs go to stderr.

use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;

/// The variable holding the agent's key.
pub const AGENT_KEY_ENV: &str = "SPENDGATE_AGENT_KEY";
/// The variable holding the service's URL.
pub const URL_ENV: &str = "SPENDGATE_URL";

/// `harness mcp`: takes no arguments; it reads SPENDGATE_URL and
/// SPENDGATE_AGENT_KEY, and refuses to start when DATABASE_URL is set.
#[derive(Debug, Args)]
pub struct McpArgs {}

pub fn run(_args: McpArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(mcp())
}

/// A variable's value, trimmed; `None` when unset or blank.
fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

async fn mcp() -> Result<ExitCode> {
    if std::env::var_os(gate::db::DATABASE_URL_ENV).is_some() {
        bail!(
            "{} is set: an agent host must not hold it. The MCP tools reach the gate \
             only through the service ({URL_ENV}); unset {} in the agent's environment",
            gate::db::DATABASE_URL_ENV,
            gate::db::DATABASE_URL_ENV
        );
    }
    let url = var(URL_ENV).with_context(|| {
        format!(
            "{URL_ENV} is not set: the URL of a running `harness serve`, e.g. http://127.0.0.1:8080"
        )
    })?;
    let key = var(AGENT_KEY_ENV).with_context(|| {
        format!(
            "{AGENT_KEY_ENV} is not set: issue one with `harness keys issue --tenant T --actor AGENT`"
        )
    })?;
    let tools = wire::mcp::AgentTools::connect(&url, &key)
        .await
        .with_context(|| format!("{AGENT_KEY_ENV} and {URL_ENV} cannot start the tools"))?;
    wire::mcp::serve_stdio(tools)
        .await
        .map_err(|e| anyhow!("serving MCP on stdio: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
