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
//! - A run in stages (the lib's unit tests first, then optionally a focused
//!   subset of the suite, then the whole suite for what they missed) is folded
//!   into one verdict per mutant: caught or unviable at an earlier stage is
//!   final; anything else is decided by the whole suite, and a mutant the
//!   whole suite did not run is an error, not a miss.
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
    /// A subset of the whole suite chosen by a nextest filter (`--focus`),
    /// against Postgres: what it catches, the whole suite catches.
    Focused,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Folds a staged run into one verdict per mutant. `stages` are in the order
/// they ran, each with the [`Stage`] it stands for; every stage but the last
/// ran only a subset of the tests (the unit tests, a focused filter), the
/// last the whole suite. A stage may be empty (a run of the whole suite
/// alone). Caught or unviable at a stage is final; anything else goes on to
/// the next stage, and the last stage decides. A mutant a stage left
/// unsettled and the next stage never ran is an error, unless the run was
/// `interrupted` (stopped during a later stage): then it gets no verdict and
/// stays to run. Build and test seconds are summed over the stages a mutant
/// went through. Returns the verdicts and how many were left to run.
pub fn fold_stages(
    stages: &[(&[Observed], Stage)],
    interrupted: bool,
) -> Result<(Vec<(Observed, Stage)>, usize)> {
    let mut maps = Vec::with_capacity(stages.len());
    let mut order: Vec<&str> = Vec::new();
    let mut known = std::collections::BTreeSet::new();
    for (observed, stage) in stages {
        let mut by_name = BTreeMap::new();
        for o in *observed {
            if by_name.insert(o.name.as_str(), o).is_some() {
                bail!("mutant {} ran twice in the {stage:?} stage", o.name);
            }
            if known.insert(o.name.as_str()) {
                order.push(o.name.as_str());
            }
        }
        maps.push(by_name);
    }
    let last = stages.len().saturating_sub(1);
    let mut out = Vec::new();
    let mut left = 0;
    'mutant: for name in order {
        let (mut build, mut test) = (0.0, 0.0);
        let first = maps
            .iter()
            .position(|m| m.contains_key(name))
            .unwrap_or(last);
        for (i, (map, (_, stage))) in maps.iter().zip(stages).enumerate().skip(first) {
            let Some(o) = map.get(name) else {
                if interrupted {
                    left += 1;
                    continue 'mutant;
                }
                let before = stages[i - 1].1;
                bail!(
                    "mutant {name} was not settled by the {before:?} stage and the {stage:?} stage never ran it"
                );
            };
            build += o.build_secs;
            test += o.test_secs;
            if o.outcome.settled_early() || i == last {
                let mut merged = (*o).clone();
                merged.build_secs = build;
                merged.test_secs = test;
                out.push((merged, *stage));
                continue 'mutant;
            }
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

    /// Adds another store's runs and verdicts. Stores copied from one
    /// another share runs: a run already here is not added twice. Of two
    /// verdicts for one mutant, the one that describes the file as it is now
    /// (`current`) is kept; when both or neither do, this store's stays.
    pub fn merge(&mut self, theirs: Store, current: &BTreeMap<String, String>) {
        for run in theirs.runs {
            if !self.runs.contains(&run) {
                self.runs.push(run);
            }
        }
        for (name, v) in theirs.verdicts {
            let keep_mine = self
                .verdicts
                .get(&name)
                .is_some_and(|mine| Self::is_fresh(mine, current) || !Self::is_fresh(&v, current));
            if !keep_mine {
                self.verdicts.insert(name, v);
            }
        }
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

    fn verdict(sha: &str, outcome: Outcome) -> Verdict {
        Verdict {
            file: "gate/src/a.rs".into(),
            line: 1,
            file_sha256: sha.into(),
            outcome,
            stage: Stage::Full,
            build_secs: 1.0,
            test_secs: 2.0,
        }
    }

    fn run(finished: &str) -> RunRecord {
        RunRecord {
            finished: finished.into(),
            commit: None,
            tool: "cargo-mutants".into(),
            test_tool: "nextest".into(),
            scope: "--file gate/src/a.rs".into(),
            mutants: 1,
            elapsed_secs: 3.0,
        }
    }

    #[test]
    fn a_merge_keeps_the_fresh_verdict_whichever_store_holds_it_and_each_run_once() {
        let current = BTreeMap::from([("gate/src/a.rs".to_owned(), "new".to_owned())]);
        let shared = run("2026-12-01");
        let mut mine = Store {
            version: 1,
            runs: vec![shared.clone(), run("2026-12-07a")],
            verdicts: BTreeMap::from([
                ("fresh here".to_owned(), verdict("new", Outcome::Caught)),
                ("stale here".to_owned(), verdict("old", Outcome::Missed)),
                ("stale both".to_owned(), verdict("old", Outcome::Missed)),
            ]),
        };
        let theirs = Store {
            version: 1,
            runs: vec![shared, run("2026-12-07b")],
            verdicts: BTreeMap::from([
                ("fresh here".to_owned(), verdict("old", Outcome::Missed)),
                ("stale here".to_owned(), verdict("new", Outcome::Caught)),
                ("stale both".to_owned(), verdict("older", Outcome::Caught)),
                ("only theirs".to_owned(), verdict("new", Outcome::Unviable)),
            ]),
        };
        mine.merge(theirs, &current);
        let got: Vec<(&str, &str, Outcome)> = mine
            .verdicts
            .iter()
            .map(|(n, v)| (n.as_str(), v.file_sha256.as_str(), v.outcome))
            .collect();
        assert_eq!(
            got,
            [
                ("fresh here", "new", Outcome::Caught),
                ("only theirs", "new", Outcome::Unviable),
                ("stale both", "old", Outcome::Missed),
                ("stale here", "new", Outcome::Caught),
            ]
        );
        let finished: Vec<&str> = mine.runs.iter().map(|r| r.finished.as_str()).collect();
        assert_eq!(finished, ["2026-12-01", "2026-12-07a", "2026-12-07b"]);
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
        let (folded, _) =
            fold_stages(&[(&unit, Stage::Unit), (&full, Stage::Full)], false).unwrap();
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
        let err = fold_stages(
            &[
                (&[obs("c", Outcome::Missed)], Stage::Unit),
                (&[], Stage::Full),
            ],
            false,
        )
        .unwrap_err();
        assert!(err.to_string().contains("never ran it"), "{err}");
    }

    #[test]
    fn a_focused_stage_settles_what_it_catches_and_passes_the_rest_to_the_whole_suite() {
        let unit = [
            obs("a", Outcome::Caught),
            obs("b", Outcome::Missed),
            obs("c", Outcome::Missed),
        ];
        let focused = [obs("b", Outcome::Caught), obs("c", Outcome::Missed)];
        let full = [obs("c", Outcome::Missed)];
        let stages: [(&[Observed], Stage); 3] = [
            (&unit, Stage::Unit),
            (&focused, Stage::Focused),
            (&full, Stage::Full),
        ];
        let (folded, left) = fold_stages(&stages, false).unwrap();
        let got: Vec<_> = folded
            .iter()
            .map(|(o, s)| (o.name.as_str(), o.outcome, *s, o.test_secs))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Outcome::Caught, Stage::Unit, 2.0),
                ("b", Outcome::Caught, Stage::Focused, 4.0),
                ("c", Outcome::Missed, Stage::Full, 6.0),
            ]
        );
        assert_eq!(left, 0);
        // A focused miss the whole suite never ran is not a verdict.
        let stages: [(&[Observed], Stage); 3] = [
            (&unit, Stage::Unit),
            (&focused, Stage::Focused),
            (&[], Stage::Full),
        ];
        let err = fold_stages(&stages, false).unwrap_err();
        assert!(err.to_string().contains("Focused stage"), "{err}");
    }

    #[test]
    fn an_interrupted_run_keeps_what_it_settled_and_leaves_the_rest_to_run() {
        let unit = [
            obs("a", Outcome::Caught),
            obs("b", Outcome::Missed),
            obs("c", Outcome::Missed),
        ];
        let full = [obs("b", Outcome::Caught)];
        let (folded, left) =
            fold_stages(&[(&unit, Stage::Unit), (&full, Stage::Full)], true).unwrap();
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
        let (v, _) =
            fold_stages(&[(&[obs("x:1:1: m", Outcome::Missed)], Stage::Full)], false).unwrap();
        store.record(run(1), v, &old).unwrap();
        assert!(Store::is_fresh(&store.verdicts["x:1:1: m"], &old));
        let new = BTreeMap::from([("gate/src/a.rs".to_owned(), "h2".to_owned())]);
        assert!(!Store::is_fresh(&store.verdicts["x:1:1: m"], &new));
        // The rerun of the changed file drops the old verdict and keeps its own.
        let (v, _) =
            fold_stages(&[(&[obs("x:2:1: m", Outcome::Caught)], Stage::Full)], false).unwrap();
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
