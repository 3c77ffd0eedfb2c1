//! The static check that every row lock of `gate/src` is taken by the one
//! locking helper (`service/lock.rs`): no other file's SQL says `FOR UPDATE`,
//! `FOR NO KEY UPDATE`, `FOR SHARE` or `FOR KEY SHARE`, in any string literal
//! or macro argument, however it is split across lines. Reads the source;
//! needs no database.

use std::path::{Path, PathBuf};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The row-lock clauses Postgres knows, found in any string literal (whitespace collapsed).
fn lock_clauses(source: &str) -> Vec<String> {
    let collapsed: String = source
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase();
    [
        "FOR UPDATE",
        "FOR NO KEY UPDATE",
        "FOR SHARE",
        "FOR KEY SHARE",
    ]
    .iter()
    .filter(|c| collapsed.contains(*c))
    .map(|c| (*c).to_owned())
    .collect()
}

#[test]
fn every_row_lock_is_taken_by_the_one_locking_helper() -> Result<(), Error> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files)?;
    assert!(
        files.len() > 10,
        "found {} files under {}",
        files.len(),
        src.display()
    );
    let helper = src.join("service").join("lock.rs");
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        // Parse it, and look at every string literal (SQL lives in literals).
        let tree = syn::parse_file(&text)?;
        let literals = string_literals(&tree);
        let found = lock_clauses(&literals.join("\n"));
        if file == &helper {
            assert_eq!(
                found,
                vec!["FOR UPDATE", "FOR NO KEY UPDATE"],
                "the helper takes exactly these two kinds of lock"
            );
        } else if !found.is_empty() {
            offenders.push(format!("{}: {found:?}", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "row locks outside service/lock.rs: {offenders:#?}"
    );
    // The helper's own text is what a caller gets: a lock and a re-read.
    let helper_text = std::fs::read_to_string(&helper)?;
    assert!(
        helper_text.contains("fetch_optional"),
        "the helper re-reads the locked row"
    );
    Ok(())
}

#[test]
fn the_lock_scanner_sees_a_lock_split_across_lines() {
    assert_eq!(
        lock_clauses("SELECT 1 FROM t WHERE x for\n   update"),
        vec!["FOR UPDATE"]
    );
    assert_eq!(lock_clauses("... for  key share"), vec!["FOR KEY SHARE"]);
    assert_eq!(
        lock_clauses("... FOR NO KEY UPDATE"),
        vec!["FOR NO KEY UPDATE"]
    );
    assert!(lock_clauses("UPDATE t SET x = 1").is_empty());
}

fn string_literals(file: &syn::File) -> Vec<String> {
    use syn::visit::Visit;
    struct Strings(Vec<String>);
    impl<'ast> Visit<'ast> for Strings {
        fn visit_lit_str(&mut self, lit: &'ast syn::LitStr) {
            self.0.push(lit.value());
        }
        fn visit_macro(&mut self, mac: &'ast syn::Macro) {
            // format!/concat! arguments are tokens, not parsed literals.
            for token in mac.tokens.clone() {
                if let proc_macro2::TokenTree::Literal(l) = token {
                    self.0.push(l.to_string());
                }
            }
        }
    }
    let mut s = Strings(Vec::new());
    s.visit_file(file);
    s.0
}
