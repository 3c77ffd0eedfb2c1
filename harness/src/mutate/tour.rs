//! The mutation step of the triage tour: three guards deleted live with the
//! real runner, and what caught each deletion.
//!
//! Guarantees: [`mutation_tour_with`] runs `harness mutate --only` for
//! exactly [`TOUR`]'s three guards (one source guard of the policy engine,
//! one schema guard, one delegation guard) in schemata mode, in a scratch
//! copy (the workspace is only read), and returns, per guard, its invariant,
//! the verdict, the named test that failed and the first failing assertion
//! of that test's own output (the `panicked at` line and its message). A
//! guard that was not caught is shown as such, never dressed up. It needs
//! Postgres for the schema guard: `database_url`, else `DATABASE_URL`.

use std::ffi::OsString;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use mutations::{Cancel, Event, MutantOutcome, Registry, RunOptions, Verdict};

use super::sweep;

/// The three guards the tour deletes: (id, why this one).
pub const TOUR: [(&str, &str); 3] = [
    (
        "policy-merchant",
        "a source guard: the policy engine's merchant allowlist",
    ),
    (
        "db-authority-consumed-once",
        "a schema guard: the CHECK that a checkout authority is consumed once",
    ),
    (
        "delegation-no-revoked-hop",
        "a delegation guard: a revoked hop anywhere above the leaf stops the branch",
    ),
];

/// Runs the tour and returns its text. `database_url` is passed to the test
/// processes (for a cluster the caller started); `None` uses `DATABASE_URL`.
pub fn mutation_tour_with(database_url: Option<&str>) -> Result<String> {
    let root = crate::workspace::root()?;
    let mut opts = RunOptions::new(&root);
    opts.only = TOUR.iter().map(|(id, _)| (*id).to_string()).collect();
    opts.out_dir = opts.out_dir.join("tour");
    if let Some(url) = database_url {
        opts.test_env
            .push((OsString::from("DATABASE_URL"), OsString::from(url)));
    } else if sweep::database_url(&[]).is_none() {
        bail!(
            "the mutation tour needs Postgres for its schema guard: set DATABASE_URL \
             (`export \"$(cargo run -q -p harness -- db up)\"`) or run it under `harness db run`"
        );
    }
    let registry = Registry::load(&opts.registry)?;
    let cancel = Cancel::new();
    let mut phases = |e: &Event| {
        if let Event::Phase(p) = e {
            eprintln!("mutation tour: {p}");
        }
    };
    let run = mutations::run(&opts, &cancel, &mut phases);
    sweep::sweep_killed_test_databases(sweep::database_url(&opts.test_env).as_deref());
    let report = run.context("the mutation tour's run")?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Deleting three guards, one at a time, in a scratch copy (schemata mode; your tree is only read):\n"
    );
    for (id, why) in TOUR {
        let invariant = registry
            .guard(id)
            .map(|g| g.invariant.clone())
            .unwrap_or_default();
        let Some(m) = report.mutants.iter().find(|m| m.id == id) else {
            let _ = writeln!(out, "- {id}: not judged\n");
            continue;
        };
        let _ = writeln!(out, "- {id} ({why})");
        let _ = writeln!(out, "  without it: {invariant}");
        let _ = writeln!(out, "  deleted:    {} ({})", m.location, m.operator);
        match m.verdict {
            Verdict::Caught => {
                for test in &m.caught_by {
                    let _ = writeln!(out, "  failed:     {test}");
                }
                match first_failure(m) {
                    Some(assertion) => {
                        let _ = writeln!(
                            out,
                            "  assertion:  {}",
                            assertion.replace('\n', "\n              ")
                        );
                    }
                    None => {
                        let _ = writeln!(out, "  assertion:  (not in the captured output)");
                    }
                }
            }
            v => {
                let _ = writeln!(
                    out,
                    "  verdict:    {} {}",
                    v.as_str().to_uppercase(),
                    m.note.clone().unwrap_or_default()
                );
            }
        }
        let _ = writeln!(out, "  time:       {:.1} s\n", m.total_secs);
    }
    let _ = writeln!(
        out,
        "{} of 3 caught. The whole registry: `make mutation` (rewrite mode) or `harness mutate`.",
        report
            .mutants
            .iter()
            .filter(|m| m.verdict == Verdict::Caught)
            .count()
    );
    Ok(out)
}

/// The first failing assertion in a mutant's test output: the `panicked at`
/// line of the first failed named test and the message lines after it.
pub fn first_failure(m: &MutantOutcome) -> Option<String> {
    first_panic(&m.output_tail)
}

fn first_panic(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    let start = lines.iter().position(|l| l.contains("panicked at "))?;
    let at = lines[start]
        .split_once("panicked at ")
        .map_or(lines[start], |(_, rest)| rest)
        .trim_end_matches(':');
    let mut message = vec![format!("at {at}")];
    for l in &lines[start + 1..] {
        if l.trim().is_empty() || l.starts_with("note:") || l.starts_with("---- ") {
            break;
        }
        message.push(l.trim_end().to_string());
        if message.len() >= 6 {
            break;
        }
    }
    Some(message.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_panic_and_its_message_are_extracted() {
        let out = "running 1 test\ntest x ... FAILED\n\nfailures:\n\n---- x stdout ----\n\
                   thread 'x' panicked at gate/src/policy.rs:350:9:\n\
                   assertion `left == right` failed\n  left: Allow\n right: Deny(MerchantNotAllowed)\n\
                   note: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            first_panic(out).as_deref(),
            Some(
                "at gate/src/policy.rs:350:9\nassertion `left == right` failed\n  left: Allow\n right: Deny(MerchantNotAllowed)"
            )
        );
        assert_eq!(first_panic("test x ... ok\n"), None);
    }

    #[test]
    fn the_tour_names_registered_guards_of_three_kinds() {
        use std::path::Path;
        let root = crate::workspace::root_above(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let registry = Registry::load(&root.join("mutations/registry.yaml")).unwrap();
        let kinds: Vec<_> = TOUR
            .iter()
            .map(|(id, _)| registry.guard(id).map(|g| g.kind()))
            .collect();
        use mutations::registry::GuardKind::*;
        assert_eq!(kinds, [Some(Source), Some(Schema), Some(Source)]);
        assert!(TOUR[2].0.starts_with("delegation-"));
    }
}
