//! The scratch copy of the workspace that mutants are built and tested in.
//!
//! Guarantees: the copy lives in a fresh temporary directory
//! (`$TMPDIR/spendgate-mutants-XXXX/ws`, or under a parent the caller picks)
//! and is removed when the [`Scratch`] is dropped: at the end of a run, on an
//! error, on a panic that unwinds, and after an interrupt (the runner turns a
//! signal into [`crate::Error::Interrupted`], which unwinds through the drop).
//! Only SIGKILL can leave it behind, and then only in the temporary directory.
//! The user's tree is only read. Not copied: the top-level names in the
//! exclude list (always `target`, `.git`, `mutations.out`) and any directory
//! holding a `CACHEDIR.TAG` (a cargo target directory anywhere in the tree).
//!
//! The build cache is *not* in the scratch copy: the runner points
//! `CARGO_TARGET_DIR` at a persistent directory (by default
//! `<workspace>/target/mutants-scratch/rewrite` in rewrite mode, and
//! `<workspace>/target` itself in schemata mode, whose dependencies the
//! workspace's own `cargo test` has usually built already), so dependencies
//! are compiled once and later runs only rebuild the workspace's own crates.
//!
//! Schemata mode goes one step further with [`Scratch::kept`]: its copy is
//! kept between runs at a fixed directory and brought up to date file by
//! file, each file written only when its bytes differ (the instrumented
//! files are written with their instrumented text directly). A file that did
//! not change keeps its modification time, so cargo rebuilds only the crates
//! whose sources did change, and a run over an unchanged tree builds
//! nothing. Files and directories the source no longer has are removed. One
//! run at a time holds the kept copy (an advisory lock on `<dir>/lock`);
//! another run waits for it (and can be interrupted while it waits), so no
//! other copy ever builds into the same artifacts between two runs of the
//! kept one, which would leave cargo trusting files it did not build. The kept copy
//! is not removed at the end of a run: it lives in the build cache's
//! directory and goes with it (`cargo clean`). Because cargo trusts a
//! file older than its last build, a kept copy survives a clock stepped
//! back: the end of each run is stamped (`<dir>/last-run`), and a file
//! written while the clock reads earlier than that stamp is dated just after
//! it, so cargo still sees it as changed.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tempfile::TempDir;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// Top-level entries never copied into the scratch workspace.
pub const ALWAYS_EXCLUDED: &[&str] = &["target", ".git", "mutations.out"];

/// A scratch copy of the workspace.
#[derive(Debug)]
pub struct Scratch {
    home: Home,
    workspace: PathBuf,
}

/// Where a copy lives, and what happens to it at the end.
#[derive(Debug)]
enum Home {
    /// A fresh temporary directory, removed on drop.
    Temporary(TempDir),
    /// A fixed directory kept between runs; the lock is released on drop,
    /// after the end of the run is stamped. `not_before`: the last run's
    /// stamp, the earliest time a file written now may carry.
    Kept {
        dir: PathBuf,
        not_before: Option<SystemTime>,
        _lock: fs::File,
    },
}

impl Scratch {
    /// Copies `from` into a new temporary directory.
    pub fn copy(
        from: &Path,
        exclude: &[String],
        parent: Option<&Path>,
        cancel: &Cancel,
    ) -> Result<Scratch> {
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("spendgate-mutants-");
            b
        };
        let dir = match parent {
            Some(p) => {
                fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
                builder.tempdir_in(p)
            }
            None => builder.tempdir(),
        }
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let workspace = dir.path().join("ws");
        let scratch = Scratch {
            home: Home::Temporary(dir),
            workspace,
        };
        fs::create_dir(&scratch.workspace).map_err(|e| Error::io(&scratch.workspace, e))?;
        let none = BTreeMap::new();
        let mirror = Mirror {
            exclude,
            overlay: &none,
            cancel,
            not_before: None,
        };
        mirror.dir(from, &scratch.workspace, Path::new(""))?;
        let logs = scratch.logs();
        fs::create_dir(&logs).map_err(|e| Error::io(&logs, e))?;
        Ok(scratch)
    }

    /// The copy kept at `dir` between runs, brought up to date with `from`
    /// (the files in `overlay`, relative to the workspace root, get the text
    /// given instead of their own). When another run holds it, `waiting` is
    /// called once and this waits for it, polling `cancel`.
    pub fn kept(
        from: &Path,
        exclude: &[String],
        dir: &Path,
        overlay: &BTreeMap<PathBuf, String>,
        cancel: &Cancel,
        waiting: &mut dyn FnMut(),
    ) -> Result<Scratch> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock_path = dir.join("lock");
        let lock = fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        let mut told = false;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) => {
                    if !told {
                        waiting();
                        told = true;
                    }
                    cancel.check()?;
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                Err(fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
            }
        }
        let workspace = dir.join("ws");
        let not_before = fs::metadata(dir.join(LAST_RUN))
            .and_then(|m| m.modified())
            .ok();
        let scratch = Scratch {
            home: Home::Kept {
                dir: dir.to_path_buf(),
                not_before,
                _lock: lock,
            },
            workspace,
        };
        ensure_dir(&scratch.workspace)?;
        let mirror = Mirror {
            exclude,
            overlay,
            cancel,
            not_before,
        };
        mirror.dir(from, &scratch.workspace, Path::new(""))?;
        let logs = scratch.logs();
        if logs.exists() {
            fs::remove_dir_all(&logs).map_err(|e| Error::io(&logs, e))?;
        }
        fs::create_dir(&logs).map_err(|e| Error::io(&logs, e))?;
        Ok(scratch)
    }

    /// The copied workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// A directory beside the workspace for the runner's own files.
    pub fn logs(&self) -> PathBuf {
        self.path().join("logs")
    }

    /// The temporary directory holding everything.
    pub fn path(&self) -> &Path {
        match &self.home {
            Home::Temporary(dir) => dir.path(),
            Home::Kept { dir, .. } => dir,
        }
    }

    /// The earliest time a file written into the copy may carry.
    fn not_before(&self) -> Option<SystemTime> {
        match &self.home {
            Home::Temporary(_) => None,
            Home::Kept { not_before, .. } => *not_before,
        }
    }

    /// Writes `text` to `rel` inside the copy, unless it holds exactly that
    /// already (so that its modification time moves only when it changes).
    pub fn write(&self, rel: &Path, text: &str) -> Result<()> {
        let p = self.workspace.join(rel);
        if fs::read(&p).is_ok_and(|held| held == text.as_bytes()) {
            return Ok(());
        }
        fs::write(&p, text).map_err(|e| Error::io(&p, e))?;
        date_after(&p, self.not_before())
    }
}

impl Drop for Scratch {
    /// Stamps the end of a kept copy's run (best effort: without a stamp the
    /// next run dates its writes by the clock alone).
    fn drop(&mut self) {
        if let Home::Kept { dir, .. } = &self.home {
            let _ = fs::File::create(dir.join(LAST_RUN))
                .and_then(|stamp| stamp.set_modified(SystemTime::now()));
        }
    }
}

/// The file whose modification time is the end of a kept copy's last run.
const LAST_RUN: &str = "last-run";

/// Dates the file just written at `p` after `not_before` when the clock
/// reads earlier than that (it was stepped back since the stamp).
fn date_after(p: &Path, not_before: Option<SystemTime>) -> Result<()> {
    let Some(stamp) = not_before else {
        return Ok(());
    };
    if SystemTime::now() > stamp {
        return Ok(());
    }
    let later = stamp + std::time::Duration::from_secs(1);
    fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(later))
        .map_err(|e| Error::io(p, e))
}

/// Whether a top-level entry is excluded.
pub fn excluded(name: &str, exclude: &[String]) -> bool {
    ALWAYS_EXCLUDED.contains(&name) || exclude.iter().any(|e| e.trim_matches('/') == name)
}

/// Makes a copy hold what its source holds, one directory at a time: an
/// empty directory (a temporary copy) or a kept copy from an earlier run,
/// where only what differs is written.
struct Mirror<'a> {
    exclude: &'a [String],
    overlay: &'a BTreeMap<PathBuf, String>,
    cancel: &'a Cancel,
    /// Written files are dated after this (see [`date_after`]).
    not_before: Option<SystemTime>,
}

impl Mirror<'_> {
    /// Makes `to` hold what `from` holds (`rel`: `from` relative to the
    /// workspace root; the top level's excluded names are left out), writing
    /// only what differs, and removes what `from` does not hold.
    fn dir(&self, from: &Path, to: &Path, rel: &Path) -> Result<()> {
        self.cancel.check()?;
        let mut wanted = BTreeSet::new();
        for entry in fs::read_dir(from).map_err(|e| Error::io(from, e))? {
            let entry = entry.map_err(|e| Error::io(from, e))?;
            let name = entry.file_name();
            let src = entry.path();
            if rel.as_os_str().is_empty() && excluded(&name.to_string_lossy(), self.exclude) {
                continue;
            }
            let dst = to.join(&name);
            let ft = entry.file_type().map_err(|e| Error::io(&src, e))?;
            if ft.is_symlink() {
                let link = fs::read_link(&src).map_err(|e| Error::io(&src, e))?;
                if fs::read_link(&dst).ok().as_ref() != Some(&link) {
                    remove_any(&dst)?;
                    std::os::unix::fs::symlink(&link, &dst).map_err(|e| Error::io(&dst, e))?;
                }
            } else if ft.is_dir() {
                if src.join("CACHEDIR.TAG").exists() {
                    continue;
                }
                ensure_dir(&dst)?;
                self.dir(&src, &dst, &rel.join(&name))?;
            } else if ft.is_file() {
                self.file(&src, &dst, &rel.join(&name))?;
            } else {
                continue;
            }
            wanted.insert(name);
        }
        for entry in fs::read_dir(to).map_err(|e| Error::io(to, e))? {
            let entry = entry.map_err(|e| Error::io(to, e))?;
            if !wanted.contains(&entry.file_name()) {
                remove_any(&entry.path())?;
            }
        }
        Ok(())
    }

    /// Writes `dst` unless it already holds the bytes wanted (the overlay's
    /// text, or `src`'s bytes with `src`'s permissions).
    fn file(&self, src: &Path, dst: &Path, rel: &Path) -> Result<()> {
        let overlay = self.overlay.get(rel);
        if holds(src, dst, overlay)? {
            return Ok(());
        }
        remove_any(dst)?;
        match overlay {
            Some(text) => fs::write(dst, text).map_err(|e| Error::io(dst, e)),
            None => fs::copy(src, dst).map(drop).map_err(|e| Error::io(src, e)),
        }?;
        date_after(dst, self.not_before)
    }
}

/// Whether `dst` is a plain file holding what [`Mirror::file`] would write.
fn holds(src: &Path, dst: &Path, overlay: Option<&String>) -> Result<bool> {
    let Ok(held) = fs::symlink_metadata(dst) else {
        return Ok(false);
    };
    if !held.is_file() {
        return Ok(false);
    }
    let want = match overlay {
        Some(text) => Cow::Borrowed(text.as_bytes()),
        None => {
            let source = fs::metadata(src).map_err(|e| Error::io(src, e))?;
            if source.len() != held.len() || source.permissions() != held.permissions() {
                return Ok(false);
            }
            Cow::Owned(fs::read(src).map_err(|e| Error::io(src, e))?)
        }
    };
    Ok(fs::read(dst).is_ok_and(|bytes| bytes == want.as_ref()))
}

/// `p` is a directory (not a link to one), made if missing.
fn ensure_dir(p: &Path) -> Result<()> {
    if p.is_dir() && !p.is_symlink() {
        return Ok(());
    }
    remove_any(p)?;
    fs::create_dir_all(p).map_err(|e| Error::io(p, e))
}

/// Removes whatever is at `p` (nothing there is fine).
fn remove_any(p: &Path) -> Result<()> {
    let Ok(meta) = fs::symlink_metadata(p) else {
        return Ok(());
    };
    if meta.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
    .map_err(|e| Error::io(p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_all_but_excluded_and_is_removed_on_drop() {
        let src = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir_all(s.join("gate/src")).unwrap();
        fs::write(s.join("gate/src/lib.rs"), "fn x() {}").unwrap();
        fs::create_dir_all(s.join("target/debug")).unwrap();
        fs::write(s.join("target/debug/big"), "x").unwrap();
        fs::create_dir_all(s.join(".git")).unwrap();
        fs::create_dir_all(s.join(".spendgate")).unwrap();
        fs::create_dir_all(s.join("gate/tests/fx/target")).unwrap();
        fs::write(s.join("gate/tests/fx/target/CACHEDIR.TAG"), "").unwrap();
        std::os::unix::fs::symlink("gate", s.join("link")).unwrap();
        let scratch = Scratch::copy(s, &[".spendgate".into()], None, &Cancel::new()).unwrap();
        let w = scratch.workspace().to_path_buf();
        assert_eq!(
            fs::read_to_string(w.join("gate/src/lib.rs")).unwrap(),
            "fn x() {}"
        );
        assert!(!w.join("target").exists());
        assert!(!w.join(".git").exists());
        assert!(!w.join(".spendgate").exists());
        assert!(!w.join("gate/tests/fx/target").exists());
        assert!(w.join("gate/tests/fx").exists());
        assert_eq!(
            fs::read_link(w.join("link")).unwrap(),
            PathBuf::from("gate")
        );
        let top = scratch.path().to_path_buf();
        drop(scratch);
        assert!(!top.exists());
    }

    #[test]
    fn a_cancelled_copy_leaves_nothing() {
        let src = tempfile::tempdir().unwrap();
        let parent = tempfile::tempdir().unwrap();
        let cancel = Cancel::new();
        cancel.cancel();
        let r = Scratch::copy(src.path(), &[], Some(parent.path()), &cancel);
        assert!(matches!(r, Err(Error::Interrupted)));
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    fn modified(p: &Path) -> std::time::SystemTime {
        fs::metadata(p).unwrap().modified().unwrap()
    }

    #[test]
    fn a_kept_copy_rewrites_only_what_changed_and_removes_what_went() {
        let src = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir_all(s.join("gate/src")).unwrap();
        fs::write(s.join("gate/src/lib.rs"), "fn x() {}").unwrap();
        fs::write(s.join("gate/src/guard.rs"), "fn guard() {}").unwrap();
        fs::write(s.join("gate/src/gone.rs"), "fn gone() {}").unwrap();
        fs::create_dir_all(s.join("target/debug")).unwrap();
        fs::create_dir_all(s.join("old")).unwrap();
        fs::write(s.join("run.sh"), "#!/bin/sh\n").unwrap();
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("kept");
        let overlay = BTreeMap::from([(
            PathBuf::from("gate/src/guard.rs"),
            "fn guard() { /* switch */ }".to_owned(),
        )]);
        let cancel = Cancel::new();
        let mut waited = 0;
        let first = Scratch::kept(s, &[], &dir, &overlay, &cancel, &mut || waited += 1).unwrap();
        let w = first.workspace().to_path_buf();
        assert_eq!(
            fs::read_to_string(w.join("gate/src/guard.rs")).unwrap(),
            "fn guard() { /* switch */ }"
        );
        assert!(!w.join("target").exists());
        assert!(w.join("old").is_dir());
        // A second run while the first holds the copy waits for it (here
        // until it is interrupted).
        let interrupted = Cancel::new();
        interrupted.cancel();
        let second = Scratch::kept(s, &[], &dir, &overlay, &interrupted, &mut || waited += 1);
        assert!(matches!(second, Err(Error::Interrupted)), "{second:?}");
        assert_eq!(waited, 1, "a run that waits says so once");
        let (lib, guard) = (
            modified(&w.join("gate/src/lib.rs")),
            modified(&w.join("gate/src/guard.rs")),
        );
        let ended = std::time::SystemTime::now();
        drop(first);
        assert!(w.exists(), "a kept copy outlives its run");
        assert!(
            modified(&dir.join(LAST_RUN)) >= ended,
            "the end of the run is stamped"
        );

        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(s.join("gate/src/lib.rs"), "fn y() {}").unwrap();
        fs::remove_file(s.join("gate/src/gone.rs")).unwrap();
        fs::remove_dir(s.join("old")).unwrap();
        fs::write(w.join("stray.txt"), "left by a test").unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        fs::set_permissions(s.join("run.sh"), executable).unwrap();
        let second = Scratch::kept(s, &[], &dir, &overlay, &cancel, &mut || waited += 1).unwrap();
        assert_eq!(waited, 1, "a free copy is taken without waiting");
        assert_eq!(second.workspace(), w);
        assert_eq!(
            fs::read_to_string(w.join("gate/src/lib.rs")).unwrap(),
            "fn y() {}"
        );
        assert!(modified(&w.join("gate/src/lib.rs")) > lib);
        assert_eq!(
            modified(&w.join("gate/src/guard.rs")),
            guard,
            "an unchanged file keeps its time, so cargo does not rebuild it"
        );
        assert!(!w.join("gate/src/gone.rs").exists());
        assert!(!w.join("old").exists());
        assert!(!w.join("stray.txt").exists());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &fs::metadata(w.join("run.sh")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o755, "same bytes, new permissions: copied");
        // Writing the text a file already holds leaves it alone.
        second
            .write(
                Path::new("gate/src/guard.rs"),
                "fn guard() { /* switch */ }",
            )
            .unwrap();
        assert_eq!(modified(&w.join("gate/src/guard.rs")), guard);
        second
            .write(Path::new("gate/src/guard.rs"), "fn guard() {}")
            .unwrap();
        assert_eq!(
            fs::read_to_string(w.join("gate/src/guard.rs")).unwrap(),
            "fn guard() {}"
        );
        drop(second);

        // The clock is stepped back: the last run seems to end a day from
        // now. A file changed now is dated after it, or cargo would trust
        // the artifacts built from its old text; an unchanged one is not.
        let day = std::time::Duration::from_secs(86_400);
        let future = std::time::SystemTime::now() + day;
        fs::File::options()
            .write(true)
            .open(dir.join(LAST_RUN))
            .unwrap()
            .set_modified(future)
            .unwrap();
        let untouched = modified(&w.join("run.sh"));
        fs::write(s.join("gate/src/lib.rs"), "fn z() {}").unwrap();
        let third = Scratch::kept(s, &[], &dir, &overlay, &cancel, &mut || waited += 1).unwrap();
        assert!(modified(&w.join("gate/src/lib.rs")) > future);
        assert_eq!(modified(&w.join("run.sh")), untouched);
        third
            .write(Path::new("gate/src/guard.rs"), "fn guard() { 1 }")
            .unwrap();
        assert!(modified(&w.join("gate/src/guard.rs")) > future);
    }
}
