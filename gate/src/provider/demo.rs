//! The demo provider: the in-process provider's answers, its book kept in
//! Postgres (`demo_provider.orders`) so that a restart loses no order.
//!
//! Guarantees:
//! - `create_order` answers the order it holds for the receipt (an
//!   authority id) when it holds one, and otherwise creates one with a
//!   random id of Razorpay's shape (`order_` and 14 characters), so ids never
//!   repeat across restarts and a second create for one authority is the
//!   first order again.
//! - `fetch_order` and `find_by_receipt` read the same table; an order is
//!   answered with no payments: the demo takes no money itself, and a
//!   capture reaches the gate only as a signed webhook, as from any provider.
//! - It moves no real money. A database error is `Unavailable`, never a
//!   rejection: the order may exist, so the request waits for reconcile.

use std::future::Future;

use sqlx::PgPool;

use super::model::{OrderSnapshot, OrderStatus, ProviderOrder};
use super::{OrderRequest, PaymentProvider, ProviderError, ProviderHealth};

/// The demo provider over `pool` (migrated: `demo_provider.orders` exists).
#[derive(Debug, Clone)]
pub struct DemoProvider {
    pool: PgPool,
}

/// One row of `demo_provider.orders`.
#[derive(Debug, sqlx::FromRow)]
struct OrderRow {
    id: String,
    receipt: String,
    merchant: String,
    amount_paise: i64,
    currency: String,
    created_at: i64,
}

impl From<OrderRow> for ProviderOrder {
    fn from(row: OrderRow) -> Self {
        ProviderOrder {
            id: row.id,
            receipt: row.receipt,
            merchant: row.merchant,
            amount_paise: row.amount_paise,
            amount_paid_paise: 0,
            currency: row.currency,
            status: OrderStatus::Created,
            attempts: 0,
            created_at: row.created_at,
        }
    }
}

const COLUMNS: &str = "id, receipt, merchant, amount_paise, currency, created_at";

impl DemoProvider {
    pub fn new(pool: PgPool) -> Self {
        DemoProvider { pool }
    }

    async fn create(&self, request: &OrderRequest) -> Result<ProviderOrder, ProviderError> {
        let id = order_id()?;
        let created_at = chrono::Utc::now().timestamp();
        sqlx::query(
            "INSERT INTO demo_provider.orders (id, receipt, merchant, amount_paise, currency, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (receipt) DO NOTHING",
        )
        .bind(&id)
        .bind(&request.receipt)
        .bind(&request.merchant)
        .bind(request.amount_paise)
        .bind(&request.currency)
        .bind(created_at)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        self.by_receipt(&request.receipt)
            .await?
            .ok_or_else(|| ProviderError::Malformed("the demo order was not kept".to_owned()))
    }

    async fn by_receipt(&self, receipt: &str) -> Result<Option<ProviderOrder>, ProviderError> {
        let row: Option<OrderRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM demo_provider.orders WHERE receipt = $1"
        )))
        .bind(receipt)
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(row.map(ProviderOrder::from))
    }

    async fn by_id(&self, order_id: &str) -> Result<Option<ProviderOrder>, ProviderError> {
        let row: Option<OrderRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM demo_provider.orders WHERE id = $1"
        )))
        .bind(order_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(unavailable)?;
        Ok(row.map(ProviderOrder::from))
    }
}

impl DemoProvider {
    async fn snapshot_by_id(&self, order_id: &str) -> Result<Option<OrderSnapshot>, ProviderError> {
        Ok(self.by_id(order_id).await?.map(snapshot))
    }

    async fn snapshot_by_receipt(
        &self,
        receipt: &str,
    ) -> Result<Option<OrderSnapshot>, ProviderError> {
        Ok(self.by_receipt(receipt).await?.map(snapshot))
    }
}

/// `order_` and 14 random characters of Razorpay's alphabet.
fn order_id() -> Result<String, ProviderError> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 14];
    getrandom::fill(&mut bytes)
        .map_err(|e| ProviderError::Transport(format!("no random source for an order id: {e}")))?;
    let tail: String = bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect();
    Ok(format!("order_{tail}"))
}

fn unavailable(e: sqlx::Error) -> ProviderError {
    tracing::warn!("the demo provider's book could not be read or written: {e}");
    ProviderError::Unavailable { status: 503 }
}

fn snapshot(order: ProviderOrder) -> OrderSnapshot {
    OrderSnapshot {
        order,
        payments: Vec::new(),
    }
}

impl PaymentProvider for DemoProvider {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        self.create(request)
    }

    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.snapshot_by_id(order_id)
    }

    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.snapshot_by_receipt(receipt)
    }

    fn health(&self) -> ProviderHealth {
        ProviderHealth {
            mode: "demo",
            has_keys: false,
            keys_refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_have_razorpays_shape_and_differ() {
        let a = order_id().unwrap();
        let b = order_id().unwrap();
        assert_eq!(a.len(), "order_".len() + 14);
        assert!(a.starts_with("order_"));
        assert!(
            a["order_".len()..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
        );
        assert_ne!(a, b);
    }
}
