//! The verdict of one mutant as a pure function of what its run recorded.
//!
//! Guarantees: [`judge`] reads only the [`Record`] it is given (no clock, no
//! files, no processes), so the same record always gives the same
//! [`Judgement`]; the rules, in order:
//! 1. a mutant that did not build is `unviable` (`timeout` when the build ran
//!    out of time), whatever else was recorded;
//! 2. a test run killed at its time limit makes it `timeout`;
//! 3. a named test that reported FAILED makes it `caught` (by every such test);
//! 4. a test binary that died of a signal while no named test of it failed
//!    makes it `caught` only when the runner named the signal's cause (a
//!    thread of the binary overflowed its stack: [`signal_cause`]), with a
//!    note; a signal nobody can explain makes it `error`, never `caught`;
//! 5. a named test that printed no result (or was ignored) makes it `error`,
//!    never `missed`;
//! 6. a test binary that exited non-zero while no named test of it failed
//!    makes it `error`;
//! 7. otherwise every named test ran and passed: `missed`.
//!
//! For a schema mutant the facility's drop log then has its say: a `failed`
//! line for the object makes it `unviable`; no `dropped` line turns `caught`
//! or `missed` into `error` (the tests never ran without the object).

use crate::drop_guards::{DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, DropSpec, LogLine};
use crate::libtest::TestStatus;
use crate::outcome::Verdict;
use crate::process::Exit;

/// The build of a mutant that did not succeed (rewrite mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailed {
    pub command: String,
    pub timed_out: bool,
}

/// One run of one test binary with the mutant's named tests.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRun {
    /// `package/target`.
    pub binary: String,
    /// Each named test and what it reported (`None`: no result line).
    pub results: Vec<(String, Option<TestStatus>)>,
    pub exit: Exit,
    /// The limit the run had, in seconds.
    pub limit_secs: f64,
    /// What made the binary die of a signal, when its output says
    /// ([`signal_cause`]).
    pub signal_cause: Option<String>,
}

/// The cause of a test binary's death by a signal that its standard error
/// names: the Rust runtime's report of a thread that overflowed its stack
/// (`thread 'NAME' has overflowed its stack`), which aborts the process.
/// `None` when nothing names one.
pub fn signal_cause(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find(|l| l.contains("has overflowed its stack"))
        .map(|l| l.trim().to_string())
}

/// What the facility's log says about the object a schema mutant drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropSeen {
    /// At least one fresh database went without it.
    Dropped,
    /// The facility could not drop it (or decode it): the error.
    Failed(String),
    /// No line about it.
    Nothing,
}

impl DropSeen {
    /// What `lines` say about `spec`: a failure wins over a drop.
    pub fn from_log(lines: &[LogLine], spec: &DropSpec) -> DropSeen {
        let about = || lines.iter().filter(|l| l.is_about(spec));
        if let Some(LogLine::Failed { message, .. }) =
            about().find(|l| matches!(l, LogLine::Failed { .. }))
        {
            return DropSeen::Failed(message.clone());
        }
        if about().next().is_some() {
            DropSeen::Dropped
        } else {
            DropSeen::Nothing
        }
    }
}

/// Everything a mutant's run recorded that its verdict depends on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    pub build_failed: Option<BuildFailed>,
    /// The test runs in the order they ran (a timed-out run is the last).
    pub runs: Vec<TestRun>,
    /// For a schema mutant: its object and what the drop log says.
    pub drop: Option<(String, DropSeen)>,
}

/// A verdict, why (when it needs saying) and which named tests failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub note: Option<String>,
    /// `package/target::name` of every named test that reported FAILED.
    pub caught_by: Vec<String>,
}

impl Judgement {
    fn new(verdict: Verdict, note: Option<String>, caught_by: Vec<String>) -> Judgement {
        Judgement {
            verdict,
            note,
            caught_by,
        }
    }
}

/// The verdict of a mutant from what its run recorded (see the module docs).
pub fn judge(record: &Record) -> Judgement {
    if let Some(b) = &record.build_failed {
        let verdict = if b.timed_out {
            Verdict::Timeout
        } else {
            Verdict::Unviable
        };
        let note = format!("the mutant does not build (`{}`)", b.command);
        return Judgement::new(verdict, Some(note), Vec::new());
    }
    let judged = judge_runs(&record.runs);
    match &record.drop {
        None => judged,
        Some((want, DropSeen::Failed(e))) => Judgement::new(
            Verdict::Unviable,
            Some(format!("the test database could not drop {want}: {e}")),
            judged.caught_by,
        ),
        Some((want, DropSeen::Nothing))
            if matches!(judged.verdict, Verdict::Caught | Verdict::Missed) =>
        {
            Judgement::new(
                Verdict::Error,
                Some(format!(
                    "no fresh test database dropped {want} (no `dropped` line in {DROP_GUARDS_LOG_ENV}): the named tests do not use the test-database facility, or it ignores {DROP_GUARDS_ENV}"
                )),
                judged.caught_by,
            )
        }
        Some(_) => judged,
    }
}

fn judge_runs(runs: &[TestRun]) -> Judgement {
    let mut caught_by = Vec::new();
    let mut crashed = None;
    let mut unexplained = None;
    let mut not_run = Vec::new();
    let mut odd_exit = None;
    let mut limit: f64 = 0.0;
    for run in runs {
        limit = limit.max(run.limit_secs);
        if run.exit == Exit::TimedOut {
            let note = format!("a named test ran past {limit:.0} s");
            return Judgement::new(Verdict::Timeout, Some(note), caught_by);
        }
        let failed_before = caught_by.len();
        for (name, status) in &run.results {
            let full = format!("{}::{name}", run.binary);
            match status {
                Some(TestStatus::Failed) => caught_by.push(full),
                Some(TestStatus::Ok) => {}
                Some(TestStatus::Ignored) | None => not_run.push(full),
            }
        }
        let failed_here = caught_by.len() > failed_before;
        match (run.exit, &run.signal_cause) {
            (Exit::Signal(s), Some(cause)) if !failed_here => {
                crashed = Some(format!(
                    "{}: the test binary died of signal {s}: {cause}",
                    run.binary
                ));
            }
            (Exit::Signal(s), None) if !failed_here => {
                unexplained = Some(format!(
                    "{}: the test binary died of signal {s}, no named test failed and nothing names the cause",
                    run.binary
                ));
            }
            (Exit::Code(c), _) if !failed_here => {
                odd_exit = Some(format!(
                    "{}: the test binary exited {c} although no named test failed",
                    run.binary
                ));
            }
            _ => {}
        }
    }
    if !caught_by.is_empty() {
        Judgement::new(Verdict::Caught, None, caught_by)
    } else if let Some(c) = crashed {
        Judgement::new(Verdict::Caught, Some(c), caught_by)
    } else if let Some(u) = unexplained {
        Judgement::new(Verdict::Error, Some(u), caught_by)
    } else if !not_run.is_empty() {
        let note = format!("named tests printed no result: {}", not_run.join(", "));
        Judgement::new(Verdict::Error, Some(note), caught_by)
    } else if let Some(o) = odd_exit {
        Judgement::new(Verdict::Error, Some(o), caught_by)
    } else {
        Judgement::new(Verdict::Missed, None, caught_by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drop_guards::ObjectKind;

    use TestStatus::{Failed, Ignored, Ok as Passed};

    fn run(binary: &str, results: &[(&str, Option<TestStatus>)], exit: Exit) -> TestRun {
        TestRun {
            binary: binary.into(),
            results: results.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            exit,
            limit_secs: 20.0,
            signal_cause: None,
        }
    }

    fn runs(runs: Vec<TestRun>) -> Record {
        Record {
            runs,
            ..Record::default()
        }
    }

    fn schema(runs: Vec<TestRun>, seen: DropSeen) -> Record {
        Record {
            runs,
            drop: Some(("constraint:t:ck".into(), seen)),
            ..Record::default()
        }
    }

    /// One row per rule of the module docs: the record, the verdict, the
    /// tests it names as catching, and a word of the note (empty: no note).
    #[test]
    fn the_verdict_table() {
        let ok = |b: &str| run(b, &[("a", Some(Passed))], Exit::Success);
        let failed = |b: &str| {
            run(
                b,
                &[("a", Some(Failed)), ("b", Some(Passed))],
                Exit::Code(101),
            )
        };
        let rows: Vec<(&str, Record, Verdict, Vec<&str>, &str)> = vec![
            (
                "build failed",
                Record {
                    build_failed: Some(BuildFailed {
                        command: "cargo build".into(),
                        timed_out: false,
                    }),
                    runs: vec![failed("g/lib")],
                    drop: None,
                },
                Verdict::Unviable,
                vec![],
                "does not build",
            ),
            (
                "build timed out",
                Record {
                    build_failed: Some(BuildFailed {
                        command: "cargo build".into(),
                        timed_out: true,
                    }),
                    ..Record::default()
                },
                Verdict::Timeout,
                vec![],
                "does not build",
            ),
            (
                "a failure, then a timeout",
                runs(vec![failed("g/lib"), run("g/test:x", &[], Exit::TimedOut)]),
                Verdict::Timeout,
                vec!["g/lib::a"],
                "ran past 20 s",
            ),
            (
                "one named test failed",
                runs(vec![ok("g/lib"), failed("g/test:x")]),
                Verdict::Caught,
                vec!["g/test:x::a"],
                "",
            ),
            (
                "a failure beats a test that printed nothing",
                runs(vec![run(
                    "g/lib",
                    &[("a", Some(Failed)), ("b", None)],
                    Exit::Code(101),
                )]),
                Verdict::Caught,
                vec!["g/lib::a"],
                "",
            ),
            (
                "the binary died of a signal nothing explains",
                runs(vec![run("g/lib", &[("a", None)], Exit::Signal(6))]),
                Verdict::Error,
                vec![],
                "signal 6, no named test failed and nothing names the cause",
            ),
            (
                "the binary died of a signal its output explains",
                runs(vec![TestRun {
                    signal_cause: signal_cause(
                        "running 1 test\n\nthread 'a' has overflowed its stack\nfatal runtime error: stack overflow\n",
                    ),
                    ..run("g/lib", &[("a", None)], Exit::Signal(6))
                }]),
                Verdict::Caught,
                vec![],
                "signal 6: thread 'a' has overflowed its stack",
            ),
            (
                "a named failure beside a signal is a catch by that test",
                runs(vec![run("g/lib", &[("a", Some(Failed))], Exit::Signal(6))]),
                Verdict::Caught,
                vec!["g/lib::a"],
                "",
            ),
            (
                "a named test printed no result",
                runs(vec![run(
                    "g/lib",
                    &[("a", Some(Passed)), ("b", None)],
                    Exit::Success,
                )]),
                Verdict::Error,
                vec![],
                "g/lib::b",
            ),
            (
                "an ignored test never counts as passing",
                runs(vec![run("g/lib", &[("a", Some(Ignored))], Exit::Success)]),
                Verdict::Error,
                vec![],
                "printed no result",
            ),
            (
                "non-zero exit with no failure",
                runs(vec![run("g/lib", &[("a", Some(Passed))], Exit::Code(3))]),
                Verdict::Error,
                vec![],
                "exited 3",
            ),
            (
                "every named test passed",
                runs(vec![ok("g/lib"), ok("g/test:x")]),
                Verdict::Missed,
                vec![],
                "",
            ),
            (
                "schema: dropped and caught",
                schema(vec![failed("g/test:db")], DropSeen::Dropped),
                Verdict::Caught,
                vec!["g/test:db::a"],
                "",
            ),
            (
                "schema: dropped and missed",
                schema(vec![ok("g/test:db")], DropSeen::Dropped),
                Verdict::Missed,
                vec![],
                "",
            ),
            (
                "schema: never dropped, so a failure proves nothing",
                schema(vec![failed("g/test:db")], DropSeen::Nothing),
                Verdict::Error,
                vec!["g/test:db::a"],
                "no fresh test database dropped constraint:t:ck",
            ),
            (
                "schema: never dropped and passing",
                schema(vec![ok("g/test:db")], DropSeen::Nothing),
                Verdict::Error,
                vec![],
                "no `dropped` line",
            ),
            (
                "schema: never dropped keeps a timeout",
                schema(
                    vec![run("g/test:db", &[], Exit::TimedOut)],
                    DropSeen::Nothing,
                ),
                Verdict::Timeout,
                vec![],
                "ran past",
            ),
            (
                "schema: the drop failed",
                schema(
                    vec![failed("g/test:db")],
                    DropSeen::Failed("no such constraint".into()),
                ),
                Verdict::Unviable,
                vec!["g/test:db::a"],
                "could not drop constraint:t:ck: no such constraint",
            ),
        ];
        for (what, record, verdict, caught_by, note) in rows {
            let j = judge(&record);
            assert_eq!(j.verdict, verdict, "{what}: {j:?}");
            assert_eq!(j.caught_by, caught_by, "{what}");
            match (&j.note, note) {
                (None, "") => {}
                (Some(n), word) if !word.is_empty() => {
                    assert!(n.contains(word), "{what}: note {n:?} lacks {word:?}")
                }
                (n, word) => panic!("{what}: note {n:?}, wanted {word:?}"),
            }
            assert_eq!(
                judge(&record),
                j,
                "{what}: the same record, the same judgement"
            );
        }
    }

    #[test]
    fn the_drop_log_is_read_for_the_one_object() {
        let spec = DropSpec::new(ObjectKind::Trigger, "t", "tr").unwrap();
        let other = DropSpec::new(ObjectKind::Trigger, "t", "other").unwrap();
        let failed = LogLine::Failed {
            item: spec.to_string(),
            message: "gone".into(),
        };
        let cases = [
            (vec![], DropSeen::Nothing),
            (vec![LogLine::Dropped(other.clone())], DropSeen::Nothing),
            (vec![LogLine::Dropped(spec.clone())], DropSeen::Dropped),
            (
                vec![LogLine::Dropped(spec.clone()), failed.clone()],
                DropSeen::Failed("gone".into()),
            ),
            (vec![failed], DropSeen::Failed("gone".into())),
        ];
        for (lines, want) in cases {
            assert_eq!(DropSeen::from_log(&lines, &spec), want, "{lines:?}");
        }
    }
}
