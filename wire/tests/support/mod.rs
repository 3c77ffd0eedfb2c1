//! The service on a real loopback socket, over a fresh database seeded with
//! the standard world (a manual clock at the world's "now"), and a reqwest
//! client. Every test gets its own database and its own port.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gate::db::FreshDatabase;
use gate::provider::{
    InProcessProvider, OrderRequest, PaymentProvider, ProviderError, ProviderOrder,
};
use gate::service::{Gate, ManualClock, ProviderEvent, sign_webhook};
use scenarios::generate::standard_world;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wire::WireConfig;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// 40 bytes: long enough for any minimum the gate sets on its secret.
pub const SECRET: &[u8] = b"whsec_wire_tests_0123456789abcdef01234567";

/// The one place the tests construct a gate.
pub fn build_gate<P: PaymentProvider>(
    pool: PgPool,
    provider: P,
    clock: Arc<ManualClock>,
) -> Gate<P> {
    Gate::new(pool, provider, SECRET, clock).expect("the test secret is long enough")
}

/// A provider that takes `delay` per order and counts how many calls overlap.
#[derive(Debug, Default)]
pub struct SlowProvider {
    pub inner: InProcessProvider,
    pub delay: Duration,
    in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
}

impl SlowProvider {
    pub fn new(delay: Duration) -> Self {
        SlowProvider {
            delay,
            ..Default::default()
        }
    }
}

impl PaymentProvider for SlowProvider {
    async fn create_order(&self, request: &OrderRequest) -> Result<ProviderOrder, ProviderError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.inner.create_order(request).await
    }

    async fn fetch_order(
        &self,
        order_id: &str,
    ) -> Result<Option<gate::provider::OrderSnapshot>, ProviderError> {
        self.inner.fetch_order(order_id).await
    }

    async fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> Result<Option<gate::provider::OrderSnapshot>, ProviderError> {
        self.inner.find_by_receipt(receipt).await
    }

    fn health(&self) -> gate::provider::ProviderHealth {
        self.inner.health()
    }
}

/// A running service.
pub struct Served<P = InProcessProvider> {
    pub db: FreshDatabase,
    pub gate: Arc<Gate<P>>,
    pub clock: Arc<ManualClock>,
    pub base: String,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// The standard world behind the service, or `None` when the database tests are skipped.
pub async fn served() -> Res<Option<Served>> {
    served_with(InProcessProvider::new(), WireConfig::default()).await
}

pub async fn served_with<P: PaymentProvider + 'static>(
    provider: P,
    config: WireConfig,
) -> Res<Option<Served<P>>> {
    let Some(db) = gate::db::fresh_test_database().await? else {
        return Ok(None);
    };
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let gate = build_gate(db.pool().clone(), provider, clock.clone());
    gate.seed(&standard_world().seed()).await?;
    let gate = Arc::new(gate);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(wire::serve(listener, gate.clone(), config, async move {
        let _ = rx.await;
    }));
    Ok(Some(Served {
        db,
        gate,
        clock,
        base,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
        shutdown: Some(tx),
        task: Some(task),
    }))
}

impl<P: PaymentProvider + 'static> Served<P> {
    pub fn pool(&self) -> &PgPool {
        self.gate.pool()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A new key for `actor` of `tenant`.
    pub async fn key(&self, tenant: &str, actor: &str) -> Res<String> {
        Ok(self
            .gate
            .issue_key(tenant, actor, self.gate.now())
            .await?
            .token)
    }

    /// POST `body` as JSON with `key` (if any).
    pub async fn post(&self, path: &str, key: Option<&str>, body: &str) -> Res<reqwest::Response> {
        let mut req = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        Ok(req.send().await?)
    }

    pub async fn put(&self, path: &str, key: Option<&str>, body: &str) -> Res<reqwest::Response> {
        let mut req = self
            .client
            .put(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        Ok(req.send().await?)
    }

    pub async fn get(&self, path: &str, key: Option<&str>) -> Res<reqwest::Response> {
        let mut req = self.client.get(self.url(path));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        Ok(req.send().await?)
    }

    /// Row counts of every table the gate writes, plus the ledger.
    pub async fn snapshot(&self) -> Res<Vec<(String, i64)>> {
        // The ledger as the sequencer leaves it: every committed entry integrated.
        self.gate.integrate().await?;
        let mut out = Vec::new();
        for table in [
            "payment_requests",
            "approvals",
            "checkout_authorities",
            "provider_orders",
            "provider_events",
            "delegations",
            "policy_versions",
            "daily_spend",
            "ledger_entries",
            "approval_notes",
            "log_checkpoints",
            "request_bodies",
            "provider_event_bodies",
        ] {
            let n: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                    .fetch_one(self.pool())
                    .await?;
            out.push((table.to_owned(), n));
        }
        let prices: i64 =
            sqlx::query_scalar("SELECT COALESCE(sum(price_paise), 0)::bigint FROM catalog_items")
                .fetch_one(self.pool())
                .await?;
        out.push(("catalog_items.price_sum".to_owned(), prices));
        let revoked: i64 =
            sqlx::query_scalar("SELECT count(*) FROM delegations WHERE revoked_at IS NOT NULL")
                .fetch_one(self.pool())
                .await?;
        out.push(("delegations.revoked".to_owned(), revoked));
        Ok(out)
    }

    /// A signed provider event for `order` at the gate's clock.
    pub fn event(&self, event_id: &str, name: &str, order: &str, amount: i64) -> (Vec<u8>, String) {
        let body = ProviderEvent {
            id: event_id.into(),
            event: name.into(),
            created_at: self.gate.now(),
            order_id: order.into(),
            amount_paise: amount,
            currency: "INR".into(),
        }
        .to_body();
        let signature = sign_webhook(SECRET, &body);
        (body, signature)
    }

    /// Asks the service to stop; returns how `serve` ended.
    pub async fn stop(&mut self) -> Res<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await??;
        }
        Ok(())
    }

    pub async fn drop(mut self) -> TestResult {
        self.stop().await?;
        let Served { db, gate, .. } = self;
        drop(gate);
        db.drop().await?;
        Ok(())
    }
}

/// The JSON body of a response, with its status.
pub async fn answer(r: reqwest::Response) -> Res<(u16, serde_json::Value)> {
    let status = r.status().as_u16();
    let text = r.text().await?;
    let value = serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text:?}"))?;
    Ok((status, value))
}

/// A proposal body.
pub fn proposal(sku: &str, quantity: u32) -> String {
    serde_json::json!({"sku": sku, "quantity": quantity, "purpose": "team credits"}).to_string()
}
