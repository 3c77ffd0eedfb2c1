//! The spec's `standard` world, read from `scenarios/worlds/standard.yaml`,
//! the file the corpus runs in: for the gate's own tests (unit and
//! integration) and the harness's tours.
//!
//! Guarantees: compiled only under `cfg(test)` or the `test-support`
//! feature, so it is no part of a normal build's API. There is no Rust copy
//! of the world to drift from the file: the file deserializes into the
//! gate's own seed types with unknown keys refused (as `scenarios::World`
//! reads it), and a world file that does not fails every test that asks for
//! it. This is the one module of the gate that decodes YAML.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::catalog::CatalogItem;
use crate::policy::Policy;
use crate::seed::{Seed, TenantSeed};

/// The world file, compiled in.
pub const STANDARD_YAML: &str = include_str!("../../../scenarios/worlds/standard.yaml");

/// A world file: the clock and the tenants (the first is the default).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandardWorld {
    pub now: DateTime<Utc>,
    pub tenants: Vec<TenantSeed>,
}

/// The standard world as written.
pub fn world() -> StandardWorld {
    serde_yaml::from_str(STANDARD_YAML).expect("scenarios/worlds/standard.yaml parses")
}

/// The standard world's clock at the start of every scenario.
pub fn now() -> DateTime<Utc> {
    world().now
}

/// The standard world as the gate seeds it.
pub fn seed() -> Seed {
    Seed {
        tenants: world().tenants,
    }
}

/// `acme`, the standard world's default tenant.
pub fn acme() -> TenantSeed {
    world()
        .tenants
        .into_iter()
        .next()
        .expect("the standard world has a tenant")
}

/// The default tenant's catalog rows.
pub fn catalog() -> Vec<CatalogItem> {
    acme().catalog
}

/// The default tenant's policy.
pub fn policy() -> Policy {
    acme().policy
}
