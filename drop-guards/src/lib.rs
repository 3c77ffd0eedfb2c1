//! The schema-guard contract between the mutation runner (`mutations`) and
//! the test-database facility of the crate under test (for spendgate:
//! `gate::db::fresh_database`), as one typed codec both sides use.
//!
//! When the runner judges a schema guard it runs the guard's named tests with
//!
//! - `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,KIND:TABLE:NAME...]`
//!   ([`encode`] / [`decode`]), where KIND is `constraint`, `trigger`,
//!   `index`, `policy` or `privilege` ([`ObjectKind`]) and TABLE and NAME are
//!   plain SQL identifiers (optionally schema-qualified, [`is_sql_name`]); for
//!   `privilege` NAME is one of `INSERT`, `UPDATE`, `DELETE`, `TRUNCATE`
//!   ([`PRIVILEGES`]): a privilege the application role is refused on TABLE,
//!   itself a guard, and
//! - `SPENDGATE_DROP_GUARDS_LOG=/absolute/path`, a file the runner created empty.
//!
//! Every time the facility creates a fresh, migrated database for a test, it
//! must, before handing it out, for each entry in order:
//!
//! 1. run [`DropSpec::sql`] with its application role (the role the code
//!    under test connects as): `ALTER TABLE TABLE DROP CONSTRAINT NAME`,
//!    `DROP TRIGGER NAME ON TABLE`, `DROP INDEX NAME`, `DROP POLICY NAME ON
//!    TABLE` (no `IF EXISTS`), or, for a privilege, `GRANT NAME ON TABLE
//!    TABLE TO ROLE` (the withheld privilege granted);
//! 2. on success append [`LogLine::Dropped`] (`dropped KIND:TABLE:NAME`) to
//!    the log file; on failure append [`LogLine::Failed`] (`failed ITEM:
//!    ERROR`) and fail.
//!
//! When `SPENDGATE_DROP_GUARDS` is unset or empty the facility does nothing.
//! The runner counts a schema mutant as judged only if the log shows a
//! `dropped` line for the object; a `failed` line makes it *unviable*.
//!
//! Guarantees: [`decode`] accepts exactly what [`encode`] writes (blank items
//! ignored) and refuses anything else with a typed [`ContractError`] naming
//! the item: an unknown KIND is an error, never a fall-through to another
//! statement, a TABLE or NAME that is not a plain identifier never reaches
//! SQL, a privilege outside [`PRIVILEGES`] is refused, and
//! [`DropSpec::sql`] refuses a role that is not a plain identifier. [`LogLine`] formats and parses the log's two line shapes;
//! other lines are ignored by [`read_log`].
#![forbid(unsafe_code)]

use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The variable listing the objects to drop.
pub const DROP_GUARDS_ENV: &str = "SPENDGATE_DROP_GUARDS";
/// The variable naming the log file the facility appends to.
pub const DROP_GUARDS_LOG_ENV: &str = "SPENDGATE_DROP_GUARDS_LOG";

/// The kind of a database object a schema guard names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Constraint,
    Trigger,
    Index,
    /// A row-level security policy.
    Policy,
    /// A table privilege withheld from the application role; "dropping" it
    /// grants it.
    Privilege,
}

/// The privileges a `privilege` item may name, spelled as SQL spells them.
pub const PRIVILEGES: [&str; 4] = ["INSERT", "UPDATE", "DELETE", "TRUNCATE"];

impl ObjectKind {
    /// Every kind.
    pub const ALL: [ObjectKind; 5] = [
        ObjectKind::Constraint,
        ObjectKind::Trigger,
        ObjectKind::Index,
        ObjectKind::Policy,
        ObjectKind::Privilege,
    ];

    /// The spelling of the contract and the registry.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Constraint => "constraint",
            ObjectKind::Trigger => "trigger",
            ObjectKind::Index => "index",
            ObjectKind::Policy => "policy",
            ObjectKind::Privilege => "privilege",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ObjectKind {
    type Err = ContractError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| ContractError::UnknownKind { kind: s.to_owned() })
    }
}

/// Why a `SPENDGATE_DROP_GUARDS` item was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("`{item}` is not KIND:TABLE:NAME")]
    NotKindTableName { item: String },
    #[error("KIND `{kind}` is not constraint, trigger, index, policy or privilege")]
    UnknownKind { kind: String },
    #[error("`{item}`: TABLE and NAME must be plain SQL identifiers")]
    NotSqlName { item: String },
    #[error("`{item}`: a privilege is INSERT, UPDATE, DELETE or TRUNCATE")]
    NotPrivilege { item: String },
    #[error("`{role}`: the application role must be a plain SQL identifier")]
    NotSqlRole { role: String },
}

/// A plain (optionally schema-qualified) SQL identifier: safe to splice
/// into DDL and into the `SPENDGATE_DROP_GUARDS` list.
pub fn is_sql_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// One object a fresh database goes without.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DropSpec {
    kind: ObjectKind,
    table: String,
    name: String,
}

impl DropSpec {
    /// The object, or why its table or name cannot be spliced into SQL.
    pub fn new(kind: ObjectKind, table: &str, name: &str) -> Result<DropSpec, ContractError> {
        if !is_sql_name(table) || !is_sql_name(name) {
            return Err(ContractError::NotSqlName {
                item: format!("{kind}:{table}:{name}"),
            });
        }
        if kind == ObjectKind::Privilege && !PRIVILEGES.contains(&name) {
            return Err(ContractError::NotPrivilege {
                item: format!("{kind}:{table}:{name}"),
            });
        }
        Ok(DropSpec {
            kind,
            table: table.to_owned(),
            name: name.to_owned(),
        })
    }

    pub fn kind(&self) -> ObjectKind {
        self.kind
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The one SQL statement that drops the object (for a privilege: grants
    /// it to `app_role`, the role the code under test connects as), or
    /// [`ContractError::NotSqlRole`] when `app_role` is not a plain
    /// identifier.
    pub fn sql(&self, app_role: &str) -> Result<String, ContractError> {
        if !is_sql_name(app_role) {
            return Err(ContractError::NotSqlRole {
                role: app_role.to_owned(),
            });
        }
        Ok(match self.kind {
            ObjectKind::Constraint => {
                format!("ALTER TABLE {} DROP CONSTRAINT {}", self.table, self.name)
            }
            ObjectKind::Trigger => format!("DROP TRIGGER {} ON {}", self.name, self.table),
            ObjectKind::Index => format!("DROP INDEX {}", self.name),
            ObjectKind::Policy => format!("DROP POLICY {} ON {}", self.name, self.table),
            ObjectKind::Privilege => {
                format!("GRANT {} ON TABLE {} TO {app_role}", self.name, self.table)
            }
        })
    }
}

impl fmt::Display for DropSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.kind, self.table, self.name)
    }
}

impl FromStr for DropSpec {
    type Err = ContractError;
    fn from_str(item: &str) -> Result<Self, Self::Err> {
        let mut parts = item.splitn(3, ':');
        let (Some(kind), Some(table), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(ContractError::NotKindTableName {
                item: item.to_owned(),
            });
        };
        DropSpec::new(kind.parse()?, table, name)
    }
}

/// The value of [`DROP_GUARDS_ENV`] for these objects.
pub fn encode(specs: &[DropSpec]) -> String {
    specs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A value of [`DROP_GUARDS_ENV`]: every item, or the first refusal with
/// the item it refused.
pub fn decode(value: &str) -> Result<Vec<DropSpec>, (String, ContractError)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| item.parse().map_err(|e| (item.to_owned(), e)))
        .collect()
}

/// One line of the facility's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    /// `dropped KIND:TABLE:NAME`: a fresh database went without the object.
    Dropped(DropSpec),
    /// `failed ITEM: ERROR`: the item could not be decoded or dropped.
    Failed { item: String, message: String },
}

impl fmt::Display for LogLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogLine::Dropped(spec) => write!(f, "dropped {spec}"),
            // One line: a message's own newlines would split it.
            LogLine::Failed { item, message } => {
                write!(f, "failed {item}: {}", message.replace('\n', " "))
            }
        }
    }
}

impl LogLine {
    /// One line of the log, or `None` for a line of neither shape.
    pub fn parse(line: &str) -> Option<LogLine> {
        if let Some(spec) = line.strip_prefix("dropped ") {
            spec.trim().parse().ok().map(LogLine::Dropped)
        } else {
            let rest = line.strip_prefix("failed ")?;
            let (item, message) = rest.split_once(": ").unwrap_or((rest, ""));
            Some(LogLine::Failed {
                item: item.trim().to_owned(),
                message: message.to_owned(),
            })
        }
    }

    /// Whether this line is about `spec`.
    pub fn is_about(&self, spec: &DropSpec) -> bool {
        match self {
            LogLine::Dropped(s) => s == spec,
            LogLine::Failed { item, .. } => *item == spec.to_string(),
        }
    }
}

/// Reads the facility's log; a missing file reads as empty.
pub fn read_log(path: &Path) -> Vec<LogLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(LogLine::parse)
        .collect()
}

/// Appends one line to the log (creating the file when missing).
pub fn append_log(path: &Path, line: &LogLine) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?
        .write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ObjectKind, table: &str, name: &str) -> DropSpec {
        DropSpec::new(kind, table, name).unwrap()
    }

    #[test]
    fn the_env_value_round_trips_and_gives_sql() {
        let specs = vec![
            spec(ObjectKind::Constraint, "ledger", "ck_amount_positive"),
            spec(ObjectKind::Trigger, "ledger_entries", "ledger_append_only"),
            spec(ObjectKind::Index, "approvals", "uq_live_approval"),
            spec(ObjectKind::Policy, "payment_requests", "tenant_rows"),
            spec(ObjectKind::Privilege, "ledger_entries", "UPDATE"),
        ];
        let v = encode(&specs);
        assert_eq!(
            v,
            "constraint:ledger:ck_amount_positive,trigger:ledger_entries:ledger_append_only,index:approvals:uq_live_approval,policy:payment_requests:tenant_rows,privilege:ledger_entries:UPDATE"
        );
        assert_eq!(decode(&v).unwrap(), specs);
        assert_eq!(decode(&format!(" {v},, ")).unwrap(), specs);
        let sql: Vec<String> = specs.iter().map(|s| s.sql("app").unwrap()).collect();
        assert_eq!(
            sql,
            [
                "ALTER TABLE ledger DROP CONSTRAINT ck_amount_positive",
                "DROP TRIGGER ledger_append_only ON ledger_entries",
                "DROP INDEX uq_live_approval",
                "DROP POLICY tenant_rows ON payment_requests",
                "GRANT UPDATE ON TABLE ledger_entries TO app",
            ]
        );
        for privilege in PRIVILEGES {
            let item = format!("privilege:public.people:{privilege}");
            let spec: DropSpec = item.parse().unwrap();
            assert_eq!(spec.to_string(), item);
            assert_eq!(
                spec.sql("spendgate_app").unwrap(),
                format!("GRANT {privilege} ON TABLE public.people TO spendgate_app")
            );
        }
        assert!(decode("").unwrap().is_empty());
        assert!(decode("constraint:public.t:ck_x").is_ok());
    }

    #[test]
    fn refusals_are_typed_and_name_the_item() {
        let cases = [
            (
                "public.approvals:x",
                ContractError::NotKindTableName {
                    item: "public.approvals:x".into(),
                },
            ),
            (
                "view:a:b",
                ContractError::UnknownKind {
                    kind: "view".into(),
                },
            ),
            // Case matters: the contract spells kinds in lower case.
            (
                "INDEX:a:b",
                ContractError::UnknownKind {
                    kind: "INDEX".into(),
                },
            ),
            (
                "constraint:a;drop table x:b",
                ContractError::NotSqlName {
                    item: "constraint:a;drop table x:b".into(),
                },
            ),
            (
                "index:t:\"x\"",
                ContractError::NotSqlName {
                    item: "index:t:\"x\"".into(),
                },
            ),
            (
                "trigger::x",
                ContractError::NotSqlName {
                    item: "trigger::x".into(),
                },
            ),
            // A privilege is one of four, in SQL's upper case: never SELECT
            // (no guard withholds a read), never ALL, never a role's name.
            (
                "privilege:ledger_entries:SELECT",
                ContractError::NotPrivilege {
                    item: "privilege:ledger_entries:SELECT".into(),
                },
            ),
            (
                "privilege:ledger_entries:ALL",
                ContractError::NotPrivilege {
                    item: "privilege:ledger_entries:ALL".into(),
                },
            ),
            (
                "privilege:ledger_entries:update",
                ContractError::NotPrivilege {
                    item: "privilege:ledger_entries:update".into(),
                },
            ),
            (
                "privilege:ledger_entries:UPDATE;DROP",
                ContractError::NotSqlName {
                    item: "privilege:ledger_entries:UPDATE;DROP".into(),
                },
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(
                decode(&format!("constraint:t:ok,{bad}")),
                Err((bad.to_owned(), want)),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_role_a_privilege_is_granted_to_is_a_plain_identifier() {
        let grant = spec(ObjectKind::Privilege, "people", "INSERT");
        let drop = spec(ObjectKind::Trigger, "ledger_entries", "ledger_append_only");
        for bad in ["", "app; DROP TABLE people", "\"app\"", "app role"] {
            let want = Err(ContractError::NotSqlRole { role: bad.into() });
            assert_eq!(grant.sql(bad), want, "{bad}");
            assert_eq!(drop.sql(bad), want, "{bad}");
        }
    }

    #[test]
    fn kinds_round_trip_through_their_spelling_and_serde() {
        for kind in ObjectKind::ALL {
            assert_eq!(kind.as_str().parse::<ObjectKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.as_str());
        }
    }

    #[test]
    fn log_lines_round_trip_and_other_lines_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let dropped = LogLine::Dropped(spec(ObjectKind::Constraint, "t", "a"));
        let failed = LogLine::Failed {
            item: "index:t:b".into(),
            message: "no such\nindex".into(),
        };
        append_log(&p, &dropped).unwrap();
        append_log(&p, &failed).unwrap();
        std::fs::write(
            &p,
            std::fs::read_to_string(&p).unwrap() + "noise\ndropped view:t:c\n",
        )
        .unwrap();
        assert_eq!(
            read_log(&p),
            [
                dropped.clone(),
                LogLine::Failed {
                    item: "index:t:b".into(),
                    message: "no such index".into()
                }
            ]
        );
        assert!(dropped.is_about(&spec(ObjectKind::Constraint, "t", "a")));
        assert!(!dropped.is_about(&spec(ObjectKind::Index, "t", "a")));
        assert!(failed.is_about(&spec(ObjectKind::Index, "t", "b")));
        assert!(read_log(&dir.path().join("absent")).is_empty());
    }
}
