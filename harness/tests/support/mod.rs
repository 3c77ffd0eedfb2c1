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
