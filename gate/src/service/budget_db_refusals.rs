//! Tests of `budget::reserve`'s mapping from a database refusal to a reason,
//! where the mapping lives, with the database doing the refusing.
//!
//! Guarantees: the daily cap's own guard (`ck_daily_spend_within_cap`)
//! refusing a reservation comes back as `DAILY_BUDGET_EXHAUSTED` with
//! nothing taken; any other database refusal of either statement is an
//! error naming what refused, never a budget refusal (a budget reason for a
//! failure that is not one would hide it). Each budget's own condition in
//! the reservation statement refuses on its own: with the day's cap guard
//! dropped, a day row takes nothing past the cap; with the hop's partition
//! guard dropped, a hop takes nothing past its budget. Every proposal opens its day row
//! under lock before it reserves, so the integration tests never reach the
//! insert path of the daily reservation; here `reserve` is called directly,
//! on a day with no row, so each arm is proven on its own. A test file of its
//! own, so that adding to it leaves `budget.rs` (and the outside audit's
//! verdicts over it) unchanged.

use std::sync::Arc;

use chrono::NaiveDate;
use sqlx::Connection;

use super::budget::{Reservation, reserve};
use super::clock::ManualClock;
use super::error::ServiceError;
use super::grants_db_refusals::{TestResult, on_standard_world};
use super::{Gate, standard};
use crate::provider::InProcessProvider;
use crate::reason::Reason;

fn today() -> NaiveDate {
    standard::now().date_naive()
}

fn reservation(currency: &str, amount_paise: i64) -> Reservation {
    Reservation {
        day: today(),
        currency: currency.to_owned(),
        delegation_id: "d-buyer".to_owned(),
        amount_paise,
    }
}

/// Reserves `r` (capped at `cap_paise`) in a transaction of its own.
async fn reserved(
    conn: &mut sqlx::PgConnection,
    r: &Reservation,
    cap_paise: i64,
) -> Result<Result<(), Reason>, ServiceError> {
    let mut tx = conn
        .begin()
        .await
        .map_err(|e| ServiceError::from_sqlx("begin", e))?;
    let out = reserve(&mut tx, "acme", r, cap_paise).await?;
    tx.commit()
        .await
        .map_err(|e| ServiceError::from_sqlx("commit", e))?;
    Ok(out)
}

/// The day's rows and the hop's spend, as the database holds them.
async fn holdings(conn: &mut sqlx::PgConnection) -> Result<(i64, i64), sqlx::Error> {
    let days: i64 = sqlx::query_scalar("SELECT count(*) FROM daily_spend WHERE tenant_id = 'acme'")
        .fetch_one(&mut *conn)
        .await?;
    let spent: i64 = sqlx::query_scalar(
        "SELECT spent_paise FROM delegations WHERE tenant_id = 'acme' AND id = 'd-buyer'",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok((days, spent))
}

/// The database error's constraint, if `e` is one.
fn constraint_of(e: &ServiceError) -> Option<String> {
    match e {
        ServiceError::Database { cause, .. } => cause
            .as_database_error()
            .and_then(|d| d.constraint())
            .map(str::to_owned),
        _ => None,
    }
}

#[tokio::test]
async fn a_first_reservation_past_the_cap_is_refused_by_the_cap_guard_and_takes_nothing()
-> TestResult {
    on_standard_world(async |conn| {
        assert_eq!(holdings(conn).await?, (0, 0));
        // No day row yet: the reservation inserts one, and the cap's guard refuses it.
        let out = reserved(conn, &reservation("INR", 60_000), 50_000).await?;
        assert_eq!(out, Err(Reason::DailyBudgetExhausted));
        assert_eq!(holdings(conn).await?, (0, 0), "nothing was taken");
        // Within the cap, the same reservation takes both.
        let out = reserved(conn, &reservation("INR", 60_000), 60_000).await?;
        assert_eq!(out, Ok(()));
        assert_eq!(holdings(conn).await?, (1, 60_000));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn another_refusal_of_the_day_is_an_error_naming_its_guard_not_a_budget_refusal() -> TestResult
{
    on_standard_world(async |conn| {
        // A currency outside the guard's grammar: refused by
        // ck_daily_spend_currency_uppercase, which says nothing of budgets.
        let out = reserved(conn, &reservation("inr", 100), 50_000).await;
        let err = match out {
            Err(e) => e,
            Ok(answer) => return Err(format!("answered {answer:?}, not an error").into()),
        };
        assert_eq!(
            constraint_of(&err).as_deref(),
            Some("ck_daily_spend_currency_uppercase"),
            "{err}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_failure_of_the_hop_statement_is_an_error_not_a_budget_refusal() -> TestResult {
    on_standard_world(async |conn| {
        // The hop has spent a little; a reservation on another day (a new
        // day row, whose cap is as large) is taken by the day, and the hop's
        // arithmetic overflows bigint: a failure no budget guard raised.
        assert_eq!(
            reserved(conn, &reservation("INR", 100), 50_000).await?,
            Ok(())
        );
        let mut huge = reservation("INR", i64::MAX - 1);
        huge.day = today().succ_opt().ok_or("no next day")?;
        let out = reserved(conn, &huge, i64::MAX).await;
        let err = match out {
            Err(e) => e,
            Ok(answer) => return Err(format!("answered {answer:?}, not an error").into()),
        };
        assert!(matches!(err, ServiceError::Database { .. }), "{err:?}");
        assert_eq!(constraint_of(&err), None, "{err}");
        assert_eq!(
            holdings(conn).await?,
            (1, 100),
            "the failed reservation took nothing"
        );
        Ok(())
    })
    .await
}

/// Runs `check` as `on_standard_world` does, on a fresh database from which
/// `drop` (sent as the owner, the only role that may) removed a guard first.
async fn on_standard_world_without(
    drop: &'static str,
    check: impl AsyncFnOnce(&mut sqlx::PgConnection) -> TestResult,
) -> TestResult {
    let Some(db) = crate::db::fresh_test_database().await? else {
        return Ok(());
    };
    sqlx::raw_sql(drop).execute(db.owner_pool()).await?;
    let clock = Arc::new(ManualClock::new(standard::now()));
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        b"spendgate-budget-db-refusals-secret-0123456789".to_vec(),
        clock,
    )?;
    gate.seed(&standard::seed()).await?;
    let mut conn = db.pool().acquire().await?;
    check(&mut conn).await
}

/// What acme's day holds in INR, as the database holds it.
async fn day_reserved(conn: &mut sqlx::PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT reserved_paise FROM daily_spend \
         WHERE tenant_id = 'acme' AND day = $1 AND currency = 'INR'",
    )
    .bind(today())
    .fetch_one(&mut *conn)
    .await
}

/// With `drop`'s guard gone, a reservation of `first` (capped at
/// `cap_paise`) is taken, and a second of `second`, past the limit the
/// dropped guard stood behind, is refused with `reason` by the budget's own
/// condition in the statement: neither the day nor the hop takes any of it.
async fn own_condition_refuses_past_the_limit(
    drop: &'static str,
    cap_paise: i64,
    (first, second): (i64, i64),
    reason: Reason,
) -> TestResult {
    on_standard_world_without(drop, async |conn| {
        assert_eq!(
            reserved(conn, &reservation("INR", first), cap_paise).await?,
            Ok(())
        );
        let out = reserved(conn, &reservation("INR", second), cap_paise).await?;
        assert_eq!(out, Err(reason));
        assert_eq!(day_reserved(conn).await?, first, "the day took nothing");
        assert_eq!(holdings(conn).await?, (1, first), "nor did the hop");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn without_the_cap_guard_a_day_row_takes_nothing_past_the_cap() -> TestResult {
    // The day row exists after the first: 40000 + 20000 is past the 50000
    // cap, and the day's own condition is all that stands in the way.
    own_condition_refuses_past_the_limit(
        "ALTER TABLE daily_spend DROP CONSTRAINT ck_daily_spend_within_cap",
        50_000,
        (40_000, 20_000),
        Reason::DailyBudgetExhausted,
    )
    .await
}

#[tokio::test]
async fn without_the_partition_guard_a_hop_takes_nothing_past_its_budget() -> TestResult {
    // d-buyer's budget is 200000: 150000 + 60000 is past it (the day's cap
    // of 500000 is not), and the hop's own condition is all that stands in
    // the way.
    own_condition_refuses_past_the_limit(
        "ALTER TABLE delegations DROP CONSTRAINT ck_delegation_budget_partitioned",
        500_000,
        (150_000, 60_000),
        Reason::DelegationBudgetExhausted,
    )
    .await
}
