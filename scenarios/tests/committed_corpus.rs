//! The committed corpus loads cleanly and meets the counts the project
//! promises.

use std::collections::BTreeSet;

use scenarios::{Corpus, Label, load_corpus, project_dir};

fn corpus() -> Corpus {
    match load_corpus(project_dir()) {
        Ok(c) => c,
        Err(errors) => {
            let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!(
                "the committed corpus has {} errors:\n{}",
                errors.len(),
                lines.join("\n")
            );
        }
    }
}

#[test]
fn committed_corpus_loads_with_zero_errors() {
    let c = corpus();
    assert!(c.errors.is_empty());
    assert!(
        c.files
            .iter()
            .all(|f| f.parent().unwrap().ends_with("corpus"))
    );
}

#[test]
fn committed_corpus_meets_the_counts() {
    let c = corpus();
    let attacks = c.attacks().count();
    let legit = c.legit().count();
    assert!(c.scenarios.len() >= 150, "{} scenarios", c.scenarios.len());
    assert!(attacks >= 100, "{attacks} attacks");
    assert!(legit >= 50, "{legit} legit");
    assert!(
        c.taxonomy.classes.len() >= 30,
        "{} classes",
        c.taxonomy.classes.len()
    );
    let per_class = c.attacks_per_class();
    let empty: Vec<&String> = per_class
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(c, _)| c)
        .collect();
    assert!(empty.is_empty(), "classes without an attack: {empty:?}");
}

#[test]
fn every_attack_has_a_class_and_refs_and_every_legit_has_none() {
    let c = corpus();
    for s in &c.scenarios {
        match s.label {
            Label::Attack => {
                assert!(s.class.is_some(), "{} has no class", s.id);
                assert!(!s.refs.is_empty(), "{} has no refs", s.id);
            }
            Label::Legit => assert!(s.class.is_none(), "{} is legit but has a class", s.id),
        }
    }
}

#[test]
fn every_verb_is_used() {
    let c = corpus();
    let mut used = BTreeSet::new();
    for s in &c.scenarios {
        for step in &s.steps {
            used.insert(step.verb.name());
            if let scenarios::Verb::Concurrent(inner) = &step.verb {
                used.insert(inner.step.verb.name());
            }
        }
    }
    for verb in scenarios::VERBS {
        assert!(used.contains(verb), "no scenario uses `{verb}`");
    }
}

#[test]
fn every_invariant_is_used() {
    let c = corpus();
    let inv = |f: fn(&scenarios::Invariants) -> bool| c.scenarios.iter().any(|s| f(&s.invariants));
    assert!(inv(|i| i.provider_orders.is_some()));
    assert!(inv(|i| i.captured_paise.is_some()));
    assert!(inv(|i| i.spent_today_paise.is_some()));
    assert!(inv(|i| i.delegation_spent_paise.is_some()));
    assert!(inv(|i| i.ledger_intact == Some(true)));
    assert!(inv(|i| i.provider_captured_paise.is_some()));
    assert!(inv(|i| i.books_balanced == Some(true)));
    assert!(inv(|i| i.request_states.is_some()));
    assert!(
        c.scenarios
            .iter()
            .any(|s| s.steps.iter().any(|st| st.tenant.is_some()))
    );
}

#[test]
fn taxonomy_ids_start_with_their_layer() {
    let c = corpus();
    for class in &c.taxonomy.classes {
        let prefix = class.id.split('.').next().unwrap();
        assert_eq!(prefix, class.layer.as_str(), "{}", class.id);
    }
}

#[test]
fn the_spec_example_is_in_the_corpus() {
    let c = corpus();
    let s = c
        .get("tool-boundary-amount-field")
        .expect("the spec's example scenario");
    assert_eq!(s.class.as_deref(), Some("tool-boundary.extra-field"));
    let e = s.steps[0].expect_decision().unwrap();
    assert_eq!(e.reason, Some(gate_core::Reason::ProposalUnknownField));
}

#[test]
fn every_attack_carries_a_check_beyond_ledger_intact() {
    let c = corpus();
    for s in c.attacks() {
        assert_eq!(s.missing_check(), None, "{}", s.id);
    }
    let mid_day = c.get("currency-change-mid-day").unwrap();
    assert!(
        !mid_day.invariants.money_checks().is_empty(),
        "currency-change-mid-day checks money, not only the ledger"
    );
}
