//! DESIGN.md names no file that is not there: every path in backticks or a
//! link, and every entry and path of its map of the files.

mod support;

use std::path::Path;

/// A token that names a file or a folder (not a module path, a glob or a
/// placeholder).
fn is_path(token: &str) -> bool {
    let token = token.trim_end_matches([':', ',', ';', '.', ')']);
    !token.is_empty()
        && !token.contains("::")
        && !token.contains(['*', '<', '{', ' ', '$', '='])
        && (token.contains('/')
            || [".rs", ".sql", ".yaml", ".md", ".json", ".toml", ".txt"]
                .iter()
                .any(|ext| token.ends_with(ext)))
}

fn clean(token: &str) -> &str {
    token
        .trim_start_matches('(')
        .trim_end_matches([':', ',', ';', '.', ')'])
}

#[test]
fn every_path_design_md_names_exists() {
    let root = support::workspace_root();
    let text = std::fs::read_to_string(root.join("DESIGN.md")).expect("DESIGN.md reads");
    let mut missing = Vec::new();
    let mut checked = 0;
    let mut check = |candidates: &[&Path], what: &str| {
        checked += 1;
        if !candidates.iter().any(|p| p.exists()) {
            missing.push(what.to_owned());
        }
    };

    // Backticked paths and link targets, outside the map.
    let (prose, map) = text
        .split_once("## Map of the files")
        .expect("DESIGN.md has a map of the files");
    for (i, piece) in prose.split('`').enumerate() {
        if i % 2 == 1 && is_path(piece) && !piece.starts_with("gate::") {
            check(&[&root.join(clean(piece))], piece);
        }
    }
    for link in prose.split("](").skip(1) {
        if let Some((target, _)) = link.split_once(')')
            && !target.starts_with("http")
        {
            check(&[&root.join(target)], target);
        }
    }

    // The map: a folder at column 0, its entries at column 2, and paths in
    // the descriptions (relative to the folder or to the root).
    let block = map.split("```").nth(1).expect("the map is a fenced block");
    let mut folder = root.clone();
    for line in block.lines() {
        let indent = line.len() - line.trim_start().len();
        let first = line.split_whitespace().next().unwrap_or("");
        if indent == 0 && !first.is_empty() {
            folder = root.join(first);
            check(&[&folder], first);
        } else if indent == 2 && is_path(first) {
            check(
                &[&folder.join(clean(first))],
                &format!("{} in {}", first, folder.display()),
            );
        }
        for token in line.split_whitespace().skip(usize::from(indent <= 2)) {
            let token = clean(token);
            if token.contains('/') && is_path(token) && token.contains('.') {
                check(&[&root.join(token), &folder.join(token)], token);
            }
        }
    }
    assert!(checked > 40, "only {checked} paths were checked");
    assert!(
        missing.is_empty(),
        "DESIGN.md names what is not there: {missing:#?}"
    );
}
