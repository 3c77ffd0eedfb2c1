//! `harness mutants-audit --check`: the committed report's survivors held
//! against `mutations/outside-audit.yaml`.
//!
//! Guarantees: runs nothing; fails (exit 1) on any survivor of the committed
//! report that the classification does not list, and on any entry of the
//! classification that does not say enough ([`Classification::problems`]).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::classification::Classification;
use super::report::Report;

/// The text of every Rust file under gate-core/ and gate/ (for finding test names).
fn gate_sources(root: &Path) -> String {
    fn walk(dir: &Path, out: &mut String) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = String::new();
    walk(&root.join("gate-core"), &mut out);
    walk(&root.join("gate"), &mut out);
    out
}

pub fn check(report: &Path, classification: &Path) -> Result<ExitCode> {
    let text = std::fs::read_to_string(report)
        .with_context(|| format!("reading {} (run make mutants-audit)", report.display()))?;
    let report: Report = serde_json::from_str(&text)?;
    let classes = Classification::load(classification)?;
    let mut problems = classes.problems(&gate_sources(Path::new(".")));
    for s in &report.survivors {
        if classes.verdict_of(&s.key).is_none() {
            problems.push(format!("unclassified survivor: {}", s.name));
        }
    }
    if problems.is_empty() {
        println!(
            "every survivor of {} is classified in {}",
            report.label,
            classification.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for p in &problems {
        eprintln!("{p}");
    }
    eprintln!(
        "{} problem(s): classify each survivor in {}",
        problems.len(),
        classification.display()
    );
    Ok(ExitCode::from(1))
}
