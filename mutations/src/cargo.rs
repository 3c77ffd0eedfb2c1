//! Building test targets with cargo in a scratch workspace, and running the
//! resulting test binaries.
//!
//! Guarantees: every cargo invocation runs in the scratch workspace with the
//! runner's own target directory, `CARGO_INCREMENTAL=1` and
//! `--cap-lints=warn` appended to the rustflags (a deleted guard may leave an
//! unused variable; that must not make the mutant unviable under
//! `-D warnings`). The schemata switch variable and the drop-guard variables
//! are removed from every build. Test binaries are the ones cargo reports in
//! its JSON messages for exactly the requested targets; they run with the
//! package directory as working directory and `CARGO_MANIFEST_DIR` /
//! `CARGO_PKG_NAME` set, as under `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::drop_guards::{DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV};
use crate::error::{Error, Result};
use crate::process::{self, Exit};
use crate::testref::TestTarget;

/// One built test binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBinary {
    pub package: String,
    pub target: TestTarget,
    pub path: PathBuf,
    pub manifest_dir: PathBuf,
}

/// The result of building some test targets of one package.
#[derive(Debug, Clone)]
pub enum Build {
    Built {
        binaries: BTreeMap<TestTarget, TestBinary>,
        elapsed: Duration,
    },
    Failed {
        command: String,
        tail: String,
        elapsed: Duration,
        timed_out: bool,
    },
}

/// cargo, pointed at one scratch workspace and one target directory.
#[derive(Debug, Clone)]
pub struct Cargo {
    pub program: OsString,
    pub workspace: PathBuf,
    pub target_dir: PathBuf,
    /// Variables every build and test run must not inherit.
    pub scrub: Vec<String>,
    /// Variables set on every test run (not on builds), e.g. `DATABASE_URL`.
    pub test_env: Vec<(OsString, OsString)>,
}

impl Cargo {
    /// cargo from `$CARGO` (set when running under cargo) or `PATH`.
    pub fn new(workspace: &Path, target_dir: &Path, switch_env: &str) -> Cargo {
        Cargo {
            program: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            workspace: workspace.to_path_buf(),
            target_dir: target_dir.to_path_buf(),
            scrub: vec![
                switch_env.to_string(),
                DROP_GUARDS_ENV.to_string(),
                DROP_GUARDS_LOG_ENV.to_string(),
            ],
            test_env: Vec::new(),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.workspace)
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("CARGO_INCREMENTAL", "1")
            .env("CARGO_TERM_COLOR", "never")
            .env_remove("CARGO_BUILD_TARGET_DIR");
        if let Some(encoded) = std::env::var_os("CARGO_ENCODED_RUSTFLAGS") {
            let mut v = encoded;
            if !v.is_empty() {
                v.push("\u{1f}");
            }
            v.push("--cap-lints=warn");
            cmd.env("CARGO_ENCODED_RUSTFLAGS", v);
        } else {
            let mut v = std::env::var_os("RUSTFLAGS").unwrap_or_default();
            if !v.is_empty() {
                v.push(" ");
            }
            v.push("--cap-lints=warn");
            cmd.env("RUSTFLAGS", v);
        }
        for var in &self.scrub {
            cmd.env_remove(var);
        }
        cmd
    }

    /// Builds (without running) the given test targets of `package`.
    pub fn build_tests(
        &self,
        package: &str,
        targets: &BTreeSet<TestTarget>,
        limit: Option<Duration>,
        cancel: &Cancel,
    ) -> Result<Build> {
        let mut cmd = self.command();
        let mut args: Vec<String> = vec![
            "test".into(),
            "--no-run".into(),
            "--message-format=json-render-diagnostics".into(),
            "-p".into(),
            package.into(),
        ];
        for t in targets {
            args.extend(t.cargo_args());
        }
        cmd.args(&args);
        let shown = format!("cargo {}", args.join(" "));
        let f = process::run(cmd, limit, cancel)?;
        if f.exit != Exit::Success {
            return Ok(Build::Failed {
                command: shown,
                tail: process::tail(&f.stderr, 60),
                elapsed: f.elapsed,
                timed_out: f.exit == Exit::TimedOut,
            });
        }
        let mut binaries = BTreeMap::new();
        for line in f.stdout.lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
                continue;
            }
            let Some(exe) = msg["executable"].as_str() else {
                continue;
            };
            let name = msg["target"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let kinds: Vec<&str> = msg["target"]["kind"]
                .as_array()
                .map(|a| a.iter().filter_map(|k| k.as_str()).collect())
                .unwrap_or_default();
            let target = if kinds.contains(&"test") {
                TestTarget::Test(name)
            } else if kinds.contains(&"bin") {
                TestTarget::Bin(name)
            } else if kinds.iter().any(|k| {
                matches!(
                    *k,
                    "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro"
                )
            }) {
                TestTarget::Lib
            } else {
                continue;
            };
            if !targets.contains(&target) {
                continue;
            }
            let manifest_dir = msg["manifest_path"]
                .as_str()
                .and_then(|m| Path::new(m).parent())
                .map(Path::to_path_buf)
                .unwrap_or_else(|| self.workspace.clone());
            binaries.insert(
                target.clone(),
                TestBinary {
                    package: package.to_string(),
                    target,
                    path: PathBuf::from(exe),
                    manifest_dir,
                },
            );
        }
        if let Some(missing) = targets.iter().find(|t| !binaries.contains_key(t)) {
            return Err(Error::Cargo(format!(
                "`{shown}` built no test binary for target {missing} of package {package}"
            )));
        }
        Ok(Build::Built {
            binaries,
            elapsed: f.elapsed,
        })
    }

    /// A command that runs `bin` with `args`, as `cargo test` would, minus
    /// the scrubbed variables; the caller adds what the mutant needs.
    pub fn test_command(&self, bin: &TestBinary, args: &[String]) -> Command {
        let mut cmd = Command::new(&bin.path);
        cmd.args(args)
            .current_dir(&bin.manifest_dir)
            .env("CARGO_MANIFEST_DIR", &bin.manifest_dir)
            .env("CARGO_PKG_NAME", &bin.package)
            .env("RUST_BACKTRACE", "0");
        for var in &self.scrub {
            cmd.env_remove(var);
        }
        for (k, v) in &self.test_env {
            cmd.env(k, v);
        }
        cmd
    }
}
