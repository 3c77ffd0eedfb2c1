//! A world file's types: its tenants and everything each owns (people,
//! agents, merchants, catalog, policy, delegations).
//!
//! Guarantees: plain data with a world file's keys and no other (each
//! struct denies unknown fields), so a world file deserializes straight into
//! them without knowing the database's schema; the gate writes a seed in one
//! transaction, and the corpus reads its worlds into the same types.

use serde::{Deserialize, Serialize};

use crate::catalog::CatalogItem;
use crate::grant::Grant;
use crate::policy::Policy;

/// A world's tenants, the first being the default one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    pub tenants: Vec<TenantSeed>,
}

/// One tenant and everything it owns, with a world file's keys (none other
/// accepted; `delegations` may be left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSeed {
    pub id: String,
    pub people: Vec<PersonSeed>,
    pub agents: Vec<String>,
    /// Every merchant the tenant knows; which may be paid is the policy's
    /// `allowed_merchants`.
    pub merchants: Vec<String>,
    pub catalog: Vec<CatalogItem>,
    pub policy: Policy,
    /// Granted in order, so a hop's parent comes before it.
    #[serde(default)]
    pub delegations: Vec<Grant>,
}

impl TenantSeed {
    /// The catalog row for a sku.
    pub fn item(&self, sku: &str) -> Option<&CatalogItem> {
        self.catalog.iter().find(|i| i.sku == sku)
    }
}

/// A human of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonSeed {
    pub id: String,
    pub may_approve: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_operator: bool,
}
