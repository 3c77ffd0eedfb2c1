//! What a committed report was made from, and how a drift check reads it.
//!
//! Guarantees: every report `harness report` writes names the commit it was
//! made from, in its Markdown (a line starting [`MD_PREFIX`]) and its JSON
//! (a top-level [`JSON_KEY`] field); the commit carries `+dirty` when a
//! tracked file outside `reports/` differs from it. [`comparable`] gives a
//! report's text with that value blanked, so a drift check ignores which
//! commit a report names but refuses one that names none.

use std::path::Path;
use std::process::Command;

/// The line of a Markdown report that names its commit starts so.
pub const MD_PREFIX: &str = "Made from commit ";

/// The top-level JSON field that names a report's commit.
pub const JSON_KEY: &str = "made_from";

/// The commit the workspace at `root` is at, `+dirty` when a tracked file
/// outside `reports/` differs from it; `unknown` outside a git checkout.
pub fn made_from(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty()) else {
        return "unknown".into();
    };
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":(exclude)reports",
    ])
    .is_none_or(|changes| !changes.is_empty());
    if dirty {
        format!("{commit}+dirty")
    } else {
        commit
    }
}

/// The Markdown line naming `commit`.
pub fn md_line(commit: &str) -> String {
    format!("{MD_PREFIX}`{commit}`.")
}

/// `text` (a report named `name`) with the value naming its commit blanked,
/// or `None` when it names no commit (or more than one line claims to).
pub fn comparable(name: &str, text: &str) -> Option<String> {
    let json_prefix = format!("  \"{JSON_KEY}\": ");
    let (prefix, blank) = if name.ends_with(".json") {
        (json_prefix.as_str(), format!("{json_prefix}\"\","))
    } else {
        (MD_PREFIX, format!("{MD_PREFIX}…"))
    };
    let mut found = 0;
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            if line.starts_with(prefix) {
                found += 1;
                blank.clone()
            } else {
                line.to_string()
            }
        })
        .collect();
    (found == 1).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_is_ignored_but_required() {
        let a = format!("# T\n\n{}\n\nbody\n", md_line("abc"));
        let b = format!("# T\n\n{}\n\nbody\n", md_line("def+dirty"));
        assert_eq!(comparable("x.md", &a), comparable("x.md", &b));
        assert!(comparable("x.md", &a).is_some());
        assert_eq!(comparable("x.md", "# T\n\nbody\n"), None);
        assert_ne!(
            comparable("x.md", &a),
            comparable("x.md", &a.replace("body", "other"))
        );
        let j1 = "{\n  \"made_from\": \"abc\",\n  \"n\": 1\n}\n";
        let j2 = "{\n  \"made_from\": \"def\",\n  \"n\": 1\n}\n";
        assert_eq!(comparable("x.json", j1), comparable("x.json", j2));
        assert_eq!(comparable("x.json", "{\n  \"n\": 1\n}\n"), None);
        assert_ne!(
            comparable("x.json", j1),
            comparable("x.json", &j1.replace("1\n", "2\n"))
        );
    }

    #[test]
    fn this_checkout_names_a_commit() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let commit = made_from(root);
        let hex = commit.trim_end_matches("+dirty");
        assert_eq!(hex.len(), 40, "{commit}");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{commit}");
    }
}
