//! `mutations`: finds, deletes and judges spendgate's registered guards.
//!
//! `mutations/registry.yaml` names every guard the gate relies on: where it
//! lives (a statement or condition in a Rust function, or a constraint,
//! trigger or index in the schema), what it defends, and the tests that must
//! fail without it. This crate proves those claims by removing each guard,
//! one at a time, in a scratch copy of the workspace and running its tests.
//!
//! Guarantees of the crate as a whole:
//! - the user's tree is only ever read ([`runner::run`] proves it at the end);
//! - a guard is located by syntax, exactly once, or the run stops with
//!   registry drift naming the entry ([`locate`]);
//! - a mutant counts as caught only when one of its own named tests failed,
//!   and a named test that did not run is never counted as passing
//!   ([`runner`], [`libtest`]);
//! - schemata and rewrite modes judge the same mutants the same way
//!   ([`schemata`], [`rewrite`]);
//! - every refusal site in the gate is registered or exempt with a reason,
//!   or [`completeness::check`] says where it is not.
//!
//! Layout (one concept per module): the registry model ([`registry`],
//! [`testref`]); the syntax model and the locator ([`syntax`], [`locate`]);
//! the two ways to apply a mutant ([`textedit`], [`rewrite`], [`schemata`])
//! and their contracts with the code under test ([`switch`],
//! [`drop_guards`]); the run ([`options`], [`plan`], [`scratch`], [`tree`],
//! [`process`], [`cargo`], [`lane`], [`runner`], [`outcome`], [`event`],
//! [`cancel`]); the registry checks ([`completeness`], [`sanity`]); and the
//! committed report ([`report`]). YAML is read through the private `yaml`
//! module alone.
#![forbid(unsafe_code)]

pub mod cancel;
pub mod cargo;
pub mod completeness;
pub mod drop_guards;
pub mod error;
pub mod event;
pub mod lane;
pub mod libtest;
pub mod locate;
pub mod merge;
pub mod migrations;
pub mod options;
pub mod outcome;
pub mod plan;
pub mod process;
pub mod registry;
pub mod report;
pub mod rewrite;
pub mod runner;
pub mod sanity;
pub mod schemata;
pub mod scratch;
pub mod switch;
pub mod syntax;
pub mod testref;
pub mod textedit;
pub mod tree;
pub mod verdict;
mod yaml;

pub use cancel::Cancel;
pub use error::{Error, Result};
pub use event::{Event, Observer};
pub use options::{Mode, RunOptions, Shard};
pub use outcome::{MutantOutcome, Report, Verdict};
pub use registry::Registry;
pub use runner::run;
