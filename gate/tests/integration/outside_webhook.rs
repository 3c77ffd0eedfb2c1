//! What outside attackers found at the webhook and in the books, each pinned:
//! captures kept for reconcile are booked by it (NEEDS_REVIEW when their
//! request already has an order), a payment id already on the books for
//! another order is `WEBHOOK_MALFORMED`, a signed body that writes a key
//! twice is `WEBHOOK_MALFORMED`, and a refusal is on its tenant's ledger or,
//! when no tenant can be known, counted where an operator sees it.

use crate::support::*;
use chrono::Duration;
use gate::provider::{Mode, OrderStatus, Payment, PaymentStatus, ProviderOrder};
use gate::service::webhook::{EVENT_CAPTURED, EVENT_ORDER_PAID};
use gate::service::{Books, Outcome, ProviderEvent, razorpay_envelope, sign_webhook};
use gate::{Decision, Reason};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Razorpay's documented sample payment id, which a careless integration
/// (or a replaying attacker) sends for every order.
const SAMPLE_PAYMENT_ID: &str = "pay_29QQoUBi66xm2f";

/// Proposes, checks out and pays CLOUD-STARTER x1; returns the request, the
/// authority and the pay outcome.
async fn paid(w: &World) -> BoxResult<(String, String, Outcome)> {
    let request = request_id(
        &w.gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    let outcome = w.gate.pay("acme", &authority, "finance-lead").await?;
    Ok((request, authority, outcome))
}

async fn send(w: &World, body: &[u8], event_id: &str) -> BoxResult<Outcome> {
    Ok(w.gate
        .webhook(body, Some(&sign_webhook(SECRET, body)), Some(event_id))
        .await?)
}

/// A signed capture of `order_id` under `payment_id`, with the order entity
/// (and its receipt) when `receipt` is given.
fn capture_body(w: &World, order_id: &str, payment_id: &str, receipt: Option<&str>) -> Vec<u8> {
    let payment = Payment {
        id: payment_id.into(),
        order_id: order_id.into(),
        amount_paise: 60000,
        currency: "INR".into(),
        status: PaymentStatus::Captured,
        created_at: w.gate.now().timestamp(),
    };
    let order = receipt.map(|r| ProviderOrder {
        id: order_id.into(),
        receipt: r.into(),
        merchant: "cloudco".into(),
        amount_paise: 60000,
        amount_paid_paise: 60000,
        currency: "INR".into(),
        status: OrderStatus::Paid,
        attempts: 1,
        created_at: w.gate.now().timestamp(),
    });
    let event = if order.is_some() {
        EVENT_ORDER_PAID
    } else {
        EVENT_CAPTURED
    };
    razorpay_envelope(event, w.gate.now(), Some(&payment), order.as_ref())
}

async fn state(w: &World, request: &str) -> BoxResult<Option<String>> {
    Ok(w.gate.request_state("acme", request).await?)
}

/// The reason codes of `acme`'s refused provider events, in ledger order.
async fn refused_events(w: &World) -> BoxResult<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT entry::jsonb->'body'->'decision'->>'reason' FROM ledger_entries \
         WHERE tenant_id = 'acme' AND kind = 'provider_event.refused' ORDER BY seq",
    )
    .fetch_all(w.ledger().await?)
    .await?)
}

/// A capture kept for reconcile whose receipt names an authority that
/// already has its own (captured) order: reconcile books it on that request,
/// NEEDS_REVIEW, with the money counted; nothing is left off the books.
#[tokio::test]
async fn a_kept_capture_for_an_authority_with_an_order_is_booked_needs_review_by_reconcile()
-> TestResult {
    on_world(async |w| {
        for order_id in ["order_SomeoneElses01", "null"] {
            let (request, authority, pay) = paid(w).await?;
            let order = id(&pay);
            let own = ProviderEvent {
                id: format!("evt_own_{order_id}"),
                event: EVENT_CAPTURED.into(),
                created_at: w.gate.now(),
                order_id: order.clone(),
                amount_paise: 60000,
                currency: "INR".into(),
            };
            w.gate.provider().capture_payment(&order)?;
            assert!(send(w, &own.to_body(), &own.id).await?.is_ok());
            assert_eq!(state(w, &request).await?.as_deref(), Some("CAPTURED"));
            let before = w.gate.books(Some("acme")).await?.captured_paise;
            let stray = capture_body(
                w,
                order_id,
                &format!("pay_Stray{}", order_id.len()),
                Some(&authority),
            );
            let kept = send(w, &stray, &format!("evt_stray_{order_id}")).await?;
            assert!(kept.is_ok(), "kept for reconcile: {kept:?}");
            assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
            let r = w.gate.reconcile(Some("acme")).await?;
            assert_eq!((r.needs_review, r.kept_settled), (1, 1), "{r:?}");
            let books = w.gate.books(Some("acme")).await?;
            assert_eq!(books.kept_unsettled, 0, "{order_id}: {books:?}");
            assert_eq!(
                state(w, &request).await?.as_deref(),
                Some("NEEDS_REVIEW"),
                "{order_id}"
            );
            assert_eq!(books.captured_paise, before + 60000, "the payments booked");
            assert!(books.unbalanced_days.is_empty() && books.unbalanced_hops.is_empty());
            // A second run finds nothing more to do.
            let again = w.gate.reconcile(Some("acme")).await?;
            assert_eq!((again.needs_review, again.kept_settled), (0, 0));
        }
        Ok(())
    })
    .await
}

/// A kept capture whose request is still waiting on the provider (the pay
/// answered late and the provider lists no order for the receipt) captures
/// it at reconcile, before a missing order could fail it.
#[tokio::test]
async fn a_kept_capture_of_an_order_the_provider_does_not_list_captures_its_pending_request()
-> TestResult {
    on_world(async |w| {
        w.gate.provider().set_mode(Mode::Timeout, Some(1));
        let (request, authority, pay) = paid(w).await?;
        assert_eq!(pay.decision, Decision::Deny(Reason::ProviderUnavailable));
        let stray = capture_body(w, "null", "pay_NullOrder0001", Some(&authority));
        assert!(send(w, &stray, "evt_null_order").await?.is_ok());
        w.clock.advance(Duration::minutes(30));
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.captured, r.failed, r.kept_settled), (1, 0, 1), "{r:?}");
        assert_eq!(state(w, &request).await?.as_deref(), Some("CAPTURED"));
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 0);
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        Ok(())
    })
    .await
}

/// A receipt naming an authority nobody consumed names no order of the
/// gate's: refused, on the tenant's ledger, never kept.
#[tokio::test]
async fn a_capture_naming_an_unconsumed_authority_is_an_unknown_order() -> TestResult {
    on_world(async |w| {
        let request = request_id(
            &w.gate
                .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
                .await?,
        );
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        let stray = capture_body(
            w,
            "order_Unconsumed01",
            "pay_Unconsumed01",
            Some(&authority),
        );
        let h = send(w, &stray, "evt_unconsumed").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookUnknownOrder));
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 0);
        assert_eq!(refused_events(w).await?, vec!["WEBHOOK_UNKNOWN_ORDER"]);
        assert_eq!(
            state(w, &request).await?.as_deref(),
            Some("CHECKOUT_ISSUED")
        );
        Ok(())
    })
    .await
}

/// Razorpay's documented sample payment id sent for a second order: the
/// books already hold it for the first, so it names no payment of the
/// second. `WEBHOOK_MALFORMED`, recorded on the tenant's ledger, and the
/// second request keeps waiting; as a capture kept for an unknown order or
/// as an authorisation to capture, it is refused the same way.
#[tokio::test]
async fn a_payment_id_already_recorded_for_another_order_is_malformed_and_recorded() -> TestResult {
    on_world(async |w| {
        let (first, _, pay1) = paid(w).await?;
        let (second, _, pay2) = paid(w).await?;
        let one = capture_body(w, &id(&pay1), SAMPLE_PAYMENT_ID, None);
        assert!(send(w, &one, "evt_sample_1").await?.is_ok());
        assert_eq!(state(w, &first).await?.as_deref(), Some("CAPTURED"));
        let two = capture_body(w, &id(&pay2), SAMPLE_PAYMENT_ID, None);
        let h = send(w, &two, "evt_sample_2").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
        assert_eq!(
            state(w, &second).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        assert_eq!(refused_events(w).await?, vec!["WEBHOOK_MALFORMED"]);
        let applied: i64 =
            sqlx::query_scalar("SELECT count(*) FROM provider_events WHERE provider_order_id = $1")
                .bind(id(&pay2))
                .fetch_one(w.pool())
                .await?;
        assert_eq!(applied, 0, "the refused event is not logged applied");
        // The same id kept for an unknown order is refused the same way.
        let (_, authority, _) = paid(w).await?;
        let kept = capture_body(w, "order_Elsewhere01", SAMPLE_PAYMENT_ID, Some(&authority));
        let h = send(w, &kept, "evt_sample_3").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 0);
        // An authorisation naming it for the second order is refused before
        // the provider is asked to capture anything.
        let authorised = razorpay_envelope(
            gate::service::webhook::EVENT_AUTHORIZED,
            w.gate.now(),
            Some(&Payment {
                id: SAMPLE_PAYMENT_ID.into(),
                order_id: id(&pay2),
                amount_paise: 60000,
                currency: "INR".into(),
                status: PaymentStatus::Authorized,
                created_at: w.gate.now().timestamp(),
            }),
            None,
        );
        let h = send(w, &authorised, "evt_sample_4").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
        assert_eq!(
            state(w, &second).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        Ok(())
    })
    .await
}

/// `"amount":1` then `"amount":60000`: a parser that keeps the last copy
/// captures 60000, one that keeps the first sees 1. Ambiguous, so refused,
/// at any depth of the body.
#[tokio::test]
async fn a_signed_body_with_a_duplicate_key_anywhere_is_malformed() -> TestResult {
    on_world(async |w| {
        let (request, _, pay) = paid(w).await?;
        let order = id(&pay);
        let good = String::from_utf8(capture_body(w, &order, "pay_DupKeys000001", None))?;
        let in_payment = good.replacen("\"amount\":60000", "\"amount\":1,\"amount\":60000", 1);
        let at_top = good.replacen(
            "\"entity\":\"event\"",
            "\"entity\":\"x\",\"entity\":\"event\"",
            1,
        );
        let escaped = good.replacen(
            "\"currency\":\"INR\"",
            "\"currency\":\"USD\",\"\\u0063urrency\":\"INR\"",
            1,
        );
        for (i, body) in [in_payment, at_top, escaped].iter().enumerate() {
            assert_ne!(body, &good);
            let h = send(w, body.as_bytes(), &format!("evt_dup_{i}")).await?;
            assert_eq!(
                h.decision,
                Decision::Deny(Reason::WebhookMalformed),
                "{body}"
            );
        }
        assert_eq!(
            state(w, &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 0);
        // The body without the duplicate is accepted.
        assert!(send(w, good.as_bytes(), "evt_dup_ok").await?.is_ok());
        assert_eq!(state(w, &request).await?.as_deref(), Some("CAPTURED"));
        Ok(())
    })
    .await
}

/// A signed event the gate refuses after reading it (stale, post-dated, a
/// duplicate, an unknown order whose receipt names an authority) is on the
/// tenant's ledger; one that names no tenant (an unsigned body, a body that
/// does not parse) is counted in `untenanted_refusals`.
#[tokio::test]
async fn every_webhook_refusal_is_on_its_tenants_ledger_or_counted() -> TestResult {
    on_world(async |w| {
        let (_, _, pay) = paid(w).await?;
        let order = id(&pay);
        let start = w.gate.untenanted_refusals();
        let stale = ProviderEvent {
            id: "evt_stale".into(),
            event: EVENT_CAPTURED.into(),
            created_at: w.gate.now() - Duration::hours(25),
            order_id: order.clone(),
            amount_paise: 60000,
            currency: "INR".into(),
        };
        let h = send(w, &stale.to_body(), &stale.id).await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookStale));
        let ahead = ProviderEvent {
            id: "evt_ahead".into(),
            created_at: w.gate.now() + Duration::minutes(6),
            ..stale.clone()
        };
        let h = send(w, &ahead.to_body(), &ahead.id).await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookPostDated));
        assert_eq!(
            refused_events(w).await?,
            vec!["WEBHOOK_STALE", "WEBHOOK_POST_DATED"]
        );
        assert_eq!(w.gate.untenanted_refusals(), start);
        let body = capture_body(w, &order, "pay_Counted00001", None);
        let h = w
            .gate
            .webhook(
                &body,
                Some(&sign_webhook(b"another-secret-of-32-bytes-0000000", &body)),
                Some("evt_forged"),
            )
            .await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookSignatureInvalid));
        let h = send(w, b"{\"entity\":\"event\"}", "evt_unreadable").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookMalformed));
        assert_eq!(w.gate.untenanted_refusals(), start + 2);
        assert_eq!(refused_events(w).await?.len(), 2);
        Ok(())
    })
    .await
}

/// `books_balanced` after a reconcile: a kept capture still off the books
/// unbalances them, whatever else agrees.
#[test]
fn kept_captures_off_the_books_unbalance_the_books_after_a_reconcile() {
    let books = Books {
        captured_paise: 60000,
        unbalanced_days: Default::default(),
        unbalanced_hops: Default::default(),
        kept_unsettled: 1,
    };
    assert!(books.balanced(60000), "before a reconcile it may wait");
    assert!(!books.balanced_after_reconcile(60000));
    let settled = Books {
        kept_unsettled: 0,
        ..books
    };
    assert!(settled.balanced_after_reconcile(60000));
}

/// Manual capture only for a request that waits on the provider: an
/// authorisation for a request already captured is not captured (the
/// provider refunds it), answered `WEBHOOK_EVENT_IGNORED` and recorded, and
/// the provider is never asked.
#[tokio::test]
async fn an_authorization_for_a_request_that_no_longer_waits_is_not_captured() -> TestResult {
    on_world(async |w| {
        let (request, _, pay) = paid(w).await?;
        let order = id(&pay);
        let own = capture_body(w, &order, "pay_CapturedFirst1", None);
        assert!(send(w, &own, "evt_captured_first").await?.is_ok());
        let authorised = razorpay_envelope(
            gate::service::webhook::EVENT_AUTHORIZED,
            w.gate.now(),
            Some(&Payment {
                id: "pay_AuthorisedLate".into(),
                order_id: order.clone(),
                amount_paise: 60000,
                currency: "INR".into(),
                status: PaymentStatus::Authorized,
                created_at: w.gate.now().timestamp(),
            }),
            None,
        );
        let h = send(w, &authorised, "evt_authorised_late").await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookEventIgnored));
        assert_eq!(state(w, &request).await?.as_deref(), Some("CAPTURED"));
        assert_eq!(refused_events(w).await?, vec!["WEBHOOK_EVENT_IGNORED"]);
        assert_eq!(w.gate.books(Some("acme")).await?.captured_paise, 60000);
        Ok(())
    })
    .await
}

/// Two deliveries of one event id race; the second also gets the amount
/// wrong. Both pass the first look-up before either is recorded, the good
/// one is applied, and the other is `WEBHOOK_DUPLICATE`: a duplicate
/// outranks any other refusal. Raced for real: the request is held locked
/// from outside the gate until both wait for it, the good one first.
#[tokio::test]
async fn a_twin_that_loses_the_race_is_a_duplicate_whatever_else_it_gets_wrong() -> TestResult {
    on_world(async |w| {
        let (request, _, pay) = paid(w).await?;
        let order = id(&pay);
        let good = capture_body(w, &order, "pay_RaceWinner01", None);
        let short = razorpay_envelope(
            EVENT_CAPTURED,
            w.gate.now(),
            Some(&Payment {
                id: "pay_RaceWinner01".into(),
                order_id: order.clone(),
                amount_paise: 59_999,
                currency: "INR".into(),
                status: PaymentStatus::Captured,
                created_at: w.gate.now().timestamp(),
            }),
            None,
        );
        let watcher = w.owner();
        let mut holder = watcher.begin().await?;
        sqlx::query(
            "SELECT 1 FROM payment_requests WHERE tenant_id = 'acme' AND id = $1 FOR UPDATE",
        )
        .bind(&request)
        .execute(&mut *holder)
        .await?;
        let deliver = |body: Vec<u8>| {
            let gate = w.gate.clone();
            tokio::spawn(async move {
                gate.webhook(&body, Some(&sign_webhook(SECRET, &body)), Some("evt_twin"))
                    .await
            })
        };
        let first = deliver(good);
        until_waiting(watcher, 1).await?;
        let second = deliver(short);
        until_waiting(watcher, 2).await?;
        holder.rollback().await?;
        let (first, second) = (first.await??, second.await??);
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(second.decision, Decision::Deny(Reason::WebhookDuplicate));
        assert_eq!(state(w, &request).await?.as_deref(), Some("CAPTURED"));
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        Ok(())
    })
    .await
}
