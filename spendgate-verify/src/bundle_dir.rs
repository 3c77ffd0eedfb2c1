//! An evidence bundle on disk, read and checked with the log's public key.
//!
//! The layout `spendgate evidence` writes, of which this module reads the
//! log's part:
//!
//! ```text
//! DIR/checkpoint              the signed checkpoint note
//! DIR/entries/<name>.json     one ledger entry, its stored bytes verbatim
//! DIR/entries/<name>.tlog-proof  its c2sp.org/tlog-proof@v1 proof
//! ```
//!
//! (The bundle's other files, the request, policy, approvals, authority,
//! order and provider events as the database holds them, are for a reader;
//! nothing here checks them.)
//!
//! Guarantees:
//! - [`read`] reads exactly those files; a missing or unreadable checkpoint
//!   or `entries` folder is a [`DirError`] (the check could not run).
//! - [`verify`] checks, with [`crate::bundle::check_all`] and in this order:
//!   the checkpoint under the log's key and origin; then each entry, in name
//!   order, against its proof (the proof's checkpoint must verify, must be
//!   the bundle's checkpoint byte for byte, and its audit path must bind the
//!   entry's RFC 6962 leaf hash to that root); then that no proof is left
//!   without its entry and that there is at least one entry. It names the
//!   first item that fails, by its path inside the bundle.

use std::path::{Path, PathBuf};

use crate::bundle::{Failure, Item, ItemError, check_all};
use crate::merkle::leaf_hash;
use crate::note::VerifierKey;
use crate::proof::TlogProof;

/// The checkpoint's file name inside a bundle.
pub const CHECKPOINT: &str = "checkpoint";
/// The folder of entries and proofs inside a bundle.
pub const ENTRIES: &str = "entries";
/// An entry's extension.
pub const ENTRY_EXT: &str = "json";
/// A proof's extension.
pub const PROOF_EXT: &str = "tlog-proof";

/// A bundle that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {cause}")]
pub struct DirError {
    pub path: PathBuf,
    pub cause: std::io::Error,
}

/// One entry and its proof (absent when the bundle has none for it).
#[derive(Debug, Clone)]
pub struct EntryFiles {
    /// The file's stem (`entries/<stem>.json`).
    pub stem: String,
    pub entry: Vec<u8>,
    pub proof: Option<Vec<u8>>,
}

/// The log's part of a bundle, as read.
#[derive(Debug, Clone)]
pub struct BundleFiles {
    pub checkpoint: Vec<u8>,
    /// In name order.
    pub entries: Vec<EntryFiles>,
    /// Stems of proofs with no entry beside them.
    pub orphan_proofs: Vec<String>,
}

fn read_file(path: &Path) -> Result<Vec<u8>, DirError> {
    std::fs::read(path).map_err(|cause| DirError {
        path: path.to_owned(),
        cause,
    })
}

/// Reads the checkpoint, the entries and the proofs of the bundle at `dir`.
pub fn read(dir: &Path) -> Result<BundleFiles, DirError> {
    let checkpoint = read_file(&dir.join(CHECKPOINT))?;
    let folder = dir.join(ENTRIES);
    let listing = std::fs::read_dir(&folder).map_err(|cause| DirError {
        path: folder.clone(),
        cause,
    })?;
    let mut entries = Vec::new();
    let mut proofs = Vec::new();
    for item in listing {
        let item = item.map_err(|cause| DirError {
            path: folder.clone(),
            cause,
        })?;
        let path = item.path();
        let (Some(stem), Some(ext)) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) else {
            continue;
        };
        match ext {
            ENTRY_EXT => entries.push(stem.to_owned()),
            PROOF_EXT => proofs.push(stem.to_owned()),
            _ => {}
        }
    }
    entries.sort();
    proofs.sort();
    let mut out = Vec::with_capacity(entries.len());
    for stem in &entries {
        let entry = read_file(&folder.join(format!("{stem}.{ENTRY_EXT}")))?;
        let proof = if proofs.binary_search(stem).is_ok() {
            Some(read_file(&folder.join(format!("{stem}.{PROOF_EXT}")))?)
        } else {
            None
        };
        out.push(EntryFiles {
            stem: stem.clone(),
            entry,
            proof,
        });
    }
    let orphan_proofs = proofs
        .into_iter()
        .filter(|p| entries.binary_search(p).is_err())
        .collect();
    Ok(BundleFiles {
        checkpoint,
        entries: out,
        orphan_proofs,
    })
}

/// Checks the bundle's log part; the number of items checked, or the first
/// failure named by its path inside the bundle.
pub fn verify(
    files: &BundleFiles,
    log_key: &VerifierKey,
    origin: Option<&str>,
) -> Result<usize, Failure> {
    let mut items = vec![Item::checkpoint(
        CHECKPOINT,
        &files.checkpoint,
        log_key,
        origin,
    )];
    for e in &files.entries {
        let name = format!("{ENTRIES}/{}.{ENTRY_EXT}", e.stem);
        let proof_name = format!("{ENTRIES}/{}.{PROOF_EXT}", e.stem);
        items.push(Item::new(name, move || {
            let Some(proof) = &e.proof else {
                return Err(ItemError::Other(format!("{proof_name} is missing")));
            };
            let parsed = TlogProof::parse(proof)?;
            if parsed.checkpoint_note.as_bytes() != files.checkpoint.as_slice() {
                return Err(ItemError::Other(format!(
                    "the checkpoint in {proof_name} is not the bundle's {CHECKPOINT}"
                )));
            }
            parsed.verify(&leaf_hash(&e.entry), log_key, origin)?;
            Ok(())
        }));
    }
    for stem in &files.orphan_proofs {
        items.push(Item::new(
            format!("{ENTRIES}/{stem}.{PROOF_EXT}"),
            move || {
                Err(ItemError::Other(format!(
                    "a proof with no {stem}.{ENTRY_EXT} beside it"
                )))
            },
        ));
    }
    let entries = files.entries.len();
    items.push(Item::new(ENTRIES, move || {
        if entries == 0 {
            Err(ItemError::Other("the bundle holds no entry".into()))
        } else {
            Ok(())
        }
    }));
    check_all(&items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::merkle::Tree;
    use crate::note::SignerKey;

    const ORIGIN: &str = "spendgate/acme";

    fn bundle(key: &SignerKey) -> BundleFiles {
        let texts: Vec<Vec<u8>> = (1..=5)
            .map(|i| format!("{{\"seq\":{i}}}").into_bytes())
            .collect();
        let mut tree = Tree::new();
        for t in &texts {
            tree.append(t);
        }
        let note = Checkpoint::new(ORIGIN, 5, tree.root()).sign(key).unwrap();
        let entries = [1u64, 3]
            .iter()
            .map(|&seq| EntryFiles {
                stem: format!("{seq:06}"),
                entry: texts[seq as usize - 1].clone(),
                proof: Some(
                    TlogProof {
                        extra: None,
                        index: seq - 1,
                        path: tree.inclusion_proof(seq - 1, 5).unwrap(),
                        checkpoint_note: note.clone(),
                    }
                    .to_text()
                    .into_bytes(),
                ),
            })
            .collect();
        BundleFiles {
            checkpoint: note.into_bytes(),
            entries,
            orphan_proofs: Vec::new(),
        }
    }

    fn key() -> SignerKey {
        SignerKey::from_seed(ORIGIN, &[5; 32]).unwrap()
    }

    fn failed_item(r: Result<usize, Failure>) -> String {
        match r {
            Err(Failure::Item { name, .. }) => name,
            other => panic!("expected a named failure, got {other:?}"),
        }
    }

    #[test]
    fn a_whole_bundle_verifies_item_by_item() {
        let b = bundle(&key());
        assert_eq!(verify(&b, &key().verifier(), None), Ok(4));
    }

    #[test]
    fn a_missing_proof_an_orphan_proof_and_no_entry_are_named() {
        let v = key().verifier();
        let mut b = bundle(&key());
        b.entries[1].proof = None;
        assert_eq!(failed_item(verify(&b, &v, None)), "entries/000003.json");
        let mut b = bundle(&key());
        b.orphan_proofs.push("000009".into());
        assert_eq!(
            failed_item(verify(&b, &v, None)),
            "entries/000009.tlog-proof"
        );
        let mut b = bundle(&key());
        b.entries.clear();
        assert_eq!(failed_item(verify(&b, &v, None)), "entries");
    }

    #[test]
    fn a_proof_against_another_checkpoint_is_named() {
        let v = key().verifier();
        let mut b = bundle(&key());
        let other = bundle(&key());
        b.checkpoint = Checkpoint::new(ORIGIN, 0, crate::merkle::empty_root())
            .sign(&key())
            .unwrap()
            .into_bytes();
        assert_eq!(failed_item(verify(&b, &v, None)), "entries/000001.json");
        assert!(verify(&other, &v, None).is_ok());
    }
}
