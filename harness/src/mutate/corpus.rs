//! `harness mutate --corpus`: what the committed corpus proves per guard.
//!
//! Guarantees:
//! - One build: the harness binary of the schemata workspace (every source
//!   guard of the registry behind its runtime switch), copied out of the
//!   target directory before anything runs. Each benchmark is that binary's
//!   `bench --engines database` over the corpus, in a process of its own,
//!   with a source guard switched off by `SPENDGATE_MUTANT` (a comma list for
//!   a pair) and a schema guard dropped from every database the benchmark
//!   makes by `SPENDGATE_DROP_GUARDS`; a schema guard counts as judged only
//!   when the drop log shows it dropped. No other mutation variable reaches a
//!   benchmark.
//! - The comparison is against the same binary run with nothing switched
//!   off, over the scenarios that run sent on the database engine and
//!   passed ([`diff`]). An attack blocked there and not blocked without the
//!   guard is `unblocked` (money or authority would move), unless the gate
//!   answered it with an engine error (it failed closed: the run stopped,
//!   nothing was let through); any other scenario that stops passing (a
//!   reason changed, a legitimate scenario refused, an engine error) is
//!   `reason_only`.
//! - A guard that unblocks nothing alone is switched off again together with
//!   each of its twins (the guards its registry entry names in `twins`, and
//!   those whose entries name it: whatever their threat), then each other
//!   guard of the same threat (partners that unblock nothing alone first;
//!   every twin, and at most `pair_limit` partners in all), until a pair
//!   unblocks an attack that neither unblocks alone ([`classify`]); that
//!   partner is `covered_by`. A guard no pair covers is switched off with
//!   its whole group at once (every twin and every guard of its threat),
//!   then with one fewer at a time ([`group_cover`]): the smallest set found
//!   after which an attack still gets through with the guard off and not
//!   with it on is its cover (`covered_by`, then `covered_with`), a guard
//!   behind three or more layers. A pair's benchmark runs only the scenarios of
//!   the two guards' threat classes (`bench --class`, repeated), and is
//!   compared over those; a partner not judged alone over the whole corpus
//!   is judged alone over the classes of every pair it is in. A pair whose
//!   threats have no scenario in the corpus is not run, and the row says so.
//! - The rows go to `OUT/corpus.json`; with `--report-dir`, they are merged
//!   into the `mutations.json` already there and both report files are
//!   rewritten. Exit 0 when every selected guard was judged, 1 when any
//!   could not be, 130 when interrupted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;
use mutations::drop_guards::{self, DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, LogLine};
use mutations::lane::Lane;
use mutations::process::{self, Exit};
use mutations::registry::{Guard, Locator};
use mutations::report::{
    CorpusEffect, CorpusRun, CorpusSummary, GuardCorpus, MutationReport, is_money_threat,
};
use mutations::scratch::Scratch;
use mutations::{Cancel, Error, Registry, RunOptions, plan};
use serde::Deserialize;

use crate::bench::results::{Label, ScenarioResult};

/// The longest one benchmark may run before its guard is reported unjudged.
const BENCH_LIMIT: Duration = Duration::from_secs(900);

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct CorpusArgs<'a> {
    /// The corpus file or folder.
    pub corpus: PathBuf,
    /// The most partners tried for one guard (its twins are always tried).
    pub pair_limit: usize,
    /// Benchmarks at once.
    pub jobs: usize,
    pub report_dir: Option<&'a Path>,
    /// The command line, for the report.
    pub command: String,
}

/// What a benchmark with some guards off did to the corpus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    pub unblocked: BTreeSet<String>,
    pub reason_only: BTreeSet<String>,
}

/// The scenarios the comparison is over: sent on the database engine and
/// passing with nothing switched off.
pub type Baseline = BTreeMap<String, ScenarioResult>;

/// The baseline of one unmutated run, and the ids it leaves out (not
/// passing there, or not sent).
pub fn baseline_of(results: Vec<ScenarioResult>) -> (Baseline, Vec<String>) {
    let mut kept = Baseline::new();
    let mut left_out = Vec::new();
    for r in results {
        if r.ran() && r.passed && !r.engine_error {
            kept.insert(r.id.clone(), r);
        } else if r.ran() {
            left_out.push(r.id);
        }
    }
    (kept, left_out)
}

/// The part of `baseline` of the threat classes `classes` (all of it when
/// none is given).
pub fn of_class(baseline: &Baseline, classes: &[&str]) -> Baseline {
    baseline
        .iter()
        .filter(|(_, r)| {
            classes.is_empty() || r.class.as_deref().is_some_and(|c| classes.contains(&c))
        })
        .map(|(k, r)| (k.clone(), r.clone()))
        .collect()
}

/// The threat classes a pair of guards is compared over: both threats, once.
pub fn pair_classes<'r>(guard: &'r Guard, partner: &'r Guard) -> Vec<&'r str> {
    let mut c = vec![guard.threat.as_str()];
    if partner.threat != guard.threat {
        c.push(partner.threat.as_str());
    }
    c
}

/// How `mutant` differs from `baseline`: attacks let through, and scenarios
/// that only stopped passing. A baseline scenario missing from `mutant`
/// stopped passing.
pub fn diff(baseline: &Baseline, mutant: &[ScenarioResult]) -> Diff {
    let by_id: BTreeMap<&str, &ScenarioResult> =
        mutant.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut d = Diff::default();
    for (id, base) in baseline {
        match by_id.get(id.as_str()) {
            Some(m)
                if base.label == Label::Attack && base.blocked && !m.blocked && !m.engine_error =>
            {
                d.unblocked.insert(id.clone());
            }
            Some(m) if m.passed && !m.engine_error => {}
            _ => {
                d.reason_only.insert(id.clone());
            }
        }
    }
    d
}

/// One guard's row from its own run and the pairs tried in order, each as
/// (partner, the pair's diff, the partner's own diff); stops at the first
/// pair that unblocks an attack neither unblocks alone.
pub fn classify(single: &Diff, pairs: &[(String, Diff, Diff)]) -> GuardCorpus {
    let mut row = GuardCorpus {
        effect: CorpusEffect::UnitOnly,
        unblocked: single.unblocked.iter().cloned().collect(),
        reason_only: single.reason_only.iter().cloned().collect(),
        covered_by: None,
        covered_with: Vec::new(),
        covered_scenarios: Vec::new(),
        pairs_tried: 0,
        note: None,
        money: false,
    };
    if !single.unblocked.is_empty() {
        row.effect = CorpusEffect::Unblocks;
        return row;
    }
    for (partner, both, alone) in pairs {
        row.pairs_tried += 1;
        let new: Vec<String> = both
            .unblocked
            .difference(&alone.unblocked)
            .cloned()
            .collect();
        if !new.is_empty() {
            row.effect = CorpusEffect::Covered;
            row.covered_by = Some(partner.clone());
            row.covered_scenarios = new;
            break;
        }
    }
    row
}

/// What switching a group of guards off showed for one guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupCover {
    /// With these guards off (in group order), an attack gets through with
    /// the guard off too and not with it on: the scenarios.
    Cover(Vec<String>, Vec<String>),
    /// With the whole group off, the guard's presence blocks nothing more.
    None,
    /// The whole group could not be judged: why.
    NotJudged(String),
}

/// A benchmark judged with some guards off: the attacks it unblocks, or why
/// it could not run.
pub type Unblocked = std::result::Result<BTreeSet<String>, String>;

/// A cover for `guard` behind any number of layers among `group`: the whole
/// group off with the guard and without it, then one guard of the group
/// fewer at a time (the last first), dropping each one after which an attack
/// still gets through with the guard off and not with it on. `run(ids)`
/// judges the corpus with `ids` off. Every cover it returns was seen in two
/// runs: the set off with the guard (the attack gets through) and without
/// it (the attack is blocked).
pub fn group_cover(
    guard: &str,
    group: &[String],
    run: &mut dyn FnMut(&[&str]) -> Result<Unblocked>,
) -> Result<GroupCover> {
    let shown = |set: &[String], run: &mut dyn FnMut(&[&str]) -> Result<Unblocked>| {
        let with: Vec<&str> = std::iter::once(guard)
            .chain(set.iter().map(String::as_str))
            .collect();
        let Ok(both) = run(&with)? else {
            return Ok(None);
        };
        if both.is_empty() {
            return Ok(Some(BTreeSet::new()));
        }
        let without: Vec<&str> = set.iter().map(String::as_str).collect();
        let Ok(rest) = run(&without)? else {
            return Ok(None);
        };
        Ok::<_, anyhow::Error>(Some(both.difference(&rest).cloned().collect()))
    };
    let mut set = group.to_vec();
    let mut new = match shown(&set, run)? {
        None => {
            return Ok(GroupCover::NotJudged(
                "the group's benchmark could not run".to_string(),
            ));
        }
        Some(n) if n.is_empty() => return Ok(GroupCover::None),
        Some(n) => n,
    };
    for p in group.iter().rev() {
        if set.len() < 2 {
            break;
        }
        let smaller: Vec<String> = set.iter().filter(|g| *g != p).cloned().collect();
        if let Some(n) = shown(&smaller, run)?
            && !n.is_empty()
        {
            set = smaller;
            new = n;
        }
    }
    Ok(GroupCover::Cover(set, new.into_iter().collect()))
}

/// Whether switching `group` off at once can show what its pairs `tried`
/// did not: a group of two or more layers, or one partner no pair tried.
pub fn group_adds_to_pairs(group: &[String], tried: &[String]) -> bool {
    group.len() >= 2 || group.iter().any(|g| !tried.contains(g))
}

/// Whether `id`, judged alone, let an attack through (None: not judged).
fn unblocks_alone(
    alone: &BTreeMap<String, std::result::Result<Diff, String>>,
    id: &str,
) -> Option<bool> {
    match alone.get(id) {
        Some(Ok(d)) => Some(!d.unblocked.is_empty()),
        _ => None,
    }
}

/// The partners of `guard` to try, in order: its twins (those its entry
/// names, in that order, then the guards whose entries name it, in registry
/// order), every one of them whatever its threat; then other guards of the
/// same threat, those that unblock nothing alone first (a partner that does
/// would hide the pair's own effect behind its own), until there are
/// `limit` partners in all.
pub fn partners<'r>(
    registry: &'r Registry,
    guard: &Guard,
    unblocks_alone: &dyn Fn(&str) -> Option<bool>,
    limit: usize,
) -> Vec<&'r Guard> {
    let mut chosen: Vec<&Guard> = guard
        .twins
        .iter()
        .filter_map(|t| registry.guard(t))
        .collect();
    for g in &registry.guards {
        if g.twins.contains(&guard.id) && !chosen.iter().any(|c| c.id == g.id) {
            chosen.push(g);
        }
    }
    let mut same: Vec<&Guard> = registry
        .guards
        .iter()
        .filter(|g| {
            g.threat == guard.threat && g.id != guard.id && !chosen.iter().any(|c| c.id == g.id)
        })
        .collect();
    same.sort_by_key(|g| unblocks_alone(&g.id).unwrap_or(false));
    same.truncate(limit.saturating_sub(chosen.len()));
    chosen.extend(same);
    chosen
}

#[derive(Debug, Deserialize)]
struct ResultsFile {
    results: Vec<ScenarioResult>,
}

/// The instrumented binary and how to run it.
struct Bench<'a> {
    exe: PathBuf,
    root: &'a Path,
    corpus: &'a Path,
    out: PathBuf,
    test_env: &'a [(OsString, OsString)],
    switch_env: &'a str,
    registry: &'a Registry,
}

/// A benchmark's outcome: its results, or why there are none.
type Ran = std::result::Result<Vec<ScenarioResult>, String>;

impl Bench<'_> {
    /// Runs the corpus (only the scenarios of `classes`, when any is given)
    /// with the guards `ids` off (none: the baseline).
    fn run(&self, ids: &[&str], classes: &[&str], cancel: &Cancel) -> Result<Ran> {
        let tag = run_tag(ids);
        let dir = self.out.join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = dir.join("drop-guards.log");
        let mut cmd = Command::new(&self.exe);
        cmd.current_dir(self.root)
            .args(["bench", "--engines", "database", "--corpus"])
            .arg(self.corpus)
            .arg("--out")
            .arg(&dir)
            .args(classes.iter().flat_map(|c| ["--class", c]))
            .env_remove(self.switch_env)
            .env_remove(DROP_GUARDS_ENV)
            .env_remove(DROP_GUARDS_LOG_ENV)
            .env("NO_COLOR", "1");
        for (k, v) in self.test_env {
            cmd.env(k, v);
        }
        let mut sources = Vec::new();
        let mut specs = Vec::new();
        for id in ids {
            match self.registry.guard(id).map(|g| &g.locator) {
                Some(Locator::Source(_)) => sources.push(*id),
                Some(Locator::Schema(l)) => match drop_guards::spec_of(l) {
                    Ok(spec) => specs.push(spec),
                    Err(e) => return Ok(Err(format!("{id}: {e}"))),
                },
                None => return Ok(Err(format!("{id}: not in the registry"))),
            }
        }
        if !sources.is_empty() {
            cmd.env(self.switch_env, sources.join(","));
        }
        if !specs.is_empty() {
            cmd.env(DROP_GUARDS_ENV, drop_guards::encode(&specs))
                .env(DROP_GUARDS_LOG_ENV, &log);
        }
        let f = process::run(cmd, Some(BENCH_LIMIT), cancel)?;
        if f.exit != Exit::Success {
            return Ok(Err(format!(
                "the benchmark exited {:?}: {}",
                f.exit,
                process::tail(&f.stderr, 5)
            )));
        }
        if !specs.is_empty() {
            let lines = drop_guards::read_log(&log);
            for spec in &specs {
                let dropped = lines
                    .iter()
                    .any(|l| matches!(l, LogLine::Dropped(s) if s == spec));
                if !dropped {
                    return Ok(Err(format!(
                        "{spec} was not dropped (the drop log has no line for it)"
                    )));
                }
            }
        }
        let path = dir.join("results.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_str::<ResultsFile>(&text)
            .map(|r| r.results)
            .map_err(|e| format!("{}: {e}", path.display())))
    }
}

/// The folder name of a benchmark with `ids` off: the ids joined by `+`, or,
/// for a group too long for a file name, the first id, how many more, and a
/// hash of them all.
fn run_tag(ids: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    const LONGEST: usize = 160;
    let joined = ids.join("+");
    match ids.first() {
        None => "baseline".to_string(),
        Some(_) if joined.len() <= LONGEST => joined,
        Some(first) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            joined.hash(&mut h);
            format!("{first}+{}-more-{:016x}", ids.len() - 1, h.finish())
        }
    }
}

/// Runs `work` over `items` on `jobs` threads; the results in input order.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    cancel: &Cancel,
    work: &(dyn Fn(&T) -> Result<R> + Sync),
) -> Result<Vec<R>> {
    let queue = Mutex::new((0..items.len()).collect::<VecDeque<usize>>());
    let done: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1).min(items.len().max(1)) {
            s.spawn(|| {
                loop {
                    if cancel.check().is_err() {
                        return;
                    }
                    let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                    let Some(i) = next else { return };
                    match work(&items[i]) {
                        Ok(r) => {
                            if let Ok(mut d) = done.lock() {
                                d[i] = Some(r);
                            }
                        }
                        Err(e) => {
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert(e);
                            }
                            cancel.cancel();
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    cancel.check()?;
    let done = done.into_inner().unwrap_or_default();
    Ok(done.into_iter().flatten().collect())
}

/// Progress: a bar on a terminal, a line per benchmark otherwise.
struct Shown {
    bar: ProgressBar,
    tty: bool,
}

impl Shown {
    fn new(len: usize, label: &str) -> Shown {
        let bar = crate::progress::bar(len, label);
        bar.enable_steady_tick(Duration::from_millis(500));
        Shown {
            bar,
            tty: crate::progress::drawable(),
        }
    }

    fn done(&self, what: &str, d: &std::result::Result<Diff, String>) {
        let text = match d {
            Ok(d) => format!(
                "{what}: {} unblocked, {} reason only",
                d.unblocked.len(),
                d.reason_only.len()
            ),
            Err(e) => format!("{what}: not judged: {e}"),
        };
        if self.tty {
            self.bar.set_message(text);
        } else {
            eprintln!("corpus: {text}");
        }
        self.bar.inc(1);
    }

    /// A benchmark outside the bar's count: shown, not counted.
    fn note(&self, what: &str, judged: &Unblocked) {
        let text = match judged {
            Ok(u) => format!("{what}: {} unblocked", u.len()),
            Err(e) => format!("{what}: not judged: {e}"),
        };
        if self.tty {
            self.bar.set_message(text);
        } else {
            eprintln!("corpus: {text}");
        }
    }
}

/// Runs `harness mutate --corpus`.
pub fn run(opts: &RunOptions, args: &CorpusArgs<'_>, cancel: &Cancel) -> Result<ExitCode> {
    match run_inner(opts, args, cancel) {
        Err(e) if matches!(e.downcast_ref::<Error>(), Some(Error::Interrupted)) => {
            eprintln!("mutate --corpus: interrupted");
            Ok(ExitCode::from(130))
        }
        other => other,
    }
}

fn run_inner(opts: &RunOptions, args: &CorpusArgs<'_>, cancel: &Cancel) -> Result<ExitCode> {
    let start = Instant::now();
    let registry = Registry::load(&opts.registry)?;
    let selected: Vec<String> = plan::select(&registry, &opts.only, opts.shard)?
        .iter()
        .map(|g| g.id.clone())
        .collect();
    let all = plan::select(&registry, &[], None)?;
    let p = plan::plan(&opts.root, &registry, &all)?;
    let out = opts.out_dir.join("corpus");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    // The one build: the instrumented harness, copied out of the target dir.
    eprintln!("corpus: building the instrumented harness (schemata workspace)");
    let exclude = mutations::runner::exclusions(opts, &registry);
    let exe = out.join("harness-instrumented");
    let build_secs = {
        let t = Instant::now();
        let scratch = Scratch::kept(
            &opts.root,
            &exclude,
            &mutations::runner::kept_dir(opts),
            &p.instrumented,
            cancel,
            &mut || {
                eprintln!("corpus: waiting for another mutation run to let go of its scratch copy")
            },
        )?;
        for (file, text) in &p.instrumented {
            scratch.write(file, text)?;
        }
        let target = opts
            .schemata_target
            .clone()
            .unwrap_or_else(|| opts.target_dir.join("schemata"));
        let lane =
            Lane::new(&scratch, target, &registry, opts.cargo.as_ref()).for_schemata(cancel)?;
        let built = match lane
            .cargo
            .build_bin("harness", "harness", opts.build_timeout, cancel)?
        {
            Ok(path) => path,
            Err(mutations::cargo::Build::Failed { command, tail, .. }) => {
                bail!("the instrumented harness does not build ({command}):\n{tail}")
            }
            Err(mutations::cargo::Build::Built { .. }) => bail!("cargo reported no failure"),
        };
        std::fs::copy(&built, &exe)
            .with_context(|| format!("copying {} to {}", built.display(), exe.display()))?;
        t.elapsed().as_secs_f64()
    };
    eprintln!("corpus: built in {build_secs:.0} s: {}", exe.display());

    let corpus = if args.corpus.is_absolute() {
        args.corpus.clone()
    } else {
        opts.root.join(&args.corpus)
    };
    let bench = Bench {
        exe,
        root: &opts.root,
        corpus: &corpus,
        out: out.join("runs"),
        test_env: &opts.test_env,
        switch_env: &registry.switch_env,
        registry: &registry,
    };
    let mut runs = 1usize;
    eprintln!("corpus: the baseline (nothing switched off)");
    let base = match bench.run(&[], &[], cancel)? {
        Ok(r) => r,
        Err(e) => bail!("the unmutated benchmark failed: {e}"),
    };
    let (baseline, left_out) = baseline_of(base);
    if !left_out.is_empty() {
        eprintln!(
            "corpus: warning: {} scenarios do not pass unmutated and are left out: {}",
            left_out.len(),
            left_out.join(", ")
        );
    }

    // Every selected guard alone.
    let shown = Shown::new(selected.len(), "corpus: one guard off");
    let singles: Vec<std::result::Result<Diff, String>> =
        parallel(&selected, args.jobs, cancel, &|id: &String| {
            let d = bench
                .run(&[id.as_str()], &[], cancel)?
                .map(|r| diff(&baseline, &r));
            shown.done(id, &d);
            Ok(d)
        })?;
    shown.bar.finish_and_clear();
    runs += selected.len();
    let mut alone: BTreeMap<String, std::result::Result<Diff, String>> =
        selected.iter().cloned().zip(singles).collect();

    // Partners not judged alone (outside --only) are run alone first.
    let wants_pairs: Vec<&String> = selected
        .iter()
        .filter(|id| matches!(alone.get(*id), Some(Ok(d)) if d.unblocked.is_empty()))
        .collect();
    let known = |id: &str| unblocks_alone(&alone, id);
    let mut plans: Vec<(String, Vec<String>)> = Vec::new();
    for id in &wants_pairs {
        let Some(g) = registry.guard(id) else {
            continue;
        };
        let ps = partners(&registry, g, &known, args.pair_limit);
        plans.push(((*id).clone(), ps.iter().map(|p| p.id.clone()).collect()));
    }
    // A partner not judged alone is judged over the classes of its pairs.
    let mut missing_classes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, ps) in &plans {
        for p in ps.iter().filter(|p| !alone.contains_key(*p)) {
            let (Some(g), Some(pg)) = (registry.guard(id), registry.guard(p)) else {
                continue;
            };
            missing_classes
                .entry(p.clone())
                .or_default()
                .extend(pair_classes(g, pg).into_iter().map(str::to_string));
        }
    }
    let missing: Vec<(String, Vec<String>)> = missing_classes
        .into_iter()
        .map(|(p, c)| (p, c.into_iter().collect()))
        .collect();
    if !missing.is_empty() {
        let shown = Shown::new(missing.len(), "corpus: partners alone");
        let more = parallel(&missing, args.jobs, cancel, &|(id, classes): &(
            String,
            Vec<String>,
        )| {
            let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
            let d = bench
                .run(&[id.as_str()], &classes, cancel)?
                .map(|r| diff(&of_class(&baseline, &classes), &r));
            shown.done(id, &d);
            Ok(d)
        })?;
        shown.bar.finish_and_clear();
        runs += missing.len();
        alone.extend(missing.into_iter().map(|(id, _)| id).zip(more));
    }

    // The pairs, each guard's partners in order until the first hit.
    let total_pairs: usize = plans.iter().map(|(_, ps)| ps.len()).sum();
    let shown = Shown::new(total_pairs, "corpus: pairs (twins, then same threat)");
    let pair_runs = Mutex::new(0usize);
    let paired: Vec<(String, GuardCorpus)> = parallel(
        &plans,
        args.jobs,
        cancel,
        &|(id, ps): &(String, Vec<String>)| {
            let single = match alone.get(id) {
                Some(Ok(d)) => d.clone(),
                _ => Diff::default(),
            };
            let mut tried = Vec::new();
            let mut row = classify(&single, &tried);
            let mut skipped = Vec::new();
            let Some(guard) = registry.guard(id) else {
                return Ok((id.clone(), row));
            };
            if ps.is_empty() {
                row.note = Some(if args.pair_limit == 0 {
                    "no twin to pair it with (--pair-limit 0)".to_string()
                } else {
                    "no twin and no other guard of its threat to pair it with".to_string()
                });
            }
            let mut empty = Vec::new();
            for (n, partner) in ps.iter().enumerate() {
                let Some(pg) = registry.guard(partner) else {
                    skipped.push(partner.clone());
                    shown.bar.inc(1);
                    continue;
                };
                let classes = pair_classes(guard, pg);
                let in_class = of_class(&baseline, &classes);
                if in_class.is_empty() {
                    empty.push(partner.clone());
                    shown.bar.inc(1);
                    continue;
                }
                let Some(Ok(partner_alone)) = alone.get(partner) else {
                    skipped.push(partner.clone());
                    shown.bar.inc(1);
                    continue;
                };
                let both = bench
                    .run(&[id.as_str(), partner.as_str()], &classes, cancel)?
                    .map(|r| diff(&in_class, &r));
                if let Ok(mut r) = pair_runs.lock() {
                    *r += 1;
                }
                shown.done(&format!("{id} + {partner}"), &both);
                match both {
                    Ok(both) => tried.push((partner.clone(), both, partner_alone.clone())),
                    Err(_) => skipped.push(partner.clone()),
                }
                row = classify(&single, &tried);
                if row.effect == CorpusEffect::Covered {
                    shown.bar.inc((ps.len() - n - 1) as u64);
                    break;
                }
            }
            let mut notes = Vec::new();
            if row.effect == CorpusEffect::UnitOnly {
                let group = partners(
                    &registry,
                    guard,
                    &|i: &str| unblocks_alone(&alone, i),
                    usize::MAX,
                );
                let mut classes = vec![guard.threat.as_str()];
                for g in &group {
                    if !classes.contains(&g.threat.as_str()) {
                        classes.push(g.threat.as_str());
                    }
                }
                let in_class = of_class(&baseline, &classes);
                let ids: Vec<String> = group.iter().map(|g| g.id.clone()).collect();
                if group_adds_to_pairs(&ids, ps) && !in_class.is_empty() {
                    let mut runs = 0usize;
                    let found = group_cover(id, &ids, &mut |off: &[&str]| {
                        runs += 1;
                        let judged = bench
                            .run(off, &classes, cancel)?
                            .map(|r| diff(&in_class, &r).unblocked);
                        let what = format!("{id} in a group of {}", off.len());
                        shown.note(&what, &judged);
                        Ok(judged)
                    })?;
                    if let Ok(mut r) = pair_runs.lock() {
                        *r += runs;
                    }
                    match found {
                        GroupCover::Cover(set, scenarios) => {
                            row.effect = CorpusEffect::Covered;
                            row.covered_by = set.first().cloned();
                            row.covered_with = set.iter().skip(1).cloned().collect();
                            row.covered_scenarios = scenarios;
                        }
                        GroupCover::None => notes.push(format!(
                            "no attack gets through with all {} of its partners off at once",
                            ids.len()
                        )),
                        GroupCover::NotJudged(why) => notes.push(why),
                    }
                }
            }
            if !empty.is_empty() {
                notes.push(format!(
                    "no scenario of its threat ({}) or its partner's in the corpus: no pair with {} can show a cover",
                    guard.threat,
                    empty.join(", ")
                ));
            }
            if !skipped.is_empty() {
                notes.push(format!(
                    "pairs not judged (the partner or the pair could not run): {}",
                    skipped.join(", ")
                ));
            }
            if !notes.is_empty() {
                row.note = Some(notes.join("; "));
            }
            Ok((id.clone(), row))
        },
    )?;
    shown.bar.finish_and_clear();
    runs += pair_runs.into_inner().unwrap_or(0);
    let paired: BTreeMap<String, GuardCorpus> = paired.into_iter().collect();

    let mut rows = BTreeMap::new();
    let mut errors = 0;
    for id in &selected {
        let row = match (alone.get(id), paired.get(id)) {
            (_, Some(row)) => row.clone(),
            (Some(Ok(d)), None) => classify(d, &[]),
            (Some(Err(e)), None) => not_judged(e),
            (None, None) => not_judged("not run"),
        };
        let row = GuardCorpus {
            money: registry
                .guard(id)
                .is_some_and(|g| is_money_threat(&g.threat)),
            ..row
        };
        if row.effect == CorpusEffect::Error {
            errors += 1;
        }
        rows.insert(id.clone(), row);
    }
    let mut run = CorpusRun {
        generated_by: args.command.clone(),
        scenarios: baseline.len(),
        bench_runs: runs,
        pair_limit: args.pair_limit,
        build_secs: (build_secs * 100.0).round() / 100.0,
        elapsed_secs: (start.elapsed().as_secs_f64() * 100.0).round() / 100.0,
        summary: CorpusSummary::default(),
    };
    run.summary = CorpusSummary::of(rows.values());
    let json = out.join("corpus.json");
    let rows_json = serde_json::json!({ "run": &run, "guards": &rows });
    std::fs::write(&json, serde_json::to_string_pretty(&rows_json)? + "\n")
        .with_context(|| format!("writing {}", json.display()))?;
    let mut report_line = String::new();
    if let Some(dir) = args.report_dir {
        let path = dir.join("mutations.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: the corpus columns are merged into the mutation report; run `make mutation-report` first",
                path.display()
            )
        })?;
        let report: MutationReport = serde_json::from_str(&text)
            .with_context(|| format!("{} does not parse", path.display()))?;
        let merged = report.with_corpus(run.clone(), &rows);
        super::cross::write_report(dir, &merged)?;
        report_line = format!(" (merged into {})", path.display());
    }
    let s = &run.summary;
    println!(
        "corpus: {} guards judged over {} scenarios in {} benchmark runs ({:.0} s): the corpus depends on {}, {} are covered by another guard, {} only a unit test covers, {} could not be judged; {} of those not depended on change a reason",
        s.judged,
        baseline.len(),
        runs,
        start.elapsed().as_secs_f64(),
        s.depended,
        s.covered,
        s.unit_only,
        s.error,
        s.reason_only
    );
    println!(
        "corpus: money guards: {} judged, the corpus depends on {}, {} covered by another, {} unit only, {} not judged",
        s.money.judged, s.money.depended, s.money.covered, s.money.unit_only, s.money.error
    );
    println!("corpus rows: {}{report_line}", json.display());
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One run's `corpus.json`: the run and its rows by guard id.
#[derive(Deserialize)]
struct RunFile {
    run: CorpusRun,
    guards: BTreeMap<String, GuardCorpus>,
}

/// `harness mutate merge-corpus`: folds the rows of `runs` (in order) into
/// `dir/mutations.json` and rewrites both report files. Exit 0; an unreadable
/// file or report is an error naming it.
pub fn merge_runs(runs: &[PathBuf], dir: &Path) -> Result<ExitCode> {
    let mut parts = Vec::new();
    for path in runs {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: RunFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a corpus run's corpus.json", path.display()))?;
        parts.push((file.run, file.guards));
    }
    let Some((run, rows)) = CorpusRun::combine(parts) else {
        bail!("no corpus run given");
    };
    let path = dir.join("mutations.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let report: MutationReport = serde_json::from_str(&text)
        .with_context(|| format!("{} does not parse", path.display()))?;
    let unknown: Vec<&String> = rows
        .keys()
        .filter(|id| !report.guards.iter().any(|g| &g.id == *id))
        .collect();
    let merged = report.with_corpus(run, &rows);
    super::cross::write_report(dir, &merged)?;
    let s = &merged
        .corpus
        .as_ref()
        .map(|c| c.summary.clone())
        .unwrap_or_default();
    println!(
        "merge-corpus: {} guards with corpus columns: {} depended on, {} covered by another, {} unit-test only, {} not judged; {} of {} guards in the report have none{}",
        s.judged,
        s.depended,
        s.covered,
        s.unit_only,
        s.error,
        merged.guards.iter().filter(|g| g.corpus.is_none()).count(),
        merged.guards.len(),
        if unknown.is_empty() {
            String::new()
        } else {
            format!(
                "; {} rows name guards the report no longer has: {}",
                unknown.len(),
                unknown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn not_judged(e: &str) -> GuardCorpus {
    GuardCorpus {
        effect: CorpusEffect::Error,
        unblocked: Vec::new(),
        reason_only: Vec::new(),
        covered_by: None,
        covered_with: Vec::new(),
        covered_scenarios: Vec::new(),
        pairs_tried: 0,
        note: Some(e.to_string()),
        money: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, label: Label, passed: bool, blocked: bool) -> ScenarioResult {
        ScenarioResult {
            id: id.into(),
            label,
            class: None,
            passed,
            blocked,
            expected_reason: None,
            actual_reason: None,
            failures: Vec::new(),
            engine_error: false,
            engine: "database".into(),
            heldout: false,
            reasons_seen: Vec::new(),
            guards_seen: Vec::new(),
            attack_reasons: Vec::new(),
            not_run: false,
        }
    }

    fn ids(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_attack_let_through_moves_money_and_a_changed_reason_does_not() {
        use Label::{Attack, Legit};
        let mut wire = result("wire-only", Attack, false, false);
        wire.not_run = true;
        let (base, left_out) = baseline_of(vec![
            result("a-stopped", Attack, true, true),
            result("a-through", Attack, true, true),
            result("a-reason", Attack, true, true),
            result("a-same", Attack, true, true),
            result("l-refused", Legit, true, false),
            result("l-error", Legit, true, false),
            result("already-failing", Attack, false, true),
            wire,
        ]);
        assert_eq!(left_out, ["already-failing"]);
        assert_eq!(base.len(), 6, "not-run and failing scenarios are left out");
        let mut errored = result("l-error", Legit, true, false);
        errored.engine_error = true;
        let mut stopped = result("a-stopped", Attack, false, false);
        stopped.engine_error = true;
        let mutant = vec![
            stopped,
            result("a-through", Attack, false, false),
            result("a-reason", Attack, false, true),
            result("a-same", Attack, true, true),
            result("l-refused", Legit, false, false),
            errored,
            result("already-failing", Attack, false, false),
        ];
        let d = diff(&base, &mutant);
        assert_eq!(d.unblocked, ids(&["a-through"]));
        assert_eq!(
            d.reason_only,
            ids(&["a-reason", "a-stopped", "l-error", "l-refused"]),
            "an attack the gate answered with an engine error was refused, not let through"
        );
        // A scenario missing from the mutant's results stopped passing.
        let d = diff(&base, &mutant[2..]);
        assert_eq!(d.unblocked, ids(&[]));
        assert!(d.reason_only.contains("a-through"));
    }

    #[test]
    fn a_pair_is_compared_over_its_threat_scenarios_only() {
        let mut a = result("a", Label::Attack, true, true);
        a.class = Some("t.one".into());
        let mut b = result("b", Label::Attack, true, true);
        b.class = Some("t.two".into());
        let (base, _) = baseline_of(vec![a.clone(), b]);
        let one = of_class(&base, &["t.one"]);
        assert_eq!(one.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(of_class(&base, &[]).len(), 2);
        assert_eq!(of_class(&base, &["t.two", "t.one"]).len(), 2);
        assert!(of_class(&base, &["t.three"]).is_empty());
        // A benchmark of t.one's scenarios, compared over them: `b` did not
        // run, and is not a change.
        a.blocked = false;
        a.passed = false;
        let d = diff(&one, &[a]);
        assert_eq!(d.unblocked, ids(&["a"]));
        assert!(d.reason_only.is_empty());
    }

    #[test]
    fn a_pair_counts_only_what_neither_guard_lets_through_alone() {
        let single = Diff {
            unblocked: ids(&[]),
            reason_only: ids(&["x"]),
        };
        let noisy_partner = Diff {
            unblocked: ids(&["p"]),
            reason_only: ids(&[]),
        };
        let quiet = Diff::default();
        // Partner one unblocks `p` alone; the pair unblocks only `p`: nothing new.
        // Partner two: the pair unblocks `q`, which neither does alone.
        let pairs = vec![
            ("one".to_string(), noisy_partner.clone(), noisy_partner),
            (
                "two".to_string(),
                Diff {
                    unblocked: ids(&["q"]),
                    reason_only: ids(&[]),
                },
                quiet.clone(),
            ),
        ];
        let row = classify(&single, &pairs);
        assert_eq!(row.effect, CorpusEffect::Covered);
        assert_eq!(row.covered_by.as_deref(), Some("two"));
        assert_eq!(row.covered_scenarios, ["q"]);
        assert_eq!(row.pairs_tried, 2);
        assert_eq!(row.reason_only, ["x"]);
        assert_eq!(row.kill(), "reason only");
        let row = classify(&single, &pairs[..1]);
        assert_eq!(row.effect, CorpusEffect::UnitOnly);
        assert_eq!(row.covered_by, None);
        let alone = Diff {
            unblocked: ids(&["z"]),
            reason_only: ids(&[]),
        };
        let row = classify(&alone, &pairs);
        assert_eq!(row.effect, CorpusEffect::Unblocks);
        assert_eq!((row.pairs_tried, row.kill()), (0, "money or authority"));
        assert_eq!(classify(&quiet, &[]).kill(), "no scenario");
    }

    #[test]
    fn partners_share_the_threat_put_quiet_ones_first_and_are_bounded() {
        let registry = Registry::parse(
            r#"
guards:
  - {id: a, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::a"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: A}}
  - {id: b, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::b"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: B}}
  - {id: c, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::c"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: C}}
  - {id: d, kind: source, invariant: i, threat: t.two, tests: ["gate/lib::x::d"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: D}}
"#,
            Path::new("r.yaml"),
        )
        .unwrap();
        let a = registry.guard("a").unwrap();
        let loud = |id: &str| Some(id == "b");
        let got: Vec<&str> = partners(&registry, a, &loud, 5)
            .iter()
            .map(|g| g.id.as_str())
            .collect();
        assert_eq!(got, ["c", "b"]);
        let got: Vec<&str> = partners(&registry, a, &loud, 1)
            .iter()
            .map(|g| g.id.as_str())
            .collect();
        assert_eq!(got, ["c"]);
    }

    const TWINS: &str = r#"
guards:
  - {id: a, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::a"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: A}, twins: [db-z, d]}
  - {id: b, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::b"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: B}}
  - {id: c, kind: source, invariant: i, threat: t.one, tests: ["gate/lib::x::c"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: C}}
  - {id: d, kind: source, invariant: i, threat: t.two, tests: ["gate/lib::x::d"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: D}}
  - {id: e, kind: source, invariant: i, threat: t.three, tests: ["gate/lib::x::e"], operator: delete,
     locator: {file: gate/src/x.rs, function: f, produces: E}, twins: [a]}
  - {id: db-z, kind: schema, invariant: i, threat: t.four, tests: ["gate/test:db::z"], operator: delete,
     locator: {object: ck_z, object_kind: constraint, table: t}}
"#;

    fn partner_ids(registry: &Registry, id: &str, limit: usize) -> Vec<String> {
        let loud = |id: &str| Some(id == "b");
        partners(registry, registry.guard(id).unwrap(), &loud, limit)
            .iter()
            .map(|g| g.id.clone())
            .collect()
    }

    #[test]
    fn named_twins_come_first_whatever_their_threat_then_the_same_threat() {
        let registry = Registry::parse(TWINS, Path::new("r.yaml")).unwrap();
        // `a` names db-z and d (other threats) in that order; `e` names `a`.
        assert_eq!(partner_ids(&registry, "a", 5), ["db-z", "d", "e", "c", "b"]);
        // The limit never drops a twin; it bounds the same-threat partners.
        assert_eq!(partner_ids(&registry, "a", 4), ["db-z", "d", "e", "c"]);
        assert_eq!(partner_ids(&registry, "a", 1), ["db-z", "d", "e"]);
        assert_eq!(partner_ids(&registry, "a", 0), ["db-z", "d", "e"]);
        // A guard named as a twin pairs back with the guard that names it,
        // before the guards of its own threat (none here).
        assert_eq!(partner_ids(&registry, "db-z", 3), ["a"]);
        assert_eq!(partner_ids(&registry, "d", 3), ["a"]);
        // A guard with no twin keeps the same-threat order.
        assert_eq!(partner_ids(&registry, "c", 5), ["a", "b"]);
    }

    #[test]
    fn a_pair_across_threats_is_compared_over_both_threats_scenarios() {
        let registry = Registry::parse(TWINS, Path::new("r.yaml")).unwrap();
        let g = |id| registry.guard(id).unwrap();
        assert_eq!(pair_classes(g("a"), g("db-z")), ["t.one", "t.four"]);
        assert_eq!(pair_classes(g("a"), g("c")), ["t.one"]);
        let mut own = result("own", Label::Attack, true, true);
        own.class = Some("t.one".into());
        let mut twin = result("twin", Label::Attack, true, true);
        twin.class = Some("t.four".into());
        let mut other = result("other", Label::Attack, true, true);
        other.class = Some("t.two".into());
        let (base, _) = baseline_of(vec![own, twin.clone(), other]);
        let over = of_class(&base, &pair_classes(g("a"), g("db-z")));
        assert_eq!(over.keys().collect::<Vec<_>>(), ["own", "twin"]);
        // The twin's attack let through with both off is a cover.
        twin.blocked = false;
        twin.passed = false;
        let both = diff(&over, std::slice::from_ref(&twin));
        assert_eq!(both.unblocked, ids(&["twin"]));
        let row = classify(&Diff::default(), &[("db-z".into(), both, Diff::default())]);
        assert_eq!(
            (row.effect, row.covered_by.as_deref()),
            (CorpusEffect::Covered, Some("db-z"))
        );
    }

    #[test]
    fn a_twin_is_another_guard_of_the_registry_named_once() {
        let bad = [
            (
                TWINS.replace("twins: [a]", "twins: [nope]"),
                "not in the registry",
            ),
            (
                TWINS.replace("twins: [a]", "twins: [e]"),
                "a twin is another guard",
            ),
            (
                TWINS.replace("twins: [db-z, d]", "twins: [d, d]"),
                "named once",
            ),
        ];
        for (text, want) in bad {
            let e = Registry::parse(&text, Path::new("r.yaml")).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    /// A model of layered guards: each attack gets through when every guard
    /// of its set is off.
    fn layered(
        rules: &[(&'static str, &[&'static str])],
    ) -> impl FnMut(&[&str]) -> Result<Unblocked> {
        let rules: Vec<(&str, Vec<&str>)> = rules.iter().map(|(a, gs)| (*a, gs.to_vec())).collect();
        move |off: &[&str]| {
            Ok(Ok(rules
                .iter()
                .filter(|(_, gs)| gs.iter().all(|g| off.contains(g)))
                .map(|(a, _)| a.to_string())
                .collect()))
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_lone_partner_no_pair_tried_is_tried_as_a_group() {
        let one = strings(&["same-threat"]);
        assert!(group_adds_to_pairs(&one, &[]));
        assert!(!group_adds_to_pairs(&one, &one));
        assert!(group_adds_to_pairs(
            &strings(&["a", "b"]),
            &strings(&["a", "b"])
        ));
        assert!(!group_adds_to_pairs(&[], &[]));
    }

    #[test]
    fn a_group_too_long_for_a_file_name_gets_a_short_distinct_tag() {
        assert_eq!(run_tag(&[]), "baseline");
        assert_eq!(run_tag(&["a", "b"]), "a+b");
        let long: Vec<String> = (0..20)
            .map(|i| format!("a-guard-with-a-long-id-{i}"))
            .collect();
        let ids: Vec<&str> = long.iter().map(String::as_str).collect();
        let tag = run_tag(&ids);
        assert!(tag.len() <= 200, "{tag}");
        assert!(
            tag.starts_with("a-guard-with-a-long-id-0+19-more-"),
            "{tag}"
        );
        assert_ne!(tag, run_tag(&ids[..19]));
    }

    #[test]
    fn a_guard_behind_two_layers_is_covered_by_both_and_nothing_else() {
        let group = strings(&["twin", "x", "noisy", "idle"]);
        let mut run = layered(&[("deep", &["g", "twin", "x"]), ("loud", &["noisy"])]);
        let got = group_cover("g", &group, &mut run).unwrap();
        assert_eq!(
            got,
            GroupCover::Cover(strings(&["twin", "x"]), strings(&["deep"]))
        );
    }

    #[test]
    fn an_attack_the_layers_let_through_without_the_guard_is_no_cover() {
        // "deep" gets through with twin and x off whether g is on or not.
        let group = strings(&["twin", "x"]);
        let mut run = layered(&[("deep", &["twin", "x"])]);
        assert_eq!(
            group_cover("g", &group, &mut run).unwrap(),
            GroupCover::None
        );
        let mut run = layered(&[]);
        assert_eq!(
            group_cover("g", &group, &mut run).unwrap(),
            GroupCover::None
        );
    }

    #[test]
    fn a_layer_that_cannot_run_without_its_neighbour_stays_in_the_cover() {
        let group = strings(&["a", "b", "c"]);
        let mut inner = layered(&[("deep", &["g", "a"])]);
        // Any run that leaves b on but c off cannot be judged.
        let mut run = |off: &[&str]| {
            if off.contains(&"c") && !off.contains(&"b") {
                return Ok(Err("c needs b".to_string()));
            }
            inner(off)
        };
        // c is dropped first (b still off: judged), then b (c already gone),
        // leaving the one layer the attack needs.
        assert_eq!(
            group_cover("g", &group, &mut run).unwrap(),
            GroupCover::Cover(strings(&["a"]), strings(&["deep"]))
        );
        let mut broken = |_: &[&str]| Ok(Err("no database".to_string()));
        assert!(matches!(
            group_cover("g", &group, &mut broken).unwrap(),
            GroupCover::NotJudged(_)
        ));
    }
}
