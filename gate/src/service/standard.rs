//! The spec's `standard` world for the gate's unit tests, read from
//! `scenarios/worlds/standard.yaml`, the file the corpus runs in.
//!
//! Guarantees: compiled only under `cfg(test)`, so it is no part of the
//! gate's API; there is no Rust copy of the world to drift from the file: a
//! world file that does not deserialize into the gate's seed types fails
//! every test that asks for it.

use serde::Deserialize;

use super::seed::TenantSeed;
use crate::catalog::CatalogItem;
use crate::policy::Policy;

/// The world file, compiled in.
const STANDARD_YAML: &str = include_str!("../../../scenarios/worlds/standard.yaml");

/// The part of the world file the unit tests use (the clock is `scenarios`').
#[derive(Deserialize)]
struct Tenants {
    tenants: Vec<TenantSeed>,
}

/// `acme`, the standard world's default tenant.
pub(crate) fn acme() -> TenantSeed {
    let world: Tenants = serde_yaml::from_str(STANDARD_YAML).expect("the standard world parses");
    world
        .tenants
        .into_iter()
        .next()
        .expect("the standard world has a tenant")
}

/// The standard catalog's rows.
pub(crate) fn standard_catalog() -> Vec<CatalogItem> {
    acme().catalog
}

/// The standard policy.
pub(crate) fn standard_policy() -> Policy {
    acme().policy
}
