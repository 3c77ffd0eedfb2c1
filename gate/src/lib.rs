//! spendgate's reference authorization gate.
//!
//! The decision itself is the pure core, `gate-core`, re-exported here under
//! its own module names ([`proposal`], [`catalog`], [`policy`],
//! [`delegation`], [`spend`], [`reason`], [`redact`], [`text`], [`ident`]);
//! this crate adds what needs the world: the Postgres-backed service
//! ([`service`]), its database helpers ([`db`]) and the payment providers
//! ([`provider`]).
#![forbid(unsafe_code)]

pub mod db;
pub mod provider;
pub mod service;

pub use gate_core::{
    catalog, delegation, grant, ident, mismatch, policy, proposal, reason, redact, request_state,
    seed, spend, text, webhook_signature,
};

pub use catalog::{Catalog, CatalogItem, Purchase};
pub use delegation::{DelegationChain, DelegationHop};
// The mutation runner's schemata switch (`crate::mutant_active` in the
// runner's instrumented copy): the core's, one switch for both crates.
#[allow(unused_imports)]
pub(crate) use gate_core::mutant_active;
pub use policy::{Evaluation, Inputs, Policy, PolicyPatch, evaluate};
pub use proposal::{PurchaseProposal, parse_proposal};
pub use reason::{Decision, Layer, Reason};
pub use spend::SpendState;
