//! What a mutation run is asked to do: which workspace and registry, which
//! mode, which mutants, how many at once, where results and the build cache
//! go, and the time limits.
//!
//! Guarantees: [`RunOptions::new`] gives the documented defaults (schemata
//! mode, one job, `<root>/mutations/registry.yaml`, `<root>/mutations.out`,
//! `<target>/mutants-scratch` for rewrite mode and `<target>` itself for
//! schemata mode, a test time limit of max(20 s, 5 × the
//! baseline time of the same tests)); a [`Shard`] `K/N` always has `K < N`.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How mutants are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Build once with every guard behind a runtime switch; each mutant is an
    /// environment variable on the test process.
    #[default]
    Schemata,
    /// Edit the file, rebuild, test, restore: one build per mutant.
    Rewrite,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Schemata => "schemata",
            Mode::Rewrite => "rewrite",
        })
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "schemata" => Ok(Mode::Schemata),
            "rewrite" => Ok(Mode::Rewrite),
            _ => Err(format!("mode `{s}` is not `schemata` or `rewrite`")),
        }
    }
}

/// Shard `index` of `count`: the mutants whose position in the registry
/// (after `--only`) is `index` modulo `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether the mutant at `position` belongs to this shard.
    pub fn selects(&self, position: usize) -> bool {
        position % self.count == self.index
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("shard `{s}` is not K/N with 0 <= K < N");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Everything a run needs to know.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The workspace root (holds `Cargo.toml`). Only read.
    pub root: PathBuf,
    /// The registry file.
    pub registry: PathBuf,
    pub mode: Mode,
    /// Run only these guard ids (empty: all).
    pub only: Vec<String>,
    pub shard: Option<Shard>,
    /// Mutants judged at once. Schemata mode shares one build; rewrite mode
    /// gives each job its own scratch copy and target directory.
    pub jobs: usize,
    /// Where `outcomes.json` is written.
    pub out_dir: PathBuf,
    /// The persistent build cache; rewrite mode (each job) and, when
    /// `schemata_target` is `None`, schemata mode use a subdirectory of it.
    pub target_dir: PathBuf,
    /// Where schemata mode builds: by default the workspace's own target
    /// directory, so the dependencies that `cargo test` built there are
    /// reused and only the workspace's crates are compiled, under a profile
    /// key of their own ([`crate::cargo::distinct_profile`]) that leaves the
    /// caller's artifacts alone. `None`: `target_dir/schemata`.
    pub schemata_target: Option<PathBuf>,
    /// Where the scratch temporary directory is made (default: `$TMPDIR`).
    pub scratch_parent: Option<PathBuf>,
    /// The lower bound of a test run's time limit.
    pub timeout_floor: Duration,
    /// The time limit is this many times the baseline time of the same tests.
    pub timeout_multiplier: f64,
    /// A limit on each build (none by default).
    pub build_timeout: Option<Duration>,
    /// The cargo to run.
    pub cargo: Option<OsString>,
    /// Variables set on every test process (never on builds), after the
    /// runner's own scrubbing: e.g. the `DATABASE_URL` of a cluster the
    /// caller started without putting it in its own environment.
    pub test_env: Vec<(OsString, OsString)>,
}

impl RunOptions {
    /// The defaults for the workspace at `root`.
    pub fn new(root: &Path) -> RunOptions {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        RunOptions {
            root: root.to_path_buf(),
            registry: root.join("mutations").join("registry.yaml"),
            mode: Mode::Schemata,
            only: Vec::new(),
            shard: None,
            jobs: 1,
            out_dir: root.join("mutations.out"),
            target_dir: target.join("mutants-scratch"),
            schemata_target: Some(target.clone()),
            scratch_parent: None,
            timeout_floor: Duration::from_secs(20),
            timeout_multiplier: 5.0,
            build_timeout: None,
            cargo: None,
            test_env: Vec::new(),
        }
    }

    /// The time limit for tests whose baseline took `baseline`.
    pub fn test_limit(&self, baseline: Duration) -> Duration {
        self.timeout_floor
            .max(baseline.mul_f64(self.timeout_multiplier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_partition() {
        let s: Shard = "1/3".parse().unwrap();
        assert_eq!((s.index, s.count), (1, 3));
        assert!(s.selects(1) && s.selects(4) && !s.selects(0));
        for bad in ["3/3", "1/0", "x/2", "1", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_limit_has_a_floor() {
        let o = RunOptions::new(Path::new("/w"));
        assert_eq!(
            o.test_limit(Duration::from_secs(1)),
            Duration::from_secs(20)
        );
        assert_eq!(
            o.test_limit(Duration::from_secs(10)),
            Duration::from_secs(50)
        );
        assert_eq!("rewrite".parse::<Mode>().unwrap(), Mode::Rewrite);
    }
}
