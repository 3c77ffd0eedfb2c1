//! A fingerprint of the user's tree, taken before and after a run, to prove
//! the runner did not write it.
//!
//! Guarantees: [`TreeSnapshot::take`] hashes the content of every file (and
//! the target of every symlink) under the root except the excluded top-level
//! entries and cargo target directories, and records
//! `git status --porcelain` for the root when it is inside a git work tree.
//! [`TreeSnapshot::changes_since`] names every path that was added, removed
//! or changed, and says so when git's view changed.

use std::collections::BTreeMap;
use std::fs;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};
use crate::scratch::excluded;

/// Path → (length, content hash), plus git's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSnapshot {
    files: BTreeMap<PathBuf, (u64, u64)>,
    git: Option<String>,
}

impl TreeSnapshot {
    /// Fingerprints `root`.
    pub fn take(root: &Path, exclude: &[String]) -> Result<TreeSnapshot> {
        let mut files = BTreeMap::new();
        walk(root, root, Some(exclude), &mut files)?;
        Ok(TreeSnapshot {
            files,
            git: git_status(root),
        })
    }

    /// What differs in `later`, as readable strings.
    pub fn changes_since(&self, later: &TreeSnapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (p, v) in &self.files {
            match later.files.get(p) {
                None => out.push(format!("{} removed", p.display())),
                Some(w) if w != v => out.push(format!("{} modified", p.display())),
                _ => {}
            }
        }
        for p in later.files.keys() {
            if !self.files.contains_key(p) {
                out.push(format!("{} added", p.display()));
            }
        }
        if self.git != later.git {
            let (was, now) = (
                self.git.as_deref().unwrap_or(""),
                later.git.as_deref().unwrap_or(""),
            );
            let gone: Vec<&str> = was
                .lines()
                .filter(|l| !now.lines().any(|m| m == *l))
                .collect();
            let new: Vec<&str> = now
                .lines()
                .filter(|l| !was.lines().any(|m| m == *l))
                .collect();
            out.push(format!(
                "`git status --porcelain` changed (no longer: {gone:?}; now: {new:?})"
            ));
        }
        out
    }

    /// [`TreeSnapshot::changes_since`], at most `max` of them, then a count.
    pub fn changes_summary(&self, later: &TreeSnapshot, max: usize) -> Vec<String> {
        let mut all = self.changes_since(later);
        if all.len() > max {
            let more = all.len() - max;
            all.truncate(max);
            all.push(format!("and {more} more"));
        }
        all
    }

    /// How many files were fingerprinted.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file was fingerprinted.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

fn walk(
    root: &Path,
    dir: &Path,
    top: Option<&[String]>,
    out: &mut BTreeMap<PathBuf, (u64, u64)>,
) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        if let Some(ex) = top
            && excluded(&entry.file_name().to_string_lossy(), ex)
        {
            continue;
        }
        let ft = entry.file_type().map_err(|e| Error::io(&path, e))?;
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        if ft.is_symlink() {
            let target = fs::read_link(&path).map_err(|e| Error::io(&path, e))?;
            let bytes = target.to_string_lossy().into_owned().into_bytes();
            out.insert(rel, (bytes.len() as u64, hash(&bytes)));
        } else if ft.is_dir() {
            if !path.join("CACHEDIR.TAG").exists() {
                walk(root, &path, None, out)?;
            }
        } else if ft.is_file() {
            let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
            out.insert(rel, (bytes.len() as u64, hash(&bytes)));
        }
    }
    Ok(())
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

fn git_status(root: &Path) -> Option<String> {
    let out = Command::new("git")
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--",
            ".",
        ])
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_named_and_exclusions_ignored() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        fs::create_dir_all(r.join("src")).unwrap();
        fs::write(r.join("src/a.rs"), "a").unwrap();
        fs::write(r.join("src/b.rs"), "b").unwrap();
        let before = TreeSnapshot::take(r, &[]).unwrap();
        assert_eq!(before.len(), 2);
        fs::create_dir_all(r.join("target")).unwrap();
        fs::write(r.join("target/x"), "x").unwrap();
        fs::create_dir_all(r.join("mutations.out")).unwrap();
        fs::write(r.join("mutations.out/outcomes.json"), "{}").unwrap();
        assert!(
            before
                .changes_since(&TreeSnapshot::take(r, &[]).unwrap())
                .is_empty()
        );
        fs::write(r.join("src/a.rs"), "A").unwrap();
        fs::remove_file(r.join("src/b.rs")).unwrap();
        fs::write(r.join("src/c.rs"), "c").unwrap();
        let changes = before.changes_since(&TreeSnapshot::take(r, &[]).unwrap());
        assert_eq!(
            changes,
            ["src/a.rs modified", "src/b.rs removed", "src/c.rs added"]
        );
    }
}
