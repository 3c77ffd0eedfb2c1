//! What a run concluded, per mutant and overall, and its JSON form
//! (`mutations.out/outcomes.json`).
//!
//! Guarantees: every selected guard gets exactly one [`MutantOutcome`] with
//! one [`Verdict`]; [`Report::all_caught`] is true only when every verdict is
//! `caught` (the only case in which `harness mutate` exits 0); the JSON
//! schema is stable (`version: 1`) and is rewritten after each mutant, with
//! `complete: false` until the run ends.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::options::Mode;
use crate::registry::{GuardKind, Operator};

/// The judgement of one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At least one named test failed without the guard.
    Caught,
    /// Every named test ran and passed without the guard.
    Missed,
    /// The mutant did not build, or the schema object could not be dropped:
    /// a registry defect.
    Unviable,
    /// A named test ran past the time limit.
    Timeout,
    /// The mutant could not be judged (a named test did not run, the drop
    /// was never applied, the test binary misbehaved); see `note`.
    Error,
}

impl Verdict {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Caught => "caught",
            Verdict::Missed => "missed",
            Verdict::Unviable => "unviable",
            Verdict::Timeout => "timeout",
            Verdict::Error => "error",
        }
    }
}

/// One judged mutant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutantOutcome {
    pub id: String,
    pub kind: GuardKind,
    pub operator: Operator,
    pub threat: String,
    pub invariant: String,
    /// `file:line:column` for source guards, `KIND:TABLE:NAME` for schema guards.
    pub location: String,
    pub verdict: Verdict,
    /// The named tests that failed.
    pub caught_by: Vec<String>,
    /// The named tests.
    pub tests: Vec<String>,
    /// Build time, when the mutant was built on its own (rewrite mode).
    pub build_secs: Option<f64>,
    pub test_secs: f64,
    pub total_secs: f64,
    /// The limit each test run had.
    pub timeout_secs: f64,
    /// For source guards: the original text of the mutated range.
    pub replaced: Option<String>,
    /// For source guards, rewrite mode: what replaced it.
    pub replacement: Option<String>,
    pub note: Option<String>,
    /// The last lines of the test (or build) output.
    pub output_tail: String,
}

/// The unmutated run that every verdict is measured against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub build_secs: f64,
    pub groups: Vec<BaselineGroup>,
}

/// One test binary's baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineGroup {
    pub package: String,
    pub target: String,
    pub tests: Vec<String>,
    pub secs: f64,
}

/// Verdict counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub caught: usize,
    pub missed: usize,
    pub unviable: usize,
    pub timeout: usize,
    pub error: usize,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub complete: bool,
    /// The mode the verdicts were reached in (schemata falls back to rewrite
    /// when the instrumented tree does not build; see `notes`).
    pub mode: Mode,
    pub registry: PathBuf,
    pub shard: Option<String>,
    pub selected: usize,
    pub baseline: Baseline,
    pub mutants: Vec<MutantOutcome>,
    pub summary: Summary,
    pub elapsed_secs: f64,
    pub notes: Vec<String>,
}

impl Report {
    /// Recounts the summary from the outcomes.
    pub fn recount(&mut self) {
        let mut s = Summary::default();
        for m in &self.mutants {
            match m.verdict {
                Verdict::Caught => s.caught += 1,
                Verdict::Missed => s.missed += 1,
                Verdict::Unviable => s.unviable += 1,
                Verdict::Timeout => s.timeout += 1,
                Verdict::Error => s.error += 1,
            }
        }
        self.summary = s;
    }

    /// Whether every selected mutant was judged and caught.
    pub fn all_caught(&self) -> bool {
        self.complete
            && self.mutants.len() == self.selected
            && self.mutants.iter().all(|m| m.verdict == Verdict::Caught)
    }

    /// The exit status `harness mutate` ends with: 0 only when every
    /// selected mutant was caught, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.all_caught() { 0 } else { 1 }
    }

    /// The mutants that were not caught.
    pub fn not_caught(&self) -> Vec<&MutantOutcome> {
        self.mutants
            .iter()
            .filter(|m| m.verdict != Verdict::Caught)
            .collect()
    }

    /// The verdict of one guard.
    pub fn verdict(&self, id: &str) -> Option<Verdict> {
        self.mutants.iter().find(|m| m.id == id).map(|m| m.verdict)
    }

    /// A short human summary naming every mutant that was not caught.
    pub fn summary_text(&self) -> String {
        let s = &self.summary;
        let mut out = format!(
            "{} mutants ({} mode): {} caught, {} missed, {} unviable, {} timeout, {} error",
            self.mutants.len(),
            self.mode,
            s.caught,
            s.missed,
            s.unviable,
            s.timeout,
            s.error
        );
        for m in self.not_caught() {
            out.push_str(&format!(
                "\n  {} {} ({}, {}): {}",
                m.verdict.as_str().to_uppercase(),
                m.id,
                m.location,
                m.operator,
                m.note.clone().unwrap_or_else(|| match m.verdict {
                    Verdict::Missed =>
                        format!("all named tests passed without it: {}", m.tests.join(", ")),
                    v => v.as_str().to_string(),
                })
            ));
        }
        out
    }

    /// Writes `outcomes.json` into `dir` (created if needed).
    pub fn write_json(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join("outcomes.json");
        let tmp = dir.join("outcomes.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("a report always serializes");
        std::fs::write(&tmp, text + "\n").map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }
}
