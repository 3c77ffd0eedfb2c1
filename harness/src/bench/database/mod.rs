//! The database-backed gate as a scenario driver: an empty migrated
//! database per scenario (from [`DatabasePool`]: made once, emptied between
//! scenarios), the world seeded into it, every step sent through the gate's
//! own operations exactly as a caller would.
//!
//! Guarantees: nothing is decided here. A step is translated to one call of
//! `gate::service::Gate` for the step's tenant (the world's first when it
//! names none; a webhook is built and signed the way the provider does;
//! `replay` resends the named step's request byte for byte; `concurrent`
//! runs its copies as simultaneous tasks), and the outcome is what the gate
//! returned. A scenario's database goes back to the pool when its run ended
//! (emptied before the next scenario gets it), and is dropped when the run
//! failed as an engine.
//!
//! A step the gate cannot answer stops its scenario, and only its scenario:
//! an error of the gate (`ServiceError`), a panic anywhere in the run (the
//! run is its own task, so a panic is a `JoinError`, never the end of the
//! bench) and a run longer than [`SCENARIO_TIMEOUT`] are recorded as an
//! engine error with their text. A clock move chrono cannot represent, and
//! a `provider_capture` of a step that produced no provider order, are clean
//! failures of the scenario, not engine errors. All clock arithmetic is
//! checked.
//!
//! The provider is the gate's own [`InProcessProvider`], one per scenario:
//! `provider` sets how it answers the next `pay` calls, `provider_capture`
//! is the customer paying at the provider, and `reconcile` runs
//! `Gate::reconcile` (for the step's tenant when it names one, else for
//! all). A `pay` the provider answered too late still names its order: the
//! one the provider holds for that authority's receipt, so later steps can
//! capture it and send its webhooks. A signed capture of a real order is
//! the customer paying at the provider first (when its amount and currency
//! are the order's), and a capture of an order the gate never heard back
//! about carries the provider's order entity (with its receipt), as the
//! provider's own event does.
//!
//! Layout: this file holds the engine (a leased database per run, its time
//! limit, its engine errors); [`driver`] turns steps into calls, [`call`]
//! makes one call on the gate, [`observe`] reads what the run left, and
//! [`http`] is the same driver over the wire.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use anyhow::{Context, Result, anyhow, bail};
use chrono::TimeDelta;
use gate::provider::{InProcessProvider, Mode, ProviderError};
use gate::service::webhook::razorpay_envelope;
use gate::service::{Gate, ManualClock, ProviderEvent, ServiceError, sign_webhook};
use gate::{Decision, Reason};
use scenarios::{
    DecisionKind, MandateSignature, ProviderMode, Scenario, Signature, Step, Verb, World,
};
use sqlx::PgPool;
use tokio::task::JoinSet;

use super::judge::Run;
use super::observed::{LoginOutcome, ObservedState, StepOutcome};
use super::pool::{DatabasePool, RunEnd};
use call::*;
use driver::*;
use observe::*;

// The HTTP engine is this engine's child: it shares the driver and changes the transport.
mod call;
mod driver;
pub mod http;
mod observe;

/// The longest one scenario may run on the database engine.
pub const SCENARIO_TIMEOUT: StdDuration = StdDuration::from_secs(120);

/// The secret the in-process provider signs webhooks with.
const WEBHOOK_SECRET: &[u8] = b"spendgate-bench-webhook-secret-0123456789";
/// A secret nobody configured: what a forger signs with.
const FORGED_SECRET: &[u8] = b"not-the-webhook-secret";

/// Fault injection for the test that proves one scenario's panic costs only
/// that scenario: when set to a scenario id, that scenario's run panics.
pub const PANIC_ENV: &str = "SPENDGATE_BENCH_PANIC_SCENARIO";

/// A connection to the server that hands out one database per scenario.
#[derive(Debug, Clone)]
pub struct DatabaseEngine {
    pool: Arc<DatabasePool>,
    timeout: StdDuration,
}

impl DatabaseEngine {
    /// Uses the server `admin_url` names.
    pub async fn start(admin_url: &str) -> Result<Self> {
        let pool = Arc::new(DatabasePool::new(admin_url));
        // Fail now, clearly, if the server is down or the migrations do not
        // apply; the probe is the pool's first database.
        let probe = pool.lease().await?;
        pool.give_back(probe, RunEnd::Clean).await;
        Ok(DatabaseEngine {
            pool,
            timeout: SCENARIO_TIMEOUT,
        })
    }

    /// Drops the databases the engine holds (a later run makes new ones).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The same engine with another per-scenario time limit.
    pub fn with_timeout(mut self, timeout: StdDuration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs one scenario in its own database, within the engine's time
    /// limit ([`SCENARIO_TIMEOUT`] unless set).
    pub async fn run(&self, scenario: &Scenario, world: &World) -> Run {
        self.run_within(scenario, world, self.timeout).await
    }

    /// Runs one scenario in its own database, as its own task, within
    /// `limit`: a panic or a timeout is this scenario's engine error.
    pub async fn run_within(&self, scenario: &Scenario, world: &World, limit: StdDuration) -> Run {
        let (scenario, world) = (scenario.clone(), world.clone());
        in_leased_database(
            &self.pool,
            limit,
            move |pool| run_in(pool, scenario, world),
            |run| run,
            |run| run,
        )
        .await
    }
}

/// Runs `task` on a database leased from `pool`, as its own task, within
/// `limit`: a panic, a cancellation or a timeout is the run's engine error
/// (`wrap` puts a [`Run`] into the engine's own result; `run_of` reads it
/// back). The database goes back to the pool, emptied for the next scenario,
/// unless the run was an engine error; then it is dropped.
pub(super) async fn in_leased_database<T, Fut>(
    pool: &DatabasePool,
    limit: StdDuration,
    task: impl FnOnce(PgPool) -> Fut,
    wrap: impl Fn(Run) -> T,
    run_of: impl Fn(&T) -> &Run,
) -> T
where
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let db = match pool.lease().await {
        Ok(db) => db,
        Err(e) => {
            return wrap(Run {
                error: Some(format!("could not create the scenario's database: {e}")),
                ..Run::default()
            });
        }
    };
    let task = tokio::spawn(task(db.pool().clone()));
    let abort = task.abort_handle();
    let out = match tokio::time::timeout(limit, task).await {
        Ok(Ok(out)) => out,
        Ok(Err(joined)) => wrap(Run::engine_error(if joined.is_panic() {
            format!("the run panicked: {}", panic_text(joined.into_panic()))
        } else {
            format!("the run was cancelled: {joined}")
        })),
        Err(_) => {
            abort.abort();
            wrap(Run::engine_error(format!(
                "the run did not finish within {} seconds",
                limit.as_secs()
            )))
        }
    };
    let end = if run_of(&out).engine_error {
        RunEnd::Broken
    } else {
        RunEnd::Clean
    };
    pool.give_back(db, end).await;
    out
}

/// The message a panic carried.
pub fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_string(),
            Err(_) => "(a panic with no message)".into(),
        },
    }
}

/// Whether an error stopping a step came from the gate (an engine error).
fn from_gate(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<ServiceError>().is_some())
}
