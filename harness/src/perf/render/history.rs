//! `performance-history.md`: the changes made for speed, one section each,
//! rendered from `docs/performance-history.yaml`.
//!
//! Guarantees: a pure function of the [`History`]; prose is wrapped at
//! [`WIDTH`] columns (Markdown joins the lines again), so no line of the file
//! runs far past it.

use std::fmt::Write as _;

use crate::perf::history::{HISTORY_FILE, History};

/// The column prose is wrapped at.
pub const WIDTH: usize = 100;

/// Whether `word` at the start of a line would open a Markdown block (a
/// list item, a quote, a heading, a table row) instead of going on with the
/// paragraph.
fn opens_a_block(word: &str) -> bool {
    matches!(word, "-" | "+" | "*" | ">")
        || word.starts_with('#')
        || word.starts_with('|')
        || word
            .strip_suffix(['.', ')'])
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// `text` wrapped at [`WIDTH`]: the first line starts with `first`, the
/// others with `rest`. A word longer than the line stands on a line alone;
/// a word that would open a Markdown block at the start of a line stays at
/// the end of the line before, past the width.
fn wrap(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    // A prefix that ends in a word ("- **change**:") is followed by a space.
    if !first.is_empty() && !first.ends_with(' ') {
        line.push(' ');
    }
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH && !opens_a_block(word)
        {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The file's Markdown.
pub fn markdown(history: &History) -> String {
    let mut s = String::from("# Performance history: changes made for speed\n\n");
    s.push_str(&wrap(
        &format!(
            "Rendered by `harness perf` from `{HISTORY_FILE}`: edit that file, not this one (a \
             test fails when the two differ). Each change was measured before and after, side \
             by side, in the runs that its \"how measured\" names; the figures are copied from \
             those runs, not measured again by each run. Oldest first; {} changes. The latest \
             run's figures are in `performance.md`.",
            history.changes.len()
        ),
        "",
        "",
    ));
    for (i, c) in history.changes.iter().enumerate() {
        let _ = write!(s, "\n## {}\n\n", i + 1);
        s.push_str(&wrap(&c.change, "- **change**:", "  "));
        s.push_str(&wrap(&c.measure, "- **measure**:", "  "));
        s.push_str(&wrap(&c.before, "- **before**:", "  "));
        s.push_str(&wrap(&c.after, "- **after**:", "  "));
        s.push_str(&wrap(&c.how, "- **how measured**:", "  "));
    }
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::perf::history::Change;

    fn root() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
    }

    #[test]
    fn the_committed_history_page_is_the_rendering_of_the_history_file() {
        let history = History::load(&root().join(HISTORY_FILE)).unwrap();
        assert!(!history.changes.is_empty());
        let page = root().join("reports/performance-history.md");
        let committed = std::fs::read_to_string(&page).unwrap_or_default();
        assert!(
            committed == markdown(&history),
            "{} is not the rendering of {HISTORY_FILE}: run `harness perf --render-only` \
             (it re-renders reports/ from performance.json and the history file)",
            page.display()
        );
    }

    #[test]
    fn every_field_of_every_change_is_on_the_page_in_lines_of_at_most_the_width() {
        let long = "word ".repeat(300);
        let history = History {
            version: 1,
            changes: vec![Change {
                change: format!("a change {long}"),
                measure: "flow, 8 clients".into(),
                before: "400/s".into(),
                after: "450/s".into(),
                how: format!("side by side {long}"),
            }],
        };
        let md = markdown(&history);
        for expected in [
            "## 1\n",
            "- **change**: a change word",
            "- **measure**: flow, 8 clients\n",
            "- **before**: 400/s\n",
            "- **after**: 450/s\n",
            "- **how measured**: side by side word",
        ] {
            assert!(md.contains(expected), "{expected:?} missing:\n{md}");
        }
        let longest = md.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(longest <= WIDTH, "a line of {longest} columns:\n{md}");
        // Every word is kept.
        assert_eq!(md.matches("word").count(), 600);
    }

    #[test]
    fn no_wrapped_line_starts_a_markdown_block() {
        for marker in ["-", "+", "*", ">", "#1", "|", "1.", "12)"] {
            let text = format!("{} {marker} tail", "w".repeat(WIDTH - 1));
            let wrapped = wrap(&text, "", "  ");
            let second = wrapped.lines().nth(1).unwrap_or_default();
            assert!(
                !second.trim_start().starts_with(marker),
                "{marker:?} opens a line: {wrapped:?}"
            );
            assert_eq!(wrapped.split_whitespace().count(), 3, "{wrapped:?}");
        }
    }
}
