//! `harness bench --engines database,http`: the scenarios through the real
//! service on a loopback port. Through the built binary, under `harness db run`.
//!
//! Proves: a purchase made over the wire (a human's pay, the signed
//! webhook) agrees with the database engine and passes; a wire-only step is
//! skipped by the database engine and checked by the HTTP engine (a wrong
//! expected status fails the scenario there, with the service's answer in
//! the failure); a header that makes the service answer otherwise than the
//! gate is reported as a disagreement between the engines.
//!
//! Needs the machine's Postgres binaries; skipped when they are missing and
//! `SPENDGATE_SKIP_DB=1`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod support;
use support::skip;

const CORPUS: &str = r#"
- id: http-purchase-by-a-human
  label: legit
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}, expect: {decision: allow}}
    - {name: c1, checkout: {request: p1, actor: finance-lead}, expect: {decision: ok}}
    - {name: o1, pay: {authority: c1, actor: finance-lead}, expect: {decision: ok}}
    - {webhook: {order: o1, amount_paise: 25000, signature: valid}, expect: {decision: ok}}
  invariants: {provider_orders: 1, captured_paise: 25000, books_balanced: true, request_states: {p1: CAPTURED}}
- id: http-wrong-wire-expectation
  label: attack
  class: tool-boundary.key-misuse
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: CLOUD-TEAM, quantity: 1, purpose: "team"}}, expect: {decision: step_up, reason: APPROVAL_REQUIRED}}
    - approve: {request: p1, approver: finance-lead}
      wire: {as: buyer-agent, status: 401, reason: UNAUTHENTICATED}
  invariants: {spent_today_paise: 0, request_states: {p1: PENDING_APPROVAL}}
- id: http-header-that-changes-the-answer
  label: legit
  world: standard
  steps:
    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}
      wire: {headers: {Content-Type: text/plain}}
      expect: {decision: allow}
"#;

/// Runs `harness bench --engines ENGINES` over CORPUS; the results and stdout.
fn bench(dir: &Path, engines: &str) -> (Value, String) {
    let corpus = dir.join("corpus.yaml");
    fs::write(&corpus, CORPUS).unwrap();
    let out = dir.join(format!("out-{engines}"));
    let exe = env!("CARGO_BIN_EXE_harness");
    let output = Command::new(exe)
        .env_remove("DATABASE_URL")
        .args([
            "db",
            "run",
            "--",
            exe,
            "bench",
            "--engines",
            engines,
            "--jobs",
            "2",
        ])
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "bench did not complete: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file =
        serde_json::from_str(&fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    (file, stdout)
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
fn the_http_engine_agrees_checks_the_wire_and_reports_disagreements() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();

    let (file, stdout) = bench(dir.path(), "database,http");
    let purchase = result(&file, "http-purchase-by-a-human");
    assert_eq!(purchase["passed"], true, "{purchase:#}");
    assert!(
        purchase["engine"].as_str().unwrap().ends_with("+http"),
        "{purchase:#}"
    );
    let wrong = result(&file, "http-wrong-wire-expectation");
    assert_eq!(wrong["passed"], false, "{wrong:#}");
    let failures = wrong["failures"].to_string();
    assert!(
        failures.contains(
            "expected the service to answer 401 UNAUTHENTICATED, got 403 ACTOR_NOT_PERMITTED"
        ),
        "{failures}"
    );
    let header = result(&file, "http-header-that-changes-the-answer");
    assert_eq!(header["passed"], false, "{header:#}");
    let failures = header["failures"].to_string();
    assert!(
        failures.contains("engines disagree at step #1: http") && failures.contains("415"),
        "{failures}"
    );
    // Every step of the purchase went over the wire; the counts are printed.
    assert!(stdout.contains("steps over the wire"), "{stdout}");
    assert!(stdout.contains(", 1 wire-only,"), "{stdout}");

    // Without the wire, the wire-only step is skipped and the header is not sent.
    let (file, _) = bench(dir.path(), "database");
    for id in [
        "http-wrong-wire-expectation",
        "http-header-that-changes-the-answer",
    ] {
        let r = result(&file, id);
        assert_eq!(r["passed"], true, "{r:#}");
        assert!(!r["engine"].as_str().unwrap().contains("http"), "{r:#}");
    }
}
