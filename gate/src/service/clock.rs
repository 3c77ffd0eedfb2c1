//! The gate's clock, injected.
//!
//! Guarantees: every time the stateful gate reads or writes comes from one
//! [`Clock`] it was built with; nothing in `service` reads the system clock
//! or the database's `now()` on its own. [`ManualClock`] moves only when told
//! to, so tests and scenarios are deterministic; [`SystemClock`] is the
//! production clock.

use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

/// Where the gate gets "now".
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until it is set or advanced.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(now: DateTime<Utc>) -> Self {
        ManualClock {
            now: Mutex::new(now),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut DateTime<Utc>) -> T) -> T {
        let mut guard = match self.now.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Sets the clock to `now`.
    pub fn set(&self, now: DateTime<Utc>) {
        self.with(|t| *t = now);
    }

    /// Moves the clock by `by` (which may be negative) and returns the new time.
    pub fn advance(&self, by: Duration) -> DateTime<Utc> {
        self.with(|t| {
            *t += by;
            *t
        })
    }

    /// Moves the clock forward by whole minutes, as the corpus's `advance_clock` does.
    pub fn advance_minutes(&self, minutes: i64) -> DateTime<Utc> {
        self.advance(Duration::minutes(minutes))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        self.with(|t| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = Utc.with_ymd_and_hms(2026, 9, 3, 10, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.advance_minutes(16), start + Duration::minutes(16));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }
}
