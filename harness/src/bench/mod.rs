//! `harness bench`: runs a scenario corpus through the gate and writes
//! `results.json` in the spec's shape.
//!
//! Guarantees: every scenario that loads is run and judged; one that errors
//! is a failure with its message, never a crash of the run: an error of the
//! gate, a panic or a timeout fails that scenario with `engine_error: true`
//! and the run goes on with the next one. A file the loader
//! refuses is reported with its file, scenario id and key, and costs nothing
//! else. Scenarios the pure engine can run faithfully run there too, and a
//! disagreement between the pure and the database-backed engine is a failure.
//! With `--engines database,http` every scenario also runs through the real
//! service on a loopback port ([`http`]); a step on which the HTTP engine and
//! the database engine disagree, or an answer of the service that breaks its
//! documented rules, is a failure too; a disagreement with the pure engine
//! or the HTTP engine clears `blocked` as well as `passed`. Wire-only steps
//! (`scenarios::wire`) run only on the HTTP engine; the others run each
//! scenario without them, and an attack whose attack steps are wire-only
//! is "not run" there (never blocked, out of that engine's score). With
//! more than one engine, `results.json` holds each engine's own run
//! (`engines`) beside the verdicts together (`results`).
//! Exit 0 when the run completed; with `--strict`, 1 when any scenario failed
//! or any file was refused.

pub mod database;
pub use database::http;
pub mod judge;
pub mod observed;
pub mod pool;
pub mod pure;
pub mod results;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use scenarios::{Corpus, Scenario};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::progress::pct;
use judge::Run;
use results::{EngineRun, ResultsFile, ScenarioResult, Summary};

/// Which engines run the scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engines {
    /// The database-backed gate for every scenario, and the pure engine as
    /// well for those it can run (the default).
    Both,
    /// Only the pure engine, only for the scenarios it can run; needs no database.
    Pure,
    /// Only the database-backed gate.
    Database,
    /// The real service on a loopback port, compared step by step with the
    /// database-backed gate (which it implies).
    Http,
}

/// Run a scenario corpus through the gate and write DIR/results.json.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A corpus file or folder (a folder may hold its own worlds/).
    #[arg(long, default_value = "scenarios")]
    pub corpus: PathBuf,
    /// Where to write results.json.
    #[arg(long, default_value = "bench.out")]
    pub out: PathBuf,
    /// Exit 1 when any scenario fails or any file is refused.
    #[arg(long)]
    pub strict: bool,
    /// Which engines to run, comma-separated (`database,http`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "both")]
    pub engines: Vec<Engines>,
    /// Run only the scenarios whose id contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Run only the scenarios of these threat classes (taxonomy ids; the
    /// option repeats). None given: every class.
    #[arg(long, value_name = "CLASS")]
    pub class: Vec<String>,
    /// How many scenarios run at once (each in its own database).
    #[arg(long, default_value_t = 8)]
    pub jobs: usize,
    /// The longest one scenario may run on the database engine, in
    /// milliseconds; longer is that scenario's engine error.
    #[arg(long, default_value_t = database::SCENARIO_TIMEOUT.as_millis() as u64)]
    pub scenario_timeout_ms: u64,
    /// Run the scenarios in an order drawn from this seed instead of the
    /// corpus's. Databases are reused from scenario to scenario (emptied in
    /// between), so any order must give the same results; this shows it.
    #[arg(long, value_name = "SEED")]
    pub shuffle: Option<u64>,
}

/// `selected` in the order a seeded Fisher–Yates shuffle gives.
pub fn shuffled<T>(mut selected: Vec<T>, seed: u64) -> Vec<T> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for i in (1..selected.len()).rev() {
        let j = rng.random_range(0..=i);
        selected.swap(i, j);
    }
    selected
}

/// `results.json`, plus the refusals of the loader (an addition to the spec's shape).
#[derive(Debug, Serialize)]
struct Written<'a> {
    #[serde(flatten)]
    results: &'a ResultsFile,
    load_errors: Vec<String>,
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let corpus = Corpus::load(&args.corpus);
    for err in &corpus.errors {
        eprintln!("refused: {err}");
    }
    let mut selected: Vec<&Scenario> = corpus
        .scenarios
        .iter()
        .filter(|s| args.only.as_deref().is_none_or(|o| s.id.contains(o)))
        .filter(|s| {
            args.class.is_empty() || s.class.as_ref().is_some_and(|c| args.class.contains(c))
        })
        .collect();
    if let Some(seed) = args.shuffle {
        selected = shuffled(selected, seed);
    }
    let pure_only = args.engines.iter().all(|e| *e == Engines::Pure);
    let with_http = args.engines.contains(&Engines::Http);
    if pure_only {
        let before = selected.len();
        selected.retain(|s| pure::eligible(s));
        eprintln!(
            "--engines pure: {} of {before} scenarios need the database-backed gate and were skipped",
            before - selected.len()
        );
    }
    let heldout = heldout_ids(&corpus.root);
    let runtime = runtime()?;
    let timeout = std::time::Duration::from_millis(args.scenario_timeout_ms);
    let results = runtime.block_on(async {
        let server = if pure_only {
            None
        } else {
            Some(crate::db::Server::open("this bench").await?)
        };
        let db = match &server {
            None => None,
            Some(server) => Some(
                database::DatabaseEngine::start(&server.url)
                    .await?
                    .with_timeout(timeout),
            ),
        };
        let http = match (&server, with_http) {
            (Some(server), true) => Some(
                http::HttpEngine::start(&server.url)
                    .await?
                    .with_timeout(timeout),
            ),
            _ => None,
        };
        let started = std::time::Instant::now();
        let results = run_with_engines(
            &corpus,
            &selected,
            &heldout,
            db,
            http.clone(),
            args.jobs,
            true,
        )
        .await;
        if let Some(http) = &http {
            println!("{}", http.tally().summary());
            println!(
                "database and http engines: {} scenarios in {:.1} s",
                selected.len(),
                started.elapsed().as_secs_f64()
            );
        }
        if let Some(server) = server {
            server.close();
        }
        results
    })?;
    let file = results.file();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("could not create {}", args.out.display()))?;
    let path = args.out.join("results.json");
    let written = Written {
        results: &file,
        load_errors: corpus.errors.iter().map(ToString::to_string).collect(),
    };
    std::fs::write(&path, serde_json::to_string_pretty(&written)? + "\n")
        .with_context(|| format!("could not write {}", path.display()))?;
    for run in &file.engines {
        print!("{} engine: ", run.engine);
        print_figures(&run.summary);
    }
    print_summary(&file.summary, &path, corpus.errors.len());
    let failed = file.summary.failed > 0 || !corpus.errors.is_empty();
    Ok(if args.strict && failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The async runtime every harness command runs its database work on.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    runtime_of(2)
}

/// As [`runtime`], with `workers` worker threads.
pub fn runtime_of(workers: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("could not start the async runtime")
}

/// The ids listed in the corpus folder's `heldout.txt`, if it has one.
pub fn heldout_ids(root: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(root.join("heldout.txt"))
        .map(|t| scenarios::heldout::parse(&t).into_iter().collect())
        .unwrap_or_default()
}

/// Runs the selected scenarios, `jobs` at a time, and returns their results
/// in the order given.
pub async fn run_all(
    corpus: &Corpus,
    selected: &[&Scenario],
    heldout: &BTreeSet<String>,
    engines: Engines,
    jobs: usize,
) -> Result<Vec<ScenarioResult>> {
    let server = match engines {
        Engines::Pure => None,
        _ => Some(crate::db::Server::open("this run").await?),
    };
    let db = match &server {
        None => None,
        Some(server) => Some(database::DatabaseEngine::start(&server.url).await?),
    };
    let results = run_with(corpus, selected, heldout, db, jobs, true).await;
    if let Some(server) = server {
        server.close();
    }
    results
}

/// As [`run_all`] with the database engine (and the pure engine's
/// cross-check), and with the HTTP engine too when `with_http`: every
/// engine's own run beside the verdicts together.
pub async fn run_all_engines(
    corpus: &Corpus,
    selected: &[&Scenario],
    heldout: &BTreeSet<String>,
    with_http: bool,
    jobs: usize,
) -> Result<Runs> {
    let server = crate::db::Server::open("this run").await?;
    let db = database::DatabaseEngine::start(&server.url).await?;
    let http = if with_http {
        Some(http::HttpEngine::start(&server.url).await?)
    } else {
        None
    };
    let runs = run_with_engines(corpus, selected, heldout, Some(db), http, jobs, true).await;
    server.close();
    runs
}

/// As [`run_all`], with the database engine (if any) already started.
pub async fn run_with(
    corpus: &Corpus,
    selected: &[&Scenario],
    heldout: &BTreeSet<String>,
    db: Option<database::DatabaseEngine>,
    jobs: usize,
    show_progress: bool,
) -> Result<Vec<ScenarioResult>> {
    run_with_engines(corpus, selected, heldout, db, None, jobs, show_progress)
        .await
        .map(|runs| runs.combined)
}

/// Every scenario's results, in the order given: every engine's verdict
/// together, and each engine's own run.
#[derive(Debug, Clone, Default)]
pub struct Runs {
    pub combined: Vec<ScenarioResult>,
    /// One per engine that ran, in the order pure, database, http.
    pub engines: Vec<EngineRun>,
}

impl Runs {
    /// One engine's results, as the verdicts together too.
    pub fn of_one(engine: &str, results: Vec<ScenarioResult>) -> Self {
        Runs {
            engines: vec![EngineRun::of(engine, results.clone())],
            combined: results,
        }
    }

    /// The results file: the engines' own runs only when more than one ran.
    pub fn file(&self) -> ResultsFile {
        ResultsFile {
            summary: Summary::of(&self.combined),
            results: self.combined.clone(),
            engines: if self.engines.len() > 1 {
                self.engines.clone()
            } else {
                Vec::new()
            },
        }
    }
}

/// As [`run_with`], with the HTTP engine too when given (it needs `db`).
pub async fn run_with_engines(
    corpus: &Corpus,
    selected: &[&Scenario],
    heldout: &BTreeSet<String>,
    db: Option<database::DatabaseEngine>,
    http: Option<http::HttpEngine>,
    jobs: usize,
    show_progress: bool,
) -> Result<Runs> {
    let engine_names: Vec<&'static str> = match (&db, &http) {
        (None, _) => vec!["pure"],
        (Some(_), None) => vec!["database"],
        (Some(_), Some(_)) => vec!["database", "http"],
    };
    let bar = if show_progress {
        crate::progress::bar(selected.len(), "")
    } else {
        ProgressBar::hidden()
    };
    let plain = show_progress && bar.is_hidden();
    let permits = Arc::new(Semaphore::new(jobs.max(1)));
    let mut set = JoinSet::new();
    let mut task_index = std::collections::HashMap::new();
    for (index, scenario) in selected.iter().enumerate() {
        let scenario = (*scenario).clone();
        let world = corpus.worlds.get(&scenario.world).cloned();
        let is_heldout = heldout.contains(&scenario.id);
        let db = db.clone();
        let http = http.clone();
        let permits = permits.clone();
        let engine_names = engine_names.clone();
        let handle = set.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let judged = match &world {
                None => everywhere(
                    &engine_names,
                    judge::judge(
                        &scenario,
                        &Run {
                            error: Some(format!("world `{}` did not load", scenario.world)),
                            ..Run::default()
                        },
                        "none",
                        is_heldout,
                    ),
                ),
                Some(world) => {
                    run_one(&scenario, world, db.as_ref(), http.as_ref(), is_heldout).await
                }
            };
            (index, judged)
        });
        task_index.insert(handle.id(), index);
    }
    let mut results: Vec<Option<Judged>> = vec![None; selected.len()];
    let mut done = 0;
    while let Some(joined) = set.join_next_with_id().await {
        // A panic outside the database run (the pure engine, the judge) still
        // costs only its own scenario.
        let (index, judged) = match joined {
            Ok((_, done)) => done,
            Err(e) => {
                let index = *task_index
                    .get(&e.id())
                    .context("a scenario task that was never started ended")?;
                let scenario = selected[index];
                let text = if e.is_panic() {
                    format!("the run panicked: {}", database::panic_text(e.into_panic()))
                } else {
                    format!("the run was cancelled: {e}")
                };
                let run = Run::engine_error(text);
                let heldout = heldout.contains(&scenario.id);
                (
                    index,
                    everywhere(&engine_names, judge::judge(scenario, &run, "none", heldout)),
                )
            }
        };
        done += 1;
        if plain {
            eprintln!(
                "[{done}/{}] {} {}",
                selected.len(),
                if judged.combined.passed {
                    "pass"
                } else {
                    "FAIL"
                },
                judged.combined.id
            );
        }
        bar.inc(1);
        results[index] = Some(judged);
    }
    bar.finish_and_clear();
    if let Some(db) = &db {
        db.close().await;
    }
    if let Some(http) = &http {
        http.close().await;
    }
    let judged: Vec<Judged> = results.into_iter().flatten().collect();
    let engines = engine_names
        .iter()
        .map(|name| {
            let results = judged
                .iter()
                .filter_map(|j| j.per_engine.iter().find(|(e, _)| e == name))
                .map(|(_, r)| r.clone())
                .collect();
            EngineRun::of(name, results)
        })
        .collect();
    Ok(Runs {
        combined: judged.into_iter().map(|j| j.combined).collect(),
        engines,
    })
}

/// The same result for every engine (a run that never reached one).
fn everywhere(engines: &[&'static str], result: ScenarioResult) -> Judged {
    Judged {
        per_engine: engines.iter().map(|e| (*e, result.clone())).collect(),
        combined: result,
    }
}

/// The scenario as engines without a wire run it: its wire-only steps left out.
pub fn without_wire_only(scenario: &Scenario) -> Scenario {
    let mut s = scenario.clone();
    s.steps.retain(|step| !step.wire_only());
    s
}

/// What one scenario came to: every engine's verdict together, and each
/// engine's own.
#[derive(Debug, Clone)]
pub struct Judged {
    /// Passed only if it passed on every engine that ran it; an attack is
    /// blocked only if every engine that sent it blocked it (and some did).
    pub combined: ScenarioResult,
    /// Each engine's own result, by engine: `pure` (alone), `database` (with
    /// the pure engine's cross-check where it can run), `http`.
    pub per_engine: Vec<(&'static str, ScenarioResult)>,
}

/// Marks a result as not run on its engine: the engine did not send the
/// attack (its attack steps are wire-only), so it is no evidence and never
/// blocked.
pub fn mark_not_run(result: &mut ScenarioResult) {
    result.not_run = true;
    result.blocked = false;
    result.attack_reasons.clear();
}

/// Clears `passed` and `blocked` with these failures, when there are any.
fn fail_with(result: &mut ScenarioResult, failures: Vec<String>) {
    if !failures.is_empty() {
        result.passed = false;
        result.blocked = false;
        result.failures.extend(failures);
    }
}

/// The pure engine's cross-check of a database result: a disagreement
/// clears `blocked` as well as `passed`, as one with the HTTP engine does
/// (which engine is right is unknown, so neither run is evidence).
pub fn cross_check_pure(result: &mut ScenarioResult, pure: &Run, database: &Run) {
    result.engine = "database+pure".into();
    fail_with(result, judge::disagreements(pure, database));
}

/// The pure engine alone keeps no ledger and no log: the invariants only
/// those can answer (`ledger_intact`, `evidence_verifies`,
/// `log_consistent`) are left out of its judgement, and its engine field
/// names each one left out, so no result reads as having checked them.
fn judge_pure_alone(scenario: &Scenario, run: &Run, heldout: bool) -> ScenarioResult {
    let mut checked = scenario.clone();
    let inv = &mut checked.invariants;
    let unchecked: Vec<&str> = [
        ("ledger_intact", inv.ledger_intact.take().is_some()),
        ("evidence_verifies", inv.evidence_verifies.take().is_some()),
        ("log_consistent", inv.log_consistent.take().is_some()),
    ]
    .into_iter()
    .filter_map(|(name, asked)| asked.then_some(name))
    .collect();
    let engine = if unchecked.is_empty() {
        "pure".to_string()
    } else {
        format!("pure (not checked: {})", unchecked.join(", "))
    };
    judge::judge(&checked, run, &engine, heldout)
}

async fn run_one(
    scenario_in_full: &Scenario,
    world: &scenarios::World,
    db: Option<&database::DatabaseEngine>,
    http: Option<&http::HttpEngine>,
    heldout: bool,
) -> Judged {
    let scenario = &without_wire_only(scenario_in_full);
    let needs_wire = scenario_in_full.attack_needs_wire();
    let pure_run = pure::eligible(scenario).then(|| pure::run(scenario, world));
    let Some(db) = db else {
        let mut result = match pure_run {
            Some(run) => judge_pure_alone(scenario, &run, heldout),
            None => judge::judge(
                scenario,
                &Run {
                    error: Some(
                        "the pure engine cannot run this scenario; run with the database".into(),
                    ),
                    ..Run::default()
                },
                "pure",
                heldout,
            ),
        };
        if needs_wire {
            mark_not_run(&mut result);
        }
        return Judged {
            combined: result.clone(),
            per_engine: vec![("pure", result)],
        };
    };
    let db_run = db.run(scenario, world).await;
    let mut db_result = judge::judge(scenario, &db_run, "database", heldout);
    if let Some(pure_run) = pure_run {
        cross_check_pure(&mut db_result, &pure_run, &db_run);
    }
    if needs_wire {
        mark_not_run(&mut db_result);
    }
    let Some(http) = http else {
        return Judged {
            combined: db_result.clone(),
            per_engine: vec![("database", db_result)],
        };
    };
    let http_run = http.run(scenario_in_full, world).await;
    let mut http_result = judge::judge(scenario_in_full, &http_run.run, "http", heldout);
    // The HTTP engine's outcomes of the steps the database engine ran.
    let mut compared = http_run.run.clone();
    compared.outcomes = scenario_in_full
        .steps
        .iter()
        .zip(&http_run.run.outcomes)
        .filter(|(step, _)| !step.wire_only())
        .map(|(_, o)| o.clone())
        .collect();
    let mut failures = judge::disagreements_of("http", &compared, &db_run);
    if http_run.run.error.is_none()
        && db_run.error.is_none()
        && compared.outcomes.len() != db_run.outcomes.len()
    {
        failures.push(format!(
            "http engine ran {} steps, the database engine {}",
            compared.outcomes.len(),
            db_run.outcomes.len()
        ));
    }
    failures.extend(
        http_run
            .wire_failures
            .iter()
            .map(|f| format!("http engine: {f}")),
    );
    fail_with(&mut http_result, failures);
    let combined = combine(&db_result, &http_result);
    Judged {
        combined,
        per_engine: vec![("database", db_result), ("http", http_result)],
    }
}

/// The database engine's and the HTTP engine's verdicts together: passed
/// only if both passed; blocked only if the HTTP engine blocked it and the
/// database engine blocked it or did not send it. The database engine's
/// failures the HTTP engine did not also report are added, named.
fn combine(db: &ScenarioResult, http: &ScenarioResult) -> ScenarioResult {
    let mut out = http.clone();
    out.engine = format!("{}+http", db.engine);
    out.passed = db.passed && http.passed;
    out.blocked = http.blocked && (db.not_run || db.blocked);
    out.engine_error = db.engine_error || http.engine_error;
    let union = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter()
            .chain(b)
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    out.reasons_seen = union(&db.reasons_seen, &http.reasons_seen);
    out.guards_seen = union(&db.guards_seen, &http.guards_seen);
    for f in &db.failures {
        if !http.failures.contains(f) {
            out.failures.push(format!("database engine: {f}"));
        }
    }
    if !db.not_run {
        out.attack_reasons = union(&db.attack_reasons, &http.attack_reasons);
    }
    out
}

fn print_summary(s: &Summary, path: &Path, refused: usize) {
    print_figures(s);
    println!(
        "{} failed ({} engine errors); {} refused file entries",
        s.failed, s.engine_errors, refused
    );
    println!("results: {}", path.display());
}

fn print_figures(s: &Summary) {
    println!(
        "attacks: {} total, {} blocked, {} for the expected reason, {} not run; legit: {} total, {} passed; precision {}, recall {}",
        s.attacks.total,
        s.attacks.blocked,
        s.attacks.blocked_expected_reason,
        s.not_run,
        s.legit.total,
        s.legit.passed,
        pct(s.precision),
        pct(s.recall),
    );
}

#[cfg(test)]
mod tests {
    use gate::Reason;
    use scenarios::DecisionKind;

    use super::observed::{ObservedState, StepOutcome};
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        let value: scenarios::yaml::Value = scenarios::yaml::from_str(yaml).unwrap();
        Scenario::parse(&value).unwrap()
    }

    fn run_of(kind: DecisionKind, reason: Option<Reason>) -> Run {
        Run {
            outcomes: vec![StepOutcome::Decided { kind, reason }],
            state: Some(ObservedState::default()),
            ..Run::default()
        }
    }

    #[test]
    fn the_pure_engine_alone_names_every_invariant_it_cannot_check() {
        let s = scenario(
            r#"
id: over-the-cap
label: attack
world: standard
steps:
  - propose: {actor: buyer-agent, body: {sku: GPU-HOUR, quantity: 1, purpose: "gpu"}}
    expect: {decision: deny, reason: AMOUNT_EXCEEDS_TRANSACTION_CAP}
invariants: {provider_orders: 0, evidence_verifies: true, log_consistent: true}
"#,
        );
        let run = run_of(
            DecisionKind::Deny,
            Some(Reason::AmountExceedsTransactionCap),
        );
        let result = judge_pure_alone(&s, &run, false);
        assert_eq!(
            result.engine,
            "pure (not checked: evidence_verifies, log_consistent)"
        );
        // What it can check still counts: a wrong money figure fails.
        let mut wrong = s.clone();
        wrong.invariants.provider_orders = Some(1);
        assert!(!judge_pure_alone(&wrong, &run, false).passed);
        let mut plain = s.clone();
        plain.invariants.evidence_verifies = None;
        plain.invariants.log_consistent = None;
        assert_eq!(judge_pure_alone(&plain, &run, false).engine, "pure");
    }

    #[test]
    fn a_pure_and_database_disagreement_clears_blocked() {
        let s = scenario(
            r#"
id: over-the-cap
label: attack
world: standard
steps:
  - propose: {actor: buyer-agent, body: {sku: GPU-HOUR, quantity: 1, purpose: "gpu"}}
    expect: {decision: deny, reason: AMOUNT_EXCEEDS_TRANSACTION_CAP}
invariants: {provider_orders: 0}
"#,
        );
        let db = run_of(
            DecisionKind::Deny,
            Some(Reason::AmountExceedsTransactionCap),
        );
        let mut result = judge::judge(&s, &db, "database", false);
        assert!(result.blocked && result.passed);
        // The pure engine allowed what the database refused.
        let pure = run_of(DecisionKind::Allow, None);
        cross_check_pure(&mut result, &pure, &db);
        assert_eq!(result.engine, "database+pure");
        assert!(!result.passed, "{result:?}");
        assert!(!result.blocked, "{result:?}");
        // Agreement leaves it blocked.
        let mut result = judge::judge(&s, &db, "database", false);
        cross_check_pure(&mut result, &db.clone(), &db);
        assert!(result.blocked && result.passed);
    }

    #[test]
    fn an_attack_not_run_is_never_blocked_and_credits_no_reason() {
        let s = scenario(
            r#"
id: key-on-the-wrong-route
label: attack
world: standard
steps:
  - {name: p1, propose: {actor: buyer-agent, body: {sku: CLOUD-TEAM, quantity: 1, purpose: "team"}}, expect: {decision: step_up, reason: APPROVAL_REQUIRED}}
  - approve: {request: p1, approver: finance-lead}
    wire: {as: buyer-agent, status: 403, reason: ACTOR_NOT_PERMITTED}
invariants: {spent_today_paise: 0}
"#,
        );
        assert!(s.attack_needs_wire());
        assert_eq!(s.attack_steps(), vec![1]);
        // The database engine runs the setup step only.
        let stripped = without_wire_only(&s);
        let db = run_of(DecisionKind::StepUp, Some(Reason::ApprovalRequired));
        let mut result = judge::judge(&stripped, &db, "database", false);
        assert_eq!(result.attack_reasons, vec!["APPROVAL_REQUIRED".to_string()]);
        mark_not_run(&mut result);
        assert!(!result.blocked && result.not_run);
        assert!(result.attack_reasons.is_empty());
        // The HTTP engine sends the attack: it is credited to the wire-only
        // step's code, not to the step that set it up.
        let mut http = db.clone();
        http.outcomes.push(StepOutcome::Decided {
            kind: DecisionKind::Deny,
            reason: None,
        });
        let on_http = judge::judge(&s, &http, "http", false);
        assert!(on_http.blocked, "{on_http:?}");
        assert_eq!(
            on_http.attack_reasons,
            vec!["ACTOR_NOT_PERMITTED".to_string()]
        );
        let together = combine(&result, &on_http);
        assert!(together.blocked && together.passed);
        assert_eq!(
            together.attack_reasons,
            vec!["ACTOR_NOT_PERMITTED".to_string()]
        );
        let summary = Summary::of(std::slice::from_ref(&result));
        assert_eq!((summary.not_run, summary.attacks.total), (1, 0));
        assert_eq!(summary.recall, None);
    }
}
