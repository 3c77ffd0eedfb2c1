//! `harness`: the proof's binary (the corpus, the mutation runner, the
//! reports, the benchmark, the tour, a throwaway Postgres). What an operator
//! runs is the `spendgate` binary. A thin entry point: each subcommand lives
//! in its own module, which owns its arguments and its work.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod db;
mod fake_razorpay;
mod generate;
mod mutants_audit;
mod mutate;
mod naive_tool;
mod perf;
mod progress;
mod report;
mod scenario_format;
mod triage;
mod workspace;
mod world;
mod yaml;

/// spendgate's command line: a throwaway Postgres, the guided triage tour,
/// the scenario benchmark, the mutation runner and the generated reports.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about, long_about = None, max_term_width = 80)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario corpus through the gate and write DIR/results.json.
    Bench(bench::BenchArgs),
    /// Write a seeded, generated corpus whose expectations come from the spec's oracle.
    Generate(generate::GenerateArgs),
    /// Regenerate the committed reports (benchmark, attack matrix), or check them.
    Report(report::ReportArgs),
    /// Start, stop or use a throwaway Postgres cluster (or the one DATABASE_URL names).
    Db(db::DbArgs),
    /// The guided tour: what an unguarded purchase tool does, and what the gate does instead.
    Triage(triage::TriageArgs),
    Mutate(mutate::MutateArgs),
    /// The outside mutation audit: cargo-mutants over `gate`, reports/outside-mutants.{md,json}.
    MutantsAudit(mutants_audit::MutantsAuditArgs),
    /// Measure the gate's speed and write reports/performance.md and .json.
    Perf(perf::PerfArgs),
    /// Serve the fake Razorpay Orders API on loopback until SIGTERM (for
    /// `spendgate serve` with provider = "razorpay" without Razorpay).
    FakeRazorpay(fake_razorpay::FakeRazorpayArgs),
    /// Write docs/scenario-format.md from the corpus loader's own tables (or --check it).
    ScenarioFormat(scenario_format::ScenarioFormatArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SPENDGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx=error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Db(args) => db::run(args),
        Command::Report(args) => report::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Triage(args) => triage::run(args),
        Command::Mutate(args) => mutate::run(args),
        Command::MutantsAudit(args) => mutants_audit::run(args),
        Command::Perf(args) => perf::run(args),
        Command::FakeRazorpay(args) => fake_razorpay::run(args),
        Command::ScenarioFormat(args) => scenario_format::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
