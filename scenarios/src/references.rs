//! Step references: `approve.request`, `checkout.request`,
//! `cancel.request`, `pay.authority`, `webhook.order`, `webhook.receipt`,
//! `provider_capture.order` and `replay.of` must each name an EARLIER step
//! of the same scenario, of the kind that produces what they need; the keys
//! of the `request_states` invariant must each name a step that creates a
//! request.
//!
//! Guarantees: [`check`] refuses a reference to a missing or later step, a
//! reference to a step of the wrong kind (a request must come from a
//! `propose`, an authority from a `checkout`, an order from a `pay`, seeing
//! through `replay`s; the kinds each field accepts are its key's
//! `refers_to` in [`crate::tables`]), a replay of a step that sends no
//! request, and a step name used twice. [`check_request_states`] refuses a `request_states` key
//! that names no step, or a step that is not a `propose` (seen through
//! replays).

use std::collections::BTreeMap;

use crate::error::{LoadErrorKind, ParseError};
use crate::step::{Step, Verb};
use crate::tables;

/// The verb a step effectively performs, seeing through replays.
fn effective<'a>(steps: &'a [Step], by_name: &BTreeMap<&str, usize>, mut i: usize) -> &'a Verb {
    loop {
        match &steps[i].verb {
            Verb::Replay(r) => match by_name.get(r.of.as_str()) {
                Some(&j) if j < i => i = j,
                _ => return &steps[i].verb,
            },
            Verb::Concurrent(c) => return &c.step.verb,
            v => return v,
        }
    }
}

/// Checks every reference and step name of one scenario's steps.
pub fn check(steps: &[Step]) -> Result<(), ParseError> {
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let path = format!("steps[{i}]");
        let verb_path = format!("{path}.{}", step.verb.name());
        // A `concurrent` step's references are its inner step's.
        let referring = match &step.verb {
            Verb::Concurrent(c) => c.step.verb.name(),
            v => v.name(),
        };
        for (field, target) in step.verb.references() {
            let dangling = |problem: String| -> ParseError {
                LoadErrorKind::DanglingReference {
                    path: verb_path.clone(),
                    field: field.to_string(),
                    target: target.to_string(),
                    problem,
                }
                .into()
            };
            let Some(&j) = by_name.get(target) else {
                let problem = if steps[i..].iter().any(|s| s.name.as_deref() == Some(target)) {
                    "is not an earlier step (it comes later)"
                } else {
                    "names no step of this scenario"
                };
                return Err(dangling(problem.to_string()));
            };
            let kind = effective(steps, &by_name, j).name();
            let wants = tables::refers_to(referring, field);
            if !wants.contains(&kind) {
                return Err(dangling(format!(
                    "is a `{kind}` step; `{field}` needs one of: {}",
                    wants.join(", ")
                )));
            }
        }
        if let Some(name) = &step.name
            && by_name.insert(name.as_str(), i).is_some()
        {
            return Err(LoadErrorKind::DuplicateStepName {
                path,
                name: name.clone(),
            }
            .into());
        }
    }
    Ok(())
}

/// Checks that each key of `request_states` names a step of `steps` that
/// creates a request (a `propose`, or a replay of one).
pub fn check_request_states<'a>(
    steps: &[Step],
    names: impl IntoIterator<Item = &'a String>,
) -> Result<(), ParseError> {
    let by_name: BTreeMap<&str, usize> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.name.as_deref().map(|n| (n, i)))
        .collect();
    for name in names {
        let problem = match by_name.get(name.as_str()) {
            None => Some("names no step of this scenario".to_string()),
            Some(&i) => match effective(steps, &by_name, i).name() {
                "propose" => None,
                kind => Some(format!(
                    "is a `{kind}` step; a request state needs a `propose` step"
                )),
            },
        };
        if let Some(problem) = problem {
            return Err(LoadErrorKind::DanglingReference {
                path: "invariants".into(),
                field: "request_states".into(),
                target: name.clone(),
                problem,
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(text: &str) -> Vec<Step> {
        let v: Vec<crate::yaml::Value> = crate::yaml::from_str(text).unwrap();
        v.iter().map(|s| Step::parse(s, "s").unwrap()).collect()
    }

    const PROPOSE: &str = "- {name: p1, propose: {actor: a, raw: x}}\n";

    #[test]
    fn accepts_earlier_references_through_replays() {
        let s = steps(&format!(
            "{PROPOSE}- {{name: r1, replay: {{of: p1}}}}\n- {{name: c1, checkout: {{request: r1, actor: a}}}}\n- {{name: o1, pay: {{authority: c1}}}}\n- {{webhook: {{order: o1}}}}\n- {{concurrent: {{times: 2, step: {{pay: {{authority: c1}}}}}}}}\n"
        ));
        check(&s).unwrap();
    }

    #[test]
    fn refuses_later_missing_and_wrong_kind() {
        let later = steps(&format!(
            "- {{approve: {{request: p1, approver: h}}}}\n{PROPOSE}"
        ));
        assert!(matches!(check(&later).unwrap_err().0,
            LoadErrorKind::DanglingReference { ref field, ref target, ref problem, .. }
                if field == "request" && target == "p1" && problem.contains("later")));
        let missing = steps(&format!("{PROPOSE}- {{pay: {{authority: c9}}}}\n"));
        assert!(
            matches!(check(&missing).unwrap_err().0, LoadErrorKind::DanglingReference { ref target, .. } if target == "c9")
        );
        let wrong = steps(&format!("{PROPOSE}- {{pay: {{authority: p1}}}}\n"));
        assert!(
            matches!(check(&wrong).unwrap_err().0, LoadErrorKind::DanglingReference { ref problem, .. } if problem.contains("`propose`"))
        );
        let in_concurrent = steps(&format!(
            "{PROPOSE}- {{concurrent: {{times: 2, step: {{webhook: {{order: p1}}}}}}}}\n"
        ));
        assert!(check(&in_concurrent).is_err());
        let receipt_of_an_order = steps(&format!(
            "{PROPOSE}- {{name: c1, checkout: {{request: p1, actor: a}}}}\n- {{name: o1, pay: {{authority: c1}}}}\n- {{webhook: {{order: o1, receipt: o1, raw: x}}}}\n"
        ));
        assert!(matches!(check(&receipt_of_an_order).unwrap_err().0,
                LoadErrorKind::DanglingReference { ref field, ref problem, .. }
                    if field == "receipt" && problem.contains("`pay`")));
        let receipt_of_a_checkout = steps(&format!(
            "{PROPOSE}- {{name: c1, checkout: {{request: p1, actor: a}}}}\n- {{name: o1, pay: {{authority: c1}}}}\n- {{webhook: {{order: o1, receipt: c1, raw: x}}}}\n"
        ));
        check(&receipt_of_a_checkout).unwrap();
    }

    #[test]
    fn refuses_duplicate_step_names_and_replaying_a_clock() {
        let dup = steps(&format!("{PROPOSE}{PROPOSE}"));
        assert!(
            matches!(check(&dup).unwrap_err().0, LoadErrorKind::DuplicateStepName { ref name, .. } if name == "p1")
        );
        let clock = steps("- {name: t, advance_clock: {minutes: 1}}\n- {replay: {of: t}}\n");
        assert!(check(&clock).is_err());
    }
}
