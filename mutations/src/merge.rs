//! Combining the outcomes of a sharded run (`harness mutate --shard K/N` on
//! N machines) into one run.
//!
//! Guarantees: [`merge`] accepts only complete shard outcomes of one mode,
//! all of one shard count N, with every shard 0..N present exactly once; it
//! refuses a mutant judged in two shards (an overlap) and a guard of the
//! registry's selection that no shard judged (a gap), naming each. The merged
//! [`Report`] lists the mutants in registry order with the verdicts the
//! shards reached, unchanged, and its summary is recounted from them, so a
//! merge of N shards has exactly the verdicts of one unsharded run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::options::Shard;
use crate::outcome::{Baseline, Report};
use crate::registry::Registry;

/// One shard's outcomes, with the file they came from.
#[derive(Debug, Clone)]
pub struct ShardOutcome {
    pub path: PathBuf,
    pub report: Report,
}

/// Reads `DIR/outcomes.json` (or the file itself when `path` is one).
pub fn read_shard(path: &Path) -> Result<ShardOutcome> {
    let file = if path.is_dir() {
        path.join("outcomes.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
    let report: Report = serde_json::from_str(&text).map_err(|e| {
        Error::Selection(format!(
            "{}: not a mutation outcome file: {e}",
            file.display()
        ))
    })?;
    Ok(ShardOutcome { path: file, report })
}

/// Merges the shards of one run over `registry` (its whole selection).
pub fn merge(registry: &Registry, shards: &[ShardOutcome]) -> Result<Report> {
    let refuse = |message: String| Err(Error::Selection(format!("cannot merge: {message}")));
    let Some(first) = shards.first() else {
        return refuse("no shard outcomes given".into());
    };
    let mut seen_shards: BTreeMap<usize, &Path> = BTreeMap::new();
    let mut count = None;
    for s in shards {
        let r = &s.report;
        let name = s.path.display();
        if !r.complete {
            return refuse(format!("{name} is an unfinished run (complete: false)"));
        }
        if r.mode != first.report.mode {
            return refuse(format!(
                "{name} ran in {} mode, {} in {} mode",
                r.mode,
                first.path.display(),
                first.report.mode
            ));
        }
        let shard: Shard = match r.shard.as_deref().map(str::parse) {
            Some(Ok(shard)) => shard,
            Some(Err(e)) => return refuse(format!("{name}: {e}")),
            None => return refuse(format!("{name} is not a shard (no --shard K/N)")),
        };
        if *count.get_or_insert(shard.count) != shard.count {
            return refuse(format!(
                "{name} is shard {}/{}, but another shard was of {}",
                shard.index,
                shard.count,
                count.unwrap_or_default()
            ));
        }
        if let Some(other) = seen_shards.insert(shard.index, &s.path) {
            return refuse(format!(
                "shard {}/{} is given twice: {} and {name}",
                shard.index,
                shard.count,
                other.display()
            ));
        }
    }
    let count = count.unwrap_or_default();
    let missing: Vec<String> = (0..count)
        .filter(|k| !seen_shards.contains_key(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return refuse(format!("shard(s) {} missing", missing.join(", ")));
    }

    let mut by_id = BTreeMap::new();
    for s in shards {
        for m in &s.report.mutants {
            if let Some((_, other)) = by_id.insert(m.id.clone(), (m.clone(), &s.path)) {
                return refuse(format!(
                    "guard `{}` was judged in two shards ({} and {}): an overlap",
                    m.id,
                    other.display(),
                    s.path.display()
                ));
            }
        }
    }
    let wanted: Vec<&str> = registry.guards.iter().map(|g| g.id.as_str()).collect();
    let gaps: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|id| !by_id.contains_key(*id))
        .collect();
    if !gaps.is_empty() {
        return refuse(format!("no shard judged {}: a gap", gaps.join(", ")));
    }
    let known: BTreeSet<&str> = wanted.iter().copied().collect();
    if let Some(stranger) = by_id.keys().find(|id| !known.contains(id.as_str())) {
        return refuse(format!(
            "guard `{stranger}` is not in the registry: the shards ran another registry"
        ));
    }

    let mutants = wanted
        .iter()
        .filter_map(|id| by_id.remove(*id).map(|(m, _)| m))
        .collect::<Vec<_>>();
    let mut merged = Report {
        version: first.report.version,
        complete: true,
        mode: first.report.mode,
        registry: first.report.registry.clone(),
        shard: None,
        selected: mutants.len(),
        baseline: Baseline {
            // The shards ran side by side: the slowest build is the wait.
            build_secs: shards
                .iter()
                .map(|s| s.report.baseline.build_secs)
                .fold(0.0, f64::max),
            groups: shards
                .iter()
                .flat_map(|s| s.report.baseline.groups.clone())
                .collect(),
        },
        mutants,
        summary: Default::default(),
        elapsed_secs: shards
            .iter()
            .map(|s| s.report.elapsed_secs)
            .fold(0.0, f64::max),
        notes: shards
            .iter()
            .flat_map(|s| {
                s.report
                    .notes
                    .iter()
                    .map(move |n| format!("{}: {n}", s.path.display()))
            })
            .collect(),
    };
    merged.recount();
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Mode;
    use crate::outcome::{MutantOutcome, Verdict};
    use crate::registry::{GuardKind, Operator};

    fn outcome(id: &str, verdict: Verdict) -> MutantOutcome {
        MutantOutcome {
            id: id.into(),
            kind: GuardKind::Source,
            operator: Operator::Delete,
            threat: "t".into(),
            invariant: "i".into(),
            location: "f.rs:1:1".into(),
            verdict,
            caught_by: vec![],
            tests: vec![],
            build_secs: None,
            test_secs: 0.1,
            total_secs: 0.1,
            timeout_secs: 5.0,
            replaced: None,
            replacement: None,
            note: None,
            output_tail: String::new(),
        }
    }

    fn shard(k: usize, n: usize, mutants: Vec<MutantOutcome>) -> ShardOutcome {
        let mut report = Report {
            version: 1,
            complete: true,
            mode: Mode::Schemata,
            registry: "r.yaml".into(),
            shard: Some(format!("{k}/{n}")),
            selected: mutants.len(),
            baseline: Baseline::default(),
            mutants,
            summary: Default::default(),
            elapsed_secs: 1.0,
            notes: vec![],
        };
        report.recount();
        ShardOutcome {
            path: format!("shard-{k}").into(),
            report,
        }
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn check(registry_ids: &[&str], shards: &[ShardOutcome]) -> Result<Report> {
        merge_ids(&ids(registry_ids), shards)
    }

    /// [`merge`] over a list of ids instead of a loaded registry.
    fn merge_ids(wanted: &[String], shards: &[ShardOutcome]) -> Result<Report> {
        let yaml = format!(
            "version: 1\nswitch: crate::m\nswitch_env: M\nreason_enum: R\nmigrations: m\n\
             completeness: {{roots: [src]}}\nguards:\n{}",
            wanted
                .iter()
                .map(|id| format!(
                    "  - {{id: {id}, kind: source, invariant: i, threat: t, tests: [\"a/lib::t\"], \
                     operator: delete, locator: {{file: f.rs, function: f, contains: x}}}}\n"
                ))
                .collect::<String>()
        );
        let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tmp"), e))?;
        let path = dir.path().join("registry.yaml");
        std::fs::write(&path, yaml).map_err(|e| Error::io(&path, e))?;
        let registry = Registry::load(&path)?;
        merge(&registry, shards)
    }

    #[test]
    fn shards_merge_into_registry_order_with_their_verdicts() {
        let merged = check(
            &["a", "b", "c"],
            &[
                shard(1, 2, vec![outcome("b", Verdict::Missed)]),
                shard(
                    0,
                    2,
                    vec![outcome("a", Verdict::Caught), outcome("c", Verdict::Caught)],
                ),
            ],
        )
        .unwrap();
        let got: Vec<(&str, Verdict)> = merged
            .mutants
            .iter()
            .map(|m| (m.id.as_str(), m.verdict))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Verdict::Caught),
                ("b", Verdict::Missed),
                ("c", Verdict::Caught)
            ]
        );
        assert_eq!((merged.summary.caught, merged.summary.missed), (2, 1));
        assert!(merged.shard.is_none() && merged.complete && merged.selected == 3);
        assert_eq!(merged.exit_code(), 1, "a miss in any shard fails the merge");
    }

    #[test]
    fn a_gap_an_overlap_a_missing_or_repeated_shard_is_refused_by_name() {
        let a = || outcome("a", Verdict::Caught);
        let b = || outcome("b", Verdict::Caught);
        let gap = check(
            &["a", "b", "c"],
            &[shard(0, 2, vec![a()]), shard(1, 2, vec![b()])],
        );
        assert!(gap.unwrap_err().to_string().contains("no shard judged c"));
        let overlap = check(
            &["a", "b"],
            &[shard(0, 2, vec![a(), b()]), shard(1, 2, vec![b()])],
        );
        assert!(
            overlap
                .unwrap_err()
                .to_string()
                .contains("`b` was judged in two shards")
        );
        let missing = check(&["a"], &[shard(0, 2, vec![a()])]);
        assert!(
            missing
                .unwrap_err()
                .to_string()
                .contains("shard(s) 1/2 missing")
        );
        let twice = check(&["a"], &[shard(0, 2, vec![a()]), shard(0, 2, vec![])]);
        assert!(twice.unwrap_err().to_string().contains("given twice"));
        let mut unfinished = shard(0, 1, vec![a()]);
        unfinished.report.complete = false;
        assert!(
            check(&["a"], &[unfinished])
                .unwrap_err()
                .to_string()
                .contains("unfinished")
        );
        let mut whole = shard(0, 1, vec![a()]);
        whole.report.shard = None;
        assert!(
            check(&["a"], &[whole])
                .unwrap_err()
                .to_string()
                .contains("not a shard")
        );
    }
}
