//! spendgate's decision core: everything the gate decides that needs no
//! database, clock, randomness or network.
//!
//! The agent may propose only `{sku, quantity, purpose}` ([`proposal`], with
//! the text and identifier rules of [`text`] and [`ident`]); merchant, amount
//! and currency are derived from the server's catalog ([`catalog`]); the
//! policy engine ([`policy`]) decides over the delegation chain
//! ([`delegation`]) and the spend so far ([`spend`]), naming its reasons
//! ([`reason`]); the agent is told a redacted decision ([`redact`]).
//!
//! Guarantees: pure by construction. The crate depends on no database,
//! async runtime, network or HTTP crate (`tests/dependencies.rs` reads
//! `cargo tree` to keep it so); every instant it compares is passed in. The
//! one environment read is the mutation runner's switch ([`mutant`]), which
//! only the runner's instrumented copy calls.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod delegation;
pub mod grant;
pub mod ident;
pub mod mismatch;
pub mod mutant;
pub mod policy;
pub mod proposal;
pub mod reason;
pub mod redact;
pub mod request_state;
pub mod seed;
pub mod spend;
pub mod text;
pub mod webhook_signature;

#[cfg(test)]
mod standard_world;

pub use catalog::{Catalog, CatalogItem, Purchase};
pub use delegation::{DelegationChain, DelegationHop};
pub use grant::{Grant, HopTerms};
#[doc(hidden)]
pub use mutant::mutant_active;
pub use policy::{Evaluation, Inputs, Policy, PolicyPatch, evaluate};
pub use proposal::{PurchaseProposal, parse_proposal};
pub use reason::{Decision, Layer, Reason};
pub use request_state::{RequestState, UnknownState};
pub use seed::{PersonSeed, Seed, TenantSeed};
pub use spend::SpendState;
