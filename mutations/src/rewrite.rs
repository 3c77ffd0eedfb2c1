//! Rewrite mode: the text of one mutant, one guard removed.
//!
//! Guarantees: the result differs from the original only inside the located
//! byte range (everything before and after is byte-identical), and it parses
//! as a Rust file. `delete` removes the statement; `disable` makes the `if`
//! condition `false`; `weaken` removes one clause of the condition's
//! top-level `&&`/`||` chain together with the operator next to it.

use std::path::Path;

use crate::error::{Error, Result};
use crate::locate::{Located, Shape};
use crate::registry::Operator;
use crate::syntax;
use crate::textedit::{self, Edit};

/// One rewritten file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The whole mutated file.
    pub text: String,
    /// The original bytes that were replaced.
    pub replaced: String,
    /// What replaced them.
    pub replacement: String,
}

/// The one edit that removes the guard.
pub fn edit(src: &str, located: &Located, operator: Operator) -> Edit {
    match (operator, &located.shape) {
        (Operator::Delete, _) => Edit::replace(located.target.clone(), ""),
        (Operator::Disable, _) => Edit::replace(located.target.clone(), "false"),
        (
            Operator::Weaken,
            Shape::Cond {
                chain: Some((_, clauses)),
                clause: Some(n),
            },
        ) => {
            let n = *n;
            let range = if n == 0 {
                clauses[0].start..clauses[1].start
            } else {
                clauses[n - 1].end..clauses[n].end
            };
            debug_assert!(range.end <= src.len());
            Edit::replace(range, "")
        }
        (Operator::Weaken, shape) => {
            unreachable!(
                "locate() only yields a weaken target with a chain and a clause, not {shape:?}"
            )
        }
    }
}

/// The mutated text of `src` with the located guard removed.
pub fn mutate(src: &str, file: &Path, located: &Located, operator: Operator) -> Result<Rewritten> {
    let e = edit(src, located, operator);
    let replaced = src[e.range.clone()].to_string();
    let text = textedit::apply(src, std::slice::from_ref(&e)).map_err(|c| Error::EditConflict {
        file: file.to_path_buf(),
        first: c.first,
        second: c.second,
    })?;
    syntax::parse_file(&text).map_err(|message| Error::EditBroke {
        file: file.to_path_buf(),
        what: format!("rewrite ({operator} at line {})", located.line),
        message,
    })?;
    Ok(Rewritten {
        text,
        replaced,
        replacement: e.text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::locate;
    use crate::registry::{Selector, SourceLocator};
    use std::path::PathBuf;

    const SRC: &str = "// header comment kept\nfn parse(p: &str) -> Result<(), Reason> {\n    // why: empty or long purposes are refused\n    if p.is_empty() || p.len() > 64 || p.contains('\\0') {\n        return Err(Reason::PurposeInvalid);\n    }\n    Ok(())\n}\n// trailer\n";

    fn run(operator: Operator, clause: Option<usize>) -> Rewritten {
        let loc = SourceLocator {
            file: PathBuf::from("src/p.rs"),
            function: "parse".into(),
            selector: Selector::Produces("PurposeInvalid".into()),
            nth: None,
            clause,
        };
        let l = locate(SRC, "p", &loc, operator, "Reason").unwrap();
        mutate(SRC, &loc.file, &l, operator).unwrap()
    }

    #[test]
    fn delete_keeps_everything_else_byte_identical() {
        let r = run(Operator::Delete, None);
        assert!(r.replaced.starts_with("if p.is_empty()"));
        assert_eq!(r.text, SRC.replace(&r.replaced, ""));
        assert!(
            r.text
                .contains("// why: empty or long purposes are refused\n    \n    Ok(())")
        );
    }

    #[test]
    fn disable_makes_the_condition_false() {
        let r = run(Operator::Disable, None);
        assert!(
            r.text.contains("    if false {\n        return Err"),
            "{}",
            r.text
        );
        assert_eq!(r.replacement, "false");
    }

    #[test]
    fn weaken_drops_one_clause_and_its_operator() {
        assert!(
            run(Operator::Weaken, Some(0))
                .text
                .contains("if p.len() > 64 || p.contains('\\0') {")
        );
        assert!(
            run(Operator::Weaken, Some(1))
                .text
                .contains("if p.is_empty() || p.contains('\\0') {")
        );
        assert!(
            run(Operator::Weaken, Some(2))
                .text
                .contains("if p.is_empty() || p.len() > 64 {")
        );
    }
}
