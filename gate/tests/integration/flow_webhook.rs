//! `webhook` against Postgres, in Razorpay's shape: the signature over the
//! raw bytes first (current or previous secret), the event id from its
//! header, the documented envelope, unknown orders, duplicates of any
//! length, amount and currency, time, event kind; a failed attempt keeps the
//! request PROVIDER_PENDING, and a capture is on the books whatever the
//! request's state.

use std::sync::Arc;

use crate::support::*;
use chrono::Duration;
use gate::provider::{InProcessProvider, Payment, PaymentStatus};
use gate::service::webhook::{EVENT_AUTHORIZED, EVENT_CAPTURED, EVENT_FAILED, EVENT_ORDER_PAID};
use gate::service::{
    Gate, ManualClock, Outcome, ProviderEvent, WebhookSecretError, razorpay_envelope, sign_webhook,
};
use gate::{Decision, Reason};
use serde_json::{Value, json};

fn signed(ev: &ProviderEvent) -> (Vec<u8>, String) {
    let body = ev.to_body();
    let sig = sign_webhook(SECRET, &body);
    (body, sig)
}

fn capture(w: &World, id: &str, order: &str) -> ProviderEvent {
    ProviderEvent {
        id: id.into(),
        event: EVENT_CAPTURED.into(),
        created_at: w.gate.now(),
        order_id: order.into(),
        amount_paise: 60000,
        currency: "INR".into(),
    }
}

/// Signs and sends `ev` with its id in the event-id header.
async fn send(w: &World, ev: &ProviderEvent) -> Result<Outcome, gate::service::ServiceError> {
    let (body, sig) = signed(ev);
    w.gate.webhook(&body, Some(&sig), Some(&ev.id)).await
}

/// Signs and sends raw bytes under `event_id`.
async fn send_raw(
    w: &World,
    body: &[u8],
    event_id: &str,
) -> Result<Outcome, gate::service::ServiceError> {
    w.gate
        .webhook(body, Some(&sign_webhook(SECRET, body)), Some(event_id))
        .await
}

async fn nothing_captured(
    w: &World,
    request: &str,
) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    Ok(w.gate.captured_paise("acme").await? == 0
        && w.gate.request_state("acme", request).await?.as_deref() == Some("PROVIDER_PENDING"))
}

async fn ledger_kinds(w: &World) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(
        sqlx::query_scalar("SELECT kind FROM ledger_entries ORDER BY seq")
            .fetch_all(w.ledger().await?)
            .await?,
    )
}

/// Razorpay's documented `payment.captured` example, with placeholder ids
/// and the amount, order and time of this test.
fn documented_capture(order: &str, amount: i64, created_at: i64) -> Vec<u8> {
    json!({
      "entity": "event",
      "account_id": "acc_PLACEHOLDER001",
      "event": "payment.captured",
      "contains": ["payment"],
      "payload": {
        "payment": {
          "entity": {
            "id": "pay_PLACEHOLDER001",
            "entity": "payment",
            "amount": amount,
            "currency": "INR",
            "base_amount": amount,
            "status": "captured",
            "order_id": order,
            "invoice_id": null,
            "international": false,
            "method": "netbanking",
            "amount_refunded": 0,
            "amount_transferred": 0,
            "refund_status": null,
            "captured": true,
            "description": null,
            "card_id": null,
            "bank": "HDFC",
            "wallet": null,
            "vpa": null,
            "email": "customer@example.com",
            "contact": "+919000090000",
            "notes": [],
            "fee": 2,
            "tax": 0,
            "error_code": null,
            "error_description": null,
            "created_at": created_at - 7
          }
        }
      },
      "created_at": created_at
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn a_missing_or_wrong_signature_is_refused_before_anything_is_parsed() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let (body, sig) = signed(&capture(w, "evt_1", &order));
        let forged = sign_webhook(b"not the secret", &body);
        let mut tampered = body.clone();
        let at = tampered.iter().position(|b| *b == b'6').unwrap_or(0);
        tampered[at] = b'9';
        for (raw, signature) in [
            (&body, None),
            (&body, Some("")),
            (&body, Some("zz-not-hex")),
            (&body, Some(forged.as_str())),
            (&tampered, Some(sig.as_str())),
            (&b"not json at all".to_vec(), Some(sig.as_str())),
        ] {
            let h = w.gate.webhook(raw, signature, Some("evt_1")).await?;
            assert_eq!(
                h.decision,
                Decision::Deny(Reason::WebhookSignatureInvalid),
                "{signature:?}"
            );
            assert_eq!(h.id, None, "an unverified event is not named");
        }
        assert!(nothing_captured(w, &request).await?);
        assert!(
            w.gate
                .webhook(&body, Some(&sig.to_uppercase()), Some("evt_1"))
                .await?
                .is_ok(),
            "hex case does not matter"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_signed_body_that_does_not_parse_is_malformed() -> TestResult {
    on_world(async |w| {
    let (request, _, order) = paid_order(w).await?;
    let body = br#"{"event":"payment.captured"}"#;
    let h = send_raw(w, body, "evt_m").await?;
    assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
    // The pre-envelope body (a top-level `id`, no `entity: event`) is not the
    // documented shape either.
    let old = json!({"id": "evt_old", "event": "payment.captured", "created_at": w.gate.now().timestamp(),
        "payload": {"payment": {"entity": {"order_id": order, "amount": 60000, "currency": "INR"}}}})
    .to_string();
    let h = send_raw(w, old.as_bytes(), "evt_old").await?;
    assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
    assert!(nothing_captured(w, &request).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_event_id_comes_from_its_header_and_a_missing_one_is_malformed() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let (body, sig) = signed(&capture(w, "evt_h", &order));
        for missing in [None, Some("")] {
            let h = w.gate.webhook(&body, Some(&sig), missing).await?;
            assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
        }
        assert!(nothing_captured(w, &request).await?);
        let h = w.gate.webhook(&body, Some(&sig), Some("evt_h")).await?;
        assert!(h.is_ok(), "{h:?}");
        assert_eq!(h.id.as_deref(), Some("evt_h"));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_documented_payment_captured_example_captures() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let body = documented_capture(&order, 60000, w.gate.now().timestamp());
        let h = send_raw(w, &body, "EVT_PLACEHOLDER_0001").await?;
        assert!(h.is_ok(), "{h:?}");
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        let books = w.gate.books(Some("acme")).await?;
        assert!(books.balanced(60000), "{books:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_event_for_an_order_the_gate_never_made_is_refused() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        let h = send(w, &capture(w, "evt_x", "order_test_999999")).await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookUnknownOrder));
        assert_eq!(w.gate.captured_paise("acme").await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_order_id_outside_the_identifier_grammar_is_an_unknown_order_not_an_error() -> TestResult
{
    on_world(async |w| {
        let (request, _, _) = paid_order(w).await?;
        let before = ledger_kinds(w).await?.len();
        for (i, order) in [
            "order\u{0}test".to_owned(),
            "o".repeat(65),
            "order_\u{200b}1".to_owned(),
            String::new(),
        ]
        .iter()
        .enumerate()
        {
            let h = send(w, &capture(w, &format!("evt_bad_{i}"), order)).await?;
            assert_eq!(
                h.decision,
                Decision::Deny(Reason::WebhookUnknownOrder),
                "{order:?}"
            );
        }
        assert_eq!(
            ledger_kinds(w).await?.len(),
            before,
            "an event for no order of the gate belongs to no tenant's chain"
        );
        assert!(nothing_captured(w, &request).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_event_id_is_processed_once() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        let ev = capture(w, "evt_1", &order);
        assert!(send(w, &ev).await?.is_ok());
        let again = send(w, &ev).await?;
        assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn event_ids_of_any_length_or_bytes_are_deduplicated_exactly() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        let long = "e".repeat(6000);
        let ev = capture(w, &long, &order);
        assert!(send(w, &ev).await?.is_ok(), "a 6,000-byte id is recorded");
        let again = send(w, &ev).await?;
        assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
        // One byte different is a different event (the same payment: no change).
        let near = capture(w, &format!("{}f", &long[..5999]), &order);
        let h = send(w, &near).await?;
        assert!(h.is_ok(), "{h:?}");
        // An id carrying NUL and invisible characters never reaches SQL as text.
        let odd = capture(w, "evt\u{0}\u{200b}\u{202e}", &order);
        assert!(send(w, &odd).await?.is_ok());
        assert_eq!(
            send(w, &odd).await?.decision,
            Decision::Deny(Reason::WebhookDuplicate)
        );
        let stored: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT provider_event_id FROM provider_events ORDER BY received_at",
        )
        .fetch_all(w.pool())
        .await?;
        assert!(stored.contains(&long.clone().into_bytes()));
        assert!(stored.contains(&"evt\u{0}\u{200b}\u{202e}".as_bytes().to_vec()));
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_redelivered_event_is_a_duplicate_whatever_its_age() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        let ev = capture(w, "evt_late", &order);
        assert!(send(w, &ev).await?.is_ok());
        // Providers retry for days: the same event, now more than a day old, is
        // recognised as the one already applied, not judged afresh as stale.
        w.clock.advance(Duration::hours(25));
        let again = send(w, &ev).await?;
        assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn amount_and_currency_must_match_the_server_derived_order() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let mut cheap = capture(w, "evt_amount", &order);
        cheap.amount_paise = 100;
        assert_eq!(
            send(w, &cheap).await?.decision,
            Decision::Deny(Reason::WebhookAmountMismatch)
        );
        let mut dollars = capture(w, "evt_currency", &order);
        dollars.currency = "USD".into();
        assert_eq!(
            send(w, &dollars).await?.decision,
            Decision::Deny(Reason::WebhookCurrencyMismatch)
        );
        assert!(nothing_captured(w, &request).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn payment_and_order_entities_that_disagree_are_malformed() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let mut paid = capture(w, "evt_paid", &order);
        paid.event = EVENT_ORDER_PAID.into();
        let good: Value = serde_json::from_slice(&paid.to_body())?;
        let cases: [(&str, &str, Value); 3] = [
            ("order", "id", json!("order_test_000777")),
            ("order", "amount", json!(100)),
            ("order", "currency", json!("USD")),
        ];
        for (i, (entity, field, value)) in cases.into_iter().enumerate() {
            let mut v = good.clone();
            v["payload"][entity]["entity"][field] = value;
            let h = send_raw(w, &serde_json::to_vec(&v)?, &format!("evt_dis_{i}")).await?;
            assert_eq!(
                h.decision,
                Decision::Deny(Reason::WebhookMalformed),
                "{field}"
            );
        }
        assert!(nothing_captured(w, &request).await?);
        // The same envelope, agreeing, captures.
        assert!(send(w, &paid).await?.is_ok());
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn stale_and_post_dated_events_are_refused_at_their_boundaries() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let at = |id: &str, offset: Duration| {
            let mut e = capture(w, id, &order);
            e.created_at = w.gate.now() + offset;
            e
        };
        let stale = at("evt_stale", -Duration::hours(24) - Duration::seconds(1));
        assert_eq!(
            send(w, &stale).await?.decision,
            Decision::Deny(Reason::WebhookStale)
        );
        let future = at("evt_future", Duration::minutes(5) + Duration::seconds(1));
        assert_eq!(
            send(w, &future).await?.decision,
            Decision::Deny(Reason::WebhookPostDated)
        );
        assert!(nothing_captured(w, &request).await?);
        let edge = at("evt_edge", Duration::minutes(5));
        assert!(
            send(w, &edge).await?.is_ok(),
            "exactly 5 minutes ahead is inside"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_event_exactly_a_day_old_is_accepted() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        let mut e = capture(w, "evt_day", &order);
        e.created_at = w.gate.now() - Duration::hours(24);
        assert!(send(w, &e).await?.is_ok());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn events_the_gate_does_not_act_on_are_ignored() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        for (i, name) in [
            "payment.dispute.created",
            "refund.processed",
            "order.notified",
        ]
        .into_iter()
        .enumerate()
        {
            let mut e = capture(w, &format!("evt_{i}"), &order);
            e.event = name.into();
            assert_eq!(
                send(w, &e).await?.decision,
                Decision::Deny(Reason::WebhookEventIgnored),
                "{name}"
            );
        }
        assert!(nothing_captured(w, &request).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn payment_captured_and_order_paid_of_one_payment_count_once() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        assert!(send(w, &capture(w, "evt_cap", &order)).await?.is_ok());
        let mut paid = capture(w, "evt_order_paid", &order);
        paid.event = EVENT_ORDER_PAID.into();
        assert!(send(w, &paid).await?.is_ok());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
        assert!(w.gate.books(Some("acme")).await?.balanced(60000));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_failed_attempt_keeps_the_request_pending_with_its_reservations() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let mut failed = capture(w, "evt_fail", &order);
        failed.event = EVENT_FAILED.into();
        assert!(send(w, &failed).await?.is_ok());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(60000)
        );
        // Then the customer pays: the capture is recorded (the second path).
        assert!(send(w, &capture(w, "evt_cap", &order)).await?.is_ok());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        // A failure reported after the capture releases nothing.
        let mut late_failure = capture(w, "evt_fail_2", &order);
        late_failure.event = EVENT_FAILED.into();
        assert!(send(w, &late_failure).await?.is_ok());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
        assert!(w.gate.books(Some("acme")).await?.balanced(60000));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_second_payment_on_a_captured_order_is_counted_and_needs_review() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        assert!(send(w, &capture(w, "evt_cap", &order)).await?.is_ok());
        let second = Payment {
            id: "pay_PLACEHOLDER002".into(),
            order_id: order.clone(),
            amount_paise: 60000,
            currency: "INR".into(),
            status: PaymentStatus::Captured,
            created_at: w.gate.now().timestamp(),
        };
        let body = razorpay_envelope(EVENT_CAPTURED, w.gate.now(), Some(&second), None);
        assert!(send_raw(w, &body, "evt_cap_2").await?.is_ok());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("NEEDS_REVIEW")
        );
        // The review says what it reviews: money captured after the request was CAPTURED.
        let state_reason: Option<String> = sqlx::query_scalar(
            "SELECT state_reason FROM payment_requests WHERE tenant_id = 'acme' AND id = $1",
        )
        .bind(&request)
        .fetch_one(w.pool())
        .await?;
        assert_eq!(state_reason.as_deref(), Some("CAPTURED_AFTER_CAPTURED"));
        assert_eq!(w.gate.spent_today_paise("acme").await?, 120000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(120000)
        );
        let books = w.gate.books(Some("acme")).await?;
        assert!(books.balanced(120000), "{books:?}");
        assert!(
            ledger_kinds(w)
                .await?
                .last()
                .is_some_and(|k| k == "provider_event")
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_webhook_secret_shorter_than_32_bytes_refuses_to_build_a_gate() -> TestResult {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgresql://postgres@%2Ftmp%2Fspendgate-no-such-server:5432/postgres")?;
    let clock = Arc::new(ManualClock::new(gate::service::standard::now()));
    for secret in [&b""[..], b"short", &[b'k'; 31]] {
        let built = Gate::new(
            pool.clone(),
            InProcessProvider::new(),
            secret,
            clock.clone(),
        );
        assert_eq!(
            built.err(),
            Some(WebhookSecretError::TooShort {
                which: "current",
                len: secret.len()
            })
        );
    }
    let gate = Gate::new(pool.clone(), InProcessProvider::new(), [b'k'; 32], clock)?;
    let rotated = gate.with_previous_webhook_secret(b"too-short".to_vec());
    assert!(
        matches!(
            rotated,
            Err(WebhookSecretError::TooShort {
                which: "previous",
                len: 9
            })
        ),
        "{rotated:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_rotated_previous_secret_still_verifies_and_no_other_does() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    const PREVIOUS: &[u8] = b"whsec_previous_spendgate_abcdef0123456789";
    let clock = Arc::new(ManualClock::new(gate::service::standard::now()));
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        SECRET,
        clock.clone(),
    )?
    .with_previous_webhook_secret(PREVIOUS)?;
    gate.seed(&gate::service::standard::seed()).await?;
    let w = World {
        db,
        gate: Arc::new(gate),
        clock,
    };
    let (request, _, order) = paid_order(&w).await?;
    let body = capture(&w, "evt_rotated", &order).to_body();
    let wrong = sign_webhook(b"whsec_some_other_secret_0123456789abcdef", &body);
    assert_eq!(
        w.gate
            .webhook(&body, Some(&wrong), Some("evt_rotated"))
            .await?
            .decision,
        Decision::Deny(Reason::WebhookSignatureInvalid)
    );
    assert!(nothing_captured(&w, &request).await?);
    let old = sign_webhook(PREVIOUS, &body);
    assert!(
        w.gate
            .webhook(&body, Some(&old), Some("evt_rotated"))
            .await?
            .is_ok()
    );
    assert_eq!(w.gate.captured_paise("acme").await?, 60000);
    w.drop().await
}

/// A `payment.authorized` event, as `ProviderEvent` builds it, names the
/// authorisation the provider holds for the order, so the gate captures
/// that payment through the provider and books it, and the ledger records
/// the event as the capture it became.
#[tokio::test]
async fn an_authorization_event_names_the_payment_the_provider_authorised() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let held = w.gate.provider().authorize_payment(&order)?;
        let ev = ProviderEvent {
            event: EVENT_AUTHORIZED.into(),
            ..capture(w, "evt_authorised", &order)
        };
        let named = ev.payment();
        assert_eq!(
            (&named.id, named.status, named.amount_paise),
            (&held.id, PaymentStatus::Authorized, held.amount_paise)
        );
        let h = send(w, &ev).await?;
        assert!(h.is_ok(), "{h:?}");
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        // The ledger records the capture the gate made of it, no longer an
        // authorisation.
        let entry: String = sqlx::query_scalar(
            "SELECT entry FROM ledger_entries WHERE kind = 'provider_event' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        let entry: Value = serde_json::from_str(&entry)?;
        let event = &entry["body"]["event"];
        assert_eq!(
            (&event["captured"], &event["authorized"]),
            (&Value::Bool(true), &Value::Bool(false)),
            "{entry}"
        );
        Ok(())
    })
    .await
}
