//! The payment provider, behind a trait.
//!
//! Guarantees: the gate talks to a provider only through [`PaymentProvider`].
//! [`InProcessProvider`] is deterministic (order ids count up from one, no
//! clock, no randomness) and, like Razorpay's `receipt`, returns the existing
//! order when the same receipt is sent twice, so a retry never makes a second
//! payable order. It serves tests and the triage tour; it moves no real money.

use std::future::Future;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// What the gate asks the provider to create: every field server-derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRequest {
    /// Unique per checkout authority; the provider deduplicates on it.
    pub receipt: String,
    pub merchant: String,
    pub amount_paise: i64,
    pub currency: String,
}

/// An order as the provider created it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderOrder {
    pub id: String,
    pub receipt: String,
    pub merchant: String,
    pub amount_paise: i64,
    pub currency: String,
    pub captured: bool,
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider did not answer in time")]
    Timeout,
    #[error("the provider refused the request: {0}")]
    Rejected(String),
    #[error("the provider could not be reached: {0}")]
    Transport(String),
    #[error("refusing a live-mode key: spendgate only talks to test mode")]
    LiveKeyRefused,
    #[error("no order {0} at the provider")]
    UnknownOrder(String),
}

/// A payment provider, as the gate sees it.
pub trait PaymentProvider: Send + Sync {
    /// Creates (or, for a receipt already seen, returns) one order.
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send;
}

/// A deterministic provider that lives in memory.
#[derive(Debug, Default)]
pub struct InProcessProvider {
    orders: Mutex<Vec<ProviderOrder>>,
}

impl InProcessProvider {
    pub fn new() -> Self {
        Self::default()
    }

    fn with_orders<T>(&self, f: impl FnOnce(&mut Vec<ProviderOrder>) -> T) -> T {
        let mut guard = match self.orders.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Every order created so far, in creation order.
    pub fn orders(&self) -> Vec<ProviderOrder> {
        self.with_orders(|o| o.clone())
    }

    /// Marks an order paid, as a customer completing checkout would.
    pub fn capture(&self, order_id: &str) -> Result<ProviderOrder, ProviderError> {
        self.with_orders(|orders| {
            let order = orders
                .iter_mut()
                .find(|o| o.id == order_id)
                .ok_or_else(|| ProviderError::UnknownOrder(order_id.to_string()))?;
            order.captured = true;
            Ok(order.clone())
        })
    }

    /// Total captured, per merchant.
    pub fn captured_to(&self, merchant: &str) -> i64 {
        self.with_orders(|orders| {
            orders
                .iter()
                .filter(|o| o.captured && o.merchant == merchant)
                .map(|o| o.amount_paise)
                .sum()
        })
    }
}

impl PaymentProvider for InProcessProvider {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        let result = self.with_orders(|orders| {
            if let Some(existing) = orders.iter().find(|o| o.receipt == request.receipt) {
                return Ok(existing.clone());
            }
            let order = ProviderOrder {
                id: format!("order_test_{:06}", orders.len() + 1),
                receipt: request.receipt.clone(),
                merchant: request.merchant.clone(),
                amount_paise: request.amount_paise,
                currency: request.currency.clone(),
                captured: false,
            };
            orders.push(order.clone());
            Ok(order)
        });
        std::future::ready(result)
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
        p.capture(&a.id).unwrap();
        assert_eq!(p.captured_to("cloudco"), 60000);
        assert_eq!(
            p.capture("order_nope"),
            Err(ProviderError::UnknownOrder("order_nope".into()))
        );
    }
}
