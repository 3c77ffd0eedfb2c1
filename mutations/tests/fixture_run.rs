//! The mutation runner, run for real on the fixture workspace
//! `tests/fixtures/mini`: real scratch copies, real `cargo` builds, real test
//! binaries. The fixture is dependency-free and builds into a persistent
//! directory under this workspace's `target/tmp`, so reruns stay cheap.
//!
//! Runs share two cores, so the tests that invoke cargo take a lock and run
//! one at a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use mutations::{
    Cancel, Error, Event, Mode, Registry, Report, RunOptions, Verdict, completeness, sanity,
};

static CARGO: Mutex<()> = Mutex::new(());

fn cargo_lock() -> MutexGuard<'static, ()> {
    CARGO.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini")
}

fn options(root: &Path, mode: Mode, out: &Path) -> RunOptions {
    let mut o = RunOptions::new(root);
    o.mode = mode;
    o.out_dir = out.to_path_buf();
    o.target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mutants-mini");
    o.schemata_target = None;
    o.timeout_floor = Duration::from_secs(3);
    o
}

/// Every file of a tree, byte for byte.
fn contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A copy of the fixture in a temporary directory, for tests that change it.
fn fixture_copy() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (rel, bytes) in contents(&fixture()) {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    d
}

fn log(e: &Event) {
    match e {
        Event::MutantDone(o) => eprintln!(
            "  {:<20} {:<8} build {:>5} test {:>5.2}s total {:>5.2}s",
            o.id,
            o.verdict.as_str(),
            o.build_secs.map_or("-".into(), |b| format!("{b:.2}s")),
            o.test_secs,
            o.total_secs
        ),
        Event::Phase(p) => eprintln!("  [{p}]"),
        Event::Warning(w) => eprintln!("  warning: {w}"),
        _ => {}
    }
}

fn verdicts(r: &Report) -> BTreeMap<String, Verdict> {
    r.mutants
        .iter()
        .map(|m| (m.id.clone(), m.verdict))
        .collect()
}

const EXPECTED: &[(&str, Verdict)] = &[
    ("quantity-nonzero", Verdict::Caught),
    ("merchant-allowlist", Verdict::Caught),
    ("amount-cap", Verdict::Caught),
    ("purpose-length", Verdict::Missed),
    ("instalment-step", Verdict::Timeout),
    ("event-signature", Verdict::Caught),
    ("orders-qty-positive", Verdict::Caught),
];

#[test]
fn schemata_and_rewrite_modes_reach_the_same_right_verdicts() {
    let _g = cargo_lock();
    let root = fixture();
    let before = contents(&root);
    let mut by_mode = Vec::new();
    for mode in [Mode::Schemata, Mode::Rewrite] {
        let out = tempfile::tempdir().unwrap();
        let opts = options(&root, mode, out.path());
        eprintln!("{mode} mode:");
        let start = std::time::Instant::now();
        let report = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
        eprintln!(
            "{mode} mode: {} mutants in {:.1}s (baseline build {:.1}s)",
            report.mutants.len(),
            start.elapsed().as_secs_f64(),
            report.baseline.build_secs
        );
        assert_eq!(report.mode, mode, "no fallback: {:?}", report.notes);
        let want: BTreeMap<String, Verdict> = EXPECTED
            .iter()
            .map(|(id, v)| (id.to_string(), *v))
            .collect();
        assert_eq!(verdicts(&report), want, "{mode} mode");

        // The weak test lets one guard through: the run fails, naming it.
        assert!(!report.all_caught());
        assert_eq!(report.exit_code(), 1);
        let summary = report.summary_text();
        assert!(
            summary.contains("MISSED purpose-length (src/guards.rs:"),
            "{summary}"
        );
        assert!(summary.contains("TIMEOUT instalment-step"), "{summary}");
        let purpose = report
            .mutants
            .iter()
            .find(|m| m.id == "purpose-length")
            .unwrap();
        assert_eq!(purpose.replaced.as_deref(), Some(" || purpose.len() > 64"));
        let cap = report
            .mutants
            .iter()
            .find(|m| m.id == "amount-cap")
            .unwrap();
        assert_eq!(cap.caught_by, ["mini/lib::guards::tests::cap_is_inclusive"]);
        assert!(
            cap.output_tail.contains("cap_is_inclusive"),
            "{}",
            cap.output_tail
        );

        // outcomes.json says the same.
        let json: Report = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("outcomes.json")).unwrap(),
        )
        .unwrap();
        assert!(json.complete);
        assert_eq!(verdicts(&json), verdicts(&report));
        assert_eq!(json.summary.missed, 1);

        // The fixture was never written.
        assert_eq!(contents(&root), before, "{mode} mode changed the fixture");
        by_mode.push(verdicts(&report));
    }
    assert_eq!(
        by_mode[0], by_mode[1],
        "schemata and rewrite modes disagree"
    );
}

/// Every file under `dir` and its modification time.
fn mtimes(dir: &Path) -> BTreeMap<PathBuf, std::time::SystemTime> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, std::time::SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let e = e.unwrap();
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p, meta.modified().unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

#[test]
fn a_second_schemata_run_over_an_unchanged_tree_builds_nothing() {
    let _g = cargo_lock();
    let root = fixture();
    let out = tempfile::tempdir().unwrap();
    let opts = options(&root, Mode::Schemata, out.path());
    let first = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
    assert_eq!(first.mode, Mode::Schemata, "{:?}", first.notes);
    let kept = mutations::runner::kept_dir(&opts);
    let artifacts = opts.target_dir.join("schemata");
    let (copy, built) = (mtimes(&kept.join("ws")), mtimes(&artifacts));
    assert!(
        copy.keys().any(|p| p.ends_with("src/guards.rs")),
        "the kept copy holds the workspace: {copy:?}"
    );
    assert!(
        !built.is_empty(),
        "nothing built under {}",
        artifacts.display()
    );

    let second = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
    assert_eq!(verdicts(&second), verdicts(&first));
    assert_eq!(
        mtimes(&kept.join("ws")),
        copy,
        "the kept copy was rewritten although the tree did not change"
    );
    let rebuilt: Vec<_> = mtimes(&artifacts)
        .into_iter()
        .filter(|(p, t)| built.get(p) != Some(t))
        .map(|(p, _)| p)
        .collect();
    // Cargo may touch its own bookkeeping; no compiled artifact changes.
    let compiled: Vec<_> = rebuilt
        .iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "deps"))
        .collect();
    assert!(compiled.is_empty(), "rebuilt: {compiled:?}");
}

#[test]
fn a_locator_that_no_longer_matches_is_registry_drift() {
    let ws = fixture_copy();
    let guards = ws.path().join("src/guards.rs");
    let src = std::fs::read_to_string(&guards).unwrap();
    let moved = src.replace(
        "return Err(Reason::QuantityInvalid);",
        "return Err(Reason::StepInvalid);",
    );
    std::fs::write(&guards, &moved).unwrap();
    let before = contents(ws.path());
    let out = tempfile::tempdir().unwrap();
    let err = mutations::run(
        &options(ws.path(), Mode::Schemata, out.path()),
        &Cancel::new(),
        &mut log,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Drift { .. }), "{msg}");
    assert!(
        msg.contains("registry drift: entry `quantity-nonzero`"),
        "{msg}"
    );
    assert!(
        msg.contains("src/guards.rs") && msg.contains("guards::check_quantity"),
        "{msg}"
    );
    assert!(msg.contains("0 matches"), "{msg}");
    assert_eq!(contents(ws.path()), before);

    // A locator that matches twice is drift too.
    let twice = src.replace(
        "    Ok(quantity)\n",
        "    if quantity > 1000 {\n        return Err(Reason::QuantityInvalid);\n    }\n    Ok(quantity)\n",
    );
    std::fs::write(&guards, twice).unwrap();
    let registry = Registry::load(&ws.path().join("mutations/registry.yaml")).unwrap();
    let err = sanity::check_locators(ws.path(), &registry)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("entry `quantity-nonzero`") && err.contains("2 matches (lines 7, 10)"),
        "{err}"
    );
}

#[test]
fn the_fixture_registry_is_sane_and_complete() {
    let root = fixture();
    let registry = Registry::load(&root.join("mutations/registry.yaml")).unwrap();
    assert_eq!(sanity::check_locators(&root, &registry).unwrap(), 7);
    let c = completeness::check(&root, &registry).unwrap();
    assert!(c.is_complete(), "{}", c.render());
    assert_eq!(
        (c.registered.len(), c.exempt.len()),
        (6, 2),
        "{}",
        c.render()
    );

    // Without its exemption, the docs example is reported.
    let text = std::fs::read_to_string(root.join("mutations/registry.yaml"))
        .unwrap()
        .replace(
            "  - file: src/guards.rs\n    function: example_refusal\n    produces: QuantityInvalid\n    reason: names a reason for the docs; refuses nothing\n",
            "",
        );
    let r = Registry::parse(&text, Path::new("registry.yaml")).unwrap();
    let c = completeness::check(&root, &r).unwrap();
    assert_eq!(c.unregistered.len(), 1, "{}", c.render());
    assert!(
        c.render()
            .contains("fn `guards::example_refusal`: produces Reason::QuantityInvalid"),
        "{}",
        c.render()
    );

    // A schema object no migration names is drift.
    let text = std::fs::read_to_string(root.join("mutations/registry.yaml"))
        .unwrap()
        .replace(
            "object: ck_orders_qty_positive",
            "object: ck_orders_qty_gone",
        );
    let r = Registry::parse(&text, Path::new("registry.yaml")).unwrap();
    let e = sanity::check_locators(&root, &r).unwrap_err().to_string();
    assert!(
        e.contains("entry `orders-qty-positive`") && e.contains("ck_orders_qty_gone"),
        "{e}"
    );
}

/// The fixture's registry with `from` replaced by `to`, written outside the tree.
fn registry_variant(dir: &Path, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixture().join("mutations/registry.yaml")).unwrap();
    assert!(text.contains(from));
    let p = dir.join("registry.yaml");
    std::fs::write(&p, text.replace(from, to)).unwrap();
    p
}

#[test]
fn a_named_test_that_matches_nothing_stops_the_run() {
    let _g = cargo_lock();
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(&fixture(), Mode::Schemata, out.path());
    opts.registry = registry_variant(
        out.path(),
        "tests::zero_quantity_refused",
        "tests::zero_quantity_refusd",
    );
    let registry = Registry::load(&opts.registry).unwrap();
    let err = sanity::check_tests(&opts, &registry, &Cancel::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("entry `quantity-nonzero`: test `mini/lib::guards::tests::zero_quantity_refusd` matches no test"),
        "{err}"
    );
    opts.only = vec!["quantity-nonzero".into()];
    let err = mutations::run(&opts, &Cancel::new(), &mut log).unwrap_err();
    assert!(
        matches!(err, Error::TestNotFound { ref id, .. } if id == "quantity-nonzero"),
        "{err}"
    );
}

#[test]
fn a_baseline_failure_names_the_test() {
    let _g = cargo_lock();
    let ws = fixture_copy();
    let guards = ws.path().join("src/guards.rs");
    let src = std::fs::read_to_string(&guards).unwrap();
    std::fs::write(
        &guards,
        src.replace("assert_eq!(fee(500), 5);", "assert_eq!(fee(500), 6);"),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(ws.path(), Mode::Rewrite, out.path());
    opts.registry = registry_variant(
        out.path(),
        "exempt:",
        "  - id: fee-assignment\n    kind: source\n    invariant: i.\n    threat: t\n    tests: [mini/lib::guards::tests::fee_is_one_percent]\n    operator: delete\n    locator: {file: src/guards.rs, function: fee, contains: \"fee = amount\"}\nexempt:",
    );
    opts.only = vec!["fee-assignment".into()];
    let err = mutations::run(&opts, &Cancel::new(), &mut log)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("baseline: test `mini/lib::guards::tests::fee_is_one_percent` (registry entry `fee-assignment`) does not pass unmutated"),
        "{err}"
    );
}

#[test]
fn an_instrumentation_that_does_not_build_falls_back_to_rewrite_and_is_unviable() {
    let _g = cargo_lock();
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(&fixture(), Mode::Schemata, out.path());
    opts.registry = registry_variant(
        out.path(),
        "exempt:",
        "  - id: fee-assignment\n    kind: source\n    invariant: i.\n    threat: t\n    tests: [mini/lib::guards::tests::fee_is_one_percent]\n    operator: delete\n    locator: {file: src/guards.rs, function: fee, contains: \"fee = amount\"}\nexempt:",
    );
    opts.only = vec!["fee-assignment".into(), "quantity-nonzero".into()];
    let report = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
    assert_eq!(report.mode, Mode::Rewrite);
    assert!(
        report.notes[0].contains("fell back to rewrite mode"),
        "{:?}",
        report.notes
    );
    assert_eq!(report.verdict("fee-assignment"), Some(Verdict::Unviable));
    assert_eq!(report.verdict("quantity-nonzero"), Some(Verdict::Caught));
}

#[test]
fn only_shard_and_jobs_select_and_share_the_work() {
    let _g = cargo_lock();
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(&fixture(), Mode::Schemata, out.path());
    opts.shard = Some("0/2".parse().unwrap());
    opts.jobs = 2;
    opts.only = vec![
        "quantity-nonzero".into(),
        "amount-cap".into(),
        "purpose-length".into(),
        "orders-qty-positive".into(),
    ];
    let report = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
    // Positions 0 and 2 of the --only selection, in registry order.
    let want: BTreeMap<String, Verdict> = [
        ("quantity-nonzero".to_string(), Verdict::Caught),
        ("purpose-length".to_string(), Verdict::Missed),
    ]
    .into();
    assert_eq!(verdicts(&report), want);
    assert_eq!(report.shard.as_deref(), Some("0/2"));
    let err = {
        opts.only = vec!["no-such-guard".into()];
        mutations::run(&opts, &Cancel::new(), &mut log)
            .unwrap_err()
            .to_string()
    };
    assert!(err.contains("--only no-such-guard"), "{err}");
}

#[test]
fn an_interrupt_removes_the_scratch_copy_and_leaves_the_tree_alone() {
    let _g = cargo_lock();
    let root = fixture();
    let before = contents(&root);
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(&root, Mode::Rewrite, out.path());
    opts.only = vec!["instalment-step".into(), "quantity-nonzero".into()];
    let cancel = Cancel::new();
    let mut scratch = None;
    let c = cancel.clone();
    let mut observe = |e: &Event| {
        log(e);
        match e {
            Event::ScratchReady(p) => scratch = Some(p.clone()),
            // Interrupt in the middle of the first mutant (a rebuild is running).
            Event::MutantStarted(_) => c.cancel(),
            _ => {}
        }
    };
    let err = mutations::run(&opts, &cancel, &mut observe).unwrap_err();
    assert!(matches!(err, Error::Interrupted), "{err}");
    let scratch = scratch.expect("the scratch copy was made");
    assert!(!scratch.exists(), "{} is still there", scratch.display());
    assert_eq!(contents(&root), before);
}

#[test]
fn four_shards_merged_reach_the_verdicts_of_one_run() {
    let _g = cargo_lock();
    let root = fixture();
    let registry = Registry::load(&root.join("mutations/registry.yaml")).unwrap();
    let mut shards = Vec::new();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    for (k, out) in dirs.iter().enumerate() {
        let mut opts = options(&root, Mode::Schemata, out.path());
        opts.shard = Some(format!("{k}/4").parse().unwrap());
        let report = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
        assert_eq!(report.shard.as_deref(), Some(format!("{k}/4").as_str()));
        shards.push(mutations::merge::read_shard(out.path()).unwrap());
    }
    let merged = mutations::merge::merge(&registry, &shards).unwrap();
    let want: BTreeMap<String, Verdict> = EXPECTED
        .iter()
        .map(|(id, v)| (id.to_string(), *v))
        .collect();
    assert_eq!(verdicts(&merged), want, "the merge of 4 shards");
    assert_eq!(merged.selected, EXPECTED.len());
    assert_eq!(merged.summary.missed, 1);
    assert_eq!(
        merged.exit_code(),
        1,
        "the fixture's missed guard fails the merge"
    );
    // Three of the four shards leave a gap.
    let err = mutations::merge::merge(&registry, &shards[..3]).unwrap_err();
    assert!(err.to_string().contains("3/4 missing"), "{err}");
}

/// The caller's own build of the fixture's lib test binary, into `target`:
/// its path, bytes and modification time.
fn callers_build(ws: &Path, target: &Path) -> (PathBuf, Vec<u8>, std::time::SystemTime) {
    let out = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
        .current_dir(ws)
        .env("CARGO_TARGET_DIR", target)
        .args([
            "test",
            "--no-run",
            "--lib",
            "--message-format=json-render-diagnostics",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the lib test binary");
    let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
    (exe.clone(), std::fs::read(&exe).unwrap(), modified)
}

/// Schemata mode builds in the caller's own target directory (reusing what
/// is built there) without overwriting the caller's artifacts: the
/// instrumented crate has a profile key of its own, so the caller's test
/// binary is neither rebuilt nor replaced, before or after, and the caller's
/// next build finds it fresh.
#[test]
fn schemata_mode_shares_the_callers_target_directory_and_leaves_its_build_alone() {
    let _g = cargo_lock();
    let ws = fixture_copy();
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mutants-mini-shared");
    let (exe, bytes, modified) = callers_build(ws.path(), &shared);
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(ws.path(), Mode::Schemata, out.path());
    opts.schemata_target = Some(shared.clone());
    opts.only = vec!["amount-cap".into(), "quantity-nonzero".into()];
    let report = mutations::run(&opts, &Cancel::new(), &mut log).unwrap();
    assert_eq!(
        report.mode,
        Mode::Schemata,
        "no fallback: {:?}",
        report.notes
    );
    assert!(report.all_caught(), "{}", report.summary_text());
    assert_eq!(
        std::fs::metadata(&exe).unwrap().modified().unwrap(),
        modified,
        "the schemata build replaced the caller's {}",
        exe.display()
    );
    assert!(
        std::fs::read(&exe).unwrap() == bytes,
        "the caller's binary changed"
    );
    let (again, _, modified_again) = callers_build(ws.path(), &shared);
    assert_eq!(
        (again, modified_again),
        (exe, modified),
        "the caller's build went stale"
    );
}
