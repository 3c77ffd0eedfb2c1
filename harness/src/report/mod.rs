//! `harness report`: regenerates the committed benchmark and attack-matrix
//! reports from a fresh run of the corpus, or checks that the committed ones
//! still equal a fresh regeneration.
//!
//! Guarantees: the reports are a pure function of the corpus, the taxonomy,
//! the mutation registry, one run's results and the commit they were made
//! from (no clock, no machine facts), so regenerating them on an unchanged
//! tree gives the same bytes. `--check` writes nothing and exits 1 naming
//! every file that would change, ignoring which commit a report names but
//! refusing one that names none ([`provenance`]); for `generated.*`, whose
//! run takes minutes, it regenerates the seeded corpus (its SHA-256 must be
//! the one the report recorded) and runs the report's sample of it again:
//! every sampled scenario must come out as the report says.

pub mod attack_matrix;
pub mod benchmark;
pub mod markdown;
pub mod provenance;

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
    made_from: &str,
) -> Result<Vec<(&'static str, String)>> {
    let mut bench = BenchmarkReport::build(corpus, runs);
    bench.made_from = made_from.to_string();
    let mut matrix = AttackMatrix::build(corpus, &runs.combined, registry);
    matrix.made_from = made_from.to_string();
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
    let made_from = crate::workspace::root()
        .map(|root| provenance::made_from(&root))
        .unwrap_or_else(|_| "unknown".into());
    let files = render(&corpus, &runs, &registry, &made_from)?;
    if args.check {
        let mut stale = stale_files(&args.out, &files);
        if args.generated_count > 0 && args.results.is_none() {
            stale.extend(check_generated(&args)?);
        }
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
        files.extend(generated(&args, &made_from)?);
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
fn generated(args: &ReportArgs, made_from: &str) -> Result<Vec<(&'static str, String)>> {
    let (_dir, corpus, corpus_sha256) = generated_corpus(args)?;
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
    let mut report = BenchmarkReport::build(&corpus, &Runs::of_one("database", results.clone()));
    report.made_from = made_from.to_string();
    let sample = sample_of(&results);
    let intro = format!(
        "Generated by `harness report` (`make reports`): `harness generate --seed {seed} --count {count}`\n\
         run through the database-backed gate (and the pure engine where it can). Each scenario's\n\
         expectation comes from the oracle in `scenarios/src/oracle/`, written from the spec and\n\
         never calling the gate, so every failure below is a disagreement between the two.\n\
         This run takes minutes, so the drift check does not repeat it: it regenerates the corpus\n\
         (SHA-256 of its YAML `{sha}`) and runs {n} scenarios of it again (every {every}th, and\n\
         every failure), each of which must come out as `generated.json`'s `sample` records.",
        seed = args.generated_seed,
        count = args.generated_count,
        sha = corpus_sha256,
        n = sample.len(),
        every = sample_every(args.generated_count),
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
            serde_json::to_string_pretty(&GeneratedJson {
                report: &report,
                corpus_sha256,
                sample,
            })? + "\n",
        ),
    ])
}

/// `generated.json`: the report, the generated corpus's SHA-256 and the
/// sample the drift check runs again.
#[derive(Debug, serde::Serialize)]
struct GeneratedJson<'a> {
    #[serde(flatten)]
    report: &'a BenchmarkReport,
    corpus_sha256: String,
    sample: Vec<Sampled>,
}

/// How one sampled generated scenario came out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sampled {
    pub id: String,
    pub passed: bool,
    pub blocked: bool,
}

/// How many scenarios apart the sample's regular picks are (about 100 picks).
fn sample_every(count: usize) -> usize {
    (count / 100).max(1)
}

/// Every [`sample_every`]th result, and every one that did not pass.
fn sample_of(results: &[ScenarioResult]) -> Vec<Sampled> {
    let every = sample_every(results.len());
    results
        .iter()
        .enumerate()
        .filter(|(i, r)| i % every == 0 || !r.passed)
        .map(|(_, r)| Sampled {
            id: r.id.clone(),
            passed: r.passed,
            blocked: r.blocked,
        })
        .collect()
}

/// The seeded generated corpus, written to a folder of its own and loaded,
/// with the SHA-256 of its YAML.
fn generated_corpus(args: &ReportArgs) -> Result<(tempfile::TempDir, Corpus, String)> {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().context("creating a folder for the generated corpus")?;
    let scenarios = scenarios::generate::generate(args.generated_seed, args.generated_count);
    let yaml = scenarios::generate::to_yaml(&scenarios);
    let sha: String = Sha256::digest(yaml.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.path().join("generated.yaml"), yaml)
        .context("writing the generated corpus")?;
    let corpus = Corpus::load(dir.path());
    if !corpus.errors.is_empty() {
        bail!("the generated corpus does not load: {}", corpus.errors[0]);
    }
    Ok((dir, corpus, sha))
}

/// The drift check of `generated.*` (see the module docs): the names of the
/// files it finds stale, each with why.
fn check_generated(args: &ReportArgs) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let read = |name: &str| std::fs::read_to_string(args.out.join(name)).ok();
    let (Some(md), Some(json)) = (read("generated.md"), read("generated.json")) else {
        return Ok(vec!["generated.md or generated.json (missing)".into()]);
    };
    for (name, text) in [("generated.md", &md), ("generated.json", &json)] {
        if provenance::comparable(name, text).is_none() {
            stale.push(format!("{name} (names no commit)"));
        }
    }
    let committed: serde_json::Value =
        serde_json::from_str(&json).context("generated.json is not JSON")?;
    let recorded_sha = committed["corpus_sha256"].as_str().unwrap_or_default();
    let sample: Vec<Sampled> =
        serde_json::from_value(committed["sample"].clone()).unwrap_or_default();
    let (_dir, corpus, sha) = generated_corpus(args)?;
    if recorded_sha != sha {
        stale.push(format!(
            "generated.json (its corpus's SHA-256 is `{recorded_sha}`, the generator now writes `{sha}`)"
        ));
        return Ok(stale);
    }
    if sample.is_empty() {
        stale.push("generated.json (it records no sample)".into());
        return Ok(stale);
    }
    let selected: Vec<&Scenario> = sample.iter().filter_map(|s| corpus.get(&s.id)).collect();
    if selected.len() != sample.len() {
        stale.push("generated.json (its sample names scenarios the corpus lacks)".into());
        return Ok(stale);
    }
    eprintln!(
        "running {} sampled generated scenarios (seed {}) ...",
        selected.len(),
        args.generated_seed
    );
    let runtime = crate::bench::runtime()?;
    let results = runtime.block_on(run_all(
        &corpus,
        &selected,
        &Default::default(),
        Engines::Both,
        args.jobs,
    ))?;
    let differing: Vec<String> = sample
        .iter()
        .zip(&results)
        .filter(|(s, r)| (s.passed, s.blocked) != (r.passed, r.blocked))
        .map(|(s, r)| {
            format!(
                "`{}` recorded passed {} blocked {}, now passed {} blocked {}",
                s.id, s.passed, s.blocked, r.passed, r.blocked
            )
        })
        .collect();
    if !differing.is_empty() {
        stale.push(format!("generated.json (sample: {})", differing.join("; ")));
    }
    Ok(stale)
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

/// The files in `dir` that differ from `files` (or are missing, or name no
/// commit); which commit each names is not compared.
pub fn stale_files(dir: &Path, files: &[(&str, String)]) -> Vec<String> {
    files
        .iter()
        .filter(|(name, text)| {
            let committed = std::fs::read_to_string(dir.join(name)).ok();
            let committed = committed.and_then(|c| provenance::comparable(name, &c));
            committed.is_none() || committed != provenance::comparable(name, text)
        })
        .map(|(name, _)| name.to_string())
        .collect()
}
