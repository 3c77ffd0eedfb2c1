//! Registry sanity: the registry still describes the code.
//!
//! Guarantees: [`check_locators`] succeeds only if every source guard's
//! locator matches exactly one mutable node (and its rewrite and the
//! instrumented file parse), every exemption selects something, and every
//! schema guard's object is named in a migration (a privilege guard's
//! privilege is withheld by them); otherwise it fails with the
//! entry id (the schema half is [`crate::migrations`], which the plan uses
//! too, so the plan never imports this module). [`check_tests`] succeeds only if every named test is listed by
//! its test binary (`--list`), built in a scratch copy; otherwise it fails
//! with [`Error::TestNotFound`] naming the entry id and the test. Neither
//! writes the user's tree.

use std::path::Path;

use crate::cancel::Cancel;
use crate::completeness;
use crate::error::{Error, Result};
use crate::lane::Lane;
use crate::options::{Mode, RunOptions};
use crate::plan;
use crate::registry::Registry;
use crate::runner;
use crate::scratch::Scratch;

/// Every locator and exemption matches; returns how many guards were checked.
pub fn check_locators(root: &Path, registry: &Registry) -> Result<usize> {
    let all: Vec<_> = registry.guards.iter().collect();
    let p = plan::plan(root, registry, &all)?;
    completeness::exemption_covers(root, registry)?;
    Ok(p.mutants.len())
}

/// Every named test exists in its test binary. Builds the unmutated
/// workspace in a scratch copy (into the rewrite-mode build cache).
pub fn check_tests(opts: &RunOptions, registry: &Registry, cancel: &Cancel) -> Result<()> {
    let all: Vec<_> = registry.guards.iter().collect();
    let p = plan::plan(&opts.root, registry, &all)?;
    if p.mutants.is_empty() {
        return Ok(());
    }
    let exclude = runner::exclusions(opts, registry);
    let scratch = Scratch::copy(&opts.root, &exclude, opts.scratch_parent.as_deref(), cancel)?;
    let mut lane = Lane::new(
        &scratch,
        runner::cache_dir(opts, Mode::Rewrite),
        registry,
        opts.cargo.as_ref(),
    );
    if let Err(f) = lane.build(&p.packages(), opts.build_timeout, cancel)? {
        return Err(Error::BaselineBuild {
            command: f.command,
            tail: f.tail,
        });
    }
    for ((package, target), names) in p.groups() {
        let listed = lane.list_tests(&package, &target, cancel)?;
        for name in names {
            if !listed.contains(&name) {
                let id = registry
                    .guards
                    .iter()
                    .find(|g| {
                        g.tests
                            .iter()
                            .any(|t| t.package == package && t.target == target && t.name == name)
                    })
                    .map_or_else(String::new, |g| g.id.clone());
                return Err(Error::TestNotFound {
                    id,
                    test: format!("{package}/{target}::{name}"),
                });
            }
        }
    }
    Ok(())
}
