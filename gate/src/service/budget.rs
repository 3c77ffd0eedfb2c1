//! Reserving and releasing budgets: the tenant's day and the spending hop.
//!
//! Guarantees: a reservation takes the daily budget and the delegation
//! budget together or neither (one statement, after a savepoint that is
//! rolled back when either is refused). The daily reservation is a
//! conditional upsert, backed by `ck_daily_spend_within_cap`; the delegation
//! reservation is a conditional update of the leaf hop, backed by
//! `ck_delegation_budget_partitioned`; whichever refuses, the refusal is a
//! reason (`DAILY_BUDGET_EXHAUSTED`, `DELEGATION_BUDGET_EXHAUSTED`), never a
//! half-taken reservation. A release gives back exactly what the request row
//! says it holds, to the day and the hop it was taken from.

use chrono::NaiveDate;
use sqlx::PgConnection;

use super::current_policy::CurrentPolicy;
use super::error::{Ctx, ServiceError};
use super::rows::RequestRow;
use crate::reason::Reason;

/// What an authorized request holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub day: NaiveDate,
    /// The policy's currency: a day's cap only ever adds amounts in one currency.
    pub currency: String,
    pub delegation_id: String,
    pub amount_paise: i64,
}

/// The tenant's locked reservations for one UTC day in the policy's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Day {
    pub day: NaiveDate,
    pub currency: String,
    pub cap_paise: i64,
    pub reserved_paise: i64,
}

impl Day {
    /// A reservation of `amount_paise` from `delegation_id` on this day.
    pub fn reservation(&self, delegation_id: &str, amount_paise: i64) -> Reservation {
        Reservation {
            day: self.day,
            currency: self.currency.clone(),
            delegation_id: delegation_id.to_owned(),
            amount_paise,
        }
    }
}

/// The currency code under which a tenant without an enforceable policy is
/// serialized (ISO 4217's "no currency"); nothing is ever reserved under it.
const NO_CURRENCY: &str = "XXX";

impl Day {
    /// The currency and the cap `policy` gives a day's reservations: the
    /// policy's own, or (no enforceable policy) a currency nothing is priced
    /// in and a cap of zero.
    pub fn terms(policy: Option<&CurrentPolicy>) -> (String, i64) {
        let cap_paise = policy.map_or(0, CurrentPolicy::daily_cap);
        let currency = policy
            .and_then(|p| p.policy.as_ref().ok())
            .map_or(NO_CURRENCY, |p| p.currency.as_str())
            .to_owned();
        (currency, cap_paise)
    }
}

fn refused_by(err: &sqlx::Error, constraint: &str) -> bool {
    err.as_database_error()
        .and_then(|e| e.constraint())
        .is_some_and(|c| c == constraint)
}

/// The reservation's one statement, as [`reserve_statement`] assembles it:
/// the conditional daily upsert, then the conditional hop update, which runs
/// only when the day took its share (`daily` returned a row). The answer is
/// how many rows each took: (1, 1) is a reservation, anything else a
/// refusal, rolled back to the savepoint.
const RESERVE_DAY: &str = "WITH daily AS ( \
         INSERT INTO daily_spend AS d (tenant_id, day, currency, reserved_paise, cap_paise) \
         VALUES ($1, $2, $5, $3, $4) \
         ON CONFLICT (tenant_id, day, currency) DO UPDATE \
            SET reserved_paise = d.reserved_paise + EXCLUDED.reserved_paise, \
                cap_paise = EXCLUDED.cap_paise";

/// The day's condition: an existing day row takes the amount only within
/// the cap (a new row is the cap guard's alone to refuse).
const DAY_WITHIN_CAP: &str =
    " WHERE d.reserved_paise + EXCLUDED.reserved_paise <= EXCLUDED.cap_paise";

const RESERVE_HOP: &str = " RETURNING reserved_paise), \
     hop AS ( \
         UPDATE delegations SET spent_paise = spent_paise + $3 \
          WHERE tenant_id = $1 AND id = $6 AND revoked_at IS NULL \
            AND EXISTS (SELECT 1 FROM daily)";

/// The hop's condition: it takes the amount only within what it has neither
/// spent nor allocated.
const HOP_WITHIN_BUDGET: &str = " AND allocated_paise + spent_paise + $3 <= budget_paise";

const RESERVE_ANSWER: &str = " RETURNING spent_paise) \
     SELECT (SELECT count(*) FROM daily), (SELECT count(*) FROM hop)";

/// The reservation's statement, each budget's condition appended as a
/// statement of its own.
fn reserve_statement() -> String {
    let mut sql = String::with_capacity(
        RESERVE_DAY.len()
            + DAY_WITHIN_CAP.len()
            + RESERVE_HOP.len()
            + HOP_WITHIN_BUDGET.len()
            + RESERVE_ANSWER.len(),
    );
    sql.push_str(RESERVE_DAY);
    sql.push_str(DAY_WITHIN_CAP);
    sql.push_str(RESERVE_HOP);
    sql.push_str(HOP_WITHIN_BUDGET);
    sql.push_str(RESERVE_ANSWER);
    sql
}

/// Takes `r` from the tenant's day (capped at `cap_paise`) and from the hop,
/// in one statement after a savepoint. A reservation leaves the savepoint to
/// be released by the commit (no round trip of its own); a refusal rolls
/// back to it, so neither budget is taken.
pub(crate) async fn reserve(
    conn: &mut PgConnection,
    tenant: &str,
    r: &Reservation,
    cap_paise: i64,
) -> Result<Result<(), Reason>, ServiceError> {
    sqlx::raw_sql("SAVEPOINT reserve")
        .execute(&mut *conn)
        .await
        .ctx("opening a savepoint")?;
    let taken: Result<(i64, i64), sqlx::Error> =
        sqlx::query_as(sqlx::AssertSqlSafe(reserve_statement()))
            .bind(tenant)
            .bind(r.day)
            .bind(r.amount_paise)
            .bind(cap_paise)
            .bind(&r.currency)
            .bind(&r.delegation_id)
            .fetch_one(&mut *conn)
            .await;
    let refusal = match taken {
        Ok((1, 1)) => None,
        Ok((0, _)) => Some(Reason::DailyBudgetExhausted),
        Ok(_) => Some(Reason::DelegationBudgetExhausted),
        Err(e) if refused_by(&e, "ck_daily_spend_within_cap") => Some(Reason::DailyBudgetExhausted),
        Err(e) if refused_by(&e, "ck_delegation_budget_partitioned") => {
            Some(Reason::DelegationBudgetExhausted)
        }
        Err(e) => return Err(ServiceError::from_sqlx("reserving the budgets", e)),
    };
    match refusal {
        None => Ok(Ok(())),
        Some(reason) => {
            sqlx::raw_sql("ROLLBACK TO SAVEPOINT reserve")
                .execute(&mut *conn)
                .await
                .ctx("rolling back a savepoint")?;
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
    let currency = request
        .currency
        .as_deref()
        .ok_or_else(|| corrupt("currency"))?;
    let daily = sqlx::query(
        "UPDATE daily_spend SET reserved_paise = reserved_paise - $3 \
         WHERE tenant_id = $1 AND day = $2 AND currency = $4",
    )
    .bind(&request.tenant_id)
    .bind(day)
    .bind(request.reserved_paise)
    .bind(currency)
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
    return_to_live_ancestors(conn, &request.tenant_id, hop, request.reserved_paise).await
}

/// A release under a revoked hop goes back past it: each revoked hop on the
/// path from `leaf` to the root claims `amount` less of its parent, and that
/// parent has `amount` less allocated (`delegation_partition_exact` checks
/// the sums at commit). Nothing changes when no hop on the path is revoked.
/// Rows are changed from the leaf upwards, the order revocation locks them in.
async fn return_to_live_ancestors(
    conn: &mut PgConnection,
    tenant: &str,
    leaf: &str,
    amount: i64,
) -> Result<(), ServiceError> {
    const REVOKED_ON_PATH: &str = "WITH RECURSIVE up AS ( \
             SELECT id, parent_id, revoked_at, depth FROM delegations \
              WHERE tenant_id = $1 AND id = $2 \
             UNION ALL \
             SELECT p.id, p.parent_id, p.revoked_at, p.depth FROM delegations p \
               JOIN up ON p.tenant_id = $1 AND p.id = up.parent_id) \
         SELECT id, parent_id FROM up WHERE revoked_at IS NOT NULL";
    let revoked: Vec<(String, Option<String>)> = sqlx::query_as(REVOKED_ON_PATH)
        .bind(tenant)
        .bind(leaf)
        .fetch_all(&mut *conn)
        .await
        .ctx("reading the revoked hops above a release")?;
    for (hop, parent) in revoked {
        sqlx::query(
            "UPDATE delegations SET claim_paise = claim_paise - $3 WHERE tenant_id = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(&hop)
        .bind(amount)
        .execute(&mut *conn)
        .await
        .ctx("returning a release past a revoked hop")?;
        if let Some(parent) = parent {
            sqlx::query(
                "UPDATE delegations SET allocated_paise = allocated_paise - $3 \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(&parent)
            .bind(amount)
            .execute(&mut *conn)
            .await
            .ctx("returning a release to the revoked hop's parent")?;
        }
    }
    Ok(())
}
