//! Progress and proportions, shown the same way by every subcommand.
//!
//! Guarantees: [`bar`] is the one progress bar (one style, an optional
//! right-aligned label) and draws on stderr only when stderr is a terminal (a
//! hidden bar otherwise, so logs and CI output get plain lines from the
//! caller instead). [`Steps`] is a bar on a terminal and a plain line at
//! about every tenth step otherwise. [`pct`], [`pct_digits`] and
//! [`pct_change`] depend only on their input: a ratio with nothing to divide
//! by prints `n/a`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// The one style: `label bar pos/len elapsed message`.
const STYLE: &str = "{prefix}{bar:40} {pos}/{len} {elapsed_precise} {msg}";

/// Labels are right-aligned to this width, so stacked bars line up.
const LABEL_WIDTH: usize = 28;

/// Whether progress can be drawn (stderr is a terminal).
pub fn drawable() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `len` steps labelled `label` (none when empty), hidden when
/// stderr is not a terminal.
pub fn bar(len: usize, label: &str) -> ProgressBar {
    if !drawable() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(STYLE).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if !label.is_empty() {
        bar.set_prefix(format!("{label:>LABEL_WIDTH$} "));
    }
    bar
}

/// Steps of a named task: a [`bar`] on a terminal; otherwise a line
/// `who: name done/len` at about every tenth step and at the last.
pub struct Steps {
    bar: ProgressBar,
    who: &'static str,
    name: String,
    len: usize,
    done: usize,
    every: usize,
}

impl Steps {
    /// `len` steps of `name`, lines prefixed by `who` when not drawn.
    pub fn new(who: &'static str, len: usize, name: &str) -> Self {
        Steps {
            bar: bar(len, name),
            who,
            name: name.to_string(),
            len,
            done: 0,
            every: (len / 10).max(1),
        }
    }

    /// One more step done.
    pub fn inc(&mut self) {
        self.done += 1;
        self.bar.inc(1);
        if self.bar.is_hidden() && (self.done.is_multiple_of(self.every) || self.done == self.len) {
            eprintln!("{}: {} {}/{}", self.who, self.name, self.done, self.len);
        }
    }

    /// Clears the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
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

/// A ratio `new / old` as a signed whole-percent change (`+12%`, `-3%`), or `n/a`.
pub fn pct_change(ratio: Option<f64>) -> String {
    ratio.map_or("n/a".into(), |r| format!("{:+.0}%", (r - 1.0) * 100.0))
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
        assert_eq!(pct_change(Some(1.124)), "+12%");
        assert_eq!(pct_change(Some(0.97)), "-3%");
        assert_eq!(pct_change(None), "n/a");
    }

    #[test]
    fn the_one_style_parses() {
        assert!(ProgressStyle::with_template(STYLE).is_ok());
    }

    #[test]
    fn steps_count_to_the_end_without_a_terminal() {
        let mut steps = Steps::new("test", 3, "rounds");
        for _ in 0..3 {
            steps.inc();
        }
        assert_eq!(steps.done, 3);
        steps.finish();
    }
}
