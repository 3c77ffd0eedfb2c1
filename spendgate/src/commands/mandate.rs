//! `spendgate mandate keygen | draft | sign | publish`: a human's key pair, a
//! policy signed with it, and its publication.
//!
//! Guarantees: a secret key is written only to its own file (mode 0600 on
//! Unix) and never printed; `sign` refuses a document that is not a mandate
//! (unknown keys included); `publish` goes through the gate's
//! `publish_mandate`, which verifies the signature with the keys file
//! `mandate_keys` names: a human without a configured key cannot publish.
//! The public keys the gate trusts are that file, never database rows.
//! (`import-ap2` is to sit beside these.)

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mandate::{Mandate, SecretKey, SignedMandate};

use crate::cli::MandateCommand;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, command: MandateCommand) -> Result<ExitCode, Failure> {
    match command {
        MandateCommand::Keygen {
            tenant,
            person,
            out,
        } => keygen(&tenant, &person, out),
        MandateCommand::Draft {
            file,
            tenant,
            signer,
        } => draft(&file, &tenant, signer),
        MandateCommand::Sign { file, key, out } => sign(&file, &key, out.as_deref()),
        MandateCommand::Publish { file } => publish(config, &file).await,
        MandateCommand::ImportAp2(args) => import_ap2(args),
    }
}

/// `import-ap2`: a refused mandate is a failed check (exit 1, the text led
/// by its reason code); a file or argument problem could not run (exit 2).
fn import_ap2(args: super::mandate_ap2::ImportAp2Args) -> Result<ExitCode, Failure> {
    use super::mandate_ap2::run;
    match run(args) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.reason() {
            Some(_) => Err(Failure::CheckFailed(e.to_string())),
            None => Err(Failure::Input(e.to_string())),
        },
    }
}

fn keygen(tenant: &str, person: &str, out: Option<PathBuf>) -> Result<ExitCode, Failure> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| Failure::Other(format!("drawing a secret key: {e}")))?;
    let secret = SecretKey::from_seed(&seed);
    let prefix = out.unwrap_or_else(|| PathBuf::from(format!("{tenant}-{person}")));
    let secret_path = prefix.with_extension("key");
    let public_path = prefix.with_extension("pub");
    write_secret(&secret_path, &secret.to_file_text())?;
    let line = format!("{tenant} {person} {}\n", secret.public().to_text());
    std::fs::write(&public_path, &line)
        .map_err(|e| Failure::Other(format!("writing {}: {e}", public_path.display())))?;
    println!(
        "wrote {} (secret) and {}; add this line to the mandate_keys file:",
        secret_path.display(),
        public_path.display()
    );
    print!("{line}");
    Ok(ExitCode::SUCCESS)
}

fn draft(file: &Path, tenant: &str, signer: Option<String>) -> Result<ExitCode, Failure> {
    let loaded = crate::world_file::read(file)?;
    let t = loaded
        .file
        .tenants
        .iter()
        .find(|t| t.id == tenant)
        .ok_or_else(|| Failure::Input(format!("{}: no tenant {tenant}", file.display())))?;
    let signer = signer
        .or_else(|| {
            t.people
                .iter()
                .find(|p| p.may_approve)
                .map(|p| p.id.clone())
        })
        .ok_or_else(|| {
            Failure::Input(format!(
                "{}: {tenant} has no human who may approve",
                file.display()
            ))
        })?;
    let policy = serde_json::to_value(&t.policy)
        .map_err(|e| Failure::Other(format!("the policy of {tenant}: {e}")))?;
    let text = serde_json::to_string_pretty(&Mandate::new(tenant, 1, signer, policy))
        .map_err(|e| Failure::Other(format!("writing the mandate: {e}")))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn write_secret(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| Failure::Other(format!("writing {}: {e}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(|e| Failure::Other(format!("writing {}: {e}", path.display())))
}

fn read(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::Input(format!("{}: {e}", path.display())))
}

fn sign(file: &Path, key: &Path, out: Option<&Path>) -> Result<ExitCode, Failure> {
    let unsigned: Mandate = serde_json::from_slice(&read(file)?)
        .map_err(|e| Failure::Input(format!("{}: not a mandate document: {e}", file.display())))?;
    let key_text = String::from_utf8(read(key)?)
        .map_err(|_| Failure::Input(format!("{}: not a secret key file", key.display())))?;
    let secret = SecretKey::from_file_text(&key_text)
        .map_err(|e| Failure::Input(format!("{}: {e}", key.display())))?;
    let signed = unsigned
        .sign(&secret)
        .map_err(|e| Failure::Input(format!("{}: {e}", file.display())))?;
    let text = serde_json::to_string_pretty(&signed)
        .map_err(|e| Failure::Other(format!("writing the signed mandate: {e}")))?;
    match out {
        Some(path) => std::fs::write(path, text + "\n")
            .map_err(|e| Failure::Other(format!("writing {}: {e}", path.display())))?,
        None => println!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads a signed mandate file.
pub fn signed_mandate(path: &Path) -> Result<SignedMandate, Failure> {
    SignedMandate::from_json(&read(path)?)
        .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))
}

async fn publish(config: &Config, file: &Path) -> Result<ExitCode, Failure> {
    let signed = signed_mandate(file)?;
    let pool = crate::connect::app_pool(config, 2).await?;
    let gate = crate::gate_of_config::open_gate(config, pool)?;
    let outcome = gate
        .publish_mandate(&signed.mandate.tenant, &signed)
        .await
        .map_err(|e| Failure::gate("publishing a mandate", e))?;
    gate.close().await;
    match outcome.reason() {
        None => {
            println!(
                "published version {} of tenant {}",
                outcome.id.as_deref().unwrap_or("?"),
                signed.mandate.tenant
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(reason) => Err(Failure::CheckFailed(format!(
            "{}: the mandate was refused {}",
            file.display(),
            reason.code()
        ))),
    }
}
