//! Phase 3: how the pure engine's cost grows with the generated corpus's
//! size.
//!
//! Guarantees: every size is generated from the same seed, and the runs are
//! timed in interleaved rounds (every size once per round), so all sizes see
//! the same machine.

use std::hint::black_box;

use scenarios::{Scenario, World};

use super::machine::memory_kib;
use super::model::{Scaling, ScalingRow};
use super::plan::Plan;
use super::pure_engine::{pure_pass, pure_runnable};
use super::stats::{self, thousands};
use super::{Progress, timed};

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
pub fn measure(plan: &Plan, seed: u64, progress: &Progress) -> Scaling {
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
