//! Checkpoints, tlog-proof files, the witness and the item list, through
//! the library: what verifies, and every named refusal.

use spendgate_verify::bundle::{self, Failure, Item, ItemError};
use spendgate_verify::checkpoint::{self, Checkpoint, CheckpointError};
use spendgate_verify::merkle::{self, MerkleError, Tree, hash_to_base64, leaf_hash};
use spendgate_verify::note::{NoteError, SignerKey, VerifierKey};
use spendgate_verify::proof::{ProofError, TlogProof};
use spendgate_verify::witness::{ConsistencyProof, Witness, WitnessError};

const ORIGIN: &str = "spendgate.example/log/acme";

fn log_key() -> SignerKey {
    SignerKey::from_seed(ORIGIN, &[42; 32]).unwrap()
}

fn other_key() -> SignerKey {
    SignerKey::from_seed(ORIGIN, &[43; 32]).unwrap()
}

fn entries(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{{\"entry\":{i},\"kind\":\"reserve\"}}").into_bytes())
        .collect()
}

fn tree(entries: &[Vec<u8>]) -> Tree {
    let mut t = Tree::new();
    for e in entries {
        t.append(e);
    }
    t
}

fn signed(t: &Tree, size: u64, key: &SignerKey) -> String {
    Checkpoint::new(ORIGIN, size, t.root_at(size).unwrap())
        .sign(key)
        .unwrap()
}

fn proof_file(t: &Tree, index: u64, size: u64, key: &SignerKey) -> String {
    TlogProof {
        extra: None,
        index,
        path: t.inclusion_proof(index, size).unwrap(),
        checkpoint_note: signed(t, size, key),
    }
    .to_text()
}

#[test]
fn a_signed_checkpoint_reads_back_under_its_key() {
    let t = tree(&entries(13));
    let note = signed(&t, 13, &log_key());
    let cp = checkpoint::open(note.as_bytes(), &log_key().verifier(), None).unwrap();
    assert_eq!(cp, Checkpoint::new(ORIGIN, 13, t.root()));
    assert!(note.starts_with(&format!(
        "{ORIGIN}\n13\n{}\n\n\u{2014} {ORIGIN} ",
        cp.root_base64()
    )));
}

#[test]
fn a_checkpoint_signed_with_another_key_is_refused() {
    let t = tree(&entries(5));
    let note = signed(&t, 5, &other_key());
    assert!(matches!(
        checkpoint::open(note.as_bytes(), &log_key().verifier(), None),
        Err(CheckpointError::Note(NoteError::NoTrustedSignature { .. }))
    ));
}

#[test]
fn a_checkpoint_of_another_log_is_refused_by_origin() {
    let t = tree(&entries(3));
    let note = Checkpoint::new("spendgate.example/log/globex", 3, t.root())
        .sign(&log_key())
        .unwrap();
    assert_eq!(
        checkpoint::open(note.as_bytes(), &log_key().verifier(), None),
        Err(CheckpointError::OriginMismatch {
            expected: ORIGIN.into(),
            found: "spendgate.example/log/globex".into(),
        })
    );
}

#[test]
fn any_byte_changed_in_a_checkpoint_is_refused() {
    let t = tree(&entries(9));
    let note = signed(&t, 9, &log_key()).into_bytes();
    let key = log_key().verifier();
    for i in 0..note.len() {
        let mut bad = note.clone();
        bad[i] ^= 0x01;
        assert!(
            checkpoint::open(&bad, &key, None).is_err(),
            "byte {i} changed, accepted"
        );
    }
}

#[test]
fn malformed_checkpoint_bodies_are_refused_with_a_named_reason() {
    let root = hash_to_base64(&tree(&entries(2)).root());
    let empty = hash_to_base64(&merkle::empty_root());
    let cases = [
        (format!("{ORIGIN}\n2\n"), CheckpointError::TooFewLines(2)),
        (format!("\n2\n{root}\n"), CheckpointError::EmptyOrigin),
        (
            format!("{ORIGIN}\n02\n{root}\n"),
            CheckpointError::BadSize("02".into()),
        ),
        (
            format!("{ORIGIN}\n+2\n{root}\n"),
            CheckpointError::BadSize("+2".into()),
        ),
        (
            format!("{ORIGIN}\n18446744073709551616\n{root}\n"),
            CheckpointError::BadSize("18446744073709551616".into()),
        ),
        (
            format!("{ORIGIN}\n2\nAAAA\n"),
            CheckpointError::BadRoot("AAAA".into()),
        ),
        (
            format!("{ORIGIN}\n2\n{root}\n\n"),
            CheckpointError::EmptyExtensionLine(1),
        ),
        (
            format!("{ORIGIN}\n0\n{root}\n"),
            CheckpointError::EmptyTreeRoot(root.clone()),
        ),
        (
            format!("{ORIGIN}\n2\n{root}"),
            CheckpointError::Note(NoteError::MissingFinalNewline),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(Checkpoint::parse_text(&text), Err(want), "{text:?}");
    }
    assert_eq!(
        Checkpoint::parse_text(&format!("{ORIGIN}\n0\n{empty}\n")),
        Ok(Checkpoint::new(ORIGIN, 0, merkle::empty_root()))
    );
    let with_ext = Checkpoint::parse_text(&format!("{ORIGIN}\n2\n{root}\nnote one\n")).unwrap();
    assert_eq!(with_ext.extensions, vec!["note one".to_owned()]);
    let newline_origin = Checkpoint::new("a\nb", 0, merkle::empty_root());
    assert_eq!(
        newline_origin.sign(&log_key()),
        Err(CheckpointError::Unwritable)
    );
}

#[test]
fn every_entry_has_a_tlog_proof_that_verifies_and_reads_back() {
    let es = entries(21);
    let t = tree(&es);
    let key = log_key().verifier();
    for (i, e) in es.iter().enumerate() {
        let text = proof_file(&t, i as u64, 21, &log_key());
        let parsed = TlogProof::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.to_text(), text);
        let cp = parsed.verify(&leaf_hash(e), &key, None).unwrap();
        assert_eq!((cp.size, cp.root), (21, t.root()));
    }
    let with_extra = TlogProof {
        extra: Some(b"request r-1".to_vec()),
        ..TlogProof::parse(proof_file(&t, 0, 21, &log_key()).as_bytes()).unwrap()
    };
    let text = with_extra.to_text();
    assert!(text.starts_with("c2sp.org/tlog-proof@v1\nextra cmVxdWVzdCByLTE=\nindex 0\n"));
    assert_eq!(TlogProof::parse(text.as_bytes()), Ok(with_extra));
}

#[test]
fn a_tlog_proof_for_another_entry_or_index_is_refused() {
    let es = entries(8);
    let t = tree(&es);
    let key = log_key().verifier();
    let parsed = TlogProof::parse(proof_file(&t, 3, 8, &log_key()).as_bytes()).unwrap();
    assert!(matches!(
        parsed.verify(&leaf_hash(&es[4]), &key, None),
        Err(ProofError::Inclusion {
            index: 3,
            source: MerkleError::RootMismatch { .. }
        })
    ));
    let moved = TlogProof {
        index: 2,
        ..parsed.clone()
    };
    assert!(matches!(
        moved.verify(&leaf_hash(&es[3]), &key, None),
        Err(ProofError::Inclusion { index: 2, .. })
    ));
    let beyond = TlogProof {
        index: 8,
        ..parsed.clone()
    };
    assert!(matches!(
        beyond.verify(&leaf_hash(&es[3]), &key, None),
        Err(ProofError::Inclusion {
            source: MerkleError::IndexOutOfRange { index: 8, size: 8 },
            ..
        })
    ));
    let forged_by_other_key = TlogProof::parse(proof_file(&t, 3, 8, &other_key()).as_bytes())
        .unwrap()
        .verify(&leaf_hash(&es[3]), &key, None);
    assert!(matches!(
        forged_by_other_key,
        Err(ProofError::Checkpoint(CheckpointError::Note(
            NoteError::NoTrustedSignature { .. }
        )))
    ));
}

#[test]
fn any_byte_changed_in_a_tlog_proof_is_refused() {
    let es = entries(6);
    let t = tree(&es);
    let key = log_key().verifier();
    let text = proof_file(&t, 4, 6, &log_key()).into_bytes();
    let leaf = leaf_hash(&es[4]);
    let check = |b: &[u8]| TlogProof::parse(b).and_then(|p| p.verify(&leaf, &key, None));
    assert!(check(&text).is_ok());
    for i in 0..text.len() {
        let mut bad = text.clone();
        bad[i] ^= 0x01;
        assert!(check(&bad).is_err(), "byte {i} changed, accepted");
    }
}

#[test]
fn malformed_tlog_proofs_are_refused_with_a_named_reason() {
    let t = tree(&entries(4));
    let good = proof_file(&t, 1, 4, &log_key());
    let (head, note) = good.split_once("\n\n").unwrap();
    let lines: Vec<&str> = head.lines().collect();
    let path = lines[2..].join("\n");
    let cases = [
        (good.replacen("@v1", "@v2", 1), ProofError::BadHeader),
        (
            format!("{}\nextra !!\nindex 1\n{path}\n\n{note}", lines[0]),
            ProofError::BadExtra,
        ),
        (
            format!("{}\nextraAAAA\nindex 1\n{path}\n\n{note}", lines[0]),
            ProofError::BadExtra,
        ),
        (
            format!("{}\nindex 01\n{path}\n\n{note}", lines[0]),
            ProofError::BadIndex,
        ),
        (
            format!("{}\n{path}\n\n{note}", lines[0]),
            ProofError::BadIndex,
        ),
        (
            format!("{}\nindex 1\n{path}\nAAAA\n\n{note}", lines[0]),
            ProofError::BadHash { line: 5 },
        ),
        (
            format!("{}\nindex 1\n{path}\n{note}", lines[0]),
            ProofError::BadHash { line: 5 },
        ),
        (head.to_owned(), ProofError::NoCheckpoint),
    ];
    for (text, want) in cases {
        assert_eq!(TlogProof::parse(text.as_bytes()), Err(want), "{text}");
    }
    let long = format!(
        "{}\nindex 1\n{}\n\n{note}",
        lines[0],
        vec![lines[2]; 64].join("\n")
    );
    assert_eq!(
        TlogProof::parse(long.as_bytes()),
        Err(ProofError::PathTooLong(64))
    );
    assert_eq!(TlogProof::parse(b"\xff\n\n"), Err(ProofError::NotUtf8));
}

fn consistency(t: &Tree, old: u64, new: u64) -> ConsistencyProof {
    ConsistencyProof {
        old_size: old,
        hashes: t.consistency_proof(old, new).unwrap(),
    }
}

fn witness(state: Option<&str>) -> Witness {
    Witness::new(log_key().verifier(), None, state).unwrap()
}

#[test]
fn a_witness_follows_a_growing_log() {
    let t = tree(&entries(30));
    let mut w = witness(None);
    let mut old = 0;
    for size in [0, 1, 2, 7, 8, 8, 19, 30] {
        let cp = w
            .check(&signed(&t, size, &log_key()), &consistency(&t, old, size))
            .unwrap();
        assert_eq!(cp.size, size);
        assert_eq!(w.state(), Some(signed(&t, size, &log_key()).as_str()));
        old = size;
    }
    // The state reads back as the same witness.
    let again = witness(w.state());
    assert_eq!(again.accepted(), w.accepted());
}

#[test]
fn two_checkpoints_of_one_size_with_different_roots_are_named() {
    let honest = tree(&entries(10));
    let mut forked_entries = entries(10);
    forked_entries[9] = b"forged".to_vec();
    let forked = tree(&forked_entries);
    let mut w = witness(Some(&signed(&honest, 10, &log_key())));
    let err = w
        .check(
            &signed(&forked, 10, &log_key()),
            &ConsistencyProof {
                old_size: 10,
                hashes: vec![],
            },
        )
        .unwrap_err();
    assert_eq!(
        err,
        WitnessError::Fork {
            size: 10,
            accepted_root: hash_to_base64(&honest.root()),
            new_root: hash_to_base64(&forked.root()),
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&hash_to_base64(&honest.root()))
            && msg.contains(&hash_to_base64(&forked.root()))
    );
    assert_eq!(w.state(), Some(signed(&honest, 10, &log_key()).as_str()));
}

/// The database owner rewrites an old entry and rebuilds the tree: every
/// proof the rebuilt log can give from the accepted size fails.
#[test]
fn a_rewritten_log_is_refused_by_a_witness_that_kept_an_old_checkpoint() {
    let honest = tree(&entries(12));
    let mut rewritten = entries(20);
    rewritten[3] = b"{\"entry\":3,\"kind\":\"refund\"}".to_vec();
    let rebuilt = tree(&rewritten);
    let accepted = signed(&honest, 12, &log_key());
    let mut w = witness(Some(&accepted));
    let err = w
        .check(
            &signed(&rebuilt, 20, &log_key()),
            &consistency(&rebuilt, 12, 20),
        )
        .unwrap_err();
    let WitnessError::Inconsistent {
        accepted: a,
        new,
        source,
    } = &err
    else {
        panic!("{err}");
    };
    assert!(a.contains(&format!("size 12 root {}", hash_to_base64(&honest.root()))));
    assert!(new.contains(&format!("size 20 root {}", hash_to_base64(&rebuilt.root()))));
    assert!(matches!(source, MerkleError::RootMismatch { .. }));
    assert_eq!(w.state(), Some(accepted.as_str()));
}

#[test]
fn a_witness_refuses_each_malformed_submission_by_name() {
    let t = tree(&entries(16));
    let mut w = witness(Some(&signed(&t, 8, &log_key())));
    let accepted_desc = format!(
        "{ORIGIN} size 8 root {}",
        hash_to_base64(&t.root_at(8).unwrap())
    );
    assert_eq!(
        w.check(&signed(&t, 12, &log_key()), &consistency(&t, 7, 12)),
        Err(WitnessError::OldSizeMismatch {
            claimed: 7,
            accepted_size: 8,
            accepted: accepted_desc.clone(),
        })
    );
    assert_eq!(
        w.check(
            &signed(&t, 5, &log_key()),
            &ConsistencyProof {
                old_size: 8,
                hashes: vec![]
            }
        ),
        Err(WitnessError::Rollback {
            accepted: accepted_desc,
            new: format!(
                "{ORIGIN} size 5 root {}",
                hash_to_base64(&t.root_at(5).unwrap())
            ),
        })
    );
    assert!(matches!(
        w.check(&signed(&t, 12, &other_key()), &consistency(&t, 8, 12)),
        Err(WitnessError::Checkpoint(CheckpointError::Note(
            NoteError::NoTrustedSignature { .. }
        )))
    ));
    let mut short = consistency(&t, 8, 12);
    short.hashes.pop();
    assert!(matches!(
        w.check(&signed(&t, 12, &log_key()), &short),
        Err(WitnessError::Inconsistent {
            source: MerkleError::ProofLength { .. },
            ..
        })
    ));
    let mut fresh = witness(None);
    assert_eq!(
        fresh.check(
            &signed(&t, 4, &log_key()),
            &ConsistencyProof {
                old_size: 0,
                hashes: vec![t.root()]
            }
        ),
        Err(WitnessError::ProofFromEmptyTree)
    );
    assert!(matches!(
        Witness::new(
            log_key().verifier(),
            None,
            Some(&signed(&t, 4, &other_key()))
        ),
        Err(WitnessError::State(_))
    ));
}

#[test]
fn consistency_proof_text_reads_back_and_refuses_malformed_lines() {
    let t = tree(&entries(9));
    let p = consistency(&t, 3, 9);
    assert_eq!(ConsistencyProof::parse(p.to_text().as_bytes()), Ok(p));
    for bad in ["old 3", "old 03\n", "3\n", "old 3\nAAAA\n", "old 3\n\n"] {
        assert!(
            matches!(
                ConsistencyProof::parse(bad.as_bytes()),
                Err(WitnessError::MalformedProof(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn the_item_list_names_the_first_item_that_fails_and_runs_none_after() {
    let es = entries(5);
    let t = tree(&es);
    let key: VerifierKey = log_key().verifier();
    let note = signed(&t, 5, &log_key());
    let proof2 = proof_file(&t, 2, 5, &log_key());
    let ran_after = std::cell::Cell::new(false);
    let items = [
        Item::checkpoint("checkpoint", note.as_bytes(), &key, None),
        Item::included_entry("ledger/2.json", &es[2], proof2.as_bytes(), &key, None),
        Item::included_entry("ledger/3.json", &es[3], proof2.as_bytes(), &key, None),
        Item::new("after", || {
            ran_after.set(true);
            Ok(())
        }),
    ];
    let err = bundle::check_all(&items).unwrap_err();
    let Failure::Item { name, error } = &err else {
        panic!("{err}")
    };
    assert_eq!(name, "ledger/3.json");
    assert!(matches!(
        error,
        ItemError::Proof(ProofError::Inclusion { .. })
    ));
    assert!(err.to_string().starts_with("ledger/3.json: "));
    assert!(!ran_after.get());
    assert_eq!(bundle::check_all(&items[..2]), Ok(2));
    assert_eq!(bundle::check_all(&[]), Err(Failure::Empty));
}
