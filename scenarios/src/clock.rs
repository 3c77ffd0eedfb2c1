//! The clock bound: a scenario's clock stays within ±10 years of its world's
//! `now`.
//!
//! Guarantees: [`check`] follows the clock through a scenario's steps
//! (`advance_clock` moves it, `set_clock` puts it, a `concurrent`
//! `advance_clock` moves it `times` times) and refuses the first move or
//! instant that would take it outside `[now - 10 years, now + 10 years]`, or
//! that chrono cannot represent at all, naming the step's path and field
//! (`steps[3].advance_clock.minutes`). A webhook's
//! `created_at_offset_minutes` is held to the same ±10 years around the
//! clock. Every computation is checked: no input makes this panic, and a
//! scenario that passes leaves a runner nothing that overflows.

use chrono::{DateTime, Months, Utc};

use crate::error::{LoadErrorKind, ParseError};
use crate::step::{Step, Verb};
use crate::yaml::join;

/// How far from the world's `now` a scenario's clock may go, in years.
pub const BOUND_YEARS: u32 = 10;

/// The earliest and latest instants a scenario's clock may show.
pub fn bounds(now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let months = Months::new(BOUND_YEARS * 12);
    Some((
        now.checked_sub_months(months)?,
        now.checked_add_months(months)?,
    ))
}

fn refuse(path: String, message: String) -> ParseError {
    LoadErrorKind::InvalidValue { path, message }.into()
}

/// Checks every clock move of `steps` against the bound around `now`.
pub fn check(steps: &[Step], now: DateTime<Utc>) -> Result<(), ParseError> {
    let Some((lo, hi)) = bounds(now) else {
        return Err(refuse(
            "world.now".into(),
            format!("the world's now {now} is too close to the end of time"),
        ));
    };
    let within = |t: DateTime<Utc>| t >= lo && t <= hi;
    let bound_text =
        format!("the clock must stay within ±{BOUND_YEARS} years of {now} ({lo} to {hi})");
    // The widest webhook offset: the bound's own width.
    let max_offset = (hi - now).num_minutes();
    let mut clock = now;
    for (i, step) in steps.iter().enumerate() {
        let path = format!("steps[{i}]");
        let (verb, times, verb_path) = match &step.verb {
            Verb::Concurrent(c) => (
                &c.step.verb,
                c.times,
                join(&join(&path, "concurrent.step"), c.step.verb.name()),
            ),
            v => (v, 1, join(&path, v.name())),
        };
        match verb {
            Verb::AdvanceClock(a) => {
                let field = join(&verb_path, a.field());
                let moved = a
                    .duration()
                    .and_then(|d| d.checked_mul(i32::try_from(times).ok()?))
                    .and_then(|d| clock.checked_add_signed(d));
                match moved {
                    Some(t) if within(t) => clock = t,
                    Some(t) => {
                        return Err(refuse(
                            field,
                            format!("moves the clock to {t}; {bound_text}"),
                        ));
                    }
                    None => {
                        return Err(refuse(
                            field,
                            format!("is not a representable clock move; {bound_text}"),
                        ));
                    }
                }
            }
            Verb::SetClock(s) => {
                if !within(s.at) {
                    return Err(refuse(
                        join(&verb_path, "at"),
                        format!("puts the clock at {}; {bound_text}", s.at),
                    ));
                }
                clock = s.at;
            }
            Verb::Webhook(w) => {
                if let Some(offset) = w.created_at_offset_minutes
                    && offset.checked_abs().is_none_or(|m| m > max_offset)
                {
                    return Err(refuse(
                        join(&verb_path, "created_at_offset_minutes"),
                        format!(
                            "{offset} minutes is beyond ±{BOUND_YEARS} years ({max_offset} minutes)"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(text: &str) -> Vec<Step> {
        let v: Vec<crate::yaml::Value> = crate::yaml::from_str(text).unwrap();
        v.iter()
            .enumerate()
            .map(|(i, s)| Step::parse(s, &format!("steps[{i}]")).unwrap())
            .collect()
    }

    fn now() -> DateTime<Utc> {
        "2026-09-03T10:00:00Z".parse().unwrap()
    }

    fn refused(text: &str) -> (String, String) {
        match check(&steps(text), now()).unwrap_err().0 {
            LoadErrorKind::InvalidValue { path, message } => (path, message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn moves_within_ten_years_either_way_pass() {
        let ok = "- {advance_clock: {minutes: 1440}}\n- {advance_clock: {seconds: -1}}\n\
                  - {set_clock: {at: '2036-09-03T10:00:00Z'}}\n- {advance_clock: {minutes: -5259600}}\n";
        check(&steps(ok), now()).unwrap();
    }

    #[test]
    fn huge_and_cumulative_moves_are_refused_with_the_field() {
        let (path, message) = refused("- {advance_clock: {minutes: 9223372036854775807}}\n");
        assert_eq!(path, "steps[0].advance_clock.minutes");
        assert!(message.contains("10 years"), "{message}");
        let (path, _) = refused("- {advance_clock: {seconds: -9223372036854775808}}\n");
        assert_eq!(path, "steps[0].advance_clock.seconds");
        let (path, _) = refused(
            "- {advance_clock: {minutes: 5000000}}\n- {advance_clock: {minutes: 1000000}}\n",
        );
        assert_eq!(path, "steps[1].advance_clock.minutes");
        let (path, _) = refused("- {set_clock: {at: '2036-09-03T10:00:01Z'}}\n");
        assert_eq!(path, "steps[0].set_clock.at");
        let (path, _) = refused("- {set_clock: {at: '2016-09-03T09:59:59Z'}}\n");
        assert_eq!(path, "steps[0].set_clock.at");
        let (path, _) =
            refused("- {concurrent: {times: 3, step: {advance_clock: {minutes: 2000000}}}}\n");
        assert_eq!(path, "steps[0].concurrent.step.advance_clock.minutes");
        let (path, _) = refused(
            "- {name: o1, pay: {authority: c}}\n- {webhook: {order: o1, created_at_offset_minutes: -9223372036854775808}}\n",
        );
        assert_eq!(path, "steps[1].webhook.created_at_offset_minutes");
    }
}
