//! The committed mutation report (`reports/mutations.json` and `.md`): what
//! each registered guard defends, the test that caught its deletion, and what
//! the two modes cost on the machine that ran them.
//!
//! Guarantees:
//! - [`MutationReport::build`] takes its guard table from the registry (ids,
//!   kinds, operators, threats, invariants, tests, in registry order) and its
//!   verdicts and times from the runs; every registry guard has exactly one
//!   row, whether or not a run judged it.
//! - [`render_markdown`] is a pure function of the JSON model, so the
//!   committed `.md` must equal the rendering of the committed `.json`
//!   byte for byte; [`registry_part`] is the part of the JSON that depends
//!   only on the registry. Together they are what the drift test compares
//!   (`mutations/tests/report_drift.rs`): a registry edited without
//!   `make reports`, or a report edited by hand, fails the ordinary suite.
//! - [`sample`] picks the same guards for the same ids, count and seed on
//!   every machine (SplitMix64, no platform randomness).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::options::Mode;
use crate::outcome::{Report, Verdict};
use crate::registry::{GuardKind, Locator, Operator, Registry, Selector};

/// Where the committed report lives, relative to the workspace root.
pub const REPORT_JSON: &str = "reports/mutations.json";
/// The rendering of [`REPORT_JSON`].
pub const REPORT_MD: &str = "reports/mutations.md";
/// The command that regenerates both files.
pub const REGENERATE: &str = "make mutation-report";

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutationReport {
    pub version: u32,
    /// How it was produced (the command line).
    pub generated_by: String,
    /// Logical CPUs of the machine that ran it.
    pub cpus: usize,
    pub counts: Counts,
    /// The full-registry run (schemata mode unless it fell back).
    pub schemata: ModeTiming,
    /// The rewrite-mode run over `cross_check.guards` (or the whole registry).
    pub rewrite: Option<ModeTiming>,
    /// Rewrite time per source mutant / schemata time per source mutant.
    pub speedup_per_source_mutant: Option<f64>,
    /// The estimated (or measured, when rewrite covered every guard) whole
    /// registry time in rewrite mode / the measured schemata time.
    pub speedup_whole_registry: Option<f64>,
    pub cross_check: Option<CrossCheck>,
    pub guards: Vec<GuardRow>,
    pub exemptions: Vec<ExemptionRow>,
    /// What the committed corpus proves per guard (`harness mutate --corpus`),
    /// when that run was merged into the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusRun>,
}

/// The corpus run: the committed scenarios through the database engine, once
/// per guard switched off (and per pair, where one alone changed nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusRun {
    /// How it was produced (the command line).
    pub generated_by: String,
    /// Scenarios the unmutated run judged on the database engine (sent, and
    /// passing); the comparisons are over these.
    pub scenarios: usize,
    /// Benchmark runs: the baseline, one per guard, one per pair tried.
    pub bench_runs: usize,
    /// The most partners tried for one guard (named twins are always tried).
    pub pair_limit: usize,
    /// Building the instrumented harness once.
    pub build_secs: f64,
    /// The whole run, wall clock.
    pub elapsed_secs: f64,
    pub summary: CorpusSummary,
}

/// The corpus run's counts over the guards (each guard is in exactly one of
/// `depended`, `covered`, `unit_only`, `error`; `reason_only` counts the
/// guards not depended on whose deletion still changed a reason), and the
/// same four counts over the money guards alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusSummary {
    pub judged: usize,
    pub depended: usize,
    pub covered: usize,
    pub unit_only: usize,
    pub error: usize,
    pub reason_only: usize,
    #[serde(default)]
    pub money: MoneySummary,
}

/// The corpus run's counts over the money guards ([`is_money_threat`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoneySummary {
    pub judged: usize,
    pub depended: usize,
    pub covered: usize,
    pub unit_only: usize,
    pub error: usize,
}

/// The threats where money or authority moves, so that a guard of one of
/// them that nothing in the corpus depends on is a gap the corpus must close
/// (by a scenario that sends its attack, or by a second guard proven to
/// refuse the same thing): a checkout authority issued, reused or widened;
/// a provider event that captures; a charge made twice, replayed or keyed to
/// another request; two writers racing for one authority or one day's
/// budget; an amount, day total, currency or merchant past what the policy
/// allows; a delegated budget widened, oversubscribed or left stranded; an
/// approval given by the wrong person or used twice. The other threats
/// (malformed input, unstorable identifiers, cross-tenant ids, unsigned
/// mandates, operator edits) refuse before anything is reserved or paid: a
/// guard of theirs left to a unit test moves no money by itself. A pattern
/// ending in `.*` is every threat of that family.
pub const MONEY_THREATS: &[&str] = &[
    "checkout-authority.*",
    "provider-event.*",
    "ledger.double-charge",
    "ledger.replay",
    "ledger.idempotency-key-collision",
    "database-constraint.concurrent-double-use",
    "database-constraint.concurrent-overspend",
    "policy.amount-over-cap",
    "policy.daily-budget-evasion",
    "policy.mixed-currency-cap",
    "policy.currency-substitution",
    "policy.merchant-substitution",
    "delegation.budget-exhaustion",
    "delegation.widening",
    "delegation.sibling-oversubscription",
    "delegation.stranded-allocation",
    "approval.*",
];

/// Whether a guard of `threat` is a money guard ([`MONEY_THREATS`]).
pub fn is_money_threat(threat: &str) -> bool {
    MONEY_THREATS.iter().any(|p| match p.strip_suffix('*') {
        Some(family) => threat.starts_with(family) && threat.len() > family.len(),
        None => threat == *p,
    })
}

/// What the corpus says about one guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusEffect {
    /// Deleted alone, at least one attack the unmutated gate blocks is no
    /// longer blocked: money or authority would move.
    Unblocks,
    /// Deleted alone, no attack gets through; deleted together with
    /// `covered_by` (a named twin or a guard of the same threat), and with
    /// `covered_with` when it stands behind more than one layer, one that
    /// those guards do not unblock without it does.
    Covered,
    /// Deleted alone and with every partner tried, no attack gets through:
    /// only its unit and flow tests prove it.
    UnitOnly,
    /// The run could not judge it (the benchmark failed or a schema guard
    /// was not dropped).
    Error,
}

impl CorpusEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            CorpusEffect::Unblocks => "unblocks",
            CorpusEffect::Covered => "covered",
            CorpusEffect::UnitOnly => "unit_only",
            CorpusEffect::Error => "error",
        }
    }
}

/// One guard's corpus columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardCorpus {
    pub effect: CorpusEffect,
    /// Attacks blocked by the unmutated gate and not blocked without the guard.
    pub unblocked: Vec<String>,
    /// Scenarios that only changed a reason: an attack still blocked but not
    /// for the expected reason, or a legitimate scenario that fails.
    pub reason_only: Vec<String>,
    /// The guard that refuses the same thing: a named twin, or one of the
    /// same threat.
    pub covered_by: Option<String>,
    /// The further guards that had to be off with `covered_by` for an attack
    /// to get through (a guard behind three or more layers); empty for a pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covered_with: Vec<String>,
    /// The attacks that get through with the guard and its cover off, and
    /// not with its cover off alone.
    pub covered_scenarios: Vec<String>,
    /// Partners switched off together with this guard.
    pub pairs_tried: usize,
    pub note: Option<String>,
    /// Whether its threat is a money threat ([`is_money_threat`]).
    #[serde(default)]
    pub money: bool,
}

impl GuardCorpus {
    /// How the deletion kills, for the report: money or authority moving
    /// (a blocked attack gets through), only a reason changing, or nothing
    /// the corpus sees.
    pub fn kill(&self) -> &'static str {
        match (self.effect, self.reason_only.is_empty()) {
            (CorpusEffect::Unblocks, _) => "money or authority",
            (CorpusEffect::Error, _) => "not judged",
            (_, false) => "reason only",
            (_, true) => "no scenario",
        }
    }
}

impl CorpusRun {
    /// Folds several corpus runs into one, in order: a later run's row for a
    /// guard replaces an earlier one's. The combined run names every part's
    /// command and scenario count in `generated_by`, sums their benchmark runs
    /// and times, and keeps the largest scenario count and pair limit.
    pub fn combine(
        parts: Vec<(CorpusRun, BTreeMap<String, GuardCorpus>)>,
    ) -> Option<(CorpusRun, BTreeMap<String, GuardCorpus>)> {
        let mut parts = parts.into_iter();
        let (mut run, mut rows) = parts.next()?;
        let mut names = vec![format!(
            "{} ({} scenarios)",
            run.generated_by, run.scenarios
        )];
        for (next, next_rows) in parts {
            names.push(format!(
                "{} ({} scenarios)",
                next.generated_by, next.scenarios
            ));
            run.scenarios = run.scenarios.max(next.scenarios);
            run.pair_limit = run.pair_limit.max(next.pair_limit);
            run.bench_runs += next.bench_runs;
            run.build_secs += next.build_secs;
            run.elapsed_secs += next.elapsed_secs;
            rows.extend(next_rows);
        }
        if names.len() > 1 {
            run.generated_by = names.join("`, then `");
        }
        run.summary = CorpusSummary::of(rows.values());
        Some((run, rows))
    }
}

impl CorpusSummary {
    /// The counts of some guards' corpus columns.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a GuardCorpus>) -> CorpusSummary {
        let mut s = CorpusSummary::default();
        for c in rows {
            s.judged += 1;
            match c.effect {
                CorpusEffect::Unblocks => s.depended += 1,
                CorpusEffect::Covered => s.covered += 1,
                CorpusEffect::UnitOnly => s.unit_only += 1,
                CorpusEffect::Error => s.error += 1,
            }
            if c.effect != CorpusEffect::Unblocks && !c.reason_only.is_empty() {
                s.reason_only += 1;
            }
            if c.money {
                let m = &mut s.money;
                m.judged += 1;
                match c.effect {
                    CorpusEffect::Unblocks => m.depended += 1,
                    CorpusEffect::Covered => m.covered += 1,
                    CorpusEffect::UnitOnly => m.unit_only += 1,
                    CorpusEffect::Error => m.error += 1,
                }
            }
        }
        s
    }
}

/// How many guards of each kind, and how the full run judged them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub guards: usize,
    pub source: usize,
    pub schema: usize,
    pub exemptions: usize,
    pub caught: usize,
    pub not_caught: usize,
}

/// The cost of one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeTiming {
    pub mode: Mode,
    /// Mutants judged in this run.
    pub mutants: usize,
    pub source_mutants: usize,
    /// Building the (instrumented or unmutated) workspace once.
    pub build_secs: f64,
    /// The whole run, wall clock, including copy, build and baseline.
    pub elapsed_secs: f64,
    /// Mean wall time per mutant (build, if any, plus tests).
    pub mean_secs_per_mutant: f64,
    /// The same over source mutants only (where the modes differ).
    pub mean_secs_per_source_mutant: f64,
    /// `elapsed_secs` when the run covered the whole registry; otherwise an
    /// estimate: the run's fixed cost plus the per-kind means times the
    /// registry's counts.
    pub whole_registry_secs: f64,
    /// Whether `whole_registry_secs` was measured rather than estimated.
    pub whole_registry_measured: bool,
}

/// The cross-mode comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// The seed the guards were drawn with (`None`: every guard).
    pub seed: Option<u64>,
    pub guards: Vec<String>,
    /// `id: schemata verdict != rewrite verdict`, empty when they agree.
    pub disagreements: Vec<String>,
}

/// One registered guard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardRow {
    pub id: String,
    pub kind: GuardKind,
    pub operator: Operator,
    pub threat: String,
    pub invariant: String,
    pub tests: Vec<String>,
    /// `file:line:col` or `KIND:TABLE:NAME` (from the run; moves with the code).
    pub location: String,
    /// `None` when the full run did not judge it.
    pub verdict: Option<Verdict>,
    pub caught_by: Vec<String>,
    pub schemata_secs: Option<f64>,
    pub rewrite_verdict: Option<Verdict>,
    pub rewrite_secs: Option<f64>,
    /// The corpus run's columns (`None`: no corpus run merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<GuardCorpus>,
}

/// One exempt refusal site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExemptionRow {
    pub file: String,
    pub function: String,
    pub selector: String,
    pub reason: String,
}

/// The registry-only part of a report: every column that does not depend on
/// a run. Two reports of the same registry have equal registry parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryPart {
    pub guards: Vec<GuardKey>,
    pub exemptions: Vec<ExemptionRow>,
}

/// The registry's columns of one guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardKey {
    pub id: String,
    pub kind: String,
    pub operator: String,
    pub threat: String,
    pub invariant: String,
    pub tests: Vec<String>,
}

/// The registry part of the registry itself.
pub fn registry_part(registry: &Registry) -> RegistryPart {
    RegistryPart {
        guards: registry
            .guards
            .iter()
            .map(|g| GuardKey {
                id: g.id.clone(),
                kind: kind_name(g.kind()).to_string(),
                operator: g.operator.to_string(),
                threat: g.threat.clone(),
                invariant: g.invariant.clone(),
                tests: g.tests.iter().map(ToString::to_string).collect(),
            })
            .collect(),
        exemptions: exemption_rows(registry),
    }
}

impl MutationReport {
    /// The registry part of this report.
    pub fn registry_part(&self) -> RegistryPart {
        RegistryPart {
            guards: self
                .guards
                .iter()
                .map(|g| GuardKey {
                    id: g.id.clone(),
                    kind: kind_name(g.kind).to_string(),
                    operator: g.operator.to_string(),
                    threat: g.threat.clone(),
                    invariant: g.invariant.clone(),
                    tests: g.tests.clone(),
                })
                .collect(),
            exemptions: self.exemptions.clone(),
        }
    }

    /// Assembles the report from the registry, the full run and the optional
    /// rewrite run with the guards it was asked to compare.
    pub fn build(
        registry: &Registry,
        generated_by: &str,
        cpus: usize,
        full: &Report,
        rewrite: Option<(&Report, CrossCheck)>,
    ) -> MutationReport {
        let by_id = |r: &Report| {
            r.mutants
                .iter()
                .map(|m| (m.id.clone(), m.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        let judged = by_id(full);
        let rewritten = rewrite.as_ref().map(|(r, _)| by_id(r)).unwrap_or_default();
        let guards: Vec<GuardRow> = registry
            .guards
            .iter()
            .map(|g| {
                let s = judged.get(&g.id);
                let r = rewritten.get(&g.id);
                GuardRow {
                    id: g.id.clone(),
                    kind: g.kind(),
                    operator: g.operator,
                    threat: g.threat.clone(),
                    invariant: g.invariant.clone(),
                    tests: g.tests.iter().map(ToString::to_string).collect(),
                    location: s
                        .or(r)
                        .map(|m| m.location.clone())
                        .unwrap_or_else(|| locator_text(&g.locator)),
                    verdict: s.map(|m| m.verdict),
                    caught_by: s.map(|m| m.caught_by.clone()).unwrap_or_default(),
                    schemata_secs: s.map(|m| round(m.total_secs)),
                    rewrite_verdict: r.map(|m| m.verdict),
                    rewrite_secs: r.map(|m| round(m.total_secs)),
                    corpus: None,
                }
            })
            .collect();
        let source = registry
            .guards
            .iter()
            .filter(|g| g.kind() == GuardKind::Source)
            .count();
        let schema = registry.guards.len() - source;
        let caught = guards
            .iter()
            .filter(|g| g.verdict == Some(Verdict::Caught))
            .count();
        let schemata = timing(full, source, schema, None);
        // A schema mutant needs no rebuild in either mode, so a rewrite run
        // that judged none is estimated with the full run's schema mean.
        let schema_mean = mean(&of_kind(full, GuardKind::Schema));
        let rewrite_timing = rewrite
            .as_ref()
            .map(|(r, _)| timing(r, source, schema, Some(schema_mean)));
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| round(a / b));
        MutationReport {
            version: 1,
            generated_by: generated_by.to_string(),
            cpus,
            counts: Counts {
                guards: registry.guards.len(),
                source,
                schema,
                exemptions: registry.exempt.len(),
                caught,
                not_caught: guards.len() - caught,
            },
            speedup_per_source_mutant: rewrite_timing.as_ref().and_then(|r| {
                ratio(
                    r.mean_secs_per_source_mutant,
                    schemata.mean_secs_per_source_mutant,
                )
            }),
            speedup_whole_registry: rewrite_timing
                .as_ref()
                .and_then(|r| ratio(r.whole_registry_secs, schemata.whole_registry_secs)),
            schemata,
            rewrite: rewrite_timing,
            cross_check: rewrite.map(|(_, c)| c),
            guards,
            exemptions: exemption_rows(registry),
            corpus: None,
        }
    }

    /// Merges a corpus run: `rows` by guard id (a guard it did not judge
    /// keeps no corpus columns, a row's `money` follows the guard's threat),
    /// and the run's summary recounted from them.
    pub fn with_corpus(
        mut self,
        mut run: CorpusRun,
        rows: &BTreeMap<String, GuardCorpus>,
    ) -> MutationReport {
        for g in &mut self.guards {
            g.corpus = rows.get(&g.id).cloned().map(|mut c| {
                c.money = is_money_threat(&g.threat);
                c
            });
        }
        run.summary = CorpusSummary::of(self.guards.iter().filter_map(|g| g.corpus.as_ref()));
        self.corpus = Some(run);
        self
    }

    /// Whether every guard was caught and the modes agreed.
    pub fn is_clean(&self) -> bool {
        self.counts.not_caught == 0
            && self
                .cross_check
                .as_ref()
                .is_none_or(|c| c.disagreements.is_empty())
    }
}

/// The verdicts two runs disagree on, over `ids`.
pub fn disagreements(ids: &[String], a: &Report, b: &Report) -> Vec<String> {
    ids.iter()
        .filter_map(|id| {
            let (va, vb) = (a.verdict(id), b.verdict(id));
            (va != vb).then(|| {
                let name = |v: Option<Verdict>| v.map_or("not judged", Verdict::as_str);
                format!("{id}: {} {} != {} {}", a.mode, name(va), b.mode, name(vb))
            })
        })
        .collect()
}

fn kind_name(k: GuardKind) -> &'static str {
    match k {
        GuardKind::Source => "source",
        GuardKind::Schema => "schema",
    }
}

fn locator_text(l: &Locator) -> String {
    match l {
        Locator::Source(s) => format!("{} fn {}", s.file.display(), s.function),
        Locator::Schema(s) => format!("{}:{}:{}", s.object_kind, s.table, s.object),
    }
}

fn exemption_rows(registry: &Registry) -> Vec<ExemptionRow> {
    registry
        .exempt
        .iter()
        .map(|x| ExemptionRow {
            file: x.file.display().to_string(),
            function: x.function.clone(),
            selector: match (&x.selector, x.nth) {
                (Selector::Produces(v), _) => format!("produces {v}"),
                (Selector::Contains(t), _) => format!("contains `{t}`"),
            } + &x.nth.map(|n| format!(" (nth {n})")).unwrap_or_default(),
            reason: x.reason.clone(),
        })
        .collect()
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn of_kind(r: &Report, k: GuardKind) -> Vec<f64> {
    r.mutants
        .iter()
        .filter(|m| m.kind == k)
        .map(|m| m.total_secs)
        .collect()
}

/// The timing of one run, with its whole-registry time measured (when it
/// judged every guard) or estimated (schema mutants it did not run at
/// `schema_fallback`, else at its source mean).
fn timing(r: &Report, source: usize, schema: usize, schema_fallback: Option<f64>) -> ModeTiming {
    let (src, sch) = (of_kind(r, GuardKind::Source), of_kind(r, GuardKind::Schema));
    let all: Vec<f64> = r.mutants.iter().map(|m| m.total_secs).collect();
    let judged: f64 = all.iter().sum();
    let fixed = (r.elapsed_secs - judged).max(0.0);
    let measured = r.mutants.len() == source + schema && r.shard.is_none();
    let per_schema = match (sch.is_empty(), schema_fallback) {
        (false, _) => mean(&sch),
        (true, Some(f)) => f,
        (true, None) => mean(&src),
    };
    let estimate = fixed + mean(&src) * source as f64 + per_schema * schema as f64;
    ModeTiming {
        mode: r.mode,
        mutants: r.mutants.len(),
        source_mutants: src.len(),
        build_secs: round(r.baseline.build_secs),
        elapsed_secs: round(r.elapsed_secs),
        mean_secs_per_mutant: round(mean(&all)),
        mean_secs_per_source_mutant: round(mean(&src)),
        whole_registry_secs: round(if measured { r.elapsed_secs } else { estimate }),
        whole_registry_measured: measured,
    }
}

/// `n` distinct items of `ids` drawn with `seed` (all of them when `n >=
/// ids.len()`), in their original order.
pub fn sample(ids: &[String], n: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = || {
        // SplitMix64.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut idx: Vec<usize> = (0..ids.len()).collect();
    // Fisher-Yates over the first n positions.
    let n = n.min(ids.len());
    for i in 0..n {
        let span = (idx.len() - i) as u64;
        let j = i + usize::try_from(next() % span).unwrap_or(0);
        idx.swap(i, j);
    }
    let mut chosen: Vec<usize> = idx[..n].to_vec();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| ids[i].clone()).collect()
}

fn secs(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_string(), |s| format!("{s:.1}"))
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn duration(s: f64) -> String {
    if s >= 90.0 {
        format!("{:.1} min ({s:.0} s)", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// The Markdown rendering of a report (deterministic: a function of `r` only).
pub fn render_markdown(r: &MutationReport) -> String {
    let mut o = String::new();
    let c = &r.counts;
    let _ = writeln!(o, "# Mutation report\n");
    let _ = writeln!(
        o,
        "Generated by `{}` ({REGENERATE}); do not edit by hand. \
         `mutations/tests/report_drift.rs` fails when this file, `{REPORT_JSON}` and \
         `mutations/registry.yaml` disagree.\n",
        r.generated_by
    );
    let _ = writeln!(
        o,
        "Every guard in `mutations/registry.yaml` was deleted, one at a time (source guards in \
         the gate's Rust code; schema guards dropped from a fresh database), and a named test \
         had to fail.\n"
    );
    let _ = writeln!(
        o,
        "- **{}** guards: **{}** source, **{}** schema; **{}** exempt refusal-site entries (listed at the end).",
        c.guards, c.source, c.schema, c.exemptions
    );
    let _ = writeln!(
        o,
        "- Full run ({} mode): **{} caught**, {} not caught.",
        r.schemata.mode, c.caught, c.not_caught
    );
    if let Some(x) = &r.cross_check {
        let seed = x
            .seed
            .map_or_else(|| "every guard".to_string(), |s| format!("seed {s}"));
        let _ = writeln!(
            o,
            "- Cross-mode check ({seed}, {} guards: {}): {}.",
            x.guards.len(),
            if x.guards.len() > 12 {
                format!("{} ...", x.guards[..12].join(", "))
            } else {
                x.guards.join(", ")
            },
            if x.disagreements.is_empty() {
                "schemata and rewrite verdicts agree".to_string()
            } else {
                format!("**verdicts differ**: {}", x.disagreements.join("; "))
            }
        );
    }
    let _ = writeln!(o, "\n## Cost on this machine ({} CPUs)\n", r.cpus);
    let _ = writeln!(
        o,
        "| mode | mutants run | build once | per mutant (all) | per source mutant | whole run | whole registry |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
    for t in std::iter::once(&r.schemata).chain(r.rewrite.as_ref()) {
        let _ = writeln!(
            o,
            "| {} | {} ({} source) | {} | {:.2} s | {:.2} s | {} | {}, {} |",
            t.mode,
            t.mutants,
            t.source_mutants,
            duration(t.build_secs),
            t.mean_secs_per_mutant,
            t.mean_secs_per_source_mutant,
            duration(t.elapsed_secs),
            duration(t.whole_registry_secs),
            if t.whole_registry_measured {
                "measured"
            } else {
                "estimated"
            }
        );
    }
    if let Some(s) = r.speedup_per_source_mutant {
        let _ = writeln!(
            o,
            "\nSchemata mode is **{s:.1}x** faster per source mutant (a rewrite mutant rebuilds the \
             gate and its test binary; a schemata mutant only runs its tests with a switch set)."
        );
    }
    if let Some(s) = r.speedup_whole_registry {
        let _ = writeln!(o, "The whole registry runs **{s:.1}x** faster.");
    }
    let _ = writeln!(
        o,
        "Per-mutant time includes the test processes (and, in rewrite mode, the incremental \
         build); the whole run adds copying the workspace, one build and the baseline run of \
         every named test. Times vary from run to run; the table below is what the drift test \
         checks, not the times."
    );
    let _ = writeln!(o, "\n## Guards\n");
    let _ = writeln!(
        o,
        "| guard | kind | op | threat | invariant (what breaks without it) | caught by | verdict | schemata s | rewrite s |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---:|---:|");
    for g in &r.guards {
        let caught = if g.caught_by.is_empty() {
            "–".to_string()
        } else {
            g.caught_by
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let verdict = g.verdict.map_or("not run", Verdict::as_str);
        let _ = writeln!(
            o,
            "| `{}`<br>{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.id,
            cell(&g.location),
            kind_name(g.kind),
            g.operator,
            g.threat,
            cell(&g.invariant),
            caught,
            verdict,
            secs(g.schemata_secs),
            secs(g.rewrite_secs),
        );
    }
    if let Some(c) = &r.corpus {
        render_corpus(&mut o, c, &r.guards);
    }
    let _ = writeln!(o, "\n## Exempt refusal sites\n");
    let _ = writeln!(
        o,
        "Places in `gate/src` that produce a refusal (or call a lock, signature or hash helper) \
         without being a registered guard, each with the reason no deletion of it can be judged.\n"
    );
    let _ = writeln!(o, "| file | fn | site | reason |");
    let _ = writeln!(o, "|---|---|---|---|");
    for x in &r.exemptions {
        let _ = writeln!(
            o,
            "| `{}` | `{}` | {} | {} |",
            x.file,
            x.function,
            cell(&x.selector),
            cell(&x.reason)
        );
    }
    o
}

/// The rule by which a kill is classed, as the report states it.
pub const KILL_RULE: &str = "A deletion kills with **money or authority** when the corpus run \
     without the guard has an attack that the unmutated gate blocks come out not blocked (the \
     judge's `blocked`: a step expected `deny` or `step_up` was allowed, or a money invariant \
     broke, and the gate did not stop the run with an engine error); with a **reason only** when \
     every attack stays blocked but some scenario misses its expectations (another reason code, \
     a legitimate scenario refused, a run the gate stopped with an engine error, failing \
     closed); **no scenario** when \
     the corpus does not change. The named test that catches the deletion (the table above) \
     says neither.";

fn listed(ids: &[String], max: usize) -> String {
    if ids.is_empty() {
        return "–".to_string();
    }
    let shown: Vec<String> = ids.iter().take(max).map(|i| format!("`{i}`")).collect();
    let more = ids.len().saturating_sub(max);
    let tail = if more > 0 {
        format!(" +{more}")
    } else {
        String::new()
    };
    format!("{}: {}{tail}", ids.len(), shown.join(", "))
}

/// The summary line naming how many guards no merged corpus run judged.
pub fn unrun_line(n: usize) -> String {
    format!(
        "- **{n}** guards have **no corpus columns**: no corpus run merged here judged them \
         (registered after those runs); they read `not run` below and count in none of the \
         figures above."
    )
}

fn render_corpus(o: &mut String, c: &CorpusRun, guards: &[GuardRow]) {
    let s = &c.summary;
    let _ = writeln!(o, "\n## What the corpus proves per guard\n");
    let _ = writeln!(
        o,
        "Generated by `{}`: the committed corpus ({} scenarios sent and passing on the database \
         engine unmutated) run once per guard switched off (source guards through the schemata \
         switch, schema guards dropped from every database the benchmark used), and, for a guard \
         whose deletion alone lets no attack through, again with each of its named twins and then \
         each other guard of the same threat switched off with it, over the scenarios of both \
         guards' threats (every twin, and at most {} partners in all, first hit reported); for one \
         that no pair covers, with all of those guards off at once and then one fewer at a time, \
         keeping the smallest set that still lets through an attack it does not let through \
         without the guard. {} benchmark runs; build {}; whole run {}.\n",
        c.generated_by,
        c.scenarios,
        c.pair_limit,
        c.bench_runs,
        duration(c.build_secs),
        duration(c.elapsed_secs)
    );
    let _ = writeln!(
        o,
        "- The corpus **depends on {}** of {} guards: deleting any one of them lets an attack \
         through (money or authority would move).",
        s.depended, s.judged
    );
    let _ = writeln!(
        o,
        "- **{}** are **covered by another guard** (a named twin, or one of the same threat; \
         behind three or more layers, a set of them): alone, no attack gets through; with that \
         guard (or set) also off, an attack of their threats does that gets through without it \
         with the rest off.",
        s.covered
    );
    let _ = writeln!(
        o,
        "- **{}** are covered **only by a unit or flow test**: no attack gets through without \
         them, alone or with any partner tried.",
        s.unit_only
    );
    if s.error > 0 {
        let _ = writeln!(o, "- **{}** could not be judged (see the note).", s.error);
    }
    let unrun = guards.iter().filter(|g| g.corpus.is_none()).count();
    if unrun > 0 {
        let _ = writeln!(o, "{}", unrun_line(unrun));
    }
    let m = &s.money;
    let _ = writeln!(
        o,
        "- Of these, **{}** are **money guards** (a guard of a threat where money or authority \
         moves: `{}`): the corpus **depends on {}**, **{}** are covered by another guard, **{}** \
         only a unit or flow test covers{}.",
        m.judged,
        MONEY_THREATS.join("`, `"),
        m.depended,
        m.covered,
        m.unit_only,
        if m.error > 0 {
            format!(", {} could not be judged", m.error)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        o,
        "- {} of the guards not depended on still change a reason in the corpus when deleted.\n",
        s.reason_only
    );
    let _ = writeln!(o, "{KILL_RULE}\n");
    let _ = writeln!(
        o,
        "| guard | threat | kill | depended on by (attacks unblocked) | reason only | covered by |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for g in guards {
        let Some(gc) = &g.corpus else {
            let _ = writeln!(o, "| `{}` | {} | not run | – | – | – |", g.id, g.threat);
            continue;
        };
        let covered = match (&gc.covered_by, gc.effect) {
            (Some(by), _) if gc.covered_with.is_empty() => {
                format!("`{by}` ({})", listed(&gc.covered_scenarios, 2))
            }
            (Some(by), _) => format!(
                "`{by}` with `{}` ({})",
                gc.covered_with.join("`, `"),
                listed(&gc.covered_scenarios, 2)
            ),
            (None, CorpusEffect::UnitOnly) => {
                format!("none of {} tried: unit tests only", gc.pairs_tried)
            }
            (None, _) => "–".to_string(),
        };
        let note = gc
            .note
            .as_deref()
            .map_or_else(String::new, |n| format!("<br>{}", cell(n)));
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} | {}{} |",
            g.id,
            g.threat,
            gc.kill(),
            listed(&gc.unblocked, 3),
            listed(&gc.reason_only, 3),
            covered,
            note
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::outcome::{Baseline, MutantOutcome, Summary};
    use std::path::Path;

    const REG: &str = r#"
guards:
  - {id: cap, kind: source, invariant: "An amount | over the cap is refused.", threat: policy.amount-over-cap,
     tests: ["gate/lib::policy::tests::cap"], operator: delete,
     locator: {file: gate/src/policy.rs, function: evaluate, produces: OverCap}}
  - {id: db-once, kind: schema, invariant: Used once., threat: checkout-authority.reuse,
     tests: ["gate/test:db_guards::once"], operator: delete,
     locator: {object: ck_once, object_kind: constraint, table: t}}
exempt:
  - {file: gate/src/policy.rs, function: describe, produces: OverCap, nth: 1, reason: display only}
"#;

    fn outcome(id: &str, kind: GuardKind, verdict: Verdict, secs: f64) -> MutantOutcome {
        MutantOutcome {
            id: id.into(),
            kind,
            operator: Operator::Delete,
            threat: String::new(),
            invariant: String::new(),
            location: format!("{id}:1:1"),
            verdict,
            caught_by: vec!["gate/lib::policy::tests::cap".into()],
            tests: Vec::new(),
            build_secs: None,
            test_secs: secs,
            total_secs: secs,
            timeout_secs: 20.0,
            replaced: None,
            replacement: None,
            note: None,
            output_tail: String::new(),
        }
    }

    fn run(mode: Mode, mutants: Vec<MutantOutcome>, elapsed: f64) -> Report {
        Report {
            version: 1,
            complete: true,
            mode,
            registry: "r.yaml".into(),
            shard: None,
            selected: mutants.len(),
            baseline: Baseline::default(),
            mutants,
            summary: Summary::default(),
            elapsed_secs: elapsed,
            notes: Vec::new(),
        }
    }

    /// The test registry, and a schemata run in which both its guards were
    /// caught (`cap` in 1 s, `db-once` in 2 s, 10 s in all).
    fn both_caught() -> (Registry, Report) {
        let registry = Registry::parse(REG, Path::new("r.yaml")).unwrap();
        let full = run(
            Mode::Schemata,
            vec![
                outcome("cap", GuardKind::Source, Verdict::Caught, 1.0),
                outcome("db-once", GuardKind::Schema, Verdict::Caught, 2.0),
            ],
            10.0,
        );
        (registry, full)
    }

    #[test]
    fn a_report_takes_its_table_from_the_registry_and_its_times_from_the_runs() {
        let (registry, full) = both_caught();
        let rewrite = run(
            Mode::Rewrite,
            vec![outcome("cap", GuardKind::Source, Verdict::Caught, 9.0)],
            30.0,
        );
        let check = CrossCheck {
            seed: Some(7),
            guards: vec!["cap".into()],
            disagreements: disagreements(&["cap".into()], &full, &rewrite),
        };
        assert!(check.disagreements.is_empty());
        let r = MutationReport::build(
            &registry,
            "harness mutate",
            2,
            &full,
            Some((&rewrite, check)),
        );
        assert_eq!(r.registry_part(), registry_part(&registry));
        assert_eq!(
            (r.counts.source, r.counts.schema, r.counts.caught),
            (1, 1, 2)
        );
        assert!(r.schemata.whole_registry_measured);
        assert_eq!(r.schemata.whole_registry_secs, 10.0);
        let rw = r.rewrite.as_ref().unwrap();
        assert!(!rw.whole_registry_measured);
        // Fixed cost 21 s, plus 9 s for the source guard; the schema guard is
        // estimated at the full run's schema mean (no rebuild in either mode).
        assert_eq!(rw.whole_registry_secs, 32.0);
        assert_eq!(r.speedup_per_source_mutant, Some(9.0));
        assert!(r.is_clean());
        assert_eq!(r.guards[1].rewrite_verdict, None);
        let md = render_markdown(&r);
        assert_eq!(md, render_markdown(&r));
        assert!(
            md.contains("An amount \\| over the cap is refused."),
            "{md}"
        );
        assert!(
            md.contains(
                "| `gate/src/policy.rs` | `describe` | produces OverCap (nth 1) | display only |"
            ),
            "{md}"
        );
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MutationReport>(&json).unwrap(), r);
        let missed = run(
            Mode::Rewrite,
            vec![outcome("cap", GuardKind::Source, Verdict::Missed, 9.0)],
            30.0,
        );
        assert_eq!(
            disagreements(&["cap".into()], &full, &missed),
            ["cap: schemata caught != rewrite missed"]
        );
    }

    #[test]
    fn a_corpus_run_merges_by_id_recounts_and_says_how_each_kill_moves() {
        let (registry, full) = both_caught();
        let plain = MutationReport::build(&registry, "harness mutate", 2, &full, None);
        let plain_md = render_markdown(&plain);
        assert!(!plain_md.contains("What the corpus proves"));
        let row = |effect, unblocked: &[&str], reason: &[&str], by: Option<&str>| GuardCorpus {
            effect,
            unblocked: unblocked.iter().map(|s| s.to_string()).collect(),
            reason_only: reason.iter().map(|s| s.to_string()).collect(),
            covered_by: by.map(str::to_string),
            covered_with: Vec::new(),
            covered_scenarios: by
                .map(|_| vec!["pair-attack".to_string()])
                .unwrap_or_default(),
            pairs_tried: usize::from(by.is_some()),
            note: None,
            money: false,
        };
        let rows = BTreeMap::from([
            (
                "cap".to_string(),
                row(CorpusEffect::Unblocks, &["pol-over-cap"], &[], None),
            ),
            (
                "db-once".to_string(),
                row(CorpusEffect::UnitOnly, &[], &["reuse-twice"], None),
            ),
        ]);
        let corpus = CorpusRun {
            generated_by: "harness mutate --corpus".into(),
            scenarios: 400,
            bench_runs: 3,
            pair_limit: 6,
            build_secs: 60.0,
            elapsed_secs: 120.0,
            summary: CorpusSummary::default(),
        };
        let r = plain.clone().with_corpus(corpus.clone(), &rows);
        let s = &r.corpus.as_ref().unwrap().summary;
        assert_eq!(
            (s.judged, s.depended, s.covered, s.unit_only, s.reason_only),
            (2, 1, 0, 1, 1)
        );
        assert_eq!(r.registry_part(), plain.registry_part());
        let md = render_markdown(&r);
        assert!(md.starts_with(&plain_md[..plain_md.find("## Exempt").unwrap()]));
        assert!(
            md.contains("The corpus **depends on 1** of 2 guards"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `cap` | policy.amount-over-cap | money or authority | 1: `pol-over-cap` | – |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| `db-once` | checkout-authority.reuse | reason only | – | 1: `reuse-twice` | none of 0 tried: unit tests only |"),
            "{md}"
        );
        assert!(md.contains(KILL_RULE));
        // A guard behind two layers names both.
        let deep = GuardCorpus {
            covered_with: vec!["third".to_string()],
            ..row(CorpusEffect::Covered, &[], &[], Some("cap"))
        };
        let layered = plain
            .clone()
            .with_corpus(corpus, &BTreeMap::from([("db-once".to_string(), deep)]));
        let layered_md = render_markdown(&layered);
        assert!(
            layered_md.contains("| `cap` with `third` (1: `pair-attack`) |"),
            "{layered_md}"
        );
        let json = serde_json::to_string(&layered).unwrap();
        assert_eq!(
            serde_json::from_str::<MutationReport>(&json).unwrap(),
            layered
        );
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MutationReport>(&json).unwrap(), r);
        // A report written before the corpus columns existed still reads.
        let old = serde_json::to_string(&plain).unwrap();
        assert!(!old.contains("corpus"));
        assert_eq!(serde_json::from_str::<MutationReport>(&old).unwrap(), plain);
    }

    #[test]
    fn money_guards_follow_their_threat_and_are_counted_apart() {
        for t in [
            "checkout-authority.reuse",
            "provider-event.duplicate-delivery",
            "ledger.double-charge",
            "database-constraint.concurrent-overspend",
            "policy.amount-over-cap",
            "delegation.widening",
            "approval.self-approval",
        ] {
            assert!(is_money_threat(t), "{t}");
        }
        for t in [
            "checkout-authority",
            "ledger.unknown-tenant-write",
            "database-constraint.cross-tenant-access",
            "policy.unsigned-mandate",
            "tool-boundary.numeric-confusion",
            "delegation.malformed-grant",
        ] {
            assert!(!is_money_threat(t), "{t}");
        }
        let (registry, full) = both_caught();
        let plain = MutationReport::build(&registry, "harness mutate", 2, &full, None);
        let row = |effect| GuardCorpus {
            effect,
            unblocked: Vec::new(),
            reason_only: Vec::new(),
            covered_by: None,
            covered_with: Vec::new(),
            covered_scenarios: Vec::new(),
            pairs_tried: 0,
            note: None,
            money: false,
        };
        // Rows written without the money column take it from the report's threat.
        let rows = BTreeMap::from([
            ("cap".to_string(), row(CorpusEffect::Unblocks)),
            ("db-once".to_string(), row(CorpusEffect::UnitOnly)),
            ("gone".to_string(), row(CorpusEffect::UnitOnly)),
        ]);
        let corpus = CorpusRun {
            generated_by: "harness mutate --corpus".into(),
            scenarios: 4,
            bench_runs: 3,
            pair_limit: 3,
            build_secs: 1.0,
            elapsed_secs: 2.0,
            summary: CorpusSummary::default(),
        };
        let r = plain.with_corpus(corpus, &rows);
        assert!(r.guards.iter().all(|g| g.corpus.as_ref().unwrap().money));
        let m = &r.corpus.as_ref().unwrap().summary.money;
        assert_eq!(
            (m.judged, m.depended, m.covered, m.unit_only, m.error),
            (2, 1, 0, 1, 0)
        );
        let md = render_markdown(&r);
        assert!(md.contains("Of these, **2** are **money guards**"), "{md}");
        assert!(md.contains("the corpus **depends on 1**, **0** are covered by another guard, **1** only a unit or flow test covers."), "{md}");
        // A summary written before the money counts existed still reads.
        let old =
            r#"{"judged":1,"depended":1,"covered":0,"unit_only":0,"error":0,"reason_only":0}"#;
        let s: CorpusSummary = serde_json::from_str(old).unwrap();
        assert_eq!(s.money, MoneySummary::default());
    }

    #[test]
    fn corpus_runs_combine_in_order_later_rows_winning() {
        let row = |effect| GuardCorpus {
            effect,
            unblocked: Vec::new(),
            reason_only: Vec::new(),
            covered_by: None,
            covered_with: Vec::new(),
            covered_scenarios: Vec::new(),
            pairs_tried: 0,
            note: None,
            money: false,
        };
        let run = |by: &str, scenarios, runs| CorpusRun {
            generated_by: by.into(),
            scenarios,
            bench_runs: runs,
            pair_limit: 6,
            build_secs: 10.0,
            elapsed_secs: 100.0,
            summary: CorpusSummary::default(),
        };
        let first = BTreeMap::from([
            ("a".to_string(), row(CorpusEffect::UnitOnly)),
            ("b".to_string(), row(CorpusEffect::Error)),
        ]);
        let second = BTreeMap::from([
            ("b".to_string(), row(CorpusEffect::Unblocks)),
            ("c".to_string(), row(CorpusEffect::Covered)),
        ]);
        let (r, rows) = CorpusRun::combine(vec![
            (run("old", 430, 200), first),
            (run("new --only b --only c", 470, 5), second),
        ])
        .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows["b"].effect, CorpusEffect::Unblocks);
        assert_eq!((r.scenarios, r.bench_runs), (470, 205));
        assert_eq!(r.elapsed_secs, 200.0);
        assert_eq!(
            r.generated_by,
            "old (430 scenarios)`, then `new --only b --only c (470 scenarios)"
        );
        assert_eq!(
            (
                r.summary.judged,
                r.summary.depended,
                r.summary.covered,
                r.summary.unit_only,
                r.summary.error
            ),
            (3, 1, 1, 1, 0)
        );
        assert!(CorpusRun::combine(Vec::new()).is_none());
    }

    #[test]
    fn sampling_is_deterministic_distinct_and_ordered() {
        let ids: Vec<String> = (0..40).map(|i| format!("g{i:02}")).collect();
        let a = sample(&ids, 6, 42);
        assert_eq!(a, sample(&ids, 6, 42));
        assert_eq!(a.len(), 6);
        let mut sorted = a.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, a, "distinct and in registry order");
        assert_ne!(a, sample(&ids, 6, 43));
        assert_eq!(sample(&ids, 99, 1), ids);
        assert!(sample(&[], 3, 1).is_empty());
    }
}
