//! `reports/attack-matrix.md` and `.json`: for every threat class, the
//! attacks that exercise it, the reason codes they met, the layer that
//! stopped them and the guards that did.
//!
//! Guarantees: generated only from the taxonomy, the corpus, one run's
//! results and the mutation registry. A class with no attack scenario is
//! listed as such, never dropped. "Reasons seen" are the codes of the steps
//! that carry each attack (`scenarios::Scenario::attack_steps`: its
//! wire-only steps when it has any, else its refused steps), on the engines
//! that sent it, never those of the steps that set it up; "stopped at" is
//! the layer of each of those codes (`service` for the service's own codes,
//! refused before the gate); "database guards" are the named
//! constraints, indexes and triggers whose refusal the gate reported outside
//! races (a `concurrent` step reports counts only: which copy meets the
//! gate's check and which the database's guard is the scheduler's choice);
//! "source guards" are the registered guards (`mutations/registry.yaml`)
//! that produce one of the reasons seen.

use std::collections::{BTreeMap, BTreeSet};

use gate::Reason;
use mutations::registry::{Locator, Registry, Selector};
use scenarios::Corpus;
use serde::Serialize;

use super::markdown::{codes, table};
use crate::bench::results::{Label, ScenarioResult};

/// One row of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    pub class: String,
    pub title: String,
    pub layer: String,
    pub attacks: Vec<String>,
    pub blocked: usize,
    pub reasons_seen: BTreeSet<String>,
    pub stopped_at: BTreeSet<String>,
    pub database_guards: BTreeSet<String>,
    pub source_guards: BTreeSet<String>,
    /// Guards the mutation registry lists against this class.
    pub registered_guards: BTreeSet<String>,
}

/// The whole matrix.
#[derive(Debug, Clone, Serialize)]
pub struct AttackMatrix {
    /// The commit the report was made from ([`super::provenance`]).
    pub made_from: String,
    pub classes: Vec<ClassRow>,
}

/// Where a code that is no gate reason stops an attack: the service, before
/// the gate.
pub const SERVICE_LAYER: &str = "service";

/// Source guards per reason code, from the registry's `produces:` selectors.
fn source_guards_by_reason(registry: &Registry) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for guard in &registry.guards {
        if let Locator::Source(source) = &guard.locator
            && let Selector::Produces(variant) = &source.selector
            && let Some(reason) = Reason::ALL.iter().find(|r| format!("{r:?}") == *variant)
        {
            out.entry(reason.code().to_string())
                .or_default()
                .insert(guard.id.clone());
        }
    }
    out
}

impl AttackMatrix {
    pub fn build(corpus: &Corpus, results: &[ScenarioResult], registry: &Registry) -> Self {
        let by_reason = source_guards_by_reason(registry);
        let classes = corpus
            .taxonomy
            .classes
            .iter()
            .map(|class| {
                let attacks: Vec<&ScenarioResult> = results
                    .iter()
                    .filter(|r| r.label == Label::Attack && r.class.as_deref() == Some(&class.id))
                    .collect();
                let reasons_seen: BTreeSet<String> = attacks
                    .iter()
                    .filter(|r| r.ran())
                    .flat_map(|r| r.attack_reasons.iter().cloned())
                    .collect();
                let stopped_at = reasons_seen
                    .iter()
                    .map(|c| match c.parse::<Reason>() {
                        Ok(r) => r.layer().as_str().to_string(),
                        Err(_) => SERVICE_LAYER.to_string(),
                    })
                    .collect();
                let source_guards = reasons_seen
                    .iter()
                    .filter_map(|c| by_reason.get(c))
                    .flatten()
                    .cloned()
                    .collect();
                ClassRow {
                    class: class.id.clone(),
                    title: class.title.clone(),
                    layer: class.layer.as_str().to_string(),
                    blocked: attacks.iter().filter(|r| r.blocked).count(),
                    attacks: attacks.iter().map(|r| r.id.clone()).collect(),
                    database_guards: attacks
                        .iter()
                        .flat_map(|r| r.guards_seen.iter().cloned())
                        .collect(),
                    reasons_seen,
                    stopped_at,
                    source_guards,
                    registered_guards: registry
                        .guards
                        .iter()
                        .filter(|g| g.threat == class.id)
                        .map(|g| g.id.clone())
                        .collect(),
                }
            })
            .collect();
        AttackMatrix {
            made_from: String::new(),
            classes,
        }
    }

    pub fn markdown(&self) -> String {
        let mut md = format!(
            "# Attack matrix\n\n{}\n\n\
             Generated by `harness report` (`make reports`) from `scenarios/taxonomy.yaml`, the\n\
             corpus, one run of it through the database-backed gate and the HTTP engine, and\n\
             `mutations/registry.yaml`. Do not edit by hand: a test fails when this file differs\n\
             from a fresh regeneration.\n\n\
             - *attacks blocked*: blocked by every engine that sent the attack;\n\
             - *reasons seen*: the codes the steps carrying the class's attacks came out with (the\n\
             wire-only steps of an attack that has any, else its refused steps; never a step that\n\
             sets the attack up), on the engines that sent them;\n\
             - *stopped at*: the gate layer each of those codes belongs to (`service`: the service's\n\
             own code, refused before the gate);\n\
             - *database guards*: named constraints, indexes and triggers whose refusal the gate reported \
             (a race reports counts only: which copy meets which guard is the scheduler's choice);\n\
             - *source guards*: registered guards that produce one of the reasons seen;\n\
             - *registered*: guards the mutation registry lists against this class.\n\n",
            super::provenance::md_line(&self.made_from)
        );
        md += &table(
            &[
                "class",
                "must stop at",
                "attacks blocked",
                "reasons seen",
                "stopped at",
                "database guards",
                "source guards",
                "registered",
            ],
            self.classes.iter().map(|c| {
                vec![
                    format!("`{}`<br>{}", c.class, c.title),
                    c.layer.clone(),
                    if c.attacks.is_empty() {
                        "no attack scenario".to_string()
                    } else {
                        format!("{}/{}", c.blocked, c.attacks.len())
                    },
                    codes(&c.reasons_seen),
                    codes(&c.stopped_at),
                    codes(&c.database_guards),
                    codes(&c.source_guards),
                    c.registered_guards.len().to_string(),
                ]
            }),
        );
        md += "\n## Scenarios per class\n\n";
        for c in &self.classes {
            md += &format!("- `{}`: {}\n", c.class, codes(&c.attacks));
        }
        md
    }
}
