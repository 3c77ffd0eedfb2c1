//! The outside mutation audit: the latest committed
//! reports/outside-mutants.json has no survivor that
//! mutations/outside-audit.yaml leaves unclassified, and the check that says
//! so can fail. Needs no database: it reads the committed files only.

use std::path::Path;
use std::process::{Command, Output};

mod support;
use support::workspace_root;

fn check(report: &Path, classification: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .current_dir(workspace_root())
        .args(["mutants-audit", "--check", "--report"])
        .arg(report)
        .arg("--classification")
        .arg(classification)
        .output()
        .unwrap()
}

fn committed_report() -> serde_json::Value {
    let text = std::fs::read_to_string(workspace_root().join("reports/outside-mutants.json"))
        .expect("reports/outside-mutants.json is committed (make mutants-audit writes it)");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_survivor_of_the_committed_outside_audit_is_classified() {
    let out = check(
        &workspace_root().join("reports/outside-mutants.json"),
        &workspace_root().join("mutations/outside-audit.yaml"),
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_committed_report_says_what_it_covers() {
    let report = committed_report();
    let label = report["label"].as_str().unwrap();
    let complete = report["complete"].as_bool().unwrap();
    assert_eq!(complete, !label.starts_with("PARTIAL"), "{label}");
    if !complete {
        let pending = report["pending"].as_object().unwrap();
        assert!(
            !pending.is_empty(),
            "a partial report names the files still to run"
        );
        let left: u64 = pending.values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(
            report["mutants_run"].as_u64().unwrap() + left,
            report["mutants_in_crate"].as_u64().unwrap(),
            "what ran and what is left add up to the crate"
        );
    }
    assert!(report["mutants_run"].as_u64().unwrap() > 0);
}

#[test]
fn the_committed_report_is_what_the_store_says() {
    // Every verdict the report counts is in the committed store, with the
    // same outcome: the report is rendered from it, never written by hand.
    let store: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("mutations/outside-audit-verdicts.json"))
            .expect("mutations/outside-audit-verdicts.json is committed"),
    )
    .unwrap();
    let report = committed_report();
    for s in report["survivors"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        assert_eq!(
            store["verdicts"][name]["outcome"], "missed",
            "{name} is a survivor in the report and not a miss in the store"
        );
    }
    let caught = store["verdicts"]
        .as_object()
        .unwrap()
        .values()
        .filter(|v| v["outcome"] == "caught")
        .count() as u64;
    assert!(
        report["totals"]["caught"].as_u64().unwrap() <= caught,
        "the report counts more caught mutants than the store holds"
    );
}

#[test]
fn the_check_fails_on_an_unlisted_survivor_and_on_a_test_that_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let mut report = committed_report();
    let name = "gate/src/policy.rs:1:1: replace evaluate -> Evaluation with Default::default()";
    report["survivors"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": name,
            "key": "gate/src/policy.rs: replace evaluate -> Evaluation with Default::default()",
            "file": "gate/src/policy.rs",
            "line": 1,
            "classified": null,
        }));
    let report_path = tmp.path().join("report.json");
    std::fs::write(&report_path, report.to_string()).unwrap();

    let out = check(
        &report_path,
        &workspace_root().join("mutations/outside-audit.yaml"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(name),
        "the unlisted survivor is named"
    );

    let listed = tmp.path().join("listed.yaml");
    let entry = |test: &str| {
        format!(
            "version: 1\nsurvivors:\n  - mutant: \"gate/src/policy.rs: replace evaluate -> Evaluation with Default::default()\"\n    verdict: caught\n    test: {test}\n"
        )
    };
    std::fs::write(
        &listed,
        entry("policy::tests::no_such_test_exists_anywhere"),
    )
    .unwrap();
    let out = check(&report_path, &listed);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a caught entry must name a real test"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    std::fs::write(
        &listed,
        entry("policy::tests::an_ordinary_purchase_is_allowed"),
    )
    .unwrap();
    let out = check(&report_path, &listed);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(name), "listed now: {stderr}");
}
