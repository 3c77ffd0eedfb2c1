//! `spendgate reconcile`: settle every PROVIDER_PENDING request against the
//! configured provider, by its receipt.
//!
//! Guarantees: the same gate `serve` builds (provider, ledger key, webhook
//! secret); prints what it settled and the books as JSON; exit 0 when every
//! request could be asked about, 1 when the provider failed for some (they
//! are left as they were).

use std::process::ExitCode;

use crate::cli::ReconcileArgs;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, args: &ReconcileArgs) -> Result<ExitCode, Failure> {
    let pool = crate::connect::app_pool(config, 2).await?;
    let gate = crate::gate_of_config::open_gate(config, pool)?;
    let tenant = args.tenant.as_deref();
    let done = gate
        .reconcile(tenant)
        .await
        .map_err(|e| Failure::gate("reconciling", e))?;
    let books = gate
        .books(tenant)
        .await
        .map_err(|e| Failure::gate("reading the books", e))?;
    let report = serde_json::json!({
        "provider": gate.provider_health(),
        "tenant": tenant,
        "reconciled": done,
        "books": books,
    });
    println!("{report:#}");
    let failed = done.provider_errors;
    gate.close().await;
    if failed > 0 {
        return Err(Failure::CheckFailed(format!(
            "the provider could not answer for {failed} request(s); they are left as they were"
        )));
    }
    Ok(ExitCode::SUCCESS)
}
