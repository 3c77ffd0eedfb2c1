//! What an agent and its tenant have already done, as the engine sees it.
//!
//! Guarantees (pure): windows are half-open, `(now - window, now]`: an event
//! exactly `window` minutes old has left the window. Events stamped in the
//! future count (a clock that runs backwards must not reopen a window).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The spend state the policy engine needs for one proposal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendState {
    /// The tenant's reservations for the current UTC day, in minor units.
    pub spent_today_paise: i64,
    /// When this agent's earlier proposals were recorded, whatever their decision.
    pub proposals: Vec<DateTime<Utc>>,
    /// When this agent's earlier proposals were refused.
    pub denials: Vec<DateTime<Utc>>,
}

/// How many of `events` fall in the last `window_minutes` before `now`.
pub fn count_in_window(events: &[DateTime<Utc>], now: DateTime<Utc>, window_minutes: u32) -> usize {
    let start = now - Duration::minutes(i64::from(window_minutes));
    events.iter().filter(|t| **t > start).count()
}

/// When a window holding `max` or more of `events` at `now` next holds
/// fewer: when the oldest event that keeps it at `max` leaves it (an event
/// exactly `window_minutes` old has left). `None` when it holds fewer now.
pub fn reopens_at(
    events: &[DateTime<Utc>],
    now: DateTime<Utc>,
    window_minutes: u32,
    max: u32,
) -> Option<DateTime<Utc>> {
    let window = Duration::minutes(i64::from(window_minutes));
    let start = now - window;
    let mut counted: Vec<DateTime<Utc>> = events.iter().copied().filter(|t| *t > start).collect();
    let max = usize::try_from(max).ok()?;
    if counted.len() < max || max == 0 {
        return None;
    }
    counted.sort_unstable();
    // Once the first `len - max + 1` have left, `max - 1` remain.
    counted.get(counted.len() - max).map(|t| *t + window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_window_is_half_open() {
        let now = Utc.with_ymd_and_hms(2026, 9, 3, 10, 0, 0).unwrap();
        let m = |x: i64| now - Duration::minutes(x);
        let events = [m(60), m(59), m(0), now + Duration::minutes(5)];
        assert_eq!(count_in_window(&events, now, 60), 3);
        assert_eq!(count_in_window(&events, now, 61), 4);
        assert_eq!(count_in_window(&[], now, 60), 0);
    }

    #[test]
    fn a_full_window_reopens_when_its_oldest_counted_event_leaves() {
        let now = Utc.with_ymd_and_hms(2026, 9, 3, 10, 0, 0).unwrap();
        let m = |x: i64| now - Duration::minutes(x);
        // 60 minutes, at most 3: the event 61 minutes old no longer counts.
        let events = [m(61), m(50), m(20), m(5)];
        assert_eq!(
            reopens_at(&events, now, 60, 3),
            Some(m(50) + Duration::minutes(60))
        );
        assert_eq!(
            reopens_at(&events, now, 60, 2),
            Some(m(20) + Duration::minutes(60))
        );
        assert_eq!(reopens_at(&events, now, 60, 4), None);
        assert_eq!(reopens_at(&events, now, 60, 0), None);
        // In any order.
        let shuffled = [m(5), m(50), m(61), m(20)];
        assert_eq!(
            reopens_at(&shuffled, now, 60, 3),
            Some(m(50) + Duration::minutes(60))
        );
    }
}
