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

/// Two races whose copies come out more permissive than their exact counts:
/// three proposals each allowed against `{deny: 3}`, and the velocity burst
/// with the limit raised out of reach (25 step-ups against `{step_up: 20,
/// deny: 5}`). Their invariants hold (nothing is paid), so only the counts
/// can tell.
const PERMISSIVE: &str = r#"
- id: three-allowed-against-deny-three
  label: attack
  class: database-constraint.concurrent-overspend
  refs: ["PA-15"]
  description: Three copies expected refused; each is allowed.
  world: standard
  steps:
    - concurrent:
        times: 3
        step: {propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}}
      expect: {deny: 3}
  invariants: {provider_orders: 0}

- id: velocity-burst-limit-out-of-reach
  label: attack
  class: policy.velocity-flood
  refs: ["PA-13"]
  description: The committed burst, with the velocity limit raised to 1000 an hour first.
  world: standard
  steps:
    - {set_policy: {velocity: {max_proposals: 1000, window_minutes: 60}}, expect: {decision: ok}}
    - concurrent:
        times: 25
        step: {propose: {actor: buyer-agent, body: {sku: CLOUD-TEAM, quantity: 1, purpose: "team credits"}}}
      expect: {step_up: 20, deny: 5}
  invariants: {provider_orders: 0, spent_today_paise: 0}
"#;

#[test]
fn a_race_more_permissive_than_its_exact_counts_is_not_blocked() {
    if skip() {
        return;
    }
    let dir = workdir();
    let corpus = dir.path().join("corpus");
    fs::create_dir_all(corpus.join("worlds")).unwrap();
    fs::write(corpus.join("races.yaml"), PERMISSIVE).unwrap();
    for (from, to) in [
        ("scenarios/worlds/standard.yaml", "worlds/standard.yaml"),
        ("scenarios/taxonomy.yaml", "taxonomy.yaml"),
    ] {
        fs::copy(workspace_root().join(from), corpus.join(to)).unwrap();
    }
    let results = bench_database(&corpus, &dir.path().join("out"), &[]);
    assert_eq!(results.len(), 2, "{results:#?}");
    for r in &results {
        assert_eq!(r["blocked"], false, "{r:#}");
        assert_eq!(r["passed"], false, "{r:#}");
    }
    let burst = results
        .iter()
        .find(|r| r["id"] == "velocity-burst-limit-out-of-reach")
        .unwrap();
    assert_eq!(
        burst["failures"],
        serde_json::json!([
            "step #2 (concurrent): expected 20 step_up, got 25",
            "step #2 (concurrent): expected 5 deny, got 0"
        ]),
        "{burst:#}"
    );
}
