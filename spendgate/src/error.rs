//! What can stop a spendgate command, and the exit code each means.
//!
//! Guarantees: every failure is one [`Failure`] whose text says what went
//! wrong and, where the operator can act, what to do; none carries a secret
//! (database URLs are shown redacted by their builders). Exit codes: 1 a
//! check failed (a broken ledger, a refused plan), 2 the command could not
//! run (configuration, input, database, provider).

use std::process::ExitCode;

use crate::config::ConfigError;

/// Why a command stopped.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database could not be reached, read or written.
    #[error("{doing}: {cause}")]
    Database { doing: String, cause: String },
    /// The gate could not run an operation (its own text names it).
    #[error("{doing}: {cause}")]
    Gate { doing: String, cause: String },
    /// A file the operator gave is not usable; the text names file, line and field.
    #[error("{0}")]
    Input(String),
    /// The check the command runs failed (already reported on stdout).
    #[error("{0}")]
    CheckFailed(String),
    /// Anything else the command could not do (the text names it).
    #[error("{0}")]
    Other(String),
}

impl Failure {
    /// A database failure while `doing`.
    pub fn database(doing: impl Into<String>, cause: impl std::fmt::Display) -> Self {
        Failure::Database {
            doing: doing.into(),
            cause: cause.to_string(),
        }
    }

    /// A gate failure while `doing`.
    pub fn gate(doing: impl Into<String>, cause: impl std::fmt::Display) -> Self {
        Failure::Gate {
            doing: doing.into(),
            cause: cause.to_string(),
        }
    }

    /// The process's exit code for this failure.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Failure::CheckFailed(_) => ExitCode::from(1),
            _ => ExitCode::from(2),
        }
    }
}
