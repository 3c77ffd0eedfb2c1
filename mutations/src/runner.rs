//! The mutation run: plan, copy, build, baseline, judge every mutant, prove
//! the user's tree untouched.
//!
//! Guarantees:
//! - The user's tree is only read. Every build and test happens in a scratch
//!   copy that is removed before [`run`] returns, whatever it returns; the run
//!   ends by comparing a content fingerprint and `git status --porcelain` of
//!   the tree with the ones taken at the start ([`Error::TreeChanged`]).
//! - Nothing is judged unless every selected locator matches exactly once
//!   (registry drift stops the run first) and every named test exists and
//!   passes on the unmutated build ([`Error::TestNotFound`],
//!   [`Error::BaselineFailed`]).
//! - The verdict is [`crate::verdict::judge`] of what the run recorded, a
//!   pure function: a mutant is `caught` only if one of *its* named tests
//!   reported FAILED (or the test binary died of a signal whose cause its
//!   output names); `missed` only if
//!   every named test reported ok; a named test that printed no result makes
//!   it `error`, never `missed`. A build failure is `unviable`; a test run
//!   over max(floor, multiplier × baseline) is `timeout`.
//! - A schema mutant is judged only if the test-database facility logged that
//!   it dropped the object (see [`crate::drop_guards`]).
//! - Schemata mode builds once; if the instrumented tree does not build, the
//!   run falls back to rewrite mode and says so in the report's `notes`.
//! - `outcomes.json` is rewritten after every mutant.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::drop_guards::{self, DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, DropSpec};
use crate::error::{Error, Result};
use crate::event::{Event, Observer};
use crate::lane::Lane;
use crate::libtest::{self, TestStatus};
use crate::options::{Mode, RunOptions};
use crate::outcome::{Baseline, BaselineGroup, MutantOutcome, Report, Verdict};
use crate::plan::{self, Mutant, Plan};
use crate::process::{self, Exit};
use crate::registry::{Locator, Registry};
use crate::scratch::{ALWAYS_EXCLUDED, Scratch};
use crate::testref::TestTarget;
use crate::tree::TreeSnapshot;

/// How many named tests the baseline runs at once in one test binary. The
/// database tests spend most of their time waiting for Postgres, so more
/// than one per CPU overlaps those waits: the registry's 119 integration
/// tests took 13.2 and 13.7 s at 2 at once (libtest's default here) and
/// 8.4 and 9.0 s at 8 (2 CPUs, 2026-12-04). A mutant's run keeps libtest's
/// default: it names one to three tests.
const BASELINE_TEST_THREADS: usize = 8;
use crate::verdict::{self, BuildFailed, DropSeen, Record, TestRun};

/// Runs the mutation testing described by `opts`.
pub fn run(opts: &RunOptions, cancel: &Cancel, observer: &mut dyn Observer) -> Result<Report> {
    let start = Instant::now();
    let registry = Registry::load(&opts.registry)?;
    let guards = plan::select(&registry, &opts.only, opts.shard)?;
    let exclude = exclusions(opts, &registry);
    observer.event(&Event::Phase("fingerprinting the workspace".into()));
    let before = TreeSnapshot::take(&opts.root, &exclude)?;
    observer.event(&Event::Phase("locating guards".into()));
    let plan = plan::plan(&opts.root, &registry, &guards)?;
    observer.event(&Event::Planned(plan.mutants.len()));
    let judged = judge(opts, &registry, &plan, &exclude, cancel, observer);
    // The scratch copy is gone here: `judge` owned it.
    let after = TreeSnapshot::take(&opts.root, &exclude)?;
    let changes = before.changes_summary(&after, 12);
    if !changes.is_empty() {
        return Err(Error::TreeChanged { changes });
    }
    let mut report = judged?;
    report.complete = true;
    report.elapsed_secs = start.elapsed().as_secs_f64();
    report.recount();
    report.write_json(&opts.out_dir)?;
    Ok(report)
}

/// Top-level entries neither copied nor fingerprinted.
pub fn exclusions(opts: &RunOptions, registry: &Registry) -> Vec<String> {
    let mut ex: Vec<String> = ALWAYS_EXCLUDED.iter().map(|s| s.to_string()).collect();
    ex.extend(registry.scratch_exclude.iter().cloned());
    for inside in [&opts.out_dir, &opts.target_dir] {
        if let Ok(rel) = inside.strip_prefix(&opts.root)
            && let Some(first) = rel.components().next()
        {
            ex.push(first.as_os_str().to_string_lossy().into_owned());
        }
    }
    ex
}

/// Where schemata mode keeps its copy of the workspace between runs.
pub fn kept_dir(opts: &RunOptions) -> PathBuf {
    opts.target_dir.join("schemata-ws")
}

fn target_dir(opts: &RunOptions, mode: Mode, lane: usize) -> PathBuf {
    if mode == Mode::Schemata
        && let Some(shared) = &opts.schemata_target
    {
        return shared.clone();
    }
    if lane == 0 {
        opts.target_dir.join(mode.to_string())
    } else {
        opts.target_dir.join(format!("{mode}-w{lane}"))
    }
}

type Key = (String, TestTarget);

struct Shared<'a> {
    opts: &'a RunOptions,
    registry: &'a Registry,
    plan: &'a Plan,
    mode: Mode,
    baseline: BTreeMap<Key, Duration>,
}

fn judge(
    opts: &RunOptions,
    registry: &Registry,
    plan: &Plan,
    exclude: &[String],
    cancel: &Cancel,
    observer: &mut dyn Observer,
) -> Result<Report> {
    let mut report = Report {
        version: 1,
        complete: false,
        mode: opts.mode,
        registry: opts.registry.clone(),
        shard: opts.shard.map(|s| s.to_string()),
        selected: plan.mutants.len(),
        baseline: Baseline::default(),
        mutants: Vec::new(),
        summary: Default::default(),
        elapsed_secs: 0.0,
        notes: Vec::new(),
    };
    if plan.mutants.is_empty() {
        return Ok(report);
    }
    observer.event(&Event::Phase("copying the workspace".into()));
    let scratch = match opts.mode {
        Mode::Schemata => {
            let dir = kept_dir(opts);
            let mut waiting = || {
                observer.event(&Event::Phase(format!(
                    "waiting for another run to let go of {}",
                    dir.display()
                )))
            };
            Scratch::kept(
                &opts.root,
                exclude,
                &dir,
                &plan.instrumented,
                cancel,
                &mut waiting,
            )?
        }
        Mode::Rewrite => {
            Scratch::copy(&opts.root, exclude, opts.scratch_parent.as_deref(), cancel)?
        }
    };
    observer.event(&Event::ScratchReady(scratch.path().to_path_buf()));
    // The tree still holds what the plan read (a kept copy holds the
    // instrumented text of those files already, so the source is checked).
    for (file, text) in plan.originals() {
        let copied = std::fs::read_to_string(opts.root.join(&file)).unwrap_or_default();
        if copied != text {
            return Err(Error::TreeChanged {
                changes: vec![format!(
                    "{} changed while the run was starting",
                    file.display()
                )],
            });
        }
    }
    let packages = plan.packages();
    let mut mode = opts.mode;
    let mut lane0 = Lane::new(
        &scratch,
        target_dir(opts, mode, 0),
        registry,
        opts.cargo.as_ref(),
    )
    .with_test_env(&opts.test_env);
    if mode == Mode::Schemata {
        for (file, text) in &plan.instrumented {
            scratch.write(file, text)?;
        }
        lane0 = lane0.for_schemata(cancel)?;
    }
    observer.event(&Event::Phase(format!("building ({mode} mode)")));
    let built = lane0.build(&packages, opts.build_timeout, cancel)?;
    let built = match built {
        Err(failure) if mode == Mode::Schemata => {
            let note = format!(
                "the instrumented workspace does not build, so this run fell back to rewrite mode:\n{}",
                failure.tail
            );
            observer.event(&Event::Warning(note.clone()));
            report.notes.push(note);
            for (file, text) in plan.originals() {
                scratch.write(&file, &text)?;
            }
            mode = Mode::Rewrite;
            lane0 = Lane::new(
                &scratch,
                target_dir(opts, mode, 0),
                registry,
                opts.cargo.as_ref(),
            )
            .with_test_env(&opts.test_env);
            observer.event(&Event::Phase("building (rewrite mode)".into()));
            lane0.build(&packages, opts.build_timeout, cancel)?
        }
        other => other,
    };
    report.mode = mode;
    report.baseline.build_secs = match built {
        Ok(d) => d.as_secs_f64(),
        Err(f) => {
            return Err(Error::BaselineBuild {
                command: f.command,
                tail: f.tail,
            });
        }
    };
    observer.event(&Event::Phase("baseline: the named tests, unmutated".into()));
    let mut baseline = BTreeMap::new();
    for ((package, target), names) in plan.groups() {
        let names: Vec<String> = names.into_iter().collect();
        let f = lane0.run_baseline(&package, &target, &names, BASELINE_TEST_THREADS, cancel)?;
        let results = libtest::parse_results(&f.stdout);
        let id_of = |name: &str| {
            plan.mutants
                .iter()
                .find(|m| {
                    m.guard
                        .tests
                        .iter()
                        .any(|t| t.package == package && t.target == target && t.name == name)
                })
                .map_or_else(String::new, |m| m.guard.id.clone())
        };
        let full = |name: &str| format!("{package}/{target}::{name}");
        for name in &names {
            match results.get(name) {
                Some(TestStatus::Ok) => {}
                Some(TestStatus::Failed) => {
                    return Err(Error::BaselineFailed {
                        id: id_of(name),
                        test: full(name),
                        tail: output_tail(&f),
                    });
                }
                Some(TestStatus::Ignored) => {
                    return Err(Error::TestNotFound {
                        id: id_of(name),
                        test: format!("{} (it is #[ignore]d, so it never runs)", full(name)),
                    });
                }
                None => {
                    return Err(Error::TestNotFound {
                        id: id_of(name),
                        test: full(name),
                    });
                }
            }
        }
        if f.exit != Exit::Success {
            return Err(Error::BaselineFailed {
                id: id_of(&names[0]),
                test: format!("{package}/{target} (the test binary exited {:?})", f.exit),
                tail: output_tail(&f),
            });
        }
        report.baseline.groups.push(BaselineGroup {
            package: package.clone(),
            target: target.to_string(),
            tests: names.clone(),
            secs: f.elapsed.as_secs_f64(),
        });
        baseline.insert((package, target), f.elapsed);
    }

    // Lanes: schemata mode shares the one build; rewrite mode gives each job
    // its own copy and target directory.
    let jobs = opts.jobs.max(1).min(plan.mutants.len());
    let mut extra_scratches = Vec::new();
    let mut lanes = vec![(lane0.clone(), true)];
    for i in 1..jobs {
        match mode {
            Mode::Schemata => lanes.push((lane0.clone(), true)),
            Mode::Rewrite => {
                let s = Scratch::copy(&opts.root, exclude, opts.scratch_parent.as_deref(), cancel)?;
                lanes.push((
                    Lane::new(&s, target_dir(opts, mode, i), registry, opts.cargo.as_ref())
                        .with_test_env(&opts.test_env),
                    false,
                ));
                extra_scratches.push(s);
            }
        }
    }
    // In rewrite mode schema guards go first, while every lane's binaries
    // are still the unmutated build.
    let mut order: Vec<usize> = (0..plan.mutants.len()).collect();
    if mode == Mode::Rewrite {
        order.sort_by_key(|&i| plan.mutants[i].source.is_some());
    }
    let queue = Mutex::new(order.into_iter().collect::<VecDeque<usize>>());
    let shared = Shared {
        opts,
        registry,
        plan,
        mode,
        baseline,
    };
    let inner = Cancel::new();
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut outcomes: Vec<Option<MutantOutcome>> = vec![None; plan.mutants.len()];
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .into_iter()
            .map(|(mut lane, built)| {
                let tx = tx.clone();
                let (shared, queue, inner, packages) = (&shared, &queue, &inner, &packages);
                scope.spawn(move || {
                    let r = worker(&mut lane, built, packages, shared, queue, &tx, inner);
                    if r.is_err() {
                        inner.cancel();
                    }
                    r
                })
            })
            .collect();
        drop(tx);
        loop {
            if cancel.is_cancelled() {
                inner.cancel();
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Msg::Phase(p)) => observer.event(&Event::Phase(p)),
                Ok(Msg::Started(id)) => observer.event(&Event::MutantStarted(id)),
                Ok(Msg::Done(i, outcome)) => {
                    observer.event(&Event::MutantDone(outcome.clone()));
                    outcomes[i] = Some(*outcome);
                    report.mutants = outcomes.iter().flatten().cloned().collect();
                    report.recount();
                    if let Err(e) = report.write_json(&opts.out_dir) {
                        observer.event(&Event::Warning(format!("cannot write outcomes: {e}")));
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Cargo("a worker thread panicked".into())))
            })
            .collect()
    });
    drop(extra_scratches);
    if cancel.is_cancelled() {
        return Err(Error::Interrupted);
    }
    let mut first_err = None;
    for r in results {
        match r {
            Ok(()) => {}
            Err(Error::Interrupted) => {
                first_err.get_or_insert(Error::Interrupted);
            }
            Err(e) => {
                if matches!(first_err, None | Some(Error::Interrupted)) {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    report.mutants = outcomes.into_iter().flatten().collect();
    Ok(report)
}

enum Msg {
    Phase(String),
    Started(String),
    Done(usize, Box<MutantOutcome>),
}

fn worker(
    lane: &mut Lane,
    mut built: bool,
    packages: &BTreeMap<String, std::collections::BTreeSet<TestTarget>>,
    shared: &Shared<'_>,
    queue: &Mutex<VecDeque<usize>>,
    tx: &mpsc::Sender<Msg>,
    cancel: &Cancel,
) -> Result<()> {
    loop {
        cancel.check()?;
        let Some(i) = queue.lock().expect("queue lock").pop_front() else {
            return Ok(());
        };
        if !built {
            let _ = tx.send(Msg::Phase(format!(
                "building the scratch copy at {}",
                lane.workspace.display()
            )));
            if let Err(f) = lane.build(packages, shared.opts.build_timeout, cancel)? {
                return Err(Error::BaselineBuild {
                    command: f.command,
                    tail: f.tail,
                });
            }
            built = true;
        }
        let m = &shared.plan.mutants[i];
        let _ = tx.send(Msg::Started(m.guard.id.clone()));
        let outcome = judge_one(lane, m, shared, cancel)?;
        let _ = tx.send(Msg::Done(i, Box::new(outcome)));
    }
}

/// Puts a rewritten file back when dropped, even on an early return.
struct Restore {
    path: PathBuf,
    text: String,
    done: bool,
}

impl Restore {
    fn finish(mut self) -> Result<()> {
        self.done = true;
        std::fs::write(&self.path, &self.text).map_err(|e| Error::io(&self.path, e))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::write(&self.path, &self.text);
        }
    }
}

/// Applies one mutant in `lane`, runs its named tests, and lets
/// [`verdict::judge`] decide from what was recorded.
fn judge_one(
    lane: &mut Lane,
    m: &Mutant,
    shared: &Shared<'_>,
    cancel: &Cancel,
) -> Result<MutantOutcome> {
    let start = Instant::now();
    let mut outcome = MutantOutcome {
        id: m.guard.id.clone(),
        kind: m.guard.kind(),
        operator: m.guard.operator,
        threat: m.guard.threat.clone(),
        invariant: m.guard.invariant.clone(),
        location: m.location(),
        verdict: Verdict::Error,
        caught_by: Vec::new(),
        tests: m.guard.tests.iter().map(ToString::to_string).collect(),
        build_secs: None,
        test_secs: 0.0,
        total_secs: 0.0,
        timeout_secs: 0.0,
        replaced: m.source.as_ref().map(|s| s.rewritten.replaced.clone()),
        replacement: m.source.as_ref().map(|s| s.rewritten.replacement.clone()),
        note: None,
        output_tail: String::new(),
    };
    let mut record = Record::default();
    let tails = record_run(lane, m, shared, cancel, start, &mut outcome, &mut record)?;
    let judged = verdict::judge(&record);
    outcome.verdict = judged.verdict;
    outcome.note = judged.note;
    outcome.caught_by = judged.caught_by;
    outcome.output_tail = tails;
    outcome.total_secs = start.elapsed().as_secs_f64();
    Ok(outcome)
}

/// Applies the mutant (the switch, a rewrite and rebuild, or the drop
/// list), runs its named tests and fills `record`; returns the output tail.
/// The rewritten file is restored before this returns, whatever it returns.
fn record_run(
    lane: &mut Lane,
    m: &Mutant,
    shared: &Shared<'_>,
    cancel: &Cancel,
    start: Instant,
    outcome: &mut MutantOutcome,
    record: &mut Record,
) -> Result<String> {
    let opts = shared.opts;
    let groups = m.groups();
    let mut env: Vec<(String, OsString)> = Vec::new();
    let mut restore = None;
    let mut drop_log: Option<(PathBuf, DropSpec)> = None;
    match (&m.source, &m.guard.locator) {
        (Some(_), _) if shared.mode == Mode::Schemata => {
            env.push((
                shared.registry.switch_env.clone(),
                m.guard.id.clone().into(),
            ));
        }
        (Some(site), _) => {
            let path = lane.workspace.join(&site.file);
            std::fs::write(&path, &site.rewritten.text).map_err(|e| Error::io(&path, e))?;
            restore = Some(Restore {
                path,
                text: site.original.clone(),
                done: false,
            });
            let mut pkgs: BTreeMap<String, std::collections::BTreeSet<TestTarget>> =
                BTreeMap::new();
            for (p, t) in groups.keys() {
                pkgs.entry(p.clone()).or_default().insert(t.clone());
            }
            let built = lane.build(&pkgs, opts.build_timeout, cancel)?;
            outcome.build_secs = Some(start.elapsed().as_secs_f64());
            if let Err(f) = built {
                if let Some(r) = restore.take() {
                    r.finish()?;
                }
                record.build_failed = Some(BuildFailed {
                    command: f.command,
                    timed_out: f.timed_out,
                });
                return Ok(f.tail);
            }
        }
        (None, Locator::Schema(loc)) => {
            let spec = drop_guards::spec_of(loc).map_err(|e| Error::RegistryEntry {
                id: m.guard.id.clone(),
                message: e.to_string(),
            })?;
            let log = lane.logs.join(format!("drop-{}.log", m.guard.id));
            std::fs::write(&log, "").map_err(|e| Error::io(&log, e))?;
            env.push((
                DROP_GUARDS_ENV.into(),
                drop_guards::encode(std::slice::from_ref(&spec)).into(),
            ));
            env.push((DROP_GUARDS_LOG_ENV.into(), log.clone().into()));
            drop_log = Some((log, spec));
        }
        (None, Locator::Source(_)) => unreachable!("the plan locates every source guard"),
    }

    let test_start = Instant::now();
    let mut tails = Vec::new();
    for ((package, target), names) in &groups {
        let names: Vec<String> = names.iter().cloned().collect();
        let limit = opts.test_limit(shared.baseline[&(package.clone(), target.clone())]);
        outcome.timeout_secs = outcome.timeout_secs.max(limit.as_secs_f64());
        let f = lane.run_tests(package, target, &names, &env, Some(limit), cancel)?;
        let results = libtest::parse_results(&f.stdout);
        let run = TestRun {
            binary: format!("{package}/{target}"),
            results: names
                .iter()
                .map(|n| (n.clone(), results.get(n).copied()))
                .collect(),
            exit: f.exit,
            limit_secs: limit.as_secs_f64(),
            signal_cause: crate::verdict::signal_cause(&f.stderr),
        };
        let telling = f.exit != Exit::Success
            || run
                .results
                .iter()
                .any(|(_, s)| *s == Some(TestStatus::Failed));
        if telling || tails.is_empty() {
            tails.insert(0, output_tail(&f));
        }
        record.runs.push(run);
        if f.exit == Exit::TimedOut {
            break;
        }
    }
    outcome.test_secs = test_start.elapsed().as_secs_f64();
    if let Some(r) = restore.take() {
        r.finish()?;
    }
    if let Some((log, spec)) = drop_log {
        let seen = DropSeen::from_log(&drop_guards::read_log(&log), &spec);
        record.drop = Some((spec.to_string(), seen));
    }
    Ok(tails.join("\n"))
}

fn output_tail(f: &process::Finished) -> String {
    let mut t = process::tail(&f.stdout, 40);
    let e = process::tail(&f.stderr, 20);
    if !e.trim().is_empty() {
        t.push_str("\n--- stderr ---\n");
        t.push_str(&e);
    }
    t
}

/// Where a run writes its build cache for `mode` (lane 0): schemata mode's
/// is shared by every job (and by default is the workspace's own target
/// directory); rewrite mode's job N > 0 uses `<target_dir>/rewrite-wN`.
pub fn cache_dir(opts: &RunOptions, mode: Mode) -> PathBuf {
    target_dir(opts, mode, 0)
}
