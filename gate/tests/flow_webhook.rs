//! `webhook` against Postgres: the signature over the raw bytes first, then
//! unknown orders, duplicates, amount and currency, time, event kind and
//! state; only a verified capture moves PROVIDER_PENDING to CAPTURED.

mod support;

use chrono::Duration;
use gate::service::webhook::{EVENT_CAPTURED, EVENT_FAILED};
use gate::service::{ProviderEvent, sign_webhook};
use gate::{Decision, Reason};
use support::*;

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

async fn nothing_captured(
    w: &World,
    request: &str,
) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    Ok(w.gate.captured_paise("acme").await? == 0
        && w.gate.request_state("acme", request).await?.as_deref() == Some("PROVIDER_PENDING"))
}

#[tokio::test]
async fn a_missing_or_wrong_signature_is_refused_before_anything_is_parsed() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    let (body, sig) = signed(&capture(&w, "evt_1", &order));
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
        let h = w.gate.webhook(raw, signature).await?;
        assert_eq!(
            h.decision,
            Decision::Deny(Reason::WebhookSignatureInvalid),
            "{signature:?}"
        );
    }
    assert!(nothing_captured(&w, &request).await?);
    assert!(
        w.gate
            .webhook(&body, Some(&sig.to_uppercase()))
            .await?
            .is_ok(),
        "hex case does not matter"
    );
    w.drop().await
}

#[tokio::test]
async fn a_signed_body_that_does_not_parse_is_malformed() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let body = br#"{"event":"payment.captured"}"#;
    let h = w
        .gate
        .webhook(body, Some(&sign_webhook(SECRET, body)))
        .await?;
    assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
    w.drop().await
}

#[tokio::test]
async fn an_event_for_an_order_the_gate_never_made_is_refused() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    paid_order(&w).await?;
    let (body, sig) = signed(&capture(&w, "evt_x", "order_test_999999"));
    let h = w.gate.webhook(&body, Some(&sig)).await?;
    assert_eq!(h.decision, Decision::Deny(Reason::WebhookUnknownOrder));
    assert_eq!(w.gate.captured_paise("acme").await?, 0);
    w.drop().await
}

#[tokio::test]
async fn an_event_id_is_processed_once() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (_, _, order) = paid_order(&w).await?;
    let (body, sig) = signed(&capture(&w, "evt_1", &order));
    assert!(w.gate.webhook(&body, Some(&sig)).await?.is_ok());
    let again = w.gate.webhook(&body, Some(&sig)).await?;
    assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
    assert_eq!(w.gate.captured_paise("acme").await?, 60000);
    w.drop().await
}

#[tokio::test]
async fn a_redelivered_event_is_a_duplicate_whatever_its_age() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (_, _, order) = paid_order(&w).await?;
    let (body, sig) = signed(&capture(&w, "evt_late", &order));
    assert!(w.gate.webhook(&body, Some(&sig)).await?.is_ok());
    // Providers retry for days: the same event, now more than a day old, is
    // recognised as the one already applied, not judged afresh as stale.
    w.clock.advance(Duration::hours(25));
    let again = w.gate.webhook(&body, Some(&sig)).await?;
    assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
    assert_eq!(w.gate.captured_paise("acme").await?, 60000);
    w.drop().await
}

#[tokio::test]
async fn amount_and_currency_must_match_the_server_derived_order() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    let mut cheap = capture(&w, "evt_amount", &order);
    cheap.amount_paise = 100;
    let (body, sig) = signed(&cheap);
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::WebhookAmountMismatch)
    );
    let mut dollars = capture(&w, "evt_currency", &order);
    dollars.currency = "USD".into();
    let (body, sig) = signed(&dollars);
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::WebhookCurrencyMismatch)
    );
    assert!(nothing_captured(&w, &request).await?);
    w.drop().await
}

#[tokio::test]
async fn stale_and_post_dated_events_are_refused_at_their_boundaries() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    let at = |id: &str, offset: Duration| {
        let mut e = capture(&w, id, &order);
        e.created_at = w.gate.now() + offset;
        signed(&e)
    };
    let (body, sig) = at("evt_stale", -Duration::hours(24) - Duration::seconds(1));
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::WebhookStale)
    );
    let (body, sig) = at("evt_future", Duration::minutes(5) + Duration::seconds(1));
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::WebhookPostDated)
    );
    assert!(nothing_captured(&w, &request).await?);
    let (body, sig) = at("evt_edge", Duration::minutes(5));
    assert!(
        w.gate.webhook(&body, Some(&sig)).await?.is_ok(),
        "exactly 5 minutes ahead is inside"
    );
    w.drop().await
}

#[tokio::test]
async fn an_event_exactly_a_day_old_is_accepted() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (_, _, order) = paid_order(&w).await?;
    let mut e = capture(&w, "evt_day", &order);
    e.created_at = w.gate.now() - Duration::hours(24);
    let (body, sig) = signed(&e);
    assert!(w.gate.webhook(&body, Some(&sig)).await?.is_ok());
    w.drop().await
}

#[tokio::test]
async fn events_the_gate_does_not_act_on_are_ignored() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    for (i, name) in ["order.paid", "payment.authorized", "refund.processed"]
        .into_iter()
        .enumerate()
    {
        let mut e = capture(&w, &format!("evt_{i}"), &order);
        e.event = name.into();
        let (body, sig) = signed(&e);
        assert_eq!(
            w.gate.webhook(&body, Some(&sig)).await?.decision,
            Decision::Deny(Reason::WebhookEventIgnored),
            "{name}"
        );
    }
    assert!(nothing_captured(&w, &request).await?);
    w.drop().await
}

#[tokio::test]
async fn only_a_provider_pending_request_moves() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    let (body, sig) = signed(&capture(&w, "evt_1", &order));
    assert!(w.gate.webhook(&body, Some(&sig)).await?.is_ok());
    let mut failed = capture(&w, "evt_2", &order);
    failed.event = EVENT_FAILED.into();
    let (body, sig) = signed(&failed);
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::StateTransitionInvalid)
    );
    let (body, sig) = signed(&capture(&w, "evt_3", &order));
    assert_eq!(
        w.gate.webhook(&body, Some(&sig)).await?.decision,
        Decision::Deny(Reason::StateTransitionInvalid)
    );
    assert_eq!(
        w.gate.request_state("acme", &request).await?.as_deref(),
        Some("CAPTURED")
    );
    assert_eq!(w.gate.captured_paise("acme").await?, 60000);
    assert_eq!(
        w.gate.spent_today_paise("acme").await?,
        60000,
        "a capture keeps the reservation"
    );
    w.drop().await
}
