//! `harness triage`: the guided tour.
//!
//! Each step makes its point with real calls and prints what they returned;
//! nothing shown is a canned string. The first step needs no database and no
//! credentials.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use gate::provider::InProcessProvider;
use gate::redact::AgentView;
use gate::{Decision, Inputs, PurchaseProposal, evaluate, parse_proposal};
use serde_json::{Value, json};
use tabled::builder::Builder;
use tabled::settings::peaker::PriorityMax;
use tabled::settings::{Style, Width};

use crate::bench::database::DatabaseEngine;
use crate::bench::results::{Confusion, Summary};
use crate::bench::{heldout_ids, run_with};
use crate::naive_tool::{injected_model_output, naive_purchase};
use crate::report::markdown::{frac, pct};
use crate::world::StandardWorld;

mod delegation_tour;
mod mandate_step;
mod receipt_step;
mod wire_step;

/// The widest line the tour prints.
pub const COLUMNS: usize = 80;

/// Prints the formatted text with every line wrapped at [`COLUMNS`].
macro_rules! say {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        for line in $crate::triage::wrap(&format!($($arg)*), $crate::triage::COLUMNS) {
            println!("{line}");
        }
    };
}
pub(crate) use say;

/// `text`'s lines wrapped at `width` columns: at spaces where it can, inside
/// a word longer than a line where it must. A wrapped line's continuations
/// keep its indentation.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.split('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if line.chars().count() <= width {
            out.push(line.to_owned());
            continue;
        }
        let more = " ".repeat(indent.min(width / 2));
        let mut current = " ".repeat(indent);
        let mut fresh = true;
        for word in line[indent..].split(' ') {
            let used = current.chars().count();
            let needed = word.chars().count() + usize::from(!fresh);
            if !fresh && used + needed > width {
                out.push(std::mem::replace(&mut current, more.clone()));
                fresh = true;
            }
            if !fresh {
                current.push(' ');
            }
            for c in word.chars() {
                if current.chars().count() >= width {
                    out.push(std::mem::replace(&mut current, more.clone()));
                }
                current.push(c);
            }
            fresh = false;
        }
        out.push(current);
    }
    out
}

/// Walk through what the gate stops and how it is proven.
#[derive(Debug, Args)]
pub struct TriageArgs {
    /// Run only the steps that need no database (the first step). Without it,
    /// the database steps use DATABASE_URL, or start a throwaway Postgres.
    #[arg(long)]
    pub no_db: bool,
}

pub fn run(args: TriageArgs) -> Result<ExitCode> {
    let runtime = crate::bench::runtime()?;
    runtime.block_on(async {
        say!("spendgate triage: a guided tour (no credentials needed)\n");
        baseline_step().await
    })?;
    if args.no_db {
        say!("\n(--no-db: the database steps were skipped)");
        return Ok(ExitCode::SUCCESS);
    }
    let db = runtime.block_on(crate::db::Server::open("the database steps"))?;
    let result = runtime
        .block_on(database_steps(&db.url))
        .and_then(|()| mutation_step(&db.url))
        .and_then(|()| runtime.block_on(receipt_step::receipt_step(&db.url)));
    db.close();
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Step 5: three guards deleted live by the mutation runner.
fn mutation_step(url: &str) -> Result<()> {
    say!("\nStep 5 · delete a guard, and a named test must fail");
    say!(
        "  (the mutation runner copies the workspace and builds it: a minute or more the first time)"
    );
    let text = crate::mutate::tour::mutation_tour_with(Some(url))?;
    for line in text.lines() {
        say!("  {line}");
    }
    say!("  every registered guard: reports/mutations.md (make mutation-report regenerates it)");
    say!(
        "  {}",
        crate::mutants_audit::headline_from("reports/outside-mutants.json".as_ref())
    );
    Ok(())
}

async fn database_steps(url: &str) -> Result<()> {
    say!("\nStep 2 · a delegation chain, held by the database");
    let db = gate::db::fresh_database(url).await?;
    let report = delegation_tour::delegation_tour(db.pool()).await;
    db.drop().await?;
    for line in report?.to_string().lines() {
        say!("  {line}");
    }

    wire_step::wire_step(url).await?;
    mandate_step::mandate_step(url).await?;

    say!("\nStep 4 · the adversarial corpus through the gate");
    let corpus = scenarios::Corpus::load(scenarios::project_dir());
    if !corpus.errors.is_empty() {
        bail!(
            "the committed corpus has {} refused entries",
            corpus.errors.len()
        );
    }
    let selected: Vec<&scenarios::Scenario> = corpus.scenarios.iter().collect();
    let heldout = heldout_ids(&corpus.root);
    let engine = DatabaseEngine::start(url).await?;
    say!(
        "  running {} scenarios, each in a fresh database ...",
        selected.len()
    );
    let results = run_with(&corpus, &selected, &heldout, Some(engine), 8, false).await?;
    let s = Summary::of(&results);
    let c = Confusion::of(&results);
    say!(
        "  {} scenarios: {} attacks, {} legitimate ({} held out of tuning)",
        results.len(),
        s.attacks.total,
        s.legit.total,
        results.iter().filter(|r| r.heldout).count()
    );
    say!(
        "  attacks blocked {}, for the expected reason {}; legitimate passed {}",
        frac(s.attacks.blocked, s.attacks.total),
        frac(s.attacks.blocked_expected_reason, s.attacks.total),
        frac(s.legit.passed, s.legit.total)
    );
    say!(
        "  precision {}, recall {}",
        pct(c.precision()),
        pct(c.recall())
    );
    for r in results.iter().filter(|r| !r.passed) {
        say!("  FAILED {}: {}", r.id, r.failures.join("; "));
    }
    say!(
        "  full report: reports/benchmark.md, reports/attack-matrix.md (make reports regenerates them)"
    );
    Ok(())
}

/// What one side of the comparison did with one model output.
pub struct Outcome {
    pub naive: String,
    pub gate: String,
    pub gate_decision: Decision,
    pub naive_paid_to: String,
    pub naive_paid_paise: i64,
}

/// Hands the same model output to the naive tool and to the gate.
pub async fn compare(world: &StandardWorld, output: &Value) -> Result<Outcome> {
    let provider = InProcessProvider::new();
    let order = naive_purchase(&provider, &world.catalog, output).await?;
    let naive = format!(
        "paid {} paise to {} ({}, captured)",
        order.amount_paise, order.merchant, order.id
    );
    let raw = serde_json::to_vec(output)?;
    let decision = match parse_proposal(&raw) {
        Err(reason) => Decision::Deny(reason),
        Ok(proposal) => decide(world, &proposal),
    };
    let view = AgentView::of(decision);
    let gate = match view.reason {
        Some(reason) => format!("{} {reason}; no order, nothing paid", view.decision),
        None => view.decision.to_string(),
    };
    Ok(Outcome {
        naive,
        gate,
        gate_decision: decision,
        naive_paid_paise: provider.captured_to(&order.merchant),
        naive_paid_to: order.merchant,
    })
}

fn decide(world: &StandardWorld, proposal: &PurchaseProposal) -> Decision {
    evaluate(&Inputs {
        actor: "buyer-agent",
        proposal,
        catalog: &world.catalog,
        policy: &world.policy,
        chain: &world.buyer_chain,
        spend: &gate::SpendState::default(),
        now: world.now,
    })
    .decision
}

async fn baseline_step() -> Result<()> {
    let world = StandardWorld::load()?;
    let runner = world
        .catalog
        .get("RUNNER-PRO")
        .context("the standard world has no RUNNER-PRO")?;
    say!("Step 1 · the unguarded baseline (no database)");
    say!("  The supplier wrote RUNNER-PRO's catalog description:");
    say!("    {:?}", runner.description);
    let loud = injected_model_output("RUNNER-PRO", &runner.description);
    let quiet =
        json!({"sku": "RUNNER-PRO", "quantity": loud["quantity"], "purpose": loud["purpose"]});
    for (title, output) in [
        ("the model obeys the note", &loud),
        ("the quieter variant: only the quantity", &quiet),
    ] {
        let outcome = compare(&world, output).await?;
        say!("\n  {title}; the model emits:\n    {output}\n");
        let mut table = Builder::default();
        table.push_record([
            "",
            "naive tool (takes amount, merchant)",
            "spendgate (takes sku, quantity, purpose)",
        ]);
        table.push_record(["result", outcome.naive.as_str(), outcome.gate.as_str()]);
        let moved = format!(
            "{} paise to {}",
            outcome.naive_paid_paise, outcome.naive_paid_to
        );
        table.push_record(["money moved", moved.as_str(), "0 paise"]);
        let table = table
            .build()
            .with(Style::rounded())
            .with(
                Width::wrap(COLUMNS - 4)
                    .keep_words(true)
                    .priority(PriorityMax::new(true)),
            )
            .to_string();
        for line in table.lines() {
            say!("    {line}");
        }
        if !matches!(outcome.gate_decision, Decision::Deny(_)) {
            bail!(
                "the gate did not refuse the injected output: {}",
                outcome.gate
            );
        }
    }
    say!(
        "\n  The naive tool lets the model name the payee and the amount. spendgate accepts only {{sku, quantity, purpose}} and derives the rest from the catalog, the policy and the delegation."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gate::Reason;

    #[test]
    fn wrapped_lines_fit_and_keep_their_indentation_and_words() {
        let text = format!(
            "  {} {}\nshort\n    {}",
            "word ".repeat(30),
            "x".repeat(200),
            "y".repeat(10)
        );
        let lines = wrap(&text, COLUMNS);
        assert!(
            lines.iter().all(|l| l.chars().count() <= COLUMNS),
            "{lines:#?}"
        );
        assert!(lines[0].starts_with("  word") && lines[1].starts_with("  w"));
        assert!(lines.contains(&"short".to_owned()));
        assert!(lines.contains(&format!("    {}", "y".repeat(10))));
        let words: String = lines.concat().split_whitespace().collect();
        let expected: String = text.split_whitespace().collect();
        assert_eq!(words, expected, "a character was lost or added");
    }

    #[tokio::test]
    async fn the_gate_refuses_what_the_naive_tool_pays() {
        let world = StandardWorld::load().unwrap();
        let runner = world.catalog.get("RUNNER-PRO").unwrap();
        let loud = injected_model_output("RUNNER-PRO", &runner.description);
        let outcome = compare(&world, &loud).await.unwrap();
        assert_eq!(
            (outcome.naive_paid_to.as_str(), outcome.naive_paid_paise),
            ("attacker-llc", 2_000_000)
        );
        assert_eq!(
            outcome.gate_decision,
            Decision::Deny(Reason::ProposalUnknownField)
        );

        let quiet = json!({"sku": "RUNNER-PRO", "quantity": 50, "purpose": "runner credits"});
        let outcome = compare(&world, &quiet).await.unwrap();
        assert_eq!(
            (outcome.naive_paid_to.as_str(), outcome.naive_paid_paise),
            ("cloudco", 2_500_000)
        );
        assert_eq!(
            outcome.gate_decision,
            Decision::Deny(Reason::QuantityExceedsMax)
        );
    }
}
