//! `mutations/outside-audit.yaml`: every survivor of the outside audit,
//! classified.
//!
//! Guarantees: the file is read whole or refused (unknown fields, a version
//! other than 1); [`Classification::problems`] names every entry that does
//! not say enough: a `caught` entry whose test function does not exist under
//! `gate/`, an `equivalent` entry with a reason under 20 characters. This
//! file reads no report: the report reads it ([`super::report`]), and
//! [`super::check`] holds the two against each other.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// `mutations/outside-audit.yaml`: every survivor, classified.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classification {
    pub version: u32,
    /// Per source file, a nextest filterset selecting the tests that exercise
    /// it: a run of `--file F ...` without `--focus` uses the union of its
    /// files' filtersets as its focused stage (when every file has one).
    #[serde(default)]
    pub focus: BTreeMap<String, String>,
    #[serde(default)]
    pub survivors: Vec<Classified>,
}

/// One survivor: a test now catches it, or it cannot change behaviour.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classified {
    /// cargo-mutants' name without the line and column:
    /// `gate/src/x.rs: replace < with <= in f`.
    pub mutant: String,
    /// `caught` or `equivalent`.
    pub verdict: String,
    /// For `caught`: the test (`file::function`) that now catches it.
    #[serde(default)]
    pub test: Option<String>,
    /// For `equivalent`: why it cannot change behaviour.
    #[serde(default)]
    pub reason: Option<String>,
}

impl Classification {
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let c: Classification =
            crate::yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if c.version != 1 {
            bail!("{}: version {} is not 1", path.display(), c.version);
        }
        Ok(c)
    }

    /// The focused stage for a run over `files`: the union of their
    /// filtersets, or `None` when there are no files or one has none.
    pub fn focus_for(&self, files: &[String]) -> Option<String> {
        let parts: Option<Vec<&str>> = files
            .iter()
            .map(|f| self.focus.get(f).map(String::as_str))
            .collect();
        let parts = parts.filter(|p| !p.is_empty())?;
        Some(if parts.len() == 1 {
            parts[0].to_owned()
        } else {
            parts
                .iter()
                .map(|p| format!("({p})"))
                .collect::<Vec<_>>()
                .join(" | ")
        })
    }

    pub fn verdict_of(&self, key: &str) -> Option<&str> {
        self.survivors
            .iter()
            .find(|c| c.mutant == key)
            .map(|c| c.verdict.as_str())
    }

    /// Entries that do not say enough: a verdict other than the two, a
    /// caught one without a test that exists in gate/, an equivalent one
    /// without a reason.
    pub fn problems(&self, gate_sources: &str) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.survivors {
            match (c.verdict.as_str(), &c.test, &c.reason) {
                ("caught", Some(test), _) => {
                    let name = test.rsplit("::").next().unwrap_or(test);
                    if !gate_sources.contains(&format!("fn {name}(")) {
                        out.push(format!("{}: the test {test} does not exist", c.mutant));
                    }
                }
                ("equivalent", _, Some(reason)) if reason.trim().len() >= 20 => {}
                ("caught", None, _) => out.push(format!("{}: caught by no named test", c.mutant)),
                ("equivalent", _, _) => {
                    out.push(format!("{}: equivalent without a reason", c.mutant))
                }
                (v, _, _) => out.push(format!("{}: unknown verdict {v:?}", c.mutant)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_focused_only_when_every_file_has_a_filterset() {
        let c = Classification {
            version: 1,
            focus: BTreeMap::from([
                ("a.rs".to_owned(), "test(/a/)".to_owned()),
                ("b.rs".to_owned(), "test(/b/)".to_owned()),
            ]),
            survivors: vec![],
        };
        let files = |f: &[&str]| f.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(c.focus_for(&files(&["a.rs"])).as_deref(), Some("test(/a/)"));
        assert_eq!(
            c.focus_for(&files(&["a.rs", "b.rs"])).as_deref(),
            Some("(test(/a/)) | (test(/b/))")
        );
        assert_eq!(c.focus_for(&files(&["a.rs", "c.rs"])), None);
        assert_eq!(c.focus_for(&[]), None);
    }
}
