//! The Razorpay adapter against a local fake Razorpay on 127.0.0.1
//! (tests/fake_razorpay): no credentials, no network beyond loopback. The
//! fake asserts what the adapter sent; each test ends with no violation.

use std::sync::Arc;
use std::time::Duration;

use crate::fake_razorpay::{FakeMode, KEY_ID, KEY_SECRET};
use crate::support::*;
use gate::provider::{
    OrderStatus, PaymentProvider, PaymentStatus, ProviderError, RazorpayConfig, RazorpayKeys,
    RazorpayProvider,
};
use gate::service::{Gate, ManualClock};
use gate::{Decision, Reason};

fn adapter(fake: &crate::fake_razorpay::Fake) -> RazorpayProvider {
    adapter_with(fake, KEY_ID, KEY_SECRET)
}

fn adapter_with(fake: &crate::fake_razorpay::Fake, id: &str, secret: &str) -> RazorpayProvider {
    RazorpayProvider::with_config(
        RazorpayKeys::new(id, secret).expect("test keys"),
        RazorpayConfig {
            base_url: fake.base_url.clone(),
            // Far below the fake's 30 s stall, and far above a loopback
            // answer even on a machine loaded by mutation builds (400 ms was
            // seen to time out there: a read of the fake answered late).
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
        },
    )
    .expect("a loopback base URL is accepted")
}

/// The gate on `db`, seeded with the standard world, paying through the
/// adapter against `fake` (a provider timeout long enough for loopback).
async fn gate_over(
    db: &gate::db::FreshDatabase,
    fake: &crate::fake_razorpay::Fake,
) -> Result<Gate<RazorpayProvider>, Box<dyn std::error::Error + Send + Sync>> {
    let gate = Gate::new(
        db.pool().clone(),
        adapter(fake),
        SECRET,
        Arc::new(ManualClock::new(gate::service::standard::now())),
    )?
    .with_provider_timeout(Duration::from_secs(5));
    gate.seed(&gate::service::standard::seed()).await?;
    Ok(gate)
}

fn no_violations(fake: &crate::fake_razorpay::Fake) {
    let v = fake.violations();
    assert!(v.is_empty(), "the adapter broke the contract: {v:#?}");
}

#[tokio::test]
async fn create_order_sends_the_documented_request_and_parses_the_order() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let receipt = format!("auth_{}", "a".repeat(32));
    let order = rzp.create_order(&order_request(&receipt)).await.unwrap();
    assert!(order.id.starts_with("order_"), "{order:?}");
    assert_eq!(
        (
            order.receipt.as_str(),
            order.merchant.as_str(),
            order.amount_paise,
            order.currency.as_str(),
            order.status,
            order.attempts
        ),
        (
            receipt.as_str(),
            "cloudco",
            60000,
            "INR",
            OrderStatus::Created,
            0
        )
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/v1/orders")
    );
    let body = seen[0].body.clone().unwrap_or_default();
    assert_eq!(body["amount"], 60000);
    assert_eq!(body["currency"], "INR");
    assert_eq!(body["receipt"], receipt.as_str());
    assert_eq!(body["notes"]["merchant"], "cloudco");
    no_violations(&fake);
}

#[tokio::test]
async fn an_order_is_found_again_by_receipt_and_by_id_with_its_payments() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let order = rzp
        .create_order(&order_request("auth_found_again"))
        .await
        .unwrap();
    assert_eq!(
        rzp.find_by_receipt("auth_found_again")
            .await
            .unwrap()
            .map(|s| (s.order, s.payments.len())),
        Some((order.clone(), 0))
    );
    fake.fail_attempt(&order.id);
    let paid = fake.capture(&order.id);
    let snap = rzp
        .find_by_receipt("auth_found_again")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.order.status, OrderStatus::Paid);
    assert_eq!(snap.order.attempts, 2);
    assert_eq!(
        snap.payments.iter().map(|p| p.status).collect::<Vec<_>>(),
        vec![PaymentStatus::Failed, PaymentStatus::Captured]
    );
    assert_eq!(snap.captured().next(), Some(&paid));
    assert_eq!(
        Some(snap.clone()),
        fake.snapshot(&order.id),
        "the adapter reads back exactly the model the fake holds"
    );
    assert_eq!(rzp.fetch_order(&order.id).await.unwrap(), Some(snap));
    assert_eq!(rzp.fetch_order("order_unknown01").await.unwrap(), None);
    assert_eq!(rzp.find_by_receipt("auth_nobody").await.unwrap(), None);
    // An id outside the identifier grammar is never put in a path.
    let before = fake.seen().len();
    assert_eq!(rzp.fetch_order("../v1/orders").await.unwrap(), None);
    assert_eq!(rzp.find_by_receipt("a\u{0}b").await.unwrap(), None);
    assert_eq!(fake.seen().len(), before);
    let lists: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.path == "/v1/orders" && s.method == "GET")
        .collect();
    assert!(
        lists
            .iter()
            .all(|s| s.query.as_deref().is_some_and(|q| q.starts_with("auth_"))),
        "{lists:?}"
    );
    no_violations(&fake);
}

#[tokio::test]
async fn a_4xx_is_rejected_and_razorpays_description_stays_out_of_the_error() {
    let fake = crate::fake_razorpay::start().await;
    fake.set_mode(FakeMode::ClientError);
    let err = adapter(&fake)
        .create_order(&order_request("auth_4xx"))
        .await
        .unwrap_err();
    assert_eq!(err, ProviderError::Rejected { status: 400 });
    assert!(err.is_definite_refusal());
    assert!(!err.to_string().contains("suspended"), "{err}");
    assert!(fake.orders().is_empty());
    no_violations(&fake);
}

/// A 401 is a configuration error, not a refusal of the order: the adapter
/// says so, health shows it until an answer comes again, and the gate
/// keeps the request PROVIDER_PENDING (its reservations held) instead of
/// failing it.
#[tokio::test]
async fn a_401_is_a_configuration_error_the_request_waits_and_health_says_so() -> TestResult {
    let fake = crate::fake_razorpay::start().await;
    let wrong = adapter_with(&fake, "rzp_test_SOMEONEELSE", "wrong");
    assert!(!wrong.health().keys_refused);
    let err = wrong
        .create_order(&order_request("auth_creds"))
        .await
        .unwrap_err();
    assert_eq!(err, ProviderError::KeysRefused);
    assert!(!err.is_definite_refusal());
    assert!(wrong.health().keys_refused, "health shows the refused keys");
    assert!(fake.orders().is_empty());
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let gate = Gate::new(
        db.pool().clone(),
        wrong,
        SECRET,
        Arc::new(ManualClock::new(gate::service::standard::now())),
    )?
    .with_provider_timeout(Duration::from_secs(5));
    gate.seed(&gate::service::standard::seed()).await?;
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert!(gate.provider_health().keys_refused);
    drop(gate);
    db.drop().await?;
    Ok(())
}

/// A 429 on order creation is not a rejection: the order may come later,
/// so the request waits for reconcile, and the adapter never sends a
/// second create.
#[tokio::test]
async fn a_429_on_create_is_unavailable_and_the_request_waits_for_reconcile() -> TestResult {
    let fake = crate::fake_razorpay::start().await;
    fake.set_mode(FakeMode::RateLimited);
    let err = adapter(&fake)
        .create_order(&order_request("auth_429"))
        .await
        .unwrap_err();
    assert_eq!(err, ProviderError::Unavailable { status: 429 });
    assert!(!err.is_definite_refusal());
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let gate = gate_over(&db, &fake).await?;
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    let creates = fake
        .seen()
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/orders")
        .count();
    assert_eq!(creates, 2, "one create from the adapter test, one from pay");
    no_violations(&fake);
    drop(gate);
    db.drop().await?;
    Ok(())
}

/// A read answered 429 with a short `Retry-After` is asked again after it;
/// one asking for an hour is not waited for (bounded).
#[tokio::test]
async fn a_read_honours_a_short_retry_after_and_not_a_long_one() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let order = rzp
        .create_order(&order_request("auth_retry"))
        .await
        .unwrap();
    fake.set_mode(FakeMode::ReadsRetryAfterOnce);
    let started = std::time::Instant::now();
    let found = rzp.fetch_order(&order.id).await.unwrap();
    assert_eq!(found.map(|s| s.order.id), Some(order.id.clone()));
    assert!(started.elapsed() >= Duration::from_secs(1), "waited");
    let path = format!("/v1/orders/{}", order.id);
    let asked = |fake: &crate::fake_razorpay::Fake| {
        fake.seen()
            .iter()
            .filter(|s| s.method == "GET" && s.path == path)
            .count()
    };
    assert_eq!(asked(&fake), 2, "asked again once");
    fake.set_mode(FakeMode::ReadsRetryAfterHour);
    let started = std::time::Instant::now();
    assert_eq!(
        rzp.fetch_order(&order.id).await.unwrap_err(),
        ProviderError::Unavailable { status: 429 }
    );
    assert!(started.elapsed() < Duration::from_secs(2), "not waited for");
    assert_eq!(asked(&fake), 3);
    no_violations(&fake);
}

/// A read answered 503 with a short `Retry-After` every time is asked
/// exactly three times (once, then the adapter's two retries), waiting
/// before each retry, and is then unavailable: a busy provider is retried,
/// boundedly.
#[tokio::test]
async fn a_busy_read_is_retried_a_bounded_number_of_times() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let order = rzp.create_order(&order_request("auth_busy")).await.unwrap();
    fake.set_mode(FakeMode::ReadsUnavailableRetryAfterSecond);
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(30), rzp.fetch_order(&order.id))
        .await
        .expect("the retries end");
    assert_eq!(
        answer.unwrap_err(),
        ProviderError::Unavailable { status: 503 }
    );
    let reads = fake.seen().iter().filter(|s| s.method == "GET").count();
    assert_eq!(reads, 3);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited before each retry"
    );
    no_violations(&fake);
}

/// Manual capture, both ways: a signed `payment.authorized` is captured
/// through `POST /v1/payments/{id}/capture` with the order's own amount and
/// currency, and reconcile captures an authorisation no event reported.
#[tokio::test]
async fn an_authorized_payment_is_captured_for_the_orders_own_amount() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let fake = crate::fake_razorpay::start().await;
    let gate = gate_over(&db, &fake).await?;
    let mut requests = Vec::new();
    for _ in 0..2 {
        let request = request_id(
            &gate
                .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
                .await?,
        );
        let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
        let order = id(&gate.pay("acme", &authority, "finance-lead").await?);
        requests.push((request, order));
    }
    // The webhook.
    let (request, order) = &requests[0];
    let authorised = fake.authorize(order);
    assert_eq!(authorised.status, PaymentStatus::Authorized);
    let body = gate::service::razorpay_envelope(
        gate::service::webhook::EVENT_AUTHORIZED,
        gate.now(),
        Some(&authorised),
        None,
    );
    let sig = gate::service::sign_webhook(SECRET, &body);
    let h = gate
        .webhook(&body, Some(&sig), Some("evt_authorised"))
        .await?;
    assert!(h.is_ok(), "{h:?}");
    assert_eq!(
        gate.request_state("acme", request).await?.as_deref(),
        Some("CAPTURED")
    );
    // Reconcile.
    let (request, order) = &requests[1];
    let authorised_too = fake.authorize(order);
    let r = gate.reconcile(None).await?;
    assert_eq!((r.captured, r.provider_errors), (1, 0), "{r:?}");
    assert_eq!(
        gate.request_state("acme", request).await?.as_deref(),
        Some("CAPTURED")
    );
    let captures: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST" && s.path.ends_with("/capture"))
        .collect();
    assert_eq!(
        captures
            .iter()
            .map(|s| (s.path.clone(), s.body.clone().unwrap_or_default()))
            .collect::<Vec<_>>(),
        vec![
            (
                format!("/v1/payments/{}/capture", authorised.id),
                serde_json::json!({"amount": 60000, "currency": "INR"})
            ),
            (
                format!("/v1/payments/{}/capture", authorised_too.id),
                serde_json::json!({"amount": 60000, "currency": "INR"})
            ),
        ]
    );
    let books = gate.books(None).await?;
    assert!(
        books.balanced_after_reconcile(fake.captured_paise()),
        "{books:?}"
    );
    assert_eq!(books.captured_paise, 120000);
    no_violations(&fake);
    drop(gate);
    db.drop().await?;
    Ok(())
}

/// A payment captured and refunded before the gate heard of it: reconcile
/// books the capture (it stays on the books), records the refund beside it
/// and moves the request to NEEDS_REVIEW; nothing is dropped.
#[tokio::test]
async fn reconcile_books_a_refunded_payment_and_records_the_refund_for_review() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let fake = crate::fake_razorpay::start().await;
    let gate = gate_over(&db, &fake).await?;
    fake.set_mode(FakeMode::CreateThenTimeout);
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    fake.set_mode(FakeMode::Ok);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while fake.orders().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let order = fake.orders().first().cloned().ok_or("no order")?;
    let payment = fake.capture(&order.id);
    fake.refund(&payment.id);
    let r = gate.reconcile(None).await?;
    assert_eq!((r.orders_recorded, r.refunds), (1, 1), "{r:?}");
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("NEEDS_REVIEW")
    );
    let books = gate.books(None).await?;
    assert_eq!(
        books.captured_paise, 60000,
        "the capture stays on the books"
    );
    assert!(
        books.balanced_after_reconcile(fake.captured_paise()),
        "{books:?}"
    );
    let refunded: Option<String> = sqlx::query_scalar(
        "SELECT entry::jsonb->'body'->'refunded'->>0 FROM ledger_entries \
         WHERE tenant_id = 'acme' AND kind = 'reconcile'",
    )
    .fetch_optional({
        gate.integrate().await?;
        db.pool()
    })
    .await?;
    assert_eq!(refunded.as_deref(), Some(payment.id.as_str()));
    // A second run changes nothing.
    let again = gate.reconcile(None).await?;
    assert_eq!((again.examined, again.refunds), (0, 0));
    no_violations(&fake);
    drop(gate);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn a_5xx_is_unavailable_and_not_a_definite_refusal() {
    let fake = crate::fake_razorpay::start().await;
    fake.set_mode(FakeMode::ServerError);
    let err = adapter(&fake)
        .create_order(&order_request("auth_5xx"))
        .await
        .unwrap_err();
    assert_eq!(err, ProviderError::Unavailable { status: 503 });
    assert!(!err.is_definite_refusal());
    no_violations(&fake);
}

/// Only Razorpay's "does not exist" is "no such order": a fetch that meets a
/// 5xx or another 4xx is an error, never an order the gate would treat as
/// absent (and so as unpaid).
#[tokio::test]
async fn a_fetch_that_fails_is_an_error_and_only_an_unknown_id_is_no_order() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let order = rzp
        .create_order(&order_request("auth_fetch_fails"))
        .await
        .unwrap();
    fake.set_mode(FakeMode::ReadsServerError);
    assert_eq!(
        rzp.fetch_order(&order.id).await.unwrap_err(),
        ProviderError::Unavailable { status: 503 }
    );
    fake.set_mode(FakeMode::ReadsClientError);
    assert_eq!(
        rzp.fetch_order(&order.id).await.unwrap_err(),
        ProviderError::Rejected { status: 400 }
    );
    fake.set_mode(FakeMode::Ok);
    assert!(
        rzp.fetch_order("order_NoSuchOrder01")
            .await
            .unwrap()
            .is_none()
    );
    let found = rzp.fetch_order(&order.id).await.unwrap();
    assert_eq!(found.map(|s| s.order.id), Some(order.id));
    no_violations(&fake);
}

#[tokio::test]
async fn a_slow_answer_is_a_timeout_and_create_then_timeout_leaves_a_findable_order() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    fake.set_mode(FakeMode::Slow);
    assert_eq!(
        rzp.create_order(&order_request("auth_slow"))
            .await
            .unwrap_err(),
        ProviderError::Timeout
    );
    fake.set_mode(FakeMode::CreateThenTimeout);
    assert_eq!(
        rzp.create_order(&order_request("auth_late"))
            .await
            .unwrap_err(),
        ProviderError::Timeout
    );
    fake.set_mode(FakeMode::Ok);
    let found = rzp.find_by_receipt("auth_late").await.unwrap().unwrap();
    assert_eq!(found.order.receipt, "auth_late");
    no_violations(&fake);
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let rzp = RazorpayProvider::with_config(
        RazorpayKeys::new(KEY_ID, KEY_SECRET).unwrap(),
        RazorpayConfig {
            base_url: format!("http://{addr}"),
            timeout: Duration::from_millis(400),
            connect_timeout: Duration::from_millis(400),
        },
    )
    .unwrap();
    let err = rzp
        .create_order(&order_request("auth_none"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Transport(_) | ProviderError::Timeout),
        "{err:?}"
    );
    assert!(!err.is_definite_refusal());
}

#[tokio::test]
async fn a_live_key_is_refused_before_any_request() {
    let fake = crate::fake_razorpay::start().await;
    let built = RazorpayKeys::new("rzp_live_PLACEHOLDER0001", KEY_SECRET).and_then(|keys| {
        RazorpayProvider::with_config(
            keys,
            RazorpayConfig {
                base_url: fake.base_url.clone(),
                ..RazorpayConfig::default()
            },
        )
    });
    assert_eq!(built.err(), Some(ProviderError::LiveKeyRefused));
    assert!(fake.seen().is_empty(), "no request was made");
}

#[tokio::test]
async fn a_receipt_longer_than_40_characters_is_never_sent() {
    let fake = crate::fake_razorpay::start().await;
    let err = adapter(&fake)
        .create_order(&order_request(&"r".repeat(41)))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::NotConfigured(_)), "{err:?}");
    assert!(fake.seen().is_empty());
}

#[tokio::test]
async fn a_receipt_of_exactly_40_characters_is_sent() {
    let fake = crate::fake_razorpay::start().await;
    let receipt = "r".repeat(40);
    let order = adapter(&fake)
        .create_order(&order_request(&receipt))
        .await
        .unwrap();
    assert_eq!(order.receipt, receipt);
    assert_eq!(fake.seen().len(), 1, "one create request was made");
    no_violations(&fake);
}

#[tokio::test]
async fn the_gate_over_the_adapter_pays_reconciles_and_balances_its_books() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let fake = crate::fake_razorpay::start().await;
    let gate = gate_over(&db, &fake).await?;
    assert_eq!(gate.provider_health().mode, "test");
    assert!(gate.provider_health().has_keys);
    let mut requests = Vec::new();
    for mode in [
        FakeMode::Ok,
        FakeMode::CreateThenTimeout,
        FakeMode::ServerError,
    ] {
        fake.set_mode(mode);
        let request = request_id(
            &gate
                .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
                .await?,
        );
        let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
        let paid = gate.pay("acme", &authority, "finance-lead").await?;
        let expected = match mode {
            FakeMode::Ok => Decision::Allow,
            _ => Decision::Deny(Reason::ProviderUnavailable),
        };
        assert_eq!(paid.decision, expected, "{mode:?}");
        requests.push(request);
    }
    fake.set_mode(FakeMode::Ok);
    // The order of the timed-out create is made when the fake's handler runs,
    // which a loaded machine may delay past the adapter's timeout: wait for it
    // (seen once: captured before it existed, reconcile recorded it uncaptured).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while fake.orders().len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.orders().len(), 2, "the paid and the timed-out create");
    for order in fake.orders() {
        fake.capture(&order.id);
    }
    let r = gate.reconcile(None).await?;
    assert_eq!(
        (r.examined, r.orders_recorded, r.captured, r.still_pending),
        (3, 1, 2, 1)
    );
    let states: Vec<Option<String>> = [
        gate.request_state("acme", &requests[0]).await?,
        gate.request_state("acme", &requests[1]).await?,
        gate.request_state("acme", &requests[2]).await?,
    ]
    .into();
    assert_eq!(
        states,
        vec![
            Some("CAPTURED".to_owned()),
            Some("CAPTURED".to_owned()),
            Some("PROVIDER_PENDING".to_owned())
        ]
    );
    let books = gate.books(None).await?;
    assert!(books.balanced(fake.captured_paise()), "{books:?}");
    assert_eq!(books.captured_paise, 120000);
    no_violations(&fake);
    drop(gate);
    db.drop().await?;
    Ok(())
}

/// A reconcile that cannot ask the provider counts the failure and leaves
/// the request as it was; asked again once the provider answers, it settles.
#[tokio::test]
async fn a_reconcile_the_provider_cannot_answer_counts_the_error_and_changes_nothing() -> TestResult
{
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let fake = crate::fake_razorpay::start().await;
    let gate = gate_over(&db, &fake).await?;
    fake.set_mode(FakeMode::CreateThenTimeout);
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    fake.set_mode(FakeMode::ReadsServerError);
    let r = gate.reconcile(None).await?;
    assert_eq!(
        (r.examined, r.provider_errors, r.orders_recorded),
        (1, 1, 0)
    );
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    fake.set_mode(FakeMode::Ok);
    let r = gate.reconcile(None).await?;
    assert_eq!(
        (r.examined, r.provider_errors, r.orders_recorded),
        (1, 0, 1)
    );
    no_violations(&fake);
    drop(gate);
    db.drop().await?;
    Ok(())
}

/// An id outside the gate's identifier grammar (a path in it, nothing at
/// all, a space, 65 characters) is never put in a request path: a read of
/// it finds no order and a capture of it is refused, with nothing sent; an
/// id of exactly 64 characters is asked for.
#[tokio::test]
async fn an_id_outside_the_grammar_is_never_put_in_a_path() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let too_long = "o".repeat(65);
    for bad in ["order_1/../payments", "", "order 1", too_long.as_str()] {
        assert_eq!(rzp.fetch_order(bad).await.unwrap(), None, "{bad:?}");
        assert_eq!(rzp.find_by_receipt(bad).await.unwrap(), None, "{bad:?}");
        let err = rzp.capture_authorized(bad, 60000, "INR").await.unwrap_err();
        assert!(
            matches!(err, ProviderError::Rejected { status: 400 }),
            "{bad:?}: {err:?}"
        );
    }
    let sent: Vec<_> = fake.seen().into_iter().map(|s| s.path).collect();
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(rzp.fetch_order(&"o".repeat(64)).await.unwrap(), None);
    assert_eq!(fake.seen().len(), 1, "an id of 64 characters is asked for");
}

/// Razorpay makes a new order for a receipt it has seen (the receipt is not
/// a key there): a receipt's lookup answers with the order that was paid,
/// not the later one.
#[tokio::test]
async fn a_receipt_with_two_orders_is_found_as_its_paid_one() {
    let fake = crate::fake_razorpay::start().await;
    let rzp = adapter(&fake);
    let paid = rzp
        .create_order(&order_request("auth_twice"))
        .await
        .unwrap();
    fake.capture(&paid.id);
    let later = rzp
        .create_order(&order_request("auth_twice"))
        .await
        .unwrap();
    assert_ne!(paid.id, later.id, "a second order for the same receipt");
    let found = rzp.find_by_receipt("auth_twice").await.unwrap().unwrap();
    assert_eq!(found.order.id, paid.id, "the paid order, not the latest");
    assert_eq!(found.payments.len(), 1);
    no_violations(&fake);
}
