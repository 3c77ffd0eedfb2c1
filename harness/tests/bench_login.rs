//! The `login` verb through the built binary, on the database and HTTP
//! engines, under `harness db run`: a statement a guard refuses is judged by
//! the guard's name and blocks; a statement written where a refusal was
//! expected is an attack not blocked; a privilege the role lacks is
//! `privilege`; a statement the database cannot run, or one that would stall
//! the scenario, is the outcome `error`, never an engine error. Both engines
//! send it on the gate's own runtime login and agree.
//!
//! Needs the machine's Postgres binaries, as `db_cli.rs` does; skipped when
//! they are missing and `SPENDGATE_SKIP_DB=1`.

use std::fs;

mod support;
use support::{bench_database, skip, workdir};

const CORPUS: &str = r#"
- id: login-refused-by-its-guard
  label: attack
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: CLOUD-STARTER, quantity: 1, purpose: "credits"}}, expect: {decision: allow}}
    - {name: c1, checkout: {request: p1, actor: finance-lead}, expect: {decision: ok}}
    - login: {sql: "UPDATE checkout_authorities SET amount_paise = amount_paise * 100 WHERE id = $c1"}
      expect: {refused_by: authority_terms_immutable}
    - {pay: {authority: c1}, expect: {decision: ok}}
  invariants: {provider_orders: 1}
- id: login-written-where-a-refusal-was-expected
  label: attack
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: CLOUD-STARTER, quantity: 1, purpose: "credits"}}, expect: {decision: allow}}
    - login: {sql: "UPDATE payment_requests SET updated_at = updated_at WHERE id = $p1"}
      expect: {refused_by: request_terms_immutable}
- id: login-without-the-privilege
  label: attack
  world: standard
  steps:
    - login: {sql: "TRUNCATE ledger_entries"}
      expect: {refused_by: privilege}
- id: login-not-sql
  label: attack
  world: standard
  steps:
    - login: {sql: "SELEC 1"}
      expect: {refused_by: privilege}
- id: login-that-would-stall
  label: attack
  world: standard
  steps:
    - login: {sql: "SELECT pg_sleep(60)"}
      expect: {refused_by: privilege}
"#;

fn result<'a>(results: &'a [serde_json::Value], id: &str) -> &'a serde_json::Value {
    results
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

#[test]
fn login_statements_are_judged_by_what_the_database_did_on_both_engines() {
    if skip() {
        return;
    }
    let dir = workdir();
    let corpus = dir.path().join("corpus.yaml");
    fs::write(&corpus, CORPUS).unwrap_or_else(|e| panic!("{e}"));
    let results = bench_database(&corpus, &dir.path().join("out"), &["--engines", "http"]);
    let refused = result(&results, "login-refused-by-its-guard");
    assert_eq!(refused["passed"], true, "{refused:#}");
    assert_eq!(refused["blocked"], true, "{refused:#}");
    assert!(
        refused["guards_seen"]
            .to_string()
            .contains("authority_terms_immutable"),
        "{refused:#}"
    );
    let written = result(&results, "login-written-where-a-refusal-was-expected");
    assert_eq!(written["blocked"], false, "{written:#}");
    assert!(
        written["failures"]
            .to_string()
            .contains("got written (1 rows)"),
        "{written:#}"
    );
    let privilege = result(&results, "login-without-the-privilege");
    assert_eq!(privilege["passed"], true, "{privilege:#}");
    for id in ["login-not-sql", "login-that-would-stall"] {
        let r = result(&results, id);
        assert_eq!(r["engine_error"], false, "{r:#}");
        assert_eq!(r["passed"], false, "{r:#}");
        assert_eq!(r["blocked"], true, "{r:#}");
        assert!(r["failures"].to_string().contains("got error ("), "{r:#}");
    }
    // The engines agree on every step: no disagreement was reported.
    for r in &results {
        assert!(!r["failures"].to_string().contains("disagree"), "{r:#}");
    }
}
