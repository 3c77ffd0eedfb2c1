//! The migrations as text: is a schema guard's object named in them, and is
//! a privilege guard's privilege still withheld by them?
//!
//! Guarantees: [`check_schema_object`] succeeds only if the object's name
//! (its last `.` part, case-insensitively, as a whole SQL word) appears in
//! some `.sql` file under the registry's migrations directory, read in name
//! order, recursively; otherwise [`Error::SchemaDrift`] names the entry.
//!
//! For a `privilege` guard it instead replays, in that order, every `CREATE
//! TABLE` and every `GRANT`/`REVOKE` of table privileges (on named tables, on
//! `ALL TABLES IN SCHEMA`, and `ALTER DEFAULT PRIVILEGES .. ON TABLES`),
//! comments stripped, and succeeds only if the table is created and, after
//! the last migration, the registry's `app_role` does not hold the privilege
//! on it (a grant to `PUBLIC` or of `ALL` counts; a column-level grant
//! counts, a column-level revoke does not clear a table grant; a statement
//! inside a `DO` block counts as run). A table never created is
//! [`Error::SchemaDrift`]; a privilege held is [`Error::PrivilegeGranted`]
//! naming the migration file that granted it last; a grant to the role whose
//! privileges or tables are built at run time (`format('GRANT %s ..')`) is
//! [`Error::PrivilegeGranted`] too, since it cannot be judged from the text.
//! The replay errs toward "granted": it is a drift check, and the database
//! test of the privilege (the guard's named test) is the proof.
//!
//! A registry that names no migrations directory checks nothing. Read only.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::registry::{ObjectKind, Registry, SchemaLocator};

/// The schema object is named in some `.sql` file of the migrations
/// directory (a no-op when the registry names none).
pub fn check_schema_object(
    root: &Path,
    registry: &Registry,
    id: &str,
    loc: &SchemaLocator,
) -> Result<()> {
    let Some(dir) = &registry.migrations else {
        return Ok(());
    };
    let dir = root.join(dir);
    if loc.object_kind == ObjectKind::Privilege {
        return check_privilege_withheld(registry, &dir, id, loc);
    }
    let mut files = Vec::new();
    collect_sql(&dir, &mut files)?;
    let mut sql = String::new();
    for (_, text) in &files {
        sql.push_str(text);
        sql.push('\n');
    }
    let name = loc
        .object
        .rsplit('.')
        .next()
        .unwrap_or(&loc.object)
        .to_ascii_lowercase();
    let lower = sql.to_ascii_lowercase();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let named = lower.match_indices(&name).any(|(i, _)| {
        !word(lower[..i].chars().next_back()) && !word(lower[i + name.len()..].chars().next())
    });
    if named {
        Ok(())
    } else {
        Err(Error::SchemaDrift {
            id: id.to_string(),
            object_kind: loc.object_kind.to_string(),
            object: loc.object.clone(),
            table: loc.table.clone(),
            dir,
        })
    }
}

/// Every `.sql` file under `dir` with its text, in name order, recursively.
fn collect_sql(dir: &Path, out: &mut Vec<(PathBuf, String)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_sql(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "sql") {
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            out.push((p, text));
        }
    }
    Ok(())
}

/// The privilege of a `privilege` locator is withheld from the registry's
/// application role after the last migration (see the module docs).
fn check_privilege_withheld(
    registry: &Registry,
    dir: &Path,
    id: &str,
    loc: &SchemaLocator,
) -> Result<()> {
    let Some(role) = registry.app_role.as_deref() else {
        return Err(Error::RegistryEntry {
            id: id.to_string(),
            message: "a `privilege` guard needs the registry's `app_role`".into(),
        });
    };
    let mut files = Vec::new();
    collect_sql(dir, &mut files)?;
    let table = table_key(&loc.table);
    let privilege = loc.object.to_ascii_lowercase();
    let role = role.to_ascii_lowercase();
    let mut created = false;
    let mut held: Option<PathBuf> = None;
    let mut by_default: Option<PathBuf> = None;
    for (file, text) in &files {
        for event in events(text) {
            match event {
                Event::Create(name) => {
                    if table_key(&name) == table {
                        created = true;
                        held = by_default.clone();
                    }
                }
                Event::Privileges(g) => {
                    let to_role = g.roles.contains(&role);
                    let to_public = g.roles.iter().any(|r| r == "public");
                    let names = g
                        .privileges
                        .iter()
                        .any(|p| p.name == privilege || p.name == "all" || p.name.contains('%'));
                    if !names || !(to_role || (g.grant && to_public)) {
                        continue;
                    }
                    if g.dynamic {
                        return Err(granted(id, loc, role.as_str(), file));
                    }
                    let column = g
                        .privileges
                        .iter()
                        .filter(|p| p.name == privilege || p.name == "all")
                        .all(|p| p.columns);
                    match &g.target {
                        Target::Tables(names) => {
                            if !names.iter().any(|n| table_key(n) == table) {
                                continue;
                            }
                            if g.grant {
                                held = Some(file.clone());
                            } else if !column && to_role {
                                held = None;
                            }
                        }
                        Target::AllTables(schema) => {
                            if created && table_schema(&table) == schema {
                                if g.grant {
                                    held = Some(file.clone());
                                } else if to_role {
                                    held = None;
                                }
                            }
                        }
                        Target::Default => {
                            if g.grant {
                                by_default = Some(file.clone());
                            } else if to_role {
                                by_default = None;
                            }
                        }
                    }
                }
            }
        }
    }
    if !created {
        return Err(Error::SchemaDrift {
            id: id.to_string(),
            object_kind: loc.object_kind.to_string(),
            object: loc.object.clone(),
            table: loc.table.clone(),
            dir: dir.to_path_buf(),
        });
    }
    match held {
        Some(file) => Err(granted(id, loc, role.as_str(), &file)),
        None => Ok(()),
    }
}

fn granted(id: &str, loc: &SchemaLocator, role: &str, file: &Path) -> Error {
    Error::PrivilegeGranted {
        id: id.to_string(),
        privilege: loc.object.clone(),
        table: loc.table.clone(),
        role: role.to_string(),
        file: file.to_path_buf(),
    }
}

/// A table name as the replay compares it: lower case, `public.` implied.
fn table_key(name: &str) -> String {
    let name = name.to_ascii_lowercase();
    if name.contains('.') {
        name
    } else {
        format!("public.{name}")
    }
}

fn table_schema(key: &str) -> &str {
    key.split_once('.').map_or("public", |(schema, _)| schema)
}

/// What one statement of a migration does to table privileges.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Create(String),
    Privileges(Grant),
}

#[derive(Debug, PartialEq, Eq)]
struct Grant {
    grant: bool,
    privileges: Vec<Privilege>,
    target: Target,
    roles: Vec<String>,
    /// Some privilege or table is a `format` placeholder (`%s`, `%I`).
    dynamic: bool,
}

#[derive(Debug, PartialEq, Eq)]
struct Privilege {
    name: String,
    /// Granted on listed columns only.
    columns: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum Target {
    Tables(Vec<String>),
    /// `ON ALL TABLES IN SCHEMA s`: the tables that exist now.
    AllTables(String),
    /// `ALTER DEFAULT PRIVILEGES .. ON TABLES`: the tables created later.
    Default,
}

/// The text's words (lower case; `.`, `%`, `$` and `_` inside a word) and
/// the punctuation `,`, `(`, `)`, `;`, comments dropped.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            out.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        if c == '-' && chars.peek() == Some(&'-') {
            flush(&mut word, &mut out);
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            flush(&mut word, &mut out);
            chars.next();
            let mut last = ' ';
            for c in chars.by_ref() {
                if last == '*' && c == '/' {
                    break;
                }
                last = c;
            }
        } else if c.is_ascii_alphanumeric() || "._%$".contains(c) {
            word.push(c.to_ascii_lowercase());
        } else {
            flush(&mut word, &mut out);
            if ",();".contains(c) {
                out.push(c.to_string());
            }
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The `CREATE TABLE`s and table `GRANT`/`REVOKE`s of one file, in order.
fn events(text: &str) -> Vec<Event> {
    let t = tokens(text);
    let at = |i: usize| t.get(i).map_or("", String::as_str);
    let mut out = Vec::new();
    let mut default_privileges = false;
    let mut i = 0;
    while i < t.len() {
        match at(i) {
            ";" => default_privileges = false,
            "alter" if at(i + 1) == "default" && at(i + 2) == "privileges" => {
                default_privileges = true;
            }
            "create" => {
                let mut j = i + 1;
                while matches!(at(j), "unlogged" | "temporary" | "temp") {
                    j += 1;
                }
                if at(j) == "table" {
                    j += 1;
                    if at(j) == "if" && at(j + 1) == "not" && at(j + 2) == "exists" {
                        j += 3;
                    }
                    if !at(j).is_empty() && !",();".contains(at(j)) {
                        out.push(Event::Create(at(j).to_string()));
                    }
                }
            }
            "grant" | "revoke" => {
                if let Some(g) = grant_at(&t, i, default_privileges) {
                    out.push(Event::Privileges(g));
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The table `GRANT`/`REVOKE` starting at token `i`, or `None` when it is
/// not one (a role membership, a grant on sequences, schemas or functions, a
/// word in a message).
fn grant_at(t: &[String], i: usize, default_privileges: bool) -> Option<Grant> {
    let at = |i: usize| t.get(i).map_or("", String::as_str);
    let grant = at(i) == "grant";
    let mut j = i + 1;
    if !grant && at(j) == "grant" && at(j + 1) == "option" && at(j + 2) == "for" {
        j += 3;
    }
    let mut privileges = Vec::new();
    let mut dynamic = false;
    loop {
        let name = at(j);
        if name.is_empty() || matches!(name, ";" | "to" | "from" | "on" | "(" | ")" | ",") {
            return None;
        }
        dynamic |= name.contains('%');
        j += 1;
        if at(j) == "privileges" {
            j += 1;
        }
        let mut columns = false;
        if at(j) == "(" {
            columns = true;
            while !matches!(at(j), ")" | ";" | "") {
                j += 1;
            }
            j += 1;
        }
        privileges.push(Privilege {
            name: name.to_string(),
            columns,
        });
        match at(j) {
            "," => j += 1,
            "on" => break,
            _ => return None,
        }
    }
    j += 1;
    let target = if at(j) == "all" && at(j + 1) == "tables" && at(j + 2) == "in" {
        let schema = at(j + 4).to_string();
        j += 5;
        Target::AllTables(schema)
    } else if at(j) == "tables" && default_privileges {
        j += 1;
        Target::Default
    } else {
        if matches!(
            at(j),
            "all"
                | "sequence"
                | "sequences"
                | "function"
                | "functions"
                | "procedure"
                | "routine"
                | "schema"
                | "database"
                | "type"
                | "domain"
                | "language"
                | "large"
                | "foreign"
                | "tablespace"
                | "parameter"
        ) {
            return None;
        }
        if at(j) == "table" {
            j += 1;
        }
        let mut names = Vec::new();
        loop {
            let name = at(j);
            if name.is_empty() || ",();".contains(name) {
                return None;
            }
            dynamic |= name.contains('%');
            names.push(name.to_string());
            j += 1;
            if at(j) != "," {
                break;
            }
            j += 1;
        }
        Target::Tables(names)
    };
    if at(j) != if grant { "to" } else { "from" } {
        return None;
    }
    j += 1;
    let mut roles = Vec::new();
    loop {
        if at(j) == "group" {
            j += 1;
        }
        let role = at(j);
        if role.is_empty() || ",();".contains(role) {
            break;
        }
        roles.push(role.to_string());
        j += 1;
        if at(j) != "," {
            break;
        }
        j += 1;
    }
    Some(Grant {
        grant,
        privileges,
        target,
        roles,
        dynamic,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry over `files` (name, text) in a temporary migrations
    /// directory, and the outcome of checking `table`'s `privilege`.
    fn check(files: &[(&str, &str)], table: &str, privilege: &str) -> Result<()> {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("m")).unwrap();
        for (name, text) in files {
            std::fs::write(root.path().join("m").join(name), text).unwrap();
        }
        let registry = Registry::parse(
            "version: 1\nmigrations: m\napp_role: app\n",
            Path::new("registry.yaml"),
        )
        .unwrap();
        let loc = SchemaLocator {
            object: privilege.into(),
            object_kind: ObjectKind::Privilege,
            table: table.into(),
        };
        check_schema_object(root.path(), &registry, "g", &loc)
    }

    fn granted_by(r: Result<()>) -> String {
        match r {
            Err(Error::PrivilegeGranted { file, .. }) => {
                file.file_name().unwrap().to_string_lossy().into_owned()
            }
            other => panic!("expected PrivilegeGranted, got {other:?}"),
        }
    }

    const ROLES: &str = "CREATE TABLE ledger (id int);\n\
        CREATE TABLE people (id int);\n\
        -- GRANT UPDATE ON ledger TO app; (a comment grants nothing)\n\
        GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO app;\n\
        GRANT UPDATE (id) ON people TO app;\n\
        ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO app;\n\
        DO $$ BEGIN RAISE EXCEPTION 'revoke it and grant another'; END; $$;\n";

    #[test]
    fn a_withheld_privilege_matches_and_a_granted_one_names_the_file() {
        let files = [("1_roles.sql", ROLES)];
        assert!(check(&files, "ledger", "UPDATE").is_ok());
        assert!(check(&files, "public.ledger", "TRUNCATE").is_ok());
        assert_eq!(granted_by(check(&files, "ledger", "INSERT")), "1_roles.sql");
        // A column-level grant is a grant.
        assert_eq!(granted_by(check(&files, "people", "UPDATE")), "1_roles.sql");
        // A later revoke withholds it again; a later grant (to PUBLIC, of
        // ALL, or by name) gives it back, and the file that did is named.
        let revoked = [
            ("1_roles.sql", ROLES),
            (
                "2_onboard.sql",
                "REVOKE INSERT ON people, ledger FROM app, onboard;",
            ),
        ];
        assert!(check(&revoked, "people", "INSERT").is_ok());
        for again in [
            "GRANT ALL ON ledger TO app;",
            "GRANT ALL PRIVILEGES ON TABLE ledger TO onboard, app;",
            "GRANT INSERT ON ledger TO PUBLIC;",
            "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO app;",
            "GRANT INSERT ON public.ledger TO app WITH GRANT OPTION;",
        ] {
            let files = [revoked[0], revoked[1], ("3_again.sql", again)];
            assert_eq!(
                granted_by(check(&files, "ledger", "INSERT")),
                "3_again.sql",
                "{again}"
            );
        }
        // Grants to another role, on other objects, or a role membership
        // change nothing.
        for other in [
            "GRANT INSERT ON ledger TO onboard;",
            "GRANT USAGE ON SEQUENCE ledger_seq TO app;",
            "GRANT EXECUTE ON FUNCTION f(text) TO app;",
            "GRANT onboard TO app;",
            "REVOKE INSERT ON ledger FROM PUBLIC;",
        ] {
            let files = [revoked[0], revoked[1], ("3_other.sql", other)];
            assert!(check(&files, "ledger", "INSERT").is_ok(), "{other}");
            assert!(check(&files, "ledger", "UPDATE").is_ok(), "{other}");
        }
    }

    #[test]
    fn default_privileges_reach_the_tables_created_after_them() {
        let files = [
            ("1_roles.sql", ROLES),
            ("2_queue.sql", "CREATE TABLE IF NOT EXISTS queue (id int);"),
            (
                "3_queue.sql",
                "REVOKE ALL ON queue FROM app; GRANT SELECT, INSERT, DELETE ON queue TO app;",
            ),
        ];
        assert_eq!(
            granted_by(check(&files[..2], "queue", "INSERT")),
            "1_roles.sql"
        );
        assert!(check(&files[..2], "queue", "DELETE").is_ok());
        assert_eq!(granted_by(check(&files, "queue", "DELETE")), "3_queue.sql");
        assert!(check(&files, "queue", "TRUNCATE").is_ok());
    }

    #[test]
    fn what_the_text_cannot_show_is_drift() {
        // A table no migration creates.
        assert!(matches!(
            check(&[("1_roles.sql", ROLES)], "ledger_entries", "UPDATE"),
            Err(Error::SchemaDrift { .. })
        ));
        // A grant to the role built at run time.
        let dynamic = "EXECUTE format('GRANT %s ON %I.%I TO app', p, s, t);";
        let files = [("1_roles.sql", ROLES), ("2_dynamic.sql", dynamic)];
        assert_eq!(
            granted_by(check(&files, "ledger", "UPDATE")),
            "2_dynamic.sql"
        );
        // To another role it is none of the check's business.
        let other = [
            ("1_roles.sql", ROLES),
            (
                "2_dynamic.sql",
                "EXECUTE format('GRANT %s ON %I.%I TO onboard', p, s, t);",
            ),
        ];
        assert!(check(&other, "ledger", "UPDATE").is_ok());
    }

    #[test]
    fn a_privilege_guard_needs_the_registrys_role() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("m")).unwrap();
        std::fs::write(root.path().join("m/1.sql"), ROLES).unwrap();
        let registry =
            Registry::parse("version: 1\nmigrations: m\n", Path::new("registry.yaml")).unwrap();
        let loc = SchemaLocator {
            object: "UPDATE".into(),
            object_kind: ObjectKind::Privilege,
            table: "ledger".into(),
        };
        let err = check_schema_object(root.path(), &registry, "g", &loc).unwrap_err();
        assert!(err.to_string().contains("`app_role`"), "{err}");
    }
}
