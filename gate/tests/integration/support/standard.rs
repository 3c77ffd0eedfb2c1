//! The spec's `standard` world, read from `scenarios/worlds/standard.yaml`,
//! the file the corpus runs in (the gate's tests keep no copy of it).
//!
//! Guarantees: the world deserializes into the gate's own seed types with
//! unknown keys refused, as `scenarios::World` reads it; this is the one
//! module of the gate's integration tests that decodes YAML.

use chrono::{DateTime, Utc};
use gate::catalog::CatalogItem;
use gate::service::{Seed, TenantSeed};
use serde::Deserialize;

/// The world file, compiled in.
pub const STANDARD_YAML: &str = include_str!("../../../../scenarios/worlds/standard.yaml");

/// A world file: the clock and the tenants.
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

/// The default tenant's catalog rows.
pub fn catalog() -> Vec<CatalogItem> {
    world()
        .tenants
        .into_iter()
        .next()
        .map(|t| t.catalog)
        .unwrap_or_default()
}
