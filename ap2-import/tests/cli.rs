//! The operator's command, `spendgate mandate import-ap2`
//! (spendgate/src/commands/mandate_ap2.rs), run on real files: its
//! arguments as clap reads them, what it writes, and that a refusal writes
//! nothing.

mod common;

#[path = "../../spendgate/src/commands/mandate_ap2.rs"]
mod mandate_ap2;

use std::path::{Path, PathBuf};

use clap::Parser;
use common::{human, now, open_mandate, standard_policy};
use mandate_ap2::{ImportAp2Args, ImportAp2Failure, run};
use serde_json::{Value, json};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: ImportAp2Args,
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new(token: &str) -> Files {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mandate.sdjwt"), token).unwrap();
        std::fs::write(dir.path().join("issuer.pem"), human().public_pem()).unwrap();
        std::fs::write(dir.path().join("issuer.jwk"), human().public_jwk()).unwrap();
        std::fs::write(
            dir.path().join("base.json"),
            Value::Object(standard_policy()).to_string(),
        )
        .unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn args(&self, extra: &[&str]) -> ImportAp2Args {
        let p = |n: &str| self.path(n).display().to_string();
        let at = now().to_rfc3339();
        let mut argv = vec![
            "import-ap2".to_owned(),
            p("mandate.sdjwt"),
            "--issuer-key".into(),
            p("issuer.pem"),
            "--base".into(),
            p("base.json"),
            "--out".into(),
            p("policy.json"),
            "--at".into(),
            at,
        ];
        argv.extend(extra.iter().map(|a| {
            if a.ends_with(".json") || a.ends_with(".jwk") {
                p(a)
            } else {
                (*a).to_owned()
            }
        }));
        Cli::try_parse_from(argv).unwrap().args
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn import_ap2_writes_the_policy_document() {
    let token = human().token(
        &open_mandate(
            &[
                r#"{"type":"payment.amount_range","currency":"INR","max":150000}"#,
                r#"{"type":"payment.allowed_payees","allowed":[{"id":"cloudco","name":"CloudCo"}]}"#,
            ],
            None,
        ),
        &[],
    );
    let files = Files::new(&token);
    run(files.args(&[])).unwrap();
    let mut expected = standard_policy();
    expected.insert("per_transaction_cap_paise".into(), json!(150000));
    expected.insert("allowed_merchants".into(), json!(["cloudco"]));
    assert_eq!(
        read_json(&files.path("policy.json")),
        Value::Object(expected)
    );
    assert!(!files.path("delegation.json").exists());
}

#[test]
fn import_ap2_reads_a_jwk_issuer_key() {
    let token = human().token(&open_mandate(&[], None), &[]);
    let files = Files::new(&token);
    let mut args = files.args(&[]);
    args.issuer_key = files.path("issuer.jwk");
    run(args).unwrap();
    assert_eq!(
        read_json(&files.path("policy.json")),
        Value::Object(standard_policy())
    );
}

#[test]
fn import_ap2_budget_needs_delegation_out() {
    let token = human().token(
        &open_mandate(
            &[r#"{"type":"payment.budget","currency":"INR","max":1.13}"#],
            Some(1_790_000_000),
        ),
        &[],
    );
    let files = Files::new(&token);
    let refused = run(files.args(&[])).unwrap_err();
    assert!(matches!(refused, ImportAp2Failure::Usage(_)), "{refused}");
    assert!(!files.path("policy.json").exists(), "nothing is written");

    run(files.args(&["--delegation-out", "delegation.json"])).unwrap();
    assert_eq!(
        read_json(&files.path("delegation.json")),
        json!({"budget_paise": 113, "currency": "INR", "expires_at": "2026-09-21T14:13:20Z"})
    );
    let policy = read_json(&files.path("policy.json"));
    assert_eq!(policy["daily_cap_paise"], json!(113));
    assert_eq!(policy["valid_until"], json!("2026-09-21T14:13:20Z"));
}

#[test]
fn import_ap2_refusals_write_nothing() {
    let cases: [(String, &str); 4] = [
        (
            ap2_import::UCP_PLACEHOLDER.to_owned(),
            "MANDATE_SIGNATURE_INVALID",
        ),
        (
            common::Issuer::new("intern").token(&open_mandate(&[], None), &[]),
            "MANDATE_SIGNATURE_INVALID",
        ),
        (
            human().token(
                &open_mandate(
                    &[r#"{"type":"payment.reference","conditional_transaction_id":"x"}"#],
                    None,
                ),
                &[],
            ),
            "MANDATE_CONSTRAINT_UNKNOWN",
        ),
        (
            human().token(
                &open_mandate(
                    &[r#"{"type":"payment.budget","currency":"INR","max":0.295}"#],
                    None,
                ),
                &[],
            ),
            "POLICY_INVALID",
        ),
    ];
    for (token, reason) in cases {
        let files = Files::new(&token);
        let refused = run(files.args(&["--delegation-out", "delegation.json"])).unwrap_err();
        assert_eq!(refused.reason(), Some(reason), "{refused}");
        assert!(refused.to_string().starts_with(reason), "{refused}");
        assert!(!files.path("policy.json").exists());
        assert!(!files.path("delegation.json").exists());
    }
}

#[test]
fn import_ap2_unreadable_inputs_are_named() {
    let token = human().token(&open_mandate(&[], None), &[]);
    let files = Files::new(&token);
    std::fs::write(files.path("base.json"), "[1, 2]").unwrap();
    let refused = run(files.args(&[])).unwrap_err();
    assert!(
        matches!(&refused, ImportAp2Failure::File { path, .. } if path.ends_with("base.json")),
        "{refused}"
    );
    let mut args = files.args(&[]);
    args.file = files.path("missing.sdjwt");
    assert!(matches!(
        run(args).unwrap_err(),
        ImportAp2Failure::File { .. }
    ));
    assert!(Cli::try_parse_from(["import-ap2", "x", "--issuer-key", "k"]).is_err());
    assert!(
        Cli::try_parse_from([
            "import-ap2",
            "x",
            "--issuer-key",
            "k",
            "--base",
            "b",
            "--at",
            "tomorrow"
        ])
        .is_err()
    );
}
