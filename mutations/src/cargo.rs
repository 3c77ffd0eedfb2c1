//! Building test targets with cargo in a scratch workspace, and running the
//! resulting test binaries.
//!
//! Guarantees: every cargo invocation runs in the scratch workspace with the
//! runner's own target directory and `CARGO_INCREMENTAL=1`. Rewrite mode
//! appends `--cap-lints=warn` to the rustflags (a deleted guard may leave an
//! unused variable; that must not make the mutant unviable under
//! `-D warnings`); the rustflags are part of every crate's fingerprint, so
//! that build has a target directory of its own. Schemata mode deletes no
//! code and leaves the rustflags as the caller has them, so it can build in
//! the workspace's own target directory and reuse the dependencies already
//! built there; its `--config` profile key ([`distinct_profile`]) keeps the
//! workspace's own crates from overwriting the caller's artifacts. The
//! schemata switch variable and the drop-guard variables are removed from
//! every build. Test binaries are the ones cargo reports in
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
    /// Append `--cap-lints=warn` to the rustflags (rewrite mode).
    pub cap_lints: bool,
    /// `--config` values given to every build, e.g. [`distinct_profile`].
    pub config: Vec<String>,
    /// The workspace's members, when known (schemata mode): a build of one
    /// package also selects every member that has none of the requested
    /// targets ([`companions`]).
    pub members: Vec<Member>,
}

/// A workspace member and the targets `cargo test` could build of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub targets: BTreeSet<TestTarget>,
}

/// The members that a build of `targets` of `package` also selects with
/// `-p`, so that cargo unifies the dependencies' features more nearly as
/// `cargo test --workspace` does (the dependencies then keep the features,
/// and so the artifacts, of the caller's own build instead of being
/// compiled again with fewer): every other member none of whose targets is
/// among `targets`, so the same target filters build nothing more. A
/// member with a library is never one when `targets` holds the library.
pub fn companions<'a>(
    members: &'a [Member],
    package: &str,
    targets: &BTreeSet<TestTarget>,
) -> Vec<&'a str> {
    members
        .iter()
        .filter(|m| m.name != package && m.targets.is_disjoint(targets))
        .map(|m| m.name.as_str())
        .collect()
}

/// Appends `--cap-lints=warn` to the rustflags cargo would use: to
/// `CARGO_ENCODED_RUSTFLAGS` when that is set, else to `RUSTFLAGS`.
fn cap_lints(cmd: &mut Command) {
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
}

/// The profile setting that gives the workspace's own crates artifacts of
/// their own without changing what is compiled: `codegen-units = 256` is what
/// the dev profile already uses for an incremental build, but a value set
/// explicitly is a different profile to cargo, so every unit of these
/// packages (and of anything that depends on them) gets another metadata
/// hash, while the dependencies keep theirs and are reused.
pub const DISTINCT_PROFILE_KEY: &str = "codegen-units=256";

/// The `--config` values that put every package in `members` under
/// [`DISTINCT_PROFILE_KEY`], in the dev profile (which `cargo test`'s test
/// profile inherits).
pub fn distinct_profile(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .map(|m| format!("profile.dev.package.{:?}.{DISTINCT_PROFILE_KEY}", m.name))
        .collect()
}

/// The package names of the workspace at `workspace`, from `cargo metadata`.
pub fn workspace_members(
    program: &OsString,
    workspace: &Path,
    cancel: &Cancel,
) -> Result<Vec<Member>> {
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
        "--offline",
    ]);
    let f = process::run(cmd, Some(Duration::from_secs(120)), cancel)?;
    if f.exit != Exit::Success {
        return Err(Error::Cargo(format!(
            "`cargo metadata --no-deps` failed in {}:\n{}",
            workspace.display(),
            process::tail(&f.stderr, 20)
        )));
    }
    members_of(&f.stdout)
}

/// The packages in `cargo metadata --no-deps` output, with their library,
/// binary and test targets.
pub fn members_of(metadata: &str) -> Result<Vec<Member>> {
    let v: serde_json::Value = serde_json::from_str(metadata)
        .map_err(|e| Error::Cargo(format!("cargo metadata printed no JSON: {e}")))?;
    let empty = Vec::new();
    let members: Vec<Member> = v["packages"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?.to_string();
            let targets = p["targets"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter_map(|t| {
                    let kinds: Vec<&str> = t["kind"]
                        .as_array()?
                        .iter()
                        .filter_map(|k| k.as_str())
                        .collect();
                    let tname = t["name"].as_str()?.to_string();
                    if kinds.contains(&"test") {
                        Some(TestTarget::Test(tname))
                    } else if kinds.contains(&"bin") {
                        Some(TestTarget::Bin(tname))
                    } else if kinds.iter().any(|k| {
                        matches!(
                            *k,
                            "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro"
                        )
                    }) {
                        Some(TestTarget::Lib)
                    } else {
                        None
                    }
                })
                .collect();
            Some(Member { name, targets })
        })
        .collect();
    if members.is_empty() {
        return Err(Error::Cargo("cargo metadata listed no package".into()));
    }
    Ok(members)
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
            cap_lints: true,
            config: Vec::new(),
            members: Vec::new(),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(&self.workspace)
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("CARGO_INCREMENTAL", "1")
            .env("CARGO_TERM_COLOR", "never")
            .env_remove("CARGO_BUILD_TARGET_DIR");
        if self.cap_lints {
            cap_lints(&mut cmd);
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
        let mut args: Vec<String> = Vec::new();
        for c in &self.config {
            args.extend(["--config".to_string(), c.clone()]);
        }
        args.extend([
            "test".into(),
            "--no-run".into(),
            "--message-format=json-render-diagnostics".into(),
            "-p".into(),
            package.into(),
        ]);
        for c in companions(&self.members, package, targets) {
            args.extend(["-p".to_string(), c.to_string()]);
        }
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

    /// Builds the binary `bin` of `package` (`cargo build`, with the
    /// `--config` values of this cargo); the path of the executable cargo
    /// reported, or the failed build. The executable is where cargo puts a
    /// binary (the target directory's profile folder), so a caller that must
    /// keep it across builds copies it first.
    pub fn build_bin(
        &self,
        package: &str,
        bin: &str,
        limit: Option<Duration>,
        cancel: &Cancel,
    ) -> Result<std::result::Result<PathBuf, Build>> {
        let mut cmd = self.command();
        let mut args: Vec<String> = Vec::new();
        for c in &self.config {
            args.extend(["--config".to_string(), c.clone()]);
        }
        args.extend([
            "build".into(),
            "--message-format=json-render-diagnostics".into(),
            "-p".into(),
            package.into(),
            "--bin".into(),
            bin.into(),
        ]);
        cmd.args(&args);
        let shown = format!("cargo {}", args.join(" "));
        let f = process::run(cmd, limit, cancel)?;
        if f.exit != Exit::Success {
            return Ok(Err(Build::Failed {
                command: shown,
                tail: process::tail(&f.stderr, 60),
                elapsed: f.elapsed,
                timed_out: f.exit == Exit::TimedOut,
            }));
        }
        let exe = f.stdout.lines().find_map(|line| {
            let msg = serde_json::from_str::<serde_json::Value>(line).ok()?;
            let is_bin = msg["reason"] == "compiler-artifact"
                && msg["target"]["name"] == bin
                && msg["target"]["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "bin"));
            is_bin.then(|| msg["executable"].as_str().map(PathBuf::from))?
        });
        exe.map(Ok)
            .ok_or_else(|| Error::Cargo(format!("`{shown}` reported no executable for {bin}")))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set_by(cmd: &Command, var: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == var)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn only_rewrite_mode_caps_lints_so_schemata_keeps_the_callers_rustflags() {
        let mut c = Cargo::new(Path::new("/ws"), Path::new("/t"), "SWITCH");
        let flags = ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"];
        let capped = c.command();
        assert!(
            flags
                .iter()
                .filter_map(|f| set_by(&capped, f))
                .any(|v| v.ends_with("--cap-lints=warn")),
            "rewrite mode caps lints"
        );
        c.cap_lints = false;
        let schemata = c.command();
        assert_eq!(flags.map(|f| set_by(&schemata, f)), [None, None]);
        assert_eq!(set_by(&schemata, "CARGO_TARGET_DIR").as_deref(), Some("/t"));
    }

    const METADATA: &str = r#"{"packages":[
        {"name":"gate","targets":[{"kind":["lib"],"name":"gate"},{"kind":["custom-build"],"name":"build-script-build"},{"kind":["test"],"name":"integration"}]},
        {"name":"drop-guards","targets":[{"kind":["lib"],"name":"drop_guards"}]},
        {"name":"harness","targets":[{"kind":["bin"],"name":"harness"},{"kind":["test"],"name":"db_cli"}]},
        {"name":"wire","targets":[{"kind":["lib"],"name":"wire"},{"kind":["test"],"name":"http"}]}
    ],"workspace_members":[]}"#;

    #[test]
    fn a_build_selects_the_members_it_builds_nothing_of_for_feature_unification() {
        let members = members_of(METADATA).unwrap();
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["gate", "drop-guards", "harness", "wire"]);
        assert_eq!(
            members[0].targets,
            [TestTarget::Lib, TestTarget::Test("integration".into())].into()
        );
        let lib_and_integration: BTreeSet<TestTarget> =
            [TestTarget::Lib, TestTarget::Test("integration".into())].into();
        assert_eq!(
            companions(&members, "gate", &lib_and_integration),
            ["harness"]
        );
        let integration: BTreeSet<TestTarget> = [TestTarget::Test("integration".into())].into();
        assert_eq!(
            companions(&members, "gate", &integration),
            ["drop-guards", "harness", "wire"]
        );
        let http: BTreeSet<TestTarget> = [TestTarget::Test("http".into())].into();
        assert_eq!(
            companions(&members, "gate", &http),
            ["drop-guards", "harness"]
        );
    }

    #[test]
    fn every_member_gets_the_distinct_profile_key() {
        let members = members_of(METADATA).unwrap();
        assert_eq!(
            distinct_profile(&members),
            [
                r#"profile.dev.package."gate".codegen-units=256"#,
                r#"profile.dev.package."drop-guards".codegen-units=256"#,
                r#"profile.dev.package."harness".codegen-units=256"#,
                r#"profile.dev.package."wire".codegen-units=256"#,
            ]
        );
        assert!(members_of(r#"{"packages":[]}"#).is_err());
        assert!(members_of("not json").is_err());
    }
}
