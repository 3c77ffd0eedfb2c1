//! The counters' guards, violated with SQL as the gate's runtime role and
//! committed: a day's reservation is its requests' reservations
//! (`daily_spend_counts_requests`), a hop's spend is its requests'
//! reservations (`delegation_spend_counts_requests`), a captured payment
//! has the event that carried it (`provider_payment_carried_by_event`).
//! Each is checked at commit, from either side: the counter, or a request
//! that moves its reservation away from it. `daily_spend_counts_requests`
//! and `delegation_spend_counts_requests` ship disabled (each costs more
//! than 10% of the flow's throughput; the audit checks both counters):
//! their tests enable them first, as an operator who accepts the cost
//! does, and a test checks what ships enabled.

use crate::support::*;
use gate::Decision;

/// A checked-out SNACK-BOX x1: its request reserves 25,000 paise on
/// acme's day and on the hop `d-buyer`. The request's id.
async fn reserving(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("SNACK-BOX", 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    let request = request_id(&p);
    let c = w.gate.checkout("acme", &request, "finance-lead").await?;
    assert!(c.is_ok(), "{c:?}");
    Ok(request)
}

/// Enables the day's and the hop's counter triggers on their tables, as
/// the owner.
async fn with_counter_triggers(w: &World) -> Result<(), sqlx::Error> {
    exec(
        w.owner(),
        "ALTER TABLE daily_spend ENABLE ALWAYS TRIGGER daily_spend_counts_requests; \
         ALTER TABLE payment_requests ENABLE ALWAYS TRIGGER daily_spend_counts_requests; \
         ALTER TABLE delegations ENABLE ALWAYS TRIGGER delegation_spend_counts_requests; \
         ALTER TABLE payment_requests ENABLE ALWAYS TRIGGER delegation_spend_counts_requests",
    )
    .await
    .map(|_| ())
}

/// The migrations leave the day's and the hop's triggers disabled and the
/// payment's enabled ALWAYS (no session_replication_role skips it).
#[tokio::test]
async fn the_counter_triggers_ship_as_their_cost_decided() -> TestResult {
    on_world(async |w| {
        let states: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT c.relname::text, t.tgname::text, t.tgenabled::text FROM pg_trigger t \
               JOIN pg_class c ON c.oid = t.tgrelid \
              WHERE t.tgname IN ('daily_spend_counts_requests', \
                                 'delegation_spend_counts_requests', \
                                 'provider_payment_carried_by_event') \
              ORDER BY 1, 2",
        )
        .fetch_all(w.owner())
        .await?;
        assert_eq!(states.len(), 5, "{states:?}");
        for (table, name, enabled) in &states {
            let want = if name == "provider_payment_carried_by_event" {
                "A"
            } else {
                "D"
            };
            assert_eq!(enabled, want, "{name} on {table}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn daily_spend_counts_requests_refuses_a_day_reset_under_its_requests() -> TestResult {
    on_world(async |w| {
        reserving(w).await?;
        with_counter_triggers(w).await?;
        assert_sql_refused_by(
            w.pool(),
            "UPDATE daily_spend SET reserved_paise = 0 WHERE tenant_id = 'acme'",
            "daily_spend_counts_requests",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn daily_spend_counts_requests_refuses_a_reservation_moved_to_another_day() -> TestResult {
    on_world(async |w| {
        let request = reserving(w).await?;
        with_counter_triggers(w).await?;
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "UPDATE payment_requests SET reserved_day = reserved_day - 1 WHERE id = '{request}'"
            ),
            "daily_spend_counts_requests",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_spend_counts_requests_refuses_a_hop_reset_under_its_requests() -> TestResult {
    on_world(async |w| {
        reserving(w).await?;
        with_counter_triggers(w).await?;
        assert_sql_refused_by(
            w.pool(),
            "UPDATE delegations SET spent_paise = 0 WHERE tenant_id = 'acme' AND id = 'd-buyer'",
            "delegation_spend_counts_requests",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_spend_counts_requests_refuses_a_reservation_moved_to_another_hop() -> TestResult
{
    on_world(async |w| {
        let request = reserving(w).await?;
        with_counter_triggers(w).await?;
        exec(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
             VALUES ('acme', 'd-side', 'd-buyer', 'procurement-agent', 100, now())",
        )
        .await?;
        assert_sql_refused_by(
            w.pool(),
            &format!("UPDATE payment_requests SET delegation_id = 'd-side' WHERE id = '{request}'"),
            "delegation_spend_counts_requests",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn provider_payment_carried_by_event_refuses_a_capture_no_event_carried() -> TestResult {
    on_world(async |w| {
        let (_request, _authority, order) = paid_order(w).await?;
        for source in ["webhook", "reconcile"] {
            assert_sql_refused_by(
                w.pool(),
                &format!(
                    "INSERT INTO provider_payments (tenant_id, provider_payment_id, \
                     provider_order_id, request_id, amount_paise, currency, status, source, \
                     recorded_at) \
                     SELECT tenant_id, 'pay_forged_{source}', provider_order_id, request_id, \
                            amount_paise, currency, 'captured', '{source}', now() \
                     FROM provider_orders WHERE provider_order_id = '{order}'"
                ),
                "provider_payment_carried_by_event",
            )
            .await;
        }
        // A failed payment needs no event; made captured, it does.
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_payments (tenant_id, provider_payment_id, provider_order_id, \
                 request_id, amount_paise, currency, status, source, recorded_at) \
                 SELECT tenant_id, 'pay_failed', provider_order_id, request_id, amount_paise, \
                        currency, 'failed', 'webhook', now() \
                 FROM provider_orders WHERE provider_order_id = '{order}'"
            ),
        )
        .await?;
        assert_sql_refused_by(
            w.pool(),
            "UPDATE provider_payments SET status = 'captured' WHERE provider_payment_id = 'pay_failed'",
            "provider_payment_carried_by_event",
        )
        .await;
        Ok(())
    })
    .await
}
