//! What a run of one scenario observed: each step's outcome and the state
//! the invariants are checked against. Both engines report in these terms.

use std::collections::BTreeMap;

use gate::{Decision, Reason};
use scenarios::DecisionKind;

/// One step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// A decision (or an accepted non-decision step, `ok`) with its reason.
    Decided {
        kind: DecisionKind,
        reason: Option<Reason>,
    },
    /// The counts of a `concurrent` step.
    Counts(BTreeMap<DecisionKind, u32>),
    /// What a `login` statement came to.
    Login(LoginOutcome),
}

/// What the database did with a `login` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginOutcome {
    /// It ran: `rows` rows written (or returned).
    Written { rows: u64 },
    /// A guard refused it: the constraint or trigger its error names, or
    /// `privilege` (SQLSTATE 42501).
    Refused(String),
    /// Any other error of the database (its SQLSTATE and message): no
    /// guard's refusal, and no expectation's.
    Error(String),
}

impl LoginOutcome {
    /// How the corpus would write this outcome.
    pub fn describe(&self) -> String {
        match self {
            LoginOutcome::Written { rows } => format!("written ({rows} rows)"),
            LoginOutcome::Refused(guard) => format!("refused_by {guard}"),
            LoginOutcome::Error(text) => format!("error ({text})"),
        }
    }
}

impl StepOutcome {
    /// The reason of a decided step.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            StepOutcome::Decided { reason, .. } => *reason,
            StepOutcome::Counts(_) | StepOutcome::Login(_) => None,
        }
    }

    pub fn of(decision: Decision) -> Self {
        let kind = match decision {
            Decision::Allow => DecisionKind::Allow,
            Decision::StepUp(_) => DecisionKind::StepUp,
            Decision::Deny(_) => DecisionKind::Deny,
        };
        StepOutcome::Decided {
            kind,
            reason: decision.reason(),
        }
    }
}

/// The state after the last step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedState {
    pub provider_orders: u64,
    pub captured_paise: i64,
    pub spent_today_paise: i64,
    pub delegation_spent_paise: BTreeMap<String, i64>,
    /// `None` when the engine keeps no ledger (the pure engine).
    pub ledger_intact: Option<bool>,
    /// `Err` names the first request whose evidence does not verify; `None`
    /// when the engine keeps no log (the pure engine).
    pub evidence_verifies: Option<Result<(), String>>,
    /// `Err` names the first checkpoint a witness refuses; `None` when the
    /// engine keeps no log.
    pub log_consistent: Option<Result<(), String>>,
    /// What the simulated provider captured, all tenants.
    pub provider_captured_paise: i64,
    /// `None` when the engine keeps no books (the pure engine).
    pub books_balanced: Option<bool>,
    /// Why the books do not balance, when they do not.
    pub books_problems: Vec<String>,
    /// The state of the request each named step created (`None`: no such
    /// request), for the names the scenario's `request_states` asks about.
    pub request_states: BTreeMap<String, Option<String>>,
}
