//! A `concurrent` step reports counts only. Which copy of a race meets the
//! gate's own check and which the database's guard is the scheduler's
//! choice, so the guards its copies reached are not part of a scenario's
//! result (nor of the attack matrix built from it): the same grant refused by
//! `ck_delegation_budget_partitioned` is reported with its guard as a plain
//! step and without it as a race, even when every copy of the race met it.
//!
//! Needs the machine's Postgres binaries, as `bench_order.rs` does; skipped
//! when they are missing and `SPENDGATE_SKIP_DB=1`.

use std::fs;

mod support;
use support::{bench_database, skip, workdir, workspace_root};

/// d-a takes 120000 of d-buyer's 200000; a 100000 d-b then fits only inside
/// d-buyer's budget, not its remainder, so the gate leaves the refusal to the
/// database (the partition CHECK), for every copy: a refused copy rolls back
/// and leaves the id unused.
const CORPUS: &str = r#"
- id: guard-of-a-plain-step
  label: attack
  class: delegation.sibling-oversubscription
  refs: ["PA-15"]
  description: The oversubscribing grant, once.
  world: standard
  steps:
    - {grant: {id: d-a, from: d-buyer, to: procurement-agent, budget_paise: 120000}, expect: {decision: ok}}
    - {grant: {id: d-b, from: d-buyer, to: renewals-agent, budget_paise: 100000}, expect: {decision: deny, reason: DELEGATION_BUDGET_EXHAUSTED}}

- id: guard-of-a-race
  label: attack
  class: database-constraint.concurrent-overspend
  refs: ["PA-15"]
  description: The same grant, three copies at once; each is refused.
  world: standard
  steps:
    - {grant: {id: d-a, from: d-buyer, to: procurement-agent, budget_paise: 120000}, expect: {decision: ok}}
    - concurrent:
        times: 3
        step: {grant: {id: d-b, from: d-buyer, to: renewals-agent, budget_paise: 100000}}
      expect: {deny: 3}
"#;

#[test]
fn a_race_reports_its_counts_and_not_the_guards_its_copies_met() {
    if skip() {
        return;
    }
    let dir = workdir();
    let corpus = dir.path().join("corpus");
    fs::create_dir_all(corpus.join("worlds")).unwrap();
    fs::write(corpus.join("races.yaml"), CORPUS).unwrap();
    for (from, to) in [
        ("scenarios/worlds/standard.yaml", "worlds/standard.yaml"),
        ("scenarios/taxonomy.yaml", "taxonomy.yaml"),
    ] {
        fs::copy(workspace_root().join(from), corpus.join(to)).unwrap();
    }
    let out = dir.path().join("out");
    let results = bench_database(&corpus, &out, &[]);
    let result = |id: &str| {
        results
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}"))
            .clone()
    };
    let plain = result("guard-of-a-plain-step");
    let race = result("guard-of-a-race");
    for r in [&plain, &race] {
        assert_eq!(r["passed"], true, "{r:#}");
    }
    assert_eq!(
        plain["guards_seen"],
        serde_json::json!(["ck_delegation_budget_partitioned"]),
        "{plain:#}"
    );
    assert_eq!(race["guards_seen"], serde_json::json!([]), "{race:#}");
}
