//! A world: the tenants, people, agents, catalog, policy and delegations a
//! scenario starts from, and the clock it starts at.
//!
//! Guarantees: a world file deserializes straight into the gate's own seed
//! types ([`TenantSeed`], [`gate_core::PersonSeed`],
//! [`gate_core::Grant`], [`gate_core::CatalogItem`], [`gate_core::Policy`]), every
//! one of which refuses unknown keys; [`World::check`] reports every internal
//! inconsistency (duplicate ids, a catalog item from an unknown merchant, a
//! delegation whose grantor or grantee is not in its tenant) so a world that
//! passes it can be seeded as is ([`World::seed`]). The first tenant is the
//! default tenant.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use gate_core::{Grant, Seed, TenantSeed};
use serde::{Deserialize, Serialize};

/// A world file, e.g. `scenarios/worlds/standard.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// The gate's clock when a scenario starts.
    pub now: DateTime<Utc>,
    /// The first tenant is the default tenant.
    pub tenants: Vec<TenantSeed>,
}

impl World {
    /// The default tenant (the first one).
    pub fn default_tenant(&self) -> Option<&TenantSeed> {
        self.tenants.first()
    }

    /// The tenant with this id.
    pub fn tenant(&self, id: &str) -> Option<&TenantSeed> {
        self.tenants.iter().find(|t| t.id == id)
    }

    /// The tenant an agent or a person belongs to.
    pub fn tenant_of(&self, principal: &str) -> Option<&TenantSeed> {
        self.tenants.iter().find(|t| {
            t.agents.iter().any(|a| a == principal) || t.people.iter().any(|p| p.id == principal)
        })
    }

    /// The world as the gate seeds it (everything but the clock).
    pub fn seed(&self) -> Seed {
        Seed {
            tenants: self.tenants.clone(),
        }
    }

    /// Every inconsistency in the world, as sentences; empty when sound.
    pub fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.tenants.is_empty() {
            problems.push("a world needs at least one tenant".to_string());
        }
        let mut tenant_ids = BTreeSet::new();
        let mut principals = BTreeSet::new();
        let mut delegation_ids = BTreeSet::new();
        for t in &self.tenants {
            if !tenant_ids.insert(t.id.as_str()) {
                problems.push(format!("duplicate tenant `{}`", t.id));
            }
            for p in t
                .people
                .iter()
                .map(|p| p.id.as_str())
                .chain(t.agents.iter().map(String::as_str))
            {
                if !principals.insert(p) {
                    problems.push(format!("principal `{p}` appears twice"));
                }
            }
            let mut skus = BTreeSet::new();
            for item in &t.catalog {
                if !skus.insert(item.sku.as_str()) {
                    problems.push(format!("tenant `{}`: duplicate sku `{}`", t.id, item.sku));
                }
                if !t.merchants.contains(&item.merchant) {
                    problems.push(format!(
                        "tenant `{}`: sku `{}` names unknown merchant `{}`",
                        t.id, item.sku, item.merchant
                    ));
                }
            }
            for m in &t.policy.allowed_merchants {
                if !t.merchants.contains(m) {
                    problems.push(format!(
                        "tenant `{}`: policy allows unknown merchant `{m}`",
                        t.id
                    ));
                }
            }
            let mut seen_here: Vec<&Grant> = Vec::new();
            for d in &t.delegations {
                if !delegation_ids.insert(d.id.as_str()) {
                    problems.push(format!("duplicate delegation `{}`", d.id));
                }
                let root_ok = t.people.iter().any(|p| p.id == d.from && p.may_approve);
                let parent_ok = seen_here.iter().any(|p| p.id == d.from);
                if !root_ok && !parent_ok {
                    problems.push(format!(
                        "tenant `{}`: delegation `{}` comes from `{}`, neither an approving human nor an earlier delegation of this tenant",
                        t.id, d.id, d.from
                    ));
                }
                if !t.agents.contains(&d.to) {
                    problems.push(format!(
                        "tenant `{}`: delegation `{}` goes to `{}`, not an agent of this tenant",
                        t.id, d.id, d.to
                    ));
                }
                seen_here.push(d);
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANDARD: &str = include_str!("../worlds/standard.yaml");

    fn parse(text: &str) -> Result<World, String> {
        crate::yaml::from_str::<World>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_standard_world_is_sound_and_seeds_as_written() {
        let world = parse(STANDARD).unwrap();
        assert!(world.check().is_empty(), "{:?}", world.check());
        assert_eq!(world.seed().tenants, world.tenants);
        let acme = world.default_tenant().unwrap();
        assert_eq!(
            acme.policy.valid_from.to_rfc3339(),
            "2026-01-01T00:00:00+00:00"
        );
        assert_eq!(acme.delegations[0].id, "d-buyer");
    }

    #[test]
    fn every_level_of_a_world_refuses_an_unknown_key_by_name() {
        for (from, to, key) in [
            ("\nnow:", "\nweather: 1\nnow:", "weather"),
            ("  - id: acme", "  - id: acme\n    region: eu", "region"),
            (
                "{id: intern, may_approve: false}",
                "{id: intern, may_approve: false, admin: true}",
                "admin",
            ),
            (
                "      valid_from:",
                "      spend_limit: 5\n      valid_from:",
                "spend_limit",
            ),
            (
                "budget_paise: 200000}",
                "budget_paise: 200000, ceiling: 1}",
                "ceiling",
            ),
        ] {
            let text = STANDARD.replacen(from, to, 1);
            assert_ne!(text, STANDARD, "{from}");
            let err = parse(&text).unwrap_err();
            assert!(err.contains(&format!("unknown field `{key}`")), "{err}");
        }
    }

    #[test]
    fn a_policy_needs_every_key_and_an_rfc3339_window() {
        let text = STANDARD.replacen("      valid_from: \"2026-01-01T00:00:00Z\"\n", "", 1);
        assert!(
            parse(&text)
                .unwrap_err()
                .contains("missing field `valid_from`")
        );
        let text = STANDARD.replacen("2026-01-01T00:00:00Z", "new year", 1);
        assert!(parse(&text).is_err());
    }

    #[test]
    fn delegations_and_is_operator_may_be_left_out() {
        let text = STANDARD.replacen(
            "      - {id: d-buyer, from: finance-lead, to: buyer-agent, budget_paise: 200000}\n",
            "",
            1,
        );
        let text = text.replacen("    delegations:\n", "", 1);
        let world = parse(&text).unwrap();
        let acme = world.default_tenant().unwrap();
        assert!(acme.delegations.is_empty());
        assert!(acme.people.iter().all(|p| !p.is_operator));
    }
}
