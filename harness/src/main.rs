//! `harness`: spendgate's one binary. A thin entry point: each subcommand
//! lives in its own module, which owns its arguments and its work.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod db;
mod generate;
mod keys;
mod ledger;
mod mcp;
mod mutants_audit;
mod mutate;
mod naive_tool;
mod perf;
mod progress;
mod reconcile;
mod report;
mod scenario_format;
mod serve;
mod triage;
mod workspace;
mod world;
mod yaml;

// triage.rs still names the tour by its old path.

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
    /// Verify the gate's ledger (one keyed hash chain per tenant), or print its heads as an anchor.
    Ledger(ledger::LedgerArgs),
    /// The guided tour: what an unguarded purchase tool does, and what the gate does instead.
    Triage(triage::TriageArgs),
    Mutate(mutate::MutateArgs),
    /// The outside mutation audit: cargo-mutants over `gate`, reports/outside-mutants.{md,json}.
    MutantsAudit(mutants_audit::MutantsAuditArgs),
    /// Measure the gate's speed and write reports/performance.md and .json.
    Perf(perf::PerfArgs),
    /// Serve the gate over HTTP (docs/http.md) until SIGTERM.
    Serve(serve::ServeArgs),
    /// Issue, list or revoke the bearer API keys of `serve`.
    Keys(keys::KeysArgs),
    /// The agent's MCP tools over stdio: a client of the service at
    /// SPENDGATE_URL, as the agent whose key is in SPENDGATE_AGENT_KEY.
    Mcp(mcp::McpArgs),
    /// Settle every PROVIDER_PENDING request (and kept capture) against the provider.
    Reconcile(reconcile::ReconcileArgs),
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
        Command::Ledger(args) => ledger::run(args),
        Command::Triage(args) => triage::run(args),
        Command::Mutate(args) => mutate::run(args),
        Command::MutantsAudit(args) => mutants_audit::run(args),
        Command::Perf(args) => perf::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Keys(args) => keys::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Reconcile(args) => reconcile::run(args),
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
