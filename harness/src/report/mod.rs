//! `harness report`: regenerates the committed benchmark and attack-matrix
//! reports from a fresh run of the corpus, or checks that the committed ones
//! still equal a fresh regeneration.
//!
//! Guarantees: the reports are a pure function of the corpus, the taxonomy,
//! the mutation registry and one run's results (no clock, no machine facts),
//! so regenerating them on an unchanged tree gives the same bytes; `--check`
//! writes nothing and exits 1 naming every file that would change.

pub mod attack_matrix;
pub mod benchmark;
pub mod markdown;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use mutations::Registry;
use scenarios::{Corpus, Scenario};

use crate::bench::results::{ResultsFile, ScenarioResult};
use crate::bench::{Engines, Runs, heldout_ids, run_all, run_all_engines};
use attack_matrix::AttackMatrix;
use benchmark::BenchmarkReport;

/// Regenerate reports/benchmark.* and reports/attack-matrix.* (or check them).
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The corpus to run.
    #[arg(long, default_value = "scenarios")]
    pub corpus: PathBuf,
    /// The mutation registry whose guards the attack matrix names.
    #[arg(long, default_value = "mutations/registry.yaml")]
    pub registry: PathBuf,
    /// Where the reports live.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Compare with the files in --out instead of writing; exit 1 on any difference.
    #[arg(long)]
    pub check: bool,
    /// Use this results.json (from `harness bench`) instead of running the corpus.
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Also write the run's results.json here.
    #[arg(long)]
    pub keep_results: Option<PathBuf>,
    /// How many scenarios run at once.
    #[arg(long, default_value_t = 8)]
    pub jobs: usize,
    /// Run the database engine only (the committed reports include the
    /// HTTP engine's run; a check without it differs from them).
    #[arg(long)]
    pub no_http: bool,
    /// How many generated scenarios reports/generated.* covers (0: leave it alone).
    #[arg(long, default_value_t = 10_000)]
    pub generated_count: usize,
    /// The generator's seed for reports/generated.*.
    #[arg(long, default_value_t = 20_260_903)]
    pub generated_seed: u64,
    /// Use this results.json (from `harness bench` on `harness generate --seed S
    /// --count N`) for reports/generated.* instead of running it again.
    #[arg(long)]
    pub generated_results: Option<PathBuf>,
}

/// The generated files, by name.
pub fn render(
    corpus: &Corpus,
    runs: &Runs,
    registry: &Registry,
) -> Result<Vec<(&'static str, String)>> {
    let bench = BenchmarkReport::build(corpus, runs);
    let matrix = AttackMatrix::build(corpus, &runs.combined, registry);
    Ok(vec![
        ("benchmark.md", bench.markdown()),
        (
            "benchmark.json",
            serde_json::to_string_pretty(&bench)? + "\n",
        ),
        ("attack-matrix.md", matrix.markdown()),
        (
            "attack-matrix.json",
            serde_json::to_string_pretty(&matrix)? + "\n",
        ),
    ])
}

fn results_of(args: &ReportArgs, corpus: &Corpus) -> Result<Runs> {
    if let Some(path) = &args.results {
        return read_runs(path);
    }
    let selected: Vec<&Scenario> = corpus.scenarios.iter().collect();
    let heldout = heldout_ids(&corpus.root);
    let runtime = crate::bench::runtime()?;
    runtime.block_on(run_all_engines(
        corpus,
        &selected,
        &heldout,
        !args.no_http,
        args.jobs,
    ))
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let corpus = Corpus::load(&args.corpus);
    if !corpus.errors.is_empty() {
        for e in &corpus.errors {
            eprintln!("refused: {e}");
        }
        bail!(
            "the corpus has {} refused entries: fix them before generating reports",
            corpus.errors.len()
        );
    }
    let registry = Registry::load(&args.registry)
        .with_context(|| format!("loading {}", args.registry.display()))?;
    let runs = results_of(&args, &corpus)?;
    if let Some(path) = &args.keep_results {
        std::fs::write(path, serde_json::to_string_pretty(&runs.file())? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let files = render(&corpus, &runs, &registry)?;
    if args.check {
        let stale = stale_files(&args.out, &files);
        if stale.is_empty() {
            println!("reports are up to date: {}", names(&files));
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "these reports differ from a fresh regeneration: {}\nrun `make reports` and commit the result",
            stale.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut files = files;
    if args.generated_count > 0 && args.results.is_none() {
        files.extend(generated(&args)?);
    }
    for (name, text) in &files {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("wrote {} in {}", names(&files), args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// `reports/generated.*`: a seeded generated corpus through the gate. Its
/// expectations come from the spec's oracle, so every failure here is a
/// disagreement between the gate and the oracle, named by id.
fn generated(args: &ReportArgs) -> Result<Vec<(&'static str, String)>> {
    let dir = tempfile::tempdir().context("creating a folder for the generated corpus")?;
    let scenarios = scenarios::generate::generate(args.generated_seed, args.generated_count);
    std::fs::write(
        dir.path().join("generated.yaml"),
        scenarios::generate::to_yaml(&scenarios),
    )
    .context("writing the generated corpus")?;
    let corpus = Corpus::load(dir.path());
    if !corpus.errors.is_empty() {
        bail!("the generated corpus does not load: {}", corpus.errors[0]);
    }
    let results = match &args.generated_results {
        Some(path) => {
            let results = read_results(path)?;
            let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
            let expected: Vec<&str> = corpus.scenarios.iter().map(|s| s.id.as_str()).collect();
            if ids != expected {
                bail!(
                    "{} is not a run of `harness generate --seed {} --count {}`",
                    path.display(),
                    args.generated_seed,
                    args.generated_count
                );
            }
            results
        }
        None => {
            eprintln!(
                "running {} generated scenarios (seed {}) ...",
                args.generated_count, args.generated_seed
            );
            let selected: Vec<&Scenario> = corpus.scenarios.iter().collect();
            let runtime = crate::bench::runtime()?;
            runtime.block_on(run_all(
                &corpus,
                &selected,
                &Default::default(),
                Engines::Both,
                args.jobs,
            ))?
        }
    };
    let report = BenchmarkReport::build(&corpus, &Runs::of_one("database", results));
    let intro = format!(
        "Generated by `harness report` (`make reports`): `harness generate --seed {seed} --count {count}`\n\
         run through the database-backed gate (and the pure engine where it can). Each scenario's\n\
         expectation comes from the oracle in `scenarios/src/oracle/`, written from the spec and\n\
         never calling the gate, so every failure below is a disagreement between the two.\n\
         This run takes minutes, so the drift test does not repeat it; `make reports` does.",
        seed = args.generated_seed,
        count = args.generated_count
    );
    Ok(vec![
        (
            "generated.md",
            report.markdown_titled(
                "Generated corpus: the gate against the spec's oracle",
                &intro,
            ),
        ),
        (
            "generated.json",
            serde_json::to_string_pretty(&report)? + "\n",
        ),
    ])
}

fn read_results(path: &Path) -> Result<Vec<ScenarioResult>> {
    Ok(read_runs(path)?.combined)
}

/// A results.json as runs: each engine's own, or (a file of one engine's
/// run) the database engine's.
fn read_runs(path: &Path) -> Result<Runs> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: ResultsFile = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a results.json", path.display()))?;
    if file.engines.is_empty() {
        return Ok(Runs::of_one("database", file.results));
    }
    Ok(Runs {
        combined: file.results,
        engines: file.engines,
    })
}

fn names(files: &[(&str, String)]) -> String {
    files.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The files in `dir` whose bytes differ from `files` (or that are missing).
pub fn stale_files(dir: &Path, files: &[(&str, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(name, text)| {
            std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(text.as_str())
        })
        .map(|(name, _)| name.to_string())
        .collect()
}
