//! Small pure helpers for the performance run: order statistics over the
//! rounds of a measurement, and the number formats the report prints.
//!
//! Guarantees: every function here is total and deterministic. An empty
//! sample has no median or percentile (`None`), never a made-up zero.

/// The `p`-th percentile (0 ≤ p ≤ 100) by linear interpolation between the
/// closest ranks of the sorted sample; `None` when the sample is empty or `p`
/// is outside 0..=100 (NaN values sort last and count as values).
pub fn percentile(sample: &[f64], p: f64) -> Option<f64> {
    if sample.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let mut sorted = sample.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lower = rank.floor() as usize;
    let upper = rank.ceil() as usize;
    let weight = rank - lower as f64;
    Some(sorted[lower] + (sorted[upper] - sorted[lower]) * weight)
}

/// The median (the mean of the two middle values of an even sample).
pub fn median(sample: &[f64]) -> Option<f64> {
    percentile(sample, 50.0)
}

/// The smallest and largest value.
pub fn min_max(sample: &[f64]) -> Option<(f64, f64)> {
    let min = sample.iter().copied().min_by(f64::total_cmp)?;
    let max = sample.iter().copied().max_by(f64::total_cmp)?;
    Some((min, max))
}

/// `events` per second over `seconds`; `None` when no time was measured.
pub fn rate(events: u64, seconds: f64) -> Option<f64> {
    (seconds > 0.0 && seconds.is_finite()).then(|| events as f64 / seconds)
}

/// An integer with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate per second: whole numbers with separators from 100 up
/// (`312,456/s`), one decimal below (`12.3/s`); `n/a` when there is none.
pub fn format_rate(per_sec: Option<f64>) -> String {
    match per_sec {
        Some(r) if r.is_finite() && r >= 99.95 => format!("{}/s", thousands(r.round() as u64)),
        Some(r) if r.is_finite() && r >= 0.0 => format!("{r:.1}/s"),
        _ => "n/a".into(),
    }
}

/// A duration in seconds with a unit that keeps three significant figures
/// or so: `850 ns`, `1.24 µs`, `12.3 ms`, `4.56 s`, `123 s`.
pub fn format_seconds(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "n/a".into();
    }
    let (value, unit) = if seconds < 1e-6 {
        (seconds * 1e9, "ns")
    } else if seconds < 1e-3 {
        (seconds * 1e6, "µs")
    } else if seconds < 1.0 {
        (seconds * 1e3, "ms")
    } else {
        (seconds, "s")
    };
    if value >= 100.0 {
        format!("{value:.0} {unit}")
    } else if value >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// KiB (as /proc reports them) in MiB with one decimal: `123.4 MiB`.
pub fn format_kib(kib: Option<u64>) -> String {
    match kib {
        Some(k) => format!("{:.1} MiB", k as f64 / 1024.0),
        None => "n/a".into(),
    }
}

/// A ratio as `2.35×`; `n/a` when there is none.
pub fn format_ratio(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() => {
            if r >= 100.0 {
                format!("{}×", thousands(r.round() as u64))
            } else {
                format!("{r:.2}×")
            }
        }
        _ => "n/a".into(),
    }
}

/// `a / b`, when `b` is a positive finite number.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && b.is_finite() && a.is_finite()).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let s = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(percentile(&s, 0.0), Some(10.0));
        assert_eq!(percentile(&s, 100.0), Some(50.0));
        assert_eq!(percentile(&s, 25.0), Some(20.0));
        assert_eq!(percentile(&s, 90.0), Some(46.0));
        assert_eq!(percentile(&s, 101.0), None);
        assert_eq!(percentile(&s, -1.0), None);
        // Order of the input does not matter.
        assert_eq!(
            percentile(&[50.0, 10.0, 40.0, 20.0, 30.0], 90.0),
            Some(46.0)
        );
    }

    #[test]
    fn min_max_and_rate() {
        assert_eq!(min_max(&[2.0, -1.0, 5.0]), Some((-1.0, 5.0)));
        assert_eq!(min_max(&[]), None);
        assert_eq!(rate(500, 2.0), Some(250.0));
        assert_eq!(rate(500, 0.0), None);
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(200_000), "200,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn rates_are_formatted_for_reading() {
        assert_eq!(format_rate(Some(312_456.4)), "312,456/s");
        assert_eq!(format_rate(Some(1_000_000.0)), "1,000,000/s");
        assert_eq!(format_rate(Some(12.34)), "12.3/s");
        assert_eq!(format_rate(Some(99.96)), "100/s");
        assert_eq!(format_rate(None), "n/a");
        assert_eq!(format_rate(Some(f64::NAN)), "n/a");
    }

    #[test]
    fn durations_ratios_and_memory() {
        assert_eq!(format_seconds(8.5e-7), "850 ns");
        assert_eq!(format_seconds(1.234e-6), "1.23 µs");
        assert_eq!(format_seconds(0.0123), "12.3 ms");
        assert_eq!(format_seconds(4.561), "4.56 s");
        assert_eq!(format_seconds(123.4), "123 s");
        assert_eq!(format_seconds(-1.0), "n/a");
        assert_eq!(format_ratio(Some(2.345)), "2.35×");
        assert_eq!(format_ratio(Some(1234.4)), "1,234×");
        assert_eq!(format_ratio(None), "n/a");
        assert_eq!(format_kib(Some(2048)), "2.0 MiB");
        assert_eq!(format_kib(None), "n/a");
    }
}
