//! cargo-mutants, driven: the pinned install, the mutant list, and one stage
//! of a run.
//!
//! Guarantees: the installed cargo-mutants is the pinned version or it is
//! installed with `cargo install --locked`; a stage that ends in anything but
//! cargo-mutants' result codes (0 all caught, 2 some missed, 3 some timed
//! out) is an error, never an empty result; each stage's outcomes.json is
//! copied out of cargo-mutants' output folder before the next stage renames it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The cargo-mutants this project's audit is pinned to.
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// The nextest profile of `.config/nextest.toml` the focused stage and
/// the whole suite run under.
pub const NEXTEST_PROFILE: &str = "mutants-audit";

/// The unit stage's profile: the same, less the slowest unit tests.
pub const NEXTEST_UNIT_PROFILE: &str = "mutants-audit-unit";

/// Installs the pinned cargo-mutants unless that version is already there.
pub fn ensure_cargo_mutants() -> Result<()> {
    let installed = version_of(&["mutants", "--version"]);
    if installed.as_deref() == Some(&format!("cargo-mutants {CARGO_MUTANTS_VERSION}")) {
        return Ok(());
    }
    eprintln!(
        "installing cargo-mutants {CARGO_MUTANTS_VERSION} (found {installed:?}): cargo install --locked"
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

fn version_of(args: &[&str]) -> Option<String> {
    Command::new("cargo")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

/// The test tool: nextest when it is installed (it stops at the first
/// failing test, which is all a mutant needs), else cargo test.
pub fn test_tool() -> &'static str {
    if version_of(&["nextest", "--version"]).is_some() {
        "nextest"
    } else {
        "cargo"
    }
}

/// Every mutant cargo-mutants finds in `gate-core` and `gate` (its `--list`), by name.
pub fn list_mutants(root: &Path) -> Result<Vec<String>> {
    let out = Command::new("cargo")
        .current_dir(root)
        .args([
            "mutants",
            "--package",
            "gate-core",
            "--package",
            "gate",
            "--list",
            "--colors",
            "never",
        ])
        .output()
        .context("running cargo mutants --list")?;
    if !out.status.success() {
        bail!(
            "cargo mutants --list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// One stage of a run.
pub struct Stage<'a> {
    /// `--file` and `--shard` arguments, as cargo-mutants takes them.
    pub scope: &'a [String],
    pub in_place: bool,
    pub test_tool: &'a str,
    /// Only the library's unit tests (`--lib` for build and test).
    pub lib_only: bool,
    /// Only the tests this nextest filterset selects (`-E`), e.g. `test(/pay/)`.
    pub filter: Option<&'a str>,
    /// Skip what an earlier stage in the same output folder caught or found unviable.
    pub iterate: bool,
    pub output: &'a Path,
    pub extra: &'a [String],
    pub env: Option<(&'a str, &'a str)>,
}

impl Stage<'_> {
    /// Runs the stage; returns a copy of its outcomes.json at `keep`.
    pub fn run(&self, keep: &Path) -> Result<PathBuf> {
        let mut cmd = Command::new("cargo");
        // Both crates' mutants, each tested by both crates' tests: the
        // gate's suite exercises the core through the service.
        cmd.args(["mutants", "--package", "gate-core", "--package", "gate"])
            .args(["--test-package", "gate-core", "--test-package", "gate"])
            .arg("--output")
            .arg(self.output)
            .args(["--no-shuffle", "--colors", "never", "--test-tool"])
            .arg(self.test_tool)
            .args(self.scope);
        if self.in_place {
            cmd.arg("--in-place");
        }
        if self.lib_only {
            cmd.arg("--cargo-arg=--lib");
        }
        if let Some(filter) = self.filter {
            cmd.arg("--cargo-test-arg=-E")
                .arg(format!("--cargo-test-arg={filter}"));
        }
        if self.iterate {
            cmd.arg("--iterate");
        }
        cmd.args(self.extra);
        if let Some((key, value)) = self.env {
            cmd.env(key, value);
        }
        if self.test_tool == "nextest" {
            // .config/nextest.toml: stop at the first failing test and end
            // the ones still running; a caught mutant needs nothing more.
            let profile = if self.lib_only {
                NEXTEST_UNIT_PROFILE
            } else {
                NEXTEST_PROFILE
            };
            cmd.env("NEXTEST_PROFILE", profile);
        }
        eprintln!("running {cmd:?}");
        let status = cmd.status().context("running cargo mutants")?;
        match status.code() {
            Some(0 | 2 | 3) => {}
            other => bail!(
                "cargo mutants ended with {other:?}: no audit result (see {})",
                self.output.display()
            ),
        }
        let outcomes = self.output.join("mutants.out").join("outcomes.json");
        std::fs::copy(&outcomes, keep)
            .with_context(|| format!("copying {} to {}", outcomes.display(), keep.display()))?;
        Ok(keep.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::{NEXTEST_PROFILE, NEXTEST_UNIT_PROFILE};

    fn config() -> toml::Table {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../.config/nextest.toml");
        let text = std::fs::read_to_string(path).expect("the workspace's .config/nextest.toml");
        text.parse().expect("nextest.toml is TOML")
    }

    #[test]
    fn the_audit_profile_is_in_the_nextest_config_and_ends_tests_at_the_first_failure() {
        let config = config();
        let fail_fast = &config["profile"][NEXTEST_PROFILE]["fail-fast"];
        assert_eq!(fail_fast["max-fail"].as_integer(), Some(1), "{fail_fast}");
        assert_eq!(
            fail_fast["terminate"].as_str(),
            Some("immediate"),
            "{fail_fast}"
        );
    }

    #[test]
    fn the_unit_profile_inherits_the_audit_profile_and_leaves_out_only_the_tests_run_last() {
        let config = config();
        let unit = &config["profile"][NEXTEST_UNIT_PROFILE];
        assert_eq!(unit["inherits"].as_str(), Some(NEXTEST_PROFILE));
        let last = config["profile"][NEXTEST_PROFILE]["overrides"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["priority"].as_integer() == Some(-100)))
            .and_then(|o| o["filter"].as_str())
            .expect("an override that runs the slowest tests last");
        assert_eq!(
            unit["default-filter"].as_str(),
            Some(format!("not ({last})").as_str()),
            "the unit stage leaves out exactly the tests the audit profile runs last"
        );
    }
}
