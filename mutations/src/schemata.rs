//! Schemata mode: one instrumented copy of a file in which every registered
//! guard of that file sits behind a runtime switch, so the crate is built
//! once and each mutant is a process environment, not a rebuild.
//!
//! Guarantees: with the switch function returning `false` for every id, the
//! instrumented file behaves as the original (each edit only adds a test of
//! the switch that short-circuits to the original code); with it returning
//! `true` for exactly one id, it behaves as rewrite mode's mutant of that
//! guard. Edits are pure insertions computed on the original text and
//! applied back to front, nested guards nest correctly (outer opens first
//! and closes last), and the result must parse.
//!
//! | operator | original                | instrumented                                  |
//! |----------|-------------------------|-----------------------------------------------|
//! | delete   | `stmt`                  | `if !SWITCH("ID") { stmt }`                    |
//! | disable  | `if cond {`             | `if !SWITCH("ID") && (cond) {`                 |
//! | weaken   | `a && b` (drop `b`)     | `a && (SWITCH("ID") \|\| (b))`                 |
//! | weaken   | `a \|\| b` (drop `b`)   | `a \|\| (!SWITCH("ID") && (b))`                |
//!
//! `SWITCH` is the registry's `switch` path, a `fn(&str) -> bool` that reads
//! the registry's `switch_env` variable (see [`crate::switch`]).

use std::path::Path;

use crate::error::{Error, Result};
use crate::locate::{BoolOp, Located, Shape};
use crate::registry::Operator;
use crate::syntax;
use crate::textedit::{self, Edit};

/// One guard to instrument in a file.
#[derive(Debug, Clone, Copy)]
pub struct Instrument<'a> {
    pub id: &'a str,
    pub located: &'a Located,
    pub operator: Operator,
}

/// The insertions that put one guard behind the switch. `index` orders
/// guards that share a range.
pub fn edits(g: &Instrument<'_>, switch: &str, index: usize) -> Vec<Edit> {
    let call = format!("{switch}({:?})", g.id);
    let (range, open, close) = match (g.operator, &g.located.shape) {
        (Operator::Delete, _) => (
            g.located.target.clone(),
            format!("if !{call} {{ "),
            " }".to_string(),
        ),
        (Operator::Disable, _) => (
            g.located.target.clone(),
            format!("!{call} && ("),
            ")".to_string(),
        ),
        (
            Operator::Weaken,
            Shape::Cond {
                chain: Some((op, clauses)),
                clause: Some(n),
            },
        ) => {
            let open = match op {
                BoolOp::And => format!("({call} || ("),
                BoolOp::Or => format!("(!{call} && ("),
            };
            (clauses[*n].clone(), open, "))".to_string())
        }
        (Operator::Weaken, shape) => {
            unreachable!(
                "locate() only yields a weaken target with a chain and a clause, not {shape:?}"
            )
        }
    };
    let len = i64::try_from(range.len()).unwrap_or(i64::MAX);
    let idx = i64::try_from(index).unwrap_or(i64::MAX);
    vec![
        Edit::insert(range.start, open, (1, -len, idx)),
        Edit::insert(range.end, close, (0, len, -idx)),
    ]
}

/// The instrumented text of `src` with every guard in `guards` switchable.
pub fn instrument(
    src: &str,
    file: &Path,
    guards: &[Instrument<'_>],
    switch: &str,
) -> Result<String> {
    let all: Vec<Edit> = guards
        .iter()
        .enumerate()
        .flat_map(|(i, g)| edits(g, switch, i))
        .collect();
    let text = textedit::apply(src, &all).map_err(|c| Error::EditConflict {
        file: file.to_path_buf(),
        first: c.first,
        second: c.second,
    })?;
    syntax::parse_file(&text).map_err(|message| Error::EditBroke {
        file: file.to_path_buf(),
        what: "schemata instrumentation".into(),
        message,
    })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::locate;
    use crate::registry::{Selector, SourceLocator};
    use std::path::PathBuf;

    const SRC: &str = "fn f(p: &str, n: u32) -> Result<(), Reason> {\n    if p.is_empty() || p.len() > 64 {\n        return Err(Reason::Purpose);\n    }\n    if n == 0 && p != \"x\" {\n        return Err(Reason::Zero);\n    }\n    Ok(())\n}\n";

    fn loc(v: &str, op: Operator, clause: Option<usize>) -> Located {
        let l = SourceLocator {
            file: PathBuf::from("src/f.rs"),
            function: "f".into(),
            selector: Selector::Produces(v.into()),
            nth: None,
            clause,
        };
        locate(SRC, "x", &l, op, "Reason").unwrap()
    }

    #[test]
    fn every_guard_of_a_file_is_switched_and_nesting_holds() {
        let del = loc("Purpose", Operator::Delete, None);
        let dis = loc("Purpose", Operator::Disable, None);
        let weak = loc("Purpose", Operator::Weaken, Some(1));
        let weak_and = loc("Zero", Operator::Weaken, Some(1));
        let guards = [
            Instrument {
                id: "del",
                located: &del,
                operator: Operator::Delete,
            },
            Instrument {
                id: "dis",
                located: &dis,
                operator: Operator::Disable,
            },
            Instrument {
                id: "weak",
                located: &weak,
                operator: Operator::Weaken,
            },
            Instrument {
                id: "weak-and",
                located: &weak_and,
                operator: Operator::Weaken,
            },
        ];
        let out = instrument(SRC, Path::new("src/f.rs"), &guards, "crate::mutant::active").unwrap();
        assert_eq!(
            out,
            "fn f(p: &str, n: u32) -> Result<(), Reason> {\n    if !crate::mutant::active(\"del\") { if !crate::mutant::active(\"dis\") && (p.is_empty() || (!crate::mutant::active(\"weak\") && (p.len() > 64))) {\n        return Err(Reason::Purpose);\n    } }\n    if n == 0 && (crate::mutant::active(\"weak-and\") || (p != \"x\")) {\n        return Err(Reason::Zero);\n    }\n    Ok(())\n}\n"
        );
    }

    #[test]
    fn the_order_of_the_guard_list_does_not_change_nesting() {
        let a = loc("Purpose", Operator::Delete, None);
        let b = loc("Purpose", Operator::Disable, None);
        let one = instrument(
            SRC,
            Path::new("f.rs"),
            &[
                Instrument {
                    id: "a",
                    located: &a,
                    operator: Operator::Delete,
                },
                Instrument {
                    id: "b",
                    located: &b,
                    operator: Operator::Disable,
                },
            ],
            "s",
        )
        .unwrap();
        let two = instrument(
            SRC,
            Path::new("f.rs"),
            &[
                Instrument {
                    id: "b",
                    located: &b,
                    operator: Operator::Disable,
                },
                Instrument {
                    id: "a",
                    located: &a,
                    operator: Operator::Delete,
                },
            ],
            "s",
        )
        .unwrap();
        assert_eq!(one, two);
    }
}
