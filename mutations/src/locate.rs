//! Finds exactly one guard node in one file: the statement a `delete`
//! removes, or the `if` condition a `disable`/`weaken` changes.
//!
//! Guarantees: [`locate`] returns the byte range of exactly one node of the
//! named function, or an error; it never guesses. Zero or several matches is
//! [`Error::Drift`] naming the entry id, file, function, selector and what was
//! found; a match the operator cannot mutate so the crate still builds (a
//! `let` binding, a block's value, an `if let` condition, a clause that does
//! not exist) is [`Error::Unmutable`].
//!
//! Selection rules, inside the function body:
//! - `produces: X`, delete: the smallest statement containing `Reason::X`;
//!   when that statement is the only one of the `then` block of an `if`
//!   without `else` which is itself a statement, the whole `if` statement.
//! - `contains: "text"`, delete: the smallest statements whose text contains
//!   the text (whitespace ignored), with the same `if` rule.
//! - `produces: X`, disable/weaken: the innermost condition whose `then`
//!   part contains `Reason::X`: an `if` (its `then` block) or a guarded
//!   match arm (`PAT if guard => body`, its body). The target is the
//!   condition; the guard covers the whole `if` or arm.
//! - `contains: "text"`, disable/weaken: the innermost condition (`if` or
//!   arm guard) whose text contains the text.
//! - Matches with the same target count once; `nth: N` picks the N-th
//!   (0-based, in source order).

use std::ops::Range;
use std::path::Path;

use crate::error::{Error, Result};
use crate::registry::{Operator, Selector, SourceLocator};
use crate::syntax::{self, CondKind, Frame, IfInfo, SiteKind, StmtKind};

/// `&&` or `||`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
}

/// What the target range holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A whole statement.
    Stmt,
    /// An `if` condition. For `weaken`, the flattened top-level chain and the
    /// clause to drop.
    Cond {
        chain: Option<(BoolOp, Vec<Range<usize>>)>,
        clause: Option<usize>,
    },
}

/// One located guard node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The bytes the operator edits.
    pub target: Range<usize>,
    /// The bytes whose refusal sites this guard accounts for: the statement,
    /// or the whole `if` for a condition.
    pub covers: Range<usize>,
    pub shape: Shape,
    /// 1-based line and column of the target.
    pub line: usize,
    pub column: usize,
    /// The qualified path of the function it is in.
    pub function: String,
}

/// One match of a selector, mutable or not.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub covers: Range<usize>,
    pub line: usize,
    /// The located node, or why the operator cannot apply to it.
    pub located: std::result::Result<Located, String>,
}

/// Every match of a selector in a file.
#[derive(Debug)]
pub struct Matches {
    /// How many functions the `function` path named.
    pub functions: usize,
    /// The matches, deduplicated, in source order.
    pub candidates: Vec<Candidate>,
}

/// Finds every match of `function` + `selector` for `operator` in `src`.
/// `file` (relative to the workspace root) gives the module path.
pub fn find(
    src: &str,
    file: &Path,
    function: &str,
    selector: &Selector,
    operator: Operator,
    clause: Option<usize>,
    reason_enum: &str,
) -> std::result::Result<Matches, String> {
    let ast = syntax::parse_file(src)?;
    let fns = syntax::functions(&ast, syntax::module_path(file));
    let named: Vec<_> = fns.iter().filter(|f| f.matches(function)).collect();
    if named.len() != 1 {
        return Ok(Matches {
            functions: named.len(),
            candidates: Vec::new(),
        });
    }
    let item = named[0];
    let body = syntax::body(item.block, reason_enum, &[]);
    let fn_path = item.display_path();
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |c: Candidate| {
        let key = |c: &Candidate| match &c.located {
            Ok(l) => l.target.clone(),
            Err(_) => c.covers.clone(),
        };
        if !out.iter().any(|o| key(o) == key(&c)) {
            out.push(c);
        }
    };
    let ctx = Ctx {
        src,
        body: &body,
        fn_path: &fn_path,
        clause,
    };
    match (selector, operator) {
        (Selector::Produces(variant), Operator::Delete) => {
            for site in &body.sites {
                if site.kind == SiteKind::Reason(variant.clone())
                    && let Some(c) = ctx.delete_at(&site.stack)
                {
                    push(c);
                }
            }
        }
        (Selector::Produces(variant), Operator::Disable | Operator::Weaken) => {
            for site in &body.sites {
                if site.kind == SiteKind::Reason(variant.clone())
                    && let Some(k) = site.stack.iter().rev().find_map(|f| match f {
                        Frame::IfThen(k) => Some(*k),
                        _ => None,
                    })
                {
                    push(ctx.cond_of(k, operator));
                }
            }
        }
        (Selector::Contains(text), Operator::Delete) => {
            let needle = squash(text);
            let hits: Vec<usize> = (0..body.stmts.len())
                .filter(|&i| squash(&src[body.stmts[i].0.range.clone()]).contains(&needle))
                .collect();
            for &i in &hits {
                let r = &body.stmts[i].0.range;
                let has_inner = hits.iter().any(|&j| {
                    let q = &body.stmts[j].0.range;
                    j != i && r.start <= q.start && q.end <= r.end && q != r
                });
                if !has_inner && let Some(c) = ctx.delete_at(&body.stmts[i].1) {
                    push(c);
                }
            }
        }
        (Selector::Contains(text), Operator::Disable | Operator::Weaken) => {
            let needle = squash(text);
            let hits: Vec<usize> = (0..body.ifs.len())
                .filter(|&k| squash(&src[syntax::range_of(body.ifs[k].0.cond)]).contains(&needle))
                .collect();
            for &k in &hits {
                let r = &body.ifs[k].0.range;
                let has_inner = hits.iter().any(|&j| {
                    let q = &body.ifs[j].0.range;
                    j != k && r.start <= q.start && q.end <= r.end && q != r
                });
                if !has_inner {
                    push(ctx.cond_of(k, operator));
                }
            }
        }
    }
    out.sort_by_key(|c| c.covers.start);
    Ok(Matches {
        functions: 1,
        candidates: out,
    })
}

/// Locates the one node a source guard names. `src` is the file's text.
pub fn locate(
    src: &str,
    id: &str,
    locator: &SourceLocator,
    operator: Operator,
    reason_enum: &str,
) -> Result<Located> {
    let drift = |found: String| Error::Drift {
        id: id.to_string(),
        file: locator.file.clone(),
        function: locator.function.clone(),
        selector: locator.selector.to_string(),
        found,
    };
    let matches = find(
        src,
        &locator.file,
        &locator.function,
        &locator.selector,
        operator,
        locator.clause,
        reason_enum,
    )
    .map_err(|message| Error::Parse {
        file: locator.file.clone(),
        message,
    })?;
    if matches.functions != 1 {
        return Err(drift(format!(
            "{} functions whose path ends in `{}`",
            matches.functions, locator.function
        )));
    }
    let lines = |cs: &[Candidate]| {
        cs.iter()
            .map(|c| c.line.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let n = matches.candidates.len();
    let chosen = match locator.nth {
        Some(k) if k < n => &matches.candidates[k],
        Some(k) => {
            return Err(drift(format!(
                "{n} matches (lines {}), so no match nth: {k}",
                lines(&matches.candidates)
            )));
        }
        None if n == 1 => &matches.candidates[0],
        None if n == 0 => return Err(drift("0 matches".into())),
        None => {
            return Err(drift(format!(
                "{n} matches (lines {}); add `nth` or a narrower selector",
                lines(&matches.candidates)
            )));
        }
    };
    chosen.located.clone().map_err(|message| Error::Unmutable {
        id: id.to_string(),
        file: locator.file.clone(),
        line: chosen.line,
        message,
    })
}

struct Ctx<'a, 'ast> {
    src: &'a str,
    body: &'a syntax::Body<'ast>,
    fn_path: &'a str,
    clause: Option<usize>,
}

impl Ctx<'_, '_> {
    fn located(&self, target: Range<usize>, covers: Range<usize>, shape: Shape) -> Located {
        let (line, column) = syntax::line_col(self.src, target.start);
        Located {
            target,
            covers,
            shape,
            line,
            column,
            function: self.fn_path.to_string(),
        }
    }

    /// The statement a delete removes, for a frame stack.
    fn delete_at(&self, stack: &[Frame]) -> Option<Candidate> {
        let si = stack.iter().rposition(|f| matches!(f, Frame::Stmt(_)))?;
        let Frame::Stmt(mut idx) = stack[si] else {
            return None;
        };
        if si >= 2
            && let Frame::IfThen(k) = stack[si - 1]
            && let Frame::Stmt(outer) = stack[si - 2]
        {
            let f: &IfInfo = &self.body.ifs[k].0;
            if f.kind == CondKind::If
                && !f.has_else
                && f.then_len == 1
                && self.body.stmts[outer].0.expr_range.as_ref() == Some(&f.range)
            {
                idx = outer;
            }
        }
        let info = &self.body.stmts[idx].0;
        let (line, _) = syntax::line_col(self.src, info.range.start);
        let problem = match info.kind {
            StmtKind::Local => Some(
                "the statement is a `let` binding: deleting it would unbind a name. Give the refusal its own statement (`let x = ..; if .. { return Err(..) }`), or exempt it",
            ),
            StmtKind::Item => Some("the statement is an item, not code"),
            _ if info.tail && !info.plain_if => Some(
                "the statement is its block's value (a tail expression): deleting it changes the block's type. Register `disable` on the `if` that guards it, or exempt it",
            ),
            _ => None,
        };
        let located = match problem {
            Some(p) => Err(p.to_string()),
            None => Ok(self.located(info.range.clone(), info.range.clone(), Shape::Stmt)),
        };
        Some(Candidate {
            covers: info.range.clone(),
            line,
            located,
        })
    }

    /// The condition of `if` number `k`, checked for the operator.
    fn cond_of(&self, k: usize, operator: Operator) -> Candidate {
        let f = &self.body.ifs[k].0;
        let cond_range = syntax::range_of(f.cond);
        let (line, _) = syntax::line_col(self.src, cond_range.start);
        let chain = chain_of(f.cond);
        let located = if has_let(f.cond) {
            Err("the condition binds with `let`: it cannot be made false or weakened without unbinding a name".to_string())
        } else if operator == Operator::Weaken {
            match (&chain, self.clause) {
                (None, _) => {
                    Err("`weaken` needs a condition that is an `&&` or `||` chain".to_string())
                }
                (Some((_, clauses)), Some(c)) if c >= clauses.len() => Err(format!(
                    "`clause: {c}` does not exist: the condition has {} clauses",
                    clauses.len()
                )),
                (Some(_), c) => Ok(Shape::Cond {
                    chain: chain.clone(),
                    clause: c,
                }),
            }
        } else {
            Ok(Shape::Cond {
                chain: chain.clone(),
                clause: None,
            })
        };
        Candidate {
            covers: f.range.clone(),
            line,
            located: located.map(|shape| self.located(cond_range, f.range.clone(), shape)),
        }
    }
}

/// The top-level `&&`/`||` chain of an expression, flattened (parentheses
/// are not looked through).
fn chain_of(e: &syn::Expr) -> Option<(BoolOp, Vec<Range<usize>>)> {
    let syn::Expr::Binary(b) = e else {
        return None;
    };
    let op = match b.op {
        syn::BinOp::And(_) => BoolOp::And,
        syn::BinOp::Or(_) => BoolOp::Or,
        _ => return None,
    };
    fn flatten(e: &syn::Expr, op: BoolOp, out: &mut Vec<Range<usize>>) {
        if let syn::Expr::Binary(b) = e
            && matches!(
                (op, &b.op),
                (BoolOp::And, syn::BinOp::And(_)) | (BoolOp::Or, syn::BinOp::Or(_))
            )
        {
            flatten(&b.left, op, out);
            flatten(&b.right, op, out);
        } else {
            out.push(syntax::range_of(e));
        }
    }
    let mut clauses = Vec::new();
    flatten(e, op, &mut clauses);
    Some((op, clauses))
}

fn has_let(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Let(_) => true,
        syn::Expr::Binary(b) => has_let(&b.left) || has_let(&b.right),
        _ => false,
    }
}

/// Text with all whitespace removed, for `contains` matching.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const SRC: &str = r#"
pub fn evaluate(amount: u64, cap: u64, merchant: &str, ok: &[&str]) -> Decision {
    if !ok.contains(&merchant) {
        return Decision::Deny(Reason::MerchantNotAllowed);
    }
    if amount > cap && cap != 0 || amount == 7 {
        log(1);
        return Decision::Deny(Reason::OverCap);
    }
    let limit = cap.checked_mul(2).ok_or(Reason::Overflow)?;
    check(limit)?;
    check(limit + 1)?;
    if let Some(x) = lookup(merchant) { return Decision::Deny(Reason::Listed); }
    if amount == 1 { Decision::Allow } else { Decision::Deny(Reason::Odd) }
}

impl Proposal {
    pub fn parse(p: &str) -> Result<Self, Reason> {
        if p.is_empty() || p.len() > 64 {
            return Err(Reason::PurposeInvalid);
        }
        Ok(Proposal)
    }
}
"#;

    fn loc(
        function: &str,
        selector: Selector,
        nth: Option<usize>,
        clause: Option<usize>,
    ) -> SourceLocator {
        SourceLocator {
            file: PathBuf::from("gate/src/policy.rs"),
            function: function.into(),
            selector,
            nth,
            clause,
        }
    }

    fn text(l: &Located) -> &str {
        &SRC[l.target.clone()]
    }

    fn p(v: &str) -> Selector {
        Selector::Produces(v.into())
    }
    fn c(t: &str) -> Selector {
        Selector::Contains(t.into())
    }

    #[test]
    fn produces_delete_takes_the_whole_guarding_if() {
        let l = locate(
            SRC,
            "g",
            &loc("policy::evaluate", p("MerchantNotAllowed"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap();
        assert_eq!(
            text(&l),
            "if !ok.contains(&merchant) {\n        return Decision::Deny(Reason::MerchantNotAllowed);\n    }"
        );
        assert_eq!(l.line, 3);
        assert_eq!(l.function, "gate::policy::evaluate");
        assert_eq!(l.covers, l.target);
    }

    #[test]
    fn produces_delete_in_a_busier_if_takes_the_statement() {
        let l = locate(
            SRC,
            "g",
            &loc("evaluate", p("OverCap"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "return Decision::Deny(Reason::OverCap);");
    }

    #[test]
    fn produces_disable_takes_the_condition() {
        let l = locate(
            SRC,
            "g",
            &loc("evaluate", p("MerchantNotAllowed"), None, None),
            Operator::Disable,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "!ok.contains(&merchant)");
        assert!(SRC[l.covers.clone()].starts_with("if !ok"));
    }

    #[test]
    fn weaken_flattens_the_chain_and_checks_the_clause() {
        let l = locate(
            SRC,
            "g",
            &loc("evaluate", p("OverCap"), None, Some(1)),
            Operator::Weaken,
            "Reason",
        )
        .unwrap();
        let Shape::Cond {
            chain: Some((op, clauses)),
            clause: Some(1),
        } = &l.shape
        else {
            panic!("{l:?}")
        };
        assert_eq!(*op, BoolOp::Or);
        let texts: Vec<&str> = clauses.iter().map(|r| &SRC[r.clone()]).collect();
        assert_eq!(texts, ["amount > cap && cap != 0", "amount == 7"]);
        let err = locate(
            SRC,
            "cap-x",
            &loc("evaluate", p("OverCap"), None, Some(2)),
            Operator::Weaken,
            "Reason",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("`clause: 2` does not exist"),
            "{err}"
        );
        assert!(err.to_string().contains("cap-x"), "{err}");
    }

    #[test]
    fn contains_picks_the_smallest_statement() {
        let l = locate(
            SRC,
            "g",
            &loc("evaluate", c("check(limit)"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "check(limit)?;");
        let l = locate(
            SRC,
            "g",
            &loc("evaluate", c("amount>cap"), None, None),
            Operator::Disable,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "amount > cap && cap != 0 || amount == 7");
    }

    #[test]
    fn several_matches_are_drift_unless_nth() {
        let err = locate(
            SRC,
            "chk",
            &loc("evaluate", c("check(limit"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Drift { .. }), "{msg}");
        assert!(
            msg.contains("entry `chk`")
                && msg.contains("2 matches")
                && msg.contains("fn `evaluate`"),
            "{msg}"
        );
        let l = locate(
            SRC,
            "chk",
            &loc("evaluate", c("check(limit"), Some(1), None),
            Operator::Delete,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "check(limit + 1)?;");
        let err = locate(
            SRC,
            "chk",
            &loc("evaluate", c("check(limit"), Some(2), None),
            Operator::Delete,
            "Reason",
        )
        .unwrap_err();
        assert!(err.to_string().contains("no match nth: 2"), "{err}");
    }

    #[test]
    fn no_match_and_no_function_are_drift() {
        let err = locate(
            SRC,
            "gone",
            &loc("evaluate", p("Vanished"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("registry drift: entry `gone`")
                && err.to_string().contains("0 matches"),
            "{err}"
        );
        let err = locate(
            SRC,
            "gone",
            &loc("policy::judge", p("OverCap"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("0 functions whose path ends in `policy::judge`"),
            "{err}"
        );
    }

    #[test]
    fn match_arm_guards_can_be_disabled() {
        let src = "fn f(a: u8, b: u8) -> Option<Reason> {\n    match a {\n        0 => None,\n        n if n == b && b > 2 => Some(Reason::Same),\n        _ => None,\n    }\n}\n";
        let l = locate(
            src,
            "g",
            &loc("f", p("Same"), None, None),
            Operator::Disable,
            "Reason",
        )
        .unwrap();
        assert_eq!(&src[l.target.clone()], "n == b && b > 2");
        assert_eq!(
            &src[l.covers.clone()],
            "n if n == b && b > 2 => Some(Reason::Same),"
        );
        let l = locate(
            src,
            "g",
            &loc("f", c("b>2"), None, Some(0)),
            Operator::Weaken,
            "Reason",
        )
        .unwrap();
        assert_eq!(&src[l.target.clone()], "n == b && b > 2");
        let err = locate(
            src,
            "g",
            &loc("f", p("Same"), None, None),
            Operator::Delete,
            "Reason",
        )
        .unwrap_err();
        assert!(err.to_string().contains("tail expression"), "{err}");
    }

    #[test]
    fn impl_methods_are_found_by_type() {
        let l = locate(
            SRC,
            "g",
            &loc("Proposal::parse", p("PurposeInvalid"), None, Some(1)),
            Operator::Weaken,
            "Reason",
        )
        .unwrap();
        assert_eq!(text(&l), "p.is_empty() || p.len() > 64");
    }

    #[test]
    fn unmutable_matches_say_why() {
        let cases = [
            (p("Overflow"), Operator::Delete, "`let` binding"),
            (p("Odd"), Operator::Delete, "tail expression"),
            (p("Listed"), Operator::Disable, "binds with `let`"),
            (p("MerchantNotAllowed"), Operator::Weaken, "chain"),
        ];
        for (sel, op, want) in cases {
            let err = locate(
                SRC,
                "u",
                &loc(
                    "evaluate",
                    sel.clone(),
                    None,
                    Some(0).filter(|_| op == Operator::Weaken),
                ),
                op,
                "Reason",
            )
            .unwrap_err();
            assert!(
                matches!(err, Error::Unmutable { .. }) && err.to_string().contains(want),
                "{sel}: {err}"
            );
        }
    }
}
