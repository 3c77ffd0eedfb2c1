//! The HTTP engine: the database engine's scenarios sent through the real
//! service (`wire`) on a loopback port, by real HTTP clients holding each
//! actor's key.
//!
//! Guarantees:
//! - Per scenario: a fresh migrated database seeded with the world (as the
//!   database engine does), a key issued for every agent and every human of
//!   every tenant, and `wire::serve` on `127.0.0.1:0` over a gate built as
//!   the database engine builds it, on the same manual clock. The server is
//!   shut down and the database dropped afterwards.
//! - Steps become calls exactly as in the database engine (this module is
//!   that engine's child and shares its `prepare`, `replay`, `concurrent`,
//!   webhook signing and `observe`); only the transport differs. A call the
//!   service has a route for, made by an actor whose key holds the route's
//!   role in the step's tenant, is sent as one HTTP request with that key
//!   (the webhook with its raw body, `X-Razorpay-Signature` and
//!   `X-Razorpay-Event-Id`). A call the wire cannot express the same way is
//!   made directly on the gate the server wraps, and counted ([`Tally`]):
//!   the expiry sweep and the provider's verbs (not agent or human
//!   operations), a `pay` or `cancel` by an agent (human routes), an actor
//!   with no key in the step's tenant (unknown actors and tenants,
//!   cross-tenant actors), and an idempotency key, event id or signature no
//!   HTTP header can carry as the wire reads it.
//! - The service may refuse before the gate (an object not of the caller's
//!   tenant is 404, a body or header it will not read is 422/400). Such a
//!   step is then asked of the gate directly, and it must agree: the gate
//!   must refuse it too (and a 404 must be for an object that really is not
//!   the tenant's). The wire refusing what the gate allows is a failure.
//! - A step's `wire` block (`scenarios::wire`) changes the credential,
//!   headers or body it is sent with and states the status and reason the
//!   service must answer; a mismatch is a failure. Wire-only steps (a
//!   `wire` block and no `expect`) run only here.
//!
//! Layout: this file holds the engine and its tally; [`client`] the service
//! on a loopback port, the run's keys and the request a call becomes;
//! [`settle`] how the service's answer (or the gate's, when the wire cannot
//! carry the call) becomes the step's outcome; [`driver`] the steps of one
//! scenario.

mod client;
mod driver;
mod settle;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use reqwest::Method;
use scenarios::{KeyTrick, WireStep};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::*;
use client::*;
use driver::run_http;
use settle::*;

/// How steps reached the gate, over a whole run (for the summary).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Sent over HTTP and answered by the gate through the service.
    pub over_wire: u64,
    /// Refused by the service before the gate (404, 422, 400), then asked
    /// of the gate directly, which refused too.
    pub refused_at_wire: u64,
    /// Wire-only steps (sent with their `wire` block, not run elsewhere).
    pub wire_only: u64,
    /// Made directly on the gate, by why.
    pub direct: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.over_wire += other.over_wire;
        self.refused_at_wire += other.refused_at_wire;
        self.wire_only += other.wire_only;
        for (why, n) in &other.direct {
            *self.direct.entry(why.clone()).or_default() += n;
        }
    }

    fn count_direct(&mut self, why: &str) {
        *self.direct.entry(why.to_string()).or_default() += 1;
    }

    /// One line for the bench's summary.
    pub fn summary(&self) -> String {
        let direct: u64 = self.direct.values().sum();
        let mut line = format!(
            "http engine: {} steps over the wire, {} refused by the service before the gate (and by the gate), {} wire-only, {} made directly on the gate",
            self.over_wire, self.refused_at_wire, self.wire_only, direct
        );
        if direct > 0 {
            let why: Vec<String> = self
                .direct
                .iter()
                .map(|(w, n)| format!("{n} {w}"))
                .collect();
            line.push_str(&format!(" ({})", why.join("; ")));
        }
        line
    }
}

/// What the HTTP engine saw of one scenario.
#[derive(Debug, Clone, Default)]
pub struct HttpRun {
    /// One outcome per step of the scenario, wire-only steps included.
    pub run: Run,
    /// Where the service's answer broke a rule of the module doc or a step's
    /// `wire` expectation.
    pub wire_failures: Vec<String>,
    pub tally: Tally,
}

/// The HTTP engine: one server per scenario, on the database engine's server.
#[derive(Debug, Clone)]
pub struct HttpEngine {
    pool: Arc<DatabasePool>,
    timeout: StdDuration,
    tally: Arc<Mutex<Tally>>,
}

impl HttpEngine {
    pub async fn start(admin_url: &str) -> Result<Self> {
        let pool = Arc::new(DatabasePool::new(admin_url));
        let probe = pool.lease().await?;
        pool.give_back(probe, RunEnd::Clean).await;
        Ok(HttpEngine {
            pool,
            timeout: SCENARIO_TIMEOUT,
            tally: Arc::default(),
        })
    }

    /// Drops the databases the engine holds (a later run makes new ones).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub fn with_timeout(mut self, timeout: StdDuration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Every step of every scenario run so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Runs one scenario through its own server and database, as its own
    /// task, within the engine's time limit.
    pub async fn run(&self, scenario: &Scenario, world: &World) -> HttpRun {
        let (scenario, world) = (scenario.clone(), world.clone());
        let out = in_leased_database(
            &self.pool,
            self.timeout,
            move |pool| run_http(pool, scenario, world),
            |run| HttpRun {
                run,
                ..HttpRun::default()
            },
            |out| &out.run,
        )
        .await;
        if let Ok(mut t) = self.tally.lock() {
            t.add(&out.tally);
        }
        out
    }
}
