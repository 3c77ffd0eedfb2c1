//! spendgate's reference authorization gate.
//!
//! The agent may propose only `{sku, quantity, purpose}` ([`proposal`]);
//! merchant, amount and currency are derived from the server's catalog
//! ([`catalog`]); the pure engine ([`policy`], [`delegation`], [`spend`])
//! decides; the agent is told a redacted decision ([`redact`]).
#![forbid(unsafe_code)]

pub mod catalog;
pub mod db;
pub mod delegation;
pub mod ident;
// The mutation runner's schemata switch: not part of the gate's API. Only
// the runner's instrumented scratch copy calls it (`crate::mutant_active`).
mod mutant;
pub mod policy;
pub mod proposal;
pub mod provider;
pub mod reason;
pub mod redact;
pub mod service;
pub mod spend;
pub mod text;

pub use catalog::{Catalog, CatalogItem, Purchase};
pub use delegation::{DelegationChain, DelegationHop};
#[allow(unused_imports)]
pub(crate) use mutant::mutant_active;
pub use policy::{Evaluation, Inputs, Policy, PolicyPatch, evaluate};
pub use proposal::{PurchaseProposal, parse_proposal};
pub use reason::{Decision, Layer, Reason};
pub use spend::SpendState;
