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
//!   port beside the in-process gate, so the wire's cost is a ratio; then a
//!   bounded slow-body attack on loopback beside the same probes without it
//!   ([`slow_body`]).
//! - A progress bar on a terminal, plain lines otherwise (stderr); the
//!   headline figures and the report paths on stdout.
//! - The changes made for speed are data (`docs/performance-history.yaml`,
//!   [`history`]), rendered into `performance-history.md` by every full run
//!   and by `--render-only`, which measures nothing and renders the report
//!   again from `performance.json`.
//!
//! Layout: this file orchestrates; [`plan`] holds the arguments and the plan,
//! one file per phase ([`decisions`], [`pure_engine`], [`growth`],
//! [`database`], [`load`], [`http`]), [`model`] the report's data,
//! [`history`] the changes made for speed,
//! [`findings`] the notes drawn from it, and [`render`] its Markdown, chart
//! and headline.

mod checkpoint_delay;
mod cpu;
mod database;
mod decisions;
mod findings;
mod growth;
mod history;
mod http;
mod load;
mod machine;
mod model;
mod plan;
mod pure_engine;
mod render;
mod slow_body;
mod statements;
mod stats;
mod unguarded;

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::{SecondsFormat, Utc};
use scenarios::{Corpus, Scenario};

use crate::progress;
use machine::{Machine, load_average, memory_kib};
use model::{MemoryMark, Report};
pub use plan::PerfArgs;
use plan::{GENERATED, Plan};

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
    let plan = load::LoadPlan {
        cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        clients: vec![1, 2, 4, 8, 16],
        cell: Duration::from_secs(args.cell_seconds.unwrap_or(if args.quick { 1 } else { 3 })),
        latency_clients: vec![1, 8],
        pool: args.pool,
        unguarded_clients: vec![1, 8],
        row_security_pairs: args.row_security_pairs,
        counter_trigger_pairs: args.counter_trigger_pairs,
    };
    let runtime = crate::bench::runtime_of(load::worker_threads(plan.cpus))?;
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

/// The wire phase: (figures, notes).
fn run_http(
    args: &PerfArgs,
    url: &str,
    progress: &Progress,
) -> Result<(http::HttpLoad, Vec<String>)> {
    progress.say("http: the service on loopback beside the in-process gate");
    let runtime = crate::bench::runtime_of(http::WORKERS)?;
    let plan = http::HttpPlan {
        clients: args
            .http_clients
            .iter()
            .copied()
            .filter(|&n| n > 0)
            .collect(),
        cell: Duration::from_secs(args.http_seconds.unwrap_or(if args.quick { 1 } else { 3 })),
        slow_body: Some(slow_body::SlowBodyPlan::bounded(
            args.slow_body_connections,
            args.slow_body_seconds
                .unwrap_or(if args.quick { 6 } else { 20 }),
        )),
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
    let md = render::http::section(Some(&h), None, "");
    let (path, json) = render::write_phase(&args.out, "performance-http", md, &notes, &h)?;
    for line in render::http::headline(&h) {
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
    let md = render::load::section(Some(&load), None);
    let (path, json) = render::write_phase(&args.out, "performance-load", md, &notes, &load)?;
    render::write_chart(&load, &args.out)?;
    render::headline::print_load(&load);
    println!("report: {} and {}", path.display(), json.display());
    Ok(ExitCode::SUCCESS)
}

/// `--render-only`: the report rendered again from its JSON, nothing measured.
fn run_render_only(args: &PerfArgs) -> Result<ExitCode> {
    let json = args.out.join("performance.json");
    let text = std::fs::read_to_string(&json)
        .with_context(|| format!("reading {} (a run of `harness perf`)", json.display()))?;
    let report: Report =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    let history = history::History::load(&args.history)?;
    let md = render::write_markdown(&report, &args.out)?;
    if let Some(load) = &report.load {
        render::write_chart(load, &args.out)?;
    }
    let page = render::write_history(&history, &args.out)?;
    println!(
        "rendered again from {}: {} and {}",
        json.display(),
        md.display(),
        page.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: PerfArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let taken_at = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let plan = Plan::of(&args);
    let progress = Progress;
    if args.render_only {
        return run_render_only(&args);
    }
    if args.load_only {
        return run_load_only(&args, &progress);
    }
    if args.http_only {
        return run_http_only(&args, &progress);
    }
    // Read before measuring, so that a history that does not parse stops the
    // run at once rather than after its minutes.
    let history = history::History::load(&args.history)?;
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
    let decisions = decisions::measure(&plan, &progress)?;
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
    let pure_corpus = pure_engine::measure_corpus(&corpus, &args.corpus, &plan, &progress);
    let (generated, generate_seconds) =
        timed(|| scenarios::generate::generate(args.seed, GENERATED));
    let pure_generated = pure_engine::measure_generated(
        &generated,
        generate_seconds,
        args.seed,
        plan.generated_rounds,
        &progress,
    );
    mark(&mut memory, "2. pure scenarios");

    progress.say("3/5 growth with the generated corpus size");
    let scaling = growth::measure(&plan, args.seed, &progress);
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
    notes.extend(findings::findings(
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
        memory,
        notes,
    };
    let (md, json) = render::write_report(&report, &args.out)?;
    if let Some(load) = &report.load {
        render::write_chart(load, &args.out)?;
    }
    let page = render::write_history(&history, &args.out)?;
    render::headline::print_headline(&report);
    println!(
        "report: {} and {} ({})",
        md.display(),
        json.display(),
        page.display()
    );
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
