//! The webhook's envelope checks, each alone, and what the gate says and
//! writes about an event: every check of Razorpay's envelope refuses a
//! signed capture by itself (so none leans on another), a verified refusal
//! names its event and an unverified one does not, the ledger names an
//! applied event by its id (or the id's digest), and an applied capture is
//! written with what it did.

use crate::support::*;
use gate::provider::{Payment, PaymentStatus};
use gate::service::webhook::{EVENT_CAPTURED, EVENT_ORDER_PAID};
use gate::service::{ProviderEvent, razorpay_envelope, sign_webhook};
use gate::{Decision, Reason};
use serde_json::{Value, json};

/// A signed `order.paid` for `order` (60,000 paise, INR), as JSON to edit.
fn order_paid(w: &World, order: &str) -> Result<Value, serde_json::Error> {
    let ev = ProviderEvent {
        id: "evt_base".into(),
        event: EVENT_ORDER_PAID.into(),
        created_at: w.gate.now(),
        order_id: order.into(),
        amount_paise: 60000,
        currency: "INR".into(),
    };
    serde_json::from_slice(&ev.to_body())
}

/// Signs `body` and sends it under `event_id`.
async fn send(
    w: &World,
    body: &Value,
    event_id: &str,
) -> Result<gate::service::Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let bytes = serde_json::to_vec(body)?;
    Ok(w.gate
        .webhook(&bytes, Some(&sign_webhook(SECRET, &bytes)), Some(event_id))
        .await?)
}

/// Each check of the envelope, alone, refuses an otherwise good `order.paid`
/// as WEBHOOK_MALFORMED: the payment entity that does not say `payment`, or
/// that `contains` does not list; the order entity that does not say
/// `order`, or that `contains` does not list; an `order.paid` without its
/// order. The unedited envelope then captures.
#[tokio::test]
async fn each_envelope_check_alone_refuses_a_signed_order_paid() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let good = order_paid(w, &order)?;
        type Edit = fn(&mut Value);
        let edits: [(&str, Edit); 5] = [
            ("payment entity is a refund", |v| {
                v["payload"]["payment"]["entity"]["entity"] = json!("refund");
            }),
            ("payment not listed", |v| v["contains"] = json!(["order"])),
            ("order entity is a refund", |v| {
                v["payload"]["order"]["entity"]["entity"] = json!("refund");
            }),
            ("order not listed", |v| v["contains"] = json!(["payment"])),
            ("order.paid without its order", |v| {
                if let Some(payload) = v["payload"].as_object_mut() {
                    payload.remove("order");
                }
                v["contains"] = json!(["payment"]);
            }),
        ];
        for (i, (what, edit)) in edits.into_iter().enumerate() {
            let mut v = good.clone();
            edit(&mut v);
            assert_ne!(v, good, "{what}: the edit changed nothing");
            let h = send(w, &v, &format!("evt_env_{i}")).await?;
            assert_eq!(
                h.decision,
                Decision::Deny(Reason::WebhookMalformed),
                "{what}"
            );
        }
        assert_eq!(w.gate.captured_paise("acme").await?, 0);
        let h = send(w, &good, "evt_env_good").await?;
        assert!(h.is_ok(), "{h:?}");
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        Ok(())
    })
    .await
}

/// A refusal of a verified event carries the event's id (the provider can
/// tell which delivery was refused); one whose signature failed carries no
/// id, since nothing in it can be believed.
#[tokio::test]
async fn a_verified_refusal_names_its_event_and_an_unverified_one_does_not() -> TestResult {
    on_world(async |w| {
        let body = br#"{"event":"payment.captured"}"#;
        let signed = w
            .gate
            .webhook(body, Some(&sign_webhook(SECRET, body)), Some("evt_named_7"))
            .await?;
        assert_eq!(signed.decision, Decision::Deny(Reason::WebhookMalformed));
        assert_eq!(signed.id.as_deref(), Some("evt_named_7"));
        let forged = w
            .gate
            .webhook(body, Some(&"0".repeat(64)), Some("evt_named_8"))
            .await?;
        assert_eq!(
            forged.decision,
            Decision::Deny(Reason::WebhookSignatureInvalid)
        );
        assert_eq!(forged.id, None);
        Ok(())
    })
    .await
}

/// The subject of the ledger entry an applied event writes: the event id
/// when it is an identifier, its digest when it is not (an id of any bytes
/// is accepted and deduplicated, but never written out raw).
#[tokio::test]
async fn the_ledger_names_an_event_by_its_id() -> TestResult {
    on_world(async |w| {
        for id in ["evt_subject_1", "evt subject\u{200b}2"] {
            let (_, _, order) = paid_order(w).await?;
            let ev = ProviderEvent {
                id: id.into(),
                event: EVENT_CAPTURED.into(),
                created_at: w.gate.now(),
                order_id: order,
                amount_paise: 60000,
                currency: "INR".into(),
            };
            let body = ev.to_body();
            let h = w
                .gate
                .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some(id))
                .await?;
            assert!(h.is_ok(), "{id}: {h:?}");
        }
        let subjects: Vec<String> = sqlx::query_scalar(
            "SELECT entry::jsonb->>'subject' FROM ledger_entries \
             WHERE kind = 'provider_event' ORDER BY seq",
        )
        .fetch_all(w.ledger().await?)
        .await?;
        assert_eq!(subjects.len(), 2, "{subjects:?}");
        assert_eq!(subjects[0], "evt_subject_1");
        assert!(
            subjects[1].starts_with("sha256:") && subjects[1].len() == "sha256:".len() + 64,
            "{subjects:?}"
        );
        Ok(())
    })
    .await
}

/// An applied capture is on the ledger with what it did: the request it
/// moved, from PROVIDER_PENDING to CAPTURED, the payment, nothing counted
/// past a cap.
#[tokio::test]
async fn an_applied_capture_is_written_with_what_it_did() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let ev = ProviderEvent {
            id: "evt_applied".into(),
            event: EVENT_CAPTURED.into(),
            created_at: w.gate.now(),
            order_id: order.clone(),
            amount_paise: 60000,
            currency: "INR".into(),
        };
        let body = ev.to_body();
        let h = w
            .gate
            .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some(&ev.id))
            .await?;
        assert!(h.is_ok(), "{h:?}");
        let written: Value = sqlx::query_scalar(
            "SELECT entry::jsonb->'body' FROM ledger_entries WHERE kind = 'provider_event'",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        assert_eq!(written["request"], json!(request), "{written}");
        assert_eq!(written["from"], json!("PROVIDER_PENDING"), "{written}");
        assert_eq!(written["state"], json!("CAPTURED"), "{written}");
        assert_eq!(written["payment"], json!(ev.payment().id), "{written}");
        assert_eq!(written["already_recorded"], json!(false), "{written}");
        assert_eq!(written["counted_past_cap_paise"], json!(0), "{written}");
        Ok(())
    })
    .await
}

/// The envelope the gate's own tools build says `captured` as Razorpay
/// does: true for a captured payment, false for a failed one.
#[test]
fn the_built_envelope_says_whether_the_payment_was_captured() -> TestResult {
    let payment = |status| Payment {
        id: "pay_env_1".into(),
        order_id: "order_env_1".into(),
        amount_paise: 60000,
        currency: "INR".into(),
        status,
        created_at: 0,
    };
    let now = chrono::Utc::now();
    for (status, captured) in [
        (PaymentStatus::Captured, true),
        (PaymentStatus::Failed, false),
    ] {
        let body: Value = serde_json::from_slice(&razorpay_envelope(
            EVENT_CAPTURED,
            now,
            Some(&payment(status)),
            None,
        ))?;
        assert_eq!(
            body["payload"]["payment"]["entity"]["captured"],
            json!(captured),
            "{status:?}"
        );
    }
    Ok(())
}
