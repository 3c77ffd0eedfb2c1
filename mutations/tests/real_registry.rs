//! The real registry against the real gate: every locator still matches
//! exactly once, every refusal site in `gate/src` is registered or exempt,
//! and every named test exists.
//!
//! While `mutations/registry.yaml` lists no guards these tests say so and
//! pass without checking anything else: an empty registry is a registry that
//! has not been written yet, not one that holds.

use std::path::{Path, PathBuf};

use mutations::{Cancel, Registry, RunOptions, completeness, sanity};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the mutations crate sits in the workspace")
        .to_path_buf()
}

fn registry() -> Registry {
    Registry::load(&root().join("mutations/registry.yaml")).expect("mutations/registry.yaml loads")
}

/// `None` (after printing why) while the registry has no guards.
fn guarded() -> Option<Registry> {
    let r = registry();
    if r.guards.is_empty() {
        let pending = completeness::check(&root(), &r)
            .map(|c| {
                format!(
                    "{} refusal sites in gate/src await registration",
                    c.unregistered.len()
                )
            })
            .unwrap_or_else(|e| format!("gate/src cannot be walked yet: {e}"));
        eprintln!("skipped: mutations/registry.yaml has no guards yet ({pending})");
        return None;
    }
    Some(r)
}

#[test]
fn the_registry_loads() {
    let r = registry();
    assert_eq!(r.switch, "crate::mutant_active");
    assert_eq!(r.switch_env, "SPENDGATE_MUTANT");
}

#[test]
fn every_locator_matches_exactly_once() {
    let Some(r) = guarded() else { return };
    sanity::check_locators(&root(), &r).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn every_refusal_site_in_the_gate_is_registered_or_exempt() {
    let Some(r) = guarded() else { return };
    let c = completeness::check(&root(), &r).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.is_complete(), "{}", c.render());
}

#[test]
fn every_named_test_exists() {
    let Some(r) = guarded() else { return };
    let opts = RunOptions::new(&root());
    sanity::check_tests(&opts, &r, &Cancel::new()).unwrap_or_else(|e| panic!("{e}"));
}
