//! `reports/benchmark.md` and `.json`: how the corpus fared.
//!
//! Guarantees: every figure is computed from the results of one run and the
//! corpus, nothing else; each engine's figures stand beside the others' and
//! beside every engine's verdicts together; an attack an engine did not send
//! is "not run" there and in none of its figures; dev and held-out are
//! reported apart; every failing scenario is listed with its failures; an
//! empty denominator is `n/a` (JSON `null`), never 100%.

use std::collections::BTreeMap;

use scenarios::Corpus;
use serde::Serialize;

use super::markdown::{frac, pct, table};
use crate::bench::Runs;
use crate::bench::results::{Confusion, Label, ScenarioResult, Summary, ratio};

/// One slice of the results (all, dev, held-out, a class, a layer).
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    /// Attacks the engine did not send (out of every other figure).
    pub not_run: usize,
    pub attacks: usize,
    pub blocked: usize,
    pub blocked_expected_reason: usize,
    pub legit: usize,
    pub legit_passed: usize,
    pub confusion: Confusion,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub blocked_expected_reason_rate: Option<f64>,
}

impl Slice {
    fn of<'a>(results: impl IntoIterator<Item = &'a ScenarioResult> + Clone) -> Self {
        let summary = Summary::of(&results.clone().into_iter().cloned().collect::<Vec<_>>());
        let confusion = Confusion::of(results);
        Slice {
            not_run: summary.not_run,
            attacks: summary.attacks.total,
            blocked: summary.attacks.blocked,
            blocked_expected_reason: summary.attacks.blocked_expected_reason,
            legit: summary.legit.total,
            legit_passed: summary.legit.passed,
            precision: confusion.precision(),
            recall: confusion.recall(),
            blocked_expected_reason_rate: ratio(
                summary.attacks.blocked_expected_reason,
                summary.attacks.total,
            ),
            confusion,
        }
    }
}

/// A failing scenario and why.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub id: String,
    pub label: Label,
    pub heldout: bool,
    pub failures: Vec<String>,
}

/// One engine's figures (or every engine's verdicts together).
#[derive(Debug, Clone, Serialize)]
pub struct EngineFigures {
    /// `every engine`, `database` (with the pure cross-check), `http`, `pure`.
    pub engine: String,
    pub all: Slice,
    pub dev: Slice,
    pub heldout: Slice,
    pub per_layer: BTreeMap<String, Slice>,
    pub per_class: BTreeMap<String, Slice>,
}

impl EngineFigures {
    fn build(engine: &str, corpus: &Corpus, results: &[ScenarioResult]) -> Self {
        let layer_of = |r: &ScenarioResult| {
            r.class
                .as_deref()
                .and_then(|c| corpus.taxonomy.get(c))
                .map(|c| c.layer.as_str().to_string())
        };
        let mut per_layer: BTreeMap<String, Vec<&ScenarioResult>> = BTreeMap::new();
        let mut per_class: BTreeMap<String, Vec<&ScenarioResult>> = BTreeMap::new();
        for r in results {
            if let Some(class) = &r.class {
                per_class.entry(class.clone()).or_default().push(r);
            }
            if let Some(layer) = layer_of(r) {
                per_layer.entry(layer).or_default().push(r);
            }
        }
        EngineFigures {
            engine: engine.to_string(),
            all: Slice::of(results.iter()),
            dev: Slice::of(results.iter().filter(|r| !r.heldout)),
            heldout: Slice::of(results.iter().filter(|r| r.heldout)),
            per_layer: per_layer
                .into_iter()
                .map(|(k, v)| (k, Slice::of(v.iter().copied())))
                .collect(),
            per_class: per_class
                .into_iter()
                .map(|(k, v)| (k, Slice::of(v.iter().copied())))
                .collect(),
        }
    }
}

/// The name of every engine's verdicts together.
pub const TOGETHER: &str = "every engine";

/// The whole benchmark report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkReport {
    /// The commit the report was made from ([`super::provenance`]).
    pub made_from: String,
    pub scenarios: usize,
    pub files: usize,
    pub classes: usize,
    pub classes_with_attacks: usize,
    pub ran_on_both_engines: usize,
    /// Every engine's verdicts together: a scenario passes only if it passed
    /// on every engine that ran it, and an attack is blocked only if every
    /// engine that sent it blocked it.
    pub all: Slice,
    pub dev: Slice,
    pub heldout: Slice,
    pub per_layer: BTreeMap<String, Slice>,
    pub per_class: BTreeMap<String, Slice>,
    /// Each engine's own figures, in the order pure, database, http.
    pub engines: Vec<EngineFigures>,
    pub failures: Vec<Failure>,
}

impl BenchmarkReport {
    pub fn build(corpus: &Corpus, runs: &Runs) -> Self {
        let results = runs.combined.as_slice();
        let together = EngineFigures::build(TOGETHER, corpus, results);
        let classes_with_attacks = corpus
            .taxonomy
            .classes
            .iter()
            .filter(|c| {
                results
                    .iter()
                    .any(|r| r.label == Label::Attack && r.class.as_deref() == Some(&c.id))
            })
            .count();
        BenchmarkReport {
            made_from: String::new(),
            scenarios: results.len(),
            files: corpus.files.len(),
            classes: corpus.taxonomy.classes.len(),
            classes_with_attacks,
            ran_on_both_engines: runs
                .engines
                .iter()
                .find(|e| e.engine == "database")
                .map(|e| {
                    e.results
                        .iter()
                        .filter(|r| r.engine == "database+pure")
                        .count()
                })
                .unwrap_or(0),
            all: together.all,
            dev: together.dev,
            heldout: together.heldout,
            per_layer: together.per_layer,
            per_class: together.per_class,
            engines: runs
                .engines
                .iter()
                .map(|e| EngineFigures::build(&e.engine, corpus, &e.results))
                .collect(),
            failures: results
                .iter()
                .filter(|r| !r.passed)
                .map(|r| Failure {
                    id: r.id.clone(),
                    label: r.label,
                    heldout: r.heldout,
                    failures: r.failures.clone(),
                })
                .collect(),
        }
    }

    /// The views the tables show: every engine together (when more than one
    /// ran), then each engine's own.
    fn views(&self) -> Vec<(&str, &Slice, &Slice, &Slice)> {
        let mut out = Vec::new();
        if self.engines.len() != 1 {
            out.push((TOGETHER, &self.all, &self.dev, &self.heldout));
        }
        for e in &self.engines {
            out.push((e.engine.as_str(), &e.all, &e.dev, &e.heldout));
        }
        out
    }

    /// The committed corpus's report.
    pub fn markdown(&self) -> String {
        self.markdown_titled(
            "Benchmark: the scenario corpus through the gate",
            "Generated by `harness report` (`make reports`) from `scenarios/` and a run of every\n\
             scenario through the database-backed gate (and, where it can run them, the pure\n\
             engine too; a disagreement between the two is a failure) and through the HTTP\n\
             engine (the real service on a loopback port; a disagreement with the database\n\
             engine is a failure). An attack whose attack steps are wire-only is sent only by\n\
             the HTTP engine: it is *not run* on the database engine and out of that engine's\n\
             figures. Do not edit by hand: a test fails when this file differs from a fresh\n\
             regeneration.",
        )
    }

    /// The report under another title and introduction.
    pub fn markdown_titled(&self, title: &str, intro: &str) -> String {
        let mut md = format!(
            "# {title}\n\n{}\n\n{intro}\n\n\
             Positive means blocked: a blocked attack is a true positive, an attack that got\n\
             through a false negative, a legitimate scenario that did not pass a false positive.\n\n",
            super::provenance::md_line(&self.made_from)
        );
        md += "## Composition\n\n";
        md += &table(
            &["", "all", "dev", "held-out"],
            [
                row(
                    "scenarios",
                    [&self.all, &self.dev, &self.heldout].map(|s| s.attacks + s.not_run + s.legit),
                ),
                row(
                    "attacks",
                    [&self.all, &self.dev, &self.heldout].map(|s| s.attacks + s.not_run),
                ),
                row(
                    "legitimate",
                    [self.all.legit, self.dev.legit, self.heldout.legit],
                ),
            ],
        );
        md += &format!(
            "\n{} corpus files; {} taxonomy classes, {} of them with at least one attack; \
             {} scenarios ran on both the database and the pure engine.\n\n",
            self.files, self.classes, self.classes_with_attacks, self.ran_on_both_engines
        );
        md += "## Headline\n\n";
        if self.engines.len() > 1 {
            md += "Each engine's own figures, and every engine's verdicts together (a scenario \
                   passes only if it passed on every engine that ran it; an attack is blocked only \
                   if every engine that sent it blocked it).\n\n";
        }
        let mut rows = Vec::new();
        for (engine, all, dev, heldout) in self.views() {
            for (slice, s) in [("all", all), ("dev", dev), ("held-out", heldout)] {
                rows.push(vec![
                    engine.to_string(),
                    slice.to_string(),
                    pct(s.precision),
                    pct(s.recall),
                    frac(s.blocked, s.attacks),
                    frac(s.blocked_expected_reason, s.attacks),
                    frac(s.legit_passed, s.legit),
                    s.not_run.to_string(),
                ]);
            }
        }
        md += &table(
            &[
                "engine",
                "",
                "precision",
                "recall",
                "attacks blocked",
                "blocked for the expected reason",
                "legitimate passed",
                "attacks not run",
            ],
            rows,
        );
        md += "
## Confusion matrix
";
        for (engine, all, _, _) in self.views() {
            md += &format!(
                "
### {engine}

"
            );
            md += &confusion_table(&all.confusion);
        }
        md += "\n## Per layer\n\nThe layer is the one the taxonomy says must stop the class.\n\n";
        md += &self.slice_table("layer", &self.per_layer, |e| &e.per_layer);
        md += "\n## Per class\n\n";
        md += &self.slice_table("class", &self.per_class, |e| &e.per_class);
        md += "\n## Failures\n\n";
        if self.failures.is_empty() {
            md += "None: every scenario met every expectation and invariant.\n";
        }
        for f in &self.failures {
            md += &format!(
                "- `{}` ({}{}):\n",
                f.id,
                match f.label {
                    Label::Attack => "attack",
                    Label::Legit => "legitimate",
                },
                if f.heldout { ", held-out" } else { "" }
            );
            for line in &f.failures {
                md += &format!("  - {}\n", line.replace('\n', " "));
            }
        }
        md
    }
}

/// The confusion matrix: a row per label, a column per outcome. Positive
/// means blocked, so each column's header says what it is for either row.
fn confusion_table(c: &Confusion) -> String {
    table(
        &[
            "",
            "positive: an attack blocked, a legitimate scenario that did not pass",
            "negative: an attack that got through, a legitimate scenario that passed",
        ],
        [
            vec![
                "attack".to_string(),
                format!("{} (TP)", c.true_positive),
                format!("{} (FN)", c.false_negative),
            ],
            vec![
                "legitimate".to_string(),
                format!("{} (FP)", c.false_positive),
                format!("{} (TN)", c.true_negative),
            ],
        ],
    )
}

fn row(name: &str, values: [usize; 3]) -> Vec<String> {
    std::iter::once(name.to_string())
        .chain(values.iter().map(ToString::to_string))
        .collect()
}

impl BenchmarkReport {
    /// Per layer or per class: attacks blocked on every engine together and
    /// on each engine (with the attacks it did not send), then the rest of
    /// the figures together.
    fn slice_table(
        &self,
        what: &str,
        together: &BTreeMap<String, Slice>,
        of: impl Fn(&EngineFigures) -> &BTreeMap<String, Slice>,
    ) -> String {
        let several = self.engines.len() > 1;
        let mut header = vec![what.to_string(), "attacks blocked".to_string()];
        if several {
            header.extend(
                self.engines
                    .iter()
                    .map(|e| format!("{}: blocked", e.engine)),
            );
        }
        header.extend(["for the expected reason", "legitimate passed", "recall"].map(String::from));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        table(
            &header,
            together.iter().map(|(name, s)| {
                let mut row = vec![format!("`{name}`"), frac(s.blocked, s.attacks)];
                if several {
                    for e in &self.engines {
                        row.push(match of(e).get(name) {
                            None => "–".to_string(),
                            Some(e) if e.not_run > 0 => {
                                format!("{} ({} not run)", frac(e.blocked, e.attacks), e.not_run)
                            }
                            Some(e) => frac(e.blocked, e.attacks),
                        });
                    }
                }
                row.extend([
                    frac(s.blocked_expected_reason, s.attacks),
                    frac(s.legit_passed, s.legit),
                    pct(s.recall),
                ]);
                row
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cell of `row` under each header, as (header, cell).
    fn cells_of(md: &str, row: &str) -> Vec<(String, String)> {
        let split = |line: &str| -> Vec<String> {
            line.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        let mut lines = md.lines();
        let headers = split(lines.next().unwrap_or_default());
        let cells = lines
            .map(split)
            .find(|cells| cells.first().map(String::as_str) == Some(row))
            .unwrap_or_default();
        headers.into_iter().zip(cells).collect()
    }

    #[test]
    fn each_confusion_column_header_says_what_the_legitimate_row_holds_there() {
        let c = Confusion {
            true_positive: 11,
            false_negative: 12,
            false_positive: 13,
            true_negative: 14,
        };
        let md = confusion_table(&c);
        let legit = cells_of(&md, "legitimate");
        let passed = legit
            .iter()
            .find(|(_, cell)| cell.starts_with("14 "))
            .map(|(h, _)| h.as_str());
        let refused = legit
            .iter()
            .find(|(_, cell)| cell.starts_with("13 "))
            .map(|(h, _)| h.as_str());
        assert!(
            passed.is_some_and(|h| h.contains("passed") && !h.contains("did not pass")),
            "the legitimate scenarios that passed sit under {passed:?}\n{md}"
        );
        assert!(
            refused.is_some_and(|h| h.contains("did not pass")),
            "the legitimate scenarios that did not pass sit under {refused:?}\n{md}"
        );
        let attack = cells_of(&md, "attack");
        let blocked = attack.iter().find(|(_, cell)| cell.starts_with("11 "));
        let through = attack.iter().find(|(_, cell)| cell.starts_with("12 "));
        assert!(
            blocked.is_some_and(|(h, _)| h.contains("attack blocked")),
            "{md}"
        );
        assert!(
            through.is_some_and(|(h, _)| h.contains("attack that got through")),
            "{md}"
        );
    }
}
