//! The syntax model the locator and the completeness check share: the
//! functions of a file with their qualified paths, and, inside one function
//! body, its statements, its `if`s and its refusal sites, each with the byte
//! range it occupies in the original text.
//!
//! Guarantees: files are parsed with `syn::parse_str::<syn::File>` (never
//! `syn::parse_file`, which strips a BOM or shebang and shifts every span), and
//! byte ranges are taken on the thread that parsed, so `&src[range]` is
//! exactly the node's text. Nested items inside a function body are not part
//! of that function. A refusal site is any expression path ending in
//! `REASON_ENUM::Variant` (a capitalised last segment), or a call of a
//! configured function or method name, including inside macro invocations
//! (found token by token). Conditions are `if` conditions and match arm
//! guards.

use std::ops::Range;
use std::path::{Component, Path};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The byte range of a parsed node in the text it was parsed from.
pub fn range_of<T: Spanned>(node: &T) -> Range<usize> {
    node.span().byte_range()
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Parses a whole file without shifting spans.
pub fn parse_file(src: &str) -> Result<syn::File, String> {
    syn::parse_str::<syn::File>(src).map_err(|e| {
        let at = e.span().start();
        format!("{e} (line {}, column {})", at.line, at.column + 1)
    })
}

/// The module path a file's items live under, led by its crate directory:
/// `gate/src/policy.rs` → `[gate, policy]`, `gate/src/lib.rs` → `[gate]`,
/// `gate/src/db/mod.rs` → `[gate, db]`, `src/guards.rs` → `[guards]`,
/// `gate/tests/db_guards.rs` → `[gate, db_guards]`.
pub fn module_path(file: &Path) -> Vec<String> {
    let comps: Vec<String> = file
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let Some(last) = comps.last() else {
        return Vec::new();
    };
    let stem = last.strip_suffix(".rs").unwrap_or(last).to_string();
    let mut out = Vec::new();
    let anchor = comps
        .iter()
        .rposition(|c| c == "src" || c == "tests" || c == "benches" || c == "examples");
    if let Some(a) = anchor {
        if a > 0 {
            out.push(comps[a - 1].replace('-', "_"));
        }
        out.extend(comps[a + 1..comps.len() - 1].iter().cloned());
    }
    if !matches!(stem.as_str(), "lib" | "main" | "mod") {
        out.push(stem);
    }
    out
}

/// One function with a body.
#[derive(Debug)]
pub struct FnItem<'ast> {
    /// Crate dir, modules, impl type or trait, fn name.
    pub path: Vec<String>,
    /// The body.
    pub block: &'ast syn::Block,
    /// Inside a `#[cfg(test)]` item, or itself a test.
    pub test_only: bool,
}

impl FnItem<'_> {
    /// Whether `want` (`a::b::f`) names this function: its segments equal
    /// the last segments of the function's path.
    pub fn matches(&self, want: &str) -> bool {
        let want: Vec<&str> = want.split("::").collect();
        want.len() <= self.path.len()
            && self.path[self.path.len() - want.len()..]
                .iter()
                .zip(&want)
                .all(|(a, b)| a == b)
    }

    /// `a::b::f`.
    pub fn display_path(&self) -> String {
        self.path.join("::")
    }
}

/// Every function of a file that has a body, with its qualified path.
pub fn functions<'ast>(file: &'ast syn::File, module: Vec<String>) -> Vec<FnItem<'ast>> {
    let mut finder = FnFinder {
        path: module,
        test_depth: 0,
        found: Vec::new(),
    };
    finder.visit_file(file);
    finder.found
}

struct FnFinder<'ast> {
    path: Vec<String>,
    test_depth: usize,
    found: Vec<FnItem<'ast>>,
}

/// `#[cfg(test)]` or `#[cfg(all(.., test, ..))]`.
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(meta) = a.parse_args::<syn::Meta>() else {
            return false;
        };
        cfg_requires_test(&meta)
    })
}

fn cfg_requires_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) if l.path.is_ident("all") => l
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )
            .map(|items| items.iter().any(cfg_requires_test))
            .unwrap_or(false),
        _ => false,
    }
}

/// A variant name starts upper-case (`Reason::code` is a method, not a refusal).
fn is_variant(ident: &proc_macro2::Ident) -> bool {
    ident.to_string().starts_with(|c: char| c.is_uppercase())
}

/// `#[test]`, `#[tokio::test]`, `#[sqlx::test]`, ...
fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().segments.last().is_some_and(|s| s.ident == "test"))
}

fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".into(), |s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        syn::Type::Group(g) => type_name(&g.elem),
        _ => "_".into(),
    }
}

impl<'ast> FnFinder<'ast> {
    fn record(&mut self, name: &syn::Ident, block: &'ast syn::Block, attrs: &[syn::Attribute]) {
        let mut path = self.path.clone();
        path.push(name.to_string());
        self.found.push(FnItem {
            path,
            block,
            test_only: self.test_depth > 0 || is_test_fn(attrs) || is_cfg_test(attrs),
        });
    }

    fn scoped(&mut self, name: String, test: bool, f: impl FnOnce(&mut Self)) {
        self.path.push(name);
        self.test_depth += usize::from(test);
        f(self);
        self.test_depth -= usize::from(test);
        self.path.pop();
    }
}

impl<'ast> Visit<'ast> for FnFinder<'ast> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.scoped(m.ident.to_string(), is_cfg_test(&m.attrs), |s| {
                for item in items {
                    s.visit_item(item);
                }
            });
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.scoped(type_name(&i.self_ty), is_cfg_test(&i.attrs), |s| {
            for item in &i.items {
                if let syn::ImplItem::Fn(f) = item {
                    s.record(&f.sig.ident, &f.block, &f.attrs);
                }
            }
        });
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.scoped(t.ident.to_string(), is_cfg_test(&t.attrs), |s| {
            for item in &t.items {
                if let syn::TraitItem::Fn(f) = item
                    && let Some(block) = &f.default
                {
                    s.record(&f.sig.ident, block, &f.attrs);
                }
            }
        });
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.sig.ident, &f.block, &f.attrs);
    }
}

/// What a statement is, as far as deleting it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StmtKind {
    /// `let`: deleting it unbinds a name.
    Local,
    /// A nested item.
    Item,
    /// An expression statement.
    Expr,
    /// A macro statement.
    Macro,
}

/// One statement of the function body (at any depth).
#[derive(Debug, Clone)]
pub struct StmtInfo {
    pub range: Range<usize>,
    pub kind: StmtKind,
    /// The last statement of its block and without a semicolon: the block's value.
    pub tail: bool,
    /// The range of the expression, for expression statements.
    pub expr_range: Option<Range<usize>>,
    /// An expression statement that is an `if` without `else` (type `()`).
    pub plain_if: bool,
}

/// What holds a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CondKind {
    /// `if cond { .. }`: the range is the whole `if`.
    If,
    /// `PAT if cond => body` in a `match`: the range is the whole arm.
    ArmGuard,
}

/// One condition of the function body: an `if` or a match arm guard. Its
/// "then" part is the `then` block or the arm body.
#[derive(Debug, Clone)]
pub struct IfInfo<'ast> {
    pub kind: CondKind,
    pub range: Range<usize>,
    pub cond: &'ast syn::Expr,
    /// Statements in the `then` block (0 for an arm).
    pub then_len: usize,
    pub has_else: bool,
}

/// Where a visitor stands: the chain of enclosing statements and `if` parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    Stmt(usize),
    IfCond(usize),
    IfThen(usize),
    IfElse(usize),
}

/// What a refusal site does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteKind {
    /// Produces `REASON_ENUM::Variant`.
    Reason(String),
    /// Calls a configured guard function.
    Call(String),
}

/// One refusal site with the frames around it.
#[derive(Debug, Clone)]
pub struct Site {
    pub kind: SiteKind,
    pub range: Range<usize>,
    pub stack: Vec<Frame>,
}

/// Statements, `if`s and refusal sites of one function body.
#[derive(Debug, Default)]
pub struct Body<'ast> {
    /// Each statement with the frame stack at it (its own frame on top).
    pub stmts: Vec<(StmtInfo, Vec<Frame>)>,
    /// Each `if` and guarded match arm with the frame stack around it.
    pub ifs: Vec<(IfInfo<'ast>, Vec<Frame>)>,
    pub sites: Vec<Site>,
}

/// Walks one function body.
pub fn body<'ast>(block: &'ast syn::Block, reason_enum: &str, calls: &[String]) -> Body<'ast> {
    let mut v = BodyVisitor {
        reason_enum,
        calls,
        stack: Vec::new(),
        out: Body::default(),
    };
    v.visit_block(block);
    v.out
}

struct BodyVisitor<'ast, 'q> {
    reason_enum: &'q str,
    calls: &'q [String],
    stack: Vec<Frame>,
    out: Body<'ast>,
}

impl BodyVisitor<'_, '_> {
    fn site(&mut self, kind: SiteKind, range: Range<usize>) {
        self.out.sites.push(Site {
            kind,
            range,
            stack: self.stack.clone(),
        });
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let toks: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, t) in toks.iter().enumerate() {
            match t {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if id == self.reason_enum => {
                    if let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(variant)),
                    ) = (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3))
                        && a.as_char() == ':'
                        && a.spacing() == Spacing::Joint
                        && b.as_char() == ':'
                        && is_variant(variant)
                    {
                        let range = id.span().byte_range().start..variant.span().byte_range().end;
                        self.site(SiteKind::Reason(variant.to_string()), range);
                    }
                }
                TokenTree::Ident(id) if self.calls.iter().any(|c| id == c) => {
                    if let Some(TokenTree::Group(g)) = toks.get(i + 1)
                        && g.delimiter() == Delimiter::Parenthesis
                    {
                        let range = id.span().byte_range().start..g.span().byte_range().end;
                        self.site(SiteKind::Call(id.to_string()), range);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for BodyVisitor<'ast, '_> {
    fn visit_block(&mut self, b: &'ast syn::Block) {
        let n = b.stmts.len();
        for (i, stmt) in b.stmts.iter().enumerate() {
            let (kind, semi, expr_range, plain_if) = match stmt {
                syn::Stmt::Local(_) => (StmtKind::Local, true, None, false),
                syn::Stmt::Item(_) => (StmtKind::Item, true, None, false),
                syn::Stmt::Expr(e, semi) => (
                    StmtKind::Expr,
                    semi.is_some(),
                    Some(range_of(e)),
                    matches!(e, syn::Expr::If(x) if x.else_branch.is_none()),
                ),
                syn::Stmt::Macro(m) => (StmtKind::Macro, m.semi_token.is_some(), None, false),
            };
            let info = StmtInfo {
                range: range_of(stmt),
                kind,
                tail: i + 1 == n && !semi,
                expr_range,
                plain_if,
            };
            let idx = self.out.stmts.len();
            self.stack.push(Frame::Stmt(idx));
            self.out.stmts.push((info, self.stack.clone()));
            self.visit_stmt(stmt);
            self.stack.pop();
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {
        // A nested item is not part of this function.
    }

    fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
        let idx = self.out.ifs.len();
        self.out.ifs.push((
            IfInfo {
                kind: CondKind::If,
                range: range_of(i),
                cond: &i.cond,
                then_len: i.then_branch.stmts.len(),
                has_else: i.else_branch.is_some(),
            },
            self.stack.clone(),
        ));
        self.stack.push(Frame::IfCond(idx));
        self.visit_expr(&i.cond);
        self.stack.pop();
        self.stack.push(Frame::IfThen(idx));
        self.visit_block(&i.then_branch);
        self.stack.pop();
        if let Some((_, e)) = &i.else_branch {
            self.stack.push(Frame::IfElse(idx));
            self.visit_expr(e);
            self.stack.pop();
        }
    }

    fn visit_arm(&mut self, a: &'ast syn::Arm) {
        // syn 3 parses an arm's guard into its pattern: `pat if guard`.
        let syn::Pat::Guard(syn::PatGuard { guard, .. }) = &a.pat else {
            visit::visit_arm(self, a);
            return;
        };
        let idx = self.out.ifs.len();
        self.out.ifs.push((
            IfInfo {
                kind: CondKind::ArmGuard,
                range: range_of(a),
                cond: guard,
                then_len: 0,
                has_else: true,
            },
            self.stack.clone(),
        ));
        self.stack.push(Frame::IfCond(idx));
        self.visit_expr(guard);
        self.stack.pop();
        self.stack.push(Frame::IfThen(idx));
        self.visit_expr(&a.body);
        self.stack.pop();
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        let segs = &p.path.segments;
        if p.qself.is_none()
            && segs.len() >= 2
            && segs[segs.len() - 2].ident == self.reason_enum
            && is_variant(&segs[segs.len() - 1].ident)
        {
            let variant = segs[segs.len() - 1].ident.to_string();
            self.site(SiteKind::Reason(variant), range_of(p));
        }
        visit::visit_expr_path(self, p);
    }

    fn visit_expr_struct(&mut self, e: &'ast syn::ExprStruct) {
        // `Enum::Variant { .. }`: a struct-like variant of an error enum
        // listed in `refusal_errors` (reasons themselves are unit variants).
        let segs = &e.path.segments;
        if e.qself.is_none()
            && segs.len() >= 2
            && segs[segs.len() - 2].ident == self.reason_enum
            && is_variant(&segs[segs.len() - 1].ident)
        {
            let variant = segs[segs.len() - 1].ident.to_string();
            self.site(SiteKind::Reason(variant), range_of(&e.path));
        }
        visit::visit_expr_struct(self, e);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func
            && let Some(last) = p.path.segments.last()
            && self.calls.iter().any(|n| last.ident == n)
        {
            self.site(SiteKind::Call(last.ident.to_string()), range_of(c));
        }
        visit::visit_expr_call(self, c);
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        if self.calls.iter().any(|n| c.method == n) {
            let start = range_of(&c.method).start;
            self.site(SiteKind::Call(c.method.to_string()), start..range_of(c).end);
        }
        visit::visit_expr_method_call(self, c);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn module_paths() {
        let p = |s: &str| module_path(&PathBuf::from(s)).join("::");
        assert_eq!(p("gate/src/policy.rs"), "gate::policy");
        assert_eq!(p("gate/src/lib.rs"), "gate");
        assert_eq!(p("gate/src/db/mod.rs"), "gate::db");
        assert_eq!(p("gate/src/db/pool.rs"), "gate::db::pool");
        assert_eq!(p("src/guards.rs"), "guards");
        assert_eq!(p("gate/tests/db_guards.rs"), "gate::db_guards");
    }

    #[test]
    fn functions_get_qualified_paths_and_test_flags() {
        let src = r#"
            fn free() {}
            impl Proposal { fn parse() {} }
            impl<T> Show for &Wrapper<T> { fn show(&self) {} }
            trait Check { fn check(&self) { } fn bare(&self); }
            mod inner { pub fn deep() { fn nested() {} } }
            #[cfg(test)] mod tests { #[test] fn t() {} }
            #[cfg(all(unix, test))] fn helper() {}
        "#;
        let file = parse_file(src).unwrap();
        let fns = functions(&file, vec!["gate".into(), "policy".into()]);
        let paths: Vec<(String, bool)> = fns
            .iter()
            .map(|f| (f.display_path(), f.test_only))
            .collect();
        assert_eq!(
            paths,
            [
                ("gate::policy::free".to_string(), false),
                ("gate::policy::Proposal::parse".to_string(), false),
                ("gate::policy::Wrapper::show".to_string(), false),
                ("gate::policy::Check::check".to_string(), false),
                ("gate::policy::inner::deep".to_string(), false),
                ("gate::policy::tests::t".to_string(), true),
                ("gate::policy::helper".to_string(), true),
            ]
        );
        assert!(fns[1].matches("Proposal::parse"));
        assert!(fns[1].matches("policy::Proposal::parse"));
        assert!(!fns[1].matches("Proposa::parse"));
        assert!(!fns[0].matches("x::free"));
    }

    #[test]
    fn sites_are_found_in_code_and_macros_with_exact_ranges() {
        let src = "fn f(x: u32) -> Result<(), Reason> {\n    if x == 0 { return Err(Reason::Zero); }\n    ensure!(x < 9, Reason::Big);\n    lock_row(&x)?;\n    db.lock_row(1).await;\n    Ok(())\n}\n";
        let file = parse_file(src).unwrap();
        let fns = functions(&file, vec![]);
        let b = body(fns[0].block, "Reason", &["lock_row".to_string()]);
        let texts: Vec<(&SiteKind, &str)> = b
            .sites
            .iter()
            .map(|s| (&s.kind, &src[s.range.clone()]))
            .collect();
        assert_eq!(
            texts,
            [
                (&SiteKind::Reason("Zero".into()), "Reason::Zero"),
                (&SiteKind::Reason("Big".into()), "Reason::Big"),
                (&SiteKind::Call("lock_row".into()), "lock_row(&x)"),
                (&SiteKind::Call("lock_row".into()), "lock_row(1)"),
            ]
        );
        assert_eq!(b.stmts.len(), 6);
        assert_eq!(
            &src[b.stmts[0].0.range.clone()],
            "if x == 0 { return Err(Reason::Zero); }"
        );
        assert!(b.stmts[5].0.tail);
        assert_eq!(line_col(src, b.sites[1].range.start), (3, 20));
    }

    #[test]
    fn a_bom_does_not_shift_ranges() {
        let src = "\u{feff}fn f() { g(Reason::A); }";
        let file = parse_file(src).unwrap();
        let fns = functions(&file, vec![]);
        let b = body(fns[0].block, "Reason", &[]);
        assert_eq!(&src[b.sites[0].range.clone()], "Reason::A");
    }
}
