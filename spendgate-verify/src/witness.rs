//! A witness: it keeps the last checkpoint it accepted from one log and
//! accepts a newer one only with a consistency proof from it
//! (`c2sp.org/tlog-witness`, without the cosignature).
//!
//! Guarantees:
//! - The state is the accepted checkpoint note verbatim (text anyone can
//!   check again); a witness with no state has accepted the empty tree.
//! - [`Witness::check`] accepts a checkpoint only if it verifies under the
//!   log's key with the log's origin, the proof's old size is the accepted
//!   size, the proof is empty from size 0, and the consistency proof from
//!   the accepted tree verifies (the same size needs the same root). Every
//!   refusal is a named [`WitnessError`] that states both checkpoints: a
//!   log rewritten or forked after the accepted checkpoint is caught here.
//! - A refused checkpoint leaves the state unchanged.
//!
//! The consistency proof is read in the `add-checkpoint` request layout of
//! `c2sp.org/tlog-witness` without the checkpoint: an `old <size>` line then
//! one base64 hash per line.

use crate::checkpoint::{self, Checkpoint, CheckpointError, parse_decimal, parse_hash};
use crate::merkle::{self, Hash, MerkleError, hash_to_base64};
use crate::note::VerifierKey;

/// Why a witness refused a checkpoint (or its own state).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    #[error("the new checkpoint: {0}")]
    Checkpoint(CheckpointError),
    #[error("the witness state: {0}")]
    State(CheckpointError),
    #[error("the consistency proof is malformed: {0}")]
    MalformedProof(String),
    #[error(
        "the proof is from size {claimed}, the accepted checkpoint {accepted} has size {accepted_size}"
    )]
    OldSizeMismatch {
        claimed: u64,
        accepted_size: u64,
        accepted: String,
    },
    #[error("the new checkpoint {new} is smaller than the accepted {accepted}")]
    Rollback { accepted: String, new: String },
    #[error(
        "two checkpoints of size {size} with different roots: accepted {accepted_root}, new {new_root}"
    )]
    Fork {
        size: u64,
        accepted_root: String,
        new_root: String,
    },
    #[error("a consistency proof from the empty tree must be empty")]
    ProofFromEmptyTree,
    #[error("the new checkpoint {new} is not consistent with the accepted {accepted}: {source}")]
    Inconsistent {
        accepted: String,
        new: String,
        #[source]
        source: MerkleError,
    },
}

/// A consistency proof as submitted to a witness: the old size and the
/// hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyProof {
    pub old_size: u64,
    pub hashes: Vec<Hash>,
}

impl ConsistencyProof {
    /// Parses `old <size>\n` then one base64 hash per line.
    pub fn parse(bytes: &[u8]) -> Result<Self, WitnessError> {
        let bad = |why: &str| WitnessError::MalformedProof(why.to_owned());
        let s = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
        let body = s
            .strip_suffix('\n')
            .ok_or_else(|| bad("it does not end in a newline"))?;
        let mut lines = body.split('\n');
        let old_size = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .and_then(parse_decimal)
            .ok_or_else(|| bad("the first line is not `old <size>`"))?;
        let mut hashes = Vec::new();
        for (i, l) in lines.enumerate() {
            let h = parse_hash(l)
                .ok_or_else(|| bad(&format!("line {} is not a base64 hash", i + 2)))?;
            hashes.push(h);
        }
        if hashes.len() > 63 {
            return Err(bad("more than 63 hashes"));
        }
        Ok(Self { old_size, hashes })
    }

    /// The text layout [`ConsistencyProof::parse`] reads.
    pub fn to_text(&self) -> String {
        let mut out = format!("old {}\n", self.old_size);
        for h in &self.hashes {
            out.push_str(&hash_to_base64(h));
            out.push('\n');
        }
        out
    }
}

/// A witness of one log.
#[derive(Debug, Clone)]
pub struct Witness {
    log_key: VerifierKey,
    origin: String,
    accepted: Option<(Checkpoint, String)>,
}

fn describe(c: &Checkpoint) -> String {
    format!(
        "{} size {} root {}",
        c.origin,
        c.size,
        hash_to_base64(&c.root)
    )
}

impl Witness {
    /// A witness of the log with this key and origin (the key's name when
    /// `origin` is `None`), from its state: the accepted checkpoint note, or
    /// `None` for a witness that has accepted nothing yet.
    pub fn new(
        log_key: VerifierKey,
        origin: Option<&str>,
        state: Option<&str>,
    ) -> Result<Self, WitnessError> {
        let origin = origin.unwrap_or(log_key.name()).to_owned();
        let accepted = match state {
            None => None,
            Some(note) => {
                let cp = checkpoint::open(note.as_bytes(), &log_key, Some(&origin))
                    .map_err(WitnessError::State)?;
                Some((cp, note.to_owned()))
            }
        };
        Ok(Self {
            log_key,
            origin,
            accepted,
        })
    }

    /// The accepted checkpoint, if any.
    pub fn accepted(&self) -> Option<&Checkpoint> {
        self.accepted.as_ref().map(|(c, _)| c)
    }

    /// The state to keep: the accepted checkpoint note, verbatim.
    pub fn state(&self) -> Option<&str> {
        self.accepted.as_ref().map(|(_, n)| n.as_str())
    }

    /// Checks a new checkpoint note against the accepted one; on success the
    /// new one becomes the accepted one and is returned.
    pub fn check(
        &mut self,
        note: &str,
        proof: &ConsistencyProof,
    ) -> Result<Checkpoint, WitnessError> {
        let new = checkpoint::open(note.as_bytes(), &self.log_key, Some(&self.origin))
            .map_err(WitnessError::Checkpoint)?;
        let (accepted_size, accepted_root) = self
            .accepted()
            .map_or((0, merkle::empty_root()), |c| (c.size, c.root));
        let accepted_text = self.accepted().map_or_else(
            || format!("{} size 0 (nothing accepted)", self.origin),
            describe,
        );
        if proof.old_size != accepted_size {
            return Err(WitnessError::OldSizeMismatch {
                claimed: proof.old_size,
                accepted_size,
                accepted: accepted_text,
            });
        }
        if new.size < accepted_size {
            return Err(WitnessError::Rollback {
                accepted: accepted_text,
                new: describe(&new),
            });
        }
        if new.size == accepted_size && new.root != accepted_root {
            return Err(WitnessError::Fork {
                size: new.size,
                accepted_root: hash_to_base64(&accepted_root),
                new_root: hash_to_base64(&new.root),
            });
        }
        if accepted_size == 0 {
            if !proof.hashes.is_empty() {
                return Err(WitnessError::ProofFromEmptyTree);
            }
        } else {
            merkle::verify_consistency(
                accepted_size,
                new.size,
                &proof.hashes,
                &accepted_root,
                &new.root,
            )
            .map_err(|source| WitnessError::Inconsistent {
                accepted: accepted_text.clone(),
                new: describe(&new),
                source,
            })?;
        }
        self.accepted = Some((new.clone(), note.to_owned()));
        Ok(new)
    }
}
