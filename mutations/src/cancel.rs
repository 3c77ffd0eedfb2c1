//! A cancellation flag shared between whoever receives SIGINT/SIGTERM and
//! the runner.
//!
//! Guarantees: once [`Cancel::cancel`] is called, every wait in the runner
//! notices within a poll interval (tens of milliseconds), kills the child
//! process group it is waiting on and returns [`crate::Error::Interrupted`];
//! the scratch copy is removed as that error unwinds. This crate installs no
//! signal handler itself: the binary owns process-wide state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cloneable "stop now" flag.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Err(Interrupted)` once cancelled.
    pub fn check(&self) -> crate::Result<()> {
        if self.is_cancelled() {
            Err(crate::Error::Interrupted)
        } else {
            Ok(())
        }
    }
}
