//! Transparency-log checkpoints (`c2sp.org/tlog-checkpoint`): a signed
//! note whose text is the log's origin, its tree size and its root.
//!
//! Guarantees:
//! - [`Checkpoint::parse_text`] accepts exactly the specification's body:
//!   a non-empty origin line, a decimal size with no leading zero (`0` for
//!   the empty tree), the standard base64 of a 32-byte root, then optional
//!   non-empty extension lines; an empty tree must carry the empty-tree
//!   root. Anything else is a named [`CheckpointError`].
//! - [`open`] returns a checkpoint only when its note verifies under the
//!   log's key and its origin is the one expected: a checkpoint from another
//!   log, or signed by another key, is refused.
//! - [`Checkpoint::to_text`] and [`Checkpoint::sign`] write the same body
//!   [`Checkpoint::parse_text`] reads back.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::merkle::{Hash, empty_root, hash_to_base64};
use crate::note::{self, NoteError, SignerKey, VerifierKey};

/// Why a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint note: {0}")]
    Note(#[from] NoteError),
    #[error("a checkpoint has at least three lines (origin, size, root), this one has {0}")]
    TooFewLines(usize),
    #[error("the checkpoint's origin line is empty")]
    EmptyOrigin,
    #[error("the checkpoint's size line {0:?} is not a decimal without leading zeros")]
    BadSize(String),
    #[error("the checkpoint's root line {0:?} is not the base64 of 32 bytes")]
    BadRoot(String),
    #[error("extension line {0} of the checkpoint is empty")]
    EmptyExtensionLine(usize),
    #[error("the checkpoint has size 0 but its root {0} is not the empty tree's")]
    EmptyTreeRoot(String),
    #[error("the checkpoint's origin or an extension line holds a newline")]
    Unwritable,
    #[error("the checkpoint is from log {found:?}, not the expected {expected:?}")]
    OriginMismatch { expected: String, found: String },
}

/// A log's tree head: origin, size and root (and any extension lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
    pub extensions: Vec<String>,
}

/// Parses a decimal with no sign and no leading zero (`0` itself allowed).
pub(crate) fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

/// Decodes the canonical standard base64 of a 32-byte hash.
pub(crate) fn parse_hash(s: &str) -> Option<Hash> {
    STANDARD
        .decode(s)
        .ok()
        .and_then(|b| Hash::try_from(b.as_slice()).ok())
}

impl Checkpoint {
    /// A checkpoint with no extension line.
    pub fn new(origin: &str, size: u64, root: Hash) -> Self {
        Self {
            origin: origin.to_owned(),
            size,
            root,
            extensions: Vec::new(),
        }
    }

    /// Parses a checkpoint body (the note text, ending in a newline).
    pub fn parse_text(text: &str) -> Result<Self, CheckpointError> {
        let body = text
            .strip_suffix('\n')
            .ok_or(NoteError::MissingFinalNewline)?;
        let lines: Vec<&str> = body.split('\n').collect();
        let [origin, size, root, extensions @ ..] = lines.as_slice() else {
            return Err(CheckpointError::TooFewLines(lines.len()));
        };
        if origin.is_empty() {
            return Err(CheckpointError::EmptyOrigin);
        }
        let size = parse_decimal(size).ok_or_else(|| CheckpointError::BadSize((*size).into()))?;
        let root = parse_hash(root).ok_or_else(|| CheckpointError::BadRoot((*root).into()))?;
        if let Some(i) = extensions.iter().position(|l| l.is_empty()) {
            return Err(CheckpointError::EmptyExtensionLine(i + 1));
        }
        if size == 0 && root != empty_root() {
            return Err(CheckpointError::EmptyTreeRoot(hash_to_base64(&root)));
        }
        Ok(Self {
            origin: (*origin).to_owned(),
            size,
            root,
            extensions: extensions.iter().map(|l| (*l).to_owned()).collect(),
        })
    }

    /// The checkpoint body, ending in a newline.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            hash_to_base64(&self.root)
        );
        for e in &self.extensions {
            out.push_str(e);
            out.push('\n');
        }
        out
    }

    /// The signed checkpoint note.
    pub fn sign(&self, signer: &SignerKey) -> Result<String, CheckpointError> {
        if self.origin.contains('\n') || self.extensions.iter().any(|e| e.contains('\n')) {
            return Err(CheckpointError::Unwritable);
        }
        let text = self.to_text();
        Self::parse_text(&text)?;
        Ok(note::sign(&text, &[signer])?)
    }

    /// The root in standard base64.
    pub fn root_base64(&self) -> String {
        hash_to_base64(&self.root)
    }
}

/// Verifies a signed checkpoint under the log's key and checks its origin
/// (which defaults to the key's name when `origin` is `None`).
pub fn open(
    note_bytes: &[u8],
    log_key: &VerifierKey,
    origin: Option<&str>,
) -> Result<Checkpoint, CheckpointError> {
    let verified = note::open(note_bytes, std::slice::from_ref(log_key))?;
    let checkpoint = Checkpoint::parse_text(&verified.text)?;
    let expected = origin.unwrap_or(log_key.name());
    if checkpoint.origin != expected {
        return Err(CheckpointError::OriginMismatch {
            expected: expected.to_owned(),
            found: checkpoint.origin,
        });
    }
    Ok(checkpoint)
}
