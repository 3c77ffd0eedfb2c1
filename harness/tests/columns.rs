//! `harness --help`, every subcommand's `--help` to any depth, and the
//! triage tour's lines fit in 80 columns, whatever the terminal.

use std::process::Command;

const COLUMNS: usize = 80;

/// The help of `harness ARGS... --help`, in a terminal said to be 200 wide.
fn help(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .arg("--help")
        .env("COLUMNS", "200")
        .output()
        .expect("harness runs");
    assert!(out.status.success(), "harness {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommand names a help lists under `Commands:`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A listed name is indented two spaces; a wrapped description more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn no_help_line_is_wider_than_80_columns() {
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(args) = todo.pop() {
        let text = help(&args);
        seen += 1;
        for line in text.lines() {
            assert!(
                line.chars().count() <= COLUMNS,
                "harness {} --help has a line of {} columns:\n{line}",
                args.join(" "),
                line.chars().count()
            );
        }
        for sub in subcommands(&text) {
            let mut next = args.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    assert!(seen > 10, "only {seen} helps were read");
}

/// The tour's first step (every line goes through the same printer as the
/// database steps') fits in 80 columns.
#[test]
fn triage_lines_fit_in_80_columns() {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["triage", "--no-db"])
        .env("COLUMNS", "200")
        .output()
        .expect("harness runs");
    assert!(out.status.success(), "harness triage --no-db failed");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(text.contains("Step 1"), "{text}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= COLUMNS,
            "a triage line of {} columns:\n{line}",
            line.chars().count()
        );
    }
}
