//! What pay and reconcile believe of the provider's answer, with the
//! provider lying or lagging: a payment that does not fit its order (wrong
//! amount, wrong currency, an id outside the identifier grammar) moves
//! nothing; an answer that names another request's order moves nothing and
//! is an answer, not a database error, in pay as in reconcile; and settling
//! a kept capture alone is written to the ledger like any other change.
//!
//! Reconcile's manual capture asks the provider to capture only an
//! authorised payment of the authority's own amount and currency, of an
//! order that matches the request and has no captured payment yet, and a
//! capture the provider refuses, or answers for another payment, status,
//! amount or currency, is counted as an error and books nothing.
//!
//! The provider here is the in-process one behind a doctor that edits
//! `find_by_receipt`'s answers (the one call reconcile makes to read) and
//! can give `create_order`'s answer another id, so each test says exactly
//! which lie it tells; it records every capture the gate asks for.

use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::support::*;
use gate::db::FreshDatabase;
use gate::provider::{
    InProcessProvider, Mode, OrderRequest, OrderSnapshot, Payment, PaymentProvider, PaymentStatus,
    ProviderError, ProviderHealth, ProviderOrder,
};
use gate::service::webhook::{EVENT_AUTHORIZED, EVENT_CAPTURED, EVENT_ORDER_PAID};
use gate::service::{
    Gate, LedgerKey, ManualClock, audit, razorpay_envelope, sign_webhook, standard,
};
use gate::{Decision, Reason};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Edits the answer for one receipt.
type Doctor = Box<dyn Fn(&InProcessProvider, &mut Option<OrderSnapshot>) + Send + Sync>;

/// The in-process provider, with `find_by_receipt`'s answers edited per receipt.
#[derive(Default)]
struct Doctored {
    inner: InProcessProvider,
    doctors: Mutex<Vec<(String, Doctor)>>,
    /// When set, the id `create_order` answers with.
    renamed: Mutex<Option<String>>,
    /// When set, `create_order` makes the order, then waits for this
    /// before it answers (a slow provider).
    held: Mutex<Option<Arc<tokio::sync::Notify>>>,
    /// The payment ids of every capture the gate asked for, in order.
    captures: Mutex<Vec<String>>,
    /// When set, edits every answer of `capture_authorized`.
    capture_lie: Mutex<Option<CaptureLie>>,
}

impl Doctored {
    /// From now on, the answer for `receipt` is edited by `doctor`.
    fn doctor(
        &self,
        receipt: &str,
        doctor: impl Fn(&InProcessProvider, &mut Option<OrderSnapshot>) + Send + Sync + 'static,
    ) {
        if let Ok(mut d) = self.doctors.lock() {
            d.push((receipt.to_owned(), Box::new(doctor)));
        }
    }

    /// From now on, a new order is answered under the id `order_id`.
    fn rename_new_orders(&self, order_id: &str) {
        if let Ok(mut r) = self.renamed.lock() {
            *r = Some(order_id.to_owned());
        }
    }

    /// From now on, `create_order` answers only once `release` is notified.
    fn hold_answers(&self) -> Arc<tokio::sync::Notify> {
        let release = Arc::new(tokio::sync::Notify::new());
        if let Ok(mut h) = self.held.lock() {
            *h = Some(Arc::clone(&release));
        }
        release
    }

    /// The payment ids the gate asked to capture, in order.
    fn captures_asked(&self) -> Vec<String> {
        self.captures.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Answers honestly again.
    fn cure(&self) {
        if let Ok(mut d) = self.doctors.lock() {
            d.clear();
        }
    }
}

impl PaymentProvider for Doctored {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        let renamed = self.renamed.lock().ok().and_then(|r| r.clone());
        let held = self.held.lock().ok().and_then(|h| h.clone());
        let created = self.inner.create_order(request);
        async move {
            let mut order = created.await?;
            if let Some(release) = held {
                release.notified().await;
            }
            if let Some(id) = renamed {
                order.id = id;
            }
            Ok(order)
        }
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
        let mut answer = honest(&self.inner, receipt);
        if let Ok(doctors) = self.doctors.lock() {
            for (r, doctor) in doctors.iter() {
                if r == receipt {
                    doctor(&self.inner, &mut answer);
                }
            }
        }
        std::future::ready(Ok(answer))
    }

    fn capture_authorized(
        &self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> impl Future<Output = Result<Payment, ProviderError>> + Send {
        if let Ok(mut c) = self.captures.lock() {
            c.push(payment_id.to_owned());
        }
        let lie = self.capture_lie.lock().ok().and_then(|l| *l);
        let answer = self
            .inner
            .capture_authorized(payment_id, amount_paise, currency);
        async move {
            let mut payment = answer.await?;
            if let Some(lie) = lie {
                lie(&mut payment);
            }
            Ok(payment)
        }
    }

    fn health(&self) -> ProviderHealth {
        self.inner.health()
    }
}

/// The in-process provider's own answer for `receipt` (its futures are
/// ready at once; one that is not counts as no order).
fn honest(provider: &InProcessProvider, receipt: &str) -> Option<OrderSnapshot> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut asked = std::pin::pin!(provider.find_by_receipt(receipt));
    match asked.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(answer)) => answer,
        _ => None,
    }
}

/// A standard world whose gate asks the doctored provider.
struct Lying {
    db: FreshDatabase,
    gate: Gate<Doctored>,
}

impl Lying {
    async fn new() -> BoxResult<Option<Lying>> {
        let Some(db) = fresh().await? else {
            return Ok(None);
        };
        let clock = Arc::new(ManualClock::new(standard::now()));
        let gate = Gate::new(db.pool().clone(), Doctored::default(), SECRET, clock)?;
        gate.seed(&standard::seed()).await?;
        Ok(Some(Lying { db, gate }))
    }

    fn provider(&self) -> &Doctored {
        self.gate.provider()
    }

    /// Proposes and checks out CLOUD-STARTER x1 (60,000 paise) for buyer-agent,
    /// then pays; returns (request, authority).
    async fn paid(&self) -> BoxResult<(String, String)> {
        let p = self
            .gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        let request = request_id(&p);
        let authority = id(&self.gate.checkout("acme", &request, "finance-lead").await?);
        self.gate.pay("acme", &authority, "finance-lead").await?;
        Ok((request, authority))
    }

    /// As [`Lying::paid`], with the provider's answer to the order lost
    /// (the request waits on the provider, the gate records no order);
    /// returns (request, authority, the order the provider made).
    async fn paid_late(&self) -> BoxResult<(String, String, ProviderOrder)> {
        self.provider().inner.set_mode(Mode::Late, Some(1));
        let (request, authority) = self.paid().await?;
        let order = self
            .provider()
            .inner
            .order_for_receipt(&authority)
            .ok_or("no order at the provider")?;
        Ok((request, authority, order))
    }

    async fn state(&self, request: &str) -> BoxResult<Option<String>> {
        Ok(self.gate.request_state("acme", request).await?)
    }

    async fn payments_recorded(&self) -> BoxResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM provider_payments WHERE tenant_id = 'acme'")
                .fetch_one(self.gate.pool())
                .await?,
        )
    }

    async fn reconcile_entries(&self, authority: &str) -> BoxResult<i64> {
        Ok(sqlx::query_scalar(
            "SELECT count(*) FROM ledger_entries WHERE kind = 'reconcile' \
             AND entry::jsonb->>'subject' = $1",
        )
        .bind(authority)
        .fetch_one({
            self.gate.integrate().await?;
            self.gate.pool()
        })
        .await?)
    }

    /// From now on, asked for `authority_b`, the provider answers with the
    /// order of `receipt_a`, relabelled with b's receipt (so it matches b's
    /// terms), and a capture on it.
    fn mix_up(&self, receipt_a: &str, authority_b: &str) {
        let (receipt_a, receipt_b) = (receipt_a.to_owned(), authority_b.to_owned());
        self.provider()
            .doctor(authority_b, move |provider, answer| {
                if let Some(mut snap) = honest(provider, &receipt_a) {
                    snap.order.receipt = receipt_b.clone();
                    snap.payments
                        .push(captured("pay_mixed", &snap.order.id, 60_000, "INR"));
                    *answer = Some(snap);
                }
            });
    }

    /// Reconciles, and checks that neither request moved: both examined,
    /// no order recorded, nothing captured, both still PROVIDER_PENDING.
    async fn neither_moved(&self, request_a: &str, request_b: &str) -> TestResult {
        let r = self.gate.reconcile(Some("acme")).await?;
        assert_eq!(
            (
                r.examined,
                r.orders_recorded,
                r.captured,
                r.needs_review,
                r.still_pending
            ),
            (2, 0, 0, 0, 2),
            "{r:?}"
        );
        for request in [request_a, request_b] {
            assert_eq!(
                self.state(request).await?.as_deref(),
                Some("PROVIDER_PENDING")
            );
        }
        assert_eq!(self.payments_recorded().await?, 0);
        Ok(())
    }

    async fn finish(self) -> TestResult {
        assert!(self.gate.verify_ledger().await?.intact());
        self.close().await
    }

    /// Drops the world's database, checking nothing.
    async fn close(self) -> TestResult {
        let Lying { db, gate } = self;
        drop(gate);
        db.drop().await?;
        Ok(())
    }
}

/// A captured payment on `order` as the provider would list it.
fn captured(id: &str, order: &str, amount_paise: i64, currency: &str) -> Payment {
    Payment {
        id: id.into(),
        order_id: order.into(),
        amount_paise,
        currency: currency.into(),
        status: PaymentStatus::Captured,
        created_at: 0,
    }
}

/// A payment that does not fit its order is not applied, whichever of its
/// terms is wrong: one paisa short in the right currency, the right amount
/// in another currency, or an id outside the identifier grammar. Each is
/// tried alone, so no check can lean on another; then the honest capture of
/// the same order is applied by the same path.
#[tokio::test]
async fn reconcile_applies_no_payment_that_does_not_fit_its_order() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    // The provider creates the order but the gate never hears the answer.
    let (request, authority, order) = w.paid_late().await?;
    let lies = [
        captured("pay_short", &order.id, 59_999, "INR"),
        captured("pay_dollars", &order.id, 60_000, "USD"),
        captured("pay bad id", &order.id, 60_000, "INR"),
    ];
    for (n, lie) in lies.into_iter().enumerate() {
        w.provider().cure();
        w.provider().doctor(&authority, move |_, answer| {
            if let Some(snap) = answer {
                snap.payments.push(lie.clone());
            }
        });
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!(
            (
                r.orders_recorded,
                r.captured,
                r.needs_review,
                r.still_pending
            ),
            (usize::from(n == 0), 0, 0, 1),
            "lie {n}: {r:?}"
        );
        assert_eq!(
            w.state(&request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_eq!(w.payments_recorded().await?, 0, "lie {n}");
        assert_eq!(w.gate.captured_paise("acme").await?, 0, "lie {n}");
    }
    // The customer really pays: the same path applies it.
    w.provider().cure();
    w.provider().inner.capture_payment(&order.id)?;
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!((r.captured, r.still_pending), (1, 0), "{r:?}");
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    assert_eq!(w.gate.captured_paise("acme").await?, 60_000);
    w.finish().await
}

/// An answer for one request's receipt that names another request's order
/// (the provider mixed them up) moves neither request: the order the gate
/// finds under that id belongs to someone else, so its payments are not
/// this request's money.
#[tokio::test]
async fn reconcile_ignores_an_answer_that_names_another_requests_order() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request_a, authority_a) = w.paid().await?;
    let (request_b, authority_b) = w.paid().await?;
    let order_a = w
        .provider()
        .inner
        .order_for_receipt(&authority_a)
        .ok_or("no order for a")?;
    w.mix_up(&order_a.receipt, &authority_b);
    w.neither_moved(&request_a, &request_b).await?;
    assert_eq!(w.gate.captured_paise("acme").await?, 0);
    w.finish().await
}

/// A provider whose answer lags (it lists the order without its payment)
/// does not keep a kept capture off the books: reconcile records the order
/// and books the kept capture on it, in one ledger entry; a redelivery of
/// the capture afterwards counts nothing twice.
#[tokio::test]
async fn a_kept_capture_is_booked_even_when_the_providers_answer_lags() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    let inner = &w.provider().inner;
    let payment = inner.capture_payment(&order.id)?;
    let paid = inner.order_for_receipt(&authority).ok_or("no order")?;
    let now = w.gate.now();
    // order.paid for an order the gate has not recorded: kept for reconcile.
    let kept = razorpay_envelope(EVENT_ORDER_PAID, now, Some(&payment), Some(&paid));
    let h = w
        .gate
        .webhook(&kept, Some(&sign_webhook(SECRET, &kept)), Some("evt_kept"))
        .await?;
    assert!(h.is_ok(), "{h:?}");
    assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
    // The provider lags: its answer lists the order without its payment.
    w.provider().doctor(&authority, |_, answer| {
        if let Some(snap) = answer {
            snap.payments.clear();
        }
    });
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.orders_recorded, r.captured, r.kept_settled),
        (1, 1, 1),
        "{r:?}"
    );
    assert_eq!(w.reconcile_entries(&authority).await?, 1);
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    // The capture is delivered again now that the order is known: already
    // on the books, it counts nothing twice.
    w.provider().cure();
    let again = razorpay_envelope(EVENT_CAPTURED, now, Some(&payment), Some(&paid));
    let h = w
        .gate
        .webhook(
            &again,
            Some(&sign_webhook(SECRET, &again)),
            Some("evt_again"),
        )
        .await?;
    assert!(h.is_ok(), "{h:?}");
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    let books = w.gate.books(Some("acme")).await?;
    assert_eq!(books.kept_unsettled, 0);
    assert!(books.balanced(inner.captured_paise()), "{books:?}");
    // Nothing left: the next reconcile examines nothing and writes nothing.
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(r.examined, 0);
    assert_eq!(w.reconcile_entries(&authority).await?, 1);
    w.finish().await
}

/// The same mix-up for a request whose order the gate never heard of (the
/// provider's answer to its pay came too late): the order id is already
/// another request's, so it is not recorded for this one, and reconcile
/// answers in counts, not with a database error.
#[tokio::test]
async fn reconcile_does_not_record_another_requests_order_for_a_late_request() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request_a, authority_a) = w.paid().await?;
    w.provider().inner.set_mode(Mode::Timeout, Some(1));
    let (request_b, authority_b) = w.paid().await?;
    w.mix_up(&authority_a, &authority_b);
    w.neither_moved(&request_a, &request_b).await?;
    w.finish().await
}

/// Pay's provider answers a new order with the id of another request's
/// order (its receipt, merchant, amount and currency are right). The id is
/// already on the books for the first request, so the answer is a mismatch:
/// PROVIDER_REJECTED, the request FAILS and its budget comes back, and the
/// first request's order is untouched. Before, the insert hit
/// `pk_provider_orders` and pay answered with a database error.
#[tokio::test]
async fn pay_refuses_an_order_id_that_is_already_another_requests() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (_request_a, authority_a) = w.paid().await?;
    let order_a = w
        .provider()
        .inner
        .order_for_receipt(&authority_a)
        .ok_or("no order for a")?;
    w.provider().rename_new_orders(&order_a.id);
    let p = w
        .gate
        .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
        .await?;
    let request_b = request_id(&p);
    let authority_b = id(&w.gate.checkout("acme", &request_b, "finance-lead").await?);
    let spent_before = w.gate.spent_today_paise("acme").await?;
    let paid = w.gate.pay("acme", &authority_b, "finance-lead").await?;
    assert_eq!(
        paid.decision,
        Decision::Deny(Reason::ProviderRejected),
        "{paid:?}"
    );
    assert_eq!(paid.id, None, "another request's order is never handed out");
    assert_eq!(w.state(&request_b).await?.as_deref(), Some("FAILED"));
    assert_eq!(w.gate.provider_order_count("acme").await?, 1);
    let owner: String =
        sqlx::query_scalar("SELECT authority_id FROM provider_orders WHERE provider_order_id = $1")
            .bind(&order_a.id)
            .fetch_one(w.gate.pool())
            .await?;
    assert_eq!(owner, authority_a, "the first request keeps its order");
    assert_eq!(
        w.gate.spent_today_paise("acme").await?,
        spent_before - 60_000,
        "the refused request's reservation comes back"
    );
    w.finish().await
}

/// The honest twin of the lie above: the provider is slow to answer pay, and
/// meanwhile reconcile finds the order by its receipt and records it. Pay's
/// answer then names an order already on the books, and it is this
/// authority's own: pay hands it out, records nothing twice, and the
/// request is not refused.
#[tokio::test]
async fn pay_answered_after_reconcile_recorded_its_order_hands_it_out() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let p = w
        .gate
        .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
        .await?;
    let request = request_id(&p);
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    let release = w.provider().hold_answers();
    let reconciled = async {
        // Wait until the provider has made the order, then reconcile.
        while w.provider().inner.order_for_receipt(&authority).is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        let r = w.gate.reconcile(Some("acme")).await;
        release.notify_one();
        r
    };
    let (paid, r) = tokio::join!(w.gate.pay("acme", &authority, "finance-lead"), reconciled);
    let (paid, r) = (paid?, r?);
    assert_eq!(r.orders_recorded, 1, "{r:?}");
    let order = w
        .provider()
        .inner
        .order_for_receipt(&authority)
        .ok_or("no order")?;
    assert_eq!(paid.decision, Decision::Allow, "{paid:?}");
    assert_eq!(paid.id.as_deref(), Some(order.id.as_str()));
    assert_eq!(
        w.state(&request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert_eq!(w.gate.provider_order_count("acme").await?, 1);
    let created: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ledger_entries WHERE kind = 'order.created'")
            .fetch_one(w.gate.pool())
            .await?;
    assert_eq!(
        created, 0,
        "reconcile recorded the order; pay writes no second entry"
    );
    w.finish().await
}

/// An authorised payment the provider will not capture (it knows no such
/// payment) is counted as a provider error of the reconcile, and nothing
/// moves: the request still waits on the provider, and no payment
/// is on the books.
#[tokio::test]
async fn reconcile_counts_a_capture_the_provider_refuses_as_a_provider_error() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    let held = Payment {
        status: PaymentStatus::Authorized,
        ..captured("pay_held", &order.id, 60_000, "INR")
    };
    w.provider().doctor(&authority, move |_, answer| {
        if let Some(snap) = answer {
            snap.payments.push(held.clone());
        }
    });
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.examined, r.provider_errors, r.captured, r.still_pending),
        (1, 1, 0, 1),
        "{r:?}"
    );
    assert_eq!(
        w.state(&request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert_eq!(w.payments_recorded().await?, 0);
    w.finish().await
}

/// Edits the provider's answer to a capture.
type CaptureLie = fn(&mut Payment);

/// The four ways a capture's answer can differ from what was asked, named:
/// another payment's id, a status that is not captured, a paisa short, or
/// another currency.
const CAPTURE_LIES: [(&str, CaptureLie); 4] = [
    ("another payment", |p| p.id = "pay_other".into()),
    ("not captured", |p| p.status = PaymentStatus::Authorized),
    ("a paisa short", |p| p.amount_paise -= 1),
    ("another currency", |p| p.currency = "USD".into()),
];

/// An authorised payment with the authority's terms, as a doctor adds it.
fn authorised(id: &str, order: &str, amount_paise: i64, currency: &str) -> Payment {
    Payment {
        status: PaymentStatus::Authorized,
        ..captured(id, order, amount_paise, currency)
    }
}

/// Reconcile captures, of an order's authorised payments, only the one with
/// the authority's amount and currency: one a paisa short and one in
/// dollars, listed before it, are never sent to the provider.
#[tokio::test]
async fn reconcile_captures_only_the_authorisation_with_the_authoritys_terms() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    let real = w.provider().inner.authorize_payment(&order.id)?;
    let lies = [
        authorised("pay_short", &order.id, 59_999, "INR"),
        authorised("pay_dollars", &order.id, 60_000, "USD"),
    ];
    w.provider().doctor(&authority, move |_, answer| {
        if let Some(snap) = answer {
            for lie in lies.iter().rev() {
                snap.payments.insert(0, lie.clone());
            }
        }
    });
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.captured, r.provider_errors, r.still_pending),
        (1, 0, 0),
        "{r:?}"
    );
    assert_eq!(w.provider().captures_asked(), vec![real.id]);
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    assert_eq!(w.gate.captured_paise("acme").await?, 60_000);
    w.finish().await
}

/// An order that already has a captured payment is booked, and an
/// authorisation beside it is never captured: an order is paid once.
#[tokio::test]
async fn reconcile_captures_nothing_more_of_an_order_already_captured() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    w.provider().inner.capture_payment(&order.id)?;
    let second = authorised("pay_second", &order.id, 60_000, "INR");
    w.provider().doctor(&authority, move |_, answer| {
        if let Some(snap) = answer {
            snap.payments.push(second.clone());
        }
    });
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!((r.captured, r.provider_errors), (1, 0), "{r:?}");
    assert_eq!(w.provider().captures_asked(), Vec::<String>::new());
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    assert_eq!(w.provider().inner.captured_paise(), 60_000);
    w.finish().await
}

/// An order whose terms no longer match its request (the provider reports
/// another amount) has nothing captured, even an authorisation of the
/// authority's own amount: the request waits, and no money moves.
#[tokio::test]
async fn reconcile_captures_nothing_of_an_order_that_does_not_match_its_request() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    w.provider().inner.authorize_payment(&order.id)?;
    w.provider().doctor(&authority, |_, answer| {
        if let Some(snap) = answer {
            snap.order.amount_paise = 59_999;
        }
    });
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!((r.captured, r.provider_errors), (0, 0), "{r:?}");
    assert_eq!(w.provider().captures_asked(), Vec::<String>::new());
    assert_eq!(
        w.state(&request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert_eq!(w.provider().inner.captured_paise(), 0);
    w.finish().await
}

/// A capture the provider answers with something other than the payment
/// asked for, captured, for the authority's terms is an error of the
/// reconcile and books nothing, whichever of the four is wrong: another
/// payment's id, a status that is not captured, a paisa short, or another
/// currency. Each is told alone, to a world of its own.
#[tokio::test]
async fn reconcile_books_no_capture_answered_for_other_terms() -> TestResult {
    for (lie, edit) in CAPTURE_LIES {
        let Some(w) = Lying::new().await? else {
            return Ok(());
        };
        let (request, _, order) = w.paid_late().await?;
        w.provider().inner.authorize_payment(&order.id)?;
        if let Ok(mut l) = w.provider().capture_lie.lock() {
            *l = Some(edit);
        }
        let r = w.gate.reconcile(Some("acme")).await?;
        assert_eq!(
            (r.captured, r.provider_errors, r.still_pending),
            (0, 1, 1),
            "{lie}: {r:?}"
        );
        assert_eq!(
            w.state(&request).await?.as_deref(),
            Some("PROVIDER_PENDING"),
            "{lie}"
        );
        assert_eq!(w.payments_recorded().await?, 0, "{lie}");
        w.finish().await?;
    }
    Ok(())
}

impl Lying {
    /// Writes a kept capture as a login would, with no webhook behind it,
    /// past the guard that refuses one (`kept_capture_carried_by_event`,
    /// which the owner switches off; the money audit still names the row):
    /// `order` and `payment` for `authority`, of `amount_paise` in `currency`.
    async fn keep_as_a_login(
        &self,
        authority: &str,
        (order, payment): (&str, &str),
        amount_paise: i64,
        currency: &str,
    ) -> TestResult {
        exec(
            self.db.owner_pool(),
            "ALTER TABLE kept_captures DISABLE TRIGGER kept_capture_carried_by_event",
        )
        .await?;
        sqlx::query(
            "INSERT INTO kept_captures (tenant_id, provider_event_id, authority_id, \
             provider_order_id, provider_payment_id, amount_paise, currency, \
             event_created_at, received_at) VALUES ('acme', $1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(format!("evt_{payment}").into_bytes())
        .bind(authority)
        .bind(order)
        .bind(payment)
        .bind(amount_paise)
        .bind(currency)
        .bind(self.gate.now())
        .execute(self.gate.pool())
        .await?;
        Ok(())
    }
}

/// Kept captures that do not fit their authority (a paisa short, another
/// currency, a payment or order id outside the identifier grammar) are
/// never booked by reconcile, even with the provider silent; one that fits
/// is, and reconcile records its order from it. Written past the guard,
/// each is named by the money audit.
#[tokio::test]
async fn reconcile_books_only_a_kept_capture_that_fits_its_authority() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (request, authority, order) = w.paid_late().await?;
    w.provider().doctor(&authority, |_, answer| *answer = None);
    let misfits: [((&str, &str), i64, &str); 4] = [
        ((&order.id, "pay_short"), 59_999, "INR"),
        ((&order.id, "pay_dollars"), 60_000, "USD"),
        ((&order.id, "pay bad id"), 60_000, "INR"),
        (("order bad id", "pay_odd_order"), 60_000, "INR"),
    ];
    for (ids, amount, currency) in misfits {
        w.keep_as_a_login(&authority, ids, amount, currency).await?;
    }
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (
            r.orders_recorded,
            r.captured,
            r.kept_settled,
            r.still_pending
        ),
        (0, 0, 0, 1),
        "{r:?}"
    );
    assert_eq!(
        w.state(&request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert_eq!(w.payments_recorded().await?, 0);
    w.keep_as_a_login(&authority, (&order.id, "pay_fits"), 60_000, "INR")
        .await?;
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.orders_recorded, r.captured, r.kept_settled),
        (1, 1, 1),
        "{r:?}"
    );
    assert_eq!(w.state(&request).await?.as_deref(), Some("CAPTURED"));
    assert_eq!(w.payments_recorded().await?, 1);
    w.gate.integrate().await?;
    let found = audit(
        w.gate.pool(),
        &LedgerKey::derived_from_secret(SECRET),
        Some("acme"),
    )
    .await?;
    let kept: Vec<&str> = found
        .iter()
        .filter(|d| d.table == "kept_captures")
        .map(|d| d.problem.as_str())
        .collect();
    assert_eq!(kept.len(), 5, "{found:?}");
    assert!(
        kept.iter().any(|p| p.contains("pay_fits")),
        "the booked one is named too: {kept:?}"
    );
    w.close().await
}

/// A kept capture for a request that never reached the provider (its
/// authority was issued, never used) is not booked: no order of the gate's
/// can carry that receipt.
#[tokio::test]
async fn reconcile_books_no_kept_capture_for_a_request_that_never_paid() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let p = w
        .gate
        .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
        .await?;
    let request = request_id(&p);
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    w.keep_as_a_login(&authority, ("order_never", "pay_never"), 60_000, "INR")
        .await?;
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.orders_recorded, r.captured, r.kept_settled),
        (0, 0, 0),
        "{r:?}"
    );
    assert_eq!(w.state(&request).await?.as_deref(), Some("CHECKOUT_ISSUED"));
    assert_eq!(w.payments_recorded().await?, 0);
    w.finish().await
}

/// A `payment.authorized` webhook whose capture the provider answers with
/// anything but the payment asked for, captured, for the order's terms
/// (another id, not captured, a paisa short, another currency) is refused
/// as `PROVIDER_REJECTED`, and nothing is booked: each lie is told alone.
#[tokio::test]
async fn a_webhook_capture_answered_for_other_terms_books_nothing() -> TestResult {
    for (lie, edit) in CAPTURE_LIES {
        let Some(w) = Lying::new().await? else {
            return Ok(());
        };
        let (request, authority) = w.paid().await?;
        let order = w
            .provider()
            .inner
            .order_for_receipt(&authority)
            .ok_or("no order at the provider")?;
        let held = w.provider().inner.authorize_payment(&order.id)?;
        if let Ok(mut l) = w.provider().capture_lie.lock() {
            *l = Some(edit);
        }
        let body = razorpay_envelope(EVENT_AUTHORIZED, w.gate.now(), Some(&held), None);
        let h = w
            .gate
            .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some("evt_held"))
            .await?;
        assert_eq!(
            h.decision,
            Decision::Deny(Reason::ProviderRejected),
            "{lie}"
        );
        assert_eq!(
            w.provider().captures_asked(),
            vec![held.id.clone()],
            "{lie}"
        );
        assert_eq!(
            w.state(&request).await?.as_deref(),
            Some("PROVIDER_PENDING"),
            "{lie}"
        );
        assert_eq!(w.payments_recorded().await?, 0, "{lie}");
        w.finish().await?;
    }
    Ok(())
}

/// Settling a kept capture alone is written to the ledger: a kept capture
/// whose payment is already on the books (a login cleared its settlement)
/// is settled by the next reconcile, in one entry of its own, though no
/// order, payment or state changes with it.
#[tokio::test]
async fn settling_a_kept_capture_alone_is_written_to_the_ledger() -> TestResult {
    let Some(w) = Lying::new().await? else {
        return Ok(());
    };
    let (_, authority, order) = w.paid_late().await?;
    let inner = &w.provider().inner;
    let payment = inner.capture_payment(&order.id)?;
    let paid = inner.order_for_receipt(&authority).ok_or("no order")?;
    let kept = razorpay_envelope(EVENT_ORDER_PAID, w.gate.now(), Some(&payment), Some(&paid));
    let h = w
        .gate
        .webhook(&kept, Some(&sign_webhook(SECRET, &kept)), Some("evt_kept"))
        .await?;
    assert!(h.is_ok(), "{h:?}");
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!((r.captured, r.kept_settled), (1, 1), "{r:?}");
    assert_eq!(w.reconcile_entries(&authority).await?, 1);
    sqlx::query("UPDATE kept_captures SET settled_at = NULL WHERE authority_id = $1")
        .bind(&authority)
        .execute(w.gate.pool())
        .await?;
    let r = w.gate.reconcile(Some("acme")).await?;
    assert_eq!(
        (r.examined, r.orders_recorded, r.captured, r.kept_settled),
        (1, 0, 0, 1),
        "{r:?}"
    );
    assert_eq!(w.reconcile_entries(&authority).await?, 2);
    w.finish().await
}
