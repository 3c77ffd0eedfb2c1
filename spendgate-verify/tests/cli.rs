//! The `spendgate-verify` binary: exit 0 when a check passes, 1 when it
//! fails (naming what failed), 2 when it cannot run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use spendgate_verify::checkpoint::Checkpoint;
use spendgate_verify::merkle::{Tree, hash_to_base64, leaf_hash};
use spendgate_verify::note::SignerKey;
use spendgate_verify::proof::TlogProof;
use spendgate_verify::witness::ConsistencyProof;

const ORIGIN: &str = "spendgate.example/log/acme";

fn log_key() -> SignerKey {
    SignerKey::from_seed(ORIGIN, &[42; 32]).unwrap()
}

fn vkey() -> String {
    log_key().verifier().to_text()
}

fn entry(i: usize) -> Vec<u8> {
    format!("{{\"entry\":{i}}}").into_bytes()
}

fn tree(n: usize, rewrite: Option<usize>) -> Tree {
    let mut t = Tree::new();
    for i in 0..n {
        if rewrite == Some(i) {
            t.append(b"rewritten");
        } else {
            t.append(&entry(i));
        }
    }
    t
}

fn signed(t: &Tree, size: u64, key: &SignerKey) -> String {
    Checkpoint::new(ORIGIN, size, t.root_at(size).unwrap())
        .sign(key)
        .unwrap()
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_spendgate-verify"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn verify_checkpoint_passes_fails_and_cannot_run_with_distinct_exits() {
    let dir = tempfile::tempdir().unwrap();
    let t = tree(7, None);
    let good = write(dir.path(), "good", signed(&t, 7, &log_key()));
    let (code, out, _) = run(&["verify-checkpoint", "--key", &vkey(), s(&good)]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!(
        "{ORIGIN} size 7 root {}",
        hash_to_base64(&t.root())
    )));

    let other = SignerKey::from_seed(ORIGIN, &[9; 32]).unwrap();
    let forged = write(dir.path(), "forged", signed(&t, 7, &other));
    let (code, _, err) = run(&["verify-checkpoint", "--key", &vkey(), s(&forged)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no signature by a trusted key"), "{err}");

    let (code, _, err) = run(&["verify-checkpoint", "--key", "nonsense", s(&good)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--key"), "{err}");
    let (code, _, err) = run(&["verify-checkpoint", "--key", &vkey(), "/nonexistent/cp"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, _) = run(&["verify-checkpoint"]);
    assert_eq!(code, Some(2));
}

#[test]
fn verify_inclusion_checks_the_entry_against_its_proof() {
    let dir = tempfile::tempdir().unwrap();
    let t = tree(10, None);
    let proof = TlogProof {
        extra: None,
        index: 6,
        path: t.inclusion_proof(6, 10).unwrap(),
        checkpoint_note: signed(&t, 10, &log_key()),
    };
    let proof_path = write(dir.path(), "6.tlog-proof", proof.to_text());
    let right = write(dir.path(), "6.json", entry(6));
    let wrong = write(dir.path(), "7.json", entry(7));
    let k = vkey();
    let (code, out, err) = run(&[
        "verify-inclusion",
        "--key",
        &k,
        "--entry",
        s(&right),
        s(&proof_path),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("entry 6"), "{out}");
    let b64 = hash_to_base64(&leaf_hash(&entry(6)));
    let (code, _, err) = run(&[
        "verify-inclusion",
        "--key",
        &k,
        "--leaf-hash",
        &b64,
        s(&proof_path),
    ]);
    assert_eq!(code, Some(0), "{err}");

    let (code, _, err) = run(&[
        "verify-inclusion",
        "--key",
        &k,
        "--entry",
        s(&wrong),
        s(&proof_path),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("6.tlog-proof") && err.contains("inclusion proof of entry 6"),
        "{err}"
    );

    let mut tampered = proof.to_text().into_bytes();
    tampered[30] ^= 0x01;
    let tampered = write(dir.path(), "tampered.tlog-proof", tampered);
    let (code, _, err) = run(&[
        "verify-inclusion",
        "--key",
        &k,
        "--entry",
        s(&right),
        s(&tampered),
    ]);
    assert_eq!(code, Some(1), "{err}");
    let (code, _, err) = run(&["verify-inclusion", "--key", &k, s(&proof_path)]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn witness_keeps_the_last_checkpoint_and_refuses_a_rewritten_log() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("acme.state");
    let honest = tree(20, None);
    let k = vkey();
    let witness = |cp: &str, old: u64, hashes: Vec<[u8; 32]>| {
        let cp = write(dir.path(), "cp", cp);
        let proof = write(
            dir.path(),
            "proof",
            ConsistencyProof {
                old_size: old,
                hashes,
            }
            .to_text(),
        );
        run(&[
            "witness",
            "--state",
            s(&state),
            "--key",
            &k,
            s(&cp),
            s(&proof),
        ])
    };

    let (code, out, err) = witness(&signed(&honest, 8, &log_key()), 0, vec![]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("size 8"));
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        signed(&honest, 8, &log_key())
    );
    let (code, _, err) = witness(
        &signed(&honest, 15, &log_key()),
        8,
        honest.consistency_proof(8, 15).unwrap(),
    );
    assert_eq!(code, Some(0), "{err}");

    let rebuilt = tree(20, Some(2));
    let (code, _, err) = witness(
        &signed(&rebuilt, 20, &log_key()),
        15,
        rebuilt.consistency_proof(15, 20).unwrap(),
    );
    assert_eq!(code, Some(1), "{err}");
    let accepted_root = hash_to_base64(&honest.root_at(15).unwrap());
    assert!(
        err.contains(&format!("size 15 root {accepted_root}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("size 20 root {}", hash_to_base64(&rebuilt.root()))),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        signed(&honest, 15, &log_key()),
        "a refused checkpoint leaves the state as it was"
    );

    let (code, _, err) = witness(&signed(&rebuilt, 15, &log_key()), 15, vec![]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("two checkpoints of size 15 with different roots"),
        "{err}"
    );
    assert!(err.contains(&accepted_root), "{err}");

    std::fs::write(&state, "not a checkpoint\n").unwrap();
    let (code, _, err) = witness(&signed(&honest, 20, &log_key()), 15, vec![]);
    assert_eq!(code, Some(2), "{err}");
}

/// A bundle folder of entries 2 and 5 of a 7-entry tree.
fn bundle_dir(dir: &Path) {
    let t = tree(7, None);
    let note = signed(&t, 7, &log_key());
    std::fs::create_dir_all(dir.join("entries")).unwrap();
    write(dir, "checkpoint", &note);
    for index in [2u64, 5] {
        let stem = format!("entries/{:06}", index + 1);
        write(dir, &format!("{stem}.json"), entry(index as usize));
        let proof = TlogProof {
            extra: None,
            index,
            path: t.inclusion_proof(index, 7).unwrap(),
            checkpoint_note: note.clone(),
        };
        write(dir, &format!("{stem}.tlog-proof"), proof.to_text());
    }
}

#[test]
fn verify_bundle_exits_0_then_1_naming_the_changed_file_then_2_when_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundle");
    bundle_dir(&dir);
    let d = dir.to_str().unwrap();
    let (code, out, err) = run(&["verify-bundle", "--key", &vkey(), d]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("4 items, 2 entries"), "{out}");

    let entry = dir.join("entries/000006.json");
    let mut bytes = std::fs::read(&entry).unwrap();
    bytes[2] ^= 0x01;
    std::fs::write(&entry, bytes).unwrap();
    let (code, _, err) = run(&["verify-bundle", "--key", &vkey(), d]);
    assert_eq!(code, Some(1));
    assert!(err.contains("entries/000006.json"), "{err}");

    let other = SignerKey::from_seed(ORIGIN, &[7; 32])
        .unwrap()
        .verifier()
        .to_text();
    bundle_dir(&dir);
    let (code, _, err) = run(&["verify-bundle", "--key", &other, d]);
    assert_eq!(code, Some(1));
    assert!(err.contains(": checkpoint:"), "{err}");

    std::fs::remove_file(dir.join("checkpoint")).unwrap();
    let (code, _, err) = run(&["verify-bundle", "--key", &vkey(), d]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("checkpoint"), "{err}");
}
