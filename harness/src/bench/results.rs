//! The benchmark's results file: one record per scenario and the summary the
//! spec names, with the spec's field names.
//!
//! Guarantees: positive means blocked. A blocked attack is a true positive,
//! an attack not blocked a false negative, a legit scenario that does not pass
//! a false positive, one that passes a true negative. An attack an engine did
//! not send ("not run" there: its attack steps are wire-only) is never
//! blocked and is in no count but `not_run`. A ratio whose denominator is
//! zero is `None` (JSON `null`, `n/a` in reports), never 100%.

use serde::{Deserialize, Serialize};

/// `attack` or `legit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Attack,
    Legit,
}

/// One scenario's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub id: String,
    pub label: Label,
    pub class: Option<String>,
    pub passed: bool,
    pub blocked: bool,
    pub expected_reason: Option<String>,
    pub actual_reason: Option<String>,
    pub failures: Vec<String>,
    /// The gate could not answer a step: an error of the gate, a panic or a
    /// timeout (the spec's field; its text is in `failures`).
    #[serde(default)]
    pub engine_error: bool,
    /// Which engine ran it: `pure` or `database` (an addition to the spec's fields).
    pub engine: String,
    /// Whether the id is listed in `heldout.txt` (an addition).
    pub heldout: bool,
    /// Every reason code any step came out with, sorted (an addition).
    #[serde(default)]
    pub reasons_seen: Vec<String>,
    /// Every database guard (constraint, index or trigger) named by a
    /// refusal, sorted (an addition).
    #[serde(default)]
    pub guards_seen: Vec<String>,
    /// The codes the steps carrying the attack came out with
    /// ([`scenarios::Scenario::attack_steps`]), sorted: a gate reason, or
    /// the service's own code for a wire-only step (an addition).
    #[serde(default)]
    pub attack_reasons: Vec<String>,
    /// The engine did not send the attack (its attack steps are wire-only):
    /// no evidence either way, never blocked, out of every count but
    /// `not_run` (an addition).
    #[serde(default)]
    pub not_run: bool,
}

impl ScenarioResult {
    /// Blocked for the expected reason: blocked, and every expectation met.
    pub fn blocked_expected_reason(&self) -> bool {
        self.blocked && self.passed
    }

    /// Whether the result is evidence: the engine sent the scenario's attack.
    pub fn ran(&self) -> bool {
        !self.not_run
    }
}

/// Counts of attacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttackCounts {
    pub total: usize,
    pub blocked: usize,
    pub blocked_expected_reason: usize,
}

/// Counts of legitimate scenarios.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegitCounts {
    pub total: usize,
    pub passed: usize,
}

/// The spec's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub attacks: AttackCounts,
    pub legit: LegitCounts,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    /// Scenarios that did not pass, attack or legit (an addition).
    pub failed: usize,
    /// Scenarios that ended in an engine error (an addition).
    #[serde(default)]
    pub engine_errors: usize,
    /// Attacks the engine did not send, out of every other count (an addition).
    #[serde(default)]
    pub not_run: usize,
}

/// The confusion matrix, positive meaning blocked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confusion {
    pub true_positive: usize,
    pub false_negative: usize,
    pub false_positive: usize,
    pub true_negative: usize,
}

impl Confusion {
    pub fn of<'a>(results: impl IntoIterator<Item = &'a ScenarioResult>) -> Self {
        let mut c = Confusion::default();
        for r in results.into_iter().filter(|r| r.ran()) {
            match (r.label, r.blocked, r.passed) {
                (Label::Attack, true, _) => c.true_positive += 1,
                (Label::Attack, false, _) => c.false_negative += 1,
                (Label::Legit, _, false) => c.false_positive += 1,
                (Label::Legit, _, true) => c.true_negative += 1,
            }
        }
        c
    }

    pub fn precision(&self) -> Option<f64> {
        ratio(self.true_positive, self.true_positive + self.false_positive)
    }

    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positive, self.true_positive + self.false_negative)
    }
}

/// `num / den`, or `None` when `den` is zero.
pub fn ratio(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

impl Summary {
    pub fn of(all: &[ScenarioResult]) -> Self {
        let not_run = all.iter().filter(|r| !r.ran()).count();
        let results: Vec<&ScenarioResult> = all.iter().filter(|r| r.ran()).collect();
        let results = results.as_slice();
        let attacks = results.iter().filter(|r| r.label == Label::Attack);
        let legit = results.iter().filter(|r| r.label == Label::Legit);
        let confusion = Confusion::of(results.iter().copied());
        Summary {
            attacks: AttackCounts {
                total: attacks.clone().count(),
                blocked: attacks.clone().filter(|r| r.blocked).count(),
                blocked_expected_reason: attacks.filter(|r| r.blocked_expected_reason()).count(),
            },
            legit: LegitCounts {
                total: legit.clone().count(),
                passed: legit.filter(|r| r.passed).count(),
            },
            precision: confusion.precision(),
            recall: confusion.recall(),
            failed: results.iter().filter(|r| !r.passed).count(),
            engine_errors: results.iter().filter(|r| r.engine_error).count(),
            not_run,
        }
    }
}

/// One engine's own run of the corpus: its results judged alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineRun {
    /// `database` (with the pure engine's cross-check where it can run) or `http`.
    pub engine: String,
    pub summary: Summary,
    pub results: Vec<ScenarioResult>,
}

impl EngineRun {
    pub fn of(engine: &str, results: Vec<ScenarioResult>) -> Self {
        EngineRun {
            engine: engine.to_string(),
            summary: Summary::of(&results),
            results,
        }
    }
}

/// The file `harness bench` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsFile {
    pub summary: Summary,
    /// One per scenario, every engine's verdict together: it passes only
    /// if it passed on every engine that ran it, and an attack is blocked
    /// only if every engine that sent it blocked it.
    pub results: Vec<ScenarioResult>,
    /// Each engine's own run, when more than one engine ran (an addition).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineRun>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(label: Label, passed: bool, blocked: bool) -> ScenarioResult {
        ScenarioResult {
            id: "x".into(),
            label,
            class: None,
            passed,
            blocked,
            expected_reason: None,
            actual_reason: None,
            failures: vec![],
            engine_error: false,
            engine: "pure".into(),
            heldout: false,
            reasons_seen: vec![],
            guards_seen: vec![],
            attack_reasons: vec![],
            not_run: false,
        }
    }

    #[test]
    fn the_confusion_matrix_follows_the_spec() {
        let results = [
            r(Label::Attack, true, true),   // TP, expected reason
            r(Label::Attack, false, true),  // TP, other reason
            r(Label::Attack, false, false), // FN
            r(Label::Legit, true, false),   // TN
            r(Label::Legit, false, false),  // FP
        ];
        let c = Confusion::of(&results);
        assert_eq!(
            c,
            Confusion {
                true_positive: 2,
                false_negative: 1,
                false_positive: 1,
                true_negative: 1
            }
        );
        let s = Summary::of(&results);
        assert_eq!(
            s.attacks,
            AttackCounts {
                total: 3,
                blocked: 2,
                blocked_expected_reason: 1
            }
        );
        assert_eq!(
            s.legit,
            LegitCounts {
                total: 2,
                passed: 1
            }
        );
        assert_eq!(s.precision, Some(2.0 / 3.0));
        assert_eq!(s.recall, Some(2.0 / 3.0));
        assert_eq!(s.failed, 3);
    }

    #[test]
    fn an_attack_not_run_is_out_of_every_count_but_its_own() {
        let mut not_run = r(Label::Attack, true, false);
        not_run.not_run = true;
        let results = [
            not_run,
            r(Label::Attack, true, true),
            r(Label::Legit, true, false),
        ];
        let s = Summary::of(&results);
        assert_eq!(s.not_run, 1);
        assert_eq!(
            s.attacks,
            AttackCounts {
                total: 1,
                blocked: 1,
                blocked_expected_reason: 1
            }
        );
        assert_eq!(Confusion::of(&results).true_positive, 1);
        assert_eq!(Confusion::of(&results).false_negative, 0);
        assert_eq!(s.recall, Some(1.0));
    }

    #[test]
    fn an_empty_denominator_is_none_never_one_hundred_percent() {
        let s = Summary::of(&[r(Label::Legit, true, false)]);
        assert_eq!(s.precision, None);
        assert_eq!(s.recall, None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["precision"].is_null());
    }
}
