//! The closed list of threat classes (`scenarios/taxonomy.yaml`).
//!
//! Guarantees: a [`Taxonomy`] loaded through [`Taxonomy::from_yaml`] has
//! unique, dotted-kebab class ids, each with one of the eight layers, a
//! title, a one-sentence description and at least one reference; unknown
//! keys are refused.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::ids::is_dotted_kebab;

/// The lowest layer of the gate that must stop a threat class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreatLayer {
    ToolBoundary,
    Policy,
    Delegation,
    Approval,
    CheckoutAuthority,
    ProviderEvent,
    Ledger,
    DatabaseConstraint,
}

impl ThreatLayer {
    /// Every layer, bottom of the request path first.
    pub const ALL: [ThreatLayer; 8] = [
        ThreatLayer::ToolBoundary,
        ThreatLayer::Policy,
        ThreatLayer::Delegation,
        ThreatLayer::Approval,
        ThreatLayer::CheckoutAuthority,
        ThreatLayer::ProviderEvent,
        ThreatLayer::Ledger,
        ThreatLayer::DatabaseConstraint,
    ];

    /// The kebab-case name, as in taxonomy.yaml.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreatLayer::ToolBoundary => "tool-boundary",
            ThreatLayer::Policy => "policy",
            ThreatLayer::Delegation => "delegation",
            ThreatLayer::Approval => "approval",
            ThreatLayer::CheckoutAuthority => "checkout-authority",
            ThreatLayer::ProviderEvent => "provider-event",
            ThreatLayer::Ledger => "ledger",
            ThreatLayer::DatabaseConstraint => "database-constraint",
        }
    }
}

/// One threat class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreatClass {
    /// Dotted kebab-case, e.g. `tool-boundary.extra-field`.
    pub id: String,
    pub title: String,
    pub layer: ThreatLayer,
    pub description: String,
    pub refs: Vec<String>,
}

/// The closed list of threat classes, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Taxonomy {
    pub classes: Vec<ThreatClass>,
}

impl Taxonomy {
    /// Parses and checks a taxonomy file's text; every problem is returned.
    pub fn from_yaml(text: &str) -> Result<Taxonomy, Vec<String>> {
        let taxonomy: Taxonomy = crate::yaml::from_str(text).map_err(|e| vec![e.to_string()])?;
        let problems = taxonomy.check();
        if problems.is_empty() {
            Ok(taxonomy)
        } else {
            Err(problems)
        }
    }

    /// The class with this id.
    pub fn get(&self, id: &str) -> Option<&ThreatClass> {
        self.classes.iter().find(|c| c.id == id)
    }

    /// Whether a class with this id exists.
    pub fn contains(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Every problem with the list, as sentences.
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = BTreeSet::new();
        for c in &self.classes {
            if !seen.insert(c.id.as_str()) {
                problems.push(format!("duplicate class `{}`", c.id));
            }
            if !is_dotted_kebab(&c.id) {
                problems.push(format!("class id `{}` is not dotted kebab-case", c.id));
            }
            if c.title.trim().is_empty() || c.description.trim().is_empty() {
                problems.push(format!("class `{}` needs a title and a description", c.id));
            }
            if c.refs.is_empty() {
                problems.push(format!("class `{}` has no refs", c.id));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "- id: tool-boundary.extra-field\n  title: t\n  layer: tool-boundary\n  description: d.\n  refs: [x]\n";

    #[test]
    fn parses_a_class() {
        let t = Taxonomy::from_yaml(ONE).unwrap();
        assert_eq!(t.classes[0].layer, ThreatLayer::ToolBoundary);
        assert!(t.contains("tool-boundary.extra-field"));
    }

    #[test]
    fn refuses_duplicates_bad_ids_unknown_layers_and_keys() {
        let dup = format!("{ONE}{ONE}");
        assert!(Taxonomy::from_yaml(&dup).unwrap_err()[0].contains("duplicate"));
        let bad = ONE.replace("tool-boundary.extra-field", "ExtraField");
        assert!(Taxonomy::from_yaml(&bad).unwrap_err()[0].contains("dotted"));
        let layer = ONE.replace("layer: tool-boundary", "layer: identity");
        assert!(Taxonomy::from_yaml(&layer).is_err());
        let key = format!("{ONE}  severity: high\n");
        assert!(Taxonomy::from_yaml(&key).unwrap_err()[0].contains("severity"));
    }
}
