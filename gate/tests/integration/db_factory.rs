//! The test-database factory's public face (`gate::db::fresh_test_database`
//! and `FreshDatabase`): a configured `DATABASE_URL` always yields a
//! database (never a silent skip), the owner's connect options reach that
//! database as the owner, `Debug` names it without its credentials, both
//! ways of dropping one remove it from the server, and the template's name
//! is the hash of the migrations. Found by the outside audit:
//! every other test only uses the factory, so none of them would notice a
//! factory that skipped, leaked or kept a stale template.

use gate::db::{FreshDatabase, MIGRATOR, OWNER_ROLE, fresh_test_database, template_name};
use sha2::{Digest, Sha256};
use sqlx::Connection;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn database_url_set() -> bool {
    std::env::var("DATABASE_URL").is_ok_and(|u| !u.trim().is_empty())
}

/// Whether a database of this name is on the server, asked from `other`.
async fn exists(other: &FreshDatabase, name: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(other.owner_pool())
        .await
}

/// With `DATABASE_URL` set, a database test gets a database: the factory
/// never turns a configured run into a run of skipped tests.
#[tokio::test]
async fn with_database_url_set_every_database_test_gets_a_database() -> TestResult {
    if !database_url_set() {
        return Ok(());
    }
    let db = fresh_test_database().await?;
    assert!(db.is_some(), "DATABASE_URL is set, and the factory skipped");
    if let Some(db) = db {
        db.drop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn the_owner_options_reach_this_database_as_the_owner_and_debug_hides_them() -> TestResult {
    let Some(db) = fresh_test_database().await? else {
        return Ok(());
    };
    let mut conn = sqlx::PgConnection::connect_with(db.owner_connect_options()).await?;
    let (user, database): (String, String) =
        sqlx::query_as("SELECT current_user::text, current_database()::text")
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    assert_eq!((user.as_str(), database.as_str()), (OWNER_ROLE, db.name()));
    // A Debug derived over the connect options would print their `password`
    // field (Some or None), so its absence says the options are not shown.
    let shown = format!("{db:?}");
    assert!(shown.contains(db.name()), "{shown}");
    assert!(!shown.contains("password"), "{shown}");
    db.drop().await?;
    Ok(())
}

/// `drop()` removes the database, and so does letting one go out of scope
/// without it (what a panicking test does).
#[tokio::test]
async fn a_dropped_database_and_one_let_go_are_both_gone_from_the_server() -> TestResult {
    let Some(witness) = fresh_test_database().await? else {
        return Ok(());
    };
    for explicit in [true, false] {
        let Some(db) = fresh_test_database().await? else {
            return Ok(());
        };
        let name = db.name().to_owned();
        assert!(exists(&witness, &name).await?, "{name} was made");
        if explicit {
            db.drop().await?;
        } else {
            drop(db);
        }
        assert!(
            !exists(&witness, &name).await?,
            "{name} is still there (dropped with drop(): {explicit})"
        );
    }
    witness.drop().await?;
    Ok(())
}

/// The template is named after a SHA-256 over every migration's version,
/// description and checksum, so a changed migration set gets a template of
/// its own instead of a stale one.
#[test]
fn the_template_is_named_after_the_hash_of_the_migrations() {
    let mut hash = Sha256::new();
    for m in MIGRATOR.iter() {
        hash.update(m.version.to_be_bytes());
        hash.update(m.description.as_bytes());
        hash.update(&*m.checksum);
    }
    let hex = hex::encode(hash.finalize());
    assert_eq!(template_name(), format!("spendgate_tpl_{}", &hex[..12]));
}

/// Many callers at once, with spares on the shelf: every one gets an empty
/// database of its own. Callers that list the same spare race to rename it;
/// a lost race moves on to another spare or a new database, never an error.
#[tokio::test]
async fn many_callers_at_once_each_get_an_empty_database_of_their_own() -> TestResult {
    let Some(first) = fresh_test_database().await? else {
        return Ok(());
    };
    // Put spares on the shelf: databases handed back with a row in them.
    let mut shelved = Vec::new();
    for _ in 0..4 {
        if let Some(db) = fresh_test_database().await? {
            sqlx::query("INSERT INTO tenants (id) VALUES ('acme')")
                .execute(db.owner_pool())
                .await?;
            shelved.push(db);
        }
    }
    for db in shelved {
        db.drop().await?;
    }
    first.drop().await?;
    for round in 0..6 {
        let mut callers = tokio::task::JoinSet::new();
        for _ in 0..12 {
            callers.spawn(fresh_test_database());
        }
        let mut names = std::collections::BTreeSet::new();
        let mut dbs = Vec::new();
        while let Some(db) = callers.join_next().await {
            let db = db?.map_err(|e| format!("round {round}: {e}"))?;
            let Some(db) = db else { return Ok(()) };
            let tenants: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants")
                .fetch_one(db.pool())
                .await?;
            assert_eq!(tenants, 0, "{} was handed out with rows", db.name());
            assert!(names.insert(db.name().to_owned()), "{} twice", db.name());
            dbs.push(db);
        }
        for db in dbs {
            db.drop().await?;
        }
    }
    Ok(())
}

/// A reset script is written for a schema whose tables hold rows only when
/// the caller does not require them empty: a template whose migrations left
/// rows is never reused (found by the outside audit: the emptiness check's
/// `&&` -> `||` and its `!` deleted survived, since every schema the factory
/// reads is empty).
#[tokio::test]
async fn a_schema_holding_rows_gets_a_reset_script_only_when_rows_are_allowed() -> TestResult {
    let Some(db) = fresh_test_database().await? else {
        return Ok(());
    };
    let mut owner = db.owner_pool().acquire().await?;
    let empty = gate::db::Reset::for_schema(&mut owner, true).await?;
    assert!(empty.is_some(), "an empty schema is refused a script");
    sqlx::query("INSERT INTO tenants (id) VALUES ('t-rows')")
        .execute(&mut *owner)
        .await?;
    let required = gate::db::Reset::for_schema(&mut owner, true).await?;
    let allowed = gate::db::Reset::for_schema(&mut owner, false).await?;
    drop(owner);
    db.drop().await?;
    assert!(required.is_none(), "a schema holding rows got a script");
    assert_eq!(
        allowed, empty,
        "rows allowed: the same script as the empty schema's"
    );
    Ok(())
}
