//! `reports/outside-mutants.{md,json}`: what the audit's store says about the
//! crate as it is now.
//!
//! Guarantees: the report is built from fresh verdicts only (see
//! [`super::store`]) and against cargo-mutants' current list of the crate's
//! mutants. It is *complete* only when every listed mutant has a fresh
//! verdict; otherwise its label starts with "PARTIAL" and it names, per file,
//! how many mutants are still to run. Survivors carry their classification
//! from `mutations/outside-audit.yaml`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::classification::Classification;
use super::store::{Outcome, RunRecord, Stage, Store, round2};

/// Counts for one file, or for all.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Counts {
    pub caught: usize,
    /// Of `caught`, those the library's unit tests caught on their own.
    #[serde(default)]
    pub caught_by_unit_tests: usize,
    pub missed: usize,
    pub unviable: usize,
    pub timeout: usize,
}

impl Counts {
    pub fn viable(&self) -> usize {
        self.caught + self.missed + self.timeout
    }

    fn add(&mut self, outcome: Outcome, stage: Stage) {
        match outcome {
            Outcome::Caught => {
                self.caught += 1;
                if stage == Stage::Unit {
                    self.caught_by_unit_tests += 1;
                }
            }
            Outcome::Missed => self.missed += 1,
            Outcome::Unviable => self.unviable += 1,
            Outcome::Timeout => self.timeout += 1,
        }
    }
}

/// One mutant the tests did not notice.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Survivor {
    pub name: String,
    /// The name without line and column: what outside-audit.yaml lists.
    pub key: String,
    pub file: String,
    pub line: u64,
    /// `caught` or `equivalent` from the classification, if listed.
    pub classified: Option<String>,
}

/// Seconds per mutant, this audit's and the project runner's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timing {
    /// Wall seconds of every run behind the report, summed.
    pub elapsed_secs: Option<f64>,
    pub mean_secs_per_mutant: Option<f64>,
    pub mean_build_secs: Option<f64>,
    pub mean_test_secs: Option<f64>,
    /// Mean seconds of a mutant settled by the unit tests alone, and of one
    /// that needed the whole suite.
    #[serde(default)]
    pub mean_secs_unit_stage: Option<f64>,
    #[serde(default)]
    pub mean_secs_full_stage: Option<f64>,
    /// Mean seconds of a mutant settled by a focused subset (`--focus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_secs_focused_stage: Option<f64>,
    /// `harness mutate`, schemata mode, from reports/mutations.json.
    pub project_schemata_secs_per_mutant: Option<f64>,
    /// `harness mutate`, rewrite mode, from reports/mutations.json.
    pub project_rewrite_secs_per_mutant: Option<f64>,
}

/// reports/outside-mutants.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub generated_by: String,
    pub tool: String,
    pub cpus: usize,
    /// True when every mutant cargo-mutants lists has a fresh verdict.
    pub complete: bool,
    /// What the report covers, in words: "PARTIAL: ..." unless complete.
    pub label: String,
    /// Kept for older reports; the store does not run by shard.
    pub shard: Option<String>,
    /// Files with at least one fresh verdict.
    pub files: Vec<String>,
    /// Files with mutants still to run, and how many.
    #[serde(default)]
    pub pending: BTreeMap<String, usize>,
    /// Verdicts in the store for code that has changed since (not counted).
    #[serde(default)]
    pub stale: usize,
    pub mutants_run: usize,
    pub mutants_in_crate: Option<usize>,
    pub totals: Counts,
    pub per_file: BTreeMap<String, Counts>,
    pub timing: Timing,
    pub survivors: Vec<Survivor>,
    pub timeouts: Vec<String>,
    /// The runs whose verdicts are in the store.
    #[serde(default)]
    pub runs: Vec<RunRecord>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| round2(v.iter().sum::<f64>() / v.len() as f64))
}

/// The file part of a cargo-mutants name (`gate/src/x.rs:1:2: ...`).
fn file_of(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

impl Report {
    /// Builds the report from the store, the crate's current mutant list and
    /// its files' current SHA-256s.
    pub fn build(
        store: &Store,
        listed: &[String],
        current: &BTreeMap<String, String>,
        classes: &Classification,
        generated_by: String,
        report_dir: &Path,
    ) -> Report {
        let mut totals = Counts::default();
        let mut per_file: BTreeMap<String, Counts> = BTreeMap::new();
        let mut pending: BTreeMap<String, usize> = BTreeMap::new();
        let (mut survivors, mut timeouts) = (Vec::new(), Vec::new());
        let (mut all, mut build, mut test, mut unit, mut focused, mut full) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut run = 0;
        for name in listed {
            let Some(v) = store
                .verdicts
                .get(name)
                .filter(|v| Store::is_fresh(v, current))
            else {
                *pending.entry(file_of(name).to_owned()).or_default() += 1;
                continue;
            };
            run += 1;
            per_file
                .entry(v.file.clone())
                .or_default()
                .add(v.outcome, v.stage);
            totals.add(v.outcome, v.stage);
            all.push(v.build_secs + v.test_secs);
            build.push(v.build_secs);
            if v.outcome != Outcome::Unviable {
                test.push(v.test_secs);
            }
            match v.stage {
                Stage::Unit => unit.push(v.build_secs + v.test_secs),
                Stage::Focused => focused.push(v.build_secs + v.test_secs),
                Stage::Full => full.push(v.build_secs + v.test_secs),
            }
            match v.outcome {
                Outcome::Missed => {
                    let key = key_of(name);
                    survivors.push(Survivor {
                        classified: classes.verdict_of(&key).map(str::to_owned),
                        key,
                        file: v.file.clone(),
                        line: v.line,
                        name: name.clone(),
                    });
                }
                Outcome::Timeout => timeouts.push(name.clone()),
                Outcome::Caught | Outcome::Unviable => {}
            }
        }
        let stale = store
            .verdicts
            .values()
            .filter(|v| !Store::is_fresh(v, current))
            .count();
        let complete = pending.is_empty();
        let label = if complete {
            format!("the whole gate crate, {run} mutants")
        } else {
            let left: usize = pending.values().sum();
            format!(
                "PARTIAL: {run} of the crate's {} mutants; {left} in {} files still to run",
                listed.len(),
                pending.len()
            )
        };
        let project: Value = std::fs::read_to_string(report_dir.join("mutations.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let tools: BTreeSet<String> = store
            .runs
            .iter()
            .map(|r| format!("{} ({})", r.tool, r.test_tool))
            .collect();
        let elapsed: f64 = store.runs.iter().map(|r| r.elapsed_secs).sum();
        Report {
            version: 2,
            generated_by,
            tool: tools.into_iter().collect::<Vec<_>>().join(", "),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            complete,
            label,
            shard: None,
            files: per_file.keys().cloned().collect(),
            pending,
            stale,
            mutants_run: run,
            mutants_in_crate: Some(listed.len()),
            totals,
            per_file,
            timing: Timing {
                elapsed_secs: (!store.runs.is_empty()).then(|| round2(elapsed)),
                mean_secs_per_mutant: mean(&all),
                mean_build_secs: mean(&build),
                mean_test_secs: mean(&test),
                mean_secs_unit_stage: mean(&unit),
                mean_secs_full_stage: mean(&full),
                mean_secs_focused_stage: mean(&focused),
                project_schemata_secs_per_mutant: project["schemata"]["mean_secs_per_mutant"]
                    .as_f64(),
                project_rewrite_secs_per_mutant: project["rewrite"]["mean_secs_per_mutant"]
                    .as_f64(),
            },
            survivors,
            timeouts,
            runs: store.runs.clone(),
        }
    }

    /// One line: how much was caught, over what.
    pub fn headline(&self) -> String {
        let viable = self.totals.viable();
        let pct = if viable == 0 {
            0.0
        } else {
            100.0 * self.totals.caught as f64 / viable as f64
        };
        let unclassified = self
            .survivors
            .iter()
            .filter(|s| s.classified.is_none())
            .count();
        format!(
            "outside mutation audit (cargo-mutants) over {}: {} of {} viable mutants caught ({pct:.1}%), \
             {} missed ({unclassified} unclassified), {} timed out, {} unviable; {} s per mutant",
            self.label,
            self.totals.caught,
            viable,
            self.totals.missed,
            self.totals.timeout,
            self.totals.unviable,
            self.timing
                .mean_secs_per_mutant
                .map_or("?".into(), |s| format!("{s:.1}")),
        )
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let secs = |s: Option<f64>| s.map_or("n/a".to_owned(), |s| format!("{s:.2}"));
        let _ = writeln!(md, "# Outside mutation audit (cargo-mutants over `gate`)\n");
        let _ = writeln!(
            md,
            "Generated by `{}` from `mutations/outside-audit-verdicts.json`, the verdicts of \
             {} run(s) with {} on {} CPUs. A verdict counts only while its source file is \
             unchanged. Written by the harness; never edit by hand.\n",
            self.generated_by,
            self.runs.len(),
            self.tool,
            self.cpus
        );
        if self.complete {
            let _ = writeln!(md, "**Coverage:** {}.\n", self.label);
        } else {
            let _ = writeln!(
                md,
                "**Coverage: {}.** This is not the whole crate: the figures below hold only \
                 for the mutants run; the files still to run are listed at the end.\n",
                self.label
            );
        }
        let _ = writeln!(md, "{}\n", self.headline());
        let _ = writeln!(
            md,
            "| file | caught | of which by unit tests | missed | unviable | timeout |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for (file, c) in &self.per_file {
            let _ = writeln!(
                md,
                "| `{file}` | {} | {} | {} | {} | {} |",
                c.caught, c.caught_by_unit_tests, c.missed, c.unviable, c.timeout
            );
        }
        let t = &self.totals;
        let _ = writeln!(
            md,
            "| **total** | **{}** | **{}** | **{}** | **{}** | **{}** |\n",
            t.caught, t.caught_by_unit_tests, t.missed, t.unviable, t.timeout
        );
        let _ = writeln!(md, "## Time per mutant\n");
        let _ = writeln!(
            md,
            "Each mutant runs the gate library's unit tests first; only what they do not \
             catch (and is not unviable) runs the whole suite against Postgres, or first a \
             focused subset of it when the run named one (`--focus`). A mutant \
             caught by a subset of the tests is caught by the whole suite, so the verdicts \
             are those of a whole-suite run.\n"
        );
        let _ = writeln!(md, "| runner | seconds per mutant |");
        let _ = writeln!(md, "|---|---:|");
        let rows = [
            (
                "cargo-mutants, this audit (build + tests, all stages)",
                self.timing.mean_secs_per_mutant,
            ),
            (
                "of which build (mean over all mutants)",
                self.timing.mean_build_secs,
            ),
            (
                "of which tests (mean over mutants that built)",
                self.timing.mean_test_secs,
            ),
            (
                "a mutant settled by the unit tests",
                self.timing.mean_secs_unit_stage,
            ),
            (
                "a mutant settled by a focused subset of the suite (`--focus`)",
                self.timing.mean_secs_focused_stage,
            ),
            (
                "a mutant that needed the whole suite",
                self.timing.mean_secs_full_stage,
            ),
            (
                "`harness mutate`, schemata mode (reports/mutations.json)",
                self.timing.project_schemata_secs_per_mutant,
            ),
            (
                "`harness mutate`, rewrite mode (reports/mutations.json)",
                self.timing.project_rewrite_secs_per_mutant,
            ),
        ];
        for (what, s) in rows {
            // The focused stage's row only when some run had one.
            if s.is_none() && what.contains("--focus") {
                continue;
            }
            let _ = writeln!(md, "| {what} | {} |", secs(s));
        }
        let _ = writeln!(
            md,
            "\nThe runs behind this report took {} s of wall time in all.\n",
            secs(self.timing.elapsed_secs)
        );
        let _ = writeln!(md, "## Survivors\n");
        if self.survivors.is_empty() {
            let _ = writeln!(md, "None: every viable mutant run was caught.\n");
        } else {
            let _ = writeln!(
                md,
                "Each must be classified in `mutations/outside-audit.yaml` (a test that now \
                 catches it, or why it is equivalent).\n"
            );
            let _ = writeln!(md, "| mutant | classified |");
            let _ = writeln!(md, "|---|---|");
            for s in &self.survivors {
                let _ = writeln!(
                    md,
                    "| `{}` | {} |",
                    s.name,
                    s.classified.as_deref().unwrap_or("**unclassified**")
                );
            }
            md.push('\n');
        }
        if !self.timeouts.is_empty() {
            let _ = writeln!(md, "## Timeouts\n");
            for name in &self.timeouts {
                let _ = writeln!(md, "- `{name}`");
            }
            md.push('\n');
        }
        let _ = writeln!(md, "## Runs\n");
        let _ = writeln!(md, "| finished | commit | scope | mutants | seconds |");
        let _ = writeln!(md, "|---|---|---|---:|---:|");
        for r in &self.runs {
            let _ = writeln!(
                md,
                "| {} | {} | `{}` | {} | {:.0} |",
                r.finished,
                r.commit.as_deref().map_or("?", |c| &c[..c.len().min(10)]),
                r.scope,
                r.mutants,
                r.elapsed_secs
            );
        }
        md.push('\n');
        if !self.pending.is_empty() || self.stale > 0 {
            let _ = writeln!(md, "## Still to run\n");
            let _ = writeln!(
                md,
                "{} verdict(s) in the store are stale (their file changed since) and count for \
                 nothing. Run the rest with `make mutants-audit ARGS='--file F ...'` or \
                 `ARGS='--shard K/N'`; each run adds to the store.\n",
                self.stale
            );
            let _ = writeln!(md, "| file | mutants to run |");
            let _ = writeln!(md, "|---|---:|");
            for (file, n) in &self.pending {
                let _ = writeln!(md, "| `{file}` | {n} |");
            }
            md.push('\n');
        }
        md
    }
}

/// `gate/src/x.rs:12:5: replace a with b in f` → `gate/src/x.rs: replace a with b in f`.
pub fn key_of(name: &str) -> String {
    let mut parts = name.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(file), Some(line), Some(col), Some(rest))
            if line.bytes().all(|b| b.is_ascii_digit())
                && col.bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{file}:{rest}")
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants_audit::store::{Observed, RunRecord, fold_stages};

    #[test]
    fn a_key_drops_only_the_line_and_column() {
        assert_eq!(
            key_of("gate/src/policy.rs:118:24: replace < with <= in Policy::validated"),
            "gate/src/policy.rs: replace < with <= in Policy::validated"
        );
        assert_eq!(key_of("no position here"), "no position here");
    }

    fn observed(name: &str, outcome: Outcome) -> Observed {
        Observed {
            name: name.into(),
            file: file_of(name).into(),
            line: 1,
            outcome,
            build_secs: 1.0,
            test_secs: 1.0,
        }
    }

    #[test]
    fn a_report_is_complete_only_when_every_listed_mutant_has_a_fresh_verdict() {
        let listed = vec![
            "gate/src/a.rs:1:1: m1".to_owned(),
            "gate/src/a.rs:2:1: m2".to_owned(),
            "gate/src/b.rs:1:1: m3".to_owned(),
        ];
        let hashes = BTreeMap::from([
            ("gate/src/a.rs".to_owned(), "ha".to_owned()),
            ("gate/src/b.rs".to_owned(), "hb".to_owned()),
        ]);
        let mut store = Store::default();
        let run = RunRecord {
            finished: "t".into(),
            commit: None,
            tool: "cargo-mutants".into(),
            test_tool: "nextest".into(),
            scope: "--file gate/src/a.rs".into(),
            mutants: 2,
            elapsed_secs: 4.0,
        };
        let v = fold_stages(
            &[
                (
                    &[
                        observed("gate/src/a.rs:1:1: m1", Outcome::Caught),
                        observed("gate/src/a.rs:2:1: m2", Outcome::Missed),
                    ],
                    Stage::Unit,
                ),
                (
                    &[observed("gate/src/a.rs:2:1: m2", Outcome::Missed)],
                    Stage::Full,
                ),
            ],
            false,
        )
        .unwrap()
        .0;
        store.record(run.clone(), v, &hashes).unwrap();
        let classes = Classification::default();
        let dir = Path::new("/nonexistent");
        let r = Report::build(&store, &listed, &hashes, &classes, "t".into(), dir);
        assert!(!r.complete);
        assert!(r.label.starts_with("PARTIAL"), "{}", r.label);
        assert_eq!(r.pending, BTreeMap::from([("gate/src/b.rs".to_owned(), 1)]));
        assert_eq!((r.totals.caught, r.totals.caught_by_unit_tests), (1, 1));
        assert_eq!(r.survivors.len(), 1);
        assert_eq!(r.survivors[0].key, "gate/src/a.rs: m2");

        // b.rs run: complete. Then a.rs changes: its verdicts go stale.
        let (v, _) = fold_stages(
            &[(
                &[observed("gate/src/b.rs:1:1: m3", Outcome::Caught)],
                Stage::Full,
            )],
            false,
        )
        .unwrap();
        store.record(run, v, &hashes).unwrap();
        let r = Report::build(&store, &listed, &hashes, &classes, "t".into(), dir);
        assert!(r.complete, "{}", r.label);
        assert_eq!(r.totals.viable(), 3);
        let mut changed = hashes.clone();
        changed.insert("gate/src/a.rs".into(), "ha2".into());
        let r = Report::build(&store, &listed, &changed, &classes, "t".into(), dir);
        assert!(!r.complete);
        assert_eq!(r.stale, 2);
        assert_eq!(r.pending.get("gate/src/a.rs"), Some(&2));
    }
}
