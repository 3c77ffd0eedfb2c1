//! `harness mutants-audit`: an outside mutation audit of the `gate` crate.
//!
//! The project's own runner (`harness mutate`) deletes the guards it
//! registered; it cannot see a check nobody registered. cargo-mutants can: it
//! mutates every function it finds. This subcommand installs a pinned
//! cargo-mutants when it is missing, runs it over `gate` with the gate's
//! whole test suite (on `DATABASE_URL`'s Postgres, or a throwaway one it
//! starts, announces in one line and removes on exit), and writes `reports/outside-mutants.md`
//! and `.json` from cargo-mutants' `outcomes.json`: caught, missed, unviable
//! and timeout per file, the time per mutant, and beside it the project's
//! own runner's time per mutant in both modes (from `reports/mutations.json`).
//! A run over a shard or some files says so in both reports ("PARTIAL").
//!
//! `--check` runs nothing: it fails when the committed report holds a
//! survivor that `mutations/outside-audit.yaml` does not classify (a test
//! that now catches it, or the reason it is equivalent).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The cargo-mutants this project's audit is pinned to.
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// Run cargo-mutants over `gate` and write reports/outside-mutants.{md,json}.
#[derive(Debug, Args)]
pub struct MutantsAuditArgs {
    /// Run one shard of the mutants, K/N (K from 0), e.g. on one CI machine of N.
    #[arg(long)]
    pub shard: Option<String>,
    /// Mutate only this file (repeatable), e.g. gate/src/policy.rs.
    #[arg(long = "file")]
    pub files: Vec<String>,
    /// Mutate the source tree in place (reusing target/) instead of a copy.
    /// Faster on one machine; the tree is restored after each mutant.
    #[arg(long)]
    pub in_place: bool,
    /// Render the reports from these outcomes.json files (one per shard)
    /// instead of running cargo-mutants; `--shard` and `--file` then say
    /// what those runs covered.
    #[arg(long = "from-outcomes")]
    pub from_outcomes: Vec<PathBuf>,
    /// Where the reports go.
    #[arg(long, default_value = "reports")]
    pub report_dir: PathBuf,
    /// Check the committed report against the classification and run nothing.
    #[arg(long)]
    pub check: bool,
    /// The report `--check` reads.
    #[arg(long, default_value = "reports/outside-mutants.json")]
    pub report: PathBuf,
    /// The classification of survivors.
    #[arg(long, default_value = "mutations/outside-audit.yaml")]
    pub classification: PathBuf,
    /// Further arguments for cargo-mutants (after `--`).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

pub fn run(args: MutantsAuditArgs) -> Result<ExitCode> {
    if args.check {
        return check(&args.report, &args.classification);
    }
    let (outcome_files, how) = if args.from_outcomes.is_empty() {
        let file = run_cargo_mutants(&args)?;
        (vec![file], invocation(&args))
    } else {
        (
            args.from_outcomes.clone(),
            format!("{} (rendered from its outcomes.json)", invocation(&args)),
        )
    };
    let classification = Classification::load(&args.classification)?;
    let mut outcomes = Vec::new();
    for file in &outcome_files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        outcomes.push(
            serde_json::from_str::<Value>(&text).with_context(|| file.display().to_string())?,
        );
    }
    let coverage = Coverage {
        shard: args.shard.clone(),
        files: args.files.clone(),
        shards_merged: outcome_files.len(),
        mutants_in_crate: count_all_mutants().ok(),
    };
    let report = Report::build(&outcomes, coverage, &classification, how, &args.report_dir)?;
    std::fs::create_dir_all(&args.report_dir)?;
    let json_path = args.report_dir.join("outside-mutants.json");
    let md_path = args.report_dir.join("outside-mutants.md");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")?;
    std::fs::write(&md_path, report.markdown())?;
    println!("{}", report.headline());
    println!("wrote {} and {}", md_path.display(), json_path.display());
    Ok(ExitCode::SUCCESS)
}

/// One line for `harness triage`: the audit's headline from the committed report.
pub fn headline_from(path: &Path) -> String {
    match std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Report>(&t).ok())
    {
        Some(report) => report.headline(),
        None => format!(
            "the outside mutation audit has not been run ({} is absent): make mutants-audit",
            path.display()
        ),
    }
}

fn invocation(args: &MutantsAuditArgs) -> String {
    let mut s = "harness mutants-audit".to_owned();
    if let Some(shard) = &args.shard {
        let _ = write!(s, " --shard {shard}");
    }
    for f in &args.files {
        let _ = write!(s, " --file {f}");
    }
    if args.in_place {
        s.push_str(" --in-place");
    }
    if !args.extra.is_empty() {
        let _ = write!(s, " -- {}", args.extra.join(" "));
    }
    s
}

/// Installs the pinned cargo-mutants unless that version is already there.
fn ensure_cargo_mutants() -> Result<()> {
    let installed = Command::new("cargo")
        .args(["mutants", "--version"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if installed.as_deref() == Some(&format!("cargo-mutants {CARGO_MUTANTS_VERSION}")) {
        return Ok(());
    }
    eprintln!(
        "installing cargo-mutants {CARGO_MUTANTS_VERSION} (found {:?}): cargo install --locked",
        installed
    );
    let status = Command::new("cargo")
        .args(["install", "--locked"])
        .arg(format!("cargo-mutants@{CARGO_MUTANTS_VERSION}"))
        .status()
        .context("running cargo install")?;
    if !status.success() {
        bail!("cargo install --locked cargo-mutants@{CARGO_MUTANTS_VERSION} failed");
    }
    Ok(())
}

/// Runs cargo-mutants over `gate`; returns the path of its outcomes.json.
fn run_cargo_mutants(args: &MutantsAuditArgs) -> Result<PathBuf> {
    ensure_cargo_mutants()?;
    // The gate's tests need Postgres: the caller's, or a throwaway one for this run.
    let server = crate::db::Server::open_unless_given_blocking("harness mutants-audit")?;
    let out = PathBuf::from("target/mutants-audit");
    let mut cmd = Command::new("cargo");
    cmd.args(["mutants", "--package", "gate", "--output"])
        .arg(&out)
        .args(["--no-shuffle", "--colors", "never"]);
    if let Some(shard) = &args.shard {
        cmd.args(["--shard", shard]);
    }
    for f in &args.files {
        cmd.args(["--file", f]);
    }
    if args.in_place {
        cmd.arg("--in-place");
    }
    cmd.args(&args.extra);
    if let Some(server) = &server {
        let (key, value) = server.child_env();
        cmd.env(key, value);
    }
    eprintln!("running {cmd:?}");
    let status = cmd.status().context("running cargo mutants")?;
    drop(server);
    // 0: all caught; 2: some missed; 3: some timed out. Anything else: no result.
    match status.code() {
        Some(0 | 2 | 3) => {}
        other => bail!(
            "cargo mutants ended with {other:?}: no audit result (see {})",
            out.display()
        ),
    }
    Ok(out.join("mutants.out").join("outcomes.json"))
}

/// How many mutants cargo-mutants finds in `gate` (its `--list`).
fn count_all_mutants() -> Result<usize> {
    let out = Command::new("cargo")
        .args([
            "mutants",
            "--package",
            "gate",
            "--list",
            "--colors",
            "never",
        ])
        .output()?;
    if !out.status.success() {
        bail!("cargo mutants --list failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count())
}

/// What part of the crate a report covers.
struct Coverage {
    shard: Option<String>,
    files: Vec<String>,
    shards_merged: usize,
    mutants_in_crate: Option<usize>,
}

/// `mutations/outside-audit.yaml`: every survivor, classified.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classification {
    pub version: u32,
    #[serde(default)]
    pub survivors: Vec<Classified>,
}

/// One survivor: a test now catches it, or it cannot change behaviour.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classified {
    /// cargo-mutants' name without the line and column:
    /// `gate/src/x.rs: replace < with <= in f`.
    pub mutant: String,
    /// `caught` or `equivalent`.
    pub verdict: String,
    /// For `caught`: the test (`file::function`) that now catches it.
    #[serde(default)]
    pub test: Option<String>,
    /// For `equivalent`: why it cannot change behaviour.
    #[serde(default)]
    pub reason: Option<String>,
}

impl Classification {
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let c: Classification =
            crate::yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if c.version != 1 {
            bail!("{}: version {} is not 1", path.display(), c.version);
        }
        Ok(c)
    }

    fn verdict_of(&self, key: &str) -> Option<&str> {
        self.survivors
            .iter()
            .find(|c| c.mutant == key)
            .map(|c| c.verdict.as_str())
    }

    /// Entries that do not say enough: a verdict other than the two, a
    /// caught one without a test that exists in gate/, an equivalent one
    /// without a reason.
    fn problems(&self, gate_sources: &str) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.survivors {
            match (c.verdict.as_str(), &c.test, &c.reason) {
                ("caught", Some(test), _) => {
                    let name = test.rsplit("::").next().unwrap_or(test);
                    if !gate_sources.contains(&format!("fn {name}(")) {
                        out.push(format!("{}: the test {test} does not exist", c.mutant));
                    }
                }
                ("equivalent", _, Some(reason)) if reason.trim().len() >= 20 => {}
                ("caught", None, _) => out.push(format!("{}: caught by no named test", c.mutant)),
                ("equivalent", _, _) => {
                    out.push(format!("{}: equivalent without a reason", c.mutant))
                }
                (v, _, _) => out.push(format!("{}: unknown verdict {v:?}", c.mutant)),
            }
        }
        out
    }
}

/// The text of every Rust file under gate/ (for finding test names).
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
    walk(&root.join("gate"), &mut out);
    out
}

fn check(report: &Path, classification: &Path) -> Result<ExitCode> {
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

/// Counts for one file, or for all.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Counts {
    pub caught: usize,
    pub missed: usize,
    pub unviable: usize,
    pub timeout: usize,
}

impl Counts {
    fn viable(&self) -> usize {
        self.caught + self.missed + self.timeout
    }
}

/// One mutant the tests did not notice.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Survivor {
    pub name: String,
    /// The name without line and column: what outside-audit.yaml lists.
    pub key: String,
    pub file: String,
    pub line: u64,
    /// `caught` or `equivalent` from the classification, if listed.
    pub classified: Option<String>,
}

/// Seconds per mutant, this audit's and the project runner's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    pub elapsed_secs: Option<f64>,
    pub baseline_secs: Option<f64>,
    pub mean_secs_per_mutant: Option<f64>,
    pub mean_build_secs: Option<f64>,
    pub mean_test_secs: Option<f64>,
    /// `harness mutate`, schemata mode, from reports/mutations.json.
    pub project_schemata_secs_per_mutant: Option<f64>,
    /// `harness mutate`, rewrite mode, from reports/mutations.json.
    pub project_rewrite_secs_per_mutant: Option<f64>,
}

/// reports/outside-mutants.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub generated_by: String,
    pub tool: String,
    pub cpus: usize,
    /// False for a shard or a subset of files.
    pub complete: bool,
    /// What the run covered, in words: "PARTIAL: ..." unless complete.
    pub label: String,
    pub shard: Option<String>,
    pub files: Vec<String>,
    pub mutants_run: usize,
    pub mutants_in_crate: Option<usize>,
    pub totals: Counts,
    pub per_file: BTreeMap<String, Counts>,
    pub timing: Timing,
    pub survivors: Vec<Survivor>,
    pub timeouts: Vec<String>,
}

fn secs_between(start: &Value, end: &Value) -> Option<f64> {
    let parse = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str()?).ok();
    let (a, b) = (parse(start)?, parse(end)?);
    Some((b - a).num_milliseconds() as f64 / 1000.0)
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| round2(v.iter().sum::<f64>() / v.len() as f64))
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn phase_secs(outcome: &Value, phase: &str) -> f64 {
    outcome["phase_results"]
        .as_array()
        .map(|phases| {
            phases
                .iter()
                .filter(|p| phase.is_empty() || p["phase"] == phase)
                .filter_map(|p| p["duration"].as_f64())
                .sum()
        })
        .unwrap_or(0.0)
}

impl Report {
    fn build(
        runs: &[Value],
        coverage: Coverage,
        classes: &Classification,
        generated_by: String,
        report_dir: &Path,
    ) -> Result<Report> {
        let mut totals = Counts::default();
        let mut per_file: BTreeMap<String, Counts> = BTreeMap::new();
        let (mut survivors, mut timeouts) = (Vec::new(), Vec::new());
        let (mut all, mut build, mut test, mut baseline) = (vec![], vec![], vec![], vec![]);
        let mut elapsed = Some(0.0);
        let mut tool = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for run in runs {
            tool.insert(
                run["cargo_mutants_version"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned(),
            );
            elapsed = elapsed
                .zip(secs_between(&run["start_time"], &run["end_time"]))
                .map(|(a, b)| a + b);
            for o in run["outcomes"].as_array().into_iter().flatten() {
                let Some(mutant) = o["scenario"].get("Mutant") else {
                    baseline.push(phase_secs(o, ""));
                    continue;
                };
                let name = mutant["name"].as_str().unwrap_or("?").to_owned();
                if !seen.insert(name.clone()) {
                    bail!("mutant {name} appears in two outcome files: overlapping shards");
                }
                let file = mutant["file"].as_str().unwrap_or("?").to_owned();
                let counts = per_file.entry(file.clone()).or_default();
                all.push(phase_secs(o, ""));
                build.push(phase_secs(o, "Build"));
                if o["phase_results"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|r| r["phase"] == "Test"))
                {
                    test.push(phase_secs(o, "Test"));
                }
                match o["summary"].as_str() {
                    Some("CaughtMutant") => {
                        counts.caught += 1;
                        totals.caught += 1;
                    }
                    Some("MissedMutant") => {
                        counts.missed += 1;
                        totals.missed += 1;
                        let key = key_of(&name);
                        survivors.push(Survivor {
                            classified: classes.verdict_of(&key).map(str::to_owned),
                            key,
                            line: mutant["span"]["start"]["line"].as_u64().unwrap_or(0),
                            file,
                            name,
                        });
                    }
                    Some("Unviable") => {
                        counts.unviable += 1;
                        totals.unviable += 1;
                    }
                    Some("Timeout") => {
                        counts.timeout += 1;
                        totals.timeout += 1;
                        timeouts.push(name);
                    }
                    other => {
                        bail!("mutant {name} has an outcome this report cannot read: {other:?}")
                    }
                }
            }
        }
        let mutants_run = seen.len();
        let complete = coverage.shard.is_none() && coverage.files.is_empty();
        let mut label = if complete {
            format!("the whole gate crate, {mutants_run} mutants")
        } else {
            let mut parts = vec![];
            if let Some(s) = &coverage.shard {
                parts.push(format!("shard {s}"));
            }
            if !coverage.files.is_empty() {
                parts.push(format!("files {}", coverage.files.join(", ")));
            }
            let of = coverage
                .mutants_in_crate
                .map_or(String::new(), |n| format!(" of the crate's {n}"));
            format!("PARTIAL: {}, {mutants_run} mutants{of}", parts.join(", "))
        };
        if coverage.shards_merged > 1 {
            let _ = write!(
                label,
                " (merged from {} outcome files)",
                coverage.shards_merged
            );
        }
        let project: Value = std::fs::read_to_string(report_dir.join("mutations.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        Ok(Report {
            version: 1,
            generated_by,
            tool: format!(
                "cargo-mutants {}",
                tool.into_iter().collect::<Vec<_>>().join(", ")
            ),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            complete,
            label,
            shard: coverage.shard,
            files: coverage.files,
            mutants_run,
            mutants_in_crate: coverage.mutants_in_crate,
            totals,
            per_file,
            timing: Timing {
                elapsed_secs: elapsed.map(round2),
                baseline_secs: mean(&baseline),
                mean_secs_per_mutant: mean(&all),
                mean_build_secs: mean(&build),
                mean_test_secs: mean(&test),
                project_schemata_secs_per_mutant: project["schemata"]["mean_secs_per_mutant"]
                    .as_f64(),
                project_rewrite_secs_per_mutant: project["rewrite"]["mean_secs_per_mutant"]
                    .as_f64(),
            },
            survivors,
            timeouts,
        })
    }

    /// One line: how much was caught, over what.
    pub fn headline(&self) -> String {
        let viable = self.totals.viable();
        let pct = if viable == 0 {
            0.0
        } else {
            100.0 * self.totals.caught as f64 / viable as f64
        };
        let unclassified = self
            .survivors
            .iter()
            .filter(|s| s.classified.is_none())
            .count();
        format!(
            "outside mutation audit (cargo-mutants) over {}: {} of {} viable mutants caught ({pct:.0}%), \
             {} missed ({unclassified} unclassified), {} timed out, {} unviable; {} s per mutant",
            self.label,
            self.totals.caught,
            viable,
            self.totals.missed,
            self.totals.timeout,
            self.totals.unviable,
            self.timing
                .mean_secs_per_mutant
                .map_or("?".into(), |s| format!("{s:.1}")),
        )
    }

    fn markdown(&self) -> String {
        let mut md = String::new();
        let secs = |s: Option<f64>| s.map_or("n/a".to_owned(), |s| format!("{s:.2}"));
        let _ = writeln!(md, "# Outside mutation audit (cargo-mutants over `gate`)\n");
        let _ = writeln!(
            md,
            "Generated by `{}` with {} on {} CPUs. Written by the harness from cargo-mutants' \
             outcomes.json; never edit by hand.\n",
            self.generated_by, self.tool, self.cpus
        );
        if self.complete {
            let _ = writeln!(md, "**Coverage:** {}.\n", self.label);
        } else {
            let _ = writeln!(
                md,
                "**Coverage: {}.** This is not the whole crate: the figures below hold only \
                 for the mutants listed here.\n",
                self.label
            );
        }
        let _ = writeln!(md, "{}\n", self.headline());
        let _ = writeln!(md, "| file | caught | missed | unviable | timeout |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|");
        for (file, c) in &self.per_file {
            let _ = writeln!(
                md,
                "| `{file}` | {} | {} | {} | {} |",
                c.caught, c.missed, c.unviable, c.timeout
            );
        }
        let t = &self.totals;
        let _ = writeln!(
            md,
            "| **total** | **{}** | **{}** | **{}** | **{}** |\n",
            t.caught, t.missed, t.unviable, t.timeout
        );
        let _ = writeln!(md, "## Time per mutant\n");
        let _ = writeln!(md, "| runner | seconds per mutant |");
        let _ = writeln!(md, "|---|---:|");
        let _ = writeln!(
            md,
            "| cargo-mutants, this run (build + full gate test suite) | {} |",
            secs(self.timing.mean_secs_per_mutant)
        );
        let _ = writeln!(
            md,
            "| of which build (mean over all mutants) | {} |",
            secs(self.timing.mean_build_secs)
        );
        let _ = writeln!(
            md,
            "| of which tests (mean over mutants that built) | {} |",
            secs(self.timing.mean_test_secs)
        );
        let _ = writeln!(
            md,
            "| `harness mutate`, schemata mode (reports/mutations.json) | {} |",
            secs(self.timing.project_schemata_secs_per_mutant)
        );
        let _ = writeln!(
            md,
            "| `harness mutate`, rewrite mode (reports/mutations.json) | {} |\n",
            secs(self.timing.project_rewrite_secs_per_mutant)
        );
        let _ = writeln!(
            md,
            "Baseline (unmutated build and tests): {}; the whole run took {} s.\n",
            self.timing
                .baseline_secs
                .map_or("skipped".to_owned(), |s| format!("{s:.2} s")),
            secs(self.timing.elapsed_secs)
        );
        let _ = writeln!(md, "## Survivors\n");
        if self.survivors.is_empty() {
            let _ = writeln!(md, "None: every viable mutant was caught.\n");
        } else {
            let _ = writeln!(
                md,
                "Each must be classified in `mutations/outside-audit.yaml` (a test that now \
                 catches it, or why it is equivalent).\n"
            );
            let _ = writeln!(md, "| mutant | classified |");
            let _ = writeln!(md, "|---|---|");
            for s in &self.survivors {
                let _ = writeln!(
                    md,
                    "| `{}` | {} |",
                    s.name,
                    s.classified.as_deref().unwrap_or("**unclassified**")
                );
            }
            md.push('\n');
        }
        if !self.timeouts.is_empty() {
            let _ = writeln!(md, "## Timeouts\n");
            for name in &self.timeouts {
                let _ = writeln!(md, "- `{name}`");
            }
            md.push('\n');
        }
        md
    }
}

/// `gate/src/x.rs:12:5: replace a with b in f` → `gate/src/x.rs: replace a with b in f`.
fn key_of(name: &str) -> String {
    let mut parts = name.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(file), Some(line), Some(col), Some(rest))
            if line.bytes().all(|b| b.is_ascii_digit())
                && col.bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{file}:{rest}")
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_drops_only_the_line_and_column() {
        assert_eq!(
            key_of("gate/src/policy.rs:118:24: replace < with <= in Policy::validated"),
            "gate/src/policy.rs: replace < with <= in Policy::validated"
        );
        assert_eq!(key_of("no position here"), "no position here");
    }
}
