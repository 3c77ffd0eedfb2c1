//! `harness perf`: how fast the gate decides, measured in one run, written
//! to `reports/performance.md` and `reports/performance.json`.
//!
//! Guarantees:
//! - One process measures everything, phase after phase, so the ratios the
//!   report draws (parse vs evaluate, pure vs database, one size vs another)
//!   are between figures taken side by side on the same machine state.
//! - Timed work is the project's own code, called as `harness bench` calls
//!   it: `gate::evaluate` and `gate::parse_proposal`, `bench::pure::run`,
//!   `bench::database::DatabaseEngine::run` and `bench::judge::judge`.
//!   Nothing is asserted about time; the exit code says only whether the run
//!   completed (a goal that was missed is printed and written, not an error).
//! - The pure-engine phases run on one thread. The phases that need Postgres
//!   (database, load, wire) share one server: `DATABASE_URL`'s, or a
//!   throwaway one started for the run (`db::Server`, announced in one line
//!   on stderr and removed on exit). `--no-db` skips the database phase and
//!   the report says so.
//! - `--http` adds the wire phase ([`http`]): the service on a loopback
//!   port beside the in-process gate, so the wire's cost is a ratio.
//! - A progress bar on a terminal, plain lines otherwise (stderr); the
//!   headline figures and the report paths on stdout.

mod database;
mod http;
mod load;
mod load_report;
mod machine;
mod report;
mod stats;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::{SecondsFormat, Utc};
use clap::Args;
use gate::{Decision, Inputs, PurchaseProposal, SpendState, evaluate, parse_proposal};
use scenarios::{Corpus, Scenario, World};

use crate::bench::{judge, pure};
use crate::progress;
use crate::world::StandardWorld;
use machine::{Machine, load_average, memory_kib};
use report::{
    DECISIONS_GOAL_PER_SEC, Database, Decisions, MemoryMark, MixEntry, PureRun, Rates, Report,
    Scaling, ScalingRow, render_markdown,
};
use stats::{format_rate, format_seconds, rate, ratio, thousands};

/// The generated corpus of phases 2 and 4.
const GENERATED: usize = 10_000;

/// Measure the gate's speed and write DIR/performance.md and DIR/performance.json.
#[derive(Debug, Args)]
pub struct PerfArgs {
    /// The committed corpus: a file or folder, as `harness bench --corpus` takes.
    #[arg(long, default_value = "scenarios")]
    pub corpus: PathBuf,
    /// Where to write performance.md and performance.json.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// A smaller run: fewer iterations and rounds, growth up to 10,000, a
    /// small generated sample on the database, no in-flight what-if.
    #[arg(long)]
    pub quick: bool,
    /// The generator's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many of the 10,000 generated scenarios to run through the
    /// database-backed gate (the first N) [default: 1000; 100 with --quick];
    /// 0 runs none, 10000 runs them all.
    #[arg(long, value_name = "N")]
    pub db_generated: Option<usize>,
    /// More runs of the committed corpus on the database with N scenarios at
    /// a time, beside the one-at-a-time run and the run at `harness bench`'s
    /// default `--jobs` [default: 2,4; with --quick, none].
    #[arg(long, value_name = "N,..", value_delimiter = ',')]
    pub db_jobs: Option<Vec<usize>>,
    /// Skip the database phase.
    #[arg(long)]
    pub no_db: bool,
    /// Also run the load phase: pgbench and the gate through Postgres at
    /// 1, 2, 4, 8 and 16 clients, side by side, with latency percentiles and
    /// DIR/performance.svg (DATABASE_URL, or a throwaway Postgres).
    #[arg(long)]
    pub db: bool,
    /// Only the load phase (implies --db): writes DIR/performance-load.md,
    /// DIR/performance-load.json and DIR/performance.svg, and leaves
    /// performance.md alone (a quick look while tuning).
    #[arg(long)]
    pub load_only: bool,
    /// Seconds per load cell [default: 3; 1 with --quick].
    #[arg(long, value_name = "S")]
    pub cell_seconds: Option<u64>,
    /// Also run the wire phase: the HTTP service on a loopback port under N
    /// concurrent clients beside the in-process gate, propose and the full
    /// purchase, p50/p95/p99 and requests/s (DATABASE_URL, or a throwaway Postgres).
    #[arg(long)]
    pub http: bool,
    /// Only the wire phase (implies --http): writes DIR/performance-http.md
    /// and DIR/performance-http.json and leaves performance.md alone.
    #[arg(long)]
    pub http_only: bool,
    /// Client counts of the wire phase.
    #[arg(
        long,
        value_name = "N,..",
        value_delimiter = ',',
        default_value = "1,8"
    )]
    pub http_clients: Vec<usize>,
    /// Seconds per wire cell, at most [default: 3; 1 with --quick].
    #[arg(long, value_name = "T")]
    pub http_seconds: Option<u64>,
}

/// How much of everything to do.
#[derive(Debug, Clone)]
struct Plan {
    warmup: u64,
    iterations: u64,
    decision_rounds: usize,
    corpus_rounds: usize,
    /// A committed-corpus round lasts at least this long.
    corpus_round_target: Duration,
    generated_rounds: usize,
    sizes: Vec<usize>,
    scaling_rounds: usize,
    db_generated: usize,
    db_jobs: Vec<usize>,
    overhead_samples: usize,
}

impl Plan {
    fn of(args: &PerfArgs) -> Plan {
        if args.quick {
            Plan {
                warmup: 50_000,
                iterations: 200_000,
                decision_rounds: 3,
                corpus_rounds: 3,
                corpus_round_target: Duration::from_millis(100),
                generated_rounds: 3,
                sizes: vec![1_000, 10_000],
                scaling_rounds: 3,
                db_generated: args.db_generated.unwrap_or(100),
                db_jobs: args.db_jobs.clone().unwrap_or_default(),
                overhead_samples: 10,
            }
        } else {
            Plan {
                warmup: 200_000,
                iterations: 1_000_000,
                decision_rounds: 7,
                corpus_rounds: 7,
                corpus_round_target: Duration::from_millis(250),
                generated_rounds: 5,
                sizes: vec![1_000, 10_000, 100_000],
                scaling_rounds: 3,
                db_generated: args.db_generated.unwrap_or(1_000),
                db_jobs: args.db_jobs.clone().unwrap_or_else(|| vec![2, 4]),
                overhead_samples: 40,
            }
        }
    }
}

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
struct Progress;

impl Progress {
    fn say(&self, line: &str) {
        eprintln!("perf: {line}");
    }

    /// A bar of `len` steps; in plain mode a line at about every tenth.
    fn bar(&self, len: usize, name: &str) -> progress::Steps {
        progress::Steps::new("perf", len, name)
    }
}

/// The load phase: (figures, notes).
fn run_load(args: &PerfArgs, url: &str, progress: &Progress) -> Result<(load::Load, Vec<String>)> {
    progress.say("load: the gate through Postgres beside pgbench");
    let runtime = crate::bench::runtime()?;
    let plan = load::LoadPlan {
        clients: vec![1, 2, 4, 8, 16],
        cell: Duration::from_secs(args.cell_seconds.unwrap_or(if args.quick { 1 } else { 3 })),
        latency_clients: vec![1, 8],
    };
    let (load, mut notes) = runtime.block_on(load::measure(url, &plan, progress))?;
    notes.push(
        "Each tenant has a ledger head of its own (`ledger_head`, one row per tenant), so \
         tenants queue only on their own rows. Within one tenant, a proposal holds the \
         tenant's `daily_spend` row from reading the spend state to its commit: that is what \
         keeps velocity, the denial rate and the daily cap exact under concurrent twins, and \
         it is what serializes the one-tenant cells. With Postgres logging every statement \
         (2026-12-01, one load-only run), 47.2 s of the server's 84.4 s of statement time was \
         the wait for that row (4,444 locks, 10.6 ms mean); nothing else came near."
            .to_string(),
    );
    Ok((load, notes))
}

fn write_chart(load: &load::Load, out: &Path) -> Result<()> {
    let svg = out.join("performance.svg");
    let drawn = load_report::svg(load).map_err(|e| anyhow::anyhow!("drawing the chart: {e}"))?;
    std::fs::write(&svg, drawn).with_context(|| format!("could not write {}", svg.display()))?;
    println!("chart: {}", svg.display());
    Ok(())
}

/// The wire phase: (figures, notes).
fn run_http(
    args: &PerfArgs,
    url: &str,
    progress: &Progress,
) -> Result<(http::HttpLoad, Vec<String>)> {
    progress.say("http: the service on loopback beside the in-process gate");
    let runtime = crate::bench::runtime()?;
    let plan = http::HttpPlan {
        clients: args
            .http_clients
            .iter()
            .copied()
            .filter(|&n| n > 0)
            .collect(),
        cell: Duration::from_secs(args.http_seconds.unwrap_or(if args.quick { 1 } else { 3 })),
    };
    runtime.block_on(http::measure(url, &plan, progress))
}

/// The Postgres of the run: `DATABASE_URL`'s, or a throwaway one.
fn open_server() -> Result<crate::db::Server> {
    crate::bench::runtime()?.block_on(crate::db::Server::open("harness perf"))
}

/// `--http-only`: the wire phase alone, in files of its own.
fn run_http_only(args: &PerfArgs, progress: &Progress) -> Result<ExitCode> {
    let server = open_server()?;
    let (h, notes) = run_http(args, &server.url, progress)?;
    server.close();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("could not create {}", args.out.display()))?;
    let mut md = http::section(Some(&h), None);
    for n in &notes {
        md.push_str(&format!("- {n}\n"));
    }
    let path = args.out.join("performance-http.md");
    std::fs::write(&path, md).with_context(|| format!("could not write {}", path.display()))?;
    let json = args.out.join("performance-http.json");
    std::fs::write(&json, serde_json::to_string_pretty(&h)? + "\n")
        .with_context(|| format!("could not write {}", json.display()))?;
    for line in http::headline(&h) {
        println!("{line}");
    }
    println!("report: {} and {}", path.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

/// `--load-only`: the load phase alone, in files of its own.
fn run_load_only(args: &PerfArgs, progress: &Progress) -> Result<ExitCode> {
    let server = open_server()?;
    let (load, notes) = run_load(args, &server.url, progress)?;
    server.close();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("could not create {}", args.out.display()))?;
    let mut md = load_report::section(Some(&load), None);
    for n in &notes {
        md.push_str(&format!("- {n}\n"));
    }
    let path = args.out.join("performance-load.md");
    std::fs::write(&path, md).with_context(|| format!("could not write {}", path.display()))?;
    let json = args.out.join("performance-load.json");
    std::fs::write(&json, serde_json::to_string_pretty(&load)? + "\n")
        .with_context(|| format!("could not write {}", json.display()))?;
    write_chart(&load, &args.out)?;
    print_load(&load);
    println!("report: {} and {}", path.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: PerfArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let taken_at = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let plan = Plan::of(&args);
    let progress = Progress;
    if args.load_only {
        return run_load_only(&args, &progress);
    }
    if args.http_only {
        return run_http_only(&args, &progress);
    }
    let mut machine = Machine::read();
    if machine.profile == "debug" {
        progress.say("this is a debug build: the figures will be far below a release build's");
    }
    let server = if !args.no_db || args.db || args.http {
        Some(open_server()?)
    } else {
        None
    };
    let url = server.as_ref().map(|s| s.url.as_str());
    let mut memory = Vec::new();
    let mut notes = Vec::new();

    progress.say("1/5 decisions per second");
    let decisions = measure_decisions(&plan, &progress)?;
    mark(&mut memory, "1. decisions");

    progress.say("2/5 scenarios per second, pure engine");
    let corpus = Corpus::load(&args.corpus);
    if !corpus.errors.is_empty() {
        notes.push(format!(
            "The corpus loader refused {} entries of `{}`; they were not run.",
            corpus.errors.len(),
            args.corpus.display()
        ));
    }
    let pure_corpus = measure_pure_corpus(&corpus, &args.corpus, &plan, &progress);
    let (generated, generate_seconds) =
        timed(|| scenarios::generate::generate(args.seed, GENERATED));
    let pure_generated = measure_pure_generated(
        &generated,
        generate_seconds,
        args.seed,
        plan.generated_rounds,
        &progress,
    );
    mark(&mut memory, "2. pure scenarios");

    progress.say("3/5 growth with the generated corpus size");
    let scaling = measure_scaling(&plan, args.seed, &progress);
    mark(&mut memory, "3. growth");

    progress.say("4/5 database-backed gate");
    let (database, database_skipped) = match url.filter(|_| !args.no_db) {
        None => (None, Some("--no-db was given".to_string())),
        Some(url) => {
            let runtime = crate::bench::runtime()?;
            let sample: Vec<Scenario> = generated.iter().take(plan.db_generated).cloned().collect();
            let (db, db_notes) = runtime.block_on(database::measure(
                url,
                &corpus,
                &sample,
                args.seed,
                &plan,
                &progress,
                &mut machine,
            ))?;
            notes.extend(db_notes);
            (Some(db), None)
        }
    };
    drop(generated);
    mark(&mut memory, "4. database");

    let (load, load_skipped) = if let Some(url) = url.filter(|_| args.db) {
        let (load, load_notes) = run_load(&args, url, &progress)?;
        notes.extend(load_notes);
        (Some(load), None)
    } else {
        (None, Some("--db was not given".to_string()))
    };
    mark(&mut memory, "5. load");

    let (http, http_skipped) = if let Some(url) = url.filter(|_| args.http) {
        let (h, http_notes) = run_http(&args, url, &progress)?;
        notes.extend(http_notes);
        (Some(h), None)
    } else {
        (None, Some("--http was not given".to_string()))
    };
    mark(&mut memory, "5b. wire");
    if let Some(server) = server {
        server.close();
    }
    progress.say("5/5 memory: recorded after each phase");

    machine.load_after = load_average();
    notes.extend(findings(
        &pure_corpus,
        &pure_generated,
        database.as_ref(),
        &machine,
    ));
    let report = Report {
        taken_at,
        command: command_line(),
        quick: args.quick,
        seed: args.seed,
        run_seconds: started.elapsed().as_secs_f64(),
        machine,
        decisions,
        pure_corpus,
        pure_generated,
        scaling,
        database,
        database_skipped,
        load,
        load_skipped,
        http,
        http_skipped,
        history: load_report::HISTORY.to_vec(),
        memory,
        notes,
    };
    let (md, json) = write_report(&report, &args.out)?;
    if let Some(load) = &report.load {
        write_chart(load, &args.out)?;
    }
    print_headline(&report);
    println!("report: {} and {}", md.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

fn mark(memory: &mut Vec<MemoryMark>, phase: &str) {
    let (hwm, rss) = memory_kib();
    memory.push(MemoryMark {
        phase: phase.to_string(),
        vm_hwm_kib: hwm,
        vm_rss_kib: rss,
    });
}

/// The command line, with the binary named as it was run (relative to the
/// working folder when it sits below it).
fn command_line() -> String {
    let cwd = std::env::current_dir().ok();
    let mut args = std::env::args();
    let program = args.next().unwrap_or_else(|| "harness".into());
    let program = cwd
        .as_deref()
        .and_then(|c| Path::new(&program).strip_prefix(c).ok())
        .map(|p| p.display().to_string())
        .unwrap_or(program);
    std::iter::once(program)
        .chain(args)
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------- phase 1

/// The fixed mix: each of the standard catalog's kinds of outcome.
const MIX: [&str; 10] = [
    r#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"team cloud credits"}"#,
    r#"{"sku":"CLOUD-TEAM","quantity":1,"purpose":"team plan for the quarter"}"#,
    r#"{"sku":"GPU-HOUR","quantity":1,"purpose":"model training run"}"#,
    r#"{"sku":"USB-HUB","quantity":1,"purpose":"desk setup"}"#,
    r#"{"sku":"SNACK-BOX","quantity":4,"purpose":"offsite snacks"}"#,
    r#"{"sku":"CLOUD-USD","quantity":1,"purpose":"usd credits"}"#,
    r#"{"sku":"LEGACY-PLAN","quantity":1,"purpose":"old plan renewal"}"#,
    r#"{"sku":"RUNNER-PRO","quantity":2,"purpose":"ci runner credits"}"#,
    r#"{"sku":"NO-SUCH-SKU","quantity":1,"purpose":"hallucinated sku"}"#,
    r#"{"sku":"CLOUD-STARTER","quantity":3,"purpose":"over the max quantity"}"#,
];

fn describe(decision: Decision) -> String {
    match decision {
        Decision::Allow => "allow".into(),
        Decision::StepUp(r) => format!("step_up {}", r.code()),
        Decision::Deny(r) => format!("deny {}", r.code()),
    }
}

fn measure_decisions(plan: &Plan, progress: &Progress) -> Result<Decisions> {
    let world = StandardWorld::load()?;
    let actor = "buyer-agent";
    let now = world.now;
    // Earlier activity inside the windows, so the velocity and denial-rate
    // checks have events to count.
    let spend = SpendState {
        spent_today_paise: 100_000,
        proposals: (1..=8)
            .map(|m| now - chrono::Duration::minutes(m * 5))
            .collect(),
        denials: vec![now - chrono::Duration::minutes(12)],
    };
    let spend_state = format!(
        "{} paise spent today, {} earlier proposals and {} denial in the last hour",
        thousands(spend.spent_today_paise as u64),
        spend.proposals.len(),
        spend.denials.len()
    );
    let raws: Vec<&[u8]> = MIX.iter().map(|m| m.as_bytes()).collect();
    let parsed: Vec<PurchaseProposal> = raws
        .iter()
        .map(|r| parse_proposal(r).map_err(|e| anyhow::anyhow!("mix entry refused: {e:?}")))
        .collect::<Result<_>>()?;
    let decide = |p: &PurchaseProposal| {
        evaluate(&Inputs {
            actor,
            proposal: p,
            catalog: &world.catalog,
            policy: &world.policy,
            chain: &world.buyer_chain,
            spend: &spend,
            now,
        })
        .decision
    };
    let mix = MIX
        .iter()
        .zip(&parsed)
        .map(|(body, p)| MixEntry {
            body: (*body).to_string(),
            decision: describe(decide(p)),
        })
        .collect();
    let n = parsed.len();
    let evaluate_loop = |iterations: u64| {
        for i in 0..iterations {
            black_box(decide(black_box(&parsed[i as usize % n])));
        }
    };
    let parse_loop = |iterations: u64| {
        for i in 0..iterations {
            let raw = black_box(raws[i as usize % n]);
            black_box(match parse_proposal(raw) {
                Ok(p) => decide(&p),
                Err(r) => Decision::Deny(r),
            });
        }
    };
    evaluate_loop(plan.warmup);
    parse_loop(plan.warmup);
    let mut ticker = progress.bar(plan.decision_rounds * 2, "decision rounds");
    let (mut eval_rates, mut parse_rates) = (Vec::new(), Vec::new());
    for _ in 0..plan.decision_rounds {
        let ((), secs) = timed(|| evaluate_loop(plan.iterations));
        eval_rates.extend(rate(plan.iterations, secs));
        ticker.inc();
        let ((), secs) = timed(|| parse_loop(plan.iterations));
        parse_rates.extend(rate(plan.iterations, secs));
        ticker.inc();
    }
    ticker.finish();
    Ok(Decisions {
        mix,
        spend_state,
        warmup_iterations: plan.warmup,
        iterations_per_round: plan.iterations,
        rounds: plan.decision_rounds,
        evaluate: Rates::of(eval_rates),
        parse_and_evaluate: Rates::of(parse_rates),
        goal_per_sec: DECISIONS_GOAL_PER_SEC,
    })
}

// ---------------------------------------------------------------- phase 2

/// Runs and judges each scenario once; returns how many passed.
fn pure_pass(items: &[(&Scenario, &World)]) -> usize {
    items
        .iter()
        .filter(|(s, w)| {
            let run = pure::run(black_box(s), w);
            black_box(judge::judge(s, &run, "pure", false)).passed
        })
        .count()
}

/// Times `rounds` rounds of `passes` passes; scenarios per second per round.
fn pure_rounds(items: &[(&Scenario, &World)], rounds: usize, passes: usize) -> Vec<f64> {
    (0..rounds)
        .filter_map(|_| {
            let ((), secs) = timed(|| {
                for _ in 0..passes {
                    black_box(pure_pass(items));
                }
            });
            rate((items.len() * passes) as u64, secs)
        })
        .collect()
}

fn steps_of(items: &[(&Scenario, &World)]) -> usize {
    items.iter().map(|(s, _)| s.steps.len()).sum()
}

fn measure_pure_corpus(corpus: &Corpus, path: &Path, plan: &Plan, progress: &Progress) -> PureRun {
    let runnable: Vec<(Scenario, &World)> = pure_runnable(&corpus.scenarios)
        .into_iter()
        .filter_map(|s| corpus.worlds.get(&s.world).map(|w| (s, w)))
        .collect();
    let items: Vec<(&Scenario, &World)> = runnable.iter().map(|(s, w)| (s, *w)).collect();
    // The first (warm-up) pass also counts what passed and sizes the rounds.
    let (passed, secs) = timed(|| pure_pass(&items));
    let passes = if secs > 0.0 {
        ((plan.corpus_round_target.as_secs_f64() / secs).ceil() as usize).max(1)
    } else {
        1
    };
    let mut ticker = progress.bar(plan.corpus_rounds, "committed corpus rounds");
    let per_round: Vec<f64> = (0..plan.corpus_rounds)
        .flat_map(|_| {
            let r = pure_rounds(&items, 1, passes);
            ticker.inc();
            r
        })
        .collect();
    ticker.finish();
    let rates = Rates::of(per_round);
    let steps = steps_of(&items);
    PureRun {
        source: format!("committed corpus (`{}`)", path.display()),
        scenarios: corpus.scenarios.len(),
        runnable: items.len(),
        steps,
        passed,
        generate_seconds: None,
        rounds: plan.corpus_rounds,
        passes_per_round: passes,
        steps_per_sec: rates
            .median
            .and_then(|m| ratio(m * steps as f64, items.len() as f64)),
        scenarios_per_sec: rates,
    }
}

/// The scenarios the pure engine can run (`pure::eligible`), each without
/// its `ledger_intact` invariant: the pure engine keeps no ledger, and every
/// generated scenario carries `ledger_intact: true`.
fn pure_runnable(scenarios: &[Scenario]) -> Vec<Scenario> {
    scenarios
        .iter()
        .filter_map(|s| {
            let mut s = s.clone();
            s.invariants.ledger_intact = None;
            pure::eligible(&s).then_some(s)
        })
        .collect()
}

fn measure_pure_generated(
    generated: &[Scenario],
    generate_seconds: f64,
    seed: u64,
    rounds: usize,
    progress: &Progress,
) -> PureRun {
    let world = scenarios::generate::standard_world();
    let runnable = pure_runnable(generated);
    let items: Vec<(&Scenario, &World)> = runnable.iter().map(|s| (s, world)).collect();
    let passed = pure_pass(&items);
    let mut ticker = progress.bar(rounds, "generated corpus rounds");
    let per_round: Vec<f64> = (0..rounds)
        .flat_map(|_| {
            let r = pure_rounds(&items, 1, 1);
            ticker.inc();
            r
        })
        .collect();
    ticker.finish();
    let rates = Rates::of(per_round);
    let steps = steps_of(&items);
    PureRun {
        source: format!(
            "{} generated (seed {seed})",
            thousands(generated.len() as u64)
        ),
        scenarios: generated.len(),
        runnable: items.len(),
        steps,
        passed,
        generate_seconds: Some(generate_seconds),
        rounds,
        passes_per_round: 1,
        steps_per_sec: rates
            .median
            .and_then(|m| ratio(m * steps as f64, items.len() as f64)),
        scenarios_per_sec: rates,
    }
}

// ---------------------------------------------------------------- phase 3

/// One size of the growth table: the pure-runnable scenarios, how long
/// generation took (median) and how many passes make a round.
struct Size {
    count: usize,
    generate_seconds: f64,
    runnable: Vec<Scenario>,
    passes: usize,
    vm_hwm_kib: Option<u64>,
    run_seconds: Vec<f64>,
}

/// Generates each size (timed; repeated up to three times while one
/// generation takes under a second), then times the runs in interleaved
/// rounds — every size once per round — so that all sizes see the same
/// machine. A round of one size is as many passes as last the round target.
fn measure_scaling(plan: &Plan, seed: u64, progress: &Progress) -> Scaling {
    let world = scenarios::generate::standard_world();
    let mut sizes = Vec::new();
    for &count in &plan.sizes {
        progress.say(&format!("generating {}", thousands(count as u64)));
        let mut times = Vec::new();
        let mut runnable = Vec::new();
        while times.len() < plan.scaling_rounds
            && (times.is_empty() || times.iter().sum::<f64>() < 1.0)
        {
            let (generated, secs) = timed(|| scenarios::generate::generate(seed, count));
            times.push(secs);
            runnable = pure_runnable(&generated);
        }
        let items: Vec<(&Scenario, &World)> = runnable.iter().map(|s| (s, world)).collect();
        let (_, one_pass) = timed(|| pure_pass(&items));
        let passes = if one_pass > 0.0 {
            ((plan.corpus_round_target.as_secs_f64() / one_pass).ceil() as usize).max(1)
        } else {
            1
        };
        sizes.push(Size {
            count,
            generate_seconds: stats::median(&times).unwrap_or(0.0),
            runnable,
            passes,
            vm_hwm_kib: memory_kib().0,
            run_seconds: Vec::new(),
        });
    }
    let mut ticker = progress.bar(plan.scaling_rounds * sizes.len(), "growth rounds");
    for _ in 0..plan.scaling_rounds {
        for size in &mut sizes {
            let items: Vec<(&Scenario, &World)> =
                size.runnable.iter().map(|s| (s, world)).collect();
            let ((), secs) = timed(|| {
                for _ in 0..size.passes {
                    black_box(pure_pass(&items));
                }
            });
            size.run_seconds.push(secs / size.passes as f64);
            ticker.inc();
        }
    }
    ticker.finish();
    Scaling::of(
        sizes
            .into_iter()
            .map(|s| ScalingRow {
                count: s.count,
                generate_seconds: s.generate_seconds,
                runnable: s.runnable.len(),
                rounds: plan.scaling_rounds,
                passes_per_round: s.passes,
                run_seconds: stats::median(&s.run_seconds).unwrap_or(0.0),
                vm_hwm_kib: s.vm_hwm_kib,
            })
            .collect(),
    )
}

// ---------------------------------------------------------------- report

/// Observations drawn from the figures.
fn findings(
    pure_corpus: &PureRun,
    pure_generated: &PureRun,
    database: Option<&Database>,
    machine: &Machine,
) -> Vec<String> {
    let mut notes = vec![format!(
        "The pure engine ran the scenarios `bench::pure::eligible` accepts: {} of the {} \
         committed ones and {} of the {} generated ones (only `propose` steps); the rest need \
         the database. It keeps no ledger, so their `ledger_intact` invariant (which every \
         generated scenario carries) is left unchecked there.",
        pure_corpus.runnable,
        pure_corpus.scenarios,
        thousands(pure_generated.runnable as u64),
        thousands(pure_generated.scenarios as u64)
    )];
    if pure_generated.passed < pure_generated.runnable {
        notes.push(format!(
            "{} of the {} generated scenarios run on the pure engine did not meet the oracle's \
             expectations (see `harness bench` for which).",
            thousands((pure_generated.runnable - pure_generated.passed) as u64),
            thousands(pure_generated.runnable as u64)
        ));
    }
    if let Some(o) = database.and_then(|db| db.overhead.as_ref())
        && let (Some(share), Some(create)) = (o.share_of_corpus, o.bare_create.mean)
    {
        notes.push(format!(
            "A database made for each scenario would cost a lot: creating, seeding and \
             dropping one is about {:.0}% of a scenario's time one at a time, and `CREATE \
             DATABASE .. TEMPLATE` alone takes {} (mean) even on a connection kept open. The \
             bench therefore reuses its databases, emptied between scenarios (`bench::pool`); \
             `harness bench --shuffle SEED` and `harness/tests/bench_order.rs` show the results \
             do not depend on the order.",
            share * 100.0,
            format_seconds(create)
        ));
    }
    let busiest = [machine.load_before, machine.load_after]
        .into_iter()
        .flatten()
        .map(|l| l[0])
        .max_by(f64::total_cmp);
    if let (Some(n), Some(load)) = (machine.nproc, busiest)
        && load > n as f64 * 0.5
    {
        notes.push(format!(
            "The machine was busy (1-minute load up to {load:.2} on {n} CPUs at the start or end \
             of the run): other work shared the cores, so absolute figures are lower than on an \
             idle machine; the ratios, taken side by side, hold better."
        ));
    }
    notes
}

fn write_report(report: &Report, out: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let md = out.join("performance.md");
    let json = out.join("performance.json");
    std::fs::write(&md, render_markdown(report))
        .with_context(|| format!("could not write {}", md.display()))?;
    std::fs::write(&json, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("could not write {}", json.display()))?;
    Ok((md, json))
}

fn print_headline(r: &Report) {
    if let Some(h) = &r.http {
        for line in http::headline(h) {
            println!("{line}");
        }
    }
    println!(
        "decisions/s (one core): evaluate {}, parse + evaluate {} (goal {})",
        format_rate(r.decisions.evaluate.median),
        format_rate(r.decisions.parse_and_evaluate.median),
        format_rate(Some(r.decisions.goal_per_sec))
    );
    println!(
        "pure engine scenarios/s: committed corpus {}, {} {}",
        format_rate(r.pure_corpus.scenarios_per_sec.median),
        r.pure_generated.source,
        format_rate(r.pure_generated.scenarios_per_sec.median)
    );
    let growth: BTreeMap<usize, String> = r
        .scaling
        .rows
        .iter()
        .map(|row| {
            (
                row.count,
                row.run_per_scenario().map_or("n/a".into(), format_seconds),
            )
        })
        .collect();
    println!(
        "growth (pure, per scenario run): {}; linear: {}",
        growth
            .iter()
            .map(|(n, c)| format!("{} → {c}", thousands(*n as u64)))
            .collect::<Vec<_>>()
            .join(", "),
        r.scaling.linear
    );
    match &r.database {
        Some(db) => {
            for run in &db.corpus_runs {
                println!(
                    "database-backed gate: committed corpus, {} at a time: {} scenarios in {} ({}; goal < {})",
                    run.in_flight,
                    run.scenarios,
                    format_seconds(run.seconds),
                    format_rate(run.scenarios_per_sec),
                    format_seconds(db.goal_seconds)
                );
            }
            if let Some(g) = &db.generated {
                println!(
                    "database-backed gate: {}: {} ({})",
                    g.source,
                    format_seconds(g.seconds),
                    format_rate(g.scenarios_per_sec)
                );
            }
        }
        None => println!(
            "database-backed gate: not measured ({})",
            r.database_skipped.as_deref().unwrap_or("skipped")
        ),
    }
    if let Some(load) = &r.load {
        print_load(load);
    }
    println!(
        "peak RSS: {}",
        stats::format_kib(r.memory.iter().filter_map(|m| m.vm_hwm_kib).max())
    );
}

fn print_load(load: &load::Load) {
    {
        for row in &load.rows {
            let x = |c: &Option<load::Cell>| match (
                c.as_ref().and_then(|c| c.per_sec),
                row.pgbench_tps,
            ) {
                (Some(g), Some(p)) if p > 0.0 => {
                    format!("{} ({:.3}×)", format_rate(Some(g)), g / p)
                }
                (g, _) => format_rate(g),
            };
            println!(
                "load, {} clients: pgbench {}; propose one tenant {}, tenant per client {}; flow one tenant {}, tenant per client {}",
                row.clients,
                format_rate(row.pgbench_tps),
                x(&row.propose_one_tenant),
                x(&row.propose_tenant_per_client),
                x(&row.flow_one_tenant),
                x(&row.flow_tenant_per_client)
            );
        }
    }
}
