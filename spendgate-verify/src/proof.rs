//! Inclusion proofs in the `c2sp.org/tlog-proof@v1` text format.
//!
//! ```text
//! c2sp.org/tlog-proof@v1
//! extra <base64>            (optional, not authenticated)
//! index <decimal>
//! <base64 hash>             (zero or more: the audit path, leaf to root)
//!
//! <the checkpoint note, verbatim>
//! ```
//!
//! Guarantees:
//! - [`TlogProof::parse`] accepts exactly that layout (at most 63 path
//!   lines, decimals without leading zeros, canonical base64, 32-byte
//!   hashes) and refuses anything else with a named [`ProofError`];
//!   [`TlogProof::to_text`] writes what it reads.
//! - [`TlogProof::verify`] succeeds only if the checkpoint verifies under the
//!   log's key with the expected origin and the audit path binds the given
//!   leaf hash at the stated index to the checkpoint's root and size. The
//!   `extra` data plays no part in it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::checkpoint::{self, Checkpoint, CheckpointError, parse_decimal, parse_hash};
use crate::merkle::{self, Hash, MerkleError, hash_to_base64};
use crate::note::VerifierKey;

/// The first line of every proof.
pub const HEADER: &str = "c2sp.org/tlog-proof@v1";

/// The most audit-path lines a proof may have (a tree of `2^63` leaves).
pub const MAX_PATH: usize = 63;

/// Why a proof file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the proof is not valid UTF-8")]
    NotUtf8,
    #[error("the proof does not start with the line {HEADER}")]
    BadHeader,
    #[error("the proof's extra line is not `extra <base64>`")]
    BadExtra,
    #[error("the proof has no `index <decimal>` line where one is due")]
    BadIndex,
    #[error("proof line {line} is not the base64 of a 32-byte hash")]
    BadHash { line: usize },
    #[error("the proof has {0} path lines, more than {MAX_PATH}")]
    PathTooLong(usize),
    #[error("the proof has no blank line before its checkpoint")]
    NoCheckpoint,
    #[error("the proof's checkpoint: {0}")]
    Checkpoint(#[from] CheckpointError),
    #[error("the inclusion proof of entry {index} does not verify: {source}")]
    Inclusion {
        index: u64,
        #[source]
        source: MerkleError,
    },
}

/// A parsed tlog proof: the entry's index, its audit path and the checkpoint
/// note (verbatim, with its signatures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlogProof {
    pub extra: Option<Vec<u8>>,
    pub index: u64,
    pub path: Vec<Hash>,
    pub checkpoint_note: String,
}

impl TlogProof {
    /// Parses the text format.
    pub fn parse(bytes: &[u8]) -> Result<Self, ProofError> {
        let s = std::str::from_utf8(bytes).map_err(|_| ProofError::NotUtf8)?;
        let (head, note) = s.split_once("\n\n").ok_or(ProofError::NoCheckpoint)?;
        let mut lines = head.split('\n').enumerate().peekable();
        if lines.next().map(|(_, l)| l) != Some(HEADER) {
            return Err(ProofError::BadHeader);
        }
        let mut extra = None;
        if let Some((_, l)) = lines.next_if(|(_, l)| l.starts_with("extra")) {
            let b64 = l.strip_prefix("extra ").ok_or(ProofError::BadExtra)?;
            extra = Some(STANDARD.decode(b64).map_err(|_| ProofError::BadExtra)?);
        }
        let index = lines
            .next()
            .and_then(|(_, l)| l.strip_prefix("index "))
            .and_then(parse_decimal)
            .ok_or(ProofError::BadIndex)?;
        let mut path = Vec::new();
        for (i, l) in lines {
            path.push(parse_hash(l).ok_or(ProofError::BadHash { line: i + 1 })?);
        }
        if path.len() > MAX_PATH {
            return Err(ProofError::PathTooLong(path.len()));
        }
        Ok(Self {
            extra,
            index,
            path,
            checkpoint_note: note.to_owned(),
        })
    }

    /// The text format.
    pub fn to_text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        if let Some(extra) = &self.extra {
            out.push_str(&format!("extra {}\n", STANDARD.encode(extra)));
        }
        out.push_str(&format!("index {}\n", self.index));
        for h in &self.path {
            out.push_str(&hash_to_base64(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint_note);
        out
    }

    /// Verifies the checkpoint under the log's key and origin, then the
    /// inclusion of `leaf_hash` at the proof's index; returns the checkpoint.
    pub fn verify(
        &self,
        leaf_hash: &Hash,
        log_key: &VerifierKey,
        origin: Option<&str>,
    ) -> Result<Checkpoint, ProofError> {
        let cp = checkpoint::open(self.checkpoint_note.as_bytes(), log_key, origin)?;
        merkle::verify_inclusion(self.index, cp.size, leaf_hash, &self.path, &cp.root).map_err(
            |source| ProofError::Inclusion {
                index: self.index,
                source,
            },
        )?;
        Ok(cp)
    }
}
