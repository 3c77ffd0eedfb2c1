//! The changes made for speed: `docs/performance-history.yaml`, a file of
//! data that people append to after measuring a change side by side, and
//! that `harness perf` renders into `performance-history.md`
//! ([`super::render::history`]).
//!
//! Guarantees: the file is read whole or refused, naming the file (unknown
//! fields, a version other than 1, an empty field); nothing in it is
//! measured by a run.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// Where the history is kept, from the workspace root.
pub const HISTORY_FILE: &str = "docs/performance-history.yaml";

/// The file: every change, oldest first.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    pub version: u32,
    pub changes: Vec<Change>,
}

/// One change made for speed, measured before and after in one run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// What was changed (or tried and not kept).
    pub change: String,
    /// What was measured.
    pub measure: String,
    pub before: String,
    pub after: String,
    /// How it was measured: the command, the builds, the date, the machine.
    pub how: String,
}

impl History {
    /// The history in `text`; `source` names it in an error.
    pub fn parse(text: &str, source: &str) -> Result<History> {
        let h: History =
            crate::yaml::from_str(text).with_context(|| format!("parsing {source}"))?;
        if h.version != 1 {
            bail!("{source}: version {} is not 1", h.version);
        }
        for (i, c) in h.changes.iter().enumerate() {
            for (field, text) in [
                ("change", &c.change),
                ("measure", &c.measure),
                ("before", &c.before),
                ("after", &c.after),
                ("how", &c.how),
            ] {
                if text.trim().is_empty() {
                    bail!("{source}: change {} has an empty `{field}`", i + 1);
                }
            }
        }
        Ok(h)
    }

    pub fn load(path: &Path) -> Result<History> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading {} (the performance history)", path.display()))?;
        History::parse(&text, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_with_an_unknown_field_a_wrong_version_or_an_empty_field_is_refused() {
        let entry = "  - change: c\n    measure: m\n    before: b\n    after: a\n    how: h\n";
        let ok = format!("version: 1\nchanges:\n{entry}");
        assert_eq!(
            History::parse(&ok, "x").map(|h| h.changes.len()).ok(),
            Some(1)
        );
        let refused = |text: &str| History::parse(text, "x").is_err();
        assert!(refused(&ok.replace("version: 1", "version: 2")));
        assert!(refused(&format!("{ok}    when: today\n")));
        assert!(refused(&ok.replace("after: a", "after: ''")));
    }
}
