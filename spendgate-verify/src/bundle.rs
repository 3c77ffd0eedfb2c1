//! Checking a list of named evidence items in order, stopping at the first
//! that fails.
//!
//! Guarantees:
//! - [`check_all`] runs the items in the order given and returns the name
//!   and reason of the first one that fails; it runs none after it.
//! - An empty list is refused ([`Failure::Empty`]): evidence that checks
//!   nothing proves nothing.
//!
//! This is the seam for an evidence bundle's reader: it maps each file of
//! the bundle to an [`Item`] (a checkpoint, an entry's `.tlog-proof`
//! against the entry's bytes, or any check of its own) and hands the list
//! here.

use crate::checkpoint::{self, CheckpointError};
use crate::merkle::leaf_hash;
use crate::note::VerifierKey;
use crate::proof::{ProofError, TlogProof};

/// Why one item did not check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error("{0}")]
    Other(String),
}

/// The first failure of a list of items.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("there is nothing to check")]
    Empty,
    #[error("{name}: {error}")]
    Item { name: String, error: ItemError },
}

/// One named check.
pub struct Item<'a> {
    pub name: String,
    check: Box<dyn Fn() -> Result<(), ItemError> + 'a>,
}

impl<'a> Item<'a> {
    /// An item running `check`.
    pub fn new(name: impl Into<String>, check: impl Fn() -> Result<(), ItemError> + 'a) -> Self {
        Self {
            name: name.into(),
            check: Box::new(check),
        }
    }

    /// A checkpoint note that must verify under the log's key and origin.
    pub fn checkpoint(
        name: impl Into<String>,
        note: &'a [u8],
        log_key: &'a VerifierKey,
        origin: Option<&'a str>,
    ) -> Self {
        Self::new(name, move || {
            checkpoint::open(note, log_key, origin)?;
            Ok(())
        })
    }

    /// An entry whose RFC 6962 leaf hash its `.tlog-proof` proves included
    /// in a checkpoint that verifies under the log's key and origin.
    pub fn included_entry(
        name: impl Into<String>,
        entry: &'a [u8],
        proof: &'a [u8],
        log_key: &'a VerifierKey,
        origin: Option<&'a str>,
    ) -> Self {
        Self::new(name, move || {
            TlogProof::parse(proof)?.verify(&leaf_hash(entry), log_key, origin)?;
            Ok(())
        })
    }
}

/// Runs the items in order; the count checked, or the first failure.
pub fn check_all(items: &[Item<'_>]) -> Result<usize, Failure> {
    if items.is_empty() {
        return Err(Failure::Empty);
    }
    for item in items {
        (item.check)().map_err(|error| Failure::Item {
            name: item.name.clone(),
            error,
        })?;
    }
    Ok(items.len())
}
