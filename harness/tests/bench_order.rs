//! The bench reuses databases from scenario to scenario (emptied in
//! between: `bench::pool`), so a scenario must come out the same whatever ran
//! before it in the same database. Two committed corpus files run through the
//! database-backed gate twice, under one throwaway cluster each: in the
//! corpus's order with 4 jobs, and in a seeded shuffle with ONE job (every
//! scenario then runs in the database the previous one used). Every
//! scenario's result must be the same in both, and all must pass.
//!
//! Needs the machine's Postgres binaries, as `db_cli.rs` does; skipped when
//! they are missing and `SPENDGATE_SKIP_DB=1`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod support;
use support::{bench_database, skip, workdir, workspace_root};

/// Files whose scenarios touch every kind of row: grants, policies, prices,
/// requests in every state, orders, payments, kept captures, the ledger.
const FILES: [&str; 2] = ["provider-answers.yaml", "lifetimes-and-changes.yaml"];

/// A corpus folder holding FILES and the committed worlds.
fn corpus(dir: &Path) -> PathBuf {
    let root = dir.join("corpus");
    fs::create_dir_all(root.join("worlds")).unwrap();
    for file in FILES {
        fs::copy(
            workspace_root().join("scenarios/corpus").join(file),
            root.join(file),
        )
        .unwrap();
    }
    fs::copy(
        workspace_root().join("scenarios/worlds/standard.yaml"),
        root.join("worlds/standard.yaml"),
    )
    .unwrap();
    fs::copy(
        workspace_root().join("scenarios/taxonomy.yaml"),
        root.join("taxonomy.yaml"),
    )
    .unwrap();
    root
}

/// Each scenario's result, without what may differ between runs (times).
fn bench(corpus: &Path, out: &Path, extra: &[&str]) -> BTreeMap<String, Value> {
    bench_database(corpus, out, extra)
        .iter()
        .map(|r| {
            let kept: serde_json::Map<String, Value> = [
                "passed",
                "blocked",
                "expected_reason",
                "actual_reason",
                "failures",
                "engine_error",
                "reasons_seen",
                "guards_seen",
            ]
            .into_iter()
            .map(|k| (k.to_string(), r[k].clone()))
            .collect();
            (r["id"].as_str().unwrap().to_string(), Value::Object(kept))
        })
        .collect()
}

#[test]
fn results_do_not_depend_on_the_order_scenarios_share_databases_in() {
    if skip() {
        return;
    }
    let dir = workdir();
    let corpus = corpus(dir.path());
    let in_order = bench(&corpus, &dir.path().join("a"), &["--jobs", "4"]);
    assert!(in_order.len() >= 40, "{} scenarios", in_order.len());
    for (id, r) in &in_order {
        assert_eq!(r["passed"], true, "{id}: {r:#}");
    }
    for seed in ["20261201"] {
        let shuffled = bench(
            &corpus,
            &dir.path().join(seed),
            &["--jobs", "1", "--shuffle", seed],
        );
        assert_eq!(
            shuffled.keys().collect::<Vec<_>>(),
            in_order.keys().collect::<Vec<_>>()
        );
        for (id, r) in &in_order {
            assert_eq!(&shuffled[id], r, "{id} differs under --shuffle {seed}");
        }
    }
}
