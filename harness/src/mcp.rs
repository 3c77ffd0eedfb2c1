//! `harness mcp`: the agent's MCP tools (the `wire` crate's) over stdio.
//!
//! Guarantees: the agent is the key in `SPENDGATE_AGENT_KEY` (never an
//! argument, never printed); the tools refuse to start for a malformed,
//! unknown, revoked or human key (exit 2, saying which) and re-check the key
//! at every call. stdout carries the protocol only: logs go to stderr.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use clap::Args;

/// The variable holding the agent's key.
pub const AGENT_KEY_ENV: &str = "SPENDGATE_AGENT_KEY";

/// `harness mcp`
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The database, on the server DATABASE_URL names [default: DATABASE_URL's own].
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

pub fn run(args: McpArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(mcp(args))
}

async fn mcp(args: McpArgs) -> Result<ExitCode> {
    let token = std::env::var(AGENT_KEY_ENV)
        .ok()
        .filter(|k| !k.trim().is_empty())
        .with_context(|| {
            format!("{AGENT_KEY_ENV} is not set: issue one with `harness keys issue --tenant T --actor AGENT`")
        })?;
    let secret = crate::serve::webhook_secret()?;
    let pool = crate::serve::connect("mcp", args.database.as_deref()).await?;
    let gate = Arc::new(crate::serve::build_gate(pool, secret)?);
    let tools = wire::mcp::AgentTools::new(gate.clone(), token.trim())
        .await
        .with_context(|| format!("{AGENT_KEY_ENV} cannot start the tools"))?;
    wire::mcp::serve_stdio(tools)
        .await
        .map_err(|e| anyhow!("serving MCP on stdio: {e}"))?;
    gate.pool().close().await;
    Ok(ExitCode::SUCCESS)
}
