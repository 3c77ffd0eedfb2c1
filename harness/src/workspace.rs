//! Where the workspace is: the one lookup every subcommand that reads or
//! writes the repository's files uses.
//!
//! Guarantees: [`root`] is the nearest ancestor of the working directory
//! whose `Cargo.toml` declares a workspace and which holds
//! `mutations/registry.yaml` (so a nested workspace, such as a scratch copy's
//! `fuzz/`, is never mistaken for it), or an error saying how to get there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The spendgate workspace above the working directory.
pub fn root() -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("reading the working directory")?;
    root_above(&cwd)
}

/// The spendgate workspace at or above `dir`.
pub fn root_above(dir: &Path) -> Result<PathBuf> {
    dir.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
                && d.join("mutations/registry.yaml").exists()
        })
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "no spendgate workspace (a Cargo.toml with [workspace] beside mutations/registry.yaml) at or above {}; run from inside the repository or pass --root",
                dir.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_workspace_from_a_nested_folder_and_refuses_outside_it() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = root_above(&here.join("src")).unwrap();
        assert_eq!(root, here.parent().unwrap());
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        let err = root_above(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("no spendgate workspace"), "{err}");
    }
}
