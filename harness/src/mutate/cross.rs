//! `harness mutate --cross-check N|all [--seed S] [--report-dir DIR]`: the
//! selected registry in schemata mode, then the same guards' rewrite-mode
//! mutants for a seeded sample (or all of them), verdict by verdict.
//!
//! Guarantees: the sample is drawn from the selection's source guards (where
//! the two modes differ; a schema guard is judged the same way in both) with
//! [`mutations::report::sample`], and the seed is printed before anything
//! runs, so `--seed S` replays the same sample anywhere. `all` compares every
//! selected guard, schema guards included, and so measures the rewrite
//! whole-registry time. The exit status is 0 only when every mutant of both
//! runs was caught and no verdict differs; a difference is named on stdout.
//! With `--report-dir`, `mutations.json` and `mutations.md` are written there
//! from the registry and both runs ([`mutations::report`]), whatever the
//! verdicts (a report of a failing run says so).

use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use mutations::report::{self, CrossCheck, MutationReport};
use mutations::{Cancel, Error, Mode, Registry, Report, RunOptions, plan};

use super::Progress;
use super::sweep;

/// How many guards the cross-mode check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    Count(usize),
    All,
}

impl FromStr for Sample {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(Sample::All);
        }
        match s.parse::<usize>() {
            Ok(n) if n >= 5 => Ok(Sample::Count(n)),
            _ => Err(format!(
                "`{s}` is not `all` or a count of at least 5 guards"
            )),
        }
    }
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sample::Count(n) => write!(f, "{n}"),
            Sample::All => f.write_str("all"),
        }
    }
}

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct CrossArgs<'a> {
    pub sample: Option<Sample>,
    pub seed: Option<u64>,
    pub report_dir: Option<&'a Path>,
    /// The command line, for the report.
    pub command: String,
    /// Mutants at once in the rewrite-mode run (each needs its own scratch
    /// copy and build cache, so 1 unless `--jobs` said otherwise).
    pub rewrite_jobs: usize,
}

/// A seed from the clock, for runs that did not pass one.
fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 % 1_000_000)
}

/// Runs one mode; `Ok(None)` when interrupted.
fn run_mode(opts: &RunOptions, cancel: &Cancel) -> Result<Option<Report>> {
    let mut progress = Progress::new(crate::progress::drawable());
    let outcome = mutations::run(opts, cancel, &mut progress);
    progress.finish();
    sweep::sweep_killed_test_databases(sweep::database_url(&opts.test_env).as_deref());
    match outcome {
        Ok(r) => {
            println!("{}", r.summary_text());
            println!("outcomes: {}", opts.out_dir.join("outcomes.json").display());
            Ok(Some(r))
        }
        Err(Error::Interrupted) => Ok(None),
        Err(e) => Err(e).context(format!("mutation run ({} mode)", opts.mode)),
    }
}

/// The whole command.
pub fn run(opts: &RunOptions, args: &CrossArgs<'_>, cancel: &Cancel) -> Result<ExitCode> {
    if opts.mode != Mode::Schemata {
        bail!("--cross-check and --report-dir start from a schemata run; drop --mode rewrite");
    }
    let registry = Registry::load(&opts.registry)?;
    let selected = plan::select(&registry, &opts.only, opts.shard)?;
    let chosen: Option<(Option<u64>, Vec<String>)> = args.sample.map(|s| match s {
        Sample::All => (None, selected.iter().map(|g| g.id.clone()).collect()),
        Sample::Count(n) => {
            let seed = args.seed.unwrap_or_else(fresh_seed);
            let source: Vec<String> = selected
                .iter()
                .filter(|g| g.kind() == mutations::registry::GuardKind::Source)
                .map(|g| g.id.clone())
                .collect();
            (Some(seed), report::sample(&source, n, seed))
        }
    });
    if let Some((seed, ids)) = &chosen {
        match seed {
            Some(s) => println!(
                "cross-check: seed {s}: {} guards in both modes: {} (replay with --seed {s})",
                ids.len(),
                ids.join(", ")
            ),
            None => println!(
                "cross-check: every selected guard ({}) in both modes",
                ids.len()
            ),
        }
    }
    let Some(full) = run_mode(opts, cancel)? else {
        return Ok(interrupted());
    };
    let mut rewrite = None;
    if let Some((seed, ids)) = chosen {
        let mut ropts = opts.clone();
        ropts.mode = Mode::Rewrite;
        ropts.jobs = args.rewrite_jobs;
        ropts.only = ids.clone();
        ropts.shard = None;
        ropts.out_dir = opts.out_dir.join("rewrite");
        let Some(r) = run_mode(&ropts, cancel)? else {
            return Ok(interrupted());
        };
        let disagreements = report::disagreements(&ids, &full, &r);
        println!("\ncross-check ({} guards):", ids.len());
        println!(
            "{:<36} {:>9} {:>9} {:>8} {:>8}",
            "guard", "schemata", "rewrite", "s (sch)", "s (rw)"
        );
        for id in &ids {
            let find = |rep: &Report| rep.mutants.iter().find(|m| &m.id == id).cloned();
            let (a, b) = (find(&full), find(&r));
            let v = |m: &Option<mutations::MutantOutcome>| {
                m.as_ref().map_or("-", |m| m.verdict.as_str()).to_string()
            };
            let t = |m: &Option<mutations::MutantOutcome>| {
                m.as_ref()
                    .map_or("-".into(), |m| format!("{:.1}", m.total_secs))
            };
            println!(
                "{id:<36} {:>9} {:>9} {:>8} {:>8}",
                v(&a),
                v(&b),
                t(&a),
                t(&b)
            );
        }
        if disagreements.is_empty() {
            println!(
                "cross-check: schemata and rewrite verdicts agree on all {} guards",
                ids.len()
            );
        } else {
            println!("cross-check FAILED: the modes disagree:");
            for d in &disagreements {
                println!("  {d}");
            }
        }
        rewrite = Some((
            r,
            CrossCheck {
                seed,
                guards: ids,
                disagreements,
            },
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let built = MutationReport::build(
        &registry,
        &args.command,
        cpus,
        &full,
        rewrite.as_ref().map(|(r, c)| (r, c.clone())),
    );
    if let Some(dir) = args.report_dir {
        write_report(dir, &built)?;
    }
    let ok = full.all_caught()
        && rewrite
            .as_ref()
            .is_none_or(|(r, c)| r.all_caught() && c.disagreements.is_empty());
    if let (Some(a), Some(b)) = (built.rewrite.as_ref(), built.speedup_per_source_mutant) {
        println!(
            "timing: schemata {:.2} s per source mutant, rewrite {:.2} s: {b:.1}x; whole registry {:.0} s (schemata) vs {:.0} s (rewrite, {})",
            built.schemata.mean_secs_per_source_mutant,
            a.mean_secs_per_source_mutant,
            built.schemata.whole_registry_secs,
            a.whole_registry_secs,
            if a.whole_registry_measured {
                "measured"
            } else {
                "estimated"
            }
        );
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn interrupted() -> ExitCode {
    eprintln!("{}", super::INTERRUPTED);
    ExitCode::from(130)
}

/// Writes `mutations.json` and its Markdown rendering into `dir`.
pub fn write_report(dir: &Path, r: &MutationReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("mutations.json");
    let md = dir.join("mutations.md");
    let text = serde_json::to_string_pretty(r).context("serializing the mutation report")?;
    std::fs::write(&json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(&md, report::render_markdown(r))
        .with_context(|| format!("writing {}", md.display()))?;
    println!("report: {} and {}", json.display(), md.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_all_or_at_least_five() {
        assert_eq!("all".parse::<Sample>(), Ok(Sample::All));
        assert_eq!("5".parse::<Sample>(), Ok(Sample::Count(5)));
        assert!("4".parse::<Sample>().is_err());
        assert!("many".parse::<Sample>().is_err());
        assert_eq!(Sample::Count(7).to_string(), "7");
    }
}
