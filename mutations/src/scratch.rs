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

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// Top-level entries never copied into the scratch workspace.
pub const ALWAYS_EXCLUDED: &[&str] = &["target", ".git", "mutations.out"];

/// A scratch copy of the workspace.
#[derive(Debug)]
pub struct Scratch {
    dir: TempDir,
    workspace: PathBuf,
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
        let scratch = Scratch { dir, workspace };
        fs::create_dir(&scratch.workspace).map_err(|e| Error::io(&scratch.workspace, e))?;
        copy_dir(from, &scratch.workspace, Some(exclude), cancel)?;
        let logs = scratch.logs();
        fs::create_dir(&logs).map_err(|e| Error::io(&logs, e))?;
        Ok(scratch)
    }

    /// The copied workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// A directory beside the workspace for the runner's own files.
    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// The temporary directory holding everything.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `rel` inside the copy.
    pub fn write(&self, rel: &Path, text: &str) -> Result<()> {
        let p = self.workspace.join(rel);
        fs::write(&p, text).map_err(|e| Error::io(&p, e))
    }
}

/// Whether a top-level entry is excluded.
pub fn excluded(name: &str, exclude: &[String]) -> bool {
    ALWAYS_EXCLUDED.contains(&name) || exclude.iter().any(|e| e.trim_matches('/') == name)
}

fn copy_dir(from: &Path, to: &Path, top_exclude: Option<&[String]>, cancel: &Cancel) -> Result<()> {
    cancel.check()?;
    let mut entries: Vec<_> = fs::read_dir(from)
        .map_err(|e| Error::io(from, e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::io(from, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let src = entry.path();
        if let Some(ex) = top_exclude
            && excluded(&name.to_string_lossy(), ex)
        {
            continue;
        }
        let dst = to.join(&name);
        let ft = entry.file_type().map_err(|e| Error::io(&src, e))?;
        if ft.is_symlink() {
            let link = fs::read_link(&src).map_err(|e| Error::io(&src, e))?;
            std::os::unix::fs::symlink(&link, &dst).map_err(|e| Error::io(&dst, e))?;
        } else if ft.is_dir() {
            if src.join("CACHEDIR.TAG").exists() {
                continue;
            }
            fs::create_dir(&dst).map_err(|e| Error::io(&dst, e))?;
            copy_dir(&src, &dst, None, cancel)?;
        } else if ft.is_file() {
            fs::copy(&src, &dst).map_err(|e| Error::io(&src, e))?;
        }
    }
    Ok(())
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
}
