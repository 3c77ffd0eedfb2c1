//! What the harness's integration tests share: the workspace's root (the one
//! lookup they all use), whether to skip (no Postgres binaries here, and the
//! caller said so), and a working folder a cluster running as `postgres` can
//! traverse.
//!
//! Each test file includes this module and uses what it needs.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root: the folder above the harness crate.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("the harness crate has no parent folder"))
}

/// True when the test should be skipped: no Postgres binaries and
/// `SPENDGATE_SKIP_DB=1`. Without the binaries and without that, it panics
/// saying how to install them: a silent skip would pass for a pass.
pub fn skip() -> bool {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("initdb").is_file()));
    let installed = fs::read_dir("/usr/lib/postgresql")
        .is_ok_and(|mut e| e.any(|v| v.is_ok_and(|v| v.path().join("bin/initdb").is_file())));
    if on_path || installed {
        return false;
    }
    if std::env::var("SPENDGATE_SKIP_DB").as_deref() == Ok("1") {
        eprintln!("skipped: no Postgres binaries and SPENDGATE_SKIP_DB=1");
        return true;
    }
    panic!(
        "these tests need Postgres binaries (initdb, pg_ctl, postgres): `apt-get install \
         postgresql` installs them, or set SPENDGATE_SKIP_DB=1 to skip"
    );
}

/// A working folder every account can traverse (a root-run cluster runs as `postgres`).
pub fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// `harness bench --engines database` over `corpus` (`extra` arguments
/// after), on a throwaway cluster of its own, writing to `out`: every
/// scenario's result from results.json. Panics with both outputs when the
/// bench does not complete.
pub fn bench_database(corpus: &Path, out: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let exe = env!("CARGO_BIN_EXE_harness");
    let output = Command::new(exe)
        .env_remove("DATABASE_URL")
        .env_remove("MIGRATION_DATABASE_URL")
        .args(["db", "run", "--", exe, "bench", "--engines", "database"])
        .arg("--corpus")
        .arg(corpus)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        output.status.success(),
        "bench did not complete: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = fs::read_to_string(out.join("results.json")).unwrap_or_else(|e| panic!("{e}"));
    let mut file: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    match file["results"].take() {
        serde_json::Value::Array(results) => results,
        other => panic!("results.json has no results array: {other}"),
    }
}
