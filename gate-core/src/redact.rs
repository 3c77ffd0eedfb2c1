//! What the agent is told.
//!
//! Guarantees: an [`AgentView`] carries the decision and the reason code and
//! a fixed sentence per reason, nothing else. It never quotes a cap, a
//! remaining budget, a price the agent did not ask about, or another
//! tenant's data; the full [`Evaluation`] goes to the ledger instead.

use serde::Serialize;

use crate::policy::Evaluation;
use crate::reason::{Decision, Layer, Reason};

/// The redacted decision returned to an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentView {
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    pub message: &'static str,
}

impl AgentView {
    pub fn of(decision: Decision) -> Self {
        AgentView {
            decision: decision.kind(),
            reason: decision.reason(),
            message: message(decision),
        }
    }

    pub fn from_evaluation(evaluation: &Evaluation) -> Self {
        Self::of(evaluation.decision)
    }
}

fn message(decision: Decision) -> &'static str {
    let reason = match decision {
        Decision::Allow => return "The purchase is authorized; a human issues the checkout.",
        Decision::StepUp(_) => return "A human must approve this purchase before it can proceed.",
        Decision::Deny(reason) => reason,
    };
    match reason.layer() {
        Layer::ToolBoundary => {
            "The request was refused: send only sku, quantity and purpose, with valid values."
        }
        Layer::Identity => "The request was refused: the caller may not make it.",
        Layer::Policy => "The request was refused by the spending policy.",
        Layer::Delegation => "The request was refused: no live delegation covers it.",
        Layer::Approval => "The approval was refused.",
        Layer::CheckoutAuthority => "The checkout was refused.",
        Layer::ProviderEvent => "The provider event was refused.",
        Layer::Replay => {
            "The request was refused: this idempotency key was used for another request."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_message_quotes_a_number() {
        let mut decisions = vec![Decision::Allow];
        for r in Reason::ALL {
            decisions.push(Decision::Deny(*r));
            decisions.push(Decision::StepUp(*r));
        }
        for d in decisions {
            let json = serde_json::to_string(&AgentView::of(d)).unwrap();
            assert!(!json.chars().any(|c| c.is_ascii_digit()), "{json}");
        }
    }

    #[test]
    fn the_view_of_a_capped_refusal_drops_the_cap() {
        let e = Evaluation {
            decision: Decision::Deny(Reason::DailyBudgetExhausted),
            purchase: None,
            limit: Some(crate::policy::LimitHit {
                limit: 500000,
                used: 450000,
                requested: 60000,
            }),
        };
        let json = serde_json::to_string(&AgentView::from_evaluation(&e)).unwrap();
        assert_eq!(
            json,
            r#"{"decision":"deny","reason":"DAILY_BUDGET_EXHAUSTED","message":"The request was refused by the spending policy."}"#
        );
    }
}
