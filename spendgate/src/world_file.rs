//! A tenant file: the world format of `scenarios/worlds/*.yaml`, read and
//! checked whole before anything is written.
//!
//! Guarantees:
//! - The file is decoded into the gate's own seed types, which refuse
//!   unknown keys; a decoding error names the file and its line.
//! - [`check`] finds every problem at once, each with an operator's code
//!   (`PRICE_INVALID`, `POLICY_INVALID`, `DELEGATION_INVALID`, ...), the
//!   file, the line and the field: identifiers outside the gate's grammar,
//!   a price that is not a positive amount, a quantity outside 1–10000, a
//!   policy that does not validate, a delegation whose id, budget, expiry,
//!   grantor or grantee is wrong, and the corpus loader's own world checks
//!   (duplicate ids, unknown merchants). A file with any problem is refused
//!   whole.
//! - `now`, which a scenario's clock starts at, may be left out.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Datelike, Utc};
use gate::ident::is_ident;
use gate::service::TenantSeed;
use serde::Deserialize;

use crate::error::Failure;

/// The most a catalog item's `max_quantity` may be (the agent's own limit).
const MAX_QUANTITY: u32 = 10_000;

/// A tenant file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    #[serde(default)]
    pub now: Option<DateTime<Utc>>,
    pub tenants: Vec<TenantSeed>,
}

/// One problem found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub code: &'static str,
    pub line: Option<usize>,
    /// Where in the file: `tenants[acme].catalog[SNACK-BOX].price_paise`.
    pub field: String,
    pub message: String,
}

/// A file that was read, with its text for locating lines.
#[derive(Debug)]
pub struct Loaded {
    pub path: PathBuf,
    pub text: String,
    pub file: TenantFile,
}

/// Reads and decodes `path`.
pub fn read(path: &Path) -> Result<Loaded, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("cannot read {}: {e}", path.display())))?;
    let file: TenantFile = scenarios::yaml::from_str(&text).map_err(|e| {
        let line = e
            .location()
            .map_or(String::new(), |l| format!(", line {}", l.line()));
        Failure::Input(format!("{}{line}: {e}", path.display()))
    })?;
    Ok(Loaded {
        path: path.to_path_buf(),
        text,
        file,
    })
}

impl Loaded {
    /// The first line at or after the lines holding each of `anchors` in
    /// turn that holds `field:`; the last anchor's line when none does.
    fn line_of(&self, anchors: &[&str], field: &str) -> Option<usize> {
        let lines: Vec<&str> = self.text.lines().collect();
        let mut at = 0usize;
        for anchor in anchors {
            at += lines[at..].iter().position(|l| l.contains(anchor))?;
        }
        let key = format!("{field}:");
        let found = lines[at..]
            .iter()
            .position(|l| l.contains(&key))
            .map_or(at, |i| at + i);
        Some(found + 1)
    }

    /// Every problem of the file; empty when it may be applied.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut push = |code, line, field: String, message: String| {
            problems.push(Problem {
                code,
                line,
                field,
                message,
            })
        };
        if self.file.tenants.is_empty() {
            push(
                "WORLD_INVALID",
                self.line_of(&[], "tenants"),
                "tenants".into(),
                "the file names no tenant".into(),
            );
        }
        for t in &self.file.tenants {
            let tenant_anchor = format!("id: {}", t.id);
            let at = |anchors: &[&str], field: &str| {
                let mut all = vec![tenant_anchor.as_str()];
                all.extend_from_slice(anchors);
                self.line_of(&all, field)
            };
            let path = format!("tenants[{}]", t.id);
            if !is_ident(&t.id) {
                push(
                    "IDENTIFIER_INVALID",
                    self.line_of(&[], "id"),
                    format!("{path}.id"),
                    "a tenant id is 1 to 64 ASCII letters, digits, `-`, `_`, `.`, `:`".into(),
                );
            }
            for p in &t.people {
                if !is_ident(&p.id) {
                    push(
                        "IDENTIFIER_INVALID",
                        at(&[], "people"),
                        format!("{path}.people[{}]", p.id.escape_debug()),
                        "a person's id is 1 to 64 ASCII letters, digits, `-`, `_`, `.`, `:`".into(),
                    );
                }
            }
            for a in t.agents.iter().chain(&t.merchants) {
                if !is_ident(a) {
                    push(
                        "IDENTIFIER_INVALID",
                        at(&[], "agents"),
                        format!("{path}: `{}`", a.escape_debug()),
                        "agent and merchant ids are 1 to 64 ASCII letters, digits, `-`, `_`, \
                         `.`, `:`"
                            .into(),
                    );
                }
            }
            for item in &t.catalog {
                let sku_anchor = format!("sku: {}", item.sku);
                let field = |f: &str| format!("{path}.catalog[{}].{f}", item.sku);
                if !is_ident(&item.sku) {
                    push(
                        "IDENTIFIER_INVALID",
                        at(&[&sku_anchor], "sku"),
                        field("sku"),
                        "a sku is 1 to 64 ASCII letters, digits, `-`, `_`, `.`, `:`".into(),
                    );
                }
                if item.price_paise <= 0 {
                    push(
                        "PRICE_INVALID",
                        at(&[&sku_anchor], "price_paise"),
                        field("price_paise"),
                        format!(
                            "{} is not a positive amount of minor units",
                            item.price_paise
                        ),
                    );
                }
                if !(1..=MAX_QUANTITY).contains(&item.max_quantity) {
                    push(
                        "QUANTITY_INVALID",
                        at(&[&sku_anchor], "max_quantity"),
                        field("max_quantity"),
                        format!("{} is not from 1 to {MAX_QUANTITY}", item.max_quantity),
                    );
                }
                let currency_ok = item.currency.len() == 3
                    && item.currency.bytes().all(|b| b.is_ascii_uppercase());
                if !currency_ok {
                    push(
                        "PRICE_INVALID",
                        at(&[&sku_anchor], "currency"),
                        field("currency"),
                        format!(
                            "`{}` is not a three-letter ISO 4217 code",
                            item.currency.escape_debug()
                        ),
                    );
                }
            }
            if let Err(reason) = t.policy.validated() {
                push(
                    "POLICY_INVALID",
                    at(&[], "policy"),
                    format!("{path}.policy"),
                    format!("the policy does not validate ({})", reason.code()),
                );
            }
            for (field, instant) in [
                ("valid_from", t.policy.valid_from),
                ("valid_until", t.policy.valid_until),
            ] {
                if !in_operators_range(instant) {
                    push(
                        "POLICY_INVALID",
                        at(&["policy"], field),
                        format!("{path}.policy.{field}"),
                        "an instant from 1970-01-01 to 9999-12-31 is required".into(),
                    );
                }
            }
            let mut granted: Vec<&str> = Vec::new();
            for g in &t.delegations {
                let anchor = format!("id: {}", g.id);
                let field = |f: &str| format!("{path}.delegations[{}].{f}", g.id);
                if !is_ident(&g.id) {
                    push(
                        "DELEGATION_INVALID",
                        at(&["delegations"], "id"),
                        field("id"),
                        "a delegation id is 1 to 64 ASCII letters, digits, `-`, `_`, `.`, `:`"
                            .into(),
                    );
                }
                if g.budget_paise <= 0 {
                    push(
                        "DELEGATION_INVALID",
                        at(&["delegations", &anchor], "budget_paise"),
                        field("budget_paise"),
                        format!("{} is not a positive budget", g.budget_paise),
                    );
                }
                if g.expires_at.is_some_and(|e| !in_operators_range(e)) {
                    push(
                        "DELEGATION_INVALID",
                        at(&["delegations", &anchor], "expires_at"),
                        field("expires_at"),
                        "an instant from 1970-01-01 to 9999-12-31 is required".into(),
                    );
                }
                let root = t.people.iter().find(|p| p.id == g.from);
                let from_hop = granted.contains(&g.from.as_str());
                match root {
                    Some(p) if !p.may_approve => push(
                        "DELEGATION_GRANTOR_NOT_PERMITTED",
                        at(&["delegations", &anchor], "from"),
                        field("from"),
                        format!("{} may not approve, so may not root a delegation", p.id),
                    ),
                    None if !from_hop => push(
                        "DELEGATION_GRANTOR_NOT_PERMITTED",
                        at(&["delegations", &anchor], "from"),
                        field("from"),
                        format!(
                            "`{}` is neither a human of the tenant who may approve nor an \
                             earlier delegation of this file",
                            g.from.escape_debug()
                        ),
                    ),
                    _ => {}
                }
                if !t.agents.contains(&g.to) {
                    push(
                        "ACTOR_UNKNOWN",
                        at(&["delegations", &anchor], "to"),
                        field("to"),
                        format!("`{}` is not an agent of the tenant", g.to.escape_debug()),
                    );
                }
                granted.push(&g.id);
            }
        }
        let world = scenarios::World {
            now: self.file.now.unwrap_or_default(),
            tenants: self.file.tenants.clone(),
        };
        for message in world.check() {
            push("WORLD_INVALID", None, "tenants".into(), message);
        }
        problems
    }

    /// A problem as one line: `FILE, line L: CODE at FIELD: message`.
    pub fn render(&self, problem: &Problem) -> String {
        let line = problem
            .line
            .map_or(String::new(), |l| format!(", line {l}"));
        format!(
            "{}{line}: {} at {}: {}",
            self.path.display(),
            problem.code,
            problem.field,
            problem.message
        )
    }
}

/// An operator's instant: from 1970-01-01 to 9999-12-31.
fn in_operators_range(instant: DateTime<Utc>) -> bool {
    (1970..=9999).contains(&instant.year())
}
