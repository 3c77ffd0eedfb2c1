//! The connection helpers of `gate::db` at their edges: a password or a
//! user given as the FIRST query parameter of a URL (redacted, replaced),
//! and a database whose recorded migrations no longer match this build,
//! refused by `migrate` with the version and the description it names.

use gate::db::{DbError, migrate, redact_url, with_user};

use crate::support::*;

#[test]
fn a_password_first_in_the_query_is_redacted_and_nothing_else_changes() {
    assert_eq!(
        redact_url("postgresql://app@db.example/x?password=hunter2&sslmode=require"),
        "postgresql://app@db.example/x?password=***&sslmode=require"
    );
    assert_eq!(
        redact_url("postgres://app:s3cret@db.example/x?password=hunter2"),
        "postgres://app:***@db.example/x?password=***"
    );
}

#[test]
fn a_user_first_in_the_query_is_the_one_replaced() {
    let derived = with_user(
        "postgresql://owner@db.example/x?user=owner&sslmode=require",
        "app",
    );
    assert_eq!(
        derived.ok().as_deref(),
        Some("postgresql://owner@db.example/x?user=app&sslmode=require")
    );
}

/// `migrate` over the database after `tamper` (the owner's SQL on its
/// migration table): the error it gives.
async fn migrating_after(
    tamper: &str,
) -> Result<Option<DbError>, Box<dyn std::error::Error + Send + Sync>> {
    let Some(db) = fresh().await? else {
        return Ok(None);
    };
    exec(db.owner_pool(), tamper).await?;
    let error = migrate(db.owner_pool()).await.err();
    db.drop().await?;
    Ok(error)
}

#[tokio::test]
async fn a_migration_changed_since_it_ran_is_named_by_version_and_description() -> TestResult {
    let error = migrating_after(
        "UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea \
          WHERE version = (SELECT min(version) FROM _sqlx_migrations)",
    )
    .await?;
    let Some(error) = error else { return Ok(()) };
    let first = gate::db::MIGRATOR
        .iter()
        .map(|m| m.version)
        .min()
        .ok_or("migrations")?;
    let described = gate::db::MIGRATOR
        .iter()
        .find(|m| m.version == first)
        .map(|m| m.description.to_string())
        .ok_or("the first migration")?;
    match &error {
        DbError::Migration {
            version,
            description,
            ..
        } => {
            assert_eq!(*version, first);
            assert_eq!(description, &described);
        }
        other => panic!("a named migration error, not {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_migration_this_build_does_not_have_is_named_as_such() -> TestResult {
    let error = migrating_after(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99991231000000, 'from a later build', true, '\\x00'::bytea, 0)",
    )
    .await?;
    let Some(error) = error else { return Ok(()) };
    match &error {
        DbError::Migration {
            version,
            description,
            ..
        } => {
            assert_eq!(*version, 99_991_231_000_000);
            assert_eq!(description, "not in this build");
        }
        other => panic!("a named migration error, not {other:?}"),
    }
    Ok(())
}
