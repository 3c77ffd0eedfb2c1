//! The reports name the commit they were made from, and their drift check
//! ignores which commit but refuses a report that names none; `generated.*`
//! is checked by regenerating its seeded corpus and running its sample
//! again. Through the built binary, on a throwaway cluster of its own, with
//! a small corpus (one file) and a small generated corpus (40 scenarios).
//!
//! Needs the machine's Postgres binaries; skipped when they are missing and
//! `SPENDGATE_SKIP_DB=1`.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

mod support;
use support::{skip, workdir, workspace_root};

/// `harness db run -- harness report ARGS` from the workspace root.
fn report(args: &[&str], out: &Path) -> Output {
    let exe = env!("CARGO_BIN_EXE_harness");
    Command::new(exe)
        .current_dir(workspace_root())
        .env_remove("DATABASE_URL")
        .env_remove("MIGRATION_DATABASE_URL")
        .args(["db", "run", "--", exe, "report"])
        .args([
            "--corpus",
            "scenarios/corpus/provider-mismatch.yaml",
            "--generated-count",
            "40",
            "--generated-seed",
            "7",
            "--jobs",
            "2",
            "--out",
        ])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn edit(path: &Path, from: &str, to: &str) {
    let t = fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{} has no `{from}`", path.display());
    fs::write(path, t.replacen(from, to, 1)).unwrap();
}

#[test]
fn reports_name_their_commit_and_generated_is_checked_by_a_sample() {
    if skip() {
        return;
    }
    let dir = workdir();
    let out = dir.path().join("reports");
    let written = report(&[], &out);
    assert!(written.status.success(), "{}", text(&written));
    for name in [
        "benchmark.md",
        "attack-matrix.md",
        "generated.md",
        "benchmark.json",
        "attack-matrix.json",
        "generated.json",
    ] {
        let t = fs::read_to_string(out.join(name)).unwrap();
        let named = if name.ends_with(".md") {
            t.lines().any(|l| l.starts_with("Made from commit `"))
        } else {
            t.contains("\n  \"made_from\": \"")
        };
        assert!(named, "{name} names no commit");
    }
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("generated.json")).unwrap()).unwrap();
    assert_eq!(json["sample"].as_array().unwrap().len(), 40, "{json:#}");
    assert_eq!(json["corpus_sha256"].as_str().unwrap().len(), 64);

    let check = || report(&["--check"], &out);
    let o = check();
    assert!(o.status.success(), "{}", text(&o));

    // Another commit named: still up to date.
    let md = out.join("benchmark.md");
    let line = fs::read_to_string(&md)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Made from commit "))
        .unwrap()
        .to_string();
    edit(
        &md,
        &line,
        "Made from commit `0000000000000000000000000000000000000000`.",
    );
    let o = check();
    assert!(o.status.success(), "{}", text(&o));

    // No commit named: stale, and only that file.
    let named = fs::read_to_string(&md).unwrap();
    edit(
        &md,
        "Made from commit `0000000000000000000000000000000000000000`.\n",
        "",
    );
    let o = check();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(
        said.lines()
            .any(|l| l == "these reports differ from a fresh regeneration: benchmark.md"),
        "{said}"
    );
    fs::write(&md, named).unwrap();
    let o = check();
    assert!(o.status.success(), "{}", text(&o));

    // A sampled verdict the gate no longer gives: generated.json is stale.
    let generated = out.join("generated.json");
    let original = fs::read_to_string(&generated).unwrap();
    edit(&generated, "\"passed\": true", "\"passed\": false");
    let o = check();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("generated.json (sample: `gen-7-0000-"),
        "{}",
        text(&o)
    );

    // A corpus the generator no longer writes: stale, named by its digest.
    fs::write(&generated, &original).unwrap();
    let sha = json["corpus_sha256"].as_str().unwrap();
    edit(&generated, sha, &"0".repeat(64));
    let o = check();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("its corpus's SHA-256"), "{}", text(&o));
}
