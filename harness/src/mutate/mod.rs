//! `harness mutate`: delete every registered guard, one at a time, in a
//! scratch copy of the workspace, and require a named test to fail.
//!
//! Guarantees: the exit status is 0 only when every selected mutant was
//! caught; 1 when any was missed, unviable, timed out or could not be judged
//! (each is named on stdout and in `mutations.out/outcomes.json`); 2 when the
//! run could not start or finish (registry drift, a baseline failure, the
//! workspace changed under it); 130 after SIGINT/SIGTERM, which stop the
//! run, kill its child processes and remove the scratch copy (a second
//! signal exits at once). The workspace itself is never written, except
//! `mutations.out/` and the build cache under `target/`. `--check` runs no
//! mutant: it checks the registry against the code (every locator matches
//! exactly once, every refusal site is registered or exempt and, with
//! `--check-tests`, every named test exists). `--cross-check N|all` then runs
//! a seeded sample of the same guards in rewrite mode and fails on any
//! verdict that differs, and `--report-dir` writes the committed report
//! ([`cross`]); `--corpus` runs the committed corpus once per guard switched
//! off and says what it proves per guard ([`corpus`]); `--tour` deletes three guards live for the triage tour
//! ([`tour`]). Test databases left by test processes the runner had to kill
//! are dropped before it exits ([`sweep`]). Progress goes through
//! [`crate::progress`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::ProgressBar;
use mutations::{
    Cancel, Error, Event, Mode, Observer, Registry, RunOptions, Shard, completeness, plan, sanity,
};
use tokio::signal::unix::{SignalKind, signal};

use crate::progress;
use crate::workspace;

pub mod corpus;
pub mod cross;
pub mod sweep;
pub mod tour;

use cross::{CrossArgs, Sample};

/// What an interrupted run says before it exits 130.
const INTERRUPTED: &str = "mutate: interrupted; the workspace is untouched (a temporary scratch \
     copy was removed; schemata mode keeps its own for the next run)";

/// Delete each registered guard in turn (mutations/registry.yaml) and require a named test to fail.
#[derive(Debug, Args)]
pub struct MutateArgs {
    /// How mutants are applied: one build with every guard behind a runtime
    /// switch, or one rewrite and rebuild per mutant.
    #[arg(long, value_enum, default_value_t = ModeArg::Schemata)]
    mode: ModeArg,
    /// Judge only this guard id (repeatable).
    #[arg(long = "only", value_name = "ID")]
    only: Vec<String>,
    /// Judge shard K of N (0-based): the selected mutants whose position modulo N is K.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Mutants judged at once (rewrite mode: one scratch copy and build cache
    /// each) [default: schemata mode, the CPUs this process may use (its
    /// mutants share one build); rewrite mode and --cross-check's rewrite
    /// sample, 1].
    #[arg(long)]
    jobs: Option<usize>,
    /// The workspace root (default: the nearest ancestor whose Cargo.toml has [workspace]).
    #[arg(long)]
    root: Option<PathBuf>,
    /// The registry (default: ROOT/mutations/registry.yaml).
    #[arg(long)]
    registry: Option<PathBuf>,
    /// Where outcomes.json goes (default: ROOT/mutations.out).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The persistent build cache (default: ROOT/target/mutants-scratch for
    /// rewrite mode; schemata mode builds in ROOT/target itself, reusing the
    /// dependencies built there, its own crates under a profile key of their
    /// own). Given, both modes build under it.
    #[arg(long)]
    target_dir: Option<PathBuf>,
    /// Lower bound, in seconds, of each test run's time limit.
    #[arg(long, default_value_t = 20)]
    timeout_floor: u64,
    /// A test run's limit is this many times its baseline time (or the floor).
    #[arg(long, default_value_t = 5.0)]
    timeout_multiplier: f64,
    /// List the selected mutants and where they are; run nothing.
    #[arg(long)]
    list: bool,
    /// Check the registry against the code (locators, exemptions, completeness); run no mutant.
    #[arg(long)]
    check: bool,
    /// With --check: also build the tests in a scratch copy and check every named test exists.
    #[arg(long, requires = "check")]
    check_tests: bool,
    /// After the (schemata) run, run N of its source guards (at least 5, drawn with --seed),
    /// or `all` of them, in rewrite mode too, and fail if any verdict differs.
    #[arg(long, value_name = "N|all")]
    cross_check: Option<Sample>,
    /// The seed that draws the --cross-check sample (default: from the clock; always printed).
    #[arg(long, requires = "cross_check")]
    seed: Option<u64>,
    /// Write mutations.json and mutations.md (the committed report) into this directory.
    #[arg(long, value_name = "DIR")]
    report_dir: Option<PathBuf>,
    /// The triage step: delete three guards live (source, schema, delegation) and show what failed.
    #[arg(long, conflicts_with_all = ["check", "list", "cross_check", "report_dir", "only"])]
    tour: bool,
    /// What the corpus proves per guard: the committed corpus through the database engine
    /// once per guard switched off (schemata build; schema guards dropped), and, where one
    /// alone lets no attack through, with each of its registry twins, then each same-threat
    /// partner too; with --report-dir, merged into the mutations.json already there.
    #[arg(long, conflicts_with_all = ["check", "list", "cross_check", "tour"])]
    corpus: bool,
    /// With --corpus: the corpus file or folder.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "scenarios",
        requires = "corpus"
    )]
    scenarios: PathBuf,
    /// With --corpus: the most partners tried for one guard (its twins are always tried).
    #[arg(long, value_name = "N", default_value_t = 6, requires = "corpus")]
    pair_limit: usize,
    #[command(subcommand)]
    command: Option<MutateCommand>,
}

#[derive(Debug, Subcommand)]
enum MutateCommand {
    /// Combine the outcomes of the shards of one run (`--shard K/N` on N machines) into one
    /// outcome and one report; fails on any miss, any gap and any overlap between shards.
    Merge(MergeArgs),
    /// Merge the rows of earlier `--corpus` runs (each run's corpus.json, in order: a later
    /// file's row for a guard replaces an earlier one's) into DIR/mutations.json and rewrite
    /// DIR/mutations.md; a guard no run judged keeps no corpus columns.
    MergeCorpus(MergeCorpusArgs),
}

#[derive(Debug, Args)]
struct MergeCorpusArgs {
    /// Each run's corpus.json.
    #[arg(required = true, value_name = "FILE")]
    runs: Vec<PathBuf>,
    /// The folder holding mutations.json (written by `--report-dir`).
    #[arg(long, value_name = "DIR", default_value = "reports")]
    report_dir: PathBuf,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// Each shard's output folder (holding outcomes.json) or outcomes.json file.
    #[arg(required = true, value_name = "DIR")]
    shards: Vec<PathBuf>,
    /// Where the merged outcomes.json and report.md go.
    #[arg(long, default_value = "mutations.out/merged")]
    merged: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Schemata,
    Rewrite,
}

/// Runs `harness mutate`.
pub fn run(args: MutateArgs) -> Result<ExitCode> {
    let root = match &args.root {
        Some(r) => r
            .canonicalize()
            .with_context(|| format!("--root {}", r.display()))?,
        None => workspace::root()?,
    };
    let registry_path = match &args.registry {
        Some(r) => absolute(r)?,
        None => root.join("mutations/registry.yaml"),
    };
    if let Some(MutateCommand::Merge(m)) = &args.command {
        return merge(&registry_path, m);
    }
    if let Some(MutateCommand::MergeCorpus(m)) = &args.command {
        return corpus::merge_runs(&m.runs, &m.report_dir);
    }
    let mut opts = RunOptions::new(&root);
    opts.mode = match args.mode {
        ModeArg::Schemata => Mode::Schemata,
        ModeArg::Rewrite => Mode::Rewrite,
    };
    opts.only = args.only.clone();
    opts.shard = args.shard;
    opts.jobs = args.jobs.unwrap_or_else(|| default_jobs(opts.mode)).max(1);
    opts.timeout_floor = Duration::from_secs(args.timeout_floor);
    opts.timeout_multiplier = args.timeout_multiplier;
    if let Some(r) = &args.registry {
        opts.registry = absolute(r)?;
    }
    if let Some(o) = &args.out {
        opts.out_dir = absolute(o)?;
    }
    if let Some(t) = &args.target_dir {
        opts.target_dir = absolute(t)?;
        opts.schemata_target = None;
    }
    if args.check {
        return check(&opts, args.check_tests);
    }
    if args.list {
        return list(&opts);
    }
    // The gate's tests need Postgres: the caller's, or a throwaway one for this run.
    let server = crate::db::Server::open_unless_given_blocking("harness mutate")?;
    if let Some(server) = &server {
        opts.test_env.push(server.child_env());
    }
    if args.tour {
        print!(
            "{}",
            tour::mutation_tour_with(server.as_ref().map(|s| s.url.as_str()))?
        );
        return Ok(ExitCode::SUCCESS);
    }

    let cancel = Cancel::new();
    stop_on_signals(cancel.clone())?;
    if args.corpus {
        if opts.mode != Mode::Schemata {
            anyhow::bail!("--corpus builds the schemata workspace; drop --mode rewrite");
        }
        let report_dir = match &args.report_dir {
            Some(d) => Some(absolute(d)?),
            None => None,
        };
        let c = corpus::CorpusArgs {
            corpus: args.scenarios.clone(),
            pair_limit: args.pair_limit,
            jobs: opts.jobs,
            report_dir: report_dir.as_deref(),
            command: command_line(&args),
        };
        let code = corpus::run(&opts, &c, &cancel);
        sweep::sweep_killed_test_databases(sweep::database_url(&opts.test_env).as_deref());
        return code;
    }
    if args.cross_check.is_some() || args.report_dir.is_some() {
        let report_dir = match &args.report_dir {
            Some(d) => Some(absolute(d)?),
            None => None,
        };
        let cross = CrossArgs {
            sample: args.cross_check,
            seed: args.seed,
            report_dir: report_dir.as_deref(),
            command: command_line(&args),
            rewrite_jobs: args.jobs.unwrap_or(1).max(1),
        };
        return cross::run(&opts, &cross, &cancel);
    }
    let mut progress = Progress::new(progress::drawable());
    let outcome = mutations::run(&opts, &cancel, &mut progress);
    progress.finish();
    sweep::sweep_killed_test_databases(sweep::database_url(&opts.test_env).as_deref());
    match outcome {
        Ok(report) => {
            println!("{}", report.summary_text());
            println!("outcomes: {}", opts.out_dir.join("outcomes.json").display());
            Ok(ExitCode::from(report.exit_code()))
        }
        Err(Error::Interrupted) => {
            eprintln!("{INTERRUPTED}");
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(e).context("mutation run"),
    }
}

/// The run's defining arguments, as the report's `generated_by`.
fn command_line(args: &MutateArgs) -> String {
    let mut c = String::from("harness mutate");
    for id in &args.only {
        c.push_str(&format!(" --only {id}"));
    }
    if let Some(s) = args.shard {
        c.push_str(&format!(" --shard {s}"));
    }
    if args.corpus {
        c.push_str(&format!(" --corpus --pair-limit {}", args.pair_limit));
    }
    if let Some(n) = args.cross_check {
        c.push_str(&format!(" --cross-check {n}"));
    }
    if let Some(s) = args.seed {
        c.push_str(&format!(" --seed {s}"));
    }
    if let Some(d) = &args.report_dir {
        c.push_str(&format!(" --report-dir {}", d.display()));
    }
    c
}

fn check(opts: &RunOptions, tests: bool) -> Result<ExitCode> {
    let registry = Registry::load(&opts.registry)?;
    let n = sanity::check_locators(&opts.root, &registry)?;
    println!("{n} guards: every locator matches exactly once");
    let c = completeness::check(&opts.root, &registry)?;
    println!("{}", c.render());
    if tests {
        let cancel = Cancel::new();
        stop_on_signals(cancel.clone())?;
        match sanity::check_tests(opts, &registry, &cancel) {
            Ok(()) => println!("every named test exists"),
            Err(Error::Interrupted) => return Ok(ExitCode::from(130)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(if c.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn list(opts: &RunOptions) -> Result<ExitCode> {
    let registry = Registry::load(&opts.registry)?;
    let guards = plan::select(&registry, &opts.only, opts.shard)?;
    let p = plan::plan(&opts.root, &registry, &guards)?;
    for m in &p.mutants {
        println!(
            "{:<32} {:<6} {:<7} {}",
            m.guard.id,
            format!("{:?}", m.guard.kind()).to_lowercase(),
            m.guard.operator,
            m.location()
        );
        for t in &m.guard.tests {
            println!("    {t}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn absolute(p: &Path) -> Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// SIGINT or SIGTERM cancels the run; a second one exits at once.
fn stop_on_signals(cancel: Cancel) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal listener")?;
    let (mut interrupt, mut terminate) = {
        let _entered = runtime.enter();
        (
            signal(SignalKind::interrupt()).context("listening for SIGINT")?,
            signal(SignalKind::terminate()).context("listening for SIGTERM")?,
        )
    };
    std::thread::Builder::new()
        .name("mutate-signals".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut seen = 0;
                loop {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                    seen += 1;
                    if seen == 1 {
                        eprintln!("mutate: stopping: killing the build or test, removing the scratch copy (signal again to quit at once)");
                        cancel.cancel();
                    } else {
                        std::process::exit(130);
                    }
                }
            })
        })
        .context("starting the signal thread")?;
    Ok(())
}

/// A progress bar on a terminal, plain lines otherwise.
pub(crate) struct Progress {
    tty: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(crate) fn new(tty: bool) -> Self {
        Progress { tty, bar: None }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        match event {
            Event::Planned(n) => {
                if self.tty {
                    let bar = progress::bar(*n, "");
                    bar.enable_steady_tick(Duration::from_millis(200));
                    self.bar = Some(bar);
                } else {
                    eprintln!("mutate: {n} mutants");
                }
            }
            Event::Phase(p) => match &self.bar {
                Some(bar) => bar.set_message(p.clone()),
                None => eprintln!("mutate: {p}"),
            },
            Event::ScratchReady(p) => self.line(format!("mutate: scratch copy at {}", p.display())),
            Event::MutantStarted(id) => {
                if let Some(bar) = &self.bar {
                    bar.set_message(id.clone());
                }
            }
            Event::MutantDone(o) => {
                self.line(format!(
                    "{:<8} {} ({}, {}) {:.1}s",
                    o.verdict.as_str(),
                    o.id,
                    o.location,
                    o.operator,
                    o.total_secs
                ));
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
            }
            Event::Warning(w) => self.line(format!("mutate: warning: {w}")),
        }
    }
}

/// `harness mutate merge`: exit 0 when every guard of the registry was
/// judged by exactly one shard and caught, 1 when any was not caught, 2 when
/// the shards do not add up to one run (a gap, an overlap, a missing shard).
fn merge(registry: &Path, args: &MergeArgs) -> Result<ExitCode> {
    let registry = Registry::load(registry)?;
    let mut shards = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        shards.push(mutations::merge::read_shard(path)?);
    }
    let merged = match mutations::merge::merge(&registry, &shards) {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let out = absolute(&args.merged)?;
    let json = merged.write_json(&out)?;
    let mut md = format!(
        "# Merged mutation run\n\nGenerated by `harness mutate merge` from {} shards; do not edit by hand.\n\n{}\n\n| guard | verdict | location |\n|---|---|---|\n",
        shards.len(),
        merged.summary_text().replace('\n', "\n\n")
    );
    for m in &merged.mutants {
        md.push_str(&format!(
            "| `{}` | {} | {} |\n",
            m.id,
            m.verdict.as_str(),
            m.location
        ));
    }
    let report = out.join("report.md");
    std::fs::write(&report, md).with_context(|| format!("writing {}", report.display()))?;
    println!("{}", merged.summary_text());
    println!("merged: {} and {}", json.display(), report.display());
    Ok(ExitCode::from(merged.exit_code()))
}

/// Mutants at once when `--jobs` is not given. Schemata mode's mutants
/// share one build and each is a test process, so they run one per CPU (on
/// 2 cores the whole registry's mutants took 55 s at 2 against 82 s at 1,
/// side by side); rewrite mode's jobs each need a scratch copy and a build
/// cache of their own, so it runs one.
fn default_jobs(mode: Mode) -> usize {
    match mode {
        Mode::Schemata => std::thread::available_parallelism().map_or(1, |n| n.get()),
        Mode::Rewrite => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: MutateArgs,
    }

    #[test]
    fn arguments_parse() {
        let cli = Cli::try_parse_from([
            "mutate", "--mode", "rewrite", "--only", "a", "--only", "b", "--shard", "1/3",
            "--jobs", "2",
        ])
        .unwrap();
        assert_eq!(cli.args.mode, ModeArg::Rewrite);
        assert_eq!(cli.args.only, ["a", "b"]);
        assert_eq!(cli.args.shard, Some(Shard { index: 1, count: 3 }));
        assert_eq!(cli.args.jobs, Some(2));
        let cli = Cli::try_parse_from(["mutate"]).unwrap();
        assert_eq!(cli.args.mode, ModeArg::Schemata);
        assert_eq!(cli.args.jobs, None);
        assert_eq!(default_jobs(Mode::Rewrite), 1);
        assert!(default_jobs(Mode::Schemata) >= 1);
        assert_eq!(cli.args.timeout_floor, 20);
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(Cli::try_parse_from(["mutate", "--shard", "3/3"]).is_err());
        assert!(Cli::try_parse_from(["mutate", "--mode", "fast"]).is_err());
        assert!(Cli::try_parse_from(["mutate", "--check-tests"]).is_err());
        assert!(Cli::try_parse_from(["mutate", "--check", "--check-tests"]).is_ok());
        assert!(Cli::try_parse_from(["mutate", "--seed", "3"]).is_err());
        assert!(Cli::try_parse_from(["mutate", "--cross-check", "4"]).is_err());
        assert!(Cli::try_parse_from(["mutate", "--tour", "--only", "x"]).is_err());
    }

    #[test]
    fn cross_check_and_report_arguments_parse() {
        let cli = Cli::try_parse_from([
            "mutate",
            "--cross-check",
            "6",
            "--seed",
            "42",
            "--report-dir",
            "reports",
        ])
        .unwrap();
        assert_eq!(cli.args.cross_check, Some(Sample::Count(6)));
        assert_eq!(cli.args.seed, Some(42));
        assert_eq!(
            command_line(&cli.args),
            "harness mutate --cross-check 6 --seed 42 --report-dir reports"
        );
        let cli = Cli::try_parse_from(["mutate", "--cross-check", "all"]).unwrap();
        assert_eq!(cli.args.cross_check, Some(Sample::All));
    }
}
