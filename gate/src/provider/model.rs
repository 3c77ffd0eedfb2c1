//! One model of a provider's orders and payments, shared by the in-process
//! provider and the fake Razorpay server of the contract tests.
//!
//! Guarantees: [`Book`] is a small state machine with Razorpay's order
//! lifecycle. An order is created `created`; a failed payment attempt makes it
//! `attempted` (attempts + 1) and leaves it payable; a captured payment makes
//! it `paid` (amount_paid = amount, amount_due = 0), after which it cannot be
//! paid again. Ids are deterministic (orders `order_test_000001` counting
//! up, payments [`payment_id`]), with no clock and no randomness: the caller
//! stamps `created_at`.

use serde::{Deserialize, Serialize};

use super::{OrderRequest, ProviderError};

/// An order's status, as Razorpay spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    Created,
    Attempted,
    Paid,
}

impl OrderStatus {
    /// Razorpay's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Created => "created",
            OrderStatus::Attempted => "attempted",
            OrderStatus::Paid => "paid",
        }
    }
}

/// An order as the provider holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderOrder {
    pub id: String,
    pub receipt: String,
    /// The payee (Razorpay carries it in the order's `notes`).
    pub merchant: String,
    pub amount_paise: i64,
    pub amount_paid_paise: i64,
    pub currency: String,
    pub status: OrderStatus,
    pub attempts: u32,
    /// Unix seconds.
    pub created_at: i64,
}

impl ProviderOrder {
    /// True once a payment for it was captured.
    pub fn is_paid(&self) -> bool {
        self.status == OrderStatus::Paid
    }

    /// What is still to be paid.
    pub fn amount_due_paise(&self) -> i64 {
        self.amount_paise - self.amount_paid_paise
    }
}

/// A payment's status, as Razorpay reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentStatus {
    Captured,
    Failed,
    /// The customer's bank authorised it; no money moves until the
    /// merchant captures it (Razorpay refunds it after 5 days otherwise).
    Authorized,
    /// Captured, then refunded (in whole or in part): the capture happened.
    Refunded,
}

impl PaymentStatus {
    /// Razorpay's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Captured => "captured",
            PaymentStatus::Failed => "failed",
            PaymentStatus::Authorized => "authorized",
            PaymentStatus::Refunded => "refunded",
        }
    }

    /// True for a payment whose money was captured, refunded since or not.
    pub fn was_captured(self) -> bool {
        matches!(self, PaymentStatus::Captured | PaymentStatus::Refunded)
    }
}

/// One payment attempt on an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    pub id: String,
    pub order_id: String,
    pub amount_paise: i64,
    pub currency: String,
    pub status: PaymentStatus,
    /// Unix seconds.
    pub created_at: i64,
}

/// An order with its payments: what reconcile settles a request by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSnapshot {
    pub order: ProviderOrder,
    pub payments: Vec<Payment>,
}

impl OrderSnapshot {
    /// The payments that were captured (refunded since or not).
    pub fn captured(&self) -> impl Iterator<Item = &Payment> {
        self.payments.iter().filter(|p| p.status.was_captured())
    }
}

/// The id of a payment: for a captured one, derived from its order alone
/// (an order is paid once, so every report of that capture names one
/// payment); for a failed one, from its order and attempt number. Razorpay's
/// shape: `pay_` and 14 characters.
pub fn payment_id(order_id: &str, status: PaymentStatus, attempt: u32) -> String {
    use sha2::{Digest, Sha256};
    // An authorized payment keeps its id when it is captured.
    let seed = match status {
        PaymentStatus::Captured | PaymentStatus::Authorized | PaymentStatus::Refunded => {
            format!("c:{order_id}")
        }
        PaymentStatus::Failed => format!("f:{order_id}:{attempt}"),
    };
    let digest = hex::encode(Sha256::digest(seed));
    format!("pay_{}", &digest[..14])
}

/// A provider's book of orders and payments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Book {
    orders: Vec<ProviderOrder>,
    payments: Vec<Payment>,
}

impl Book {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a new order for `request` (Razorpay does not deduplicate receipts).
    pub fn create(&mut self, request: &OrderRequest, created_at: i64) -> ProviderOrder {
        let order = ProviderOrder {
            id: format!("order_test_{:06}", self.orders.len() + 1),
            receipt: request.receipt.clone(),
            merchant: request.merchant.clone(),
            amount_paise: request.amount_paise,
            amount_paid_paise: 0,
            currency: request.currency.clone(),
            status: OrderStatus::Created,
            attempts: 0,
            created_at,
        };
        self.orders.push(order.clone());
        order
    }

    /// The order already created for `request.receipt`, or a new one.
    pub fn create_once(&mut self, request: &OrderRequest, created_at: i64) -> ProviderOrder {
        match self.orders.iter().find(|o| o.receipt == request.receipt) {
            Some(existing) => existing.clone(),
            None => self.create(request, created_at),
        }
    }

    /// Every order, in creation order.
    pub fn orders(&self) -> &[ProviderOrder] {
        &self.orders
    }

    /// Every payment, in the order they happened.
    pub fn payments(&self) -> &[Payment] {
        &self.payments
    }

    /// The order with this id and its payments.
    pub fn snapshot(&self, order_id: &str) -> Option<OrderSnapshot> {
        let order = self.orders.iter().find(|o| o.id == order_id)?.clone();
        let payments = self
            .payments
            .iter()
            .filter(|p| p.order_id == order_id)
            .cloned()
            .collect();
        Some(OrderSnapshot { order, payments })
    }

    /// Every order created for `receipt`, in creation order, with its payments.
    pub fn by_receipt(&self, receipt: &str) -> Vec<OrderSnapshot> {
        self.orders
            .iter()
            .filter(|o| o.receipt == receipt)
            .filter_map(|o| self.snapshot(&o.id))
            .collect()
    }

    fn payable(&mut self, order_id: &str) -> Result<&mut ProviderOrder, ProviderError> {
        let order = self
            .orders
            .iter_mut()
            .find(|o| o.id == order_id)
            .ok_or_else(|| ProviderError::UnknownOrder(order_id.to_owned()))?;
        if order.is_paid() {
            return Err(ProviderError::AlreadyPaid(order_id.to_owned()));
        }
        Ok(order)
    }

    fn pay(
        &mut self,
        order_id: &str,
        status: PaymentStatus,
        created_at: i64,
    ) -> Result<Payment, ProviderError> {
        let order = self.payable(order_id)?;
        order.attempts += 1;
        let id = payment_id(order_id, status, order.attempts);
        match status {
            PaymentStatus::Captured | PaymentStatus::Refunded => {
                order.status = OrderStatus::Paid;
                order.amount_paid_paise = order.amount_paise;
            }
            PaymentStatus::Failed | PaymentStatus::Authorized => {
                order.status = OrderStatus::Attempted
            }
        }
        let payment = Payment {
            id,
            order_id: order.id.clone(),
            amount_paise: order.amount_paise,
            currency: order.currency.clone(),
            status,
            created_at,
        };
        self.payments.push(payment.clone());
        Ok(payment)
    }

    /// A failed payment attempt: the order stays payable.
    pub fn fail_attempt(&mut self, order_id: &str, at: i64) -> Result<Payment, ProviderError> {
        self.pay(order_id, PaymentStatus::Failed, at)
    }

    /// The customer pays: a captured payment of the order's amount.
    pub fn capture(&mut self, order_id: &str, at: i64) -> Result<Payment, ProviderError> {
        self.pay(order_id, PaymentStatus::Captured, at)
    }

    /// The customer's bank authorises a payment of the order's amount; no
    /// money moves until [`Book::capture_authorized`].
    pub fn authorize(&mut self, order_id: &str, at: i64) -> Result<Payment, ProviderError> {
        if self
            .payments
            .iter()
            .any(|p| p.order_id == order_id && p.status == PaymentStatus::Authorized)
        {
            return Err(ProviderError::AlreadyPaid(order_id.to_owned()));
        }
        self.pay(order_id, PaymentStatus::Authorized, at)
    }

    /// The merchant captures an authorized payment, for exactly its amount
    /// and currency (Razorpay's `POST /v1/payments/{id}/capture`); anything
    /// else is refused as Razorpay refuses it (a 400).
    pub fn capture_authorized(
        &mut self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> Result<Payment, ProviderError> {
        let Some(payment) = self
            .payments
            .iter_mut()
            .find(|p| p.id == payment_id && p.status == PaymentStatus::Authorized)
        else {
            return Err(ProviderError::Rejected { status: 400 });
        };
        if payment.amount_paise != amount_paise || payment.currency != currency {
            return Err(ProviderError::Rejected { status: 400 });
        }
        payment.status = PaymentStatus::Captured;
        let captured = payment.clone();
        if let Some(order) = self.orders.iter_mut().find(|o| o.id == captured.order_id) {
            order.status = OrderStatus::Paid;
            order.amount_paid_paise = order.amount_paise;
        }
        Ok(captured)
    }

    /// The merchant refunds a captured payment in full: Razorpay then
    /// reports it `refunded`.
    pub fn refund(&mut self, payment_id: &str) -> Result<Payment, ProviderError> {
        let payment = self
            .payments
            .iter_mut()
            .find(|p| p.id == payment_id && p.status == PaymentStatus::Captured)
            .ok_or(ProviderError::Rejected { status: 400 })?;
        payment.status = PaymentStatus::Refunded;
        Ok(payment.clone())
    }

    /// Everything captured, in minor units (all currencies together),
    /// refunded since or not.
    pub fn captured_paise(&self) -> i64 {
        self.payments
            .iter()
            .filter(|p| p.status.was_captured())
            .map(|p| p.amount_paise)
            .sum()
    }

    /// Everything captured for one merchant.
    pub fn captured_to(&self, merchant: &str) -> i64 {
        self.payments
            .iter()
            .filter(|p| p.status.was_captured())
            .filter(|p| {
                self.orders
                    .iter()
                    .any(|o| o.id == p.order_id && o.merchant == merchant)
            })
            .map(|p| p.amount_paise)
            .sum()
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

    #[test]
    fn an_order_goes_created_attempted_paid_and_is_paid_once() {
        let mut book = Book::new();
        let o = book.create(&request("auth-1"), 1);
        assert_eq!(
            (o.id.as_str(), o.status, o.attempts),
            ("order_test_000001", OrderStatus::Created, 0)
        );
        let failed = book.fail_attempt(&o.id, 2).unwrap();
        assert_eq!(failed.status, PaymentStatus::Failed);
        let snap = book.snapshot(&o.id).unwrap();
        assert_eq!(
            (
                snap.order.status,
                snap.order.attempts,
                snap.order.amount_due_paise()
            ),
            (OrderStatus::Attempted, 1, 60000)
        );
        assert_eq!(book.captured_paise(), 0);
        let paid = book.capture(&o.id, 3).unwrap();
        assert_eq!(
            (paid.id.clone(), paid.amount_paise),
            (payment_id(&o.id, PaymentStatus::Captured, 2), 60000)
        );
        assert_eq!(paid.id, payment_id(&o.id, PaymentStatus::Captured, 9));
        assert_ne!(failed.id, payment_id(&o.id, PaymentStatus::Failed, 2));
        assert_ne!(failed.id, paid.id);
        let snap = book.snapshot(&o.id).unwrap();
        assert_eq!(
            (
                snap.order.status,
                snap.order.attempts,
                snap.order.amount_due_paise()
            ),
            (OrderStatus::Paid, 2, 0)
        );
        assert_eq!(snap.captured().count(), 1);
        assert_eq!(
            book.capture(&o.id, 4),
            Err(ProviderError::AlreadyPaid(o.id.clone()))
        );
        assert_eq!(
            book.fail_attempt("order_nope", 4),
            Err(ProviderError::UnknownOrder("order_nope".into()))
        );
        assert_eq!(book.captured_paise(), 60000);
        assert_eq!(book.captured_to("cloudco"), 60000);
        assert_eq!(book.captured_to("snackshop"), 0);
    }

    #[test]
    fn receipts_find_their_orders_and_create_once_deduplicates() {
        let mut book = Book::new();
        let a = book.create_once(&request("auth-1"), 1);
        let again = book.create_once(&request("auth-1"), 2);
        let b = book.create(&request("auth-2"), 3);
        assert_eq!(again, a);
        assert_eq!(b.id, "order_test_000002");
        assert_eq!(book.by_receipt("auth-1").len(), 1);
        assert_eq!(book.by_receipt("auth-1")[0].order, a);
        assert!(book.by_receipt("auth-3").is_empty());
        let twice = book.create(&request("auth-2"), 4);
        assert_eq!(book.by_receipt("auth-2").len(), 2);
        assert_eq!(book.by_receipt("auth-2")[1].order, twice);
    }
}
