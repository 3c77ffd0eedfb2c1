//! `spendgate serve`: the gate over HTTP (the `wire` crate), and the
//! checkpoint signer beside it.
//!
//! Guarantees: every setting is checked before anything listens: the
//! provider (a `rzp_live_` key stops it here), the ledger key, the log key,
//! the checkpoint interval, the webhook secrets and the address; then the
//! database is reached as the application role, on a schema `spendgate
//! migrate` made current. The checkpoint signer
//! (`gate::service::checkpointer`) signs the checkpoint of each tenant whose
//! ledger grew once before the service listens and then every
//! `checkpoint_interval_ms` while it serves; its errors are logged, never
//! fatal. It serves until SIGTERM or Ctrl-C, lets the requests in
//! flight finish, then stops the signer after its tick in flight.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::cli::ServeArgs;
use crate::config::{Config, ProviderKind};
use crate::error::Failure;

pub async fn run(config: &Config, args: &ServeArgs) -> Result<ExitCode, Failure> {
    if config.provider()? == ProviderKind::Razorpay {
        config.razorpay()?;
    }
    crate::gate_of_config::ledger_key(config)?;
    let log_key = crate::gate_of_config::log_key(config)?;
    let interval = config.checkpoint_interval()?;
    config.webhook_secret()?;
    config.webhook_secret_previous()?;
    let bind = config.bind()?;
    let pool = crate::connect::app_pool(config, args.pool).await?;
    let gate = crate::gate_of_config::open_gate(config, pool)?
        .with_turns_per_tenant(args.turns_per_tenant);
    let mode = gate.provider().mode();
    let gate = Arc::new(gate);
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| Failure::Other(format!("binding {bind} (bind): {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::Other(format!("reading the bound address: {e}")))?;
    let wire_config = wire::WireConfig {
        provider_mode: mode,
        request_timeout: Duration::from_secs(args.timeout_secs),
        concurrency_limit: usize::try_from(args.concurrency).unwrap_or(usize::MAX),
        webhook_concurrency_limit: usize::try_from(args.webhook_concurrency).unwrap_or(usize::MAX),
        body_deadline: Duration::from_secs(args.body_deadline_secs),
        log_key: Some(log_key.clone()),
    };
    // The first tick covers what was committed before this start (a signer
    // stopped or killed before its tick included) before anything listens.
    let signer = gate.checkpointer(log_key, interval).start().await;
    eprintln!(
        "spendgate listening on http://{local} (provider: {mode}; checkpoints every {} ms; \
         SIGTERM or Ctrl-C stops it)",
        interval.as_millis()
    );
    let served = wire::serve(listener, gate.clone(), wire_config, wire::shutdown_signal()).await;
    signer.stop().await;
    served.map_err(|e| Failure::Other(format!("serving on {local}: {e}")))?;
    gate.close().await;
    eprintln!("spendgate stopped: every request in flight was answered");
    Ok(ExitCode::SUCCESS)
}
