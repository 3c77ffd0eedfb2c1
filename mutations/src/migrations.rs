//! The migrations as text: is a schema guard's object named in them?
//!
//! Guarantees: [`check_schema_object`] succeeds only if the object's name
//! (its last `.` part, case-insensitively, as a whole SQL word) appears in
//! some `.sql` file under the registry's migrations directory, read in name
//! order, recursively; otherwise [`Error::SchemaDrift`] names the entry. A
//! registry that names no migrations directory checks nothing. Read only.

use std::path::Path;

use crate::error::{Error, Result};
use crate::registry::{Registry, SchemaLocator};

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
    let mut sql = String::new();
    collect_sql(&dir, &mut sql)?;
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

fn collect_sql(dir: &Path, out: &mut String) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_sql(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "sql") {
            out.push_str(&std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?);
            out.push('\n');
        }
    }
    Ok(())
}
