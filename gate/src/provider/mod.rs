//! The payment provider, behind a trait.
//!
//! Guarantees: the gate talks to a provider only through [`PaymentProvider`]:
//! create one order, fetch an order by id, find the order created for a
//! receipt (with its payments) so that after a timeout the order can be found
//! again, and capture an authorized payment for the order's own amount and
//! currency (manual capture). Every failure is a typed [`ProviderError`]; nothing the provider
//! says in an error body travels further than the log. Orders and payments
//! follow ONE model ([`model`]): Razorpay's order lifecycle (created →
//! attempted → paid) and payments that are captured or failed. The
//! deterministic [`InProcessProvider`] keeps its book in that model, and so
//! does the fake Razorpay server of the adapter's contract tests, so the
//! corpus and the adapter tests agree on what an order is.
//!
//! Three implementations: [`InProcessProvider`] (tests, triage, the corpus's
//! simulated provider with its failure modes; it moves no real money),
//! [`DemoProvider`] (the same answers, its orders kept in Postgres so a
//! served demo survives a restart) and [`RazorpayProvider`] (reqwest,
//! Razorpay Test Mode only: a `rzp_live_` key is refused before any request).

use std::future::Future;

use serde::{Deserialize, Serialize};

mod demo;
mod in_process;
pub mod model;
mod razorpay;

pub use demo::DemoProvider;
pub use in_process::{InProcessProvider, MismatchField, Mode};
pub use model::{Book, OrderSnapshot, OrderStatus, Payment, PaymentStatus, ProviderOrder};
pub use razorpay::{
    ENV_KEY_ID, ENV_KEY_SECRET, ENV_WEBHOOK_SECRET, RAZORPAY_API, RazorpayConfig, RazorpayKeys,
    RazorpayProvider,
};

/// Razorpay documents at most 40 characters for an order's receipt.
pub const MAX_RECEIPT_CHARS: usize = 40;

/// What the gate asks the provider to create: every field server-derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRequest {
    /// The checkout authority's id; the order can be found again by it.
    pub receipt: String,
    pub merchant: String,
    pub amount_paise: i64,
    pub currency: String,
}

/// Which provider a gate talks to, and whether it holds keys: what health
/// reports. Never a key or a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderHealth {
    /// `in-process` or `test` (Razorpay Test Mode).
    pub mode: &'static str,
    /// Whether API keys are configured.
    pub has_keys: bool,
    /// True while the provider's last answer refused the keys (a 401): a
    /// configuration error no retry mends, which health reports as degraded.
    pub keys_refused: bool,
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No answer in time: the order may or may not exist.
    #[error("the provider did not answer in time")]
    Timeout,
    /// A 4xx: the provider refused the request. Its error body goes to the log only.
    #[error("the provider refused the request (HTTP {status})")]
    Rejected { status: u16 },
    /// A 5xx, or a 429 (too many requests): the provider failed or asked
    /// the caller to slow down. The order may or may not exist.
    #[error("the provider is unavailable (HTTP {status})")]
    Unavailable { status: u16 },
    /// A 401: the provider refused the API keys. A configuration error (no
    /// retry mends it): the request waits, an operator must act.
    #[error(
        "the provider refused the API keys (HTTP 401): check RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET"
    )]
    KeysRefused,
    /// The connection failed before an answer.
    #[error("the provider could not be reached: {0}")]
    Transport(String),
    /// The provider answered something that is not the documented shape.
    #[error("the provider's answer did not parse: {0}")]
    Malformed(String),
    /// The provider answered with an order that is not the one asked for
    /// (receipt, merchant, amount or currency differ).
    #[error("the provider answered order {order_id}, which does not match the request")]
    Mismatch { order_id: String },
    /// A live-mode key was given: spendgate talks only to test mode.
    #[error(
        "refusing a live-mode key: spendgate only talks to Razorpay test mode (rzp_test_ keys)"
    )]
    LiveKeyRefused,
    /// A key is missing or not a Razorpay test key.
    #[error("the provider is not configured: {0}")]
    NotConfigured(String),
    /// No such order at the provider.
    #[error("no order {0} at the provider")]
    UnknownOrder(String),
    /// The order cannot be paid (already paid).
    #[error("order {0} cannot be paid again")]
    AlreadyPaid(String),
}

impl ProviderError {
    /// True when the provider definitely did not create the order: the gate
    /// may fail the request and release its budget. Every other failure may
    /// hide an order that exists, so the request waits for reconcile.
    pub fn is_definite_refusal(&self) -> bool {
        matches!(
            self,
            ProviderError::Rejected { .. }
                | ProviderError::Mismatch { .. }
                | ProviderError::LiveKeyRefused
                | ProviderError::NotConfigured(_)
        )
    }
}

/// A payment provider, as the gate sees it.
pub trait PaymentProvider: Send + Sync {
    /// Creates one order for `request`.
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send;

    /// The order with this id and its payments, or `None` when the provider has none.
    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send;

    /// The order created for `receipt` and its payments, or `None`.
    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send;

    /// Captures the authorized payment `payment_id` for exactly
    /// `amount_paise` in `currency` (the order's own), returning the payment
    /// as the provider now holds it.
    /// A provider that cannot capture refuses, and the payment stays
    /// authorized (the provider refunds it in time).
    fn capture_authorized(
        &self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> impl Future<Output = Result<Payment, ProviderError>> + Send {
        let _ = (payment_id, amount_paise, currency);
        std::future::ready(Err(ProviderError::NotConfigured(
            "this provider does not capture authorized payments".into(),
        )))
    }

    /// Which provider this is and whether it holds keys (never the keys).
    fn health(&self) -> ProviderHealth;
}
