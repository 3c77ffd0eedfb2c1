//! Phase 4: scenarios through the database-backed gate, exactly as
//! `harness bench` runs them, and where each scenario's time goes.
//!
//! Guarantees: every scenario is run by `bench::database::DatabaseEngine::run`
//! and judged by `bench::judge::judge`. The overhead samples (a fresh
//! database, seeding, dropping, and the bare statements) are taken between
//! the corpus's scenarios, spread over the whole run, so that they see the
//! same machine; their time is not counted in the corpus's. A failing sample
//! stops the sampling and is reported; it never loses the corpus run.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, FromArgMatches};
use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock, Seed};
use scenarios::{Corpus, Scenario, World};
use sqlx::{Connection, Executor, PgConnection};

use super::Progress;
use super::machine::Machine;
use super::model::{
    DB_CORPUS_GOAL_SECS, DB_GENERATED_GOAL_SECS, Database, DbOverhead, DbRun, Subset, Timing,
};
use super::plan::{GENERATED, Plan};
use super::stats::{self, percentile, rate, ratio, thousands};
use crate::bench::{database::DatabaseEngine, judge, pure};

/// Times the parts of a scenario that are not its steps, one sample at a time.
struct Sampler {
    admin_url: String,
    world: &'static World,
    seed: Seed,
    template: String,
    /// One connection kept open for the bare statements.
    conn: PgConnection,
    fresh: Vec<f64>,
    seeded: Vec<f64>,
    dropped: Vec<f64>,
    bare_create: Vec<f64>,
    bare_create_file_copy: Vec<f64>,
    bare_drop: Vec<f64>,
    resets: Vec<f64>,
    /// Why the pool's reset was not measured, if it was not.
    reset_refused: Option<String>,
    /// Why `STRATEGY FILE_COPY` was not measured, if it was not.
    file_copy_refused: Option<String>,
    /// Why sampling stopped early, if it did.
    stopped: Option<String>,
    counter: usize,
}

impl Sampler {
    async fn new(admin_url: &str) -> Result<Sampler> {
        let world = scenarios::generate::standard_world();
        Ok(Sampler {
            admin_url: admin_url.to_string(),
            world,
            seed: world.seed(),
            template: gate::db::template_name(),
            // The bare CREATE/DROP DATABASE samples need the owner (CREATEDB).
            conn: PgConnection::connect(&gate::db::server_urls(admin_url).await?.owner)
                .await
                .context("connecting as the database owner")?,
            fresh: Vec::new(),
            seeded: Vec::new(),
            dropped: Vec::new(),
            bare_create: Vec::new(),
            bare_create_file_copy: Vec::new(),
            bare_drop: Vec::new(),
            resets: Vec::new(),
            reset_refused: None,
            file_copy_refused: None,
            stopped: None,
            counter: 0,
        })
    }

    async fn sample(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        if let Err(e) = self.try_sample().await {
            self.stopped = Some(format!("{e:#}"));
        }
    }

    async fn try_sample(&mut self) -> Result<()> {
        let t = Instant::now();
        let db = gate::db::fresh_database(&self.admin_url).await?;
        self.fresh.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let gate = Gate::new(
            db.pool().clone(),
            InProcessProvider::new(),
            b"spendgate-perf-webhook-secret-0123456789".to_vec(),
            Arc::new(ManualClock::new(self.world.now)),
        )?;
        gate.seed(&self.seed).await?;
        self.seeded.push(t.elapsed().as_secs_f64());
        drop(gate);
        if self.reset_refused.is_none() {
            match crate::bench::pool::time_reset(&db).await {
                Ok(secs) => self.resets.push(secs),
                Err(why) => self.reset_refused = Some(why),
            }
        }
        let t = Instant::now();
        db.drop().await?;
        self.dropped.push(t.elapsed().as_secs_f64());

        let mut strategies = vec![("", false)];
        if self.file_copy_refused.is_none() {
            strategies.push((" STRATEGY FILE_COPY", true));
        }
        for (strategy, file_copy) in strategies {
            self.counter += 1;
            let name = format!("spendgate_perf_{}_{}", std::process::id(), self.counter);
            let t = Instant::now();
            let created = self
                .conn
                .execute(sqlx::AssertSqlSafe(format!(
                    r#"CREATE DATABASE "{name}" TEMPLATE "{}"{strategy}"#,
                    self.template
                )))
                .await;
            let secs = t.elapsed().as_secs_f64();
            match created {
                Ok(_) if file_copy => self.bare_create_file_copy.push(secs),
                Ok(_) => self.bare_create.push(secs),
                Err(e) if file_copy => {
                    self.file_copy_refused = Some(e.to_string());
                    continue;
                }
                Err(e) => return Err(e).context(format!("CREATE DATABASE {name}")),
            }
            let t = Instant::now();
            self.conn
                .execute(sqlx::AssertSqlSafe(format!(
                    r#"DROP DATABASE "{name}" WITH (FORCE)"#
                )))
                .await
                .with_context(|| format!("DROP DATABASE {name}"))?;
            if !file_copy {
                self.bare_drop.push(t.elapsed().as_secs_f64());
            }
        }
        Ok(())
    }

    fn finish(self, scenarios: usize, corpus_seconds: f64) -> (DbOverhead, Vec<String>) {
        let (fresh, seed, drop) = (
            Timing::of(&self.fresh),
            Timing::of(&self.seeded),
            Timing::of(&self.dropped),
        );
        let per_scenario_mean = match (fresh.mean, seed.mean, drop.mean) {
            (Some(a), Some(b), Some(c)) => Some(a + b + c),
            _ => None,
        };
        let mut notes = Vec::new();
        if let Some(why) = &self.stopped {
            notes.push(format!(
                "The database overhead sampling stopped after {} samples: {why}",
                self.fresh.len()
            ));
        }
        if let Some(why) = &self.reset_refused {
            notes.push(format!(
                "Emptying a seeded database as the bench's pool does was not measured: {why}"
            ));
        }
        if let Some(why) = &self.file_copy_refused {
            notes.push(format!(
                "`CREATE DATABASE .. STRATEGY FILE_COPY` was not measured: {why}"
            ));
        }
        let overhead = DbOverhead {
            samples: self.fresh.len(),
            fresh_database: fresh,
            seed,
            drop,
            bare_create: Timing::of(&self.bare_create),
            bare_create_file_copy: Timing::of(&self.bare_create_file_copy),
            bare_drop: Timing::of(&self.bare_drop),
            pool_reset: Timing::of(&self.resets),
            share_of_corpus: per_scenario_mean
                .and_then(|m| ratio(m * scenarios as f64, corpus_seconds)),
            per_scenario_mean,
        };
        (overhead, notes)
    }
}

/// Runs scenarios one at a time, as the bench does; with a sampler, takes
/// `samples` overhead samples spread evenly between them (not timed as the
/// corpus's). Returns the run and each scenario's seconds.
async fn sequential(
    engine: &DatabaseEngine,
    items: &[(&Scenario, &World)],
    source: String,
    progress: &Progress,
    mut sampler: Option<(&mut Sampler, usize)>,
) -> (DbRun, Vec<f64>) {
    let stride = match &sampler {
        Some((_, samples)) if *samples > 0 => (items.len() / samples).max(1),
        _ => usize::MAX,
    };
    let mut ticker = progress.bar(items.len(), &source);
    let mut latencies = Vec::with_capacity(items.len());
    let mut passed = 0;
    for (i, (s, w)) in items.iter().enumerate() {
        if i % stride == stride / 2
            && let Some((sampler, samples)) = sampler.as_mut()
            && sampler.fresh.len() < *samples
        {
            sampler.sample().await;
        }
        let t = Instant::now();
        // As the bench runs it: steps only the HTTP engine can send left out.
        let s = &crate::bench::without_wire_only(s);
        let run = engine.run(s, w).await;
        let result = judge::judge(s, &run, "database", false);
        latencies.push(t.elapsed().as_secs_f64());
        passed += usize::from(result.passed);
        ticker.inc();
    }
    ticker.finish();
    let seconds: f64 = latencies.iter().sum();
    let run = DbRun {
        source,
        scenarios: items.len(),
        in_flight: 1,
        seconds,
        scenarios_per_sec: rate(items.len() as u64, seconds),
        passed,
        p50_seconds: stats::median(&latencies),
        p90_seconds: percentile(&latencies, 90.0),
        max_seconds: stats::min_max(&latencies).map(|(_, hi)| hi),
    };
    (run, latencies)
}

/// The scenarios through `bench::run_with`, `jobs` at a time: exactly what
/// `harness bench --jobs N` does (including the pure engine's cross-check).
async fn as_bench(
    engine: &DatabaseEngine,
    corpus: &Corpus,
    selected: &[&Scenario],
    jobs: usize,
    source: String,
    progress: &Progress,
) -> Result<DbRun> {
    progress.say(&format!("{source}: {} scenarios", selected.len()));
    let start = Instant::now();
    let results = crate::bench::run_with(
        corpus,
        selected,
        &BTreeSet::new(),
        Some(engine.clone()),
        jobs,
        false,
    )
    .await?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(DbRun {
        source,
        scenarios: selected.len(),
        in_flight: jobs,
        seconds,
        scenarios_per_sec: rate(selected.len() as u64, seconds),
        passed: results.iter().filter(|r| r.passed).count(),
        p50_seconds: None,
        p90_seconds: None,
        max_seconds: None,
    })
}

/// `harness bench`'s default `--jobs`, read from its own argument definition.
pub(super) fn bench_default_jobs() -> Result<usize> {
    let command = crate::bench::BenchArgs::augment_args(clap::Command::new("bench"));
    let matches = command.try_get_matches_from(["bench"])?;
    Ok(crate::bench::BenchArgs::from_arg_matches(&matches)?.jobs)
}

async fn server_version(admin_url: &str) -> Option<String> {
    let mut conn = PgConnection::connect(admin_url).await.ok()?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    conn.close().await.ok();
    Some(version)
}

/// The whole database phase. Returns the figures and notes for the report.
pub(super) async fn measure(
    admin_url: &str,
    corpus: &Corpus,
    generated_sample: &[Scenario],
    seed: u64,
    plan: &Plan,
    progress: &Progress,
    machine: &mut Machine,
) -> Result<(Database, Vec<String>)> {
    machine.postgres = server_version(admin_url).await;
    // Starting the engine builds the migrated template if needed, outside the timing.
    let engine = DatabaseEngine::start(admin_url).await?;
    let items: Vec<(&Scenario, &World)> = corpus
        .scenarios
        .iter()
        .filter_map(|s| corpus.worlds.get(&s.world).map(|w| (s, w)))
        .collect();
    let mut sampler = Sampler::new(admin_url).await?;
    let (corpus_run, latencies) = sequential(
        &engine,
        &items,
        "committed corpus, one at a time (each in an emptied database from the pool)".into(),
        progress,
        Some((&mut sampler, plan.overhead_samples)),
    )
    .await;
    let (overhead, mut notes) = sampler.finish(corpus_run.scenarios, corpus_run.seconds);
    let subset: Vec<f64> = items
        .iter()
        .zip(&latencies)
        .filter(|((s, _), _)| pure::eligible(s))
        .map(|(_, l)| *l)
        .collect();
    let pure_subset = Subset {
        scenarios: subset.len(),
        seconds: subset.iter().sum(),
    };
    let bench_jobs = bench_default_jobs()?;
    let mut jobs: Vec<usize> = plan.db_jobs.iter().copied().filter(|j| *j > 1).collect();
    jobs.push(bench_jobs);
    jobs.sort_unstable();
    jobs.dedup();
    let selected: Vec<&Scenario> = items.iter().map(|(s, _)| *s).collect();
    let mut corpus_runs = vec![corpus_run.clone()];
    for j in jobs {
        let source = if j == bench_jobs {
            format!("committed corpus, {j} at a time (`harness bench` default `--jobs`)")
        } else {
            format!("committed corpus, {j} at a time")
        };
        corpus_runs.push(as_bench(&engine, corpus, &selected, j, source, progress).await?);
    }
    let generated = if generated_sample.is_empty() {
        None
    } else {
        let world = scenarios::generate::standard_world();
        let generated_corpus = Corpus {
            worlds: [("standard".to_string(), world.clone())].into(),
            ..Corpus::default()
        };
        let selected: Vec<&Scenario> = generated_sample.iter().collect();
        let what = if generated_sample.len() >= GENERATED {
            format!("{} generated (seed {seed})", thousands(GENERATED as u64))
        } else {
            format!(
                "generated sample: first {} of {} (seed {seed})",
                thousands(generated_sample.len() as u64),
                thousands(GENERATED as u64)
            )
        };
        Some(
            as_bench(
                &engine,
                &generated_corpus,
                &selected,
                bench_jobs,
                format!("{what}, {bench_jobs} at a time"),
                progress,
            )
            .await?,
        )
    };
    if corpus_run.passed < corpus_run.scenarios {
        notes.push(format!(
            "{} committed scenarios did not pass on the database-backed gate in this run \
             (their time is included; see `harness bench` for which).",
            corpus_run.scenarios - corpus_run.passed
        ));
    }
    Ok((
        Database {
            bench_jobs,
            corpus_runs,
            corpus_pure_subset: Some(pure_subset),
            generated,
            generated_of: GENERATED,
            overhead: (overhead.samples > 0).then_some(overhead),
            goal_seconds: DB_CORPUS_GOAL_SECS,
            generated_goal_seconds: DB_GENERATED_GOAL_SECS,
        },
        notes,
    ))
}
