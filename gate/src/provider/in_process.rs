//! The deterministic in-process provider, with the spec's simulated modes.
//!
//! Guarantees: no clock, no randomness, no network. Its book is the shared
//! [`Book`] model. Like an idempotent client, it returns the order already
//! created for a receipt instead of a second one. How it answers the next
//! `create_order` calls is set by [`InProcessProvider::set_mode`]:
//! - `ok`: the order is created and returned;
//! - `timeout`: no order is created and no answer comes (reported at once as
//!   [`ProviderError::Timeout`], so a run never waits for a clock);
//! - `late`: the order is created, and the answer comes after the gate's
//!   timeout (reported as [`ProviderError::Timeout`]); the order exists;
//! - `reject`: a 4xx, no order ([`ProviderError::Rejected`]);
//! - `unavailable`: a 5xx, no order ([`ProviderError::Unavailable`]);
//! - `mismatch` of a [`MismatchField`]: the answer is an order that differs from
//!   the one asked for in that field, and nothing is created. `amount` is
//!   one paisa more, `currency` another currency, `merchant` and `receipt`
//!   other names, each under an id no order of the book has; `id` is the
//!   order asked for under the id of the latest order the provider created
//!   for another receipt (with none, there is nothing to mix it up with and
//!   the provider answers as `reject` does).
//!
//! A mode set with `times: Some(n)` applies to the next `n` calls, then the
//! provider answers `ok` again. [`InProcessProvider::capture`] is the spec's
//! `provider_capture`: the customer pays, the provider captures; it moves no
//! state in the gate by itself.

use std::future::Future;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::model::{Book, OrderSnapshot, Payment, PaymentStatus, ProviderOrder};
use super::{OrderRequest, PaymentProvider, ProviderError, ProviderHealth};

/// How the simulated provider answers `create_order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Ok,
    Timeout,
    Late,
    Reject,
    Unavailable,
    /// An answer that differs from the order asked for in one field.
    Mismatch(MismatchField),
}

pub use gate_core::mismatch::MismatchField;

#[derive(Debug, Default)]
struct State {
    book: Book,
    mode: Mode,
    /// Calls left in `mode`; `None` for every later call.
    times: Option<u32>,
    /// The unix time stamped on new orders and payments.
    now: i64,
    /// Mismatching answers given so far (numbers their ids).
    mismatches: u32,
}

/// A deterministic provider that lives in memory.
#[derive(Debug, Default)]
pub struct InProcessProvider {
    state: Mutex<State>,
}

impl InProcessProvider {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// How the next `create_order` calls are answered: `times` of them, or
    /// every later one when `None`.
    pub fn set_mode(&self, mode: Mode, times: Option<u32>) {
        self.with(|s| {
            s.mode = mode;
            s.times = times;
        });
    }

    /// The mode the next call will be answered in.
    pub fn mode(&self) -> Mode {
        self.with(|s| s.mode)
    }

    /// The unix time stamped on what happens next (default 0).
    pub fn set_now(&self, unix_seconds: i64) {
        self.with(|s| s.now = unix_seconds);
    }

    /// Every order created so far, in creation order.
    pub fn orders(&self) -> Vec<ProviderOrder> {
        self.with(|s| s.book.orders().to_vec())
    }

    /// Every payment so far.
    pub fn payments(&self) -> Vec<Payment> {
        self.with(|s| s.book.payments().to_vec())
    }

    /// The order created for `receipt`, if any.
    pub fn order_for_receipt(&self, receipt: &str) -> Option<ProviderOrder> {
        self.with(|s| s.book.by_receipt(receipt).pop().map(|snap| snap.order))
    }

    /// `provider_capture`: the customer pays `order_id` in full; returns the paid order.
    pub fn capture(&self, order_id: &str) -> Result<ProviderOrder, ProviderError> {
        self.with(|s| {
            s.book.capture(order_id, s.now)?;
            s.book
                .snapshot(order_id)
                .map(|snap| snap.order)
                .ok_or_else(|| ProviderError::UnknownOrder(order_id.to_owned()))
        })
    }

    /// The captured payment of `capture`, for building its webhook.
    pub fn capture_payment(&self, order_id: &str) -> Result<Payment, ProviderError> {
        self.with(|s| s.book.capture(order_id, s.now))
    }

    /// The customer's bank authorises a payment of `order_id`; no money
    /// moves until it is captured (manual capture).
    pub fn authorize_payment(&self, order_id: &str) -> Result<Payment, ProviderError> {
        self.with(|s| s.book.authorize(order_id, s.now))
    }

    /// The merchant refunds a captured payment in full.
    pub fn refund_payment(&self, payment_id: &str) -> Result<Payment, ProviderError> {
        self.with(|s| s.book.refund(payment_id))
    }

    /// A failed payment attempt on `order_id` (the order stays payable).
    pub fn fail_attempt(&self, order_id: &str) -> Result<Payment, ProviderError> {
        self.with(|s| s.book.fail_attempt(order_id, s.now))
    }

    /// Everything the provider captured (the spec's `provider_captured_paise`).
    pub fn captured_paise(&self) -> i64 {
        self.with(|s| s.book.captured_paise())
    }

    /// Total captured, per merchant.
    pub fn captured_to(&self, merchant: &str) -> i64 {
        self.with(|s| s.book.captured_to(merchant))
    }

    /// Takes one call's mode, counting down `times`.
    fn next_mode(state: &mut State) -> Mode {
        let mode = state.mode;
        if let Some(left) = state.times.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                state.mode = Mode::Ok;
                state.times = None;
            }
        }
        mode
    }

    fn answer(&self, request: &OrderRequest) -> Result<ProviderOrder, ProviderError> {
        self.with(|s| match Self::next_mode(s) {
            Mode::Ok => Ok(s.book.create_once(request, s.now)),
            Mode::Late => {
                s.book.create_once(request, s.now);
                Err(ProviderError::Timeout)
            }
            Mode::Timeout => Err(ProviderError::Timeout),
            Mode::Reject => Err(ProviderError::Rejected { status: 400 }),
            Mode::Unavailable => Err(ProviderError::Unavailable { status: 503 }),
            Mode::Mismatch(field) => mismatch(s, request, field),
        })
    }

    fn lookup_receipt(&self, receipt: &str) -> Option<OrderSnapshot> {
        self.with(|s| pick(s.book.by_receipt(receipt)))
    }
}

/// An order that differs from the one `request` asks for in `field`;
/// nothing is created.
fn mismatch(
    state: &mut State,
    request: &OrderRequest,
    field: MismatchField,
) -> Result<ProviderOrder, ProviderError> {
    state.mismatches += 1;
    let mut order = ProviderOrder {
        id: format!("order_mismatch_{:06}", state.mismatches),
        receipt: request.receipt.clone(),
        merchant: request.merchant.clone(),
        amount_paise: request.amount_paise,
        amount_paid_paise: 0,
        currency: request.currency.clone(),
        status: super::model::OrderStatus::Created,
        attempts: 0,
        created_at: state.now,
    };
    match field {
        MismatchField::Amount => order.amount_paise = request.amount_paise.saturating_add(1),
        MismatchField::Currency => {
            order.currency = if request.currency == "USD" {
                "INR"
            } else {
                "USD"
            }
            .into();
        }
        MismatchField::Merchant => order.merchant = format!("not-{}", request.merchant),
        MismatchField::Receipt => order.receipt = format!("not-{}", request.receipt),
        MismatchField::Id => {
            let other = state
                .book
                .orders()
                .iter()
                .rev()
                .find(|o| o.receipt != request.receipt)
                .map(|o| o.id.clone());
            match other {
                Some(id) => order.id = id,
                None => return Err(ProviderError::Rejected { status: 400 }),
            }
        }
    }
    Ok(order)
}

/// Of the orders for one receipt: one with a captured payment, else the latest.
pub(crate) fn pick(mut found: Vec<OrderSnapshot>) -> Option<OrderSnapshot> {
    let paid = found.iter().position(|s| {
        s.payments
            .iter()
            .any(|p| p.status == PaymentStatus::Captured)
    });
    match paid {
        Some(i) => Some(found.swap_remove(i)),
        None => found.pop(),
    }
}

impl PaymentProvider for InProcessProvider {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        std::future::ready(self.answer(request))
    }

    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        std::future::ready(Ok(self.with(|s| s.book.snapshot(order_id))))
    }

    fn capture_authorized(
        &self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> impl Future<Output = Result<Payment, ProviderError>> + Send {
        std::future::ready(self.with(|s| {
            s.book
                .capture_authorized(payment_id, amount_paise, currency)
        }))
    }

    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        std::future::ready(Ok(self.lookup_receipt(receipt)))
    }

    fn health(&self) -> ProviderHealth {
        ProviderHealth {
            mode: "in-process",
            has_keys: false,
            keys_refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(receipt: &str) -> OrderRequest {
        OrderRequest {
            receipt: receipt.into(),
            merchant: "cloudco".into(),
            amount_paise: 60000,
            currency: "INR".into(),
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        // The in-process provider's futures are ready at once.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("in-process provider future was pending"),
        }
    }

    #[test]
    fn ids_are_deterministic_and_a_receipt_makes_one_order() {
        let p = InProcessProvider::new();
        let a = block_on(p.create_order(&request("auth-1"))).unwrap();
        let again = block_on(p.create_order(&request("auth-1"))).unwrap();
        let b = block_on(p.create_order(&request("auth-2"))).unwrap();
        assert_eq!(a.id, "order_test_000001");
        assert_eq!(again, a);
        assert_eq!(b.id, "order_test_000002");
        assert_eq!(p.orders().len(), 2);
    }

    #[test]
    fn capture_counts_towards_the_merchant() {
        let p = InProcessProvider::new();
        let a = block_on(p.create_order(&request("auth-1"))).unwrap();
        assert_eq!(p.captured_to("cloudco"), 0);
        assert!(p.capture(&a.id).unwrap().is_paid());
        assert_eq!(p.captured_to("cloudco"), 60000);
        assert_eq!(p.captured_paise(), 60000);
        assert_eq!(
            p.capture("order_nope"),
            Err(ProviderError::UnknownOrder("order_nope".into()))
        );
    }

    #[test]
    fn each_mode_answers_as_the_spec_says_and_times_counts_down() {
        let p = InProcessProvider::new();
        p.set_mode(Mode::Timeout, Some(1));
        assert_eq!(
            block_on(p.create_order(&request("a"))),
            Err(ProviderError::Timeout)
        );
        assert!(p.orders().is_empty(), "timeout: no order");
        assert_eq!(p.mode(), Mode::Ok, "times: 1 is used up");
        p.set_mode(Mode::Late, Some(1));
        assert_eq!(
            block_on(p.create_order(&request("b"))),
            Err(ProviderError::Timeout)
        );
        let late = p.order_for_receipt("b").expect("late: the order exists");
        assert_eq!(
            block_on(p.find_by_receipt("b")).unwrap().unwrap().order,
            late
        );
        p.set_mode(Mode::Reject, None);
        for r in ["c", "d"] {
            assert_eq!(
                block_on(p.create_order(&request(r))),
                Err(ProviderError::Rejected { status: 400 })
            );
        }
        p.set_mode(Mode::Unavailable, Some(2));
        assert_eq!(
            block_on(p.create_order(&request("e"))),
            Err(ProviderError::Unavailable { status: 503 })
        );
        assert_eq!(p.mode(), Mode::Unavailable);
        assert!(block_on(p.create_order(&request("f"))).is_err());
        assert!(block_on(p.create_order(&request("g"))).is_ok());
        let receipts: Vec<String> = p.orders().into_iter().map(|o| o.receipt).collect();
        assert_eq!(receipts, vec!["b", "g"]);
        assert_eq!(block_on(p.find_by_receipt("a")).unwrap(), None);
        assert_eq!(p.health().mode, "in-process");
    }

    #[test]
    fn a_mismatch_answers_another_order_in_one_field_and_creates_nothing() {
        let p = InProcessProvider::new();
        let asked = request("auth-2");
        // With no other receipt's order, an id mismatch has nothing to use.
        p.set_mode(Mode::Mismatch(MismatchField::Id), Some(1));
        assert_eq!(
            block_on(p.create_order(&asked)),
            Err(ProviderError::Rejected { status: 400 })
        );
        let first = block_on(p.create_order(&request("auth-1"))).unwrap();
        for (field, differs) in [
            (
                MismatchField::Amount,
                (|o: &ProviderOrder| o.amount_paise == 60001) as fn(&ProviderOrder) -> bool,
            ),
            (MismatchField::Currency, |o| o.currency == "USD"),
            (MismatchField::Merchant, |o| o.merchant == "not-cloudco"),
            (MismatchField::Receipt, |o| o.receipt == "not-auth-2"),
        ] {
            p.set_mode(Mode::Mismatch(field), Some(1));
            let answer = block_on(p.create_order(&asked)).unwrap();
            assert!(differs(&answer), "{field:?}: {answer:?}");
            assert!(answer.id.starts_with("order_mismatch_"), "{answer:?}");
            assert_eq!(p.mode(), Mode::Ok);
        }
        p.set_mode(Mode::Mismatch(MismatchField::Id), None);
        let answer = block_on(p.create_order(&asked)).unwrap();
        assert_eq!(answer.id, first.id);
        assert_eq!(
            (answer.receipt.as_str(), answer.amount_paise),
            ("auth-2", 60000)
        );
        // Nothing was created for the receipt asked for.
        assert_eq!(p.orders(), vec![first]);
        assert_eq!(p.order_for_receipt("auth-2"), None);
    }

    #[test]
    fn a_failed_attempt_keeps_the_order_payable() {
        let p = InProcessProvider::new();
        let o = block_on(p.create_order(&request("a"))).unwrap();
        p.fail_attempt(&o.id).unwrap();
        let snap = block_on(p.fetch_order(&o.id)).unwrap().unwrap();
        assert_eq!(snap.payments.len(), 1);
        assert!(!snap.order.is_paid());
        p.capture(&o.id).unwrap();
        let snap = block_on(p.fetch_order(&o.id)).unwrap().unwrap();
        assert_eq!(snap.captured().count(), 1);
        assert_eq!(block_on(p.fetch_order("order_nope")).unwrap(), None);
    }
}
