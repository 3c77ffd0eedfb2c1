//! The statement that empties a migrated database back to the state the
//! migrations left it in, so a database can serve again without a
//! `CREATE DATABASE`. Compiled only with the `test-support` feature.
//!
//! Guarantees:
//! - [`Reset::for_schema`] reads the schema (as the tables' owner) and writes
//!   one script that, in ONE transaction, deletes every row of every table
//!   the migrations made (`_sqlx_migrations` aside), referencing tables first so every
//!   foreign key holds after each DELETE, restarts every sequence, and
//!   disables the tables' DELETE guards only inside that transaction
//!   (`ledger_append_only` and its kin stay in force for every other
//!   session, and are back before it commits, each exactly as it was: a
//!   trigger enabled ALWAYS stays ALWAYS). Its last statement refuses, and
//!   so rolls back, a database holding what a DELETE cannot take back: a
//!   schema whose fingerprint ([`FINGERPRINT`]: relations, columns,
//!   constraints, indexes, triggers and their enabled state, functions,
//!   policies, privileges, settings) is no longer the one read when the
//!   script was written, a prepared transaction, a large object. A script
//!   that fails changes nothing.
//! - With `require_empty`, it gives `None` when a table holds rows (data the
//!   migrations put there, which a reset would lose), and `None` whenever
//!   the foreign keys form a cycle: such a schema is never reset.
//! - The script is plain text ([`Reset::sql`], [`Reset::from_sql`]), so a
//!   template can carry the script of its own schema (see `factory`).

use sqlx::{Executor, PgConnection};

/// A script that empties one schema's tables; see the module doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reset {
    sql: String,
}

impl Reset {
    /// Reads the schema through `owner` and writes its reset script; `None`
    /// when `require_empty` and a table holds rows, or when the foreign keys
    /// form a cycle.
    pub async fn for_schema(
        owner: &mut PgConnection,
        require_empty: bool,
    ) -> Result<Option<Reset>, sqlx::Error> {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
               AND c.relname <> '_sqlx_migrations' ORDER BY 1",
        )
        .fetch_all(&mut *owner)
        .await?;
        if require_empty && !tables.is_empty() {
            let any = tables
                .iter()
                .map(|t| format!("EXISTS (SELECT 1 FROM {t})"))
                .collect::<Vec<_>>()
                .join(" OR ");
            let filled: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {any}")))
                .fetch_one(&mut *owner)
                .await?;
            if filled {
                tracing::info!("a table holds rows after migrating: databases are not reused");
                return Ok(None);
            }
        }
        let sequences: Vec<String> = sqlx::query_scalar(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind = 'S' ORDER BY 1",
        )
        .fetch_all(&mut *owner)
        .await?;
        // The enabled user triggers that fire on DELETE (bit 3 of tgtype):
        // the append-only guards, which refuse the empty-out itself.
        let guarded: Vec<Guard> = sqlx::query_as(
            "SELECT format('%I.%I', n.nspname, c.relname), format('%I', t.tgname), \
                    t.tgenabled::text FROM pg_trigger t \
             JOIN pg_class c ON c.oid = t.tgrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND NOT t.tgisinternal \
               AND (t.tgtype & 8) <> 0 AND t.tgenabled <> 'D' ORDER BY 1, 2",
        )
        .fetch_all(&mut *owner)
        .await?;
        // Every foreign key between two different tables: (referencing, referenced).
        let references: Vec<(String, String)> = sqlx::query_as(
            "SELECT format('%I.%I', cn.nspname, c.relname), format('%I.%I', fn.nspname, f.relname) \
             FROM pg_constraint k \
             JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace \
             JOIN pg_class f ON f.oid = k.confrelid JOIN pg_namespace fn ON fn.oid = f.relnamespace \
             WHERE k.contype = 'f' AND k.conrelid <> k.confrelid ORDER BY 1, 2",
        )
        .fetch_all(&mut *owner)
        .await?;
        let Some(order) = referencing_first(&tables, &references) else {
            tracing::info!("the foreign keys form a cycle: databases are not reused");
            return Ok(None);
        };
        let fingerprint: Option<String> = sqlx::query_scalar(FINGERPRINT)
            .fetch_one(&mut *owner)
            .await?;
        Ok(Some(Reset {
            sql: reset_sql(
                &order,
                &guarded,
                &sequences,
                &fingerprint.unwrap_or_default(),
            ),
        }))
    }

    /// The script, as [`Reset::from_sql`] takes it back.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// A script [`Reset::sql`] gave; `None` unless it is one transaction
    /// (`BEGIN;` first, `COMMIT;` last), so that nothing else passes for one.
    pub fn from_sql(sql: &str) -> Option<Reset> {
        let one_transaction = sql.starts_with("BEGIN;\n") && sql.ends_with("COMMIT;\n");
        one_transaction.then(|| Reset {
            sql: sql.to_string(),
        })
    }

    /// Runs the script on `owner` (a connection of the tables' owner).
    pub async fn run<'c>(
        &self,
        owner: impl Executor<'c, Database = sqlx::Postgres>,
    ) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(self.sql.as_str()))
            .execute(owner)
            .await
            .map(drop)
    }
}

/// A trigger that fires on DELETE: (table, trigger, `pg_trigger.tgenabled`),
/// the names already quoted.
type Guard = (String, String, String);

/// The statement that turns `trigger` of `table` back on exactly as it was
/// (`O`: on; `A`: always, even where session_replication_role = replica
/// turns the others off; `R`: only there).
fn enable(table: &str, trigger: &str, mode: &str) -> String {
    let how = match mode {
        "A" => "ENABLE ALWAYS",
        "R" => "ENABLE REPLICA",
        _ => "ENABLE",
    };
    format!("ALTER TABLE {table} {how} TRIGGER {trigger};\n")
}

/// One md5 over everything of the current schema that a session could
/// change and a DELETE would not take back: every relation and its
/// privileges, column, default, constraint (and whether it is validated),
/// index, trigger (and whether and how it is enabled), function (its body,
/// privileges, SECURITY DEFINER), row-level policy and rule, the schemas
/// and their privileges, default privileges, event triggers, extensions and
/// the database's own settings. Names, not oids, so a clone of a template
/// has the template's fingerprint.
const FINGERPRINT: &str = r"SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM (
  SELECT format('class %s %s %s %s %s %s', c.relname, c.relkind, c.relacl, c.relrowsecurity, c.relforcerowsecurity, c.reloptions)
    FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace
  UNION ALL SELECT format('column %s.%s %s %s %s %s %s', a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attisdropped, a.attgenerated, a.attacl)
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0
  UNION ALL SELECT format('default %s.%s %s', d.adrelid::regclass, d.adnum, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid WHERE c.relnamespace = current_schema()::regnamespace
  UNION ALL SELECT format('constraint %s %s %s %s %s', k.conrelid::regclass, k.conname, k.convalidated, k.condeferrable, pg_get_constraintdef(k.oid))
    FROM pg_constraint k WHERE k.connamespace = current_schema()::regnamespace
  UNION ALL SELECT format('index %s %s', pg_get_indexdef(i.indexrelid), i.indisvalid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = current_schema()::regnamespace
  UNION ALL SELECT format('trigger %s %s %s %s', t.tgrelid::regclass, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid))
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
  UNION ALL SELECT format('function %s %s %s %s %s', p.oid::regprocedure, md5(p.prosrc), p.prosecdef, p.proconfig, p.proacl)
    FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace
  UNION ALL SELECT format('policy %s %s %s %s %s', p.polrelid::regclass, p.polname, p.polcmd, pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
    FROM pg_policy p
  UNION ALL SELECT format('rule %s %s', r.ev_class::regclass, r.rulename)
    FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE c.relnamespace = current_schema()::regnamespace
  UNION ALL SELECT format('schema %s %s %s', n.nspname, n.nspowner::regrole, n.nspacl)
    FROM pg_namespace n WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
  UNION ALL SELECT format('default acl %s %s', d.defaclobjtype, d.defaclacl) FROM pg_default_acl d
  UNION ALL SELECT format('event trigger %s %s', e.evtname, e.evtenabled) FROM pg_event_trigger e
  UNION ALL SELECT format('extension %s %s', x.extname, x.extversion) FROM pg_extension x
  UNION ALL SELECT format('setting %s %s', s.setrole, s.setconfig) FROM pg_db_role_setting s
    WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) s(x)";

/// The script's last statement: it stops (and rolls back) the reset when
/// the database holds what a DELETE cannot take back: a schema that is no
/// longer `fingerprint` (a trigger turned off, a constraint dropped, a
/// grant), a prepared transaction, a large object.
fn refuse_what_delete_leaves(fingerprint: &str) -> String {
    format!(
        "DO $reset$ BEGIN \
         IF EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE database = current_database()) \
            OR EXISTS (SELECT 1 FROM pg_largeobject_metadata) THEN \
           RAISE EXCEPTION 'this database holds a prepared transaction or a large object: not reset'; \
         END IF; \
         IF ({}) IS DISTINCT FROM '{}' THEN \
           RAISE EXCEPTION 'this database''s schema is no longer the one its reset was written for: not reset'; \
         END IF; END $reset$;\n",
        FINGERPRINT.replace('\n', " "),
        fingerprint.replace('\'', "''")
    )
}

/// The script that empties the tables `order` lists (referencing tables
/// before the tables they reference, so every foreign key holds after each
/// DELETE), with the DELETE guards of `guarded` off only inside its one
/// transaction (each turned back on as it was: an ALWAYS trigger stays
/// ALWAYS), and every sequence restarted.
///
/// Why DELETE and not TRUNCATE: a TRUNCATE gives each table and index a new
/// file; for these small tables it cost 40 to 63 ms where the DELETEs cost
/// 1.5 ms (pgbench over both statements on one throwaway server, 2026-12-02).
fn reset_sql(
    order: &[String],
    guarded: &[Guard],
    sequences: &[String],
    fingerprint: &str,
) -> String {
    let mut sql = String::from("BEGIN;\n");
    for (table, trigger, _) in guarded {
        sql.push_str(&format!("ALTER TABLE {table} DISABLE TRIGGER {trigger};\n"));
    }
    for table in order {
        sql.push_str(&format!("DELETE FROM {table};\n"));
    }
    for sequence in sequences {
        sql.push_str(&format!("ALTER SEQUENCE {sequence} RESTART;\n"));
    }
    for (table, trigger, mode) in guarded {
        sql.push_str(&enable(table, trigger, mode));
    }
    sql.push_str(&refuse_what_delete_leaves(fingerprint));
    sql.push_str("COMMIT;\n");
    sql
}

/// `tables` ordered so that every table comes before each table it
/// references (`references` holds (referencing, referenced) pairs); `None`
/// when the references form a cycle. Ties keep the order of `tables`.
fn referencing_first(tables: &[String], references: &[(String, String)]) -> Option<Vec<String>> {
    let mut left: Vec<&String> = tables.iter().collect();
    let mut order = Vec::with_capacity(tables.len());
    while !left.is_empty() {
        // A table nothing still left references can go now.
        let free = left.iter().position(|t| {
            !references
                .iter()
                .any(|(from, to)| to == *t && from != *t && left.contains(&from))
        })?;
        order.push(left.remove(free).clone());
    }
    Some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn referencing_tables_are_emptied_before_what_they_reference() {
        let tables = names(&["tenants", "agents", "requests", "ledger"]);
        let refs = pairs(&[
            ("agents", "tenants"),
            ("requests", "agents"),
            ("requests", "tenants"),
            ("ledger", "requests"),
        ]);
        assert_eq!(
            referencing_first(&tables, &refs),
            Some(names(&["ledger", "requests", "agents", "tenants"]))
        );
    }

    #[test]
    fn a_table_referencing_itself_is_no_cycle_and_unrelated_tables_keep_their_order() {
        let tables = names(&["b", "delegations", "a"]);
        let refs = pairs(&[("delegations", "delegations")]);
        assert_eq!(referencing_first(&tables, &refs), Some(tables.clone()));
    }

    #[test]
    fn a_cycle_between_tables_has_no_order() {
        let tables = names(&["a", "b", "c"]);
        let refs = pairs(&[("a", "b"), ("b", "a")]);
        assert_eq!(referencing_first(&tables, &refs), None);
    }

    #[test]
    fn the_reset_lifts_the_guards_only_inside_its_transaction_and_checks_the_schema_last() {
        let guard = |table: &str, trigger: &str, mode: &str| {
            (table.to_string(), trigger.to_string(), mode.to_string())
        };
        let sql = reset_sql(
            &names(&["ledger", "requests", "tenants"]),
            &[
                guard("ledger", "append_only", "O"),
                guard("requests", "captured", "A"),
                guard("requests", "replica_only", "R"),
            ],
            &names(&["seq"]),
            "0123abcd",
        );
        let lines: Vec<&str> = sql.lines().collect();
        assert_eq!(
            lines,
            [
                "BEGIN;",
                "ALTER TABLE ledger DISABLE TRIGGER append_only;",
                "ALTER TABLE requests DISABLE TRIGGER captured;",
                "ALTER TABLE requests DISABLE TRIGGER replica_only;",
                "DELETE FROM ledger;",
                "DELETE FROM requests;",
                "DELETE FROM tenants;",
                "ALTER SEQUENCE seq RESTART;",
                "ALTER TABLE ledger ENABLE TRIGGER append_only;",
                "ALTER TABLE requests ENABLE ALWAYS TRIGGER captured;",
                "ALTER TABLE requests ENABLE REPLICA TRIGGER replica_only;",
                refuse_what_delete_leaves("0123abcd").trim_end(),
                "COMMIT;",
            ]
        );
        let reset = Reset::from_sql(&sql);
        assert_eq!(reset.as_ref().map(Reset::sql), Some(sql.as_str()));
    }

    #[test]
    fn only_one_whole_transaction_passes_for_a_script() {
        assert_eq!(Reset::from_sql(""), None);
        assert_eq!(Reset::from_sql("DELETE FROM t;\n"), None);
        assert_eq!(Reset::from_sql("BEGIN;\nDELETE FROM t;\n"), None);
        assert_eq!(Reset::from_sql("DELETE FROM t;\nCOMMIT;\n"), None);
        assert!(Reset::from_sql("BEGIN;\nDELETE FROM t;\nCOMMIT;\n").is_some());
    }
}
