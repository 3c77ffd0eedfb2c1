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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use anyhow::{Context, Result, anyhow, bail};
use chrono::TimeDelta;
use gate::provider::{InProcessProvider, Mode, ProviderError};
use gate::service::webhook::razorpay_envelope;
use gate::service::{Gate, ManualClock, ProviderEvent, ServiceError, sign_webhook};
use gate::{Decision, Reason};
use scenarios::{DecisionKind, ProviderMode, Scenario, Signature, Step, Verb, World};
use sqlx::PgPool;
use tokio::task::JoinSet;

use super::judge::Run;
use super::observed::{ObservedState, StepOutcome};
use super::pool::{DatabasePool, RunEnd};

// The HTTP engine is this engine's child: it shares the driver and changes the transport.
#[path = "http.rs"]
pub mod http;

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

/// What a step produced that later steps may name.
#[derive(Debug, Clone, Default)]
struct Named {
    /// propose → request id; checkout → authority id; pay → order id.
    id: Option<String>,
    /// The tenant the step was made in.
    tenant: String,
}

struct Driver<'a> {
    gate: Arc<Gate<InProcessProvider>>,
    clock: Arc<ManualClock>,
    world: &'a World,
    scenario: &'a Scenario,
    named: BTreeMap<String, Named>,
    /// What each named step sent, for `replay`.
    sent: BTreeMap<String, Call>,
    event_counter: u64,
    guards: std::collections::BTreeSet<String>,
    /// Orders the provider created for a `pay` it answered too late: the
    /// gate has not recorded them (until reconcile does).
    unanswered: std::collections::BTreeSet<String>,
}

async fn run_in(pool: PgPool, scenario: Scenario, world: World) -> Run {
    if std::env::var(PANIC_ENV).is_ok_and(|id| id == scenario.id) {
        panic!("injected panic in scenario `{}` ({PANIC_ENV})", scenario.id);
    }
    let clock = Arc::new(ManualClock::new(world.now));
    let mut run = Run::default();
    let gate = match Gate::new(
        pool,
        InProcessProvider::new(),
        WEBHOOK_SECRET.to_vec(),
        clock.clone(),
    ) {
        Ok(gate) => Arc::new(gate),
        Err(e) => {
            run.error = Some(format!("building the gate: {e}"));
            return run;
        }
    };
    if let Err(e) = gate.seed(&world.seed()).await {
        run.error = Some(format!("seeding world `{}`: {e}", scenario.world));
        run.engine_error = true;
        return run;
    }
    let mut cx = Driver::new(gate, clock, &world, &scenario);
    for step in &scenario.steps {
        match cx.step(step).await {
            Ok((outcome, named)) => {
                if let Some(name) = &step.name {
                    cx.named.insert(name.clone(), named);
                }
                run.outcomes.push(outcome);
            }
            Err(e) => {
                run.engine_error = from_gate(&e);
                run.error = Some(format!(
                    "step {}: {e:#}",
                    step.name.as_deref().unwrap_or(step.verb.name())
                ));
                run.guards = cx.guards;
                return run;
            }
        }
    }
    run.guards = std::mem::take(&mut cx.guards);
    match observe(&cx, &world).await {
        Ok(state) => run.state = Some(state),
        Err(e) => {
            run.engine_error = from_gate(&e);
            run.error = Some(format!("reading the invariants: {e:#}"));
        }
    }
    run
}

/// The spec's invariants: `spent_today_paise` is the default tenant's; orders,
/// captures and delegation spend are summed over every tenant of the world.
async fn observe(cx: &Driver<'_>, world: &World) -> Result<ObservedState> {
    let gate = &cx.gate;
    let mut state = ObservedState {
        ledger_intact: Some(true),
        ..ObservedState::default()
    };
    for (i, tenant) in world.tenants.iter().enumerate() {
        let inv = gate.invariants(&tenant.id).await?;
        if i == 0 {
            state.spent_today_paise = inv.spent_today_paise;
        }
        state.provider_orders += u64::try_from(inv.provider_orders).unwrap_or(0);
        state.captured_paise += inv.captured_paise;
        state
            .delegation_spent_paise
            .extend(inv.delegation_spent_paise);
        state.ledger_intact = Some(state.ledger_intact == Some(true) && inv.ledger_intact);
    }
    state.provider_captured_paise = gate.provider().captured_paise();
    let books = gate.books(None).await?;
    let mut problems = Vec::new();
    if books.captured_paise != state.provider_captured_paise {
        problems.push(format!(
            "the provider captured {} paise, the gate's books hold {} captured",
            state.provider_captured_paise, books.captured_paise
        ));
    }
    for (day, (booked, held)) in &books.unbalanced_days {
        problems.push(format!(
            "{day}: {booked} paise reserved, its requests hold {held}"
        ));
    }
    for (hop, (spent, held)) in &books.unbalanced_hops {
        problems.push(format!(
            "hop {hop}: {spent} paise spent, its requests hold {held}"
        ));
    }
    state.books_balanced = Some(problems.is_empty());
    state.books_problems = problems;
    if let Some(wanted) = &cx.scenario.invariants.request_states {
        for name in wanted.keys() {
            let found = match cx.named.get(name) {
                Some(Named {
                    id: Some(id),
                    tenant,
                }) => gate.request_state(tenant, id).await?,
                _ => None,
            };
            state.request_states.insert(name.clone(), found);
        }
    }
    Ok(state)
}

/// Every tenant of the world, for the expiry sweep.
fn all_tenants(world: &World) -> Vec<String> {
    world.tenants.iter().map(|t| t.id.clone()).collect()
}

/// The expiry sweep for these tenants: authorities past their 15 minutes and
/// requests past their 24-hour lifetime (`Gate::expire_sweep`).
async fn expiry_sweep(
    gate: &Gate<InProcessProvider>,
    tenants: &[String],
) -> Result<(), ServiceError> {
    for tenant in tenants {
        gate.expire_sweep(tenant).await?;
    }
    Ok(())
}

/// Delivers a provider event as the provider does: the raw body, the
/// signature header and the event id in the `X-Razorpay-Event-Id` header.
async fn deliver_webhook(
    gate: &Gate<InProcessProvider>,
    body: &[u8],
    signature: Option<&str>,
    event_id: Option<&str>,
) -> Result<gate::service::Outcome, ServiceError> {
    gate.webhook(body, signature, event_id).await
}

fn default_tenant(world: &World) -> String {
    world
        .default_tenant()
        .map(|t| t.id.clone())
        .unwrap_or_default()
}

/// A decision of a non-propose operation: `Allow` is `ok`, except for an
/// approval, where it is `allow` (the request became authorized).
fn operation(decision: Decision, allow_kind: DecisionKind) -> StepOutcome {
    match decision {
        Decision::Allow => StepOutcome::Decided {
            kind: allow_kind,
            reason: None,
        },
        other => StepOutcome::of(other),
    }
}

impl<'a> Driver<'a> {
    /// A driver for `scenario` in `world`, before its first step.
    pub(super) fn new(
        gate: Arc<Gate<InProcessProvider>>,
        clock: Arc<ManualClock>,
        world: &'a World,
        scenario: &'a Scenario,
    ) -> Self {
        Driver {
            gate,
            clock,
            world,
            scenario,
            named: BTreeMap::new(),
            sent: BTreeMap::new(),
            event_counter: 0,
            guards: Default::default(),
            unanswered: Default::default(),
        }
    }
    /// The id a named earlier step produced; a name with no id becomes an id
    /// that exists nowhere, so the gate itself refuses it.
    fn id_of(&self, name: &str) -> String {
        self.named
            .get(name)
            .and_then(|n| n.id.clone())
            .unwrap_or_else(|| format!("missing-{name}"))
    }

    /// The step's tenant: the one it names, else the world's first.
    fn tenant_of(&self, step: &Step) -> String {
        step.tenant
            .clone()
            .unwrap_or_else(|| default_tenant(self.world))
    }

    async fn step(&mut self, step: &Step) -> Result<(StepOutcome, Named)> {
        let tenant = self.tenant_of(step);
        let call = match &step.verb {
            // The named step's request again, byte for byte.
            Verb::Replay(r) => self
                .sent
                .get(&r.of)
                .cloned()
                .with_context(|| format!("step `{}` sent nothing to replay", r.of))?,
            Verb::Concurrent(c) => {
                let call = self.prepare(&c.step)?;
                return Ok((
                    self.concurrent(c.times, call).await?,
                    Named { id: None, tenant },
                ));
            }
            _ => self.prepare(step)?,
        };
        if let Some(name) = &step.name {
            self.sent.insert(name.clone(), call.clone());
        }
        let tenant = call.tenant().map(str::to_string).unwrap_or(tenant);
        let was_pay = call.is_pay();
        let (outcome, id, guard) = call.send(&self.gate).await?;
        self.guards.extend(guard);
        self.note_unanswered(was_pay, &outcome, id.as_ref());
        Ok((outcome, Named { id, tenant }))
    }

    /// Remembers the order of a `pay` the provider answered too late: the
    /// gate has not recorded it, so its capture carries the order entity.
    pub(super) fn note_unanswered(
        &mut self,
        was_pay: bool,
        outcome: &StepOutcome,
        order: Option<&String>,
    ) {
        if was_pay && outcome.reason() == Some(Reason::ProviderUnavailable) {
            self.unanswered.extend(order.cloned());
        }
    }

    /// Sends `times` copies of one call at once.
    async fn concurrent(&mut self, times: u32, call: Call) -> Result<StepOutcome> {
        let mut set = JoinSet::new();
        for _ in 0..times {
            let call = call.clone();
            let gate = self.gate.clone();
            set.spawn(async move { call.send(&gate).await });
        }
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let (outcome, _, guard) = match joined {
                Ok(sent) => sent?,
                Err(e) if e.is_panic() => {
                    bail!("a concurrent copy panicked: {}", panic_text(e.into_panic()))
                }
                Err(e) => bail!("a concurrent copy was cancelled: {e}"),
            };
            self.guards.extend(guard);
            if let StepOutcome::Decided { kind, .. } = outcome {
                *counts.entry(kind).or_default() += 1;
            }
        }
        Ok(StepOutcome::Counts(counts))
    }

    /// Moves the gate's clock by `by`, or says why it cannot.
    fn move_clock(&self, by: Option<TimeDelta>) -> Result<()> {
        let now = self.clock_now();
        let to = by
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| anyhow!("the clock cannot move that far from {now}"))?;
        self.clock.set(to);
        Ok(())
    }

    /// Turns a step into one self-contained call (so copies can run at once).
    fn prepare(&mut self, step: &Step) -> Result<Call> {
        let tenant = self.tenant_of(step);
        let verb = &step.verb;
        Ok(match verb {
            Verb::Propose(p) => Call::Propose {
                tenant,
                actor: p.actor.clone(),
                body: p.wire_bytes(),
                key: p.idempotency_key.clone(),
            },
            Verb::Approve(a) => Call::Approve {
                tenant,
                request: self.id_of(&a.request),
                approver: a.approver.clone(),
            },
            Verb::Checkout(c) => Call::Checkout {
                tenant,
                request: self.id_of(&c.request),
                actor: c.actor.clone(),
            },
            Verb::Pay(p) => Call::Pay {
                tenant,
                authority: self.id_of(&p.authority),
                actor: p.actor.clone(),
            },
            Verb::Cancel(c) => Call::Cancel {
                tenant,
                request: self.id_of(&c.request),
                actor: c.actor.clone(),
            },
            Verb::Expire => Call::Expire {
                tenants: match &step.tenant {
                    Some(t) => vec![t.clone()],
                    None => all_tenants(self.world),
                },
            },
            Verb::Webhook(w) => {
                let order_id = self.id_of(&w.order);
                let order = self
                    .gate
                    .provider()
                    .orders()
                    .into_iter()
                    .find(|o| o.id == order_id);
                self.event_counter += 1;
                let event_id = w
                    .event_id
                    .clone()
                    .unwrap_or_else(|| format!("evt_{}_{}", self.scenario.id, self.event_counter));
                let created_at = TimeDelta::try_minutes(w.offset_minutes())
                    .and_then(|d| self.clock_now().checked_add_signed(d))
                    .context("created_at_offset_minutes is beyond what a clock can show")?;
                let event = ProviderEvent {
                    id: event_id.clone(),
                    event: w.event().to_string(),
                    created_at,
                    order_id: order_id.clone(),
                    amount_paise: w
                        .amount_paise
                        .or(order.as_ref().map(|o| o.amount_paise))
                        .unwrap_or(0),
                    currency: w
                        .currency
                        .clone()
                        .or(order.map(|o| o.currency))
                        .unwrap_or_else(|| "INR".into()),
                };
                let provider_order = self
                    .gate
                    .provider()
                    .orders()
                    .into_iter()
                    .find(|o| o.id == order_id);
                let as_ordered = provider_order.as_ref().is_some_and(|o| {
                    event.amount_paise == o.amount_paise && event.currency == o.currency
                });
                // A provider sends a capture only after it captured: a signed
                // capture of a real order, for its amount and currency, is the
                // customer paying at the provider first (once; a repeat finds
                // the order paid).
                if w.raw_bytes().is_none()
                    && w.signature_header.is_none()
                    && matches!(w.signature(), Signature::Valid)
                    && [
                        gate::service::webhook::EVENT_CAPTURED,
                        gate::service::webhook::EVENT_ORDER_PAID,
                    ]
                    .contains(&event.event.as_str())
                    && as_ordered
                {
                    self.gate.provider().set_now(event.created_at.timestamp());
                    let _already_paid = self.gate.provider().capture_payment(&order_id);
                }
                // The gate never heard back about this order: the provider's
                // event carries its order entity, receipt included.
                let with_order = provider_order
                    .filter(|_| as_ordered && self.unanswered.contains(&order_id))
                    .filter(|_| event.event != gate::service::webhook::EVENT_FAILED);
                let body = match (w.raw_bytes(), with_order) {
                    (Some(raw), _) => raw,
                    (None, Some(order)) => razorpay_envelope(
                        &event.event,
                        event.created_at,
                        Some(&event.payment()),
                        Some(&order),
                    ),
                    (None, None) => event.to_body(),
                };
                let signature = match (&w.signature_header, w.signature()) {
                    (Some(header), _) => Some(header.clone()),
                    (None, Signature::Valid) => Some(sign_webhook(WEBHOOK_SECRET, &body)),
                    (None, Signature::Invalid) => Some(sign_webhook(FORGED_SECRET, &body)),
                    (None, Signature::Missing) => None,
                };
                Call::Webhook {
                    body,
                    signature,
                    event_id: Some(event_id),
                }
            }
            Verb::Grant(g) => Call::Grant {
                tenant,
                grant: g.clone(),
            },
            Verb::Revoke(r) => Call::Revoke {
                tenant,
                delegation: r.delegation.clone(),
                actor: r.actor.clone(),
            },
            Verb::SetPrice(p) => Call::SetPrice {
                tenant,
                sku: p.sku.clone(),
                price: p.price_paise,
            },
            Verb::SetPolicy(p) => Call::SetPolicy {
                tenant,
                patch: p.clone(),
            },
            Verb::AdvanceClock(a) => {
                self.move_clock(a.duration())?;
                Call::Nothing
            }
            Verb::SetClock(s) => {
                self.clock.set(s.at);
                Call::Nothing
            }
            Verb::Provider(p) => Call::Provider {
                mode: match p.mode() {
                    ProviderMode::Ok => Mode::Ok,
                    ProviderMode::Timeout => Mode::Timeout,
                    ProviderMode::Late => Mode::Late,
                    ProviderMode::Reject => Mode::Reject,
                    ProviderMode::Unavailable => Mode::Unavailable,
                },
                times: p.times,
            },
            Verb::ProviderCapture(c) => {
                let order = self.named.get(&c.order).and_then(|n| n.id.clone());
                let Some(order) = order else {
                    bail!(
                        "provider_capture: step `{}` produced no provider order to capture",
                        c.order
                    );
                };
                Call::ProviderCapture {
                    order,
                    at: self.clock_now().timestamp(),
                }
            }
            Verb::Reconcile => Call::Reconcile {
                tenant: step.tenant.clone(),
            },
            Verb::Replay(_) | Verb::Concurrent(_) => {
                bail!(
                    "step {:?}: `{}` cannot be nested here",
                    step.name,
                    verb.name()
                )
            }
        })
    }

    fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        self.gate.now()
    }
}

/// One call of the gate, with everything it needs.
#[derive(Debug, Clone)]
enum Call {
    Propose {
        tenant: String,
        actor: String,
        body: Vec<u8>,
        key: Option<String>,
    },
    Approve {
        tenant: String,
        request: String,
        approver: String,
    },
    Checkout {
        tenant: String,
        request: String,
        actor: String,
    },
    Pay {
        tenant: String,
        authority: String,
        /// `None`: the agent that asked for the purchase pays.
        actor: Option<String>,
    },
    Webhook {
        body: Vec<u8>,
        signature: Option<String>,
        event_id: Option<String>,
    },
    Cancel {
        tenant: String,
        request: String,
        actor: String,
    },
    Expire {
        tenants: Vec<String>,
    },
    Grant {
        tenant: String,
        grant: gate::service::Grant,
    },
    Revoke {
        tenant: String,
        delegation: String,
        actor: String,
    },
    SetPrice {
        tenant: String,
        sku: String,
        price: i64,
    },
    SetPolicy {
        tenant: String,
        patch: gate::PolicyPatch,
    },
    /// How the provider answers the next `pay` calls.
    Provider {
        mode: Mode,
        times: Option<u32>,
    },
    /// The customer pays `order` at the provider, at unix time `at`.
    ProviderCapture {
        order: String,
        at: i64,
    },
    /// The reconcile job, for one tenant or (`None`) all.
    Reconcile {
        tenant: Option<String>,
    },
    Nothing,
}

impl Call {
    /// Whether the call is a `pay`.
    pub(super) fn is_pay(&self) -> bool {
        matches!(self, Call::Pay { .. })
    }

    /// The tenant the call is made in, when it names one.
    fn tenant(&self) -> Option<&str> {
        match self {
            Call::Propose { tenant, .. }
            | Call::Approve { tenant, .. }
            | Call::Checkout { tenant, .. }
            | Call::Pay { tenant, .. }
            | Call::Cancel { tenant, .. }
            | Call::Grant { tenant, .. }
            | Call::Revoke { tenant, .. }
            | Call::SetPrice { tenant, .. }
            | Call::SetPolicy { tenant, .. } => Some(tenant),
            Call::Webhook { .. }
            | Call::Expire { .. }
            | Call::Provider { .. }
            | Call::ProviderCapture { .. }
            | Call::Reconcile { .. }
            | Call::Nothing => None,
        }
    }

    /// Sends the call; returns the outcome, the id it produced and the
    /// database guard that refused it, if one did.
    async fn send(
        self,
        gate: &Gate<InProcessProvider>,
    ) -> Result<(StepOutcome, Option<String>, Option<String>)> {
        let ok = DecisionKind::Ok;
        let (o, kind) = match self {
            Call::Propose {
                tenant,
                actor,
                body,
                key,
            } => {
                let out = gate.propose(&tenant, &actor, &body, key.as_deref()).await?;
                return Ok((StepOutcome::of(out.decision), out.request_id, None));
            }
            Call::Approve {
                tenant,
                request,
                approver,
            } => (
                gate.approve(&tenant, &request, &approver).await?,
                DecisionKind::Allow,
            ),
            Call::Checkout {
                tenant,
                request,
                actor,
            } => (gate.checkout(&tenant, &request, &actor).await?, ok),
            Call::Pay {
                tenant,
                authority,
                actor,
            } => {
                let actor = match actor {
                    Some(actor) => actor,
                    None => requester(gate, &tenant, &authority).await?,
                };
                let mut paid = gate.pay(&tenant, &authority, &actor).await?;
                // An answer that came too late: the order the provider holds
                // for this receipt is still this step's order.
                if paid.decision == Decision::Deny(Reason::ProviderUnavailable) && paid.id.is_none()
                {
                    paid.id = gate.provider().order_for_receipt(&authority).map(|o| o.id);
                }
                (paid, ok)
            }
            Call::Webhook {
                body,
                signature,
                event_id,
            } => (
                deliver_webhook(gate, &body, signature.as_deref(), event_id.as_deref()).await?,
                ok,
            ),
            Call::Cancel {
                tenant,
                request,
                actor,
            } => (gate.cancel(&tenant, &request, &actor).await?, ok),
            Call::Expire { tenants } => {
                expiry_sweep(gate, &tenants).await?;
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::Grant { tenant, grant } => (gate.grant(&tenant, &grant).await?, ok),
            Call::Revoke {
                tenant,
                delegation,
                actor,
            } => (gate.revoke(&tenant, &delegation, &actor).await?, ok),
            Call::SetPrice { tenant, sku, price } => {
                (gate.set_price(&tenant, &sku, price).await?, ok)
            }
            Call::SetPolicy { tenant, patch } => (gate.set_policy(&tenant, &patch).await?, ok),
            Call::Provider { mode, times } => {
                gate.provider().set_mode(mode, times);
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::ProviderCapture { order, at } => {
                gate.provider().set_now(at);
                match gate.provider().capture(&order) {
                    // A customer who finds the order paid pays nothing more.
                    Ok(_) | Err(ProviderError::AlreadyPaid(_)) => {}
                    Err(e) => bail!("provider_capture of order {order}: {e}"),
                }
                return Ok((operation(Decision::Allow, ok), Some(order), None));
            }
            Call::Reconcile { tenant } => {
                gate.reconcile(tenant.as_deref()).await?;
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::Nothing => return Ok((operation(Decision::Allow, ok), None, None)),
        };
        Ok((operation(o.decision, kind), o.id, o.constraint))
    }
}

/// The agent that asked for the purchase an authority pays for (a `pay` step
/// that names no actor is the requester's own); empty when there is none, which
/// the gate refuses as an unknown actor.
async fn requester(
    gate: &Gate<InProcessProvider>,
    tenant: &str,
    authority: &str,
) -> Result<String> {
    // Only look up what could be an id: a string Postgres cannot hold (a NUL)
    // is the gate's to refuse, not this lookup's to fail on.
    if tenant.contains('\0') || authority.contains('\0') {
        return Ok(String::new());
    }
    let agent: Option<String> = sqlx::query_scalar(
        "SELECT r.agent_id FROM checkout_authorities a JOIN payment_requests r \
           ON r.tenant_id = a.tenant_id AND r.id = a.request_id \
         WHERE a.tenant_id = $1 AND a.id = $2",
    )
    .bind(tenant)
    .bind(authority)
    .fetch_optional(gate.pool())
    .await
    .context("reading the requester of an authority")?;
    Ok(agent.unwrap_or_default())
}
