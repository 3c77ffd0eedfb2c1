//! What `harness perf` is asked to do (its arguments) and how much of
//! everything that makes (the plan: iterations, rounds, sizes).
//!
//! Guarantees: [`Plan::of`] depends only on the arguments; `--quick` gives
//! the smaller plan, every explicit argument overrides its default.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// The generated corpus of phases 2 and 4.
pub const GENERATED: usize = 10_000;

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
    /// small generated sample on the database (100, not judged against the
    /// goal), no in-flight what-if.
    #[arg(long)]
    pub quick: bool,
    /// The generator's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many of the 10,000 generated scenarios to run through the
    /// database-backed gate (the first N) [default: all 10000, timed whole
    /// and judged against the goal; 100 with --quick]; 0 runs none. A
    /// smaller N is a sample: its time is shown, the goal is not judged.
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
    /// DIR/performance.svg (DATABASE_URL, or a throwaway Postgres). Before its
    /// first window it runs VACUUM in every database the migrations' owner
    /// owns on that server, and CHECKPOINT when the role may: give it a
    /// server of its own.
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
    /// Pairs of load cells of the purchase flow (tenant per client, 8
    /// clients) with the database's row-level security off and on,
    /// alternated; 0 runs none [default: 4].
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub row_security_pairs: usize,
    /// Pairs of load cells of the purchase flow (tenant per client, 8
    /// clients) with the counter triggers (`daily_spend_counts_requests`,
    /// `delegation_spend_counts_requests`, `provider_payment_carried_by_event`)
    /// disabled and enabled, alternated, for each trigger alone, the set
    /// the migrations enable, and all three; 0 runs none [default: 4].
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub counter_trigger_pairs: usize,
    /// Connections in the load phase's gate pool, never more than one per
    /// client of the largest count [default: 4 per CPU of this machine, the
    /// server's]. A cell with more clients than this queues them for a
    /// connection in the process, as a deployed gate with a pool sized for
    /// its server does.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pool: Option<u32>,
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
    /// Connections of the wire phase's slow-body attack (each declares a
    /// 60,000-byte body to POST /webhooks/razorpay and sends a byte a
    /// second; loopback only, at most 400); 0 skips the attack.
    #[arg(long, value_name = "N", default_value_t = 70)]
    pub slow_body_connections: usize,
    /// Seconds the slow-body attack lasts, at most 120, with quiet windows of
    /// half as long before and after it [default: 20; 6 with --quick].
    #[arg(long, value_name = "S")]
    pub slow_body_seconds: Option<u64>,
    /// The changes made for speed, rendered into DIR/performance-history.md.
    #[arg(long, value_name = "FILE", default_value = super::history::HISTORY_FILE)]
    pub history: PathBuf,
    /// Measure nothing: render DIR/performance.md, .svg and
    /// performance-history.md again from DIR/performance.json (left as it
    /// is) and the history file, after a change to either renderer or to
    /// the history.
    #[arg(long)]
    pub render_only: bool,
}

/// How much of everything to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub warmup: u64,
    pub iterations: u64,
    pub decision_rounds: usize,
    pub corpus_rounds: usize,
    /// A committed-corpus round lasts at least this long.
    pub corpus_round_target: Duration,
    pub generated_rounds: usize,
    pub sizes: Vec<usize>,
    pub scaling_rounds: usize,
    pub db_generated: usize,
    pub db_jobs: Vec<usize>,
    pub overhead_samples: usize,
}

impl Plan {
    pub fn of(args: &PerfArgs) -> Plan {
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
                db_generated: args.db_generated.unwrap_or(GENERATED),
                db_jobs: args.db_jobs.clone().unwrap_or_else(|| vec![2, 4]),
                overhead_samples: 40,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: PerfArgs,
    }

    fn plan(argv: &[&str]) -> Plan {
        let cli = Cli::try_parse_from(std::iter::once("perf").chain(argv.iter().copied())).unwrap();
        Plan::of(&cli.args)
    }

    #[test]
    fn a_full_run_times_every_generated_scenario_and_quick_stays_a_sample() {
        assert_eq!(plan(&[]).db_generated, GENERATED);
        assert_eq!(plan(&["--quick"]).db_generated, 100);
        assert_eq!(plan(&["--db-generated", "200"]).db_generated, 200);
        assert_eq!(plan(&["--quick", "--db-generated", "0"]).db_generated, 0);
    }

    #[test]
    fn a_pool_is_one_connection_or_more_and_absent_by_default() {
        let parse = |argv: &[&str]| {
            Cli::try_parse_from(std::iter::once("perf").chain(argv.iter().copied()))
                .map(|cli| cli.args.pool)
        };
        assert_eq!(parse(&[]).unwrap(), None);
        assert_eq!(parse(&["--pool", "4"]).unwrap(), Some(4));
        for bad in ["0", "-1", "four"] {
            assert!(parse(&["--pool", bad]).is_err(), "--pool {bad}");
        }
    }
}
