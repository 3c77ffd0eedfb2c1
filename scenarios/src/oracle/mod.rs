//! The oracle: a small model of the spec's rules, written from
//! `shared/spec/scenarios.md` and NOT from the gate, that says what each step
//! of a scenario should come out as.
//! A `login` step (a statement past the gate) is outside the model: the
//! oracle's state stays as it was ([`StepOutcome::Outside`]).
//!
//! Guarantees: [`run`] is a pure, deterministic function of (world,
//! scenario): no clock, no randomness, no I/O. It follows the spec's
//! precedence list ("Which reason wins"), inclusive limits, per-agent
//! velocity and denial-rate windows (every recorded proposal counts, every
//! refusal counts), budgets reserved when a request becomes authorized (at
//! once on allow, at approval for a step-up, after re-evaluating the request
//! against the state of that moment) and released when the request ends
//! unpaid (the provider refused the order, or reconcile found none once the
//! authority had expired).
//! Where the spec leaves a choice open, the oracle makes the choice the
//! corpus README documents. The generator uses it to write expectations; a
//! test runs it over the hand-written corpus as a second, independent check
//! of the hand arithmetic.

mod chain;
mod envelope;
mod exec;
mod flow;
mod payments;
mod proposal;
mod provider;
mod rules;
mod state;

use std::collections::BTreeMap;

use gate_core::Reason;

use crate::expect::DecisionKind;
use crate::scenario::Scenario;
use crate::world::World;

pub use proposal::BODY_LIMIT_BYTES;

/// What one decision came out as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub decision: DecisionKind,
    pub reason: Option<Reason>,
}

impl Outcome {
    pub(crate) fn ok() -> Outcome {
        Outcome {
            decision: DecisionKind::Ok,
            reason: None,
        }
    }
    pub(crate) fn allow() -> Outcome {
        Outcome {
            decision: DecisionKind::Allow,
            reason: None,
        }
    }
    pub(crate) fn deny(reason: Reason) -> Outcome {
        Outcome {
            decision: DecisionKind::Deny,
            reason: Some(reason),
        }
    }
    pub(crate) fn step_up(reason: Reason) -> Outcome {
        Outcome {
            decision: DecisionKind::StepUp,
            reason: Some(reason),
        }
    }
}

/// What one step came out as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Any step but `concurrent`.
    Single(Outcome),
    /// A `concurrent` step: how many copies came out each way.
    Counts(BTreeMap<DecisionKind, u32>),
    /// A `login` step: a statement sent past the gate, outside the model.
    /// The oracle knows no schema, so it says nothing of whether a guard
    /// refused it, and models no write of it (exact when the statement is
    /// refused: a refused statement changes nothing; the spec's "a stolen
    /// database login moves no money" is what the corpus checks after it).
    Outside,
}

/// The invariants' observable values after the last step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Provider orders created, all tenants.
    pub provider_orders: u64,
    /// Money captured on the gate's books, all tenants.
    pub captured_paise: i64,
    /// Money the simulated provider captured.
    pub provider_captured_paise: i64,
    /// The default tenant's reservations for the current UTC day.
    pub spent_today_paise: i64,
    /// Each delegation's own reservations (not its children's allocations).
    pub delegation_spent_paise: BTreeMap<String, i64>,
}

/// The oracle's account of a whole scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub steps: Vec<StepOutcome>,
    pub observed: Observed,
}

/// A scenario the oracle cannot model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OracleError {
    #[error("world has no tenant")]
    EmptyWorld,
    #[error("step {step}: {message}")]
    Unsupported { step: usize, message: String },
}

/// Runs `scenario` in `world` and says what every step should come out as.
pub fn run(world: &World, scenario: &Scenario) -> Result<Trace, OracleError> {
    let mut state = state::State::new(world)?;
    let mut steps = Vec::with_capacity(scenario.steps.len());
    for (i, step) in scenario.steps.iter().enumerate() {
        // A wire-only step is refused by the service before the gate: it
        // moves nothing and expects nothing of the gate.
        if step.wire_only() {
            steps.push(StepOutcome::Single(Outcome::ok()));
            continue;
        }
        steps.push(exec::step(&mut state, scenario, i, step)?);
    }
    Ok(Trace {
        steps,
        observed: state.observed(),
    })
}
