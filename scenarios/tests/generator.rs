//! The seeded generator is deterministic, pinned, and writes scenarios the
//! loader accepts and the oracle agrees with.

use std::collections::BTreeSet;

use scenarios::generate::{class_of, generate, to_yaml};
use scenarios::oracle::{self, StepOutcome};
use scenarios::{Corpus, Label, StepExpect, load_corpus, project_dir};
use sha2::{Digest, Sha256};

const PIN_SEED: u64 = 20260903;
const PIN_COUNT: usize = 60;
/// SHA-256 of `to_yaml(&generate(PIN_SEED, PIN_COUNT))`. A change here means
/// the generator's output changed: update it on purpose, never by reflex.
const PIN_SHA256: &str = "52b1697efc3575ab9a9bd6e207761a11d30a926f9f45f919736fff61c25e2816";

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn same_seed_same_output_other_seed_other_output() {
    let a = to_yaml(&generate(7, 50));
    assert_eq!(a, to_yaml(&generate(7, 50)));
    assert_ne!(a, to_yaml(&generate(8, 50)));
    assert!(
        to_yaml(&generate(7, 80)).starts_with(&a),
        "a longer run extends a shorter one"
    );
}

#[test]
fn output_for_the_pinned_seed_is_pinned() {
    let digest = sha256(&to_yaml(&generate(PIN_SEED, PIN_COUNT)));
    assert_eq!(digest, PIN_SHA256, "generator output changed");
}

fn write_and_load(yaml: &str, name: &str) -> Corpus {
    let dir =
        std::env::temp_dir().join(format!("scenarios-generator-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("generated.yaml"), yaml).unwrap();
    let loaded = load_corpus(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    loaded.unwrap_or_else(|errors| {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        panic!("generated scenarios do not load:\n{}", lines.join("\n"))
    })
}

#[test]
fn generated_scenarios_load_and_round_trip() {
    let generated = generate(11, 300);
    let corpus = write_and_load(&to_yaml(&generated), "round-trip");
    assert_eq!(corpus.scenarios.len(), generated.len());
    for (loaded, made) in corpus.scenarios.iter().zip(&generated) {
        assert_eq!(loaded, made, "{}", made.id);
    }
    let ids: BTreeSet<&str> = generated.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), generated.len());
}

#[test]
fn every_expectation_is_the_oracles_and_every_step_has_one() {
    let world = scenarios::generate::standard_world();
    for s in generate(12, 200) {
        let trace = oracle::run(world, &s).unwrap();
        for (step, got) in s.steps.iter().zip(&trace.steps) {
            let (Some(StepExpect::Decision(e)), StepOutcome::Single(o)) = (&step.expect, got)
            else {
                panic!("{}: a generated step without a decision expectation", s.id);
            };
            assert_eq!((e.decision, e.reason), (o.decision, o.reason), "{}", s.id);
        }
        assert_eq!(
            s.invariants.spent_today_paise,
            Some(trace.observed.spent_today_paise),
            "{}",
            s.id
        );
        assert_eq!(
            s.invariants.provider_orders,
            Some(trace.observed.provider_orders),
            "{}",
            s.id
        );
        match s.label {
            Label::Attack => assert!(s.class.is_some(), "{}", s.id),
            Label::Legit => assert!(s.class.is_none(), "{}", s.id),
        }
    }
}

#[test]
fn families_labels_and_classes_are_all_exercised() {
    let generated = generate(13, 500);
    let families: BTreeSet<&str> = generated
        .iter()
        .map(|s| s.id.splitn(4, '-').nth(3).unwrap())
        .collect();
    assert_eq!(
        families.len(),
        scenarios::generate::families::FAMILIES.len(),
        "{families:?}"
    );
    let classes: BTreeSet<&str> = generated
        .iter()
        .filter_map(|s| s.class.as_deref())
        .collect();
    assert!(classes.len() >= 15, "{classes:?}");
    assert!(generated.iter().any(|s| s.label == Label::Legit));
    assert!(generated.iter().any(|s| s.label == Label::Attack));
}

#[test]
fn every_reason_maps_to_a_committed_class() {
    let corpus = load_corpus(project_dir()).unwrap();
    for reason in gate_core::Reason::ALL {
        let class = class_of(*reason);
        assert!(corpus.taxonomy.contains(class), "{reason} -> {class}");
    }
}

#[test]
fn every_generated_attack_carries_a_check_the_loader_takes() {
    let generated = generate(14, 2_000);
    let attacks: Vec<_> = generated
        .iter()
        .filter(|s| s.label == Label::Attack)
        .collect();
    assert!(attacks.len() > 100, "{}", attacks.len());
    for s in &attacks {
        assert_eq!(s.missing_check(), None, "{}", s.id);
        assert!(
            !s.invariants.money_checks().is_empty(),
            "{}: a generated attack names its money",
            s.id
        );
    }
    // And the loader, which refuses an attack without one, takes them all.
    let corpus = write_and_load(&to_yaml(&generated), "checks");
    assert_eq!(corpus.scenarios.len(), generated.len());
}
