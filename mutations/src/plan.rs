//! The plan of a run: which guards are selected, where each source guard is,
//! its rewrite-mode text and the schemata-mode text of every guarded file.
//!
//! Guarantees: a [`Plan`] exists only if every selected source guard located
//! exactly once in the user's tree (else [`crate::Error::Drift`] or
//! [`crate::Error::Unmutable`]), every rewrite and every instrumented file
//! parses, and every selected schema guard's object is named in the
//! migrations (when the registry names a migrations directory). Planning only
//! reads the user's tree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::locate::{self, Located};
use crate::migrations;
use crate::options::Shard;
use crate::registry::{Guard, Locator, Registry};
use crate::rewrite::{self, Rewritten};
use crate::schemata::{self, Instrument};
use crate::testref::TestTarget;

/// A source guard, found.
#[derive(Debug, Clone)]
pub struct SourceSite {
    /// Relative to the workspace root.
    pub file: PathBuf,
    /// The file's original text.
    pub original: String,
    pub located: Located,
    /// Rewrite mode's text of the file.
    pub rewritten: Rewritten,
}

/// One mutant to judge.
#[derive(Debug, Clone)]
pub struct Mutant {
    pub guard: Guard,
    /// Present for source guards.
    pub source: Option<SourceSite>,
}

/// The tests of one test binary: `(package, target)` → names.
pub type Groups = BTreeMap<(String, TestTarget), BTreeSet<String>>;

impl Mutant {
    /// `file:line:col`, or `KIND:TABLE:NAME`.
    pub fn location(&self) -> String {
        match (&self.guard.locator, &self.source) {
            (_, Some(s)) => format!(
                "{}:{}:{}",
                s.file.display(),
                s.located.line,
                s.located.column
            ),
            (Locator::Schema(l), None) => crate::drop_guards::spec_of(l).map_or_else(
                |_| format!("{}:{}:{}", l.object_kind, l.table, l.object),
                |s| s.to_string(),
            ),
            (Locator::Source(l), None) => l.file.display().to_string(),
        }
    }

    /// This mutant's named tests, by test binary.
    pub fn groups(&self) -> Groups {
        let mut g = Groups::new();
        for t in &self.guard.tests {
            g.entry((t.package.clone(), t.target.clone()))
                .or_default()
                .insert(t.name.clone());
        }
        g
    }
}

/// A located run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mutants: Vec<Mutant>,
    /// Schemata mode's text of each file with selected source guards.
    pub instrumented: BTreeMap<PathBuf, String>,
}

impl Plan {
    /// Every named test of every mutant, by test binary.
    pub fn groups(&self) -> Groups {
        let mut all = Groups::new();
        for m in &self.mutants {
            for (k, names) in m.groups() {
                all.entry(k).or_default().extend(names);
            }
        }
        all
    }

    /// Packages and the test targets each needs built.
    pub fn packages(&self) -> BTreeMap<String, BTreeSet<TestTarget>> {
        let mut out: BTreeMap<String, BTreeSet<TestTarget>> = BTreeMap::new();
        for (pkg, target) in self.groups().into_keys() {
            out.entry(pkg).or_default().insert(target);
        }
        out
    }

    /// The original text of every file schemata mode instruments.
    pub fn originals(&self) -> BTreeMap<PathBuf, String> {
        self.mutants
            .iter()
            .filter_map(|m| m.source.as_ref())
            .map(|s| (s.file.clone(), s.original.clone()))
            .collect()
    }
}

/// The guards a run judges: all, or `only`, then the shard's share.
pub fn select<'r>(
    registry: &'r Registry,
    only: &[String],
    shard: Option<Shard>,
) -> Result<Vec<&'r Guard>> {
    for id in only {
        if registry.guard(id).is_none() {
            return Err(Error::Selection(format!(
                "--only {id}: no guard with this id in the registry"
            )));
        }
    }
    Ok(registry
        .guards
        .iter()
        .filter(|g| only.is_empty() || only.contains(&g.id))
        .enumerate()
        .filter(|(i, _)| shard.is_none_or(|s| s.selects(*i)))
        .map(|(_, g)| g)
        .collect())
}

/// Locates and prepares every selected guard. Reads `root` only.
pub fn plan(root: &Path, registry: &Registry, guards: &[&Guard]) -> Result<Plan> {
    let mut texts: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut mutants = Vec::new();
    for guard in guards {
        let source = match &guard.locator {
            Locator::Source(loc) => {
                if !texts.contains_key(&loc.file) {
                    let p = root.join(&loc.file);
                    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
                    texts.insert(loc.file.clone(), text);
                }
                let original = &texts[&loc.file];
                let located = locate::locate(
                    original,
                    &guard.id,
                    loc,
                    guard.operator,
                    &registry.reason_enum,
                )?;
                let rewritten = rewrite::mutate(original, &loc.file, &located, guard.operator)?;
                Some(SourceSite {
                    file: loc.file.clone(),
                    original: original.clone(),
                    located,
                    rewritten,
                })
            }
            Locator::Schema(loc) => {
                migrations::check_schema_object(root, registry, &guard.id, loc)?;
                None
            }
        };
        mutants.push(Mutant {
            guard: (*guard).clone(),
            source,
        });
    }
    let mut instrumented = BTreeMap::new();
    for (file, text) in &texts {
        let inst: Vec<Instrument<'_>> = mutants
            .iter()
            .filter_map(|m| m.source.as_ref().map(|s| (m, s)))
            .filter(|(_, s)| &s.file == file)
            .map(|(m, s)| Instrument {
                id: &m.guard.id,
                located: &s.located,
                operator: m.guard.operator,
            })
            .collect();
        instrumented.insert(
            file.clone(),
            schemata::instrument(text, file, &inst, &registry.switch)?,
        );
    }
    Ok(Plan {
        mutants,
        instrumented,
    })
}
