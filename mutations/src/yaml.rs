//! The crate's one door to YAML (`registry.yaml` and its test references).
//!
//! Guarantees: this is the only file of the `mutations` crate that names the
//! YAML implementation; every other file decodes YAML through [`from_str`],
//! so replacing `serde_yaml` (unmaintained upstream, RUSTSEC-2024-0320; see
//! DESIGN.md, "Dependencies worth a note") with a maintained fork is a
//! change to the `pub use` line.

pub(crate) use serde_yaml::from_str;
