//! Small helpers for writing Markdown tables and figures the same way in
//! every generated report.
//!
//! Guarantees: output depends only on the input (no clock, no locale), a
//! ratio with an empty denominator prints `n/a`, and a table cell never
//! breaks the table (pipes and newlines are escaped).

use std::fmt::Write as _;

/// `12.3%`, or `n/a` when there is nothing to divide by (the one
/// implementation, in [`crate::progress`]).
pub use crate::progress::pct;

/// `n/d (12.3%)`, or `0/0 (n/a)`.
pub fn frac(n: usize, d: usize) -> String {
    format!("{n}/{d} ({})", pct(crate::bench::results::ratio(n, d)))
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table with a header row.
pub fn table<R, C>(header: &[&str], rows: R) -> String
where
    R: IntoIterator<Item = C>,
    C: IntoIterator<Item = String>,
{
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for row in rows {
        let cells: Vec<String> = row.into_iter().map(|c| cell(&c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// A comma-separated list in backticks, or `–` when empty.
pub fn codes<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<String> = items.into_iter().map(|s| format!("`{s}`")).collect();
    if v.is_empty() {
        "–".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_denominators_print_na() {
        assert_eq!(pct(None), "n/a");
        assert_eq!(frac(0, 0), "0/0 (n/a)");
        assert_eq!(frac(1, 3), "1/3 (33.3%)");
    }

    #[test]
    fn cells_cannot_break_the_table() {
        let t = table(&["a", "b"], [vec!["x|y".to_string(), "1\n2".to_string()]]);
        assert_eq!(t, "| a | b |\n|---|---|\n| x\\|y | 1 2 |\n");
    }
}
