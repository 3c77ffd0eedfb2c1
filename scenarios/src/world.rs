//! A world: the tenants, people, agents, catalog, policy and delegations a
//! scenario starts from.
//!
//! Guarantees: every type refuses unknown keys; [`World::check`] reports
//! every internal inconsistency (duplicate ids, a catalog item from an
//! unknown merchant, a delegation whose grantor or grantee is not in its
//! tenant) so a world that passes it can be handed to the harness as is.
//! The first tenant is the default tenant.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::policy::WorldPolicy;

/// A world file, e.g. `scenarios/worlds/standard.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    /// The gate's clock when a scenario starts.
    pub now: DateTime<Utc>,
    /// The first tenant is the default tenant.
    pub tenants: Vec<Tenant>,
}

/// One tenant and everything it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    pub id: String,
    pub people: Vec<Person>,
    pub agents: Vec<String>,
    /// Every merchant the tenant knows; which may be paid is the policy's
    /// `allowed_merchants`.
    pub merchants: Vec<String>,
    pub catalog: Vec<CatalogItem>,
    pub policy: WorldPolicy,
    #[serde(default)]
    pub delegations: Vec<Delegation>,
}

/// A human of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Person {
    pub id: String,
    pub may_approve: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_operator: bool,
}

/// One catalog row. Money in the currency's minor unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogItem {
    pub sku: String,
    pub merchant: String,
    pub price_paise: i64,
    pub currency: String,
    pub category: String,
    pub max_quantity: u32,
    pub available: bool,
    pub description: String,
}

/// A delegation hop; the same fields as the `grant` verb.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegation {
    pub id: String,
    /// A human who may approve (root hop) or the id of a live delegation.
    pub from: String,
    /// The agent that may spend under it.
    pub to: String,
    pub budget_paise: i64,
    /// `None` means every sku the parent allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skus: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl World {
    /// The default tenant (the first one).
    pub fn default_tenant(&self) -> Option<&Tenant> {
        self.tenants.first()
    }

    /// The tenant with this id.
    pub fn tenant(&self, id: &str) -> Option<&Tenant> {
        self.tenants.iter().find(|t| t.id == id)
    }

    /// The tenant an agent or a person belongs to.
    pub fn tenant_of(&self, principal: &str) -> Option<&Tenant> {
        self.tenants.iter().find(|t| {
            t.agents.iter().any(|a| a == principal) || t.people.iter().any(|p| p.id == principal)
        })
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
            let mut seen_here: Vec<&Delegation> = Vec::new();
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

impl Tenant {
    /// The catalog row for a sku.
    pub fn item(&self, sku: &str) -> Option<&CatalogItem> {
        self.catalog.iter().find(|i| i.sku == sku)
    }

    /// The person with this id.
    pub fn person(&self, id: &str) -> Option<&Person> {
        self.people.iter().find(|p| p.id == id)
    }
}
