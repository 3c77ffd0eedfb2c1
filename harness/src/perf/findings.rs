//! The report's notes drawn from the figures: what the pure engine could not
//! run, what a database per scenario would cost, whether the machine was
//! busy.
//!
//! Guarantees: a pure function of the figures; a note appears only when
//! its figures were measured.

use super::machine::Machine;
use super::model::{Database, PureRun};
use super::stats::{format_seconds, thousands};

/// Observations drawn from the figures.
pub fn findings(
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
