//! What a step is expected to come out as.
//!
//! Guarantees: a decision is one of `allow`, `step_up`, `deny`, `ok`; a
//! reason is a code of the closed `gate_core::Reason` set; `reason` and
//! `reason_any` never both appear; a `concurrent` step's expectation is a
//! set of counts. Unknown keys and unknown codes are refused with the key or
//! code named.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::yaml::Value;
use gate_core::Reason;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{LoadErrorKind, ParseError};
use crate::tables::check_table;
use crate::yaml::{as_mapping, decode, join};

/// The kind of outcome a step has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// A proposal or approval that authorizes.
    Allow,
    /// A proposal that needs a human.
    StepUp,
    /// A refusal.
    Deny,
    /// A step that is not a decision and was accepted.
    Ok,
}

impl DecisionKind {
    /// The spelling used in the corpus.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allow",
            DecisionKind::StepUp => "step_up",
            DecisionKind::Deny => "deny",
            DecisionKind::Ok => "ok",
        }
    }

    /// Every kind, as the loader accepts them.
    pub const ALL: [DecisionKind; 4] = [
        DecisionKind::Allow,
        DecisionKind::StepUp,
        DecisionKind::Deny,
        DecisionKind::Ok,
    ];

    fn parse(s: &str) -> Option<DecisionKind> {
        DecisionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// `{decision, reason}` or `{decision, reason_any}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expect {
    pub decision: DecisionKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reason_any: Vec<Reason>,
}

impl Expect {
    /// An expectation with no reason.
    pub fn bare(decision: DecisionKind) -> Expect {
        Expect {
            decision,
            reason: None,
            reason_any: Vec::new(),
        }
    }

    /// An expectation with exactly one acceptable reason.
    pub fn with_reason(decision: DecisionKind, reason: Reason) -> Expect {
        Expect {
            decision,
            reason: Some(reason),
            reason_any: Vec::new(),
        }
    }

    /// Whether an actual reason meets this expectation. With no reason
    /// expected, any reason is accepted.
    pub fn accepts_reason(&self, actual: Option<Reason>) -> bool {
        match (&self.reason, self.reason_any.as_slice()) {
            (Some(r), _) => actual == Some(*r),
            (None, []) => true,
            (None, any) => actual.is_some_and(|a| any.contains(&a)),
        }
    }

    /// Every reason this expectation accepts (empty: any).
    pub fn acceptable_reasons(&self) -> Vec<Reason> {
        match self.reason {
            Some(r) => vec![r],
            None => self.reason_any.clone(),
        }
    }

    /// Parses `{decision, reason | reason_any}` at `path`.
    pub fn parse(value: &Value, path: &str) -> Result<Expect, ParseError> {
        let map = as_mapping(value, path)?;
        check_table(map, crate::tables::EXPECT, path)?;
        let decision = match map.get("decision") {
            None => {
                return Err(LoadErrorKind::MissingKey {
                    path: path.to_string(),
                    key: "decision".into(),
                }
                .into());
            }
            Some(v) => {
                let text: String = decode(v.clone(), &join(path, "decision"))?;
                DecisionKind::parse(&text).ok_or(LoadErrorKind::UnknownDecision {
                    path: path.to_string(),
                    value: text,
                })?
            }
        };
        let reason = match map.get("reason") {
            None => None,
            Some(v) => Some(parse_reason(v, &join(path, "reason"))?),
        };
        let reason_any = match map.get("reason_any") {
            None => Vec::new(),
            Some(v) => {
                let codes: Vec<Value> = decode(v.clone(), &join(path, "reason_any"))?;
                if codes.is_empty() {
                    return Err(LoadErrorKind::InvalidValue {
                        path: join(path, "reason_any"),
                        message: "reason_any must list at least one code".into(),
                    }
                    .into());
                }
                codes
                    .iter()
                    .map(|c| parse_reason(c, &join(path, "reason_any")))
                    .collect::<Result<_, _>>()?
            }
        };
        if reason.is_some() && !reason_any.is_empty() {
            return Err(LoadErrorKind::InvalidValue {
                path: path.to_string(),
                message: "give `reason` or `reason_any`, not both".into(),
            }
            .into());
        }
        Ok(Expect {
            decision,
            reason,
            reason_any,
        })
    }
}

impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Expect::parse(&value, "expect").map_err(serde::de::Error::custom)
    }
}

fn parse_reason(value: &Value, path: &str) -> Result<Reason, ParseError> {
    let code: String = decode(value.clone(), path)?;
    Reason::from_str(&code).map_err(|_| {
        LoadErrorKind::UnknownReason {
            path: path.to_string(),
            code,
        }
        .into()
    })
}

/// The expectation of a `concurrent` step: how many copies come out each way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<u32>,
}

impl Counts {
    /// The expected count for one kind, if given.
    pub fn get(&self, kind: DecisionKind) -> Option<u32> {
        match kind {
            DecisionKind::Allow => self.allow,
            DecisionKind::Deny => self.deny,
            DecisionKind::StepUp => self.step_up,
            DecisionKind::Ok => self.ok,
        }
    }

    /// The sum of the counts given.
    pub fn total(&self) -> u32 {
        [self.allow, self.deny, self.step_up, self.ok]
            .iter()
            .flatten()
            .sum()
    }

    /// The exact count expected for one kind: an omitted key means 0.
    pub fn exact(&self, kind: DecisionKind) -> u32 {
        self.get(kind).unwrap_or(0)
    }

    /// Every kind whose observed count differs from the exact count
    /// expected, as `(kind, expected, observed)`, in [`DecisionKind::ALL`]
    /// order.
    pub fn mismatches(
        &self,
        observed: &BTreeMap<DecisionKind, u32>,
    ) -> Vec<(DecisionKind, u32, u32)> {
        DecisionKind::ALL
            .into_iter()
            .map(|kind| {
                let got = observed.get(&kind).copied().unwrap_or(0);
                (kind, self.exact(kind), got)
            })
            .filter(|(_, want, got)| want != got)
            .collect()
    }

    /// Whether the observed counts are more permissive than expected: more
    /// copies came out `allow`, `ok` or `step_up` than the exact count
    /// expected of that kind. A concurrent attack with such an outcome is
    /// not blocked.
    pub fn more_permissive(&self, observed: &BTreeMap<DecisionKind, u32>) -> bool {
        [DecisionKind::Allow, DecisionKind::Ok, DecisionKind::StepUp]
            .into_iter()
            .any(|kind| observed.get(&kind).copied().unwrap_or(0) > self.exact(kind))
    }
}

/// A step's expectation: a decision, counts for `concurrent`, or what a
/// `login` statement came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StepExpect {
    Decision(Expect),
    Counts(Counts),
    Login(LoginExpect),
}

/// What a `login` step's statement is expected to come to:
/// `{refused_by: <guard>}` (the constraint or trigger of that name refused
/// it; `privilege` for SQLSTATE 42501, a privilege the role lacks), or
/// `{decision: ok}` (the database wrote it; what follows must refuse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginExpect {
    Written,
    RefusedBy(String),
}

/// The `refused_by` of a refusal for a privilege the role lacks (42501).
pub const PRIVILEGE: &str = "privilege";

impl LoginExpect {
    /// Parses a `login` step's `expect` at `path`.
    pub fn parse(value: &Value, path: &str) -> Result<LoginExpect, ParseError> {
        let map = as_mapping(value, path)?;
        let Some(guard) = map.get("refused_by") else {
            let e = Expect::parse(value, path)?;
            if e.decision != DecisionKind::Ok || e.reason.is_some() || !e.reason_any.is_empty() {
                return Err(LoadErrorKind::InvalidValue {
                    path: path.to_string(),
                    message: "a `login` step expects `{refused_by: <constraint, trigger or `privilege`>}` or `{decision: ok}` (written)".into(),
                }
                .into());
            }
            return Ok(LoginExpect::Written);
        };
        check_table(map, crate::tables::LOGIN_EXPECT, path)?;
        let path = join(path, "refused_by");
        let name: String = decode(guard.clone(), &path)?;
        let grammar = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && name.len() <= 63;
        if !grammar {
            return Err(LoadErrorKind::InvalidValue {
                path,
                message: format!(
                    "`{name}` is no guard's name: a constraint or trigger name (lower case, digits, `_`, at most 63) or `{PRIVILEGE}`"
                ),
            }
            .into());
        }
        Ok(LoginExpect::RefusedBy(name))
    }

    /// Whether the expectation is a refusal (the attack's check).
    pub fn is_refusal(&self) -> bool {
        matches!(self, LoginExpect::RefusedBy(_))
    }
}

impl Serialize for LoginExpect {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = serializer.serialize_map(Some(1))?;
        match self {
            LoginExpect::Written => m.serialize_entry("decision", "ok")?,
            LoginExpect::RefusedBy(name) => m.serialize_entry("refused_by", name)?,
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Expect, ParseError> {
        Expect::parse(&crate::yaml::from_str(text).unwrap(), "steps[0].expect")
    }

    #[test]
    fn parses_reason_and_reason_any() {
        let e = parse("{decision: deny, reason: SKU_UNKNOWN}").unwrap();
        assert_eq!(e.reason, Some(Reason::SkuUnknown));
        assert!(e.accepts_reason(Some(Reason::SkuUnknown)));
        assert!(!e.accepts_reason(Some(Reason::SkuUnavailable)));
        let e = parse("{decision: deny, reason_any: [SKU_UNKNOWN, PROPOSAL_MALFORMED]}").unwrap();
        assert!(e.accepts_reason(Some(Reason::ProposalMalformed)));
        assert!(!e.accepts_reason(None));
        assert!(parse("{decision: allow}").unwrap().accepts_reason(None));
    }

    #[test]
    fn refuses_unknown_codes_decisions_keys_and_both() {
        assert!(
            matches!(parse("{decision: deny, reason: NOPE}").unwrap_err().0,
            LoadErrorKind::UnknownReason { code, .. } if code == "NOPE")
        );
        assert!(
            matches!(parse("{decision: deny, reason_any: [SKU_UNKNOWN, NOPE2]}").unwrap_err().0,
            LoadErrorKind::UnknownReason { code, .. } if code == "NOPE2")
        );
        assert!(matches!(parse("{decision: maybe}").unwrap_err().0,
            LoadErrorKind::UnknownDecision { value, .. } if value == "maybe"));
        assert!(matches!(parse("{decision: deny, why: x}").unwrap_err().0,
            LoadErrorKind::UnknownKey { key, .. } if key == "why"));
        assert!(matches!(parse("{reason: SKU_UNKNOWN}").unwrap_err().0,
            LoadErrorKind::MissingKey { key, .. } if key == "decision"));
        assert!(parse("{decision: deny, reason: SKU_UNKNOWN, reason_any: [SKU_UNKNOWN]}").is_err());
    }

    #[test]
    fn serde_goes_through_the_same_checks() {
        let e: Expect =
            crate::yaml::from_str("{decision: step_up, reason: APPROVAL_REQUIRED}").unwrap();
        assert_eq!(
            e,
            Expect::with_reason(DecisionKind::StepUp, Reason::ApprovalRequired)
        );
        let err = crate::yaml::from_str::<Expect>("{decision: deny, reason: NOPE}").unwrap_err();
        assert!(err.to_string().contains("NOPE"), "{err}");
    }

    #[test]
    fn counts_are_exact_and_an_omitted_key_is_zero() {
        let c: Counts = crate::yaml::from_str("{deny: 3}").unwrap();
        let seen =
            |pairs: &[(DecisionKind, u32)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        assert!(c.mismatches(&seen(&[(DecisionKind::Deny, 3)])).is_empty());
        assert!(!c.more_permissive(&seen(&[(DecisionKind::Deny, 3)])));
        let three_allowed = seen(&[(DecisionKind::Allow, 3)]);
        assert_eq!(
            c.mismatches(&three_allowed),
            vec![(DecisionKind::Allow, 0, 3), (DecisionKind::Deny, 3, 0)]
        );
        assert!(c.more_permissive(&three_allowed));
        let burst: Counts = crate::yaml::from_str("{step_up: 20, deny: 5}").unwrap();
        let raised = seen(&[(DecisionKind::StepUp, 25)]);
        assert!(burst.more_permissive(&raised));
        // Fewer successes than expected is a miss, never a breach.
        let stricter = seen(&[(DecisionKind::StepUp, 19), (DecisionKind::Deny, 6)]);
        assert!(!burst.more_permissive(&stricter));
        assert_eq!(burst.mismatches(&stricter).len(), 2);
    }

    #[test]
    fn counts_sum() {
        let c: Counts = crate::yaml::from_str("{allow: 3, deny: 2}").unwrap();
        assert_eq!(c.total(), 5);
        assert_eq!(c.get(DecisionKind::StepUp), None);
        assert!(crate::yaml::from_str::<Counts>("{allowed: 1}").is_err());
    }
}
