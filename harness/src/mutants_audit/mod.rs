//! `harness mutants-audit`: an outside mutation audit of the `gate` crate and
//! its pure core, `gate-core`.
//!
//! The project's own runner (`harness mutate`) deletes the guards it
//! registered; it cannot see a check nobody registered. cargo-mutants can: it
//! mutates every function it finds. This subcommand installs a pinned
//! cargo-mutants when it is missing and runs it over `gate` (on
//! `DATABASE_URL`'s Postgres, or a throwaway one it starts, announces in one
//! line and removes on exit) in two stages: the library's unit tests, then
//! the whole test suite for every mutant they did not settle. The verdicts go
//! to a store that outlives the run ([`store`]), so the crate can be audited
//! in pieces (files, shards, sessions, machines); `reports/outside-mutants.md`
//! and `.json` are rendered from the store against the crate as it is now
//! ([`report`]). A report that does not cover every mutant says so
//! ("PARTIAL") and lists what is left.
//!
//! `--check` runs nothing: it fails when the committed report holds a
//! survivor that `mutations/outside-audit.yaml` does not classify
//! ([`classification`], held against the report by [`check`]).

mod check;
mod classification;
mod report;
mod store;
mod tool;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use classification::Classification;
use report::Report;
use store::{Observations, RunRecord, Stage, Store, file_sha256, fold_stages};

/// Run cargo-mutants over `gate`, keep the verdicts, and write reports/outside-mutants.{md,json}.
///
/// Each run adds to mutations/outside-audit-verdicts.json; the report counts
/// a verdict only while its source file is unchanged, and is PARTIAL until
/// every mutant of the crate has one. Hours for the whole crate on 2 cores:
/// run it in pieces (--file, --shard), on several machines (--shard K/N, then
/// --merge their stores), or over sessions.
#[derive(Debug, Args)]
pub struct MutantsAuditArgs {
    /// Run one shard of the mutants, K/N (K from 0), e.g. on one CI machine of N.
    #[arg(long)]
    pub shard: Option<String>,
    /// Mutate only this file (repeatable), e.g. gate/src/policy.rs.
    #[arg(long = "file")]
    pub files: Vec<String>,
    /// Mutate the source tree in place (reusing target/) instead of a copy.
    /// Faster on one machine; cargo-mutants restores each file after its
    /// mutant. Use a checkout of its own: do not edit the tree meanwhile.
    #[arg(long)]
    pub in_place: bool,
    /// Skip the unit-test stage: every mutant goes to the focused stage
    /// (`--focus` or the focus map), when there is one, and what that misses
    /// to the whole suite; without a focus, every mutant runs the whole suite.
    /// For a file that only the database tests reach.
    #[arg(long)]
    pub whole_suite_only: bool,
    /// Between the unit tests and the whole suite, a stage that runs only the
    /// tests this nextest filterset selects (e.g. 'test(/webhook|capture/)'):
    /// what it catches is final (the whole suite would catch it too), and only
    /// what it misses goes on to the whole suite. Needs cargo-nextest. Without
    /// it, a run of `--file`s uses their filtersets from the classification
    /// file's `focus:` map, when every file has one.
    #[arg(long, value_name = "FILTERSET")]
    pub focus: Option<String>,
    /// Run again, against the whole suite, only the mutants the store holds
    /// as missed (fresh verdicts; with --file, of those files): after tests
    /// were added for them.
    #[arg(long, conflicts_with = "shard")]
    pub rerun_missed: bool,
    /// Run every file that still has mutants without a current verdict, one
    /// file at a time (most mutants first), each with its focus map entry;
    /// the store is saved after each file, so a run stopped between files
    /// loses nothing and the next `--remaining` goes on where it stopped.
    #[arg(long, conflicts_with_all = ["shard", "rerun_missed", "files", "focus"])]
    pub remaining: bool,
    /// Add these cargo-mutants outcomes.json files (whole-suite runs over this
    /// same tree) to the store instead of running cargo-mutants.
    #[arg(long = "from-outcomes", value_name = "FILE")]
    pub from_outcomes: Vec<PathBuf>,
    /// With --from-outcomes: the run was stopped during its whole-suite stage
    /// (its outcomes.json is written mutant by mutant): keep what it settled,
    /// and leave the mutants it never reached to run later.
    #[arg(long, requires = "from_outcomes")]
    pub interrupted: bool,
    /// With --from-outcomes: the unit-test stage's outcomes.json of the same run.
    #[arg(long = "unit-outcomes", value_name = "FILE")]
    pub unit_outcomes: Vec<PathBuf>,
    /// Add the verdicts of other stores (e.g. one per CI shard) to this one.
    #[arg(long = "merge", value_name = "STORE")]
    pub merge: Vec<PathBuf>,
    /// Run nothing: render the reports from the store as it is.
    #[arg(long)]
    pub render_only: bool,
    /// The verdict store.
    #[arg(long, default_value = "mutations/outside-audit-verdicts.json")]
    pub store: PathBuf,
    /// Where the reports go.
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
    /// Check the committed report against the classification and run nothing.
    #[arg(long)]
    pub check: bool,
    /// The report `--check` reads.
    #[arg(long, default_value = "reports/outside-mutants.json")]
    pub report: PathBuf,
    /// The classification of survivors.
    #[arg(long, default_value = "mutations/outside-audit.yaml")]
    pub classification: PathBuf,
    /// Further arguments for cargo-mutants (after `--`).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

pub fn run(args: MutantsAuditArgs) -> Result<ExitCode> {
    if args.check {
        return check::check(&args.report, &args.classification);
    }
    let root = crate::workspace::root()?;
    let classes = Classification::load(&args.classification)?;
    let mut args = args;
    let runs_stages = args.from_outcomes.is_empty() && !args.render_only && args.merge.is_empty();
    if args.focus.is_none() && runs_stages {
        // The map's filtersets need nextest; without it the run goes on
        // without a focused stage (an explicit --focus is refused instead).
        args.focus = classes.focus_for(&args.files);
        if args.focus.is_some() && tool::test_tool() != "nextest" {
            eprintln!("cargo-nextest is not installed: running without the focus map's stage");
            args.focus = None;
        }
    }
    let mut store = Store::load(&args.store)?;
    if !args.merge.is_empty() {
        let (_, current) = crate_mutants(&root)?;
        for other in &args.merge {
            let theirs = Store::load(other)?;
            eprintln!(
                "merging {} verdicts of {} run(s) from {}",
                theirs.verdicts.len(),
                theirs.runs.len(),
                other.display()
            );
            store.merge(theirs, &current);
        }
    }
    if !args.from_outcomes.is_empty() {
        let stages = vec![
            (read_all(&args.unit_outcomes)?, Stage::Unit),
            (read_all(&args.from_outcomes)?, Stage::Full),
        ];
        add_run(&mut store, &root, &args, &stages)?;
    } else if args.rerun_missed {
        let scope = missed_scope(&store, &root, &args.files)?;
        if scope.is_empty() {
            eprintln!("the store holds no fresh missed verdict to run again");
        } else {
            let stages = run_stages(&root, &args, scope, true)?;
            add_run(&mut store, &root, &args, &stages)?;
        }
    } else if args.remaining {
        run_remaining(&mut store, &root, &mut args, &classes)?;
    } else if !args.render_only && args.merge.is_empty() {
        let stages = run_stages(&root, &args, scope_args(&args), args.whole_suite_only)?;
        add_run(&mut store, &root, &args, &stages)?;
    }
    store.save(&args.store)?;

    let (listed, current) = crate_mutants(&root)?;
    let report = Report::build(
        &store,
        &listed,
        &current,
        &classes,
        invocation(&args),
        &args.report_dir,
    );
    std::fs::create_dir_all(&args.report_dir)?;
    let json_path = args.report_dir.join("outside-mutants.json");
    let md_path = args.report_dir.join("outside-mutants.md");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")?;
    std::fs::write(&md_path, report.markdown())?;
    println!("{}", report.headline());
    println!(
        "wrote {}, {} and {}",
        args.store.display(),
        md_path.display(),
        json_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every mutant cargo-mutants lists in `gate` now, and the SHA-256 of each
/// file they are in.
fn crate_mutants(root: &Path) -> Result<(Vec<String>, BTreeMap<String, String>)> {
    tool::ensure_cargo_mutants()?;
    let listed = tool::list_mutants(root)?;
    let mut current = BTreeMap::new();
    for name in &listed {
        let file = name.split(':').next().unwrap_or(name);
        if !current.contains_key(file) {
            current.insert(file.to_owned(), file_sha256(root, file)?);
        }
    }
    Ok((listed, current))
}

/// The files with mutants the store holds no current verdict for, most such
/// mutants first (then by name), with how many.
pub fn pending_files(
    store: &Store,
    listed: &[String],
    current: &BTreeMap<String, String>,
) -> Vec<(String, usize)> {
    let mut pending: BTreeMap<&str, usize> = BTreeMap::new();
    for name in listed {
        let fresh = store
            .verdicts
            .get(name)
            .is_some_and(|v| Store::is_fresh(v, current));
        if !fresh {
            *pending
                .entry(name.split(':').next().unwrap_or(name))
                .or_default() += 1;
        }
    }
    let mut files: Vec<(String, usize)> = pending
        .into_iter()
        .map(|(f, n)| (f.to_owned(), n))
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    files
}

/// `--remaining`: each pending file in turn, its verdicts saved as it ends.
fn run_remaining(
    store: &mut Store,
    root: &Path,
    args: &mut MutantsAuditArgs,
    classes: &Classification,
) -> Result<()> {
    let (listed, current) = crate_mutants(root)?;
    let files = pending_files(store, &listed, &current);
    if files.is_empty() {
        eprintln!("every mutant of the crate has a current verdict: nothing to run");
        return Ok(());
    }
    let total: usize = files.iter().map(|(_, n)| n).sum();
    eprintln!("{total} mutants in {} files still to run:", files.len());
    for (file, n) in &files {
        eprintln!("  {n:>4}  {file}");
    }
    for (i, (file, n)) in files.iter().enumerate() {
        args.files = vec![file.clone()];
        args.focus = classes.focus_for(&args.files);
        if args.focus.is_some() && tool::test_tool() != "nextest" {
            args.focus = None;
        }
        eprintln!("[{}/{}] {file}: {n} mutants", i + 1, files.len());
        let stages = run_stages(root, args, scope_args(args), args.whole_suite_only)?;
        add_run(store, root, args, &stages)?;
        store.save(&args.store)?;
    }
    // The report that follows covers the whole crate, not the last file.
    args.files.clear();
    args.focus = None;
    Ok(())
}

/// One line for `harness triage`: the audit's headline from the committed report.
pub fn headline_from(path: &Path) -> String {
    match std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Report>(&t).ok())
    {
        Some(report) => report.headline(),
        None => format!(
            "the outside mutation audit has not been run ({} is absent): make mutants-audit",
            path.display()
        ),
    }
}

fn read_all(files: &[PathBuf]) -> Result<Observations> {
    let mut all = Observations::default();
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let json: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        let o = Observations::parse(&json, &file.display().to_string())?;
        all.mutants.extend(o.mutants);
        all.elapsed_secs += o.elapsed_secs;
        all.tool = all.tool.or(o.tool);
    }
    Ok(all)
}

/// The `--file` and `--shard` arguments for cargo-mutants.
fn scope_args(args: &MutantsAuditArgs) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(shard) = &args.shard {
        v.extend(["--shard".to_owned(), shard.clone()]);
    }
    for f in &args.files {
        v.extend(["--file".to_owned(), f.clone()]);
    }
    v
}

/// `--re` arguments selecting exactly the store's fresh missed verdicts
/// (of `files`, when given).
fn missed_scope(store: &Store, root: &Path, files: &[String]) -> Result<Vec<String>> {
    let mut scope = Vec::new();
    for (name, v) in &store.verdicts {
        if v.outcome != store::Outcome::Missed || (!files.is_empty() && !files.contains(&v.file)) {
            continue;
        }
        if file_sha256(root, &v.file)? == v.file_sha256 {
            scope.extend(["--re".to_owned(), format!("^{}$", escape_regex(name))]);
        }
    }
    Ok(scope)
}

/// `text` as a regex that matches only itself (the regex crate's meta characters escaped).
fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Runs cargo-mutants over `scope` (cargo-mutants' selection arguments): the
/// unit stage unless `whole_suite_only`, the focused stage when `--focus` is
/// given, then the whole suite. Returns each stage's observations, in order.
fn run_stages(
    root: &Path,
    args: &MutantsAuditArgs,
    scope: Vec<String>,
    whole_suite_only: bool,
) -> Result<Vec<(Observations, Stage)>> {
    tool::ensure_cargo_mutants()?;
    let test_tool = tool::test_tool();
    if args.focus.is_some() && test_tool != "nextest" {
        bail!("--focus takes a nextest filterset, and cargo-nextest is not installed");
    }
    // The gate's tests need Postgres: the caller's, or a throwaway one for this run.
    let server = crate::db::Server::open_unless_given_blocking("harness mutants-audit")?;
    let env = server.as_ref().map(|s| s.child_env());
    let env = env
        .as_ref()
        .and_then(|(k, v)| Some((k.to_str()?, v.to_str()?)));
    let out = root.join("target/mutants-audit");
    std::fs::create_dir_all(&out)?;
    // A fresh output folder: --iterate must see only this run's earlier stages.
    let _ = std::fs::remove_dir_all(out.join("mutants.out"));
    let _ = std::fs::remove_dir_all(out.join("mutants.out.old"));
    let mut plan = Vec::new();
    if !whole_suite_only {
        plan.push((Stage::Unit, "unit-outcomes.json"));
    }
    if args.focus.is_some() {
        plan.push((Stage::Focused, "focused-outcomes.json"));
    }
    plan.push((Stage::Full, "full-outcomes.json"));
    let mut observed = Vec::new();
    for (i, (stage, keep)) in plan.into_iter().enumerate() {
        let file = tool::Stage {
            scope: &scope,
            in_place: args.in_place,
            test_tool,
            lib_only: stage == Stage::Unit,
            filter: if stage == Stage::Focused {
                args.focus.as_deref()
            } else {
                None
            },
            iterate: i > 0,
            output: &out,
            extra: &args.extra,
            env,
        }
        .run(&out.join(keep))?;
        let seen = read_all(&[file])?;
        let settled = leaves_nothing(&seen);
        observed.push((seen, stage));
        if settled {
            // cargo-mutants --iterate would find no mutant for a later stage,
            // and writes no outcomes.json when it finds none.
            break;
        }
    }
    drop(server);
    Ok(observed)
}

/// Whether a stage settled every mutant it ran (caught or unviable), so
/// that no later stage has a mutant to run: only a miss or a timeout goes on.
fn leaves_nothing(seen: &Observations) -> bool {
    seen.mutants
        .iter()
        .all(|m| matches!(m.outcome, store::Outcome::Caught | store::Outcome::Unviable))
}

/// Folds a run's stages and records them in the store, with the SHA-256 of
/// every file it ran as that file is now (a run in place restores each file).
fn add_run(
    store: &mut Store,
    root: &Path,
    args: &MutantsAuditArgs,
    stages: &[(Observations, Stage)],
) -> Result<()> {
    let views: Vec<(&[store::Observed], Stage)> = stages
        .iter()
        .map(|(o, s)| (o.mutants.as_slice(), *s))
        .collect();
    let (folded, left) = fold_stages(&views, args.interrupted)?;
    if left > 0 {
        eprintln!(
            "{left} mutant(s) an earlier stage did not settle were not reached by the \
             interrupted later stage: no verdict, still to run"
        );
    }
    let mut hashes = BTreeMap::new();
    for (o, _) in &folded {
        if !hashes.contains_key(&o.file) {
            hashes.insert(o.file.clone(), file_sha256(root, &o.file)?);
        }
    }
    let commit = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let run = RunRecord {
        finished: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        commit,
        tool: format!(
            "cargo-mutants {}",
            stages
                .iter()
                .rev()
                .find_map(|(o, _)| o.tool.as_deref())
                .unwrap_or("?")
        ),
        test_tool: if args.from_outcomes.is_empty() {
            tool::test_tool().to_owned()
        } else {
            "as recorded".to_owned()
        },
        scope: invocation(args),
        mutants: folded.len(),
        elapsed_secs: store::round2(stages.iter().map(|(o, _)| o.elapsed_secs).sum()),
    };
    eprintln!(
        "recording {} verdicts over {} file(s)",
        folded.len(),
        hashes.len()
    );
    store.record(run, folded, &hashes)
}

fn invocation(args: &MutantsAuditArgs) -> String {
    let mut s = "harness mutants-audit".to_owned();
    if let Some(shard) = &args.shard {
        let _ = write!(s, " --shard {shard}");
    }
    for f in &args.files {
        let _ = write!(s, " --file {f}");
    }
    if args.in_place {
        s.push_str(" --in-place");
    }
    if args.whole_suite_only {
        s.push_str(" --whole-suite-only");
    }
    if let Some(focus) = &args.focus {
        let _ = write!(s, " --focus '{focus}'");
    }
    if args.rerun_missed {
        s.push_str(" --rerun-missed");
    }
    if args.remaining {
        s.push_str(" --remaining");
    }
    if !args.from_outcomes.is_empty() {
        s.push_str(" --from-outcomes ..");
    }
    if !args.merge.is_empty() {
        let _ = write!(s, " --merge ({} stores)", args.merge.len());
    }
    if args.render_only {
        s.push_str(" --render-only");
    }
    if !args.extra.is_empty() {
        let _ = write!(s, " -- {}", args.extra.join(" "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escaped_mutant_name_is_a_regex_that_matches_only_itself() {
        let name =
            "gate/src/policy.rs:234:45: replace * with + in <impl Foo<'a>>::bar -> Result<(), E>";
        let escaped = escape_regex(name);
        assert!(escaped.contains(r"replace \* with \+"), "{escaped}");
        assert!(escaped.contains(r"\(\)"), "{escaped}");
        assert!(!escape_regex("abc:12").contains('\\'));
    }

    #[test]
    fn only_a_stage_that_missed_or_timed_out_leaves_work_for_the_next() {
        let seen = |outcomes: &[store::Outcome]| Observations {
            mutants: outcomes
                .iter()
                .enumerate()
                .map(|(i, o)| store::Observed {
                    name: format!("gate/src/a.rs:{i}:1: m{i}"),
                    file: "gate/src/a.rs".into(),
                    line: i as u64,
                    outcome: *o,
                    build_secs: 1.0,
                    test_secs: 1.0,
                })
                .collect(),
            elapsed_secs: 1.0,
            tool: None,
        };
        use store::Outcome::*;
        assert!(leaves_nothing(&seen(&[Caught, Unviable, Caught])));
        assert!(leaves_nothing(&seen(&[])));
        assert!(!leaves_nothing(&seen(&[Caught, Missed])));
        assert!(!leaves_nothing(&seen(&[Timeout, Caught])));
    }

    #[test]
    fn pending_files_are_those_without_a_current_verdict_most_first() {
        let verdict = |file: &str, sha: &str| store::Verdict {
            file: file.into(),
            line: 1,
            file_sha256: sha.into(),
            outcome: store::Outcome::Caught,
            stage: Stage::Full,
            build_secs: 1.0,
            test_secs: 1.0,
        };
        let mut store = Store {
            version: 1,
            runs: vec![],
            verdicts: BTreeMap::new(),
        };
        let a1 = "gate/src/a.rs:1:1: replace x with y in f".to_owned();
        let a2 = "gate/src/a.rs:2:1: replace x with z in f".to_owned();
        let b1 = "gate/src/b.rs:1:1: delete ! in g".to_owned();
        let b2 = "gate/src/b.rs:2:1: delete - in g".to_owned();
        let c1 = "gate/src/c.rs:9:1: replace h -> bool with true".to_owned();
        store
            .verdicts
            .insert(a1.clone(), verdict("gate/src/a.rs", "aaa"));
        // b.rs changed since its verdict: stale, so still to run.
        store
            .verdicts
            .insert(b1.clone(), verdict("gate/src/b.rs", "old"));
        store
            .verdicts
            .insert(c1.clone(), verdict("gate/src/c.rs", "ccc"));
        let current = BTreeMap::from([
            ("gate/src/a.rs".to_owned(), "aaa".to_owned()),
            ("gate/src/b.rs".to_owned(), "new".to_owned()),
            ("gate/src/c.rs".to_owned(), "ccc".to_owned()),
        ]);
        let listed = vec![a1, a2, b1, b2, c1];
        assert_eq!(
            pending_files(&store, &listed, &current),
            vec![
                ("gate/src/b.rs".to_owned(), 2),
                ("gate/src/a.rs".to_owned(), 1)
            ]
        );
        let all_fresh = vec![listed[0].clone(), listed[4].clone()];
        assert!(pending_files(&store, &all_fresh, &current).is_empty());
    }

    /// The module's files, each with the sibling files it imports
    /// (`super::x` or `crate::mutants_audit::x` outside comments and tests).
    fn sibling_imports() -> BTreeMap<String, Vec<String>> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/mutants_audit");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".rs")
                    .filter(|n| *n != "mod")
                    .map(str::to_owned)
            })
            .collect();
        names.sort();
        names
            .iter()
            .map(|file| {
                let text =
                    std::fs::read_to_string(dir.join(format!("{file}.rs"))).unwrap_or_default();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let code: String = code
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                let imports = names
                    .iter()
                    .filter(|other| *other != file)
                    .filter(|other| {
                        code.contains(&format!("super::{other}"))
                            || code.contains(&format!("crate::mutants_audit::{other}"))
                    })
                    .cloned()
                    .collect();
                (file.clone(), imports)
            })
            .collect()
    }

    #[test]
    fn the_audit_s_files_import_each_other_without_a_circle() {
        let graph = sibling_imports();
        assert!(
            graph.len() >= 4,
            "the module's files were not found: {graph:?}"
        );
        // Depth-first search for a file that reaches itself.
        fn reaches(
            graph: &BTreeMap<String, Vec<String>>,
            from: &str,
            target: &str,
            seen: &mut Vec<String>,
        ) -> bool {
            graph.get(from).into_iter().flatten().any(|next| {
                if next == target {
                    return true;
                }
                if seen.contains(next) {
                    return false;
                }
                seen.push(next.clone());
                reaches(graph, next, target, seen)
            })
        }
        for file in graph.keys() {
            assert!(
                !reaches(&graph, file, file, &mut Vec::new()),
                "{file}.rs reaches itself through its imports: {graph:?}"
            );
        }
    }
}
