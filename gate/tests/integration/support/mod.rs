//! Shared helpers of the database-backed tests: a fresh migrated database, a
//! gate over it seeded with the standard world on a manual clock, and small
//! builders. Every test gets its own database (`gate::db::fresh_test_database`),
//! so tests never see each other's rows.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use gate::db::FreshDatabase;
use gate::provider::InProcessProvider;
use gate::service::standard;
use gate::service::{
    Gate, Grant, ManualClock, Outcome, ProposeOutcome, ProviderEvent, ServiceError, sign_webhook,
};
use gate::{Decision, Reason};
use sqlx::PgPool;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

pub const SECRET: &[u8] = b"whsec_test_spendgate_0123456789abcdef";

/// A standard-world gate on its own database.
pub struct World {
    pub db: FreshDatabase,
    pub gate: Arc<Gate<InProcessProvider>>,
    pub clock: Arc<ManualClock>,
}

impl World {
    /// The gate's own pool: the application role.
    pub fn pool(&self) -> &PgPool {
        self.gate.pool()
    }

    /// The gate's pool once every committed queued ledger entry is
    /// integrated (`Gate::integrate`, the sequencer's step): what a test
    /// reads `ledger_entries` or `ledger_head` through.
    pub async fn ledger(&self) -> Result<&PgPool, ServiceError> {
        self.gate.integrate().await?;
        Ok(self.gate.pool())
    }

    /// The onboarding role's pool, for a statement only onboarding may make
    /// (a tenant, a person, an agent, a merchant, a key, a root delegation).
    pub fn onboard(&self) -> &PgPool {
        self.gate.onboarding_pool()
    }

    /// The owner's pool, for a guard violated by a statement the application
    /// role may not even issue (it would be refused for want of privilege
    /// before the guard is reached).
    pub fn owner(&self) -> &PgPool {
        self.db.owner_pool()
    }

    /// acme's buyer-agent proposes `quantity` × `sku` (purpose "team
    /// credits", no idempotency key): the proposal most tests start from.
    pub async fn propose(&self, sku: &str, quantity: u32) -> Result<ProposeOutcome, ServiceError> {
        self.propose_as("buyer-agent", sku, quantity).await
    }

    /// As [`World::propose`], by another agent of acme.
    pub async fn propose_as(
        &self,
        agent: &str,
        sku: &str,
        quantity: u32,
    ) -> Result<ProposeOutcome, ServiceError> {
        self.gate
            .propose("acme", agent, &body(sku, quantity), None)
            .await
    }

    pub async fn drop(self) -> TestResult {
        let World { db, gate, .. } = self;
        drop(gate);
        sqlx::query("SELECT spendgate_row_security(false)")
            .execute(db.owner_pool())
            .await?;
        db.drop().await?;
        Ok(())
    }
}

/// A fresh database, or `None` when the test is skipped (`SPENDGATE_SKIP_DB=1`).
pub async fn fresh() -> Result<Option<FreshDatabase>, gate::db::DbError> {
    gate::db::fresh_test_database().await
}

/// A pool of `size` connections to `db` as the application role (the default
/// pool has 10), built as every gate pool is (`gate::db::pool_options`).
pub async fn pool_of(db: &FreshDatabase, size: u32) -> Result<PgPool, sqlx::Error> {
    gate::db::pool_options(size)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(db.connect_options().clone())
        .await
}

/// The standard world, seeded, with a pool of `pool_size` connections.
pub async fn world_with_pool(
    pool_size: u32,
) -> Result<Option<World>, Box<dyn std::error::Error + Send + Sync>> {
    world_configured(pool_size, |gate| gate).await
}

/// As [`world_with_pool`], the gate built by `configure` (a builder call
/// such as `with_turns_per_tenant`) before it is seeded.
pub async fn world_configured(
    pool_size: u32,
    configure: impl FnOnce(Gate<InProcessProvider>) -> Gate<InProcessProvider>,
) -> Result<Option<World>, Box<dyn std::error::Error + Send + Sync>> {
    let Some(db) = fresh().await? else {
        return Ok(None);
    };
    let pool = pool_of(&db, pool_size).await?;
    let clock = Arc::new(ManualClock::new(standard::now()));
    let gate = configure(Gate::new(
        pool,
        InProcessProvider::new(),
        SECRET,
        clock.clone(),
    )?);
    gate.seed(&standard::seed()).await?;
    // The gate's tests run with row-level security enforced
    // (`spendgate_row_security`); `World::drop` turns it off again, so the
    // database is handed back with the schema it was made with.
    sqlx::query("SELECT spendgate_row_security(true)")
        .execute(db.owner_pool())
        .await?;
    Ok(Some(World {
        db,
        gate: Arc::new(gate),
        clock,
    }))
}

/// The standard world, seeded.
pub async fn world() -> Result<Option<World>, Box<dyn std::error::Error + Send + Sync>> {
    world_with_pool(10).await
}

/// The ceremony of a database test, once: a fresh standard world, `test`
/// run on it, and its database dropped afterwards whatever `test` returned
/// (a panic leaves it, as any test's). `Ok` without running `test` when the
/// test is skipped (`SPENDGATE_SKIP_DB=1` and no `DATABASE_URL`); without
/// either, the fresh database's error says how to configure one.
pub async fn on_world(test: impl AsyncFnOnce(&World) -> TestResult) -> TestResult {
    on_world_with_pool(10, test).await
}

/// The same ceremony for a test of the schema alone: a fresh migrated
/// database (nothing seeded), `test` run on it, the database dropped after.
pub async fn on_fresh(test: impl AsyncFnOnce(&FreshDatabase) -> TestResult) -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let result = test(&db).await;
    let dropped = db.drop().await;
    result.and(dropped.map_err(Into::into))
}

/// As [`on_world`], with a pool of `pool_size` connections.
pub async fn on_world_with_pool(
    pool_size: u32,
    test: impl AsyncFnOnce(&World) -> TestResult,
) -> TestResult {
    let Some(w) = world_with_pool(pool_size).await? else {
        return Ok(());
    };
    let result = test(&w).await;
    let dropped = w.drop().await;
    result.and(dropped)
}

/// A proposal body as an agent would send it.
pub fn body(sku: &str, quantity: u32) -> Vec<u8> {
    serde_json::json!({"sku": sku, "quantity": quantity, "purpose": "team credits"})
        .to_string()
        .into_bytes()
}

pub fn deny(reason: Reason) -> Decision {
    Decision::Deny(reason)
}

/// The request id of an outcome that must have one.
pub fn request_id(outcome: &ProposeOutcome) -> String {
    outcome
        .request_id
        .clone()
        .unwrap_or_else(|| panic!("no request id in {outcome:?}"))
}

/// The id of an outcome that must have one.
pub fn id(outcome: &Outcome) -> String {
    outcome
        .id
        .clone()
        .unwrap_or_else(|| panic!("no id in {outcome:?}"))
}

/// A signed provider event for `order` at the gate's clock.
pub fn event(
    world: &World,
    event_id: &str,
    name: &str,
    order: &str,
    amount: i64,
) -> (Vec<u8>, String) {
    let body = ProviderEvent {
        id: event_id.into(),
        event: name.into(),
        created_at: world.gate.now(),
        order_id: order.into(),
        amount_paise: amount,
        currency: "INR".into(),
    }
    .to_body();
    let signature = sign_webhook(SECRET, &body);
    (body, signature)
}

/// Proposes, checks out and pays CLOUD-STARTER x1 for buyer-agent; returns
/// (request id, authority id, provider order id).
pub async fn paid_order(
    world: &World,
) -> Result<(String, String, String), Box<dyn std::error::Error + Send + Sync>> {
    let p = world.propose("CLOUD-STARTER", 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    let request = request_id(&p);
    let c = world
        .gate
        .checkout("acme", &request, "finance-lead")
        .await?;
    assert!(c.is_ok(), "{c:?}");
    let authority = id(&c);
    let paid = world.gate.pay("acme", &authority, "finance-lead").await?;
    assert!(paid.is_ok(), "{paid:?}");
    Ok((request, authority, id(&paid)))
}

/// A paid order ([`paid_order`]) captured by the signed event `event_id`:
/// (request id, the event's body, its signature header).
pub async fn captured_order(
    world: &World,
    event_id: &str,
) -> Result<(String, Vec<u8>, String), Box<dyn std::error::Error + Send + Sync>> {
    let (request, _authority, order) = paid_order(world).await?;
    let (body, signature) = event(world, event_id, "payment.captured", &order, 60_000);
    let applied = world
        .gate
        .webhook(&body, Some(&signature), Some(event_id))
        .await?;
    assert!(applied.is_ok(), "{applied:?}");
    Ok((request, body, signature))
}

/// Switches the counter triggers off, as the owner: for a test of another
/// guard that writes a counter or a request's reservation with raw SQL and
/// not what it counts (the counters' own guards are `db_counters`').
pub async fn without_counter_triggers(w: &World) -> Result<(), sqlx::Error> {
    exec(
        w.owner(),
        "ALTER TABLE daily_spend DISABLE TRIGGER daily_spend_counts_requests; \
         ALTER TABLE payment_requests DISABLE TRIGGER daily_spend_counts_requests; \
         ALTER TABLE delegations DISABLE TRIGGER delegation_spend_counts_requests; \
         ALTER TABLE payment_requests DISABLE TRIGGER delegation_spend_counts_requests; \
         ALTER TABLE provider_payments DISABLE TRIGGER provider_payment_carried_by_event",
    )
    .await
    .map(|_| ())
}

/// Runs `sql` (trusted test text) on `pool`: the rows it touched.
pub async fn exec(pool: &PgPool, sql: &str) -> Result<u64, sqlx::Error> {
    sqlx::Executor::execute(pool, sqlx::AssertSqlSafe(sql))
        .await
        .map(|r| r.rows_affected())
}

/// Runs `sql` on `pool`; it must be refused by the named constraint or trigger.
pub async fn assert_sql_refused_by(pool: &PgPool, sql: &str, guard: &str) {
    assert_refused_by(
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await,
        guard,
    );
}

/// Asserts that a statement was refused by the named constraint or trigger.
pub fn assert_refused_by<T: std::fmt::Debug>(result: Result<T, sqlx::Error>, guard: &str) {
    match result {
        Ok(v) => panic!("expected {guard} to refuse, but the statement succeeded: {v:?}"),
        Err(e) => {
            let named = e
                .as_database_error()
                .and_then(|d| d.constraint())
                .map(str::to_owned);
            let message = e.to_string();
            assert!(
                named.as_deref() == Some(guard) || message.contains(guard),
                "expected {guard} to refuse, got constraint {named:?}: {message}"
            );
        }
    }
}

/// A grant as a world file or a scenario's `grant` step writes it, made
/// through the gate's call: `from` a delegation id (`d-…`) is a hop below
/// it made by the tenant's operator (acme's finance-lead, globex's
/// globex-finance); anything else is a root hop made by `from` itself.
pub trait GrantAsWritten {
    async fn grant_as_written(&self, tenant: &str, g: &Grant) -> Result<Outcome, ServiceError>;
}

impl GrantAsWritten for Gate<InProcessProvider> {
    async fn grant_as_written(&self, tenant: &str, g: &Grant) -> Result<Outcome, ServiceError> {
        if g.from.starts_with("d-") {
            let operator = if tenant == "globex" {
                "globex-finance"
            } else {
                "finance-lead"
            };
            self.grant(tenant, operator, Some(&g.from), &g.terms())
                .await
        } else {
            self.grant(tenant, &g.from, None, &g.terms()).await
        }
    }
}

/// What the gate asks a provider for under `receipt`: CLOUD-STARTER x1's
/// terms (60,000 INR, from cloudco).
pub fn order_request(receipt: &str) -> gate::provider::OrderRequest {
    gate::provider::OrderRequest {
        receipt: receipt.to_owned(),
        merchant: "cloudco".to_owned(),
        amount_paise: 60_000,
        currency: "INR".to_owned(),
    }
}

/// Runs `sql` as the owner with the ledger's append-only trigger off (and
/// on again after): an owner editing its own ledger. Rows affected.
pub async fn edit_ledger_as_owner(w: &World, sql: &str) -> Result<u64, sqlx::Error> {
    exec(
        w.owner(),
        &format!(
            "ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only; {sql}; \
             ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only"
        ),
    )
    .await
}

/// The owner rewrites the purpose in every one of acme's proposal entries.
pub async fn rewrite_acme_proposals(w: &World) -> Result<u64, sqlx::Error> {
    edit_ledger_as_owner(
        w,
        "UPDATE ledger_entries SET entry = replace(entry, 'team credits', 'team creditz') \
          WHERE tenant_id = 'acme' AND kind = 'proposal'",
    )
    .await
}

/// How many of this database's backends wait for a lock.
pub async fn lock_waiters(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
          WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(pool)
    .await
}

/// Until `n` of this database's backends wait for a lock (at most 30 s).
pub async fn until_waiting(pool: &PgPool, n: i64) -> TestResult {
    for _ in 0..3000 {
        if lock_waiters(pool).await? >= n {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("{n} backends never waited for a lock").into())
}

/// A Postgres URL where no server listens (a socket folder that does not exist).
pub const DOWN_DATABASE_URL: &str =
    "postgresql://postgres@%2Ftmp%2Fspendgate-no-such-server:5432/postgres";

/// A standard gate over [`DOWN_DATABASE_URL`], its pool waiting at most 2 s
/// for a connection.
pub fn gate_over_a_database_that_is_down()
-> Result<Gate<InProcessProvider>, Box<dyn std::error::Error + Send + Sync>> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy(DOWN_DATABASE_URL)?;
    Ok(Gate::new(
        pool,
        InProcessProvider::new(),
        SECRET,
        Arc::new(ManualClock::new(standard::now())),
    )?)
}
