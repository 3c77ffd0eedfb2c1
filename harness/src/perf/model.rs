//! What one `harness perf` run measured: the report's data, written as
//! `performance.json` (serde) and rendered by [`super::render`].
//!
//! Guarantees: plain data and the few figures derived from it (medians,
//! ranges, growth); no clock, file or environment, so a fixed struct is
//! fixed output. A figure that was not measured is `None`, never a zero.

use serde::{Deserialize, Serialize};

use super::machine::Machine;
use super::stats::{format_rate, median, min_max, ratio};

/// The pure engine's goal: decisions per second on one core.
pub const DECISIONS_GOAL_PER_SEC: f64 = 200_000.0;
/// The database-backed gate's goal: the whole committed corpus within this many seconds.
pub const DB_CORPUS_GOAL_SECS: f64 = 15.0;
/// The database-backed gate's goal: all 10,000 generated scenarios within this many seconds.
pub const DB_GENERATED_GOAL_SECS: f64 = 180.0;
/// Per-scenario cost may drift this far (either way) from the smallest size
/// and still count as linear growth.
pub const LINEAR_TOLERANCE: f64 = 1.5;

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// When the run started (UTC, RFC 3339).
    pub taken_at: String,
    /// The command line that produced this report.
    pub command: String,
    pub quick: bool,
    /// The generator's seed for every generated corpus.
    pub seed: u64,
    /// Seconds the whole run took.
    pub run_seconds: f64,
    pub machine: Machine,
    pub decisions: Decisions,
    pub pure_corpus: PureRun,
    pub pure_generated: PureRun,
    pub scaling: Scaling,
    /// `None` when the database phase did not run; `database_skipped` says why.
    pub database: Option<Database>,
    pub database_skipped: Option<String>,
    /// The load phase (`--db`): the gate through Postgres beside pgbench.
    pub load: Option<super::load::Load>,
    pub load_skipped: Option<String>,
    /// The wire phase (`--http`): the service on loopback beside the in-process gate.
    pub http: Option<super::http::HttpLoad>,
    pub http_skipped: Option<String>,
    pub memory: Vec<MemoryMark>,
    /// Observations computed from the figures (where the time goes, caveats).
    pub notes: Vec<String>,
}

/// Rates measured in rounds, and their order statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub per_round: Vec<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Rates {
    pub fn of(per_round: Vec<f64>) -> Rates {
        let (min, max) = min_max(&per_round).unzip();
        Rates {
            median: median(&per_round),
            min,
            max,
            per_round,
        }
    }

    pub fn range(&self) -> String {
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!(
                "{} – {}",
                format_rate(Some(lo)).trim_end_matches("/s"),
                format_rate(Some(hi))
            ),
            _ => "n/a".into(),
        }
    }
}

/// One proposal of the fixed decision mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixEntry {
    pub body: String,
    /// What the engine decided, e.g. `allow`, `deny SKU_UNKNOWN`.
    pub decision: String,
}

/// Phase 1: decisions per second on one core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    pub mix: Vec<MixEntry>,
    /// The spend state every decision is taken against.
    pub spend_state: String,
    pub warmup_iterations: u64,
    pub iterations_per_round: u64,
    pub rounds: usize,
    /// `gate::evaluate` on proposals parsed beforehand.
    pub evaluate: Rates,
    /// `gate::parse_proposal` on the raw bytes, then `gate::evaluate`.
    pub parse_and_evaluate: Rates,
    pub goal_per_sec: f64,
}

/// Phase 2: whole scenarios through the pure engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PureRun {
    /// What was run, in words.
    pub source: String,
    /// Scenarios loaded or generated.
    pub scenarios: usize,
    /// Those the pure engine ran.
    pub runnable: usize,
    /// Steps of the runnable scenarios.
    pub steps: usize,
    /// Runnable scenarios that met every expectation (first round).
    pub passed: usize,
    /// Seconds `generate` took, for a generated corpus.
    pub generate_seconds: Option<f64>,
    pub rounds: usize,
    /// Passes over the runnable scenarios per timed round.
    pub passes_per_round: usize,
    pub scenarios_per_sec: Rates,
    /// Steps (proposals) per second at the median round.
    pub steps_per_sec: Option<f64>,
}

/// Phase 3: one generated-corpus size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingRow {
    pub count: usize,
    pub generate_seconds: f64,
    pub runnable: usize,
    pub rounds: usize,
    /// Passes over the runnable scenarios in one round.
    pub passes_per_round: usize,
    /// Median over the rounds of the seconds one pass over the runnable scenarios took.
    pub run_seconds: f64,
    /// Peak RSS once this size (and the smaller ones) had been generated.
    pub vm_hwm_kib: Option<u64>,
}

impl ScalingRow {
    pub fn generate_per_scenario(&self) -> Option<f64> {
        ratio(self.generate_seconds, self.count as f64)
    }

    pub fn run_per_scenario(&self) -> Option<f64> {
        ratio(self.run_seconds, self.runnable as f64)
    }
}

/// Phase 3: how time grows with the corpus size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub rows: Vec<ScalingRow>,
    /// Per-scenario generation cost at the largest size over the smallest.
    pub generate_growth: Option<f64>,
    /// Per-scenario run cost at the largest size over the smallest.
    pub run_growth: Option<f64>,
    /// Both growths within [1/LINEAR_TOLERANCE, LINEAR_TOLERANCE].
    pub linear: bool,
}

impl Scaling {
    pub fn of(rows: Vec<ScalingRow>) -> Scaling {
        let growth = |f: fn(&ScalingRow) -> Option<f64>| {
            let first = rows.first().and_then(f)?;
            let last = rows.last().and_then(f)?;
            ratio(last, first)
        };
        let generate_growth = growth(ScalingRow::generate_per_scenario);
        let run_growth = growth(ScalingRow::run_per_scenario);
        let within = |g: Option<f64>| {
            g.is_some_and(|g| (1.0 / LINEAR_TOLERANCE..=LINEAR_TOLERANCE).contains(&g))
        };
        Scaling {
            linear: rows.len() > 1 && within(generate_growth) && within(run_growth),
            rows,
            generate_growth,
            run_growth,
        }
    }
}

/// One pass of scenarios through the database-backed gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbRun {
    pub source: String,
    pub scenarios: usize,
    /// Scenarios running at once (the bench runs one).
    pub in_flight: usize,
    pub seconds: f64,
    pub scenarios_per_sec: Option<f64>,
    pub passed: usize,
    /// Per-scenario wall time, median, 90th percentile and largest (seconds;
    /// only for a run with one in flight).
    pub p50_seconds: Option<f64>,
    pub p90_seconds: Option<f64>,
    pub max_seconds: Option<f64>,
}

/// A distribution of timings in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub p90: Option<f64>,
}

impl Timing {
    pub fn of(sample: &[f64]) -> Timing {
        Timing {
            mean: (!sample.is_empty()).then(|| sample.iter().sum::<f64>() / sample.len() as f64),
            median: median(sample),
            p90: super::stats::percentile(sample, 90.0),
        }
    }
}

/// What a scenario costs before its first step and after its last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbOverhead {
    pub samples: usize,
    /// `gate::db::fresh_database`: admin pool, template check, a spare claimed
    /// (or CREATE DATABASE .. TEMPLATE), pool.
    pub fresh_database: Timing,
    /// `Gate::new` and `Gate::seed` of the standard world.
    pub seed: Timing,
    /// `FreshDatabase::drop`: pool close, then emptied and shelved as a spare
    /// (or DROP DATABASE .. WITH (FORCE)).
    pub drop: Timing,
    /// The bare statements on one open connection, for comparison.
    pub bare_create: Timing,
    /// `CREATE DATABASE .. TEMPLATE .. STRATEGY FILE_COPY` (Postgres 15 or later).
    pub bare_create_file_copy: Timing,
    pub bare_drop: Timing,
    /// The pool's reset (`bench::pool`: DELETEs in foreign-key order, one transaction) of a seeded
    /// database: what resetting a reused database would cost instead.
    pub pool_reset: Timing,
    /// fresh_database + seed + drop, mean per scenario.
    pub per_scenario_mean: Option<f64>,
    /// That times the corpus size, over the sequential corpus run's time.
    pub share_of_corpus: Option<f64>,
}

/// Some of a run's scenarios and the seconds they took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subset {
    pub scenarios: usize,
    pub seconds: f64,
}

/// Phase 4: the database-backed gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Database {
    /// `harness bench`'s default `--jobs`: scenarios at a time.
    pub bench_jobs: usize,
    /// The committed corpus, one at a time first, then with more at a time.
    pub corpus_runs: Vec<DbRun>,
    /// The one-at-a-time run's scenarios that the pure engine also runs, for
    /// a like-for-like ratio.
    pub corpus_pure_subset: Option<Subset>,
    /// Generated scenarios, `bench_jobs` at a time.
    pub generated: Option<DbRun>,
    /// How many generated scenarios there were to sample from.
    pub generated_of: usize,
    pub overhead: Option<DbOverhead>,
    pub goal_seconds: f64,
    /// The goal for the whole generated corpus (judged only when all
    /// `generated_of` ran: a sample is never extrapolated into a verdict).
    pub generated_goal_seconds: f64,
}

impl Database {
    /// The corpus run made as `harness bench` makes it by default.
    pub fn as_bench(&self) -> Option<&DbRun> {
        self.corpus_runs
            .iter()
            .find(|r| r.in_flight == self.bench_jobs)
    }

    /// The generated run when it ran every generated scenario, not a sample.
    pub fn generated_whole(&self) -> Option<&DbRun> {
        self.generated
            .as_ref()
            .filter(|g| g.scenarios >= self.generated_of)
    }

    /// The corpus run with one scenario at a time.
    pub fn one_at_a_time(&self) -> Option<&DbRun> {
        self.corpus_runs.iter().find(|r| r.in_flight == 1)
    }
}

/// Phase 5: memory after a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryMark {
    pub phase: String,
    pub vm_hwm_kib: Option<u64>,
    pub vm_rss_kib: Option<u64>,
}
