//! Judging one scenario run against its expectations, as the spec defines
//! *passed* and *blocked*.
//!
//! Guarantees: a scenario passes when every step's expectation (decision and
//! reason, counts, or what a `login` statement came to) and every invariant
//! hold. An attack is blocked when every invariant holds, no step expected
//! to come out `deny` or `step_up` came out `allow` or `ok`, no `login`
//! statement expected refused was written, and no `concurrent` step came
//! out more permissive than its exact counts (more `allow`, `ok` or
//! `step_up` copies than expected; an omitted key means 0). The reported reasons are those of the first step
//! that missed its expectation, else of the last step with an expectation.
//! An error is a failure with its message, and never blocks; an engine
//! error (the gate failed, panicked or timed out) is also marked as one.

use scenarios::{DecisionKind, LoginExpect, Scenario, StepExpect};

use super::observed::{LoginOutcome, ObservedState, StepOutcome};
use super::results::{Label, ScenarioResult};

/// What running a scenario produced, up to where it stopped.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub outcomes: Vec<StepOutcome>,
    pub state: Option<ObservedState>,
    /// Set when the run stopped early; its message.
    pub error: Option<String>,
    /// True when what stopped it was the gate itself: an error of the gate,
    /// a panic or a timeout (not a harness or corpus problem).
    pub engine_error: bool,
    /// Database guards that refused a step, by name.
    pub guards: std::collections::BTreeSet<String>,
}

impl Run {
    /// A run the engine could not finish: an engine error with its text.
    pub fn engine_error(message: String) -> Run {
        Run {
            error: Some(message),
            engine_error: true,
            ..Run::default()
        }
    }
}

/// Judges a run.
pub fn judge(scenario: &Scenario, run: &Run, engine: &str, heldout: bool) -> ScenarioResult {
    let mut failures = Vec::new();
    let mut breached = false;
    let mut first_miss: Option<(Option<String>, Option<String>)> = None;
    let mut last_expected: Option<(Option<String>, Option<String>)> = None;
    for (i, step) in scenario.steps.iter().enumerate() {
        let label = step.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
        let Some(outcome) = run.outcomes.get(i) else {
            if step.expect.is_some() {
                failures.push(format!("step {label} ({}) did not run", step.verb.name()));
                first_miss.get_or_insert((None, None));
            }
            continue;
        };
        let Some(expect) = &step.expect else { continue };
        match (expect, outcome) {
            (StepExpect::Decision(e), StepOutcome::Decided { kind, reason }) => {
                let expected_reason = e.reason.map(|r| r.code().to_string()).or_else(|| {
                    (!e.reason_any.is_empty()).then(|| {
                        e.reason_any
                            .iter()
                            .map(|r| r.code())
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                });
                let actual_reason = reason.map(|r| r.code().to_string());
                let pair = (expected_reason.clone(), actual_reason.clone());
                last_expected = Some(pair.clone());
                let refusal_expected =
                    matches!(e.decision, DecisionKind::Deny | DecisionKind::StepUp);
                if refusal_expected && matches!(kind, DecisionKind::Allow | DecisionKind::Ok) {
                    breached = true;
                }
                let kind_ok = *kind == e.decision;
                let reason_ok = e.accepts_reason(*reason);
                if !kind_ok || !reason_ok {
                    failures.push(format!(
                        "step {label} ({}): expected {}{}, got {}{}",
                        step.verb.name(),
                        e.decision.as_str(),
                        expected_reason.map(|r| format!(" {r}")).unwrap_or_default(),
                        kind.as_str(),
                        actual_reason.map(|r| format!(" {r}")).unwrap_or_default(),
                    ));
                    first_miss.get_or_insert(pair);
                }
            }
            (StepExpect::Counts(c), StepOutcome::Counts(seen)) => {
                // The counts are exact: an omitted key means 0.
                for (kind, want, got) in c.mismatches(seen) {
                    failures.push(format!(
                        "step {label} (concurrent): expected {want} {}, got {got}",
                        kind.as_str()
                    ));
                    first_miss.get_or_insert((None, None));
                }
                // More copies allowed, accepted or stepped up than expected
                // means a refusal came out more permissive.
                if c.more_permissive(seen) {
                    breached = true;
                }
            }
            (StepExpect::Login(e), StepOutcome::Login(seen)) => {
                let (want, met) = match e {
                    LoginExpect::Written => (
                        "written".to_string(),
                        matches!(seen, LoginOutcome::Written { .. }),
                    ),
                    LoginExpect::RefusedBy(guard) => {
                        // A statement expected refused that was written is a
                        // write past the guard: money or authority moved.
                        if matches!(seen, LoginOutcome::Written { .. }) {
                            breached = true;
                        }
                        (
                            format!("refused_by {guard}"),
                            *seen == LoginOutcome::Refused(guard.clone()),
                        )
                    }
                };
                let pair = (Some(want.clone()), Some(seen.describe()));
                last_expected = Some(pair.clone());
                if !met {
                    failures.push(format!(
                        "step {label} (login): expected {want}, got {}",
                        seen.describe()
                    ));
                    first_miss.get_or_insert(pair);
                }
            }
            (StepExpect::Login(_), _) | (_, StepOutcome::Login(_)) => {
                failures.push(format!(
                    "step {label}: a `login` step's outcome is what the database did with its statement, and only its"
                ));
                first_miss.get_or_insert((None, None));
            }
            (StepExpect::Decision(_), StepOutcome::Counts(_))
            | (StepExpect::Counts(_), StepOutcome::Decided { .. }) => {
                failures.push(format!(
                    "step {label}: counts are expected of `concurrent` steps and a decision of the others"
                ));
                first_miss.get_or_insert((None, None));
            }
        }
    }
    let invariants_hold = check_invariants(scenario, run.state.as_ref(), &mut failures);
    if let Some(err) = &run.error {
        if run.engine_error {
            failures.push(format!("engine error: {err}"));
        } else {
            failures.push(format!("the run stopped: {err}"));
        }
    }
    let passed = failures.is_empty();
    let blocked = run.error.is_none() && invariants_hold && !breached;
    let (expected_reason, actual_reason) = first_miss.or(last_expected).unwrap_or((None, None));
    let reasons_seen: std::collections::BTreeSet<String> = run
        .outcomes
        .iter()
        .filter_map(|o| o.reason())
        .map(|r| r.code().to_string())
        .collect();
    ScenarioResult {
        attack_reasons: attack_reasons(scenario, run).into_iter().collect(),
        not_run: false,
        reasons_seen: reasons_seen.into_iter().collect(),
        guards_seen: run.guards.iter().cloned().collect(),
        id: scenario.id.clone(),
        label: match scenario.label {
            scenarios::Label::Attack => Label::Attack,
            scenarios::Label::Legit => Label::Legit,
        },
        class: scenario.class.clone(),
        passed,
        blocked,
        expected_reason,
        actual_reason,
        failures,
        engine_error: run.engine_error,
        engine: engine.to_string(),
        heldout,
    }
}

/// The codes the steps carrying the attack came out with: a refused step's
/// gate reason, or for a wire-only step the service's own code its `wire`
/// block names (the HTTP engine fails the scenario when the service
/// answered another).
fn attack_reasons(scenario: &Scenario, run: &Run) -> std::collections::BTreeSet<String> {
    scenario
        .attack_steps()
        .into_iter()
        .filter_map(|i| {
            let step = &scenario.steps[i];
            match run.outcomes.get(i)? {
                StepOutcome::Decided {
                    reason: Some(r), ..
                } => Some(r.code().to_string()),
                StepOutcome::Decided {
                    kind: DecisionKind::Deny,
                    reason: None,
                } if step.wire_only() => step.wire.as_ref()?.reason.clone(),
                _ => None,
            }
        })
        .collect()
}

fn check_invariants(
    scenario: &Scenario,
    state: Option<&ObservedState>,
    failures: &mut Vec<String>,
) -> bool {
    let inv = &scenario.invariants;
    if inv.is_empty() {
        return true;
    }
    let Some(state) = state else {
        failures.push("invariants could not be read: the run stopped early".into());
        return false;
    };
    let before = failures.len();
    let mut check = |name: &str, want: i64, got: i64| {
        if want != got {
            failures.push(format!("invariant {name}: expected {want}, got {got}"));
        }
    };
    if let Some(n) = inv.provider_orders {
        check("provider_orders", n as i64, state.provider_orders as i64);
    }
    if let Some(n) = inv.captured_paise {
        check("captured_paise", n, state.captured_paise);
    }
    if let Some(n) = inv.spent_today_paise {
        check("spent_today_paise", n, state.spent_today_paise);
    }
    if let Some(map) = &inv.delegation_spent_paise {
        for (id, want) in map {
            let got = state.delegation_spent_paise.get(id).copied().unwrap_or(0);
            check(&format!("delegation_spent_paise.{id}"), *want, got);
        }
    }
    if let Some(n) = inv.provider_captured_paise {
        check("provider_captured_paise", n, state.provider_captured_paise);
    }
    if let Some(want) = inv.ledger_intact {
        match state.ledger_intact {
            Some(got) if got == want => {}
            Some(got) => failures.push(format!(
                "invariant ledger_intact: expected {want}, got {got}"
            )),
            None => failures.push("invariant ledger_intact: this engine keeps no ledger".into()),
        }
    }
    for (name, want, got) in [
        (
            "evidence_verifies",
            inv.evidence_verifies,
            &state.evidence_verifies,
        ),
        ("log_consistent", inv.log_consistent, &state.log_consistent),
    ] {
        let Some(want) = want else { continue };
        match got {
            Some(got) if got.is_ok() == want => {}
            Some(got) => failures.push(format!(
                "invariant {name}: expected {want}, got {}{}",
                got.is_ok(),
                got.as_ref()
                    .err()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )),
            None => failures.push(format!("invariant {name}: this engine keeps no log")),
        }
    }
    if let Some(want) = inv.books_balanced {
        match state.books_balanced {
            Some(got) if got == want => {}
            Some(got) => failures.push(format!(
                "invariant books_balanced: expected {want}, got {got}{}",
                if state.books_problems.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", state.books_problems.join("; "))
                }
            )),
            None => failures.push("invariant books_balanced: this engine keeps no books".into()),
        }
    }
    if let Some(map) = &inv.request_states {
        for (name, want) in map {
            match state.request_states.get(name) {
                Some(Some(got)) if got == want.as_str() => {}
                Some(Some(got)) => failures.push(format!(
                    "invariant request_states.{name}: expected {}, got {got}",
                    want.as_str()
                )),
                Some(None) => failures.push(format!(
                    "invariant request_states.{name}: expected {}, but the step created no request",
                    want.as_str()
                )),
                None => failures.push(format!(
                    "invariant request_states.{name}: this engine does not report request states"
                )),
            }
        }
    }
    failures.len() == before
}

/// Where the pure engine and the database-backed gate saw different
/// outcomes for the same step, or different spend at the end.
pub fn disagreements(pure: &Run, database: &Run) -> Vec<String> {
    let mut out = step_disagreements("pure", pure, database);
    if let (Some(p), Some(d)) = (&pure.state, &database.state)
        && p.spent_today_paise != d.spent_today_paise
    {
        out.push(format!(
            "engines disagree on spent_today_paise: pure {}, database {}",
            p.spent_today_paise, d.spent_today_paise
        ));
    }
    out
}

fn step_disagreements(engine: &str, other: &Run, database: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (p, d)) in other.outcomes.iter().zip(&database.outcomes).enumerate() {
        if p != d {
            out.push(format!(
                "engines disagree at step #{}: {engine} {p:?}, database {d:?}",
                i + 1
            ));
        }
    }
    out
}

/// Where an engine that keeps the whole state (the HTTP engine) and the
/// database-backed gate saw different outcomes for the same step, or a
/// different state at the end (every observed field, books and ledger included).
pub fn disagreements_of(engine: &str, other: &Run, database: &Run) -> Vec<String> {
    let mut out = step_disagreements(engine, other, database);
    if let (Some(o), Some(d)) = (&other.state, &database.state)
        && o != d
    {
        out.push(format!(
            "engines disagree on the state at the end: {engine} {o:?}, database {d:?}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use scenarios::{DecisionKind, Scenario};

    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        let value: scenarios::yaml::Value = scenarios::yaml::from_str(yaml).unwrap();
        Scenario::parse(&value).unwrap()
    }

    fn counts(pairs: &[(DecisionKind, u32)]) -> StepOutcome {
        StepOutcome::Counts(pairs.iter().copied().collect::<BTreeMap<_, _>>())
    }

    fn run_of(outcome: StepOutcome) -> Run {
        Run {
            outcomes: vec![outcome],
            state: Some(ObservedState::default()),
            ..Run::default()
        }
    }

    const THREE_DENIED: &str = r#"
id: three-copies-denied
label: attack
world: standard
steps:
  - concurrent:
      times: 3
      step: {propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}}
    expect: {deny: 3}
invariants: {provider_orders: 0}
"#;

    const LOGIN_REFUSED: &str = r#"
id: login-inflates-an-authority
label: attack
world: standard
steps:
  - login: {sql: "UPDATE checkout_authorities SET amount_paise = amount_paise * 100"}
    expect: {refused_by: authority_terms_immutable}
"#;

    #[test]
    fn a_login_statement_expected_refused_and_written_is_not_blocked() {
        let s = scenario(LOGIN_REFUSED);
        let refused = run_of(StepOutcome::Login(LoginOutcome::Refused(
            "authority_terms_immutable".into(),
        )));
        let r = judge(&s, &refused, "database", false);
        assert!(r.passed && r.blocked, "{r:?}");
        // Written: the guard let the login through; money or authority moved.
        let written = run_of(StepOutcome::Login(LoginOutcome::Written { rows: 1 }));
        let r = judge(&s, &written, "database", false);
        assert!(!r.passed && !r.blocked, "{r:?}");
        assert!(r.failures[0].contains("got written (1 rows)"), "{r:?}");
        // Another guard refused it: a reason changed, nothing moved.
        let other = run_of(StepOutcome::Login(LoginOutcome::Refused(
            "privilege".into(),
        )));
        let r = judge(&s, &other, "database", false);
        assert!(!r.passed && r.blocked, "{r:?}");
        // Any other database error meets no expectation and moves nothing.
        let error = run_of(StepOutcome::Login(LoginOutcome::Error(
            "42601: syntax error".into(),
        )));
        let r = judge(&s, &error, "database", false);
        assert!(!r.passed && r.blocked && !r.engine_error, "{r:?}");
        // A decision where a login outcome belongs is a failure, never a pass.
        let r = judge(
            &s,
            &run_of(StepOutcome::Decided {
                kind: DecisionKind::Deny,
                reason: None,
            }),
            "database",
            false,
        );
        assert!(!r.passed, "{r:?}");
    }

    #[test]
    fn a_login_statement_expected_written_passes_only_when_written() {
        let s = scenario(
            &LOGIN_REFUSED
                .replace("{refused_by: authority_terms_immutable}", "{decision: ok}")
                .replace("label: attack", "label: legit"),
        );
        let written = run_of(StepOutcome::Login(LoginOutcome::Written { rows: 0 }));
        assert!(judge(&s, &written, "database", false).passed);
        let refused = run_of(StepOutcome::Login(LoginOutcome::Refused("x".into())));
        assert!(!judge(&s, &refused, "database", false).passed);
    }

    #[test]
    fn three_copies_allowed_against_deny_three_is_not_blocked() {
        let s = scenario(THREE_DENIED);
        let r = judge(
            &s,
            &run_of(counts(&[(DecisionKind::Allow, 3)])),
            "database",
            false,
        );
        assert!(!r.blocked, "{r:?}");
        assert!(!r.passed);
        assert!(
            r.failures
                .iter()
                .any(|f| f.contains("expected 0 allow, got 3")),
            "{:?}",
            r.failures
        );
        let r = judge(
            &s,
            &run_of(counts(&[(DecisionKind::Deny, 3)])),
            "database",
            false,
        );
        assert!(r.blocked && r.passed, "{r:?}");
    }

    #[test]
    fn a_velocity_burst_all_stepped_up_is_not_blocked() {
        let s = scenario(
            r#"
id: burst
label: attack
world: standard
steps:
  - concurrent:
      times: 25
      step: {propose: {actor: buyer-agent, body: {sku: CLOUD-TEAM, quantity: 1, purpose: "team credits"}}}
    expect: {step_up: 20, deny: 5}
invariants: {provider_orders: 0, spent_today_paise: 0}
"#,
        );
        let raised = run_of(counts(&[(DecisionKind::StepUp, 25)]));
        let r = judge(&s, &raised, "database", false);
        assert!(!r.blocked, "{r:?}");
        assert_eq!(
            r.failures,
            vec![
                "step #1 (concurrent): expected 20 step_up, got 25".to_string(),
                "step #1 (concurrent): expected 5 deny, got 0".to_string(),
            ]
        );
        // Stricter than expected is a miss, not a breach.
        let stricter = run_of(counts(&[
            (DecisionKind::StepUp, 19),
            (DecisionKind::Deny, 6),
        ]));
        let r = judge(&s, &stricter, "database", false);
        assert!(r.blocked && !r.passed, "{r:?}");
    }
}
