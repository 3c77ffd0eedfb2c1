//! The headline on stdout: the figures a reader looks for first, one line
//! each, beside the paths of the written report.
//!
//! Guarantees: printed from the report's struct only (nothing is measured
//! here); a phase that was not measured says why.

use std::collections::BTreeMap;

use super::http;
use crate::perf::load;
use crate::perf::model::Report;
use crate::perf::stats::{self, format_rate, format_seconds, thousands};

pub fn print_headline(r: &Report) {
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
                let goal = if db.generated_whole().is_some() {
                    format!(
                        "goal ≤ {}: {}",
                        format_seconds(db.generated_goal_seconds),
                        if g.seconds <= db.generated_goal_seconds {
                            "met"
                        } else {
                            "not met"
                        }
                    )
                } else {
                    "a sample: the goal is for all of them".to_string()
                };
                println!(
                    "database-backed gate: {}: {} ({}; {goal})",
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

pub fn print_load(load: &load::Load) {
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
