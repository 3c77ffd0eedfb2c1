//! Without `DATABASE_URL`, a subcommand that needs Postgres for its own run
//! starts a throwaway one, says so in exactly one stderr line, and removes it
//! on exit; a subcommand whose effect must last (`serve`, `keys`, `ledger`)
//! refuses instead, naming `DATABASE_URL`, and starts nothing.
//!
//! Needs the machine's Postgres binaries, as `db_cli.rs` does; skipped when
//! they are missing and `SPENDGATE_SKIP_DB=1`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;
use support::{skip, workdir, workspace_root};

/// What the one line announcing a throwaway server starts with.
const ANNOUNCED: &str = "no DATABASE_URL: started a throwaway Postgres";

/// The harness binary with neither `DATABASE_URL` nor `MIGRATION_DATABASE_URL`.
fn harness(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.current_dir(workspace_root())
        .env_remove("DATABASE_URL")
        .env_remove("MIGRATION_DATABASE_URL")
        .env("TMPDIR", dir);
    cmd
}

/// A corpus folder holding one small committed file and the standard world.
fn small_corpus(dir: &Path) -> PathBuf {
    let root = dir.join("corpus");
    fs::create_dir_all(root.join("worlds")).unwrap();
    let repo = workspace_root();
    fs::copy(
        repo.join("scenarios/corpus/tenancy.yaml"),
        root.join("tenancy.yaml"),
    )
    .unwrap();
    fs::copy(
        repo.join("scenarios/worlds/standard.yaml"),
        root.join("worlds/standard.yaml"),
    )
    .unwrap();
    fs::copy(
        repo.join("scenarios/taxonomy.yaml"),
        root.join("taxonomy.yaml"),
    )
    .unwrap();
    root
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bench_without_database_url_starts_announces_and_removes_a_throwaway_postgres() {
    if skip() {
        return;
    }
    let dir = workdir();
    let corpus = small_corpus(dir.path());
    let out = harness(dir.path())
        .args(["bench", "--engines", "database", "--corpus"])
        .arg(&corpus)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let announced: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("throwaway Postgres"))
        .collect();
    assert_eq!(announced.len(), 1, "{stderr}");
    assert!(announced[0].starts_with(ANNOUNCED), "{}", announced[0]);
    assert!(
        announced[0].ends_with("it is removed on exit"),
        "{}",
        announced[0]
    );
    assert!(
        dir.path().join("out/results.json").is_file(),
        "no results:\n{stdout}"
    );
    // The folder it named is gone.
    let folder = announced[0]
        .split_whitespace()
        .find(|w| w.starts_with(dir.path().to_str().unwrap()))
        .unwrap_or_else(|| panic!("no folder in {:?}", announced[0]));
    assert!(!Path::new(folder).exists(), "{folder} is still there");
}
