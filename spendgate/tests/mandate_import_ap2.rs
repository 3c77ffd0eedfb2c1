//! `spendgate mandate import-ap2` through the operator's binary: a mandate
//! that does not verify is a failed check (exit 1) led by its reason code,
//! and nothing is written; a file that cannot be read could not run (exit 2).

use std::process::Command;

/// AP2's documented sample open payment mandate (signed by AP2's issuer).
const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ap2-import/tests/fixtures/ap2_open_payment_mandate.sdjwt"
);

/// A P-256 public key that did not sign the sample (a JWK).
const OTHER_KEY: &str = r#"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#;

fn import(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spendgate"))
        .args(["mandate", "import-ap2"])
        .args(args)
        .env_remove("SPENDGATE_CONFIG")
        .output()
        .expect("spendgate runs")
}

#[test]
fn a_mandate_under_another_key_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("issuer.jwk");
    std::fs::write(&key, OTHER_KEY).unwrap();
    let base = dir.path().join("base.json");
    std::fs::write(&base, "{}").unwrap();
    let out = dir.path().join("policy.json");
    let o = import(&[
        SAMPLE,
        "--issuer-key",
        key.to_str().unwrap(),
        "--base",
        base.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("MANDATE_SIGNATURE_INVALID"), "{stderr}");
    assert!(!out.exists(), "a refused mandate wrote {}", out.display());
}

#[test]
fn a_missing_mandate_file_could_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.sdjwt");
    let o = import(&[
        missing.to_str().unwrap(),
        "--issuer-key",
        missing.to_str().unwrap(),
        "--base",
        missing.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nope.sdjwt"), "{stderr}");
}
