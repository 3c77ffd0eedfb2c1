//! Phase 2: scenarios per second through the pure engine, the committed
//! corpus and the generated one, run and judged as `harness bench` does.
//!
//! Guarantees: only the scenarios `bench::pure::eligible` accepts run (each
//! without its `ledger_intact` invariant: the pure engine keeps no ledger);
//! every round runs and judges them all.

use std::hint::black_box;
use std::path::Path;

use scenarios::{Corpus, Scenario, World};

use super::model::{PureRun, Rates};
use super::plan::Plan;
use super::stats::{rate, ratio, thousands};
use super::{Progress, timed};
use crate::bench::{judge, pure};

/// Runs and judges each scenario once; returns how many passed.
pub fn pure_pass(items: &[(&Scenario, &World)]) -> usize {
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

pub fn measure_corpus(corpus: &Corpus, path: &Path, plan: &Plan, progress: &Progress) -> PureRun {
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
pub fn pure_runnable(scenarios: &[Scenario]) -> Vec<Scenario> {
    scenarios
        .iter()
        .filter_map(|s| {
            let mut s = s.clone();
            s.invariants.ledger_intact = None;
            pure::eligible(&s).then_some(s)
        })
        .collect()
}

pub fn measure_generated(
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
