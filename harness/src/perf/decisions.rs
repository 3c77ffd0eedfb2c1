//! Phase 1: decisions per second, `gate::evaluate` alone and
//! `gate::parse_proposal` + `evaluate`, over a fixed mix of the standard
//! catalog's kinds of outcome.
//!
//! Guarantees: the timed loops call the project's own functions on one
//! thread, after a warm-up; the mix and each entry's decision are recorded
//! beside the rates.

use std::hint::black_box;

use anyhow::Result;
use gate::{Decision, Inputs, PurchaseProposal, SpendState, evaluate, parse_proposal};

use super::model::{DECISIONS_GOAL_PER_SEC, Decisions, MixEntry, Rates};
use super::plan::Plan;
use super::stats::{rate, thousands};
use super::{Progress, timed};
use crate::world::StandardWorld;

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

pub fn measure(plan: &Plan, progress: &Progress) -> Result<Decisions> {
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
