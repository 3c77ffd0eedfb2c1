//! A lane: one scratch workspace, the cargo that builds it into one target
//! directory, and the test binaries of its last build.
//!
//! Guarantees: a lane only ever writes inside its scratch workspace, its logs
//! directory and its target directory; the binaries it runs are the ones its
//! latest successful build reported for exactly the requested targets. A
//! schemata lane ([`Lane::for_schemata`]) builds without the lint cap and
//! with every workspace member under a profile key of its own, so in a
//! target directory it shares with the caller it writes only artifacts of
//! its own (and dependencies the caller's builds have not made yet).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::cargo::{self, Build, Cargo, TestBinary};
use crate::error::{Error, Result};
use crate::libtest;
use crate::process::{self, Finished};
use crate::registry::Registry;
use crate::scratch::Scratch;
use crate::testref::TestTarget;

/// A build that failed: the command and the tail of its output.
#[derive(Debug, Clone)]
pub struct BuildFailure {
    pub command: String,
    pub tail: String,
    pub timed_out: bool,
}

/// One scratch workspace and what was built from it.
#[derive(Debug, Clone)]
pub struct Lane {
    pub workspace: PathBuf,
    pub logs: PathBuf,
    pub cargo: Cargo,
    pub binaries: BTreeMap<(String, TestTarget), TestBinary>,
}

impl Lane {
    /// A lane over `scratch` building into `target_dir`.
    pub fn new(
        scratch: &Scratch,
        target_dir: PathBuf,
        registry: &Registry,
        cargo: Option<&OsString>,
    ) -> Lane {
        let mut c = Cargo::new(scratch.workspace(), &target_dir, &registry.switch_env);
        c.scrub.extend(registry.scrub_env.iter().cloned());
        if let Some(program) = cargo {
            c.program = program.clone();
        }
        Lane {
            workspace: scratch.workspace().to_path_buf(),
            logs: scratch.logs(),
            cargo: c,
            binaries: BTreeMap::new(),
        }
    }

    /// The same lane, with `env` set on every test run.
    pub fn with_test_env(mut self, env: &[(OsString, OsString)]) -> Lane {
        self.cargo.test_env = env.to_vec();
        self
    }

    /// The same lane, set up for schemata mode: an instrumented guard is
    /// switched at run time and no code is deleted, so the build needs no
    /// lint cap (no crate of this workspace denies warnings by attribute;
    /// rustflags that do, such as `-D warnings`, apply as they do to the
    /// caller's own build), and the rustflags stay the caller's: every
    /// dependency keeps the fingerprint it has in the caller's target
    /// directory. The workspace's members get [`cargo::distinct_profile`],
    /// and each build also selects its [`cargo::companions`].
    pub fn for_schemata(mut self, cancel: &Cancel) -> Result<Lane> {
        let members = cargo::workspace_members(&self.cargo.program, &self.workspace, cancel)?;
        self.cargo.cap_lints = false;
        self.cargo.config = cargo::distinct_profile(&members);
        self.cargo.members = members;
        Ok(self)
    }

    /// Builds the test targets of every package; the time taken, or why not.
    pub fn build(
        &mut self,
        packages: &BTreeMap<String, BTreeSet<TestTarget>>,
        limit: Option<Duration>,
        cancel: &Cancel,
    ) -> Result<std::result::Result<Duration, BuildFailure>> {
        let mut total = Duration::ZERO;
        for (package, targets) in packages {
            match self.cargo.build_tests(package, targets, limit, cancel)? {
                Build::Built { binaries, elapsed } => {
                    total += elapsed;
                    for (t, b) in binaries {
                        self.binaries.insert((package.clone(), t), b);
                    }
                }
                Build::Failed {
                    command,
                    tail,
                    timed_out,
                    ..
                } => {
                    return Ok(Err(BuildFailure {
                        command,
                        tail,
                        timed_out,
                    }));
                }
            }
        }
        Ok(Ok(total))
    }

    fn binary(&self, package: &str, target: &TestTarget) -> Result<&TestBinary> {
        self.binaries
            .get(&(package.to_string(), target.clone()))
            .ok_or_else(|| Error::Cargo(format!("no test binary was built for {package}/{target}")))
    }

    /// Runs exactly `names` in one test binary, with `env` added.
    pub fn run_tests(
        &self,
        package: &str,
        target: &TestTarget,
        names: &[String],
        env: &[(String, OsString)],
        limit: Option<Duration>,
        cancel: &Cancel,
    ) -> Result<Finished> {
        let args = libtest::run_args(names, None);
        self.run_binary(package, target, &args, env, limit, cancel)
    }

    /// Runs exactly `names` in one test binary, `threads` of them at once,
    /// with no time limit: the unmutated baseline.
    pub fn run_baseline(
        &self,
        package: &str,
        target: &TestTarget,
        names: &[String],
        threads: usize,
        cancel: &Cancel,
    ) -> Result<Finished> {
        let args = libtest::run_args(names, Some(threads));
        self.run_binary(package, target, &args, &[], None, cancel)
    }

    fn run_binary(
        &self,
        package: &str,
        target: &TestTarget,
        args: &[String],
        env: &[(String, OsString)],
        limit: Option<Duration>,
        cancel: &Cancel,
    ) -> Result<Finished> {
        let bin = self.binary(package, target)?;
        let mut cmd = self.cargo.test_command(bin, args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        process::run(cmd, limit, cancel)
    }

    /// Every test name in one test binary.
    pub fn list_tests(
        &self,
        package: &str,
        target: &TestTarget,
        cancel: &Cancel,
    ) -> Result<Vec<String>> {
        let bin = self.binary(package, target)?;
        let cmd = self.cargo.test_command(bin, &libtest::list_args());
        let f = process::run(cmd, Some(Duration::from_secs(120)), cancel)?;
        if f.exit != process::Exit::Success {
            return Err(Error::Cargo(format!(
                "{} --list failed:\n{}",
                bin.path.display(),
                process::tail(&f.stderr, 20)
            )));
        }
        Ok(libtest::parse_list(&f.stdout))
    }
}
