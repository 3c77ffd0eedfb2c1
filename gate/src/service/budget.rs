//! Reserving and releasing budgets: the tenant's day and the spending hop.
//!
//! Guarantees: a reservation takes the daily budget and the delegation
//! budget together or neither (both statements run inside one savepoint that
//! is rolled back when either is refused). The daily reservation is a
//! conditional upsert, backed by `ck_daily_spend_within_cap`; the delegation
//! reservation is a conditional update of the leaf hop, backed by
//! `ck_delegation_budget_partitioned`; whichever refuses, the refusal is a
//! reason (`DAILY_BUDGET_EXHAUSTED`, `DELEGATION_BUDGET_EXHAUSTED`), never a
//! half-taken reservation. A release gives back exactly what the request row
//! says it holds, to the day and the hop it was taken from.

use chrono::NaiveDate;
use sqlx::{Connection, PgConnection};

use super::error::{Ctx, ServiceError};
use super::lock::lock;
use super::rows::{DailyRow, RequestRow};
use crate::reason::Reason;

/// What an authorized request holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub day: NaiveDate,
    pub delegation_id: String,
    pub amount_paise: i64,
}

/// Makes sure the tenant's row for `day` exists, locks it, and returns what
/// it holds. Holding it serializes the tenant's decisions for the day.
pub(crate) async fn lock_day(
    conn: &mut PgConnection,
    tenant: &str,
    day: NaiveDate,
    cap_paise: i64,
) -> Result<i64, ServiceError> {
    sqlx::query(
        "INSERT INTO daily_spend (tenant_id, day, reserved_paise, cap_paise) VALUES ($1, $2, 0, $3) \
         ON CONFLICT (tenant_id, day) DO NOTHING",
    )
    .bind(tenant)
    .bind(day)
    .bind(cap_paise.max(0))
    .execute(&mut *conn)
    .await
    .ctx("opening the day's reservations")?;
    let day_key = day.to_string();
    let row: DailyRow = lock(conn, &[tenant, &day_key])
        .await
        .ctx("locking the day's reservations")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the reservations row of {tenant} for {day} vanished"),
        })?;
    Ok(row.reserved_paise)
}

fn refused_by(err: &sqlx::Error, constraint: &str) -> bool {
    err.as_database_error()
        .and_then(|e| e.constraint())
        .is_some_and(|c| c == constraint)
}

/// Takes `r` from the tenant's day (capped at `cap_paise`) and from the hop.
pub(crate) async fn reserve(
    conn: &mut PgConnection,
    tenant: &str,
    r: &Reservation,
    cap_paise: i64,
) -> Result<Result<(), Reason>, ServiceError> {
    let mut savepoint = conn.begin().await.ctx("opening a savepoint")?;
    let daily: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(
        "INSERT INTO daily_spend AS d (tenant_id, day, reserved_paise, cap_paise) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (tenant_id, day) DO UPDATE \
            SET reserved_paise = d.reserved_paise + EXCLUDED.reserved_paise, \
                cap_paise = EXCLUDED.cap_paise \
          WHERE d.reserved_paise + EXCLUDED.reserved_paise <= EXCLUDED.cap_paise \
         RETURNING reserved_paise",
    )
    .bind(tenant)
    .bind(r.day)
    .bind(r.amount_paise)
    .bind(cap_paise)
    .fetch_optional(&mut *savepoint)
    .await;
    let refusal = match daily {
        Ok(Some(_)) => None,
        Ok(None) => Some(Reason::DailyBudgetExhausted),
        Err(e) if refused_by(&e, "ck_daily_spend_within_cap") => Some(Reason::DailyBudgetExhausted),
        Err(e) => return Err(ServiceError::from_sqlx("reserving the daily budget", e)),
    };
    let refusal = match refusal {
        Some(reason) => Some(reason),
        None => {
            let hop: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(
                "UPDATE delegations SET spent_paise = spent_paise + $3 \
                 WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL \
                   AND allocated_paise + spent_paise + $3 <= budget_paise \
                 RETURNING spent_paise",
            )
            .bind(tenant)
            .bind(&r.delegation_id)
            .bind(r.amount_paise)
            .fetch_optional(&mut *savepoint)
            .await;
            match hop {
                Ok(Some(_)) => None,
                Ok(None) => Some(Reason::DelegationBudgetExhausted),
                Err(e) if refused_by(&e, "ck_delegation_budget_partitioned") => {
                    Some(Reason::DelegationBudgetExhausted)
                }
                Err(e) => {
                    return Err(ServiceError::from_sqlx(
                        "reserving the delegation budget",
                        e,
                    ));
                }
            }
        }
    };
    match refusal {
        None => {
            savepoint.commit().await.ctx("releasing a savepoint")?;
            Ok(Ok(()))
        }
        Some(reason) => {
            savepoint.rollback().await.ctx("rolling back a savepoint")?;
            Ok(Err(reason))
        }
    }
}

/// Gives back what `request` holds, to the day and the hop it came from.
pub(crate) async fn release(
    conn: &mut PgConnection,
    request: &RequestRow,
) -> Result<(), ServiceError> {
    if request.reserved_paise == 0 {
        return Ok(());
    }
    let corrupt = |what: &str| ServiceError::Corrupt {
        what: format!("request {} holds a reservation but no {what}", request.id),
    };
    let day = request.reserved_day.ok_or_else(|| corrupt("day"))?;
    let hop = request
        .delegation_id
        .as_deref()
        .ok_or_else(|| corrupt("delegation"))?;
    let daily = sqlx::query(
        "UPDATE daily_spend SET reserved_paise = reserved_paise - $3 WHERE tenant_id = $1 AND day = $2",
    )
    .bind(&request.tenant_id)
    .bind(day)
    .bind(request.reserved_paise)
    .execute(&mut *conn)
    .await
    .ctx("releasing the daily budget")?;
    let delegation = sqlx::query(
        "UPDATE delegations SET spent_paise = spent_paise - $3 WHERE tenant_id = $1 AND id = $2",
    )
    .bind(&request.tenant_id)
    .bind(hop)
    .bind(request.reserved_paise)
    .execute(&mut *conn)
    .await
    .ctx("releasing the delegation budget")?;
    if daily.rows_affected() != 1 || delegation.rows_affected() != 1 {
        return Err(corrupt("row to give it back to"));
    }
    Ok(())
}
