//! `spendgate config check`: what is in force, secrets redacted.

use std::process::ExitCode;

use crate::cli::ConfigCommand;
use crate::config::Config;
use crate::error::Failure;

pub fn run(config: &Config, command: ConfigCommand) -> Result<ExitCode, Failure> {
    let ConfigCommand::Check = command;
    match config.file() {
        Some(path) => println!("configuration file: {}", path.display()),
        None => println!("configuration file: none (the environment only)"),
    }
    for line in config.describe() {
        println!("  {line}");
    }
    // Each value that is set must be valid; what is missing is named by the
    // command that needs it.
    let mut problems = Vec::new();
    if config.get(crate::config::Name::Bind).is_some() {
        problems.extend(config.bind().err().map(|e| e.to_string()));
    }
    problems.extend(config.checkpoint_interval().err().map(|e| e.to_string()));
    for (key, check) in [
        (crate::config::Name::LedgerKey, config.ledger_key().err()),
        (crate::config::Name::LogKey, config.log_key().err()),
        (
            crate::config::Name::WebhookSecret,
            config.webhook_secret().err(),
        ),
        (
            crate::config::Name::WebhookSecretPrevious,
            config.webhook_secret_previous().err(),
        ),
    ] {
        if config.get(key).is_some() {
            problems.extend(check.map(|e| e.to_string()));
        }
    }
    if config.get(crate::config::Name::Provider).is_some() {
        match config.provider() {
            Err(e) => problems.push(e.to_string()),
            Ok(crate::config::ProviderKind::Razorpay) => {
                problems.extend(config.razorpay().err().map(|e| e.to_string()));
            }
            Ok(crate::config::ProviderKind::Demo) => {}
        }
    }
    if problems.is_empty() {
        println!("every setting that is set is valid");
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &problems {
            println!("  problem: {p}");
        }
        Err(Failure::Input(format!(
            "{} setting(s) are not valid (listed above)",
            problems.len()
        )))
    }
}
