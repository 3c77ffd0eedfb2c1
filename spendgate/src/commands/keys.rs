//! `spendgate keys issue|list|revoke`: the bearer keys of the service.
//!
//! Guarantees: `issue` prints the new key on stdout exactly once (only its
//! SHA-256 is stored; it cannot be shown again) for an agent or a human that
//! exists in the tenant (with `--auditor`, a person's read-only key: the
//! pages, no gate operation), and refuses anything else; `revoke` takes the key or
//! its 16-hex id and ends it for good (a second revoke says so and changes
//! nothing); `list` shows ids, actors and dates, never a digest. It
//! connects as the onboarding role (`onboard_database_url`): the gate's own
//! login cannot insert a key. `issue` needs the ledger key: each key row
//! carries the gate's MAC, and the gate authenticates no row without one.

use std::process::ExitCode;

use chrono::Utc;

use crate::cli::KeysCommand;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, command: KeysCommand) -> Result<ExitCode, Failure> {
    let pool = crate::connect::onboard_pool(config, 1).await?;
    let now = Utc::now();
    let key = crate::gate_of_config::ledger_key(config)?;
    let result =
        match command {
            KeysCommand::Issue {
                tenant,
                actor,
                auditor,
            } => if auditor {
                gate::service::api_keys::issue_auditor(&pool, &key, &tenant, &actor, now).await
            } else {
                gate::service::api_keys::issue(&pool, &key, &tenant, &actor, now).await
            }
            .map(|key| {
                eprintln!(
                    "issued key {} for {} {} of tenant {} (shown once; only its SHA-256 is stored)",
                    key.id,
                    key.role.as_str(),
                    key.actor,
                    key.tenant
                );
                println!("{}", key.token);
            }),
            KeysCommand::Revoke { key } => gate::service::api_keys::revoke(&pool, &key, now)
                .await
                .map(|revoked| match revoked {
                    true => println!("revoked"),
                    false => println!("already revoked: nothing changed"),
                }),
            KeysCommand::List { tenant } => gate::service::api_keys::list(&pool, &tenant)
                .await
                .map(|keys| {
                    for k in keys {
                        let state = k
                            .revoked_at
                            .map_or_else(|| "live".to_owned(), |t| format!("revoked {t}"));
                        println!(
                            "{}  {:<6} {:<24} issued {}  {state}",
                            k.id, k.role, k.actor, k.created_at
                        );
                    }
                }),
        };
    pool.close().await;
    result.map_err(|e| Failure::Input(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}
