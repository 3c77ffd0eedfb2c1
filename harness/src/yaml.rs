//! The binary's one door to YAML (the standard world, the outside audit's
//! classification file).
//!
//! Guarantees: this is the only file of `harness` that names the YAML
//! implementation; every other file decodes YAML through [`from_str`], so
//! replacing `serde_yaml` (unmaintained upstream, RUSTSEC-2024-0320; see
//! DESIGN.md, "Dependencies worth a note") with a maintained fork is a
//! change to the `pub use` line.

pub use serde_yaml::from_str;
