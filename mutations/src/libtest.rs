//! Talking to a libtest test binary: the arguments that run exactly the named
//! tests, and reading back which of them ran and how they ended.
//!
//! Guarantees: [`run_args`] selects tests by exact name only (`--exact`), so
//! a name can never match a longer one by prefix; [`parse_results`] reports
//! only tests that libtest printed a result line for, so a name that matched
//! nothing is *absent*, never "passed".

use std::collections::BTreeMap;

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestStatus {
    Ok,
    Failed,
    Ignored,
}

/// Arguments for a test binary that run exactly `names`, `threads` of them
/// at once when given (libtest's own default, one per CPU, otherwise).
pub fn run_args(names: &[String], threads: Option<usize>) -> Vec<String> {
    let mut args = vec!["--exact".to_string(), "--color".into(), "never".into()];
    if let Some(n) = threads {
        args.extend(["--test-threads".to_string(), n.max(1).to_string()]);
    }
    args.extend(names.iter().cloned());
    args
}

/// Arguments for a test binary that list its tests.
pub fn list_args() -> Vec<String> {
    vec!["--list".into(), "--format".into(), "terse".into()]
}

/// The per-test result lines (`test NAME ... ok|FAILED|ignored`) of a run.
pub fn parse_results(stdout: &str) -> BTreeMap<String, TestStatus> {
    let mut out = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, status)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let name = name.strip_suffix(" - should panic").unwrap_or(name).trim();
        let status = status.trim();
        let status = if status == "ok" {
            TestStatus::Ok
        } else if status.starts_with("FAILED") {
            TestStatus::Failed
        } else if status.starts_with("ignored") {
            TestStatus::Ignored
        } else {
            continue;
        };
        out.insert(name.to_string(), status);
    }
    out
}

/// The test names of `--list --format terse` output.
pub fn parse_list(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_args_name_tests_exactly_and_threads_only_when_asked() {
        let names = vec!["a::b".to_string()];
        assert_eq!(
            run_args(&names, None),
            ["--exact", "--color", "never", "a::b"]
        );
        assert_eq!(
            run_args(&names, Some(8)),
            ["--exact", "--color", "never", "--test-threads", "8", "a::b"]
        );
        assert_eq!(run_args(&names, Some(0))[4], "1");
    }

    #[test]
    fn results_are_read_per_test() {
        let out = "\nrunning 3 tests\ntest guards::tests::a ... ok\ntest guards::tests::b ... FAILED\ntest c - should panic ... ok\ntest d ... ignored, slow\n\nfailures:\n\n---- guards::tests::b stdout ----\ntest result: FAILED. 2 passed; 1 failed; 1 ignored\n";
        let r = parse_results(out);
        assert_eq!(r.len(), 4);
        assert_eq!(r["guards::tests::a"], TestStatus::Ok);
        assert_eq!(r["guards::tests::b"], TestStatus::Failed);
        assert_eq!(r["c"], TestStatus::Ok);
        assert_eq!(r["d"], TestStatus::Ignored);
        assert!(parse_results("running 0 tests\n\ntest result: ok. 0 passed\n").is_empty());
    }

    #[test]
    fn lists_are_read() {
        assert_eq!(parse_list("a::b: test\nc: test\nd: bench\n"), ["a::b", "c"]);
    }
}
