//! Progress events a run emits, for a progress bar or plain log lines.
//!
//! Guarantees: events are delivered on the thread that called
//! [`crate::runner::run`], in order; `MutantDone` comes exactly once per
//! judged mutant, after its `MutantStarted`.

use std::path::PathBuf;

use crate::outcome::MutantOutcome;

/// Something that happened during a run.
#[derive(Debug, Clone)]
pub enum Event {
    /// A phase began (copying, building, baseline, ...).
    Phase(String),
    /// The scratch copy exists at this path (removed at the end).
    ScratchReady(PathBuf),
    /// This many mutants will be judged.
    Planned(usize),
    MutantStarted(String),
    MutantDone(Box<MutantOutcome>),
    /// Something the user should know that does not stop the run.
    Warning(String),
}

/// Receives events.
pub trait Observer {
    fn event(&mut self, event: &Event);
}

impl<F: FnMut(&Event)> Observer for F {
    fn event(&mut self, event: &Event) {
        self(event)
    }
}
