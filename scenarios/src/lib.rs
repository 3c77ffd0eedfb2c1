//! spendgate's adversarial scenario corpus: models, loader, held-out split.
//!
//! Guarantees: every type here mirrors `shared/spec/scenarios.md` key for
//! key and refuses unknown keys; [`load_corpus`] / [`Corpus::load`] refuse
//! every malformed scenario with its file, id and offending key or value,
//! and lose nothing else. Data flows one way: this crate uses the decision
//! core's vocabulary (`gate-core`: reasons, policies, seed types, grants,
//! request states), never the gate's database service, and neither knows
//! anything of it.
#![forbid(unsafe_code)]

pub mod clock;
pub mod error;
pub mod expect;
pub mod format_doc;
pub mod generate;
pub mod heldout;
pub mod ids;
pub mod loader;
pub mod oracle;
pub mod references;
pub mod scenario;
pub mod step;
pub mod tables;
pub mod taxonomy;
pub mod verbs;
pub mod wire;
pub mod world;
pub mod yaml;

pub use error::{LoadError, LoadErrorKind};
pub use expect::{Counts, DecisionKind, Expect, LoginExpect, PRIVILEGE, StepExpect};
pub use gate_core::RequestState;
/// The policy types are the decision core's: a world file and a `set_policy` step
/// deserialize straight into them.
pub use gate_core::policy::{DenialRate, Policy, PolicyPatch, Velocity};
pub use loader::{Corpus, LoadOptions, Origin, load_corpus, project_dir};
pub use scenario::{Invariants, Label, Scenario};
pub use step::{Concurrent, Step, VERBS, Verb};
pub use taxonomy::{Taxonomy, ThreatClass, ThreatLayer};
pub use verbs::{
    AdvanceClock, Approve, Cancel, Checkout, Grant, Login, MandateSignature, Pay, Propose,
    Provider, ProviderCapture, ProviderMode, Replay, Revoke, SetClock, SetPolicy, SetPrice,
    Signature, Webhook,
};
pub use wire::{HeaderValues, KeyTrick, WireStep};
pub use world::World;
