//! `spendgate mandate import-ap2 FILE`: an AP2 v0.2 open payment mandate,
//! verified under its issuer's key and mapped onto the gate's policy
//! document, ready for `spendgate mandate sign`.
//!
//! Guarantees: nothing is written unless the mandate verifies and every
//! constraint maps (the refusal names the gate's reason code); the
//! document written is the base policy document with the keys the mandate
//! determines replaced (see the `ap2_import` crate for the mapping); a
//! mandate that carries `payment.budget` is written only together with
//! its delegation budget (`--delegation-out`), so the cumulative budget is
//! never dropped silently. Reads no configuration, database or network.

use std::path::{Path, PathBuf};

use ap2_import::{ImportError, IssuerKey, Mapping};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The arguments of `spendgate mandate import-ap2`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportAp2Args {
    /// The mandate: the issuer-signed SD-JWT in compact form, ending in `~`.
    pub file: PathBuf,
    /// The issuer's (the human's) P-256 public key: an SPKI PEM or an EC JWK file.
    #[arg(long, value_name = "KEY")]
    pub issuer_key: PathBuf,
    /// The policy document the mandate is mapped over (the tenant's policy
    /// in force): keys the mandate does not determine are kept from it.
    #[arg(long, value_name = "POLICY")]
    pub base: PathBuf,
    /// Where to write the policy document (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Where to write the delegation the agent is to be granted
    /// (`{"budget_paise", "currency", "expires_at"}`); required when the
    /// mandate carries `payment.budget`.
    #[arg(long, value_name = "FILE")]
    pub delegation_out: Option<PathBuf>,
    /// The instant the mandate's expiry is judged at, RFC 3339 (default: now).
    #[arg(long, value_name = "RFC3339")]
    pub at: Option<DateTime<Utc>>,
}

/// Why `import-ap2` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportAp2Failure {
    /// The mandate is refused; the text starts with the gate's reason code.
    #[error("{}: {}", .0.reason(), .0)]
    Refused(#[from] ImportError),
    /// A file could not be read or written.
    #[error("{path}: {cause}")]
    File { path: PathBuf, cause: String },
    /// The arguments do not fit the mandate.
    #[error("{0}")]
    Usage(String),
}

impl ImportAp2Failure {
    /// The gate's reason code, for a refused mandate.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            ImportAp2Failure::Refused(e) => Some(e.reason()),
            _ => None,
        }
    }
}

/// Runs the command: verify, map, then write.
pub fn run(args: ImportAp2Args) -> Result<(), ImportAp2Failure> {
    let token = read(&args.file)?;
    let key = IssuerKey::parse(&read(&args.issuer_key)?)?;
    let base = match serde_json::from_str::<Value>(&read(&args.base)?) {
        Ok(Value::Object(map)) => map,
        Ok(_) | Err(_) => {
            return Err(ImportAp2Failure::File {
                path: args.base.clone(),
                cause: "not a JSON object (a policy document)".into(),
            });
        }
    };
    let at = args.at.unwrap_or_else(Utc::now);
    let mapping = ap2_import::import(&token, &key, at)?;
    let policy = mapping.over(&base)?;
    let delegation = delegation(&mapping, &policy);
    if let Some(delegation) = &delegation {
        let Some(path) = &args.delegation_out else {
            return Err(ImportAp2Failure::Usage(format!(
                "the mandate's payment.budget ({} minor units) is a cumulative total, which the gate \
                 keeps as the agent's delegation budget: pass --delegation-out FILE to write it",
                delegation["budget_paise"]
            )));
        };
        write(path, delegation)?;
    }
    let document = Value::Object(policy);
    match &args.out {
        Some(path) => write(path, &document),
        None => {
            println!("{}", pretty(&document));
            Ok(())
        }
    }
}

/// The delegation the mandate's budget asks for, if it has one.
fn delegation(mapping: &Mapping, policy: &Map<String, Value>) -> Option<Value> {
    mapping.delegation_budget_paise.map(|budget| {
        json!({
            "budget_paise": budget,
            "currency": policy.get("currency"),
            "expires_at": policy.get("valid_until"),
        })
    })
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn read(path: &Path) -> Result<String, ImportAp2Failure> {
    std::fs::read_to_string(path).map_err(|e| ImportAp2Failure::File {
        path: path.to_owned(),
        cause: e.to_string(),
    })
}

fn write(path: &Path, value: &Value) -> Result<(), ImportAp2Failure> {
    std::fs::write(path, format!("{}\n", pretty(value))).map_err(|e| ImportAp2Failure::File {
        path: path.to_owned(),
        cause: e.to_string(),
    })
}
