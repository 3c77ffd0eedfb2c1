//! What the configuration gives the gate: its ledger and log keys, the
//! humans' mandate keys, and the gate itself.
//!
//! Guarantees: every command that writes or verifies the ledger builds its
//! gate through [`open_gate`], which requires `ledger_key` and
//! `webhook_secret` from the configuration and never derives one from the
//! other; a key that does not parse is an error naming its setting.

use std::path::Path;
use std::sync::Arc;

use gate::service::{Gate, LedgerKey, SystemClock};
use mandate::{Keyring, PublicKey};
use sqlx::PgPool;

use crate::config::{Config, Name};
use crate::error::Failure;
use crate::provider::Provider;

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
    let keys = keys_of_config(config)?;
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

/// The keyring the keys file `mandate_keys` holds: one `TENANT PERSON
/// ed25519:BASE64` a line, `#` comments and blank lines skipped. No file
/// configured: an empty keyring (no policy verifies).
pub fn keys_of_config(config: &Config) -> Result<Keyring, Failure> {
    let Some(path) = config.mandate_keys() else {
        return Ok(Keyring::empty());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::Input(format!("mandate_keys {}: {e}", path.display())))?;
    keys_of_text(&path, &text)
}

fn keys_of_text(path: &Path, text: &str) -> Result<Keyring, Failure> {
    let mut keys = Keyring::empty();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| Failure::Input(format!("{}:{}: {why}", path.display(), n + 1));
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [tenant, person, key] = fields.as_slice() else {
            return Err(bad("expected `TENANT PERSON ed25519:BASE64`".into()));
        };
        let key = PublicKey::from_text(key).map_err(|e| bad(e.to_string()))?;
        keys.insert(tenant, person, key);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_file_names_each_humans_key_and_a_bad_line_by_number() {
        let alice = mandate::world_secret("acme", "alice").public();
        let text = format!("# keys\n\nacme alice {}\n", alice.to_text());
        let keys = keys_of_text(Path::new("k"), &text).expect("reads");
        assert_eq!(keys.key_for("acme", "alice"), Some(alice));
        assert_eq!(keys.key_for("acme", "bob"), None);
        let err = keys_of_text(Path::new("k"), "acme alice\n").expect_err("refused");
        assert!(err.to_string().contains("k:1"), "{err}");
    }
}
