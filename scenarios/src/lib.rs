//! spendgate's adversarial scenario corpus: the models of worlds and
//! scenarios, the loader that refuses malformed files with file, id and key,
//! the held-out split and the seeded generator.
//!
//! Guarantees so far: [`world::World`] and [`policy::WorldPolicy`] mirror the
//! spec's `standard` world key for key and refuse unknown keys.
#![forbid(unsafe_code)]

pub mod policy;
pub mod world;

pub use policy::{DenialRate, PolicyPatch, Velocity, WorldPolicy};
pub use world::{CatalogItem, Delegation, Person, Tenant, World};
