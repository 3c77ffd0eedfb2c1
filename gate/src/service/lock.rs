//! The one place a row lock is taken.
//!
//! Guarantees: every `SELECT ... FOR UPDATE` of the gate is the one in
//! [`lock`] (a test parses `gate/src` and fails if any other file holds a
//! row-lock clause). [`lock`] takes a key, never a row: it returns the row as
//! read under the lock, so a caller always decides on the locked, current
//! version and never on a copy it read before. Callers lock in one order —
//! request, then the tenant's day, then delegation hops, then the ledger
//! head — so two operations never wait on each other in a cycle.

use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgConnection};

/// A row that may be locked: how to select it and how its key is matched.
pub(crate) trait Lockable: for<'r> FromRow<'r, PgRow> + Send + Unpin {
    /// `SELECT <columns> FROM <table>`, without a WHERE clause.
    const SELECT: &'static str;
    /// The WHERE condition over the key binds `$1`, `$2`, ... (all text).
    const KEY: &'static str;
}

/// Locks the row of `T` named by `key` until the transaction ends and returns
/// it as read under the lock; `None` when there is no such row.
pub(crate) async fn lock<T: Lockable>(
    conn: &mut PgConnection,
    key: &[&str],
) -> Result<Option<T>, sqlx::Error> {
    let mut sql = format!("{} WHERE {}", T::SELECT, T::KEY);
    sql.push_str(" FOR UPDATE");
    let mut query = sqlx::query_as::<_, T>(&sql);
    for part in key {
        query = query.bind(*part);
    }
    query.fetch_optional(conn).await
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
            "INSERT INTO daily_spend (tenant_id, day, reserved_paise, cap_paise) \
             VALUES ('acme', '2026-09-03', 100, 1000)",
        )
        .execute(&pool)
        .await?;
        let mut first = pool.acquire().await?;
        let mut tx1 = first.begin().await?;
        let seen: Option<DailyRow> = lock(&mut tx1, &["acme", "2026-09-03"]).await?;
        assert_eq!(seen.map(|r| r.reserved_paise), Some(100));
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut conn = pool.acquire().await?;
                let mut tx2 = conn.begin().await?;
                let row: Option<DailyRow> = lock(&mut tx2, &["acme", "2026-09-03"]).await?;
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
        let missing: Option<DailyRow> = lock(&mut first, &["acme", "2026-09-04"]).await?;
        assert!(missing.is_none());
        drop(first);
        db.drop().await?;
        Ok(())
    }
}
