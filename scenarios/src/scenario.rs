//! One scenario: a labelled, ordered list of steps run in a world, with the
//! invariants that must hold after the last step.
//!
//! Guarantees: [`Scenario::parse`] refuses unknown keys at every level, a
//! non-kebab-case id, duplicate step names and any step reference that does
//! not name an earlier step of the right kind (see [`crate::references`]),
//! and a `request_states` invariant naming a step that creates no request;
//! every refusal names the key or value. (The clock bound needs the world's
//! `now`, so the loader checks it: [`crate::clock::check`]; the loader also
//! refuses an attack that carries no check its success would break:
//! [`Scenario::missing_check`].) Serialization writes the keys in a fixed
//! order, so the same scenario always serializes to the same YAML.

use std::collections::BTreeMap;

use crate::yaml::Value;
use gate_core::RequestState;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{LoadErrorKind, ParseError};
use crate::expect::{DecisionKind, StepExpect};
use crate::ids::is_kebab;
use crate::step::Step;
use crate::tables::{self, check_table};
use crate::yaml::{as_mapping, decode, optional, required};

/// Whether a scenario is an attack or a legitimate use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Attack,
    Legit,
}

/// Checked after the last step; each key optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invariants {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_orders: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_paise: Option<i64>,
    /// The default tenant's reservations for the current UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_today_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_spent_paise: Option<BTreeMap<String, i64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_intact: Option<bool>,
    /// For every request, the log part of its evidence bundle verifies
    /// offline with the tenant's public log key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_verifies: Option<bool>,
    /// Every kept checkpoint, and the tree as it is now, is proved
    /// consistent with the one before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_consistent: Option<bool>,
    /// What the simulated provider has captured, all tenants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_captured_paise: Option<i64>,
    /// Every paisa the provider captured is captured in the gate's books, and
    /// every reservation belongs to a request that still holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub books_balanced: Option<bool>,
    /// The state of the request each named `propose` step created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_states: Option<BTreeMap<String, RequestState>>,
}

/// The invariants an attack's success would break: money or a request's
/// state. `ledger_intact` is not one of them (an attack that moves money
/// leaves the ledger intact).
pub const MONEY_INVARIANTS: [&str; 7] = [
    "provider_orders",
    "captured_paise",
    "provider_captured_paise",
    "spent_today_paise",
    "delegation_spent_paise",
    "books_balanced",
    "request_states",
];

impl Invariants {
    /// Whether no invariant is given.
    pub fn is_empty(&self) -> bool {
        *self == Invariants::default()
    }

    /// The money invariants given (of [`MONEY_INVARIANTS`]); an empty map
    /// checks nothing and is not counted.
    pub fn money_checks(&self) -> Vec<&'static str> {
        let given = [
            self.provider_orders.is_some(),
            self.captured_paise.is_some(),
            self.provider_captured_paise.is_some(),
            self.spent_today_paise.is_some(),
            self.delegation_spent_paise
                .as_ref()
                .is_some_and(|m| !m.is_empty()),
            self.books_balanced.is_some(),
            self.request_states.as_ref().is_some_and(|m| !m.is_empty()),
        ];
        MONEY_INVARIANTS
            .into_iter()
            .zip(given)
            .filter_map(|(name, given)| given.then_some(name))
            .collect()
    }
}

/// One scenario of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub id: String,
    pub label: Label,
    /// A taxonomy class id; attacks of this corpus always have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<String>,
    /// Free text: how the expectation was computed, what the attack tries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A world file name (without `.yaml`).
    pub world: String,
    pub steps: Vec<Step>,
    #[serde(skip_serializing_if = "Invariants::is_empty")]
    pub invariants: Invariants,
}

impl Scenario {
    /// The id of a scenario value, if it has a string one (used to name a
    /// scenario in errors before the rest of it is parsed).
    pub fn peek_id(value: &Value) -> Option<String> {
        value.get("id").and_then(Value::as_str).map(str::to_string)
    }

    /// Parses and checks one scenario.
    pub fn parse(value: &Value) -> Result<Scenario, ParseError> {
        let map = as_mapping(value, "")?;
        let id: String = match map.get("id") {
            None => return Err(LoadErrorKind::MissingId.into()),
            Some(v) => decode(v.clone(), "id")?,
        };
        if !is_kebab(&id) {
            return Err(LoadErrorKind::BadId { value: id }.into());
        }
        check_table(map, tables::SCENARIO, "")?;
        let label: Label = required(map, "label", "")?;
        let class: Option<String> = optional(map, "class", "")?;
        let refs: Vec<String> = optional(map, "refs", "")?.unwrap_or_default();
        let description: Option<String> = optional(map, "description", "")?;
        let world: String = required(map, "world", "")?;
        if let Some(Value::Mapping(given)) = map.get("invariants") {
            check_table(given, tables::INVARIANTS, "invariants")?;
        }
        let invariants: Invariants = optional(map, "invariants", "")?.unwrap_or_default();
        let raw_steps: Vec<Value> = required(map, "steps", "")?;
        if raw_steps.is_empty() {
            return Err(LoadErrorKind::InvalidValue {
                path: "steps".into(),
                message: "a scenario needs at least one step".into(),
            }
            .into());
        }
        let steps = raw_steps
            .iter()
            .enumerate()
            .map(|(i, v)| Step::parse(v, &format!("steps[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        crate::references::check(&steps)?;
        if let Some(states) = &invariants.request_states {
            crate::references::check_request_states(&steps, states.keys())?;
        }
        Ok(Scenario {
            id,
            label,
            class,
            refs,
            description,
            world,
            steps,
            invariants,
        })
    }

    /// For an attack with no check its success would break, what is
    /// missing; `None` for a legitimate scenario or an attack with a check.
    /// A check is a step expected to come out `deny` or `step_up` (for a
    /// `concurrent` step, counts with some `deny` or `step_up`), or a money
    /// invariant ([`MONEY_INVARIANTS`]). `ledger_intact` alone is not one.
    pub fn missing_check(&self) -> Option<String> {
        if self.label != Label::Attack
            || self.steps.iter().any(Step::expects_refusal)
            || !self.invariants.money_checks().is_empty()
        {
            return None;
        }
        let ledger_only = if self.invariants.ledger_intact.is_some() {
            " (`ledger_intact` alone is not one: an attack that moves money leaves the ledger intact)"
        } else {
            ""
        };
        Some(format!(
            "no step is expected to come out `deny` or `step_up` (or a `login` step `refused_by` a guard), \
             and no money invariant is given (one of {}){ledger_only}",
            MONEY_INVARIANTS.join(", ")
        ))
    }

    /// The indices of the steps that carry the attack, for any label:
    /// - the wire-only steps, when there are any (the service refuses them
    ///   before the gate; the other steps set them up);
    /// - else the steps expected to come out `deny` (a `concurrent` step:
    ///   with refused copies; a `login` step: refused by a guard), the
    ///   refusals the attack meets;
    /// - else those expected `step_up` (the attack is evading a human);
    /// - else every step (the invariants alone carry the check).
    pub fn attack_steps(&self) -> Vec<usize> {
        let which = |keep: &dyn Fn(&Step) -> bool| -> Vec<usize> {
            (0..self.steps.len())
                .filter(|&i| keep(&self.steps[i]))
                .collect()
        };
        let wire_only = which(&Step::wire_only);
        if !wire_only.is_empty() {
            return wire_only;
        }
        let expected = |kind: DecisionKind| {
            move |s: &Step| match &s.expect {
                Some(StepExpect::Decision(e)) => e.decision == kind,
                Some(StepExpect::Counts(c)) => c.exact(kind) > 0,
                // A login statement refused is the refusal the attack meets.
                Some(StepExpect::Login(e)) => kind == DecisionKind::Deny && e.is_refusal(),
                None => false,
            }
        };
        let denied = which(&expected(DecisionKind::Deny));
        if !denied.is_empty() {
            return denied;
        }
        let stepped_up = which(&expected(DecisionKind::StepUp));
        if !stepped_up.is_empty() {
            return stepped_up;
        }
        (0..self.steps.len()).collect()
    }

    /// Whether this is an attack that only an engine sending wire-only
    /// steps sends: its attack steps are wire-only. On any other engine it
    /// is "not run": no evidence, never blocked.
    pub fn attack_needs_wire(&self) -> bool {
        self.label == Label::Attack && self.steps.iter().any(Step::wire_only)
    }

    /// The step with this name.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name.as_deref() == Some(name))
    }

    /// The scenario as YAML text (a one-element list, as in a corpus file).
    pub fn to_yaml(&self) -> String {
        crate::yaml::to_string(std::slice::from_ref(self)).expect("scenarios always serialize")
    }
}

impl<'de> Deserialize<'de> for Scenario {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Scenario::parse(&value).map_err(serde::de::Error::custom)
    }
}
