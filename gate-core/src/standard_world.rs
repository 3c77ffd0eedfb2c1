//! The spec's `standard` world's default tenant, read from
//! `scenarios/worlds/standard.yaml` (the file the corpus runs in) for this
//! crate's unit tests: its catalog and its policy, nothing else.

use serde::Deserialize;

use crate::catalog::CatalogItem;
use crate::policy::Policy;

#[derive(Deserialize)]
struct World {
    tenants: Vec<Tenant>,
}

#[derive(Deserialize)]
struct Tenant {
    catalog: Vec<CatalogItem>,
    policy: Policy,
}

fn acme() -> Tenant {
    let world: World = serde_yaml::from_str(include_str!("../../scenarios/worlds/standard.yaml"))
        .expect("scenarios/worlds/standard.yaml parses");
    world
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
