//! An evidence bundle on disk, read and checked with the log's public key.
//!
//! The layout `spendgate evidence` writes, of which this module reads the
//! log's part:
//!
//! ```text
//! DIR/checkpoint              the signed checkpoint note
//! DIR/entries/<name>.json     one ledger entry, its stored bytes verbatim
//! DIR/entries/<name>.tlog-proof  its c2sp.org/tlog-proof@v1 proof
//! DIR/proposal.raw            the proposal's body as received (when kept)
//! DIR/provider_events/<event id sha256>.body       an event's body as received
//! DIR/provider_events/<event id sha256>.signature  its signature header as received
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
//!   without its entry and that there is at least one entry; then each raw
//!   file, in name order: its SHA-256 must be the digest a proved entry of
//!   the bundle names for it (`proposal.raw`: the `proposal` entry's
//!   `body_sha256`; an event's `.body` and `.signature`: the
//!   `provider_event` entry of that event id digest, its `body_sha256` and
//!   `signature_sha256`). A changed byte, or a raw file no proved entry
//!   names, is named by its path. (The event's HMAC itself needs the
//!   webhook secret, which a verifier does not hold.)

use std::path::{Path, PathBuf};

use crate::bundle::{Failure, Item, ItemError, check_all};
use crate::merkle::leaf_hash;
use crate::note::VerifierKey;
use crate::proof::TlogProof;
use sha2::{Digest, Sha256};

/// The checkpoint's file name inside a bundle.
pub const CHECKPOINT: &str = "checkpoint";
/// The folder of entries and proofs inside a bundle.
pub const ENTRIES: &str = "entries";
/// An entry's extension.
pub const ENTRY_EXT: &str = "json";
/// A proof's extension.
pub const PROOF_EXT: &str = "tlog-proof";
/// The proposal's body as received.
pub const PROPOSAL_RAW: &str = "proposal.raw";
/// The folder of provider events' raw bodies and signature headers.
pub const EVENTS: &str = "provider_events";
/// An event body's extension (the stem is the event id's SHA-256, hex).
pub const EVENT_BODY_EXT: &str = "body";
/// An event signature header's extension.
pub const EVENT_SIGNATURE_EXT: &str = "signature";

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
    /// The raw files ([`PROPOSAL_RAW`], the events' bodies and signature
    /// headers), by path inside the bundle, in name order.
    pub raw: Vec<(String, Vec<u8>)>,
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
        raw: read_raw(dir)?,
    })
}

/// The raw files present: `proposal.raw` and the events' bodies and
/// signature headers (each optional: a bundle of a request whose bytes were
/// not kept has none).
fn read_raw(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, DirError> {
    let mut raw = Vec::new();
    let proposal = dir.join(PROPOSAL_RAW);
    if proposal.exists() {
        raw.push((PROPOSAL_RAW.to_owned(), read_file(&proposal)?));
    }
    let folder = dir.join(EVENTS);
    if folder.is_dir() {
        let listing = std::fs::read_dir(&folder).map_err(|cause| DirError {
            path: folder.clone(),
            cause,
        })?;
        let mut names = Vec::new();
        for item in listing {
            let item = item.map_err(|cause| DirError {
                path: folder.clone(),
                cause,
            })?;
            if let Some(name) = item.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        for name in names {
            raw.push((format!("{EVENTS}/{name}"), read_file(&folder.join(&name))?));
        }
    }
    Ok(raw)
}

/// The digest a proved entry of the bundle names for the raw file `name`,
/// or why none does.
fn named_digest(entries: &[serde_json::Value], name: &str) -> Result<String, ItemError> {
    let field = |kind: &str, id: Option<&str>, key: &str| {
        entries
            .iter()
            .find(|e| {
                e["kind"] == kind
                    && id.is_none_or(|id| e["body"]["event_id_sha256"].as_str() == Some(id))
            })
            .and_then(|e| e["body"][key].as_str().map(str::to_owned))
    };
    let found = if name == PROPOSAL_RAW {
        field("proposal", None, "body_sha256")
    } else if let Some(file) = name.strip_prefix(&format!("{EVENTS}/")) {
        match file.rsplit_once('.') {
            Some((id, EVENT_BODY_EXT)) => field("provider_event", Some(id), "body_sha256"),
            Some((id, EVENT_SIGNATURE_EXT)) => {
                field("provider_event", Some(id), "signature_sha256")
            }
            _ => None,
        }
    } else {
        None
    };
    found.ok_or_else(|| {
        ItemError::Other("no proved entry of the bundle names this file's SHA-256".into())
    })
}

/// Checks the bundle's log part; the number of items checked, or the first
/// failure named by its path inside the bundle.
pub fn verify(
    files: &BundleFiles,
    log_key: &VerifierKey,
    origin: Option<&str>,
) -> Result<usize, Failure> {
    // The entries as JSON, for the raw files' digests: those items run after
    // every entry verified, so what they read is proved.
    let parsed: Vec<serde_json::Value> = files
        .entries
        .iter()
        .map(|e| serde_json::from_slice(&e.entry).unwrap_or_default())
        .collect();
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
    for (name, bytes) in &files.raw {
        let parsed = &parsed;
        items.push(Item::new(name.clone(), move || {
            let named = named_digest(parsed, name)?;
            let actual = hex_of(&Sha256::digest(bytes));
            if actual != named {
                return Err(ItemError::Other(format!(
                    "its SHA-256 is {actual}, but the proved entry names {named}"
                )));
            }
            Ok(())
        }));
    }
    check_all(&items)
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
            raw: Vec::new(),
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

    /// A bundle of a proposal entry and a provider event entry naming the
    /// digests of `raw`'s files, each proved.
    fn bundle_with_raw(key: &SignerKey) -> BundleFiles {
        let sha = |b: &[u8]| hex_of(&Sha256::digest(b));
        let (proposal, body, signature) =
            (&b"{\"sku\":\"A\0\xff\"}"[..], &b"{}"[..], &b"ab12 "[..]);
        let id = sha(b"evt_1");
        let texts = [
            format!(
                r#"{{"kind":"proposal","body":{{"body_sha256":"{}"}}}}"#,
                sha(proposal)
            ),
            format!(
                r#"{{"kind":"provider_event","body":{{"event_id_sha256":"{id}","body_sha256":"{}","signature_sha256":"{}"}}}}"#,
                sha(body),
                sha(signature)
            ),
        ];
        let mut tree = Tree::new();
        for t in &texts {
            tree.append(t.as_bytes());
        }
        let note = Checkpoint::new(ORIGIN, 2, tree.root()).sign(key).unwrap();
        let entries = (0..2u64)
            .map(|i| EntryFiles {
                stem: format!("{:06}", i + 1),
                entry: texts[i as usize].clone().into_bytes(),
                proof: Some(
                    TlogProof {
                        extra: None,
                        index: i,
                        path: tree.inclusion_proof(i, 2).unwrap(),
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
            raw: vec![
                (PROPOSAL_RAW.to_owned(), proposal.to_vec()),
                (format!("{EVENTS}/{id}.{EVENT_BODY_EXT}"), body.to_vec()),
                (
                    format!("{EVENTS}/{id}.{EVENT_SIGNATURE_EXT}"),
                    signature.to_vec(),
                ),
            ],
        }
    }

    #[test]
    fn each_raw_file_must_have_the_digest_its_proved_entry_names() {
        let v = key().verifier();
        let whole = bundle_with_raw(&key());
        assert_eq!(verify(&whole, &v, None), Ok(7));
        for i in 0..whole.raw.len() {
            let name = whole.raw[i].0.clone();
            for at in 0..whole.raw[i].1.len() {
                let mut b = whole.clone();
                b.raw[i].1[at] ^= 0x01;
                assert_eq!(failed_item(verify(&b, &v, None)), name, "byte {at}");
            }
            let mut b = whole.clone();
            b.raw[i].1.push(b' ');
            assert_eq!(failed_item(verify(&b, &v, None)), name);
        }
        // A raw file no proved entry names.
        let mut b = whole.clone();
        b.raw.push((
            format!("{EVENTS}/{}.{EVENT_BODY_EXT}", "0".repeat(64)),
            b"{}".to_vec(),
        ));
        assert_eq!(
            failed_item(verify(&b, &v, None)),
            format!("{EVENTS}/{}.{EVENT_BODY_EXT}", "0".repeat(64))
        );
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
