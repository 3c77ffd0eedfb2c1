//! The performance report: what one `harness perf` run measured, as JSON
//! (the struct, serialized) and as Markdown ([`render_markdown`]).
//!
//! Guarantees: the renderer is a pure function of the struct — no clock, no
//! file, no environment — so a fixed struct renders to fixed text. Every
//! figure that has a goal is printed next to it with whether it was met; a
//! figure that was not measured prints `n/a` or says why, never a zero.

use std::fmt::Write as _;

use serde::Serialize;

use super::machine::Machine;
use super::stats::{
    format_kib, format_rate, format_ratio, format_seconds, median, min_max, ratio, thousands,
};

/// The pure engine's goal: decisions per second on one core.
pub const DECISIONS_GOAL_PER_SEC: f64 = 200_000.0;
/// The database-backed gate's goal (issue 13): the whole committed corpus within this many seconds.
pub const DB_CORPUS_GOAL_SECS: f64 = 15.0;
/// How `make bench` runs `harness perf`.
pub const MAKE_BENCH: &str =
    "cargo run --release -q -p harness -- db run -- cargo run --release -q -p harness -- perf";
/// Per-scenario cost may drift this far (either way) from the smallest size
/// and still count as linear growth.
pub const LINEAR_TOLERANCE: f64 = 1.5;

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// Changes made for speed, before → after.
    pub history: Vec<super::load_report::HistoryEntry>,
    pub memory: Vec<MemoryMark>,
    /// Observations computed from the figures (where the time goes, caveats).
    pub notes: Vec<String>,
}

/// Rates measured in rounds, and their order statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

    fn range(&self) -> String {
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixEntry {
    pub body: String,
    /// What the engine decided, e.g. `allow`, `deny SKU_UNKNOWN`.
    pub decision: String,
}

/// Phase 1: decisions per second on one core.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DbOverhead {
    pub samples: usize,
    /// `gate::db::fresh_database`: admin pool, template check, CREATE DATABASE .. TEMPLATE, pool.
    pub fresh_database: Timing,
    /// `Gate::new` and `Gate::seed` of the standard world.
    pub seed: Timing,
    /// `FreshDatabase::drop`: pool close, DROP DATABASE .. WITH (FORCE).
    pub drop: Timing,
    /// The bare statements on one open connection, for comparison.
    pub bare_create: Timing,
    /// `CREATE DATABASE .. TEMPLATE .. STRATEGY FILE_COPY` (Postgres 15 or later).
    pub bare_create_file_copy: Timing,
    pub bare_drop: Timing,
    /// One `TRUNCATE .. RESTART IDENTITY CASCADE` of every table of a seeded
    /// database: what resetting a reused database would cost instead.
    pub truncate_reset: Timing,
    /// fresh_database + seed + drop, mean per scenario.
    pub per_scenario_mean: Option<f64>,
    /// That times the corpus size, over the sequential corpus run's time.
    pub share_of_corpus: Option<f64>,
}

/// Some of a run's scenarios and the seconds they took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Subset {
    pub scenarios: usize,
    pub seconds: f64,
}

/// Phase 4: the database-backed gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

impl Database {
    /// The corpus run made as `harness bench` makes it by default.
    pub fn as_bench(&self) -> Option<&DbRun> {
        self.corpus_runs
            .iter()
            .find(|r| r.in_flight == self.bench_jobs)
    }

    /// The corpus run with one scenario at a time.
    pub fn one_at_a_time(&self) -> Option<&DbRun> {
        self.corpus_runs.iter().find(|r| r.in_flight == 1)
    }
}

/// Phase 5: memory after a phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryMark {
    pub phase: String,
    pub vm_hwm_kib: Option<u64>,
    pub vm_rss_kib: Option<u64>,
}

fn rate_of(n: usize, seconds: f64) -> Option<f64> {
    super::stats::rate(n as u64, seconds)
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map(format_seconds).unwrap_or_else(|| "n/a".into())
}

fn yes_no(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

fn load(l: Option<[f64; 3]>) -> String {
    l.map(|[a, b, c]| format!("{a:.2} / {b:.2} / {c:.2}"))
        .unwrap_or_else(|| "n/a".into())
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("n/a")
}

fn pct(x: Option<f64>) -> String {
    crate::progress::pct_digits(x, 0)
}

/// The report as Markdown.
pub fn render_markdown(r: &Report) -> String {
    let mut md = String::new();
    let mut w = |s: String| md.push_str(&s);
    w("# Performance\n\n".into());
    w(format!(
        "Generated by `harness perf` ({}). A measurement, not a test: the figures \
         move from run to run on this shared machine, so every comparison below is \
         between figures taken side by side in this one run. Taken {}; the run took {}.\n\n",
        if r.quick { "quick run" } else { "full run" },
        r.taken_at,
        format_seconds(r.run_seconds)
    ));
    w(format!(
        "Command: `{}`. `make bench` runs it as `{MAKE_BENCH}` (a throwaway Postgres unless \
         `DATABASE_URL` is set).\n\n",
        r.command
    ));
    w(machine_section(r));
    w(summary_section(r));
    w(decisions_section(&r.decisions));
    w(pure_section(r));
    w(scaling_section(&r.scaling));
    w(database_section(r));
    w(super::load_report::section(
        r.load.as_ref(),
        r.load_skipped.as_deref(),
    ));
    w(super::http::section(
        r.http.as_ref(),
        r.http_skipped.as_deref(),
    ));
    w(memory_section(&r.memory));
    if !r.notes.is_empty() {
        w("## Notes\n\n".into());
        for n in &r.notes {
            w(format!("- {n}\n"));
        }
        w("\n".into());
    }
    md
}

fn machine_section(r: &Report) -> String {
    let m = &r.machine;
    let mut s = String::from("## Machine\n\n| fact | value |\n|---|---|\n");
    let _ = writeln!(
        s,
        "| `nproc` | {} |",
        m.nproc.map_or("n/a".into(), |n| n.to_string())
    );
    let _ = writeln!(s, "| CPU (/proc/cpuinfo) | {} |", opt(&m.cpu_model));
    let _ = writeln!(s, "| rustc | {} |", opt(&m.rustc));
    let _ = writeln!(s, "| harness build | {} |", m.profile);
    let _ = writeln!(s, "| Postgres | {} |", opt(&m.postgres));
    let _ = writeln!(
        s,
        "| load average 1/5/15 min, start | {} |",
        load(m.load_before)
    );
    let _ = writeln!(
        s,
        "| load average 1/5/15 min, end | {} |\n",
        load(m.load_after)
    );
    s
}

fn summary_section(r: &Report) -> String {
    let mut s =
        String::from("## Summary\n\n| measure | figure | goal | met |\n|---|---|---|---|\n");
    let d = &r.decisions;
    let eval = d.evaluate.median;
    let _ = writeln!(
        s,
        "| pure engine decisions, one core (`evaluate`) | {} | ≥ {} | {} |",
        format_rate(eval),
        format_rate(Some(d.goal_per_sec)),
        match eval {
            Some(e) => format!(
                "{} ({} the goal)",
                yes_no(e >= d.goal_per_sec),
                format_ratio(ratio(e, d.goal_per_sec))
            ),
            None => "n/a".into(),
        }
    );
    let pe = d.parse_and_evaluate.median;
    let _ = writeln!(
        s,
        "| raw bytes to decision, one core (`parse_proposal` + `evaluate`) | {} | ≥ {} | {} |",
        format_rate(pe),
        format_rate(Some(d.goal_per_sec)),
        pe.map_or("n/a", |p| yes_no(p >= d.goal_per_sec))
    );
    for p in [&r.pure_corpus, &r.pure_generated] {
        let _ = writeln!(
            s,
            "| pure engine scenarios, {} ({} run) | {} | — | — |",
            p.source,
            thousands(p.runnable as u64),
            format_rate(p.scenarios_per_sec.median)
        );
    }
    if let Some(db) = &r.database {
        for c in [db.as_bench(), db.one_at_a_time()].into_iter().flatten() {
            let _ = writeln!(
                s,
                "| database-backed gate, {} ({} scenarios) | {} ({}) | < {} | {} |",
                c.source,
                c.scenarios,
                format_seconds(c.seconds),
                format_rate(c.scenarios_per_sec),
                format_seconds(db.goal_seconds),
                yes_no(c.seconds < db.goal_seconds)
            );
        }
        if let Some(g) = &db.generated {
            let _ = writeln!(
                s,
                "| database-backed gate, {} | {} ({}) | — | — |",
                g.source,
                format_seconds(g.seconds),
                format_rate(g.scenarios_per_sec)
            );
        }
    } else {
        let _ = writeln!(
            s,
            "| database-backed gate | not measured: {} | < {} for the corpus | n/a |",
            opt(&r.database_skipped),
            format_seconds(DB_CORPUS_GOAL_SECS)
        );
    }
    let _ = writeln!(
        s,
        "| growth 1,000 → {} generated (pure) | {} | linear | {} |",
        r.scaling
            .rows
            .last()
            .map_or("n/a".into(), |l| thousands(l.count as u64)),
        if r.scaling.linear {
            "linear"
        } else {
            "not linear"
        },
        yes_no(r.scaling.linear)
    );
    let peak = r.memory.iter().filter_map(|m| m.vm_hwm_kib).max();
    if let Some(load) = &r.load {
        s.push_str(&super::load_report::goal_rows(load));
    }
    if let Some(h) = &r.http {
        s.push_str(&super::http::goal_rows(h));
    }
    let _ = writeln!(s, "| peak RSS (VmHWM) | {} | — | — |\n", format_kib(peak));
    s
}

fn decisions_section(d: &Decisions) -> String {
    let mut s = String::from("## 1. Decisions per second, pure engine, one core\n\n");
    let _ = writeln!(
        s,
        "One thread, the standard world's `acme` tenant, `buyer-agent` under `d-buyer`, \
         against a fixed spend state ({}). The {} proposals below are decided in turn; \
         {} warm-up decisions, then {} rounds of {} decisions for each path, the two \
         paths' rounds interleaved so that both see the same machine. Figures are the \
         median round (range: slowest – fastest round).\n",
        d.spend_state,
        d.mix.len(),
        thousands(d.warmup_iterations),
        d.rounds,
        thousands(d.iterations_per_round)
    );
    s.push_str("| path | decisions/s (median) | range | per decision | goal | met |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for (name, rates) in [
        ("`evaluate` (parsed beforehand)", &d.evaluate),
        (
            "`parse_proposal` + `evaluate` (raw bytes)",
            &d.parse_and_evaluate,
        ),
    ] {
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | ≥ {} | {} |",
            format_rate(rates.median),
            rates.range(),
            ms(rates.median.and_then(|m| ratio(1.0, m))),
            format_rate(Some(d.goal_per_sec)),
            rates.median.map_or("n/a", |m| yes_no(m >= d.goal_per_sec)),
        );
    }
    let _ = writeln!(
        s,
        "\nParsing the raw bytes makes a decision {} as expensive as evaluating a parsed proposal \
         (ratio of the medians).\n",
        format_ratio(
            d.evaluate
                .median
                .zip(d.parse_and_evaluate.median)
                .and_then(|(e, p)| ratio(e, p))
        )
    );
    s.push_str("| # | proposal (raw bytes) | decision |\n|---|---|---|\n");
    for (i, m) in d.mix.iter().enumerate() {
        let _ = writeln!(s, "| {} | `{}` | {} |", i + 1, m.body, m.decision);
    }
    s.push('\n');
    s
}

fn pure_section(r: &Report) -> String {
    let mut s = String::from("## 2. Scenarios per second, pure engine\n\n");
    s.push_str(
        "Each scenario is run by the bench's own pure driver (`bench::pure::run`) and judged \
         (`bench::judge::judge`), one thread. A round is one or more passes over the runnable \
         scenarios; the figure is the median round.\n\n",
    );
    s.push_str(
        "| corpus | scenarios | run on the pure engine | their steps | passed | generate | rounds × passes | scenarios/s (median) | range | steps/s |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for p in [&r.pure_corpus, &r.pure_generated] {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} × {} | {} | {} | {} |",
            p.source,
            thousands(p.scenarios as u64),
            thousands(p.runnable as u64),
            thousands(p.steps as u64),
            thousands(p.passed as u64),
            ms(p.generate_seconds),
            p.rounds,
            p.passes_per_round,
            format_rate(p.scenarios_per_sec.median),
            p.scenarios_per_sec.range(),
            format_rate(p.steps_per_sec),
        );
    }
    s.push('\n');
    s
}

fn scaling_section(sc: &Scaling) -> String {
    let mut s = String::from("## 3. Growth with the generated corpus size, pure engine\n\n");
    s.push_str(
        "Generation (`scenarios::generate::generate`, which also runs the oracle for every \
         expectation) and the pure-engine run are timed separately. Generation is the median of \
         up to three generations (one when a generation takes over a second). The runs are \
         timed in interleaved rounds, every size once per round, each size's round as many \
         passes as fill the round target; the figure is the median round's time for one pass. \
         Every size stays in memory until the rounds end, so peak RSS is cumulative.\n\n",
    );
    s.push_str(
        "| generated | generate | per scenario | run on the pure engine | run (median) | per scenario run | per-scenario run cost vs the smallest | peak RSS after |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    let base = sc.rows.first().and_then(ScalingRow::run_per_scenario);
    for row in &sc.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} ({} rounds × {}) | {} | {} | {} |",
            thousands(row.count as u64),
            format_seconds(row.generate_seconds),
            ms(row.generate_per_scenario()),
            thousands(row.runnable as u64),
            format_seconds(row.run_seconds),
            row.rounds,
            row.passes_per_round,
            ms(row.run_per_scenario()),
            format_ratio(
                row.run_per_scenario()
                    .zip(base)
                    .and_then(|(c, b)| ratio(c, b))
            ),
            format_kib(row.vm_hwm_kib),
        );
    }
    let _ = writeln!(
        s,
        "\nPer-scenario cost at the largest size over the smallest: generation {}, run {}. \
         **{}** (linear means both stay within {}× either way).\n",
        format_ratio(sc.generate_growth),
        format_ratio(sc.run_growth),
        if sc.linear {
            "Time grows linearly with the count"
        } else {
            "Time does not grow linearly with the count"
        },
        LINEAR_TOLERANCE
    );
    s
}

fn db_row(s: &mut String, run: &DbRun, goal: Option<f64>) {
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} | {} | {} / {} / {} | {} |",
        run.source,
        thousands(run.scenarios as u64),
        run.in_flight,
        format_seconds(run.seconds),
        format_rate(run.scenarios_per_sec),
        thousands(run.passed as u64),
        ms(run.p50_seconds),
        ms(run.p90_seconds),
        ms(run.max_seconds),
        match goal {
            Some(g) => format!("< {}: {}", format_seconds(g), yes_no(run.seconds < g)),
            None => "—".into(),
        }
    );
}

fn database_section(r: &Report) -> String {
    let mut s = String::from("## 4. Scenarios per second, database-backed gate\n\n");
    let Some(db) = &r.database else {
        let _ = writeln!(s, "Not measured: {}.\n", opt(&r.database_skipped));
        return s;
    };
    let _ = writeln!(
        s,
        "Every scenario runs in an empty migrated database of its own while it runs \
         (`bench::database::DatabaseEngine::run`: a database from the bench's pool, made once \
         per scenario in flight and emptied by one TRUNCATE transaction between scenarios \
         (`bench::pool`), the world seeded, every step through `gate::service::Gate`, the \
         invariants read, the database handed back) and is judged. The \
         one-at-a-time run calls that directly, one scenario after another, and times each; the \
         runs with more at a time go through `bench::run_with`, exactly as `harness bench --jobs N` \
         does (its default is {}), and are timed whole.\n",
        db.bench_jobs
    );
    s.push_str(
        "| run | scenarios | in flight | total | scenarios/s | passed | per scenario p50 / p90 / max | goal |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for run in &db.corpus_runs {
        db_row(&mut s, run, Some(db.goal_seconds));
    }
    if let Some(run) = &db.generated {
        db_row(&mut s, run, None);
    }
    s.push('\n');
    if let Some(g) = &db.generated
        && g.scenarios < db.generated_of
    {
        let _ = writeln!(
            s,
            "The generated run is a sample: the first {} of the {} generated scenarios (seed {}); \
             at the rate measured, all {} would take about {}.\n",
            thousands(g.scenarios as u64),
            thousands(db.generated_of as u64),
            r.seed,
            thousands(db.generated_of as u64),
            ms(g.scenarios_per_sec
                .and_then(|rate| ratio(db.generated_of as f64, rate)))
        );
    }
    if let (Some(one), Some(bench)) = (db.one_at_a_time(), db.as_bench())
        && bench.in_flight > 1
    {
        let _ = writeln!(
            s,
            "Side by side: {} at a time ran the corpus {} as fast as one at a time on these {} \
             CPUs.\n",
            bench.in_flight,
            format_ratio(ratio(one.seconds, bench.seconds)),
            r.machine.nproc.map_or("n/a".into(), |n| n.to_string())
        );
    }
    if let (Some(pure), Some(sub)) = (
        r.pure_corpus.scenarios_per_sec.median,
        &db.corpus_pure_subset,
    ) && let Some(dbr) = rate_of(sub.scenarios, sub.seconds)
    {
        let _ = writeln!(
            s,
            "Side by side on the same scenarios — the {} committed ones the pure engine runs too \
             — the database-backed gate ran {} ({} in all), the pure engine {}: {} as many per \
             second.\n",
            sub.scenarios,
            format_rate(Some(dbr)),
            format_seconds(sub.seconds),
            format_rate(Some(pure)),
            format_ratio(ratio(pure, dbr))
        );
    }
    if let Some(o) = &db.overhead {
        let _ = writeln!(
            s,
            "### Where a database scenario's time goes\n\n\
             Measured on {} samples taken between the corpus's scenarios, spread over the run \
             (their time is not counted in the corpus's). `fresh_database` opens an admin pool, \
             checks the template, clones it and opens a pool to the clone; the bare statements \
             are `CREATE DATABASE .. TEMPLATE` and `DROP DATABASE .. WITH (FORCE)` on one \
             connection kept open, and the same `CREATE` with `STRATEGY FILE_COPY` (the default \
             strategy since Postgres 15 is `WAL_LOG`, which writes the template's every page \
             to the WAL).\n",
            o.samples
        );
        s.push_str("| part | mean | median | p90 |\n|---|---|---|---|\n");
        for (name, t) in [
            ("`fresh_database`", &o.fresh_database),
            ("`Gate::new` + `seed` (standard world)", &o.seed),
            ("`FreshDatabase::drop`", &o.drop),
            ("bare `CREATE DATABASE .. TEMPLATE`", &o.bare_create),
            (
                "bare `CREATE DATABASE .. TEMPLATE .. STRATEGY FILE_COPY`",
                &o.bare_create_file_copy,
            ),
            ("bare `DROP DATABASE .. WITH (FORCE)`", &o.bare_drop),
            (
                "what the bench does instead: empty it (`bench::pool`, one TRUNCATE transaction)",
                &o.truncate_reset,
            ),
        ] {
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {} |",
                ms(t.mean),
                ms(t.median),
                ms(t.p90)
            );
        }
        let _ = writeln!(
            s,
            "\nA database made for every scenario would cost {} per scenario (mean: create, seed \
             and drop), {} of the one-at-a-time corpus run's time.\n",
            ms(o.per_scenario_mean),
            pct(o.share_of_corpus)
        );
        if let (Some(t), Some(seed), Some(all)) =
            (o.truncate_reset.mean, o.seed.mean, o.per_scenario_mean)
        {
            let _ = writeln!(
                s,
                "The bench reuses its databases instead (`bench::pool`): emptying one (one \
                 TRUNCATE transaction) and seeding it again costs about {} per scenario instead of \
                 {} ({} cheaper), measured side by side.\n",
                format_seconds(t + seed),
                format_seconds(all),
                format_ratio(ratio(all, t + seed))
            );
        }
    }
    s
}

fn memory_section(marks: &[MemoryMark]) -> String {
    let mut s = String::from(
        "## 6. Memory\n\nThis process's resident set from /proc/self/status after each phase. \
         VmHWM is the peak so far, so it never falls.\n\n\
         | after | peak RSS (VmHWM) | RSS now (VmRSS) |\n|---|---|---|\n",
    );
    for m in marks {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            m.phase,
            format_kib(m.vm_hwm_kib),
            format_kib(m.vm_rss_kib)
        );
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(v: &[f64]) -> Rates {
        Rates::of(v.to_vec())
    }

    fn row(count: usize, generate_seconds: f64, runnable: usize, run_seconds: f64) -> ScalingRow {
        ScalingRow {
            count,
            generate_seconds,
            runnable,
            rounds: 3,
            passes_per_round: 2,
            run_seconds,
            vm_hwm_kib: Some(10_240),
        }
    }

    fn fixed() -> Report {
        Report {
            taken_at: "2026-09-03T10:00:00Z".into(),
            command: "harness perf --quick".into(),
            quick: true,
            seed: 1,
            run_seconds: 42.0,
            machine: Machine {
                nproc: Some(2),
                cpu_model: Some("Test CPU".into()),
                rustc: Some("rustc 1.95.0".into()),
                profile: "release".into(),
                load_before: Some([1.0, 0.5, 0.25]),
                load_after: None,
                postgres: Some("16.4".into()),
            },
            decisions: Decisions {
                mix: vec![MixEntry {
                    body: r#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"x"}"#.into(),
                    decision: "allow".into(),
                }],
                spend_state: "nothing spent".into(),
                warmup_iterations: 1000,
                iterations_per_round: 100_000,
                rounds: 3,
                evaluate: rates(&[400_000.0, 500_000.0, 450_000.0]),
                parse_and_evaluate: rates(&[150_000.0, 180_000.0, 160_000.0]),
                goal_per_sec: DECISIONS_GOAL_PER_SEC,
            },
            pure_corpus: PureRun {
                source: "committed corpus".into(),
                scenarios: 285,
                runnable: 100,
                steps: 250,
                passed: 100,
                generate_seconds: None,
                rounds: 3,
                passes_per_round: 10,
                scenarios_per_sec: rates(&[50_000.0]),
                steps_per_sec: Some(125_000.0),
            },
            pure_generated: PureRun {
                source: "10,000 generated".into(),
                scenarios: 10_000,
                runnable: 6_000,
                steps: 12_000,
                passed: 6_000,
                generate_seconds: Some(2.0),
                rounds: 3,
                passes_per_round: 1,
                scenarios_per_sec: rates(&[60_000.0]),
                steps_per_sec: None,
            },
            scaling: Scaling::of(vec![
                row(1_000, 0.2, 600, 0.01),
                row(10_000, 2.2, 6_000, 0.11),
            ]),
            database: Some(Database {
                bench_jobs: 8,
                corpus_runs: vec![
                    DbRun {
                        source: "committed corpus, one at a time".into(),
                        scenarios: 285,
                        in_flight: 1,
                        seconds: 57.0,
                        scenarios_per_sec: Some(5.0),
                        passed: 285,
                        p50_seconds: Some(0.19),
                        p90_seconds: Some(0.25),
                        max_seconds: Some(1.5),
                    },
                    DbRun {
                        source: "committed corpus, 8 at a time".into(),
                        scenarios: 285,
                        in_flight: 8,
                        seconds: 28.5,
                        scenarios_per_sec: Some(10.0),
                        passed: 285,
                        p50_seconds: None,
                        p90_seconds: None,
                        max_seconds: None,
                    },
                ],
                corpus_pure_subset: Some(Subset {
                    scenarios: 80,
                    seconds: 16.0,
                }),
                generated: Some(DbRun {
                    source: "generated sample".into(),
                    scenarios: 100,
                    in_flight: 1,
                    seconds: 20.0,
                    scenarios_per_sec: Some(5.0),
                    passed: 99,
                    p50_seconds: None,
                    p90_seconds: None,
                    max_seconds: None,
                }),
                generated_of: 10_000,
                overhead: Some(DbOverhead {
                    samples: 10,
                    fresh_database: Timing::of(&[0.1, 0.1]),
                    seed: Timing::of(&[0.02]),
                    drop: Timing::of(&[0.03]),
                    bare_create: Timing::of(&[0.05]),
                    bare_create_file_copy: Timing::of(&[]),
                    bare_drop: Timing::of(&[0.02]),
                    truncate_reset: Timing::of(&[0.004]),
                    per_scenario_mean: Some(0.15),
                    share_of_corpus: Some(0.75),
                }),
                goal_seconds: DB_CORPUS_GOAL_SECS,
            }),
            database_skipped: None,
            http: None,
            http_skipped: None,
            load: None,
            load_skipped: Some("--db was not given".into()),
            history: Vec::new(),
            memory: vec![
                MemoryMark {
                    phase: "1. decisions".into(),
                    vm_hwm_kib: Some(8_192),
                    vm_rss_kib: Some(4_096),
                },
                MemoryMark {
                    phase: "3. scaling".into(),
                    vm_hwm_kib: Some(102_400),
                    vm_rss_kib: Some(20_480),
                },
            ],
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn renders_the_figures_with_their_goals() {
        let md = render_markdown(&fixed());
        assert!(md.starts_with("# Performance\n"));
        assert!(md.contains("Taken 2026-09-03T10:00:00Z; the run took 42.0 s."));
        assert!(md.contains(
            "Command: `harness perf --quick`. `make bench` runs it as `cargo run --release"
        ));
        assert!(md.contains("| `nproc` | 2 |"));
        assert!(md.contains("| CPU (/proc/cpuinfo) | Test CPU |"));
        assert!(md.contains("| load average 1/5/15 min, end | n/a |"));
        assert!(md.contains(
            "| pure engine decisions, one core (`evaluate`) | 450,000/s | ≥ 200,000/s | yes (2.25× the goal) |"
        ));
        assert!(md.contains("| raw bytes to decision, one core (`parse_proposal` + `evaluate`) | 160,000/s | ≥ 200,000/s | **no** |"));
        assert!(md.contains("| database-backed gate, committed corpus, one at a time (285 scenarios) | 57.0 s (5.0/s) | < 15.0 s | **no** |"));
        assert!(md.contains("| database-backed gate, committed corpus, 8 at a time (285 scenarios) | 28.5 s (10.0/s) | < 15.0 s | **no** |"));
        assert!(md.contains("| committed corpus, 8 at a time | 285 | 8 | 28.5 s | 10.0/s | 285 | n/a / n/a / n/a | < 15.0 s: **no** |"));
        assert!(
            md.contains(
                "8 at a time ran the corpus 2.00× as fast as one at a time on these 2 CPUs"
            )
        );
        assert!(md.contains(
            "| `evaluate` (parsed beforehand) | 450,000/s | 400,000 – 500,000/s | 2.22 µs |"
        ));
        assert!(md.contains("makes a decision 2.81× as expensive"));
        assert!(md.contains(
            "| 10,000 | 2.20 s | 220 µs | 6,000 | 110 ms (3 rounds × 2) | 18.3 µs | 1.10× | 10.0 MiB |"
        ));
        assert!(md.contains("**Time grows linearly with the count**"));
        assert!(md.contains("the first 100 of the 10,000 generated scenarios (seed 1)"));
        assert!(md.contains("all 10,000 would take about 2000 s"));
        assert!(md.contains("75% of the one-at-a-time corpus run's time"));
        assert!(
            md.contains("again costs about 24.0 ms per scenario instead of 150 ms (6.25× cheaper)")
        );
        assert!(md.contains(
            "the database-backed gate ran 5.0/s (16.0 s in all), the pure engine 50,000/s: 10,000× as many"
        ));
        assert!(md.contains(
            "| bare `CREATE DATABASE .. TEMPLATE .. STRATEGY FILE_COPY` | n/a | n/a | n/a |"
        ));
        assert!(md.contains("| peak RSS (VmHWM) | 100.0 MiB | — | — |"));
        assert!(md.contains("| 3. scaling | 100.0 MiB | 20.0 MiB |"));
        assert!(md.ends_with("- a note\n\n"));
        // The renderer is a pure function of the struct.
        assert_eq!(md, render_markdown(&fixed()));
    }

    #[test]
    fn a_skipped_database_phase_says_why_and_not_zero() {
        let mut r = fixed();
        r.database = None;
        r.database_skipped = Some("DATABASE_URL is not set".into());
        let md = render_markdown(&r);
        assert!(md.contains("| database-backed gate | not measured: DATABASE_URL is not set |"));
        assert!(md.contains("Not measured: DATABASE_URL is not set."));
        assert!(!md.contains("### Where a database scenario's time goes"));
    }

    #[test]
    fn growth_outside_the_tolerance_is_not_linear() {
        let s = Scaling::of(vec![
            row(1_000, 0.2, 600, 0.01),
            row(100_000, 20.0, 60_000, 3.0),
        ]);
        assert_eq!(s.run_growth, Some(3.0));
        assert!(!s.linear);
        assert!(!Scaling::of(vec![row(1_000, 0.2, 600, 0.01)]).linear);
        let md = render_markdown(&Report {
            scaling: s,
            ..fixed()
        });
        assert!(md.contains("**Time does not grow linearly with the count**"));
    }

    #[test]
    fn the_json_has_the_figures() {
        let json = serde_json::to_value(fixed()).unwrap();
        assert_eq!(json["decisions"]["evaluate"]["median"], 450_000.0);
        assert_eq!(json["database"]["corpus_runs"][0]["seconds"], 57.0);
        assert_eq!(json["scaling"]["linear"], true);
        assert_eq!(json["machine"]["nproc"], 2);
    }
}
