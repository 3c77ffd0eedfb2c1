//! Money that has moved is never off the books: late answers, captures the
//! gate never heard of, captures after a request ended, and reconcile
//! running concurrently with webhooks. After each, `books_balanced` holds:
//! every paisa the provider captured is a captured paisa on the gate's
//! books, and every reservation belongs to a request that holds it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::support::*;
use chrono::Duration as Minutes;
use gate::provider::{
    InProcessProvider, Mode, OrderRequest, OrderSnapshot, PaymentProvider, ProviderError,
    ProviderHealth, ProviderOrder,
};
use gate::service::webhook::{EVENT_CAPTURED, EVENT_ORDER_PAID};
use gate::service::{Gate, ManualClock, Outcome, ProviderEvent, razorpay_envelope, sign_webhook};
use gate::{Decision, Reason};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Proposes and checks out CLOUD-STARTER x1 for buyer-agent.
async fn checked_out<P: PaymentProvider>(gate: &Gate<P>) -> BoxResult<(String, String)> {
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    Ok((request, authority))
}

/// The customer pays `receipt`'s order at the provider; returns the signed
/// `order.paid` envelope (payment and order entities, with the receipt).
fn customer_pays(
    provider: &InProcessProvider,
    receipt: &str,
    gate_now: chrono::DateTime<chrono::Utc>,
) -> BoxResult<(Vec<u8>, String)> {
    let order = provider
        .order_for_receipt(receipt)
        .ok_or("the provider has no order for the receipt")?;
    let payment = provider.capture_payment(&order.id)?;
    let paid = provider
        .order_for_receipt(receipt)
        .ok_or("the order vanished")?;
    let body = razorpay_envelope(EVENT_ORDER_PAID, gate_now, Some(&payment), Some(&paid));
    let sig = sign_webhook(SECRET, &body);
    Ok((body, sig))
}

async fn balanced(w: &World) -> BoxResult<bool> {
    let books = w.gate.books(None).await?;
    Ok(books.balanced(w.gate.provider().captured_paise()) && books.kept_unsettled == 0)
}

async fn ledger_len(w: &World) -> BoxResult<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.ledger().await?)
        .await?)
}

#[tokio::test]
async fn a_late_answer_then_a_capture_is_kept_and_reconcile_books_it() -> TestResult {
    on_world(async |w| {
        w.gate.provider().set_mode(Mode::Late, Some(1));
        let (request, authority) = checked_out(&w.gate).await?;
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
        let (body, sig) = customer_pays(w.gate.provider(), &authority, w.gate.now())?;
        // A payment.captured carries no receipt: the gate cannot tell whose it is.
        let order = w
            .gate
            .provider()
            .order_for_receipt(&authority)
            .ok_or("no order")?;
        let bare = ProviderEvent {
            id: "evt_bare".into(),
            event: EVENT_CAPTURED.into(),
            created_at: w.gate.now(),
            order_id: order.id.clone(),
            amount_paise: 60000,
            currency: "INR".into(),
        }
        .to_body();
        let h = w
            .gate
            .webhook(&bare, Some(&sign_webhook(SECRET, &bare)), Some("evt_bare"))
            .await?;
        assert_eq!(h.decision, Decision::Deny(Reason::WebhookUnknownOrder));
        // order.paid names the receipt: kept for reconcile, not dropped.
        let h = w.gate.webhook(&body, Some(&sig), Some("evt_paid")).await?;
        assert!(h.is_ok(), "{h:?}");
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
        let again = w.gate.webhook(&body, Some(&sig), Some("evt_paid")).await?;
        assert_eq!(again.decision, Decision::Deny(Reason::WebhookDuplicate));
        assert!(
            !balanced(w).await?,
            "before reconcile the capture is not booked"
        );
        let r = w.gate.reconcile(None).await?;
        assert_eq!(
            (r.examined, r.orders_recorded, r.captured, r.kept_settled),
            (1, 1, 1, 1)
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert_eq!(w.gate.captured_paise("acme").await?, 60000);
        assert!(balanced(w).await?);
        // The bare capture, retried now that the order is known, counts nothing twice.
        let h = w
            .gate
            .webhook(&bare, Some(&sign_webhook(SECRET, &bare)), Some("evt_bare"))
            .await?;
        assert!(h.is_ok(), "{h:?}");
        assert!(balanced(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn no_order_and_an_expired_authority_fail_the_request_and_release_it() -> TestResult {
    on_world(async |w| {
        w.gate.provider().set_mode(Mode::Timeout, Some(1));
        let (request, authority) = checked_out(&w.gate).await?;
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.examined, r.failed, r.still_pending), (1, 0, 1));
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
        w.clock.advance(Minutes::minutes(16));
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.examined, r.failed, r.still_pending), (1, 1, 0));
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("FAILED")
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!(inv.spent_today_paise, 0);
        assert_eq!(inv.delegation_spent_paise.get("d-buyer"), Some(&0));
        assert!(inv.ledger_intact);
        // Idempotent: nothing left to do, nothing written.
        let before = ledger_len(w).await?;
        let r = w.gate.reconcile(None).await?;
        assert_eq!(r.examined, 0);
        assert_eq!(ledger_len(w).await?, before);
        assert!(balanced(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn reconcile_books_a_capture_whose_webhook_never_came_and_the_webhook_later_counts_nothing()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let (request, _, order) = paid_order(&w).await?;
    w.gate.provider().capture(&order)?;
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!((r.examined, r.captured, r.orders_recorded), (1, 1, 0));
    assert_eq!(
        w.gate.request_state("acme", &request).await?.as_deref(),
        Some("CAPTURED")
    );
    let before = ledger_len(&w).await?;
    let again = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(again.examined, 0, "a captured request is settled");
    assert_eq!(ledger_len(&w).await?, before);
    let (body, sig) = event(&w, "evt_after", EVENT_CAPTURED, &order, 60000);
    assert!(
        w.gate
            .webhook(&body, Some(&sig), Some("evt_after"))
            .await?
            .is_ok()
    );
    assert_eq!(w.gate.captured_paise("acme").await?, 60000);
    assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
    assert!(balanced(&w).await?);
    w.drop().await
}

#[tokio::test]
async fn a_failed_attempt_found_by_reconcile_keeps_the_request_pending() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        w.gate.provider().fail_attempt(&order)?;
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.attempts, r.still_pending, r.failed), (1, 1, 0));
        w.clock.advance(Minutes::minutes(30));
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!(
            (r.failed, r.still_pending),
            (0, 1),
            "an order exists: it can still be paid, so the request is not failed"
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 60000);
        assert!(balanced(w).await?);
        Ok(())
    })
    .await
}

/// Creates the order and then answers 4xx, once: the provider lied.
#[derive(Debug, Default)]
struct RejectsAfterCreating {
    inner: InProcessProvider,
    calls: AtomicU32,
}

impl PaymentProvider for RejectsAfterCreating {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        let first = self.calls.fetch_add(1, Ordering::SeqCst) == 0;
        // The first call creates the order (as `late` does) but answers 4xx.
        let mode = if first { Mode::Late } else { Mode::Ok };
        self.inner.set_mode(mode, None);
        let answer = {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            let mut f = std::pin::pin!(self.inner.create_order(request));
            match f.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(v) => v,
                std::task::Poll::Pending => Err(ProviderError::Timeout),
            }
        };
        let answer = if first {
            Err(ProviderError::Rejected { status: 400 })
        } else {
            answer
        };
        std::future::ready(answer)
    }

    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.inner.fetch_order(order_id)
    }

    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.inner.find_by_receipt(receipt)
    }

    fn health(&self) -> ProviderHealth {
        self.inner.health()
    }
}

#[tokio::test]
async fn a_capture_after_the_request_failed_is_booked_past_the_budget_as_needs_review() -> TestResult
{
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let clock = Arc::new(ManualClock::new(gate::service::standard::now()));
    let gate = Gate::new(
        db.pool().clone(),
        RejectsAfterCreating::default(),
        SECRET,
        clock.clone(),
    )?;
    gate.seed(&gate::service::standard::seed()).await?;
    let (request, authority) = checked_out(&gate).await?;
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderRejected));
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("FAILED")
    );
    // The released budget is spent again: d-buyer holds 180,000 of 200,000.
    for _ in 0..3 {
        let p = gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?;
        assert_eq!(p.decision, Decision::Allow);
    }
    // The order the provider said it refused is paid after all.
    let provider = &gate.provider().inner;
    let order = provider.order_for_receipt(&authority).ok_or("no order")?;
    let payment = provider.capture_payment(&order.id)?;
    let paid_order = provider.order_for_receipt(&authority).ok_or("no order")?;
    let body_ = razorpay_envelope(
        EVENT_ORDER_PAID,
        gate.now(),
        Some(&payment),
        Some(&paid_order),
    );
    let kept = gate
        .webhook(&body_, Some(&sign_webhook(SECRET, &body_)), Some("evt_lie"))
        .await?;
    assert!(kept.is_ok(), "{kept:?}");
    let r = gate.reconcile(None).await?;
    assert_eq!((r.needs_review, r.kept_settled), (1, 1));
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("NEEDS_REVIEW")
    );
    assert_eq!(
        gate.delegation_spent_paise("acme", "d-buyer").await?,
        Some(240000),
        "counted past the hop's 200,000"
    );
    assert_eq!(gate.spent_today_paise("acme").await?, 240000);
    let books = gate.books(None).await?;
    assert!(books.balanced(provider.captured_paise()), "{books:?}");
    assert_eq!(books.kept_unsettled, 0);
    // The spend is counted: the hop has nothing left for a new purchase.
    let p = gate
        .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
        .await?;
    assert_eq!(
        p.decision,
        Decision::Deny(Reason::DelegationBudgetExhausted)
    );
    assert!(gate.verify_ledger().await?.intact());
    drop(gate);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn reconcile_of_a_tenant_outside_the_identifier_grammar_touches_nothing() -> TestResult {
    on_world(async |w| {
        w.gate.provider().set_mode(Mode::Timeout, None);
        checked_out(&w.gate).await?;
        for tenant in ["acme\u{0}", "", &"a".repeat(65)] {
            assert_eq!(w.gate.reconcile(Some(tenant)).await?.examined, 0);
        }
        assert_eq!(w.gate.reconcile(Some("globex")).await?.examined, 0);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconcile_racing_webhooks_books_every_capture_exactly_once() -> TestResult {
    on_world_with_pool(24, async |w| {
        // Three purchases, each paid at the provider; one answered late.
        let mut orders = Vec::new();
        for i in 0..3 {
            if i == 2 {
                w.gate.provider().set_mode(Mode::Late, Some(1));
            }
            let (request, authority) = checked_out(&w.gate).await?;
            w.gate.pay("acme", &authority, "finance-lead").await?;
            let order = w
                .gate
                .provider()
                .order_for_receipt(&authority)
                .ok_or("no order")?;
            let payment = w.gate.provider().capture_payment(&order.id)?;
            let paid = w
                .gate
                .provider()
                .order_for_receipt(&authority)
                .ok_or("no order")?;
            let body =
                razorpay_envelope(EVENT_ORDER_PAID, w.gate.now(), Some(&payment), Some(&paid));
            orders.push((request, body));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for round in 0..3 {
            for (i, (_, body)) in orders.iter().enumerate() {
                let gate = w.gate.clone();
                let body = body.clone();
                // The same event delivered twice, and a second event id for it.
                let id = format!("evt_race_{i}_{}", round % 2);
                tasks.spawn(async move {
                    let sig = sign_webhook(SECRET, &body);
                    gate.webhook(&body, Some(&sig), Some(&id)).await.map(Some)
                });
            }
            let gate = w.gate.clone();
            tasks.spawn(async move { gate.reconcile(None).await.map(|_| None::<Outcome>) });
        }
        let mut ok = 0;
        while let Some(joined) = tasks.join_next().await {
            match joined?? {
                Some(o) if o.is_ok() => ok += 1,
                Some(o) => assert!(
                    matches!(
                        o.reason(),
                        Some(Reason::WebhookDuplicate) | Some(Reason::WebhookUnknownOrder)
                    ),
                    "{o:?}"
                ),
                None => {}
            }
        }
        assert!(ok >= 3, "each order's capture was accepted at least once");
        w.gate.reconcile(None).await?;
        for (request, _) in &orders {
            assert_eq!(
                w.gate.request_state("acme", request).await?.as_deref(),
                Some("CAPTURED")
            );
        }
        assert_eq!(w.gate.captured_paise("acme").await?, 180000);
        assert_eq!(w.gate.provider().captured_paise(), 180000);
        assert!(balanced(w).await?);
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

/// Found by the bench (`prov-concurrent-kept-capture-deliveries`, once, in a
/// fresh clone's CI run): two deliveries of one kept capture at once both
/// passed the look-up, and the second insert hit `pk_kept_captures`, which
/// the insert's ON CONFLICT did not name: a database error instead of
/// WEBHOOK_DUPLICATE. The insert now takes every unique index as an arbiter.
/// The window is narrow: this stress test did not hit it in three runs
/// without the fix; it pins the outcome (one kept, 63 duplicates, no error).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_deliveries_of_one_kept_capture_keep_it_once() -> TestResult {
    on_world_with_pool(24, async |w| {
        w.gate.provider().set_mode(Mode::Late, Some(1));
        let (request, authority) = checked_out(&w.gate).await?;
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
        let (body, sig) = customer_pays(w.gate.provider(), &authority, w.gate.now())?;
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..64 {
            let (gate, body, sig) = (w.gate.clone(), body.clone(), sig.clone());
            tasks
                .spawn(async move { gate.webhook(&body, Some(&sig), Some("evt_kept_race")).await });
        }
        let (mut kept, mut duplicates) = (0, 0);
        while let Some(joined) = tasks.join_next().await {
            let outcome = joined??;
            if outcome.is_ok() {
                kept += 1;
            } else {
                assert_eq!(
                    outcome.reason(),
                    Some(Reason::WebhookDuplicate),
                    "{outcome:?}"
                );
                duplicates += 1;
            }
        }
        assert_eq!((kept, duplicates), (1, 63));
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
        w.gate.reconcile(None).await?;
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        assert!(balanced(w).await?);
        Ok(())
    })
    .await
}

async fn reconcile_entries(w: &World, authority: &str) -> BoxResult<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM ledger_entries WHERE kind = 'reconcile' AND entry::jsonb->>'subject' = $1",
    )
    .bind(authority)
    .fetch_one(w.ledger().await?)
    .await?)
}

/// A reconcile writes a ledger entry for an authority exactly when it changed
/// something: an order recorded, a payment applied, a request failed. A
/// reconcile that finds nothing new writes nothing, and an authority at the
/// very instant it expires has not expired yet.
#[tokio::test]
async fn a_reconcile_is_on_the_ledger_exactly_when_it_changed_something() -> TestResult {
    on_world(async |w| {
        // No order at the provider: nothing changes until the authority expires.
        w.gate.provider().set_mode(Mode::Timeout, Some(1));
        let (request, authority) = checked_out(&w.gate).await?;
        w.gate.pay("acme", &authority, "finance-lead").await?;
        let before = ledger_len(w).await?;
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.examined, r.still_pending), (1, 1));
        assert_eq!(
            ledger_len(w).await?,
            before,
            "nothing changed, nothing written"
        );
        let expires: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
            "SELECT expires_at FROM checkout_authorities WHERE tenant_id = 'acme' AND id = $1",
        )
        .bind(&authority)
        .fetch_one(w.pool())
        .await?;
        w.clock.set(expires);
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!(
            (r.failed, r.still_pending),
            (0, 1),
            "not expired at its last instant"
        );
        assert_eq!(ledger_len(w).await?, before);
        w.clock.set(expires + Minutes::seconds(1));
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.failed, r.still_pending), (1, 0));
        assert_eq!(
            reconcile_entries(w, &authority).await?,
            1,
            "the failure is written"
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("FAILED")
        );

        // An order the gate never heard of: recording it alone is written.
        w.gate.provider().set_mode(Mode::Late, Some(1));
        let (_, late) = checked_out(&w.gate).await?;
        w.gate.pay("acme", &late, "finance-lead").await?;
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.orders_recorded, r.captured, r.still_pending), (1, 0, 1));
        assert_eq!(
            reconcile_entries(w, &late).await?,
            1,
            "the order is written"
        );
        // A capture on that known order: applying it alone is written.
        customer_pays(w.gate.provider(), &late, w.gate.now())?;
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!((r.orders_recorded, r.captured), (0, 1));
        assert_eq!(
            reconcile_entries(w, &late).await?,
            2,
            "the capture is written"
        );
        assert!(balanced(w).await?);
        Ok(())
    })
    .await
}
