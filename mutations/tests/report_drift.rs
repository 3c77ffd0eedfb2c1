//! The committed mutation report (`reports/mutations.json` and `.md`) still
//! describes the registry, and was written by the harness.
//!
//! What "equal to a fresh regeneration" can mean without re-running every
//! mutant inside `cargo test`: the report's registry part (every guard's id,
//! kind, operator, threat, invariant and named tests, in order, and every
//! exemption) must equal the registry's; every guard must carry a verdict
//! from a full run, all of them `caught`, each caught by one of its own named
//! tests; and the Markdown must be exactly the rendering of the JSON. Only the
//! verdicts and times come from the run, and those are checked for shape,
//! not value. The corpus columns, when a corpus run was merged, must each
//! agree with their effect (a guard `covered` names another guard of its own
//! threat and the attacks the pair let through) and with the summary. Any
//! failure says to run `make mutation-report` (and `make mutation-corpus`).

use std::path::{Path, PathBuf};

use mutations::Registry;
use mutations::outcome::Verdict;
use mutations::report::{self, MutationReport, REGENERATE};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the mutations crate sits in the workspace")
        .to_path_buf()
}

fn stale(what: &str) -> String {
    format!(
        "reports/mutations.* is stale: {what}. Regenerate it with `{REGENERATE}` \
         (every guard in both modes: about 8 minutes on 2 cores)"
    )
}

fn committed() -> (MutationReport, String) {
    let json_path = root().join(report::REPORT_JSON);
    let text = std::fs::read_to_string(&json_path)
        .unwrap_or_else(|e| panic!("{}", stale(&format!("{}: {e}", json_path.display()))));
    let parsed: MutationReport = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{}",
            stale(&format!("{} does not parse: {e}", json_path.display()))
        )
    });
    let md_path = root().join(report::REPORT_MD);
    let md = std::fs::read_to_string(&md_path)
        .unwrap_or_else(|e| panic!("{}", stale(&format!("{}: {e}", md_path.display()))));
    (parsed, md)
}

#[test]
fn the_report_lists_exactly_the_registry() {
    let registry = Registry::load(&root().join("mutations/registry.yaml")).expect("registry");
    let (committed, _) = committed();
    let want = report::registry_part(&registry);
    let have = committed.registry_part();
    if want.guards != have.guards {
        let ids = |g: &[report::GuardKey]| g.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        let (w, h) = (ids(&want.guards), ids(&have.guards));
        let added: Vec<_> = w.iter().filter(|i| !h.contains(i)).collect();
        let removed: Vec<_> = h.iter().filter(|i| !w.contains(i)).collect();
        let changed: Vec<_> = want
            .guards
            .iter()
            .filter(|row| have.guards.iter().any(|o| o.id == row.id && o != *row))
            .map(|row| row.id.clone())
            .collect();
        panic!(
            "{}",
            stale(&format!(
                "the registry's guards differ from the report's (added {added:?}, removed {removed:?}, \
                 changed {changed:?}, or reordered)"
            ))
        );
    }
    assert!(
        want.exemptions == have.exemptions,
        "{}",
        stale("the registry's exemptions differ from the report's")
    );
    assert_eq!(
        committed.counts.guards,
        registry.guards.len(),
        "{}",
        stale("the guard count differs")
    );
}

#[test]
fn every_guard_in_the_report_was_caught_by_one_of_its_own_tests() {
    let (committed, _) = committed();
    let mut problems = Vec::new();
    for g in &committed.guards {
        match g.verdict {
            Some(Verdict::Caught) => {}
            Some(v) => problems.push(format!("{}: {}", g.id, v.as_str())),
            None => problems.push(format!("{}: not judged by the report's run", g.id)),
        }
        if let Some(t) = g.caught_by.iter().find(|t| !g.tests.contains(t)) {
            problems.push(format!("{}: caught by {t}, which it does not name", g.id));
        }
        if g.verdict == Some(Verdict::Caught) && g.caught_by.is_empty() {
            problems.push(format!("{}: caught, but by no named test", g.id));
        }
    }
    if let Some(c) = &committed.cross_check {
        problems.extend(c.disagreements.iter().map(|d| format!("cross-check: {d}")));
        assert!(
            c.guards.len() >= 5,
            "{}",
            stale("the cross-mode check compared fewer than 5 guards")
        );
    }
    assert!(
        problems.is_empty(),
        "{}",
        stale(&format!(
            "the committed run did not pass: {}",
            problems.join("; ")
        ))
    );
}

#[test]
fn the_markdown_is_the_rendering_of_the_json() {
    let (committed, md) = committed();
    let rendered = report::render_markdown(&committed);
    if rendered != md {
        let line = rendered
            .lines()
            .zip(md.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| rendered.lines().count().min(md.lines().count()))
            + 1;
        panic!(
            "{}",
            stale(&format!(
                "reports/mutations.md is not the rendering of reports/mutations.json (first difference at line {line})"
            ))
        );
    }
}

#[test]
fn the_corpus_columns_are_consistent_with_the_registry_and_the_summary() {
    use mutations::report::{CorpusEffect, CorpusSummary};
    let registry = Registry::load(&root().join("mutations/registry.yaml")).expect("registry");
    let (committed, _) = committed();
    let Some(run) = &committed.corpus else {
        // No corpus run merged: no row may carry corpus columns either.
        assert!(
            committed.guards.iter().all(|g| g.corpus.is_none()),
            "{}",
            stale("guards carry corpus columns but the report has no corpus run")
        );
        return;
    };
    let mut problems = Vec::new();
    // A guard no merged run judged is allowed only when the report says how
    // many there are and lists each as `not run`.
    let md = std::fs::read_to_string(root().join("reports/mutations.md")).expect("mutations.md");
    let unrun: Vec<&str> = committed
        .guards
        .iter()
        .filter(|g| g.corpus.is_none())
        .map(|g| g.id.as_str())
        .collect();
    if !unrun.is_empty() && !md.contains(&mutations::report::unrun_line(unrun.len())) {
        problems.push(format!(
            "{} guards have no corpus columns and the report does not say so",
            unrun.len()
        ));
    }
    for id in &unrun {
        if !md.contains(&format!("| `{id}` |"))
            || !md.contains(&format!(
                "| `{id}` | {} | not run |",
                registry.guard(id).map_or("", |g| g.threat.as_str())
            ))
        {
            problems.push(format!("{id}: no corpus columns and no `not run` row"));
        }
    }
    for g in &committed.guards {
        let Some(c) = &g.corpus else {
            continue;
        };
        let unblocks = !c.unblocked.is_empty();
        match c.effect {
            CorpusEffect::Unblocks if !unblocks => {
                problems.push(format!("{}: `unblocks` with no scenario unblocked", g.id))
            }
            CorpusEffect::Covered | CorpusEffect::UnitOnly if unblocks => problems.push(format!(
                "{}: {} although its deletion alone unblocks {:?}",
                g.id,
                c.effect.as_str(),
                c.unblocked
            )),
            _ => {}
        }
        match (&c.covered_by, c.effect) {
            (Some(by), CorpusEffect::Covered) => {
                // A cover is another guard of the same threat, or a twin the
                // registry names (either way round), of any threat.
                let own_twins: &[String] =
                    registry.guard(&g.id).map_or(&[], |r| r.twins.as_slice());
                let twins_of_g: Vec<&str> = registry
                    .guards
                    .iter()
                    .filter(|p| p.id != g.id)
                    .filter(|p| p.twins.contains(&g.id) || own_twins.contains(&p.id))
                    .map(|p| p.id.as_str())
                    .collect();
                for by in std::iter::once(by).chain(&c.covered_with) {
                    match registry.guard(by) {
                        Some(p) if p.id != g.id && (p.threat == g.threat || twins_of_g.contains(&by.as_str())) => {}
                        _ => problems.push(format!(
                            "{}: covered by {by}, which is neither another guard of threat {} nor a named twin",
                            g.id, g.threat
                        )),
                    }
                }
                if c.covered_scenarios.is_empty() {
                    problems.push(format!("{}: covered by {by} with no scenario named", g.id));
                }
                // Named twins are always tried, on top of the same-threat
                // limit; a cover found with the whole group off may follow
                // no pair at all.
                let most = run.pair_limit + twins_of_g.len();
                if c.pairs_tried > most {
                    problems.push(format!(
                        "{}: {} pairs tried, more than {most}",
                        g.id, c.pairs_tried
                    ));
                }
            }
            (None, CorpusEffect::Covered) => {
                problems.push(format!("{}: covered, but by no guard", g.id))
            }
            (Some(by), _) => problems.push(format!(
                "{}: names {by} as cover but is {}",
                g.id,
                c.effect.as_str()
            )),
            (None, _) => {}
        }
    }
    let recounted = CorpusSummary::of(committed.guards.iter().filter_map(|g| g.corpus.as_ref()));
    if recounted != run.summary {
        problems.push(format!(
            "the summary {:?} is not the count of the rows {recounted:?}",
            run.summary
        ));
    }
    assert!(
        problems.is_empty(),
        "{}",
        stale(&format!(
            "the corpus columns do not hold together (`make mutation-corpus` merges them): {}",
            problems.join("; ")
        ))
    );
}
