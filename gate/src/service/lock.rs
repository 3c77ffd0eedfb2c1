//! The one place a row lock is taken.
//!
//! Guarantees: every `SELECT ... FOR UPDATE` of the gate is the one in
//! [`lock`] (a test parses `gate/src` and fails if any other file holds a
//! row-lock clause). [`lock`] takes a key, never a row: it returns the row as
//! read under the lock, so a caller always decides on the locked, current
//! version and never on a copy it read before.
//!
//! The one lock order. Every operation takes the locks it needs in this order
//! and never another, so two operations never wait on each other in a cycle:
//! 1. the tenant row, `FOR NO KEY UPDATE` (only `set_policy`, to number
//!    versions). It never blocks the key-share locks that foreign-key
//!    checks of other writers take on the same row, so a publication cannot
//!    deadlock with a proposal whose insert references the tenant;
//! 2. the request (then its checkout authority);
//! 3. the tenant's day of reservations in one currency;
//! 4. delegation hops, from the leaf upwards (a revocation locks the revoked
//!    branch deepest first, and a release walks from the leaf to the root);
//! 5. the tenant's ledger head, last, just before commit.

use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgConnection};

/// A row that may be locked: how to select it and how its key is matched.
pub(crate) trait Lockable: for<'r> FromRow<'r, PgRow> + Send + Unpin {
    /// `SELECT <columns> FROM <table>`, without a WHERE clause.
    const SELECT: &'static str;
    /// The WHERE condition over the key binds `$1`, `$2`, ... (all text).
    const KEY: &'static str;
    /// How strongly the row is locked (see the module docs for the one weaker lock).
    const STRENGTH: Strength = Strength::Update;
    /// When several rows are locked: the `ORDER BY` they are locked in.
    const ORDER: &'static str = "";
}

/// A row lock's strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strength {
    /// `FOR UPDATE`: the row will change.
    Update,
    /// `FOR NO KEY UPDATE`: the row is held, but the key-share locks that
    /// foreign-key checks of other writers take on it are not blocked.
    NoKeyUpdate,
}

impl Strength {
    fn clause(self) -> &'static str {
        match self {
            Strength::Update => " FOR UPDATE",
            Strength::NoKeyUpdate => " FOR NO KEY UPDATE",
        }
    }
}

/// Locks the row of `T` named by `key` until the transaction ends and returns
/// it as read under the lock; `None` when there is no such row.
pub(crate) async fn lock<T: Lockable>(
    conn: &mut PgConnection,
    key: &[&str],
) -> Result<Option<T>, sqlx::Error> {
    let mut sql = format!("{} WHERE {}", T::SELECT, T::KEY);
    sql.push_str(T::STRENGTH.clause());
    let mut query = sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql));
    for part in key {
        query = query.bind(*part);
    }
    query.fetch_optional(conn).await
}

/// Locks every row of `T` the key selects, in `T::ORDER`, until the
/// transaction ends, and returns them as read under the lock.
pub(crate) async fn lock_all<T: Lockable>(
    conn: &mut PgConnection,
    key: &[&str],
) -> Result<Vec<T>, sqlx::Error> {
    let mut sql = format!("{} WHERE {}{}", T::SELECT, T::KEY, T::ORDER);
    sql.push_str(T::STRENGTH.clause());
    let mut query = sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql));
    for part in key {
        query = query.bind(*part);
    }
    query.fetch_all(conn).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::rows::DailyRow;
    use sqlx::Connection;

    /// The helper decides on the row as it is when the lock is granted, not as
    /// it was when the caller last looked: a second transaction that waited
    /// for the lock sees the first one's committed write.
    #[tokio::test]
    async fn the_locked_row_is_re_read_after_waiting() -> Result<(), Box<dyn std::error::Error>> {
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let pool = db.pool().clone();
        sqlx::query("INSERT INTO tenants (id) VALUES ('acme')")
            .execute(&pool)
            .await?;
        sqlx::query(
            "INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) \
             VALUES ('acme', '2026-09-03', 'INR', 100, 1000)",
        )
        .execute(&pool)
        .await?;
        let mut first = pool.acquire().await?;
        let mut tx1 = first.begin().await?;
        let seen: Option<DailyRow> = lock(&mut tx1, &["acme", "2026-09-03", "INR"]).await?;
        assert_eq!(seen.map(|r| r.reserved_paise), Some(100));
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut conn = pool.acquire().await?;
                let mut tx2 = conn.begin().await?;
                let row: Option<DailyRow> = lock(&mut tx2, &["acme", "2026-09-03", "INR"]).await?;
                tx2.rollback().await?;
                Ok::<_, sqlx::Error>(row.map(|r| r.reserved_paise))
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "the second lock must wait for the first"
        );
        sqlx::query("UPDATE daily_spend SET reserved_paise = 700 WHERE tenant_id = 'acme'")
            .execute(&mut *tx1)
            .await?;
        tx1.commit().await?;
        assert_eq!(waiter.await??, Some(700));
        let missing: Option<DailyRow> = lock(&mut first, &["acme", "2026-09-04", "INR"]).await?;
        assert!(missing.is_none());
        drop(first);
        db.drop().await?;
        Ok(())
    }
}
