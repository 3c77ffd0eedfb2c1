//! `spendgate evidence` and `spendgate log` end to end, on a ledger a served
//! gate wrote: a captured purchase's bundle verifies offline with the
//! tenant's public log key, any byte of an entry, a proof or the checkpoint
//! changed is named, a ledger rewritten by the database's owner is refused
//! by a witness that kept an older checkpoint, and a checkpoint signed with
//! another key is refused. The offline checks run through
//! `spendgate_verify`'s library (the `spendgate-verify` binary's own code;
//! its exit codes are tested in `spendgate-verify/tests/cli.rs`).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gate::service::tlog;
use spendgate_verify::bundle::Failure;
use spendgate_verify::bundle_dir;
use spendgate_verify::checkpoint::{self, CheckpointError};
use spendgate_verify::note::{NoteError, VerifierKey};
use spendgate_verify::witness::{ConsistencyProof, Witness, WitnessError};
use sqlx::Executor;
use support::*;

const LOG_KEY: &str = "log-key-of-the-spendgate-evidence-tests-0123456789";
const OTHER_LOG_KEY: &str = "another-log-key-nobody-should-trust-0123456789";

fn sg(db: &Db, work: &Path) -> Command {
    let mut c = spendgate(db, work);
    c.env("SPENDGATE_LOG_KEY", LOG_KEY);
    c
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn public_key(db: &Db, work: &Path) -> VerifierKey {
    let text = ok(sg(db, work).args(["log", "public-key", "--tenant", "acme"]));
    VerifierKey::parse(text.trim()).unwrap()
}

/// Proposes `n` SNACK-BOXes through a served gate.
async fn propose(db: &Db, work: &Path, agent: &str, n: usize) {
    let served = Served::start({
        let mut c = sg(db, work);
        c.arg("serve");
        c
    });
    for _ in 0..n {
        let (status, body) = call(
            reqwest::Method::POST,
            &format!("{}/v1/requests", served.url),
            agent,
            Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
        )
        .await;
        assert!((200..300).contains(&status), "{status}: {body}");
    }
    served.stop();
}

/// A captured purchase's bundle, written to `work/bundle`: (request, folder).
async fn captured_bundle(db: &Db, work: &Path) -> (String, PathBuf) {
    let (agent, human) = onboard(db, work);
    let served = Served::start({
        let mut c = sg(db, work);
        c.arg("serve");
        c
    });
    let (request, order) = purchase(&served.url, &agent, &human).await;
    let sent = send_webhook(&served.url, &order, 25_000);
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    assert_eq!(state_of(&served.url, &agent, &request).await, "CAPTURED");
    served.stop();
    let dir = work.join("bundle");
    let out = ok(sg(db, work)
        .args(["evidence", &request, "--tenant", "acme", "--out"])
        .arg(&dir));
    assert!(out.contains(&request), "{out}");
    (request, dir)
}

fn verify_dir(dir: &Path, key: &VerifierKey) -> Result<usize, Failure> {
    bundle_dir::verify(&bundle_dir::read(dir).unwrap(), key, None)
}

fn failed_name(r: Result<usize, Failure>) -> String {
    match r {
        Err(Failure::Item { name, .. }) => name,
        other => panic!("expected a named failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_captured_purchase_bundle_verifies_and_any_changed_byte_is_named() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (request, dir) = captured_bundle(&db, work.path()).await;
    let key = public_key(&db, work.path());
    assert_eq!(key.name(), "spendgate/acme");

    let files = bundle_dir::read(&dir).unwrap();
    let kinds: Vec<String> = files
        .entries
        .iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_slice(&e.entry).unwrap();
            v["kind"].as_str().unwrap().to_owned()
        })
        .collect();
    for kind in [
        "proposal",
        "decision",
        "authority.issued",
        "authority.consumed",
        "order.created",
        "provider_event",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
    let checked = verify_dir(&dir, &key).unwrap();
    // The checkpoint, the entries, "entries", and three raw files: the
    // proposal's body, the capture's body and its signature header.
    assert_eq!(
        files.raw.len(),
        3,
        "{:?}",
        files.raw.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    assert_eq!(checked, files.entries.len() + 2 + 3);

    // The records beside the log, and what the README says of them.
    let read_json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    assert_eq!(read_json("request.json")["id"], request.as_str());
    assert_eq!(read_json("request.json")["state"], "CAPTURED");
    assert_eq!(read_json("proposal.json")["proposal"]["sku"], "SNACK-BOX");
    assert_eq!(read_json("proposal.json")["raw_body"], "proposal.raw");
    let raw = std::fs::read(dir.join("proposal.raw")).unwrap();
    assert_eq!(
        read_json("request.json")["body_sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&raw))
    );
    assert!(raw.starts_with(b"{"), "{raw:?}");
    // Each raw file with one byte changed is named by its path.
    for (name, bytes) in &files.raw {
        let mut changed = files.clone();
        let at = changed.raw.iter().position(|(n, _)| n == name).unwrap();
        changed.raw[at].1[bytes.len() / 2] ^= 0x20;
        assert_eq!(failed_name(bundle_dir::verify(&changed, &key, None)), *name);
    }
    assert!(read_json("policy.json")["policy"].is_object());
    assert_eq!(read_json("authority.json")["request_id"], request.as_str());
    assert_eq!(
        read_json("provider_orders.json").as_array().unwrap().len(),
        1
    );
    assert_eq!(
        read_json("provider_events.json").as_array().unwrap().len(),
        1
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for needle in [
        "webhook secret",
        "exactly as received",
        "HMAC-SHA256(secret, <id>.body)",
        &key.to_text(),
        "spendgate-verify verify-bundle",
    ] {
        assert!(readme.contains(needle), "README lacks {needle:?}");
    }
    // A second bundle into the same folder is refused (exit 2).
    let again = output(
        sg(&db, work.path())
            .args(["evidence", &request, "--tenant", "acme", "--out"])
            .arg(&dir),
    );
    assert_eq!(code(&again), Some(2), "{}", text(&again.stderr));

    // Every byte of an entry, of its proof and of the checkpoint, changed
    // one at a time: the verification fails and names the file.
    let entry = &files.entries[0];
    let one = |entry: Vec<u8>, proof: Vec<u8>, cp: Vec<u8>| bundle_dir::BundleFiles {
        checkpoint: cp,
        entries: vec![bundle_dir::EntryFiles {
            stem: entry_stem(&files),
            entry,
            proof: Some(proof),
        }],
        orphan_proofs: Vec::new(),
        raw: Vec::new(),
    };
    let proof = entry.proof.clone().unwrap();
    let entry_name = format!("entries/{}.json", entry.stem);
    assert!(
        bundle_dir::verify(
            &one(entry.entry.clone(), proof.clone(), files.checkpoint.clone()),
            &key,
            None
        )
        .is_ok()
    );
    let mut changed = 0;
    for i in 0..entry.entry.len() {
        let mut bytes = entry.entry.clone();
        bytes[i] ^= 0x01;
        let r = bundle_dir::verify(
            &one(bytes, proof.clone(), files.checkpoint.clone()),
            &key,
            None,
        );
        assert_eq!(failed_name(r), entry_name, "entry byte {i}");
        changed += 1;
    }
    for i in 0..proof.len() {
        let mut bytes = proof.clone();
        bytes[i] ^= 0x01;
        let r = bundle_dir::verify(
            &one(entry.entry.clone(), bytes, files.checkpoint.clone()),
            &key,
            None,
        );
        assert_eq!(failed_name(r), entry_name, "proof byte {i}");
        changed += 1;
    }
    for i in 0..files.checkpoint.len() {
        let mut bytes = files.checkpoint.clone();
        bytes[i] ^= 0x01;
        let r = bundle_dir::verify(&one(entry.entry.clone(), proof.clone(), bytes), &key, None);
        assert_eq!(failed_name(r), "checkpoint", "checkpoint byte {i}");
        changed += 1;
    }
    assert!(changed > 500, "{changed} bytes changed");

    // On disk too: one byte of the last entry's file.
    let last = files.entries.last().unwrap();
    let path = dir.join(format!("entries/{}.json", last.stem));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(
        failed_name(verify_dir(&dir, &key)),
        format!("entries/{}.json", last.stem)
    );
}

fn entry_stem(files: &bundle_dir::BundleFiles) -> String {
    files.entries[0].stem.clone()
}

/// The witness's check of `note` with the consistency proof the gate
/// prints from the witness's size.
fn witness_check(
    key: &VerifierKey,
    state: Option<&str>,
    note: &str,
    proof: &str,
) -> Result<(), WitnessError> {
    let mut w = Witness::new(key.clone(), None, state).unwrap();
    w.check(note, &ConsistencyProof::parse(proof.as_bytes()).unwrap())
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ledger_rewritten_by_the_owner_is_refused_by_a_witness_of_an_older_checkpoint() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    propose(&db, work.path(), &agent, 2).await;
    let key = public_key(&db, work.path());
    let log = |args: &[&str]| output(sg(&db, work.path()).arg("log").args(args));

    // The witness accepts the first checkpoint from the empty tree.
    let first = text(&log(&["checkpoint", "--tenant", "acme"]).stdout);
    let first_cp = checkpoint::open(first.as_bytes(), &key, None).unwrap();
    let size = first_cp.size;
    let from_empty = log(&["consistency", "--tenant", "acme", "--from", "0"]);
    assert_eq!(code(&from_empty), Some(0), "{}", text(&from_empty.stderr));
    witness_check(&key, None, &first, &text(&from_empty.stdout)).unwrap();

    // An honest append: a later checkpoint is consistent with the first.
    propose(&db, work.path(), &agent, 1).await;
    let second = text(&log(&["checkpoint", "--tenant", "acme"]).stdout);
    let size_str = size.to_string();
    let grown = text(&log(&["consistency", "--tenant", "acme", "--from", &size_str]).stdout);
    witness_check(&key, Some(&first), &second, &grown).unwrap();
    let second_size = checkpoint::open(second.as_bytes(), &key, None)
        .unwrap()
        .size;
    assert!(second_size > size);

    // The owner rewrites one entry of the first checkpoint's tree.
    let owner = gate::db::connect(&db.owner).await.unwrap();
    owner
        .execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only; \
             UPDATE ledger_entries SET entry = replace(entry, 'team snacks', 'team snackz') \
              WHERE tenant_id = 'acme' AND seq = (SELECT max(seq) FROM ledger_entries \
                WHERE tenant_id = 'acme' AND kind = 'proposal' AND seq <= {size}); \
             ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only"
        )))
        .await
        .unwrap();
    owner.close().await;

    // The gate will not prove against a checkpoint its ledger no longer has.
    let prove = log(&["prove", "--tenant", "acme", "--seq", "1"]);
    assert_eq!(code(&prove), Some(1), "{}", text(&prove.stdout));
    assert!(
        text(&prove.stderr).contains("no longer has the root"),
        "{}",
        text(&prove.stderr)
    );

    // A new checkpoint of the rewritten tree, proved from the first size:
    // the witness that kept the first checkpoint refuses it.
    let rewritten = log(&["checkpoint", "--tenant", "acme"]);
    assert_eq!(code(&rewritten), Some(0));
    let rewritten = text(&rewritten.stdout);
    let proof = log(&["consistency", "--tenant", "acme", "--from", &size_str]);
    assert_eq!(code(&proof), Some(0), "{}", text(&proof.stderr));
    let refused = witness_check(&key, Some(&first), &rewritten, &text(&proof.stdout));
    assert!(
        matches!(refused, Err(WitnessError::Inconsistent { .. })),
        "{refused:?}"
    );
    let said = refused.unwrap_err().to_string();
    assert!(said.contains(&first_cp.root_base64()), "{said}");

    // The same size signed again with another root: named as a fork.
    let second_size_str = second_size.to_string();
    let same_size = log(&[
        "consistency",
        "--tenant",
        "acme",
        "--from",
        &second_size_str,
    ]);
    let fork = witness_check(&key, Some(&second), &rewritten, &text(&same_size.stdout));
    assert!(matches!(fork, Err(WitnessError::Fork { .. })), "{fork:?}");

    // The corpus's `log_consistent`: the kept checkpoints, shown in order
    // to one witness, break at the second: the first is accepted from the
    // empty tree, the second cannot be proved from it with the tree as it is.
    let app = gate::db::connect(&db.app).await.unwrap();
    let log_key = tlog::LogKey::new(LOG_KEY.as_bytes()).unwrap();
    let consistent = tlog::check_consistency(&app, &log_key, "acme")
        .await
        .unwrap();
    let said = consistent.unwrap_err();
    assert!(said.starts_with("checkpoint 2:"), "{said}");
    // The evidence of the log as it now is still verifies: only a witness
    // that kept an older checkpoint can tell it was rewritten.
    assert!(
        tlog::check_evidence(&app, &log_key, "acme")
            .await
            .unwrap()
            .is_ok()
    );
    app.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_signed_with_another_key_is_refused() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    propose(&db, work.path(), &agent, 1).await;
    let key = public_key(&db, work.path());
    let other = output(
        sg(&db, work.path())
            .env("SPENDGATE_LOG_KEY", OTHER_LOG_KEY)
            .args(["log", "checkpoint", "--tenant", "acme"]),
    );
    assert_eq!(code(&other), Some(0), "{}", text(&other.stderr));
    let note = text(&other.stdout);
    assert!(matches!(
        checkpoint::open(note.as_bytes(), &key, None),
        Err(CheckpointError::Note(NoteError::NoTrustedSignature { .. }))
    ));
    let from_empty = output(sg(&db, work.path()).args([
        "log",
        "consistency",
        "--tenant",
        "acme",
        "--from",
        "0",
    ]));
    let refused = witness_check(&key, None, &note, &text(&from_empty.stdout));
    assert!(
        matches!(refused, Err(WitnessError::Checkpoint(_))),
        "{refused:?}"
    );

    // A bundle written under the other key is refused at its checkpoint.
    let request: String = {
        let pool = gate::db::connect(&db.app).await.unwrap();
        let id = sqlx::query_scalar("SELECT id FROM payment_requests LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        pool.close().await;
        id
    };
    let dir = work.path().join("other-bundle");
    ok(sg(&db, work.path())
        .env("SPENDGATE_LOG_KEY", OTHER_LOG_KEY)
        .args(["evidence", &request, "--tenant", "acme", "--out"])
        .arg(&dir));
    assert_eq!(failed_name(verify_dir(&dir, &key)), "checkpoint");

    // Without log_key nothing is signed.
    let missing = output(
        spendgate(&db, work.path())
            .env_remove("SPENDGATE_LOG_KEY")
            .args(["log", "checkpoint", "--tenant", "acme"]),
    );
    assert_eq!(code(&missing), Some(2));
    assert!(text(&missing.stderr).contains("log_key is not set"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_checkpoint_table_guards_name_themselves() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    onboard(&db, work.path());
    ok(sg(&db, work.path()).args(["log", "checkpoint"]));
    let app = gate::db::connect(&db.app).await.unwrap();
    let err = |sql: &'static str| {
        let app = app.clone();
        async move { app.execute(sql).await.unwrap_err().to_string() }
    };
    let e = err(
        "INSERT INTO log_checkpoints (tenant_id, size, root, note, signed_at) \
         VALUES ('acme', -1, 'r', 'n', now())",
    )
    .await;
    assert!(e.contains("ck_log_checkpoint_size"), "{e}");
    let e = err(
        "INSERT INTO log_checkpoints (tenant_id, size, root, note, signed_at) \
         VALUES ('nobody', 1, 'r', 'n', now())",
    )
    .await;
    assert!(e.contains("fk_log_checkpoint_tenant"), "{e}");
    for sql in [
        "UPDATE log_checkpoints SET size = 0",
        "DELETE FROM log_checkpoints",
    ] {
        let e = err(sql).await;
        assert!(e.contains("permission denied"), "{sql}: {e}");
    }
    app.close().await;
}
