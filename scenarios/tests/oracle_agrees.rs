//! The oracle (an independent model of the spec) agrees with every
//! hand-computed expectation of the committed corpus: a second check of the
//! hand arithmetic, and of the oracle.

use scenarios::oracle::{self, StepOutcome};
use scenarios::{
    Corpus, Counts, DecisionKind, LoginExpect, Scenario, StepExpect, load_corpus, project_dir,
};

/// Every disagreement between the oracle and one scenario's expectations.
fn disagreements(corpus: &Corpus, s: &Scenario) -> Vec<String> {
    let world = &corpus.worlds[&s.world];
    let trace = match oracle::run(world, s) {
        Ok(t) => t,
        Err(e) => return vec![format!("oracle cannot model it: {e}")],
    };
    let mut out = Vec::new();
    // A login statement the database wrote changes what the oracle cannot
    // see: the steps after it and the invariants are the bench's to judge.
    let written = s
        .steps
        .iter()
        .position(|step| matches!(step.expect, Some(StepExpect::Login(LoginExpect::Written))));
    let modelled = written.map_or(s.steps.len(), |i| i + 1);
    for (i, (step, got)) in s.steps.iter().zip(&trace.steps).take(modelled).enumerate() {
        match (&step.expect, got) {
            (None, _) => {}
            (Some(StepExpect::Decision(e)), StepOutcome::Single(o)) => {
                if e.decision != o.decision || !e.accepts_reason(o.reason) {
                    out.push(format!(
                        "step {i} ({}): expected {} {:?}/{:?}, oracle says {} {:?}",
                        step.verb.name(),
                        e.decision.as_str(),
                        e.reason,
                        e.reason_any,
                        o.decision.as_str(),
                        o.reason
                    ));
                }
            }
            // A login statement is outside the model: the bench judges it.
            (Some(StepExpect::Login(_)), StepOutcome::Outside) => {}
            (Some(StepExpect::Counts(c)), StepOutcome::Counts(got)) => {
                // Exact counts: an omitted key means 0.
                for (kind, want, have) in c.mismatches(got) {
                    out.push(format!(
                        "step {i} (concurrent): {} expected {want}, oracle says {have}",
                        kind.as_str()
                    ));
                }
            }
            (e, g) => out.push(format!(
                "step {i}: expectation {e:?} does not fit outcome {g:?}"
            )),
        }
    }
    if written.is_some() {
        return out;
    }
    let inv = &s.invariants;
    let obs = &trace.observed;
    let mut check = |name: &str, want: Option<i64>, have: i64| {
        if let Some(w) = want
            && w != have
        {
            out.push(format!(
                "invariant {name}: expected {w}, oracle says {have}"
            ));
        }
    };
    check(
        "provider_orders",
        inv.provider_orders.map(|v| v as i64),
        obs.provider_orders as i64,
    );
    check("captured_paise", inv.captured_paise, obs.captured_paise);
    check(
        "provider_captured_paise",
        inv.provider_captured_paise,
        obs.provider_captured_paise,
    );
    check(
        "spent_today_paise",
        inv.spent_today_paise,
        obs.spent_today_paise,
    );
    for (d, want) in inv.delegation_spent_paise.iter().flatten() {
        let have = obs.delegation_spent_paise.get(d).copied().unwrap_or(0);
        check(&format!("delegation_spent_paise.{d}"), Some(*want), have);
    }
    out
}

#[test]
fn oracle_agrees_with_every_hand_written_expectation() {
    let corpus = load_corpus(project_dir()).expect("corpus loads");
    let mut report = Vec::new();
    for s in &corpus.scenarios {
        for d in disagreements(&corpus, s) {
            report.push(format!("{}: {d}", s.id));
        }
    }
    assert!(
        report.is_empty(),
        "{} disagreements:\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn oracle_can_disagree() {
    // A wrong hand expectation must be caught: flip one and look.
    let corpus = load_corpus(project_dir()).expect("corpus loads");
    let mut s = corpus.get("pol-cap-gpu-hour").unwrap().clone();
    if let Some(StepExpect::Decision(e)) = &mut s.steps[0].expect {
        e.decision = DecisionKind::Allow;
        e.reason = None;
    }
    assert!(!disagreements(&corpus, &s).is_empty());
    let mut s = corpus.get("legit-daily-cap-exact").unwrap().clone();
    s.invariants.spent_today_paise = Some(499_999);
    assert_eq!(disagreements(&corpus, &s).len(), 1);
    // The provider's side too: a release that did not happen, a capture
    // that was not booked, a late answer read as an order.
    let mut s = corpus
        .get("prov-timeout-reconcile-after-expiry-releases")
        .unwrap()
        .clone();
    s.invariants.spent_today_paise = Some(25_000);
    assert_eq!(disagreements(&corpus, &s).len(), 1);
    let mut s = corpus
        .get("prov-late-answer-no-webhook-reconcile-books")
        .unwrap()
        .clone();
    s.invariants.captured_paise = Some(0);
    s.invariants.provider_captured_paise = Some(0);
    assert_eq!(disagreements(&corpus, &s).len(), 2);
    let mut s = corpus
        .get("prov-late-answer-pay-again-refused")
        .unwrap()
        .clone();
    if let Some(StepExpect::Decision(e)) = &mut s.steps[3].expect {
        e.decision = DecisionKind::Ok;
        e.reason = None;
    }
    assert_eq!(disagreements(&corpus, &s).len(), 1);
    // A concurrent step's counts are exact: dropping a key claims 0 of it.
    let mut s = corpus.get("rl-velocity-concurrent-burst").unwrap().clone();
    s.steps[0].expect = Some(StepExpect::Counts(Counts {
        step_up: Some(20),
        ..Counts::default()
    }));
    assert_eq!(
        disagreements(&corpus, &s),
        vec!["step 0 (concurrent): deny expected 0, oracle says 5".to_string()]
    );
}
