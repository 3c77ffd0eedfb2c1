//! The completeness check: every place the gate refuses is either a
//! registered guard or exempt with a reason.
//!
//! Guarantees: [`check`] walks every `.rs` file under the registry's
//! `completeness.roots` (except `skip_files`), and in every non-test function
//! (not inside `#[cfg(test)]`, not a `#[test]`) finds every refusal site: an
//! expression path `REASON_ENUM::Variant` (also inside macro invocations),
//! every path to an error variant listed in `completeness.refusal_errors`
//! (`ProviderError::Mismatch`: a refusal that travels as an error, not a
//! reason), and every call of a name in `completeness.calls`. A site is *registered* when
//! it lies inside the range a registered source guard covers (the deleted
//! statement, or the whole `if` of a disabled/weakened condition), *exempt*
//! when it lies inside a statement an exemption selects, and otherwise
//! reported. Registry drift in a guard or an exemption is an error, not a
//! pass. Not seen: refusals built outside functions (consts, statics) and
//! variants brought into scope bare (`use Reason::*`); write `Reason::X`.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::locate;
use crate::registry::{Locator, Operator, Registry};
use crate::syntax::{self, SiteKind};

/// One refusal site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Relative to the workspace root.
    pub file: PathBuf,
    pub function: String,
    pub line: usize,
    pub column: usize,
    /// `produces Reason::X` or `calls lock_for_update`.
    pub what: String,
    /// The trimmed source line.
    pub snippet: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{} in fn `{}`: {}: `{}`",
            self.file.display(),
            self.line,
            self.column,
            self.function,
            self.what,
            self.snippet
        )
    }
}

/// The result of a completeness walk.
#[derive(Debug, Clone, Default)]
pub struct Completeness {
    /// Files walked.
    pub files: usize,
    /// Sites inside a registered guard.
    pub registered: Vec<Site>,
    /// Sites inside an exemption.
    pub exempt: Vec<Site>,
    /// Sites neither registered nor exempt.
    pub unregistered: Vec<Site>,
}

impl Completeness {
    /// Whether every site is registered or exempt.
    pub fn is_complete(&self) -> bool {
        self.unregistered.is_empty()
    }

    /// A readable report listing every unregistered site.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} files, {} refusal sites: {} registered, {} exempt, {} unregistered",
            self.files,
            self.registered.len() + self.exempt.len() + self.unregistered.len(),
            self.registered.len(),
            self.exempt.len(),
            self.unregistered.len()
        );
        for s in &self.unregistered {
            out.push_str(&format!("\n  unregistered: {s}"));
        }
        out
    }
}

/// File → ranges that count as covered.
type Covers = Vec<(PathBuf, Range<usize>)>;

/// The ranges registered source guards cover.
pub fn guard_covers(root: &Path, registry: &Registry) -> Result<Covers> {
    let mut out = Vec::new();
    for g in &registry.guards {
        if let Locator::Source(loc) = &g.locator {
            let src = read(root, &loc.file)?;
            let l = locate::locate(&src, &g.id, loc, g.operator, &registry.reason_enum)?;
            out.push((loc.file.clone(), l.covers));
        }
    }
    Ok(out)
}

/// The ranges exemptions cover; an exemption that selects nothing is drift.
pub fn exemption_covers(root: &Path, registry: &Registry) -> Result<Covers> {
    let mut out = Vec::new();
    for x in &registry.exempt {
        let id = format!("exempt {}::{}", x.file.display(), x.function);
        let src = read(root, &x.file)?;
        let m = locate::find(
            &src,
            &x.file,
            &x.function,
            &x.selector,
            Operator::Delete,
            None,
            &registry.reason_enum,
        )
        .map_err(|message| Error::Parse {
            file: x.file.clone(),
            message,
        })?;
        let drift = |found: String| Error::Drift {
            id: id.clone(),
            file: x.file.clone(),
            function: x.function.clone(),
            selector: x.selector.to_string(),
            found,
        };
        if m.functions != 1 {
            return Err(drift(format!(
                "{} functions whose path ends in `{}`",
                m.functions, x.function
            )));
        }
        let picked: Vec<_> = match x.nth {
            Some(k) => m.candidates.get(k).into_iter().collect(),
            None => m.candidates.iter().collect(),
        };
        if picked.is_empty() {
            return Err(drift(format!("{} matches", m.candidates.len())));
        }
        out.extend(
            picked
                .into_iter()
                .map(|c| (x.file.clone(), c.covers.clone())),
        );
    }
    Ok(out)
}

/// Walks the configured roots and classifies every refusal site.
pub fn check(root: &Path, registry: &Registry) -> Result<Completeness> {
    let guards = guard_covers(root, registry)?;
    let exempt = exemption_covers(root, registry)?;
    let cfg = &registry.completeness;
    let mut files = Vec::new();
    for r in &cfg.roots {
        rust_files(root, &root.join(r), &mut files)?;
    }
    files.sort();
    files.dedup();
    let mut out = Completeness::default();
    for rel in files {
        if cfg.skip_files.iter().any(|s| s == &rel) {
            continue;
        }
        out.files += 1;
        let src = read(root, &rel)?;
        let ast = syntax::parse_file(&src).map_err(|message| Error::Parse {
            file: rel.clone(),
            message,
        })?;
        for item in syntax::functions(&ast, syntax::module_path(&rel)) {
            if item.test_only {
                continue;
            }
            let mut sites = syntax::body(item.block, &registry.reason_enum, &cfg.calls).sites;
            for (error_enum, variants) in refusal_errors(&cfg.refusal_errors) {
                sites.extend(
                    syntax::body(item.block, error_enum, &[])
                        .sites
                        .into_iter()
                        .filter(|s| matches!(&s.kind, SiteKind::Reason(v) if variants.contains(&v.as_str())))
                        .map(|mut s| {
                            if let SiteKind::Reason(v) = &s.kind {
                                s.kind = SiteKind::Reason(format!("{error_enum}::{v}"));
                            }
                            s
                        }),
                );
            }
            for s in sites {
                let (line, column) = syntax::line_col(&src, s.range.start);
                let site = Site {
                    file: rel.clone(),
                    function: item.display_path(),
                    line,
                    column,
                    what: match &s.kind {
                        SiteKind::Reason(v) if v.contains("::") => format!("produces {v}"),
                        SiteKind::Reason(v) => format!("produces {}::{v}", registry.reason_enum),
                        SiteKind::Call(c) => format!("calls {c}"),
                    },
                    snippet: src
                        .lines()
                        .nth(line - 1)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                let inside = |covers: &Covers| {
                    covers
                        .iter()
                        .any(|(f, r)| *f == rel && r.start <= s.range.start && s.range.end <= r.end)
                };
                if inside(&guards) {
                    out.registered.push(site);
                } else if inside(&exempt) {
                    out.exempt.push(site);
                } else {
                    out.unregistered.push(site);
                }
            }
        }
    }
    Ok(out)
}

/// `["ProviderError::Mismatch", "ProviderError::LiveKeyRefused"]` →
/// `[("ProviderError", ["Mismatch", "LiveKeyRefused"])]`.
fn refusal_errors(listed: &[String]) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for entry in listed {
        let Some((error_enum, variant)) = entry.rsplit_once("::") else {
            continue;
        };
        match out.iter_mut().find(|(e, _)| *e == error_enum) {
            Some((_, variants)) => variants.push(variant),
            None => out.push((error_enum, vec![variant])),
        }
    }
    out
}

fn read(root: &Path, rel: &Path) -> Result<String> {
    let p = root.join(rel);
    std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))
}

fn rust_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if dir.is_file() {
        out.push(dir.strip_prefix(root).unwrap_or(dir).to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let p = entry.map_err(|e| Error::io(dir, e))?.path();
        if p.is_dir() {
            rust_files(root, &p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
use crate::reason::Reason;
pub fn evaluate(a: u64, cap: u64) -> Result<(), Reason> {
    if a == 0 {
        return Err(Reason::Zero);
    }
    if a > cap {
        return Err(Reason::OverCap);
    }
    lock_row(a)?;
    if a == 13 { return Err(Reason::Unlucky); }
    Ok(())
}
pub fn describe() -> Reason { Reason::Zero }
#[cfg(test)]
mod tests { fn t() { let _ = Reason::OverCap; } }
"#;

    fn setup(registry: &str) -> (tempfile::TempDir, Registry) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("gate/src")).unwrap();
        std::fs::write(d.path().join("gate/src/policy.rs"), POLICY).unwrap();
        std::fs::write(
            d.path().join("gate/src/reason.rs"),
            "pub fn all() { let _ = Reason::Zero; }",
        )
        .unwrap();
        let r = Registry::parse(registry, Path::new("r.yaml")).unwrap();
        (d, r)
    }

    const REG: &str = r#"
completeness: {roots: [gate/src], skip_files: [gate/src/reason.rs], calls: [lock_row]}
guards:
  - {id: zero, kind: source, invariant: i, threat: t, tests: ["gate/lib::a"], operator: delete,
     locator: {file: gate/src/policy.rs, function: policy::evaluate, produces: Zero}}
  - {id: cap, kind: source, invariant: i, threat: t, tests: ["gate/lib::a"], operator: disable,
     locator: {file: gate/src/policy.rs, function: evaluate, produces: OverCap}}
exempt:
  - {file: gate/src/policy.rs, function: describe, produces: Zero, reason: display only}
"#;

    #[test]
    fn unregistered_sites_are_named() {
        let (d, r) = setup(REG);
        let c = check(d.path(), &r).unwrap();
        assert_eq!(c.files, 1);
        assert_eq!(c.registered.len(), 2);
        assert_eq!(c.exempt.len(), 1);
        let names: Vec<String> = c
            .unregistered
            .iter()
            .map(|s| format!("{}:{} {}", s.line, s.function, s.what))
            .collect();
        assert_eq!(
            names,
            [
                "10:gate::policy::evaluate calls lock_row",
                "11:gate::policy::evaluate produces Reason::Unlucky"
            ]
        );
        assert!(!c.is_complete());
        assert!(
            c.render().contains("gate/src/policy.rs:11:"),
            "{}",
            c.render()
        );
    }

    const PAY: &str = r#"
pub fn answer(ok: bool) -> Result<(), ProviderError> {
    if !ok {
        return Err(ProviderError::Mismatch { order_id: String::new() });
    }
    if ok { return Err(ProviderError::Timeout); }
    Ok(())
}
"#;

    #[test]
    fn refusals_through_a_listed_error_variant_are_sites_too() {
        let reg = r#"
completeness: {roots: [gate/src], refusal_errors: ["ProviderError::Mismatch"]}
guards: []
"#;
        let (d, _) = setup(REG);
        std::fs::remove_file(d.path().join("gate/src/policy.rs")).unwrap();
        std::fs::write(d.path().join("gate/src/reason.rs"), PAY).unwrap();
        let r = Registry::parse(reg, Path::new("r.yaml")).unwrap();
        let c = check(d.path(), &r).unwrap();
        let names: Vec<String> = c
            .unregistered
            .iter()
            .map(|s| format!("{}:{} {}", s.line, s.function, s.what))
            .collect();
        assert_eq!(
            names,
            ["4:gate::reason::answer produces ProviderError::Mismatch"],
            "Mismatch is a site; Timeout, not listed, is not"
        );
        let guarded = format!(
            "{reg}  - {{id: m, kind: source, invariant: i, threat: t, tests: [\"gate/lib::a\"], operator: disable,\n     locator: {{file: gate/src/reason.rs, function: answer, contains: \"!ok\"}}}}\n"
        )
        .replace("guards: []\n", "guards:\n");
        let r = Registry::parse(&guarded, Path::new("r.yaml")).unwrap();
        let c = check(d.path(), &r).unwrap();
        assert!(c.is_complete(), "{}", c.render());
        assert_eq!(c.registered.len(), 1);
    }

    #[test]
    fn a_stale_exemption_is_drift() {
        let (d, r) = setup(&REG.replace("function: describe", "function: gone"));
        let e = check(d.path(), &r).unwrap_err().to_string();
        assert!(
            e.contains("registry drift") && e.contains("exempt gate/src/policy.rs::gone"),
            "{e}"
        );
    }
}
