//! The committed reports equal a fresh regeneration: a report can never claim
//! what the code no longer does. Runs the whole corpus through the
//! database-backed gate, so it needs DATABASE_URL (as `make verify` provides).

use std::process::Command;

mod support;
use support::workspace_root;

fn harness() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.current_dir(workspace_root());
    cmd
}

fn database_configured() -> bool {
    if std::env::var("DATABASE_URL").is_ok() {
        return true;
    }
    assert!(
        std::env::var("SPENDGATE_SKIP_DB").as_deref() == Ok("1"),
        "DATABASE_URL is not set: run under `harness db run -- cargo test` (make verify does), \
         or set SPENDGATE_SKIP_DB=1 to skip database tests"
    );
    eprintln!("skipped: SPENDGATE_SKIP_DB=1 and no DATABASE_URL");
    false
}

#[test]
fn committed_reports_equal_a_fresh_regeneration_and_the_check_sees_a_change() {
    if !database_configured() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results.json");
    let out = harness()
        .args(["report", "--check", "--keep-results"])
        .arg(&results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reports/ is stale: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The same check on a copy with one line changed must fail and name the file.
    let copy = tmp.path().join("reports");
    std::fs::create_dir(&copy).unwrap();
    let reports = workspace_root().join("reports");
    for name in [
        "benchmark.md",
        "benchmark.json",
        "attack-matrix.md",
        "attack-matrix.json",
    ] {
        std::fs::copy(reports.join(name), copy.join(name)).unwrap();
    }
    let md = std::fs::read_to_string(copy.join("benchmark.md")).unwrap();
    std::fs::write(copy.join("benchmark.md"), md.replacen("recall", "recal", 1)).unwrap();
    let out = harness()
        .args(["report", "--check", "--out"])
        .arg(&copy)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("benchmark.md") && !stderr.contains("attack-matrix.md"),
        "{stderr}"
    );
}
