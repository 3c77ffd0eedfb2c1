//! The database guards of money that has moved
//! (migrations/20261130000020_provider_payments.sql), each violated directly
//! with SQL on a fresh database: the statement must be refused and the
//! guard's name must be in the error.

use crate::support::*;
use gate::provider::{Payment, PaymentStatus};
use gate::service::razorpay_envelope;
use gate::service::sign_webhook;
use gate::service::webhook::EVENT_CAPTURED;
use gate::{Decision, Reason};
use sqlx::{Executor, PgPool};

async fn exec(pool: &PgPool, sql: &str) -> Result<u64, sqlx::Error> {
    pool.execute(sqlx::AssertSqlSafe(sql))
        .await
        .map(|r| r.rows_affected())
}

/// A captured payment row for `order` (60,000 INR, acme), with overrides.
fn payment_row(order: &str, id: &str, amount: i64, status: &str, source: &str) -> String {
    format!(
        "INSERT INTO provider_payments (tenant_id, provider_payment_id, provider_order_id, request_id, \
         amount_paise, currency, status, source, recorded_at) \
         SELECT tenant_id, '{id}', provider_order_id, request_id, {amount}, currency, '{status}', \
                '{source}', now() FROM provider_orders WHERE provider_order_id = '{order}'"
    )
}

/// A kept capture for `authority` under `tenant`.
fn kept_row(tenant: &str, authority: &str, event_id: &str, amount: i64) -> String {
    format!(
        "INSERT INTO kept_captures (tenant_id, provider_event_id, authority_id, provider_order_id, \
         provider_payment_id, amount_paise, currency, event_created_at, received_at) \
         VALUES ('{tenant}', '{event_id}', '{authority}', 'order_late', 'pay_late', {amount}, 'INR', \
                 now(), now())"
    )
}

/// A request moved to NEEDS_REVIEW by a second captured payment; returns its id.
async fn needs_review(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let (request, _, order) = paid_order(w).await?;
    for (event_id, payment_id) in [
        ("evt_a", "pay_PLACEHOLDERA1"),
        ("evt_b", "pay_PLACEHOLDERB2"),
    ] {
        let payment = Payment {
            id: payment_id.into(),
            order_id: order.clone(),
            amount_paise: 60000,
            currency: "INR".into(),
            status: PaymentStatus::Captured,
            created_at: w.gate.now().timestamp(),
        };
        let body = razorpay_envelope(EVENT_CAPTURED, w.gate.now(), Some(&payment), None);
        let h = w
            .gate
            .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some(event_id))
            .await?;
        assert!(h.is_ok(), "{h:?}");
    }
    assert_eq!(
        w.gate.request_state("acme", &request).await?.as_deref(),
        Some("NEEDS_REVIEW")
    );
    Ok(request)
}

#[tokio::test]
async fn uq_provider_payment_id_refuses_recording_a_payment_twice() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        exec(
            w.pool(),
            &payment_row(&order, "pay_once", 60000, "failed", "webhook"),
        )
        .await?;
        // Under another tenant, so the primary key (tenant, id) does not answer first.
        assert_refused_by(
            exec(
                w.pool(),
                &payment_row(&order, "pay_once", 60000, "captured", "reconcile")
                    .replace("SELECT tenant_id,", "SELECT 'globex',"),
            )
            .await,
            "uq_provider_payment_id",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_provider_payment_matches_order_refuses_a_payment_of_another_amount() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &payment_row(&order, "pay_big", 6_000_000, "captured", "webhook"),
            )
            .await,
            "fk_provider_payment_matches_order",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_provider_payment_status_known_refuses_an_unknown_status() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &payment_row(&order, "pay_x", 60000, "refunded", "webhook"),
            )
            .await,
            "ck_provider_payment_status_known",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_provider_payment_source_known_refuses_a_browser_callback() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &payment_row(&order, "pay_x", 60000, "captured", "browser"),
            )
            .await,
            "ck_provider_payment_source_known",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_state_transition_refuses_needs_review_without_a_captured_payment() -> TestResult {
    on_world(async |w| {
    let (request, _, order) = paid_order(w).await?;
    // A failed payment is not money that moved.
    exec(
        w.pool(),
        &payment_row(&order, "pay_failed", 60000, "failed", "webhook"),
    )
    .await?;
    // CAPTURED is refused first by request_captured_by_event (db_roles.rs);
    // NEEDS_REVIEW only by this guard.
    for (to, guard) in [
        ("NEEDS_REVIEW", "request_state_transition"),
        ("CAPTURED", "request_captured_by_event"),
    ] {
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "UPDATE payment_requests SET state = '{to}' WHERE tenant_id = 'acme' AND id = '{request}'"
                ),
            )
            .await,
            guard,
        );
    }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_state_transition_keeps_needs_review_final() -> TestResult {
    on_world(async |w| {
        let request = needs_review(w).await?;
        for to in ["CAPTURED", "FAILED", "PROVIDER_PENDING"] {
            assert_refused_by(
                exec(
                    w.pool(),
                    &format!(
                        "UPDATE payment_requests SET state = '{to}', reserved_paise = 0 \
                     WHERE tenant_id = 'acme' AND id = '{request}'"
                    ),
                )
                .await,
                "request_state_transition",
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_request_reservation_matches_state_refuses_a_review_holding_less_than_its_amount()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let request = needs_review(&w).await?;
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "UPDATE payment_requests SET reserved_paise = 59999 \
                 WHERE tenant_id = 'acme' AND id = '{request}'"
            ),
        )
        .await,
        "ck_request_reservation_matches_state",
    );
    w.drop().await
}

#[tokio::test]
async fn ck_daily_spend_within_cap_allows_past_the_cap_only_what_was_captured() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
        needs_review(w).await?;
        let (reserved, cap, review): (i64, i64, i64) = sqlx::query_as(
        "SELECT reserved_paise, cap_paise, review_paise FROM daily_spend WHERE tenant_id = 'acme'",
    )
    .fetch_one(w.pool())
    .await?;
        assert_eq!((reserved, review), (120000, 60000));
        exec(
            w.pool(),
            &format!(
                "UPDATE daily_spend SET reserved_paise = {} WHERE tenant_id = 'acme'",
                cap + review
            ),
        )
        .await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "UPDATE daily_spend SET reserved_paise = {} WHERE tenant_id = 'acme'",
                    cap + review + 1
                ),
            )
            .await,
            "ck_daily_spend_within_cap",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_delegation_budget_partitioned_allows_past_the_budget_only_what_was_captured()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    without_counter_triggers(&w).await?;
    needs_review(&w).await?;
    exec(
        w.pool(),
        "UPDATE delegations SET spent_paise = budget_paise + review_paise - allocated_paise \
         WHERE tenant_id = 'acme' AND id = 'd-buyer'",
    )
    .await?;
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET spent_paise = spent_paise + 1 \
             WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .await,
        "ck_delegation_budget_partitioned",
    );
    w.drop().await
}

#[tokio::test]
async fn uq_provider_event_id_refuses_the_same_id_bytes_however_long() -> TestResult {
    on_world(async |w| {
    let (_, _, order) = paid_order(w).await?;
    let long = "e".repeat(6000);
    let row = |id: &str| {
        format!(
            "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, request_id, event, \
             amount_paise, currency, event_created_at, received_at, outcome, body_sha256) \
             SELECT tenant_id, convert_to('{id}', 'UTF8'), provider_order_id, request_id, 'payment.failed', \
                    amount_paise, currency, now(), now(), 'applied', repeat('c', 64) \
               FROM provider_orders WHERE provider_order_id = '{order}'"
        )
    };
    exec(w.pool(), &row(&long)).await?;
    exec(w.pool(), &row(&long[..5999])).await?;
    assert_refused_by(exec(w.pool(), &row(&long)).await, "uq_provider_event_id");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_provider_event_id_not_blank_refuses_an_empty_id() -> TestResult {
    on_world(async |w| {
    let (_, _, order) = paid_order(w).await?;
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, request_id, event, \
                 amount_paise, currency, event_created_at, received_at, outcome, body_sha256) \
                 SELECT tenant_id, ''::bytea, provider_order_id, request_id, 'payment.failed', \
                        amount_paise, currency, now(), now(), 'applied', repeat('c', 64) \
                   FROM provider_orders WHERE provider_order_id = '{order}'"
            ),
        )
        .await,
        "ck_provider_event_id_not_blank",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn uq_kept_capture_event_refuses_keeping_an_event_twice() -> TestResult {
    on_world(async |w| {
        let (_, authority, _) = paid_order(w).await?;
        // Both in one transaction: the second is refused at once, before
        // `kept_capture_carried_by_event` checks the first at commit. Under
        // another tenant, so the primary key (tenant, digest) does not
        // answer first.
        let twice = format!(
            "{}; {}",
            kept_row("acme", &authority, "evt_k", 60000),
            kept_row("globex", &authority, "evt_k", 60000)
        );
        assert_refused_by(exec(w.pool(), &twice).await, "uq_kept_capture_event");
        Ok(())
    })
    .await
}

/// A kept capture the webhook kept, for `authority`'s paid order: the
/// provider answered the gate too late, so the signed capture names an
/// order the gate never recorded. Returns the request id.
async fn kept_by_the_webhook(
    w: &World,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-STARTER", 1).await?;
    let request = request_id(&p);
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    w.gate
        .provider()
        .set_mode(gate::provider::Mode::Late, Some(1));
    let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    let order = w
        .gate
        .provider()
        .order_for_receipt(&authority)
        .ok_or("the provider made no order")?;
    let payment = w.gate.provider().capture_payment(&order.id)?;
    let order = w
        .gate
        .provider()
        .order_for_receipt(&authority)
        .ok_or("the provider lost the order")?;
    let body = razorpay_envelope(EVENT_CAPTURED, w.gate.now(), Some(&payment), Some(&order));
    let h = w
        .gate
        .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some("evt_kept"))
        .await?;
    assert!(h.is_ok(), "{h:?}");
    assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
    Ok(request)
}

#[tokio::test]
async fn kept_capture_carried_by_event_refuses_a_kept_capture_no_event_kept() -> TestResult {
    on_world(async |w| {
        let (_, authority, _) = paid_order(w).await?;
        assert_refused_by(
            exec(w.pool(), &kept_row("acme", &authority, "evt_k", 60000)).await,
            "kept_capture_carried_by_event",
        );
        Ok(())
    })
    .await
}

/// A kept capture's terms, changed after the webhook kept it (queued, then
/// integrated), no longer match its entry: refused, each change alone.
#[tokio::test]
async fn kept_capture_carried_by_event_refuses_changing_what_was_kept() -> TestResult {
    on_world(async |w| {
        kept_by_the_webhook(w).await?;
        for integrated in [false, true] {
            if integrated {
                w.gate.integrate().await?;
            }
            for change in [
                "provider_payment_id = 'pay_Rewritten0001'",
                "provider_order_id = 'order_Rewritten01'",
                "amount_paise = amount_paise * 100",
                "currency = 'USD'",
                "provider_event_id = 'evt_other'::bytea",
            ] {
                assert_refused_by(
                    exec(w.pool(), &format!("UPDATE kept_captures SET {change}")).await,
                    "kept_capture_carried_by_event",
                );
            }
            // Settling it changes none of its terms.
            assert_eq!(
                exec(w.pool(), "UPDATE kept_captures SET settled_at = now()").await?,
                1
            );
            exec(w.pool(), "UPDATE kept_captures SET settled_at = NULL").await?;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_kept_capture_authority_same_tenant_refuses_another_tenants_authority() -> TestResult {
    on_world(async |w| {
        let (_, authority, _) = paid_order(w).await?;
        assert_refused_by(
            exec(w.pool(), &kept_row("globex", &authority, "evt_k", 60000)).await,
            "fk_kept_capture_authority_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_kept_capture_amount_positive_refuses_a_zero_capture() -> TestResult {
    on_world(async |w| {
        let (_, authority, _) = paid_order(w).await?;
        assert_refused_by(
            exec(w.pool(), &kept_row("acme", &authority, "evt_k", 0)).await,
            "ck_kept_capture_amount_positive",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn daily_spend_review_in_step_refuses_raising_the_review_alone() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
    needs_review(w).await?;
    // Raising the review without the spend would make room past the cap.
    for sql in [
        "UPDATE daily_spend SET review_paise = review_paise + 500000 WHERE tenant_id = 'acme'",
        "UPDATE daily_spend SET review_paise = review_paise - 1, reserved_paise = reserved_paise - 1 \
         WHERE tenant_id = 'acme'",
        "INSERT INTO daily_spend (tenant_id, day, reserved_paise, cap_paise, review_paise) \
         VALUES ('acme', '2026-09-04', 0, 500000, 1)",
        "INSERT INTO daily_spend (tenant_id, day, reserved_paise, cap_paise, review_paise) \
         VALUES ('acme', '2026-09-05', 0, 500000, -1)",
    ] {
        assert_refused_by(exec(w.pool(), sql).await, "daily_spend_review_in_step");
    }
    // In step with the spend it is allowed (what a captured payment does).
    exec(
        w.pool(),
        "UPDATE daily_spend SET review_paise = review_paise + 7, reserved_paise = reserved_paise + 7 \
         WHERE tenant_id = 'acme'",
    )
    .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_review_in_step_refuses_raising_the_review_alone() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
        needs_review(w).await?;
        for sql in [
            "UPDATE delegations SET review_paise = review_paise + 500000 \
         WHERE tenant_id = 'acme' AND id = 'd-buyer'",
            "UPDATE delegations SET review_paise = review_paise - 1, spent_paise = spent_paise - 1 \
         WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        ] {
            assert_refused_by(exec(w.pool(), sql).await, "delegation_review_in_step");
        }
        exec(
            w.pool(),
            "UPDATE delegations SET review_paise = review_paise + 7, spent_paise = spent_paise + 7 \
         WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .await?;
        Ok(())
    })
    .await
}
