//! Progress and proportions, shown the same way by every subcommand.
//!
//! Guarantees: [`bar`] draws on stderr only when stderr is a terminal (a
//! hidden bar otherwise, so logs and CI output get plain lines from the
//! caller instead); a bad template never panics (the default style is used).
//! [`pct`] and [`pct_digits`] depend only on their input: a ratio with
//! nothing to divide by prints `n/a`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Whether progress can be drawn (stderr is a terminal).
pub fn drawable() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `len` steps in `template` (indicatif's syntax), hidden when
/// stderr is not a terminal.
pub fn bar(len: usize, template: &str) -> ProgressBar {
    if !drawable() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// `12.3%`, or `n/a` when there is nothing to divide by.
pub fn pct(x: Option<f64>) -> String {
    pct_digits(x, 1)
}

/// A ratio as a percentage with `digits` decimals, or `n/a`.
pub fn pct_digits(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{:.digits$}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_and_say_when_undefined() {
        assert_eq!(pct(Some(0.1234)), "12.3%");
        assert_eq!(pct(Some(1.0)), "100.0%");
        assert_eq!(pct_digits(Some(0.996), 0), "100%");
        assert_eq!(pct(None), "n/a");
        assert_eq!(pct_digits(None, 0), "n/a");
    }

    #[test]
    fn a_bad_template_falls_back_instead_of_panicking() {
        let b = bar(3, "{bar:40} {nonsense");
        b.inc(1);
        b.finish_and_clear();
    }
}
