//! The model of `mutations/registry.yaml`: which guards exist, where each one
//! lives, what it defends and which tests must fail without it.
//!
//! Guarantees: a [`Registry`] that loaded is internally consistent. Ids are
//! unique and safe to embed in Rust string literals and environment
//! variables; every guard names at least one well-formed test; a source guard
//! has exactly one selector (`produces` or `contains`); `clause` is given
//! exactly when the operator is `weaken`; a schema guard's operator is
//! `delete` (drop the object), and a `privilege` one names INSERT, UPDATE,
//! DELETE or TRUNCATE in a registry that names its `app_role` (a plain SQL
//! identifier); `twins` (optional) names other guards of the
//! registry, each once, never the guard itself. Whether the locators still match the code is
//! *not* checked here (see [`crate::locate`] and [`crate::sanity`]).
//!
//! ```yaml
//! version: 1
//! switch: crate::mutant_active      # fn(&str) -> bool called by schemata mode
//! switch_env: SPENDGATE_MUTANT      # the variable the switch reads
//! reason_enum: Reason               # `Reason::X` marks a refusal site
//! migrations: migrations            # where schema objects must be named
//! app_role: spendgate_app           # the role privilege guards are withheld from
//! completeness: {roots: [gate/src], skip_files: [gate/src/reason.rs], calls: [lock_for_update]}
//! scrub_env: [SPENDGATE_SKIP_DB]       # never inherited by builds and tests
//! scratch_exclude: [.spendgate]
//! guards:
//!   - id: policy-merchant-allowlist
//!     kind: source
//!     invariant: A merchant outside the tenant's allowlist is never paid.
//!     threat: T-MERCHANT
//!     tests: [gate/lib::policy::tests::unknown_merchant_denied]
//!     operator: delete
//!     locator: {file: gate/src/policy.rs, function: policy::evaluate, produces: MerchantNotAllowed}
//!   - id: db-approval-single-use
//!     kind: schema
//!     invariant: An approval is consumed at most once.
//!     threat: T-REPLAY
//!     tests: ["gate/test:db_guards::uq_live_approval_refuses_second"]
//!     operator: delete
//!     locator: {object: uq_live_approval, object_kind: index, table: approvals}
//!   - id: db-app-no-update-ledger
//!     kind: schema
//!     invariant: The application role never updates a ledger entry.
//!     threat: T-REPLAY
//!     tests: ["gate/test:db_privileges::update_ledger"]
//!     operator: delete                # grant UPDATE on ledger to app_role
//!     locator: {object: UPDATE, object_kind: privilege, table: ledger}
//! exempt:
//!   - {file: gate/src/policy.rs, function: describe, produces: PolicyInvalid, reason: only names the reason for display}
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::testref::TestRef;

/// The environment variable schemata mode sets to the id of the live mutant,
/// unless the registry names another.
pub const DEFAULT_SWITCH_ENV: &str = "SPENDGATE_MUTANT";

/// The whole registry file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Format version; only `1` exists.
    #[serde(default = "one")]
    pub version: u32,
    /// Path of the `fn(&str) -> bool` that schemata mode calls to ask
    /// whether a guard is switched off, as written in the guarded files
    /// (e.g. `crate::mutant_active`).
    #[serde(default = "default_switch")]
    pub switch: String,
    /// The environment variable the switch function reads.
    #[serde(default = "default_switch_env")]
    pub switch_env: String,
    /// The name of the refusal enum: `REASON_ENUM::Variant` marks a refusal site.
    #[serde(default = "default_reason_enum")]
    pub reason_enum: String,
    /// Directory (relative to the workspace root) of the `.sql` migrations;
    /// every schema guard's object must be named in one of them.
    #[serde(default)]
    pub migrations: Option<PathBuf>,
    /// The database role the code under test connects as: a `privilege`
    /// guard is a privilege the migrations withhold from it. Required when
    /// any guard is a privilege; a plain SQL identifier.
    #[serde(default)]
    pub app_role: Option<String>,
    /// What the completeness check walks.
    #[serde(default)]
    pub completeness: CompletenessConfig,
    /// Environment variables removed from every build and test process the
    /// runner starts, e.g. a switch that lets a test skip itself and pass
    /// (a skipped test must never count as a passing one).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub scrub_env: Vec<String>,
    /// Extra top-level entries not copied into the scratch workspace
    /// (`target`, `.git` and `mutations.out` never are).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub scratch_exclude: Vec<String>,
    /// The guards, in the order they are run and reported.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub guards: Vec<Guard>,
    /// Refusal sites deliberately not registered, each with a reason.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub exempt: Vec<Exemption>,
}

/// Where the completeness check looks for refusal sites.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletenessConfig {
    /// Directories walked for `.rs` files, relative to the workspace root.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub roots: Vec<PathBuf>,
    /// Files under the roots that are not walked (the reason module itself).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub skip_files: Vec<PathBuf>,
    /// Function or method names whose every call is a guard site
    /// (a lock helper, a signature check, a hash binding).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub calls: Vec<String>,
    /// Variants of other error enums that refuse as surely as a reason does
    /// (`ProviderError::Mismatch`: a provider answer that is refused), written
    /// `Enum::Variant`; every path to one is a refusal site too.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub refusal_errors: Vec<String>,
}

/// Whether a guard lives in Rust source or in the database schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    Source,
    Schema,
}

/// What the runner does to a guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// Remove the statement (source) or drop the object (schema).
    Delete,
    /// Make the `if` condition `false`.
    Disable,
    /// Drop one `&&`/`||` clause of the `if` condition.
    Weaken,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::Delete => "delete",
            Operator::Disable => "disable",
            Operator::Weaken => "weaken",
        })
    }
}

/// The kind of a database object a schema guard names (the contract's own type).
pub use ::drop_guards::ObjectKind;

/// How a source locator picks one node inside its function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The statement (or guarding `if`) that produces `REASON_ENUM::Variant`.
    Produces(String),
    /// The smallest statement (or `if` condition, for disable/weaken) whose
    /// source text contains this text, whitespace ignored.
    Contains(String),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Produces(v) => write!(f, "produces: {v}"),
            Selector::Contains(t) => write!(f, "contains: {t:?}"),
        }
    }
}

/// Where a source guard lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLocator {
    /// The file, relative to the workspace root.
    pub file: PathBuf,
    /// The function: a `::` path matched against the end of the function's
    /// qualified path (`evaluate`, `policy::evaluate`, `Proposal::parse`).
    pub function: String,
    /// What to pick inside the function.
    pub selector: Selector,
    /// Which match, 0-based in source order, when several match.
    pub nth: Option<usize>,
    /// For `weaken`: which clause (0-based) of the `&&`/`||` chain to drop.
    pub clause: Option<usize>,
}

/// Where a schema guard lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaLocator {
    /// The object's name (for a privilege: INSERT, UPDATE, DELETE or
    /// TRUNCATE).
    pub object: String,
    /// Constraint, trigger, index, policy or privilege.
    pub object_kind: ObjectKind,
    /// The table it is on.
    pub table: String,
}

/// A guard's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    Source(SourceLocator),
    Schema(SchemaLocator),
}

/// One registered guard.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawGuard")]
pub struct Guard {
    /// Unique id, `[a-z0-9][a-z0-9._-]*`.
    pub id: String,
    /// One sentence: what holds while this guard is in place.
    pub invariant: String,
    /// The taxonomy class the guard defends.
    pub threat: String,
    /// Tests of which at least one must fail without the guard.
    pub tests: Vec<TestRef>,
    /// What the runner does to it.
    pub operator: Operator,
    /// Where it is.
    pub locator: Locator,
    /// The guards that refuse the same thing first (of any threat): the
    /// corpus run switches each off together with this one before it tries
    /// the guards of the same threat.
    pub twins: Vec<String>,
}

impl Guard {
    /// Source or schema.
    pub fn kind(&self) -> GuardKind {
        match self.locator {
            Locator::Source(_) => GuardKind::Source,
            Locator::Schema(_) => GuardKind::Schema,
        }
    }
}

/// A refusal site deliberately left unregistered.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawExemption")]
pub struct Exemption {
    pub file: PathBuf,
    pub function: String,
    pub selector: Selector,
    pub nth: Option<usize>,
    /// Why no test need fail without it.
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuard {
    id: String,
    kind: GuardKind,
    invariant: String,
    threat: String,
    #[serde(deserialize_with = "null_as_empty", default)]
    tests: Vec<TestRef>,
    operator: Operator,
    locator: RawLocator,
    #[serde(default)]
    twins: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocator {
    file: Option<PathBuf>,
    function: Option<String>,
    produces: Option<String>,
    contains: Option<String>,
    nth: Option<usize>,
    clause: Option<usize>,
    object: Option<String>,
    object_kind: Option<ObjectKind>,
    table: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExemption {
    file: PathBuf,
    function: String,
    produces: Option<String>,
    contains: Option<String>,
    nth: Option<usize>,
    reason: String,
}

fn one() -> u32 {
    1
}
fn default_switch() -> String {
    "crate::mutant_active".into()
}
fn default_switch_env() -> String {
    DEFAULT_SWITCH_ENV.into()
}
fn default_reason_enum() -> String {
    "Reason".into()
}

fn null_as_empty<'de, D, T>(d: D) -> std::result::Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

fn selector(
    produces: Option<String>,
    contains: Option<String>,
) -> std::result::Result<Selector, String> {
    match (produces, contains) {
        (Some(p), None) => {
            if is_ident(&p) {
                Ok(Selector::Produces(p))
            } else {
                Err(format!("`produces: {p}` is not a variant name"))
            }
        }
        (None, Some(c)) if !c.trim().is_empty() => Ok(Selector::Contains(c)),
        (None, Some(_)) => Err("`contains` is empty".into()),
        (None, None) => Err("needs a selector: `produces: VARIANT` or `contains: \"text\"`".into()),
        (Some(_), Some(_)) => Err("has both `produces` and `contains`; give one".into()),
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

fn is_fn_path(s: &str) -> bool {
    !s.is_empty() && s.split("::").all(is_ident)
}

/// Whether `id` is a valid guard id.
pub fn is_valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

impl TryFrom<RawGuard> for Guard {
    type Error = String;
    fn try_from(raw: RawGuard) -> std::result::Result<Self, String> {
        let id = raw.id;
        let fail = |m: String| format!("guard `{id}`: {m}");
        if !is_valid_id(&id) {
            return Err(fail("id must match [a-z0-9][a-z0-9._-]*".into()));
        }
        if raw.invariant.trim().is_empty() {
            return Err(fail("`invariant` is empty".into()));
        }
        if raw.threat.trim().is_empty() {
            return Err(fail("`threat` is empty".into()));
        }
        if raw.tests.is_empty() {
            return Err(fail(
                "names no tests; a guard no test defends is not a guard".into(),
            ));
        }
        let mut twins = BTreeSet::new();
        for t in &raw.twins {
            if !is_valid_id(t) || *t == id || !twins.insert(t.as_str()) {
                return Err(fail(format!(
                    "`twins` names `{t}`: a twin is another guard's id, named once"
                )));
            }
        }
        let l = raw.locator;
        let locator = match raw.kind {
            GuardKind::Source => {
                if l.object.is_some() || l.object_kind.is_some() || l.table.is_some() {
                    return Err(fail(
                        "a source locator takes file, function, produces|contains, nth, clause"
                            .into(),
                    ));
                }
                let file = l
                    .file
                    .ok_or_else(|| fail("source locator needs `file`".into()))?;
                if file.is_absolute() {
                    return Err(fail("`file` must be relative to the workspace root".into()));
                }
                let function = l
                    .function
                    .ok_or_else(|| fail("source locator needs `function`".into()))?;
                if !is_fn_path(&function) {
                    return Err(fail(format!(
                        "`function: {function}` is not a path like `policy::evaluate`"
                    )));
                }
                let selector = selector(l.produces, l.contains).map_err(&fail)?;
                match (raw.operator, l.clause) {
                    (Operator::Weaken, None) => {
                        return Err(fail(
                            "`weaken` needs `clause: N` (0-based) naming the clause to drop".into(),
                        ));
                    }
                    (Operator::Delete | Operator::Disable, Some(_)) => {
                        return Err(fail("`clause` is only for `weaken`".into()));
                    }
                    _ => {}
                }
                Locator::Source(SourceLocator {
                    file,
                    function,
                    selector,
                    nth: l.nth,
                    clause: l.clause,
                })
            }
            GuardKind::Schema => {
                if l.file.is_some()
                    || l.function.is_some()
                    || l.produces.is_some()
                    || l.contains.is_some()
                    || l.nth.is_some()
                    || l.clause.is_some()
                {
                    return Err(fail(
                        "a schema locator takes object, object_kind, table".into(),
                    ));
                }
                if raw.operator != Operator::Delete {
                    return Err(fail(
                        "a schema guard's operator is `delete` (drop the object)".into(),
                    ));
                }
                let object = l
                    .object
                    .ok_or_else(|| fail("schema locator needs `object`".into()))?;
                let object_kind = l.object_kind.ok_or_else(|| {
                    fail(
                        "schema locator needs `object_kind: constraint|trigger|index|policy|privilege`"
                            .into(),
                    )
                })?;
                let table = l
                    .table
                    .ok_or_else(|| fail("schema locator needs `table`".into()))?;
                for (what, v) in [("object", &object), ("table", &table)] {
                    if !is_sql_name(v) {
                        return Err(fail(format!("`{what}: {v}` is not a plain SQL identifier")));
                    }
                }
                if object_kind == ObjectKind::Privilege
                    && !::drop_guards::PRIVILEGES.contains(&object.as_str())
                {
                    return Err(fail(format!(
                        "`object: {object}` is not a privilege: INSERT, UPDATE, DELETE or TRUNCATE"
                    )));
                }
                Locator::Schema(SchemaLocator {
                    object,
                    object_kind,
                    table,
                })
            }
        };
        Ok(Guard {
            id,
            invariant: raw.invariant,
            threat: raw.threat,
            tests: raw.tests,
            operator: raw.operator,
            locator,
            twins: raw.twins,
        })
    }
}

pub use ::drop_guards::is_sql_name;

impl TryFrom<RawExemption> for Exemption {
    type Error = String;
    fn try_from(raw: RawExemption) -> std::result::Result<Self, String> {
        let at = format!("exemption in {} fn `{}`", raw.file.display(), raw.function);
        if raw.reason.trim().is_empty() {
            return Err(format!("{at}: `reason` is empty"));
        }
        if !is_fn_path(&raw.function) {
            return Err(format!(
                "{at}: `function` is not a path like `policy::evaluate`"
            ));
        }
        Ok(Exemption {
            selector: selector(raw.produces, raw.contains).map_err(|e| format!("{at}: {e}"))?,
            file: raw.file,
            function: raw.function,
            nth: raw.nth,
            reason: raw.reason,
        })
    }
}

impl Registry {
    /// Reads and validates a registry file.
    pub fn load(path: &Path) -> Result<Registry> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Registry::parse(&text, path)
    }

    /// Parses and validates registry text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Registry> {
        let format = |message: String| Error::RegistryFormat {
            path: path.to_path_buf(),
            message,
        };
        let registry: Registry = crate::yaml::from_str(text).map_err(|e| format(e.to_string()))?;
        if registry.version != 1 {
            return Err(format(format!(
                "version {} is not supported (only 1)",
                registry.version
            )));
        }
        if !registry
            .switch
            .trim_start_matches("::")
            .split("::")
            .all(is_ident)
        {
            return Err(format(format!(
                "`switch: {}` is not a function path",
                registry.switch
            )));
        }
        if !is_ident(&registry.reason_enum) {
            return Err(format(format!(
                "`reason_enum: {}` is not an identifier",
                registry.reason_enum
            )));
        }
        if registry.switch_env.is_empty()
            || !registry
                .switch_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format(format!(
                "`switch_env: {}` is not a variable name",
                registry.switch_env
            )));
        }
        if let Some(role) = &registry.app_role
            && !is_sql_name(role)
        {
            return Err(format(format!(
                "`app_role: {role}` is not a plain SQL identifier"
            )));
        }
        if registry.app_role.is_none()
            && let Some(g) = registry.guards.iter().find(|g| {
                matches!(&g.locator, Locator::Schema(l) if l.object_kind == ObjectKind::Privilege)
            })
        {
            return Err(Error::RegistryEntry {
                id: g.id.clone(),
                message: "a `privilege` guard needs the registry's `app_role`".into(),
            });
        }
        let mut seen = BTreeSet::new();
        for guard in &registry.guards {
            if !seen.insert(guard.id.as_str()) {
                return Err(Error::RegistryEntry {
                    id: guard.id.clone(),
                    message: "id is used twice".into(),
                });
            }
        }
        for guard in &registry.guards {
            if let Some(t) = guard.twins.iter().find(|t| !seen.contains(t.as_str())) {
                return Err(Error::RegistryEntry {
                    id: guard.id.clone(),
                    message: format!("`twins` names `{t}`, which is not in the registry"),
                });
            }
        }
        Ok(registry)
    }

    /// The guard with this id.
    pub fn guard(&self, id: &str) -> Option<&Guard> {
        self.guards.iter().find(|g| g.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Registry> {
        Registry::parse(text, Path::new("registry.yaml"))
    }

    const GOOD: &str = r#"
version: 1
switch: crate::mutant::active
scrub_env: [SPENDGATE_SKIP_DB]
guards:
  - id: cap
    kind: source
    invariant: An amount over the cap is refused.
    threat: T-AMOUNT
    tests: ["mini/lib::guards::tests::cap", {package: mini, target: "test:db", name: x}]
    operator: weaken
    locator: {file: src/guards.rs, function: guards::evaluate, produces: OverCap, clause: 1}
  - id: db-qty
    kind: schema
    invariant: A zero quantity never reaches the ledger.
    threat: T-QTY
    tests: ["mini/test:db_guards::zero"]
    operator: delete
    locator: {object: ck_qty, object_kind: constraint, table: orders}
exempt:
  - {file: src/guards.rs, function: describe, produces: OverCap, reason: display only}
"#;

    #[test]
    fn a_good_registry_loads() {
        let r = parse(GOOD).unwrap();
        assert_eq!(r.switch, "crate::mutant::active");
        assert_eq!(r.switch_env, DEFAULT_SWITCH_ENV);
        assert_eq!(r.scrub_env, ["SPENDGATE_SKIP_DB"]);
        assert_eq!(r.guards.len(), 2);
        let Locator::Source(l) = &r.guards[0].locator else {
            panic!()
        };
        assert_eq!(l.selector, Selector::Produces("OverCap".into()));
        assert_eq!(l.clause, Some(1));
        assert_eq!(r.guards[0].tests.len(), 2);
        assert_eq!(r.guards[1].kind(), GuardKind::Schema);
        assert_eq!(r.exempt[0].reason, "display only");
    }

    #[test]
    fn an_empty_registry_loads() {
        let r = parse("version: 1\nguards:\nexempt: []\n").unwrap();
        assert!(r.guards.is_empty());
    }

    #[test]
    fn inconsistent_entries_are_refused_naming_the_id() {
        let cases = [
            (
                "operator: weaken",
                "operator: delete",
                "`clause` is only for `weaken`",
            ),
            ("clause: 1}", "}", "`clause` is only"), // weaken without clause is checked below
            (
                "produces: OverCap, clause: 1",
                "produces: OverCap, contains: x, clause: 1",
                "both",
            ),
            (
                "tests: [\"mini/lib::guards::tests::cap\", {package: mini, target: \"test:db\", name: x}]",
                "tests: []",
                "names no tests",
            ),
            ("id: cap", "id: Cap!", "id must match"),
            (
                "mini/test:db_guards::zero",
                "mini/db_guards::zero",
                "test target",
            ),
        ];
        for (from, to, want) in cases {
            let text = GOOD.replacen(from, to, 1);
            let err = parse(&text).unwrap_err().to_string();
            if want == "`clause` is only" {
                assert!(err.contains("needs `clause"), "{err}");
            } else {
                assert!(err.contains(want), "{from} -> {to}: {err}");
            }
        }
        let dup = GOOD.replacen("id: db-qty", "id: cap", 1);
        assert!(
            parse(&dup)
                .unwrap_err()
                .to_string()
                .contains("`cap`: id is used twice")
        );
        let schema_disable = GOOD.replacen(
            "operator: delete\n    locator: {object",
            "operator: disable\n    locator: {object",
            1,
        );
        assert!(
            parse(&schema_disable)
                .unwrap_err()
                .to_string()
                .contains("operator is `delete`")
        );
        let unknown_field = GOOD.replacen("threat: T-QTY", "threat: T-QTY\n    color: red", 1);
        assert!(parse(&unknown_field).is_err());
    }

    #[test]
    fn a_privilege_guard_names_a_privilege_in_a_registry_with_an_app_role() {
        let privilege = GOOD.replacen(
            "{object: ck_qty, object_kind: constraint, table: orders}",
            "{object: UPDATE, object_kind: privilege, table: orders}",
            1,
        );
        let with_role = privilege.replacen("version: 1", "version: 1\napp_role: app", 1);
        let r = parse(&with_role).unwrap();
        assert_eq!(r.app_role.as_deref(), Some("app"));
        let Locator::Schema(l) = &r.guards[1].locator else {
            panic!()
        };
        assert_eq!(
            (l.object_kind, l.object.as_str()),
            (ObjectKind::Privilege, "UPDATE")
        );
        let err = parse(&privilege).unwrap_err().to_string();
        assert!(
            err.contains("`db-qty`: a `privilege` guard needs the registry's `app_role`"),
            "{err}"
        );
        for bad in ["SELECT", "update", "ALL"] {
            let text = with_role.replacen("object: UPDATE", &format!("object: {bad}"), 1);
            let err = parse(&text).unwrap_err().to_string();
            assert!(
                err.contains("guard `db-qty`") && err.contains("is not a privilege"),
                "{err}"
            );
        }
        let bad_role = with_role.replacen("app_role: app", "app_role: \"app; drop\"", 1);
        assert!(
            parse(&bad_role)
                .unwrap_err()
                .to_string()
                .contains("`app_role: app; drop`")
        );
    }
}
