//! `spendgate mcp`: the agent's MCP tools over stdio, on the agent's side
//! of the boundary.
//!
//! Guarantees: it holds only the agent's key (`SPENDGATE_AGENT_KEY`) and the
//! service's URL (`SPENDGATE_URL`): it reads no configuration file, opens no
//! database connection and holds no webhook secret; it refuses to start when
//! `DATABASE_URL` is set (an agent's host must not hold it). stdout carries
//! the protocol only.

use std::process::ExitCode;

use crate::error::Failure;

/// The variable holding the agent's key.
pub const AGENT_KEY_ENV: &str = "SPENDGATE_AGENT_KEY";
/// The variable holding the service's URL.
pub const URL_ENV: &str = "SPENDGATE_URL";

pub fn run() -> Result<ExitCode, Failure> {
    if std::env::var_os("DATABASE_URL").is_some_and(|v| !v.is_empty()) {
        return Err(Failure::Other(
            "DATABASE_URL is set: the agent's MCP process must not hold the database login; \
             unset it (spendgate mcp needs only SPENDGATE_AGENT_KEY and SPENDGATE_URL)"
                .into(),
        ));
    }
    let key = std::env::var(AGENT_KEY_ENV)
        .ok()
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| {
            Failure::Other(format!(
                "{AGENT_KEY_ENV} is not set: the agent's key, from \
                 `spendgate keys issue --tenant T --actor AGENT`"
            ))
        })?;
    let url = std::env::var(URL_ENV)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| {
            Failure::Other(format!(
                "{URL_ENV} is not set: the URL of a running `spendgate serve`, e.g. \
                 http://127.0.0.1:8080"
            ))
        })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(format!("starting the async runtime: {e}")))?;
    runtime.block_on(async move {
        let tools = wire::mcp::AgentTools::connect(url.trim(), key.trim())
            .await
            .map_err(|e| {
                Failure::Other(format!(
                    "{AGENT_KEY_ENV} and {URL_ENV} cannot start the tools: {e}"
                ))
            })?;
        wire::mcp::serve_stdio(tools)
            .await
            .map_err(|e| Failure::Other(format!("serving MCP on stdio: {e}")))?;
        Ok(ExitCode::SUCCESS)
    })
}
