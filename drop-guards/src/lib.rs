//! The schema-guard contract between the mutation runner (`mutations`) and
//! the test-database facility of the crate under test (for spendgate:
//! `gate::db::fresh_database`), as one typed codec both sides use.
//!
//! When the runner judges a schema guard it runs the guard's named tests with
//!
//! - `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,KIND:TABLE:NAME...]`
//!   ([`encode`] / [`decode`]), where KIND is `constraint`, `trigger`,
//!   `index` or `policy` ([`ObjectKind`]) and TABLE and NAME are plain SQL identifiers
//!   (optionally schema-qualified, [`is_sql_name`]), and
//! - `SPENDGATE_DROP_GUARDS_LOG=/absolute/path`, a file the runner created empty.
//!
//! Every time the facility creates a fresh, migrated database for a test, it
//! must, before handing it out, for each entry in order:
//!
//! 1. run [`DropSpec::sql`]: `ALTER TABLE TABLE DROP CONSTRAINT NAME`,
//!    `DROP TRIGGER NAME ON TABLE`, `DROP INDEX NAME` or `DROP POLICY NAME
//!    ON TABLE` (no `IF EXISTS`);
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
//! statement, and a TABLE or NAME that is not a plain identifier never
//! reaches SQL. [`LogLine`] formats and parses the log's two line shapes;
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
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Constraint,
        ObjectKind::Trigger,
        ObjectKind::Index,
        ObjectKind::Policy,
    ];

    /// The spelling of the contract and the registry.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Constraint => "constraint",
            ObjectKind::Trigger => "trigger",
            ObjectKind::Index => "index",
            ObjectKind::Policy => "policy",
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
    #[error("KIND `{kind}` is not constraint, trigger, index or policy")]
    UnknownKind { kind: String },
    #[error("`{item}`: TABLE and NAME must be plain SQL identifiers")]
    NotSqlName { item: String },
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

    /// The one SQL statement that drops the object.
    pub fn sql(&self) -> String {
        match self.kind {
            ObjectKind::Constraint => {
                format!("ALTER TABLE {} DROP CONSTRAINT {}", self.table, self.name)
            }
            ObjectKind::Trigger => format!("DROP TRIGGER {} ON {}", self.name, self.table),
            ObjectKind::Index => format!("DROP INDEX {}", self.name),
            ObjectKind::Policy => format!("DROP POLICY {} ON {}", self.name, self.table),
        }
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
        ];
        let v = encode(&specs);
        assert_eq!(
            v,
            "constraint:ledger:ck_amount_positive,trigger:ledger_entries:ledger_append_only,index:approvals:uq_live_approval,policy:payment_requests:tenant_rows"
        );
        assert_eq!(decode(&v).unwrap(), specs);
        assert_eq!(decode(&format!(" {v},, ")).unwrap(), specs);
        let sql: Vec<String> = specs.iter().map(DropSpec::sql).collect();
        assert_eq!(
            sql,
            [
                "ALTER TABLE ledger DROP CONSTRAINT ck_amount_positive",
                "DROP TRIGGER ledger_append_only ON ledger_entries",
                "DROP INDEX uq_live_approval",
                "DROP POLICY tenant_rows ON payment_requests",
            ]
        );
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
