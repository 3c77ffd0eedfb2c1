//! The tenancy schema (`migrations/*_tenancy.sql`) and the database access
//! layer (`gate::db`), tested against a real Postgres.
//!
//! Every named guard of the tenancy migration is violated here directly with
//! SQL, and the database's refusal must name it. The tests need `DATABASE_URL`
//! (`make verify` provides one); without it they fail with a clear message,
//! unless `SPENDGATE_SKIP_DB=1` says to skip them.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::{TestResult, assert_sql_refused_by, fresh, on_fresh};
use gate::db::{self, DbError, FreshDatabase};
use sqlx::PgPool;

/// Two tenants; `cloudco` exists only for `acme`.
async fn seed(pool: &PgPool) {
    sqlx::raw_sql(
        "INSERT INTO tenants (id) VALUES ('acme'), ('globex');
         INSERT INTO merchants (tenant_id, id, display_name) VALUES ('acme', 'cloudco', 'CloudCo');
         INSERT INTO catalog_items
             (tenant_id, sku, merchant_id, price_paise, currency, category, max_quantity)
             VALUES ('acme', 'CLOUD-STARTER', 'cloudco', 60000, 'INR', 'cloud-credits', 2);",
    )
    .execute(pool)
    .await
    .unwrap_or_else(|e| panic!("seeding failed: {e}"));
}

async fn tenancy_tables(pool: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .into_iter()
    .collect()
}

#[tokio::test]
async fn migrations_apply_to_an_empty_database() {
    let Some(url) = db::test_admin_url().unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let empty = db::empty_database(&url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(tenancy_tables(empty.pool()).await.is_empty());
    db::migrate(empty.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let tables = tenancy_tables(empty.pool()).await;
    for table in ["tenants", "people", "agents", "merchants", "catalog_items"] {
        assert!(tables.contains(table), "{table} missing from {tables:?}");
    }
    // Applying them again changes nothing and does not fail.
    db::migrate(empty.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    empty.drop().await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn a_fresh_database_is_migrated_and_dropped_on_request() {
    let Some(db) = fresh().await.unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(db.owner_pool())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    let embedded: Vec<i64> = db::MIGRATOR.iter().map(|m| m.version).collect();
    assert_eq!(applied, embedded);

    let name = db.name().to_owned();
    let admin = db::connect(&db::test_admin_url().ok().flatten().unwrap_or_default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let exists = "SELECT count(*) FROM pg_database WHERE datname = $1";
    let count: i64 = sqlx::query_scalar(exists)
        .bind(&name)
        .fetch_one(&admin)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count, 1);
    let template: bool =
        sqlx::query_scalar("SELECT datistemplate FROM pg_database WHERE datname = $1")
            .bind(db::template_name())
            .fetch_one(&admin)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        template,
        "{} is not marked as a template",
        db::template_name()
    );

    db.drop().await.unwrap_or_else(|e| panic!("{e}"));
    let count: i64 = sqlx::query_scalar(exists)
        .bind(&name)
        .fetch_one(&admin)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count, 0, "{name} still exists after drop");
}

#[tokio::test]
async fn concurrent_fresh_databases_are_distinct_and_isolated() {
    if db::test_admin_url()
        .unwrap_or_else(|e| panic!("{e}"))
        .is_none()
    {
        return;
    }
    let made = futures_join(4).await;
    let names: BTreeSet<&str> = made.iter().map(FreshDatabase::name).collect();
    assert_eq!(names.len(), made.len(), "names repeat: {names:?}");
    sqlx::query("INSERT INTO tenants (id) VALUES ('acme')")
        .execute(made[0].owner_pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for other in &made[1..] {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants")
            .fetch_one(other.pool())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            count, 0,
            "a row written to one fresh database showed up in another"
        );
    }
    for db in made {
        db.drop().await.unwrap_or_else(|e| panic!("{e}"));
    }
}

/// `n` fresh databases requested at the same time.
async fn futures_join(n: usize) -> Vec<FreshDatabase> {
    let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(fresh())).collect();
    let mut made = Vec::new();
    for task in tasks {
        let db = task
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
        made.extend(db);
    }
    assert_eq!(made.len(), n);
    made
}

#[tokio::test]
async fn a_catalog_item_cannot_point_at_another_tenants_merchant() -> TestResult {
    on_fresh(async |db| {
        seed(db.owner_pool()).await;
        // cloudco exists for acme only: globex may not list it, even though the id matches.
        assert_sql_refused_by(
            db.pool(),
            "INSERT INTO catalog_items
             (tenant_id, sku, merchant_id, price_paise, currency, category, max_quantity)
             VALUES ('globex', 'CLOUD-STARTER', 'cloudco', 60000, 'INR', 'cloud-credits', 2)",
            "fk_catalog_merchant_same_tenant",
        )
        .await;
        // Nor can an existing item be moved across tenants.
        assert_sql_refused_by(
            db.pool(),
            "UPDATE catalog_items SET tenant_id = 'globex' WHERE tenant_id = 'acme'",
            "fk_catalog_merchant_same_tenant",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn rows_need_an_existing_tenant() -> TestResult {
    on_fresh(async |db| {
        seed(db.owner_pool()).await;
        let cases = [
            (
                "INSERT INTO people (tenant_id, id, display_name) VALUES ('initech', 'bob', 'Bob')",
                "fk_people_tenant",
            ),
            (
                "INSERT INTO agents (tenant_id, id) VALUES ('initech', 'buyer-agent')",
                "fk_agents_tenant",
            ),
            (
                "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('initech', 'm', 'M')",
                "fk_merchants_tenant",
            ),
        ];
        for (sql, constraint) in cases {
            assert_sql_refused_by(db.owner_pool(), sql, constraint).await;
        }
        // As the owner: the application role may not DELETE tenants at all.
        assert_sql_refused_by(
            db.owner_pool(),
            "DELETE FROM tenants WHERE id = 'acme'",
            "fk_merchants_tenant",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn every_check_constraint_refuses_a_violating_row() -> TestResult {
    on_fresh(async |db| {
        seed(db.owner_pool()).await;
        let item = |tenant_sku: &str, price: &str, currency: &str, category: &str, max: &str| {
            format!(
                "INSERT INTO catalog_items
                 (tenant_id, sku, merchant_id, price_paise, currency, category, max_quantity)
                 VALUES ('acme', {tenant_sku}, 'cloudco', {price}, {currency}, {category}, {max})"
            )
        };
        let cases = [
            (
                "INSERT INTO tenants (id) VALUES ('  ')".to_owned(),
                "ck_tenants_id_not_blank",
            ),
            (
                "INSERT INTO people (tenant_id, id, display_name) VALUES ('acme', '', 'X')"
                    .to_owned(),
                "ck_people_id_not_blank",
            ),
            (
                "INSERT INTO people (tenant_id, id, display_name) VALUES ('acme', 'x', ' ')"
                    .to_owned(),
                "ck_people_display_name_not_blank",
            ),
            (
                "INSERT INTO agents (tenant_id, id) VALUES ('acme', '')".to_owned(),
                "ck_agents_id_not_blank",
            ),
            (
                "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('acme', '', 'X')"
                    .to_owned(),
                "ck_merchants_id_not_blank",
            ),
            (
                item("''", "100", "'INR'", "'food'", "1"),
                "ck_catalog_sku_not_blank",
            ),
            (
                item("'FREE'", "0", "'INR'", "'food'", "1"),
                "ck_catalog_price_positive",
            ),
            (
                item("'NEG'", "-60000", "'INR'", "'food'", "1"),
                "ck_catalog_price_positive",
            ),
            (
                item("'LOWER'", "100", "'inr'", "'food'", "1"),
                "ck_catalog_currency_uppercase",
            ),
            (
                item("'SHORT'", "100", "'IN'", "'food'", "1"),
                "ck_catalog_currency_uppercase",
            ),
            (
                item("'DIGITS'", "100", "'1NR'", "'food'", "1"),
                "ck_catalog_currency_uppercase",
            ),
            (
                item("'NOCAT'", "100", "'INR'", "' '", "1"),
                "ck_catalog_category_not_blank",
            ),
            (
                item("'ZEROMAX'", "100", "'INR'", "'food'", "0"),
                "ck_catalog_max_quantity_positive",
            ),
            (
                "UPDATE catalog_items SET price_paise = 0 WHERE sku = 'CLOUD-STARTER'".to_owned(),
                "ck_catalog_price_positive",
            ),
        ];
        let mut tested = BTreeSet::new();
        for (sql, constraint) in &cases {
            assert_sql_refused_by(db.owner_pool(), sql, constraint).await;
            tested.insert(constraint.to_string());
        }
        // A CHECK added to these tables without a case above fails this test.
        let declared: BTreeSet<String> = sqlx::query_scalar(
            "SELECT conname::text FROM pg_constraint
         WHERE contype = 'c' AND conrelid::regclass::text = ANY($1)",
        )
        .bind(&["tenants", "people", "agents", "merchants", "catalog_items"][..])
        .fetch_all(db.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .collect();
        assert_eq!(declared, tested, "CHECK constraints and their tests differ");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn every_constraint_is_named_explicitly() -> TestResult {
    on_fresh(async |db| {
        // Default names (tenants_pkey, people_tenant_id_fkey, ...) say nothing about the rule.
        let unnamed: Vec<String> = sqlx::query_scalar(
            "SELECT conrelid::regclass::text || '.' || conname FROM pg_constraint
         WHERE connamespace = 'public'::regnamespace
           AND conrelid <> 0
           AND conrelid::regclass::text <> '_sqlx_migrations'
           AND contype IN ('p', 'f', 'c', 'u', 'x')
           AND conname !~ '^(pk|fk|ck|uq|ex)_'
         ORDER BY 1",
        )
        .fetch_all(db.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            unnamed.is_empty(),
            "constraints without an explicit pk_/fk_/ck_/uq_/ex_ name: {unnamed:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_failing_migration_is_named() {
    let Some(url) = db::test_admin_url().unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let empty = db::empty_database(&url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sqlx::query("CREATE TABLE tenants (squatter int)")
        .execute(empty.pool())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = db::MIGRATOR
        .iter()
        .next()
        .unwrap_or_else(|| panic!("no migrations embedded"));
    match db::migrate(empty.pool()).await {
        Err(err @ DbError::Migration { .. }) => {
            let message = err.to_string();
            assert!(
                message.contains(&first.version.to_string()) && message.contains("tenancy"),
                "the error does not name the migration: {message}"
            );
        }
        other => panic!("expected DbError::Migration, got {other:?}"),
    }
    empty.drop().await.unwrap_or_else(|e| panic!("{e}"));
}

/// `db::connect(url)`, which must answer within 30 s (`what` names the attempt).
async fn connect_within_30s(url: &str, what: &str) -> Result<PgPool, DbError> {
    tokio::time::timeout(Duration::from_secs(30), db::connect(url))
        .await
        .unwrap_or_else(|_| panic!("connecting {what} hung"))
}

#[tokio::test]
async fn a_database_that_is_down_is_a_clear_typed_error() {
    // Needs no server: the socket folder does not exist.
    let url = "postgresql://postgres:s3cret@%2Fnonexistent%2Fspendgate-no-such-dir:5432/postgres";
    match connect_within_30s(url, "to a missing socket").await {
        Err(err @ DbError::Unreachable { .. }) => {
            let message = err.to_string();
            assert!(message.contains("down or unreachable"), "{message}");
            assert!(
                message.contains("%2Fnonexistent%2Fspendgate-no-such-dir"),
                "the URL is not named: {message}"
            );
            assert!(
                !message.contains("s3cret"),
                "the password leaked: {message}"
            );
        }
        other => panic!("expected DbError::Unreachable, got {other:?}"),
    }
    match db::fresh_database(url).await {
        Err(DbError::Unreachable { .. }) => {}
        other => panic!("expected DbError::Unreachable, got {other:?}"),
    }
    match db::connect("not a url").await {
        Err(err @ DbError::InvalidUrl { .. }) => assert!(err.to_string().contains("not a url")),
        other => panic!("expected DbError::InvalidUrl, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_answers_and_refuses_the_role_is_a_refusal_not_unreachable() {
    let Some(admin) = db::test_admin_url().unwrap_or_else(|e| panic!("{e}")) else {
        return;
    };
    let url = db::with_user(&admin, "spendgate_no_such_role").unwrap_or_else(|e| panic!("{e}"));
    match connect_within_30s(&url, "as an unknown role").await {
        Err(err @ DbError::Rejected { .. }) => {
            let message = err.to_string();
            assert!(message.contains("refused the connection"), "{message}");
            assert!(message.contains("spendgate_no_such_role"), "{message}");
        }
        other => panic!("expected DbError::Rejected, got {other:?}"),
    }
}
