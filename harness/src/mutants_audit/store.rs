//! The audit's verdicts, kept between runs: `mutations/outside-audit-verdicts.json`.
//!
//! A whole-crate cargo-mutants run takes hours on 2 cores, so it is done in
//! pieces (files, shards, sessions, CI machines) and this store collects them.
//! Guarantees:
//! - Every verdict carries the SHA-256 of its source file as it was when the
//!   mutant ran. A verdict is *fresh* only while that file is unchanged; a
//!   changed file's verdicts are *stale* and count for nothing until the file
//!   is run again. So a report built from the store never credits a test
//!   suite with catching a mutant of code that no longer exists.
//! - A new run replaces the verdicts of the mutants it ran (by cargo-mutants'
//!   name, which holds file, line and column) and drops every stale verdict of
//!   the files it ran; it never touches another file's verdicts.
//! - A run in stages (the lib's unit tests first, then the whole suite for
//!   what they missed) is folded into one verdict per mutant: caught or
//!   unviable at the first stage is final; anything else is decided by the
//!   whole suite, and a mutant the whole suite did not run is an error, not a
//!   miss.
//! - The file is sorted JSON (mutants by name), so two runs over different
//!   files merge in git without conflict.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What cargo-mutants found for one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Caught,
    Missed,
    Unviable,
    Timeout,
}

impl Outcome {
    /// cargo-mutants' `summary` field.
    fn from_summary(summary: &str) -> Option<Outcome> {
        Some(match summary {
            "CaughtMutant" => Outcome::Caught,
            "MissedMutant" => Outcome::Missed,
            "Unviable" => Outcome::Unviable,
            "Timeout" => Outcome::Timeout,
            _ => return None,
        })
    }

    /// Final after a first stage that ran only some of the tests.
    fn settled_early(self) -> bool {
        matches!(self, Outcome::Caught | Outcome::Unviable)
    }
}

/// Which tests decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The gate library's own unit tests (`--lib`): fast, no integration build.
    Unit,
    /// The gate's whole test suite, against Postgres.
    Full,
}

/// One mutant's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub file: String,
    pub line: u64,
    /// SHA-256 (hex) of `file` when the mutant ran.
    pub file_sha256: String,
    pub outcome: Outcome,
    pub stage: Stage,
    /// Build and test seconds, summed over the stages the mutant went through.
    pub build_secs: f64,
    pub test_secs: f64,
}

/// One run that wrote verdicts here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub finished: String,
    /// The git commit the tree was at (as `git rev-parse HEAD` said), if known.
    pub commit: Option<String>,
    pub tool: String,
    pub test_tool: String,
    /// What it covered, as its command line said it.
    pub scope: String,
    pub mutants: usize,
    /// Wall seconds from cargo-mutants' own start and end times, all stages.
    pub elapsed_secs: f64,
}

/// The store.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    pub version: u32,
    pub runs: Vec<RunRecord>,
    pub verdicts: BTreeMap<String, Verdict>,
}

/// One mutant as read from an outcomes.json.
#[derive(Debug, Clone)]
pub struct Observed {
    pub name: String,
    pub file: String,
    pub line: u64,
    pub outcome: Outcome,
    pub build_secs: f64,
    pub test_secs: f64,
}

/// One outcomes.json: its mutants and its wall seconds.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    pub mutants: Vec<Observed>,
    pub elapsed_secs: f64,
    pub tool: Option<String>,
}

impl Observations {
    /// Reads cargo-mutants' outcomes.json (`what` names it in errors).
    pub fn parse(json: &Value, what: &str) -> Result<Observations> {
        let mut out = Observations {
            elapsed_secs: secs_between(&json["start_time"], &json["end_time"]).unwrap_or(0.0),
            tool: json["cargo_mutants_version"].as_str().map(str::to_owned),
            ..Observations::default()
        };
        let outcomes = json["outcomes"].as_array().with_context(|| {
            format!("{what}: no `outcomes` array (not cargo-mutants' outcomes.json?)")
        })?;
        for o in outcomes {
            let Some(mutant) = o["scenario"].get("Mutant") else {
                continue; // the baseline
            };
            let name = mutant["name"]
                .as_str()
                .with_context(|| format!("{what}: a mutant without a name"))?
                .to_owned();
            let summary = o["summary"].as_str().unwrap_or("");
            let outcome = Outcome::from_summary(summary).with_context(|| {
                format!("{what}: mutant {name} has an outcome this audit cannot read: {summary:?}")
            })?;
            out.mutants.push(Observed {
                file: mutant["file"].as_str().unwrap_or("?").to_owned(),
                line: mutant["span"]["start"]["line"].as_u64().unwrap_or(0),
                outcome,
                build_secs: phase_secs(o, "Build"),
                test_secs: phase_secs(o, "Test"),
                name,
            });
        }
        Ok(out)
    }
}

fn secs_between(start: &Value, end: &Value) -> Option<f64> {
    let parse = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str()?).ok();
    let (a, b) = (parse(start)?, parse(end)?);
    Some((b - a).num_milliseconds() as f64 / 1000.0)
}

fn phase_secs(outcome: &Value, phase: &str) -> f64 {
    outcome["phase_results"]
        .as_array()
        .map(|phases| {
            phases
                .iter()
                .filter(|p| p["phase"] == phase)
                .filter_map(|p| p["duration"].as_f64())
                .sum()
        })
        .unwrap_or(0.0)
}

/// Folds a staged run into one verdict per mutant: `unit` (may be empty, for
/// a run of the whole suite alone) then `full`. A mutant the unit tests did
/// not settle and the whole suite never ran is an error, unless the run was
/// `interrupted` (stopped during its whole-suite stage): then it gets no
/// verdict and stays to run. Returns the verdicts and how many were left so.
pub fn fold_stages(
    unit: &[Observed],
    full: &[Observed],
    interrupted: bool,
) -> Result<(Vec<(Observed, Stage)>, usize)> {
    let by_name: BTreeMap<&str, &Observed> = full.iter().map(|o| (o.name.as_str(), o)).collect();
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut left = 0;
    for u in unit {
        if !seen.insert(u.name.clone()) {
            bail!("mutant {} ran twice in the unit stage", u.name);
        }
        if u.outcome.settled_early() {
            out.push((u.clone(), Stage::Unit));
            continue;
        }
        let Some(f) = by_name.get(u.name.as_str()) else {
            if interrupted {
                left += 1;
                continue;
            }
            bail!(
                "mutant {} was {:?} by the unit tests and the whole suite never ran it",
                u.name,
                u.outcome
            );
        };
        let mut merged = (*f).clone();
        merged.build_secs += u.build_secs;
        merged.test_secs += u.test_secs;
        out.push((merged, Stage::Full));
    }
    for f in full {
        if !seen.contains(&f.name) {
            seen.insert(f.name.clone());
            out.push((f.clone(), Stage::Full));
        }
    }
    Ok((out, left))
}

/// SHA-256 (hex) of a file under `root`.
pub fn file_sha256(root: &Path, file: &str) -> Result<String> {
    let bytes = std::fs::read(root.join(file)).with_context(|| format!("reading {file}"))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

impl Store {
    pub const VERSION: u32 = 1;

    /// Loads the store; an absent file is an empty store.
    pub fn load(path: &Path) -> Result<Store> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Store {
                    version: Self::VERSION,
                    ..Store::default()
                });
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let store: Store =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if store.version != Self::VERSION {
            bail!(
                "{}: version {} is not {}",
                path.display(),
                store.version,
                Self::VERSION
            );
        }
        Ok(store)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Records a run's folded verdicts; `hashes` holds each run file's
    /// SHA-256 as it was when the run started.
    pub fn record(
        &mut self,
        run: RunRecord,
        verdicts: Vec<(Observed, Stage)>,
        hashes: &BTreeMap<String, String>,
    ) -> Result<()> {
        // Stale verdicts of the files this run covered go first.
        self.verdicts.retain(|_, v| match hashes.get(&v.file) {
            Some(h) => *h == v.file_sha256,
            None => true,
        });
        for (o, stage) in verdicts {
            let Some(h) = hashes.get(&o.file) else {
                bail!(
                    "mutant {} is in {}, which this run did not hash",
                    o.name,
                    o.file
                );
            };
            self.verdicts.insert(
                o.name.clone(),
                Verdict {
                    file: o.file,
                    line: o.line,
                    file_sha256: h.clone(),
                    outcome: o.outcome,
                    stage,
                    build_secs: round2(o.build_secs),
                    test_secs: round2(o.test_secs),
                },
            );
        }
        self.runs.push(run);
        Ok(())
    }

    /// Whether a verdict still describes the file as it is now.
    pub fn is_fresh(v: &Verdict, current: &BTreeMap<String, String>) -> bool {
        current.get(&v.file) == Some(&v.file_sha256)
    }
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(name: &str, outcome: Outcome) -> Observed {
        Observed {
            name: name.into(),
            file: "gate/src/a.rs".into(),
            line: 1,
            outcome,
            build_secs: 1.0,
            test_secs: 2.0,
        }
    }

    #[test]
    fn caught_or_unviable_by_the_unit_tests_is_final_and_the_rest_is_the_whole_suites() {
        let unit = [
            obs("a", Outcome::Caught),
            obs("b", Outcome::Unviable),
            obs("c", Outcome::Missed),
            obs("d", Outcome::Timeout),
        ];
        let full = [obs("c", Outcome::Caught), obs("d", Outcome::Missed)];
        let (folded, _) = fold_stages(&unit, &full, false).unwrap();
        let got: Vec<_> = folded
            .iter()
            .map(|(o, s)| (o.name.as_str(), o.outcome, *s, o.test_secs))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Outcome::Caught, Stage::Unit, 2.0),
                ("b", Outcome::Unviable, Stage::Unit, 2.0),
                ("c", Outcome::Caught, Stage::Full, 4.0),
                ("d", Outcome::Missed, Stage::Full, 4.0),
            ]
        );
    }

    #[test]
    fn a_unit_stage_miss_the_whole_suite_never_ran_is_an_error_not_a_miss() {
        let err = fold_stages(&[obs("c", Outcome::Missed)], &[], false).unwrap_err();
        assert!(err.to_string().contains("never ran it"), "{err}");
    }

    #[test]
    fn an_interrupted_run_keeps_what_it_settled_and_leaves_the_rest_to_run() {
        let unit = [
            obs("a", Outcome::Caught),
            obs("b", Outcome::Missed),
            obs("c", Outcome::Missed),
        ];
        let full = [obs("b", Outcome::Caught)];
        let (folded, left) = fold_stages(&unit, &full, true).unwrap();
        let names: Vec<_> = folded.iter().map(|(o, s)| (o.name.as_str(), *s)).collect();
        assert_eq!(names, [("a", Stage::Unit), ("b", Stage::Full)]);
        assert_eq!(left, 1);
    }

    #[test]
    fn a_changed_file_makes_its_verdicts_stale_and_a_rerun_replaces_them() {
        let mut store = Store::default();
        let run = |n| RunRecord {
            finished: "t".into(),
            commit: None,
            tool: "cargo-mutants".into(),
            test_tool: "nextest".into(),
            scope: "test".into(),
            mutants: n,
            elapsed_secs: 1.0,
        };
        let old = BTreeMap::from([("gate/src/a.rs".to_owned(), "h1".to_owned())]);
        let (v, _) = fold_stages(&[], &[obs("x:1:1: m", Outcome::Missed)], false).unwrap();
        store.record(run(1), v, &old).unwrap();
        assert!(Store::is_fresh(&store.verdicts["x:1:1: m"], &old));
        let new = BTreeMap::from([("gate/src/a.rs".to_owned(), "h2".to_owned())]);
        assert!(!Store::is_fresh(&store.verdicts["x:1:1: m"], &new));
        // The rerun of the changed file drops the old verdict and keeps its own.
        let (v, _) = fold_stages(&[], &[obs("x:2:1: m", Outcome::Caught)], false).unwrap();
        store.record(run(1), v, &new).unwrap();
        assert_eq!(store.verdicts.len(), 1);
        assert_eq!(store.verdicts["x:2:1: m"].outcome, Outcome::Caught);
    }

    #[test]
    fn an_outcomes_file_with_an_unknown_summary_is_refused_by_name() {
        let json = serde_json::json!({"outcomes": [
            {"scenario": {"Mutant": {"name": "m", "file": "f"}}, "summary": "Weird"}
        ]});
        let err = Observations::parse(&json, "x/outcomes.json").unwrap_err();
        assert!(err.to_string().contains("x/outcomes.json"), "{err}");
        assert!(err.to_string().contains("Weird"), "{err}");
    }
}
