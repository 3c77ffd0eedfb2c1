//! `spendgate serve` with `provider = "razorpay"`, at the base URL of a
//! local fake Razorpay (the `fake-razorpay` crate, in contract mode, which
//! refuses and records anything the adapter sends that Razorpay's contract
//! does not hold): a whole purchase reaches CAPTURED, the order the fake
//! holds is the approved one, and reconcile against the fake balances the
//! books.

mod support;

use support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_purchase_through_serve_in_razorpay_mode_reaches_captured() {
    let Some(db) = fresh_db().await else { return };
    let fake = fake_razorpay::start().await;
    let work = tempfile::tempdir().unwrap();
    let razorpay = |c: &mut std::process::Command| {
        c.env("SPENDGATE_PROVIDER", "razorpay")
            .env("SPENDGATE_RAZORPAY_KEY_ID", fake_razorpay::KEY_ID)
            .env("SPENDGATE_RAZORPAY_KEY_SECRET", fake_razorpay::KEY_SECRET)
            .env("SPENDGATE_RAZORPAY_BASE_URL", &fake.base_url);
    };
    let (agent, human) = onboard(&db, work.path());
    let served = Served::start({
        let mut c = spendgate(&db, work.path());
        razorpay(&mut c);
        c.arg("serve");
        c
    });
    let (status, health) = call(
        reqwest::Method::GET,
        &format!("{}/healthz", served.url),
        &agent,
        None,
    )
    .await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["provider"], "razorpay-test", "{health}");

    let (request, order_id) = purchase(&served.url, &agent, &human).await;
    let orders = fake.orders();
    assert_eq!(orders.len(), 1, "{orders:?}");
    assert_eq!(orders[0].id, order_id);
    assert_eq!(
        orders[0].amount_paise, 25_000,
        "the order is for the approved amount"
    );
    assert_eq!(
        state_of(&served.url, &agent, &request).await,
        "PROVIDER_PENDING"
    );

    // The customer pays at Razorpay; Razorpay signs and sends the capture.
    let payment = fake.capture(&order_id);
    let order = fake.snapshot(&order_id).unwrap().order;
    let body = gate::service::razorpay_envelope(
        "payment.captured",
        chrono::Utc::now(),
        Some(&payment),
        Some(&order),
    );
    let signature = gate::service::sign_webhook(WEBHOOK_SECRET.as_bytes(), &body);
    let answer = reqwest::Client::new()
        .post(format!("{}/webhooks/razorpay", served.url))
        .header("content-type", "application/json")
        .header(wire::SIGNATURE, signature)
        .header(wire::EVENT_ID, "evt_razorpay_mode_0001")
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap_or_default()
    );
    assert_eq!(state_of(&served.url, &agent, &request).await, "CAPTURED");
    served.stop();

    // Reconcile asks the fake and finds the books balanced.
    let mut c = spendgate(&db, work.path());
    razorpay(&mut c);
    let reconciled = ok(c.arg("reconcile"));
    let report: serde_json::Value = serde_json::from_str(&reconciled).unwrap();
    assert_eq!(report["books"]["captured_paise"], 25_000, "{report}");
    assert_eq!(
        fake.violations(),
        Vec::<String>::new(),
        "the adapter broke the contract"
    );
}
