//! One scenario the gate cannot answer costs only that scenario: a panic in
//! its run, or a run past the time limit, is recorded as its engine error
//! (`engine_error: true`, the text in `failures`), the run goes on with the
//! next scenario, `results.json` is written and the summary counts the
//! engine errors. Through the built binary, under `harness db run`.
//!
//! Needs the machine's Postgres binaries, as `db_cli.rs` does; skipped when
//! they are missing and `SPENDGATE_SKIP_DB=1`.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod support;
use support::{skip, workdir};

const CORPUS: &str = r#"
- id: iso-first
  label: legit
  world: standard
  steps:
    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks one"}}
      expect: {decision: allow}
- id: iso-middle
  label: legit
  world: standard
  steps:
    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks two"}}
      expect: {decision: allow}
- id: iso-last
  label: legit
  world: standard
  steps:
    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks three"}}
      expect: {decision: allow}
"#;

/// Runs `harness bench` over CORPUS under a throwaway cluster and returns
/// the results file.
fn bench(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let corpus = dir.join("corpus.yaml");
    fs::write(&corpus, CORPUS).unwrap();
    let out = dir.join("out");
    let exe = env!("CARGO_BIN_EXE_harness");
    let mut command = Command::new(exe);
    command
        .env_remove("DATABASE_URL")
        .args([
            "db",
            "run",
            "--",
            exe,
            "bench",
            "--engines",
            "database",
            "--jobs",
            "1",
        ])
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .args(extra);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "bench did not complete: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

fn result<'a>(file: &'a Value, id: &str) -> &'a Value {
    file["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {file:#}"))
}

#[test]
fn a_panicking_scenario_fails_alone_and_the_run_goes_on() {
    if skip() {
        return;
    }
    let dir = workdir();
    let file = bench(
        dir.path(),
        &[],
        &[("SPENDGATE_BENCH_PANIC_SCENARIO", "iso-middle")],
    );
    let middle = result(&file, "iso-middle");
    assert_eq!(middle["engine_error"], true, "{middle:#}");
    assert_eq!(middle["passed"], false);
    assert_eq!(middle["blocked"], false);
    let failures = middle["failures"].to_string();
    assert!(
        failures.contains("panicked") && failures.contains("injected panic"),
        "{failures}"
    );
    for id in ["iso-first", "iso-last"] {
        let r = result(&file, id);
        assert_eq!(r["passed"], true, "{r:#}");
        assert_eq!(r["engine_error"], false, "{r:#}");
    }
    assert_eq!(file["summary"]["engine_errors"], 1, "{:#}", file["summary"]);
    assert_eq!(file["summary"]["failed"], 1);
}

#[test]
fn a_scenario_past_its_time_limit_is_an_engine_error() {
    if skip() {
        return;
    }
    let dir = workdir();
    let file = bench(dir.path(), &["--scenario-timeout-ms", "0"], &[]);
    let results = file["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "every scenario still has a result");
    for r in results {
        assert_eq!(r["engine_error"], true, "{r:#}");
        assert!(
            r["failures"].to_string().contains("did not finish"),
            "{r:#}"
        );
    }
    assert_eq!(file["summary"]["engine_errors"], 3);
}
