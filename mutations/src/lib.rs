//! spendgate's mutation runner: the registry of guards (`registry.yaml`),
//! the syn locator that finds exactly one statement or condition per guard,
//! the rewrite and schemata modes, and the runner that requires a named test
//! to fail when a guard is deleted.
//!
//! Guarantees so far: [`is_copied`] decides which files of the user's tree a
//! scratch copy takes: the runner never copies build output, version
//! control or its own results, so a mutant cannot see or touch them.
#![forbid(unsafe_code)]

use std::path::{Component, Path};

/// Top-level folders a scratch copy leaves out.
pub const NOT_COPIED: &[&str] = &["target", ".git", "mutations.out"];

/// True when `relative` (a path inside the workspace) belongs in a scratch copy.
pub fn is_copied(relative: &Path) -> bool {
    match relative.components().next() {
        Some(Component::Normal(first)) => !NOT_COPIED.iter().any(|n| first == *n),
        Some(Component::CurDir) => is_copied(relative.strip_prefix(".").unwrap_or(relative)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_output_history_and_results_stay_behind() {
        for p in [
            "target/debug/x",
            ".git/HEAD",
            "mutations.out/outcomes.json",
            "/etc/passwd",
            "../x",
        ] {
            assert!(!is_copied(Path::new(p)), "{p}");
        }
        for p in [
            "gate/src/policy.rs",
            "./Cargo.toml",
            "migrations/1_x.sql",
            "gate/target-notes.md",
        ] {
            assert!(is_copied(Path::new(p)), "{p}");
        }
    }
}
