//! The proposal and webhook seeds and findings through the stateful gate on
//! Postgres: the half of the property the pure targets cannot see. Every
//! input must get a typed answer (`Ok` with a decision), never a
//! `ServiceError` (an engine error: a database error instead of an answer).
//!
//! A webhook input is sent twice: with the signature its own header carries,
//! and signed with the gate's secret, so its body reaches the parser and
//! everything after it. Inputs known to give an engine error today, whose fix
//! belongs to gate/src, are listed in [`PENDING`] and each has its own
//! ignored test in `tests/findings.rs`; remove an entry when its fix lands.
//!
//! Extra inputs, for example an AFL++ queue, can be replayed once with
//! `SPENDGATE_FUZZ_EXTRA=<target>:<folder>` (not used by `make verify`).

mod common;

use std::path::{Path, PathBuf};

use common::{TestResult, propose, standard_gate, webhook};

/// Seeds that give an engine error until the named fix lands (see
/// tests/findings.rs): `(target, seed file name)`.
const PENDING: &[(&str, &str)] = &[];

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for kind in ["seeds", "findings"] {
        if let Ok(entries) = std::fs::read_dir(root.join(kind).join(target)) {
            files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
        }
    }
    if let Ok(extra) = std::env::var("SPENDGATE_FUZZ_EXTRA")
        && let Some((t, dir)) = extra.split_once(':')
        && t == target
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        files.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
    }
    files.retain(|p| {
        p.is_file()
            && !PENDING.iter().any(|(t, name)| {
                *t == target && p.file_name().and_then(|n| n.to_str()) == Some(name)
            })
    });
    files.sort();
    files
}

async fn replay(target: &str) -> TestResult {
    let Some((db, gate)) = standard_gate().await? else {
        return Ok(());
    };
    let files = inputs(target);
    assert!(!files.is_empty(), "no {target} inputs");
    let mut failures = Vec::new();
    for file in &files {
        let data = std::fs::read(file)?;
        let error = match target {
            "proposal" => propose(&gate, &data).await,
            _ => webhook(&gate, &data).await,
        };
        if let Some(error) = error {
            failures.push(format!("{}: {error}", short(file)));
        }
    }
    drop(gate);
    db.drop().await?;
    assert!(
        failures.is_empty(),
        "{target}: {} of {} inputs got an engine error instead of an answer:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    Ok(())
}

fn short(path: &Path) -> String {
    let parts: Vec<_> = path.iter().rev().take(3).collect();
    parts
        .into_iter()
        .rev()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_proposal_seed_gets_an_answer_from_the_gate_on_postgres() -> TestResult {
    replay("proposal").await
}

#[tokio::test]
async fn every_webhook_seed_gets_an_answer_from_the_gate_on_postgres() -> TestResult {
    replay("webhook").await
}
