//! The schema-guard contract between the runner and the test-database
//! facility of the crate under test (for spendgate: `gate/src/db.rs`).
//!
//! Guarantees (of the contract): when the runner judges a schema guard it
//! runs the guard's named tests with
//!
//! - `SPENDGATE_DROP_GUARDS=KIND:TABLE:NAME[,KIND:TABLE:NAME...]`, where KIND
//!   is `constraint`, `trigger` or `index` and TABLE and NAME are plain SQL
//!   identifiers (optionally schema-qualified, `[A-Za-z_][A-Za-z0-9_]*`
//!   parts joined by `.`), and
//! - `SPENDGATE_DROP_GUARDS_LOG=/absolute/path`, a file the runner created empty.
//!
//! Every time the facility creates a fresh, migrated database for a test, it
//! must, before handing it out, for each entry in order:
//!
//! 1. run [`DropSpec::sql`]: `ALTER TABLE TABLE DROP CONSTRAINT NAME`,
//!    `DROP TRIGGER NAME ON TABLE` or `DROP INDEX NAME` (no `IF EXISTS`);
//! 2. on success append the line `dropped KIND:TABLE:NAME\n` to the log file;
//!    on failure append `failed KIND:TABLE:NAME: ERROR\n` and fail (the
//!    fixture panics; spendgate's `gate::db::fresh_database` returns an error,
//!    never panicking in library code).
//!
//! When `SPENDGATE_DROP_GUARDS` is unset or empty the facility does nothing.
//! The runner removes both variables from every other process it starts.
//! It then counts a schema mutant as judged only if the log shows at least one
//! `dropped` line for the object (so the named tests really ran against a
//! database without it); a `failed` line makes the mutant *unviable* (the
//! registry names an object the migrations do not create), never *caught*.

use std::fmt;
use std::path::Path;

use crate::registry::{ObjectKind, SchemaLocator, is_sql_name};

/// The variable listing the objects to drop.
pub const DROP_GUARDS_ENV: &str = "SPENDGATE_DROP_GUARDS";
/// The variable naming the log file the facility appends to.
pub const DROP_GUARDS_LOG_ENV: &str = "SPENDGATE_DROP_GUARDS_LOG";

/// One object to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropSpec {
    pub kind: ObjectKind,
    pub table: String,
    pub name: String,
}

impl From<&SchemaLocator> for DropSpec {
    fn from(l: &SchemaLocator) -> Self {
        DropSpec {
            kind: l.object_kind,
            table: l.table.clone(),
            name: l.object.clone(),
        }
    }
}

impl fmt::Display for DropSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.kind, self.table, self.name)
    }
}

impl DropSpec {
    /// The one SQL statement that drops the object.
    pub fn sql(&self) -> String {
        match self.kind {
            ObjectKind::Constraint => {
                format!("ALTER TABLE {} DROP CONSTRAINT {}", self.table, self.name)
            }
            ObjectKind::Trigger => format!("DROP TRIGGER {} ON {}", self.name, self.table),
            ObjectKind::Index => format!("DROP INDEX {}", self.name),
        }
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

/// Parses a value of [`DROP_GUARDS_ENV`] (what the facility does).
pub fn parse(value: &str) -> Result<Vec<DropSpec>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let mut parts = item.splitn(3, ':');
            let (Some(kind), Some(table), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("`{item}` is not KIND:TABLE:NAME"));
            };
            let kind = match kind {
                "constraint" => ObjectKind::Constraint,
                "trigger" => ObjectKind::Trigger,
                "index" => ObjectKind::Index,
                other => return Err(format!("`{other}` is not constraint, trigger or index")),
            };
            if !is_sql_name(table) || !is_sql_name(name) {
                return Err(format!(
                    "`{item}`: table and name must be plain SQL identifiers"
                ));
            }
            Ok(DropSpec {
                kind,
                table: table.to_string(),
                name: name.to_string(),
            })
        })
        .collect()
}

/// What the log says happened to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    Dropped(String),
    Failed(String, String),
}

/// Reads the facility's log; a missing file reads as empty.
pub fn read_log(path: &Path) -> Vec<LogLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            if let Some(spec) = l.strip_prefix("dropped ") {
                Some(LogLine::Dropped(spec.trim().to_string()))
            } else if let Some(rest) = l.strip_prefix("failed ") {
                let (spec, err) = rest.split_once(": ").unwrap_or((rest, ""));
                Some(LogLine::Failed(spec.trim().to_string(), err.to_string()))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_env_value_round_trips_and_gives_sql() {
        let specs = vec![
            DropSpec {
                kind: ObjectKind::Constraint,
                table: "ledger".into(),
                name: "ck_amount_positive".into(),
            },
            DropSpec {
                kind: ObjectKind::Trigger,
                table: "ledger".into(),
                name: "ledger_append_only".into(),
            },
            DropSpec {
                kind: ObjectKind::Index,
                table: "approvals".into(),
                name: "uq_live_approval".into(),
            },
        ];
        let v = encode(&specs);
        assert_eq!(
            v,
            "constraint:ledger:ck_amount_positive,trigger:ledger:ledger_append_only,index:approvals:uq_live_approval"
        );
        assert_eq!(parse(&v).unwrap(), specs);
        assert_eq!(
            specs[0].sql(),
            "ALTER TABLE ledger DROP CONSTRAINT ck_amount_positive"
        );
        assert_eq!(specs[1].sql(), "DROP TRIGGER ledger_append_only ON ledger");
        assert_eq!(specs[2].sql(), "DROP INDEX uq_live_approval");
        assert!(parse("").unwrap().is_empty());
        assert!(parse("view:a:b").is_err());
        assert!(parse("constraint:a;drop table x:b").is_err());
    }

    #[test]
    fn the_log_is_read_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        std::fs::write(
            &p,
            "dropped constraint:t:a\nfailed index:t:b: no such index\nnoise\n",
        )
        .unwrap();
        assert_eq!(
            read_log(&p),
            [
                LogLine::Dropped("constraint:t:a".into()),
                LogLine::Failed("index:t:b".into(), "no such index".into())
            ]
        );
        assert!(read_log(&dir.path().join("absent")).is_empty());
    }
}
