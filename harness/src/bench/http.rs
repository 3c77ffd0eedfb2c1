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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use reqwest::Method;
use scenarios::{KeyTrick, WireStep};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::*;

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

/// A key issued for the run, by tenant and actor.
#[derive(Debug, Clone)]
struct Held {
    token: String,
    human: bool,
    /// A human who may change prices, policy and delegations.
    admin: bool,
}

/// The service on a loopback port, with the run's keys and an HTTP client.
struct Wire {
    base: String,
    client: reqwest::Client,
    keys: BTreeMap<(String, String), Held>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// One HTTP request, ready to send.
#[derive(Debug, Clone)]
struct Req {
    method: Method,
    path: String,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    token: Option<String>,
    /// The decision kind of an allowed call (`allow` for approve and propose).
    allow_kind: DecisionKind,
    propose: bool,
}

/// What a call came to.
enum Via {
    /// The request, when the wire can express the call the same way.
    Wire(Req),
    /// Made on the gate directly, and why.
    Direct(&'static str),
}

/// The service's answer, read back.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn reason_text(&self) -> Option<&str> {
        self.body.get("reason").and_then(Value::as_str)
    }

    /// The gate's decision the answer carries, if it carries one.
    fn decision(&self) -> Option<Decision> {
        let reason = self.reason_text().map(str::parse::<gate::Reason>);
        match (self.body.get("decision").and_then(Value::as_str), reason) {
            (Some("allow"), None) => Some(Decision::Allow),
            (Some("step_up"), Some(Ok(r))) => Some(Decision::StepUp(r)),
            (Some("deny"), Some(Ok(r))) => Some(Decision::Deny(r)),
            _ => None,
        }
    }

    fn text(&self, key: &str) -> Option<String> {
        self.body
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// A path segment, percent-encoded (everything but unreserved characters).
fn segment(id: &str) -> String {
    let mut out = String::new();
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether the service reads `value` as a header it takes once: 1 to 255
/// visible ASCII characters (`wire::routes::single_header`).
fn header_ok(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= wire::MAX_HEADER_CHARS
        && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

impl Wire {
    async fn start(gate: Arc<Gate<InProcessProvider>>, world: &World) -> Result<Wire> {
        let now = gate.now();
        let mut keys = BTreeMap::new();
        for tenant in &world.tenants {
            for agent in &tenant.agents {
                let k = wire::keys::issue(gate.pool(), &tenant.id, agent, now).await?;
                keys.insert(
                    (tenant.id.clone(), agent.clone()),
                    Held {
                        token: k.token,
                        human: false,
                        admin: false,
                    },
                );
            }
            for person in &tenant.people {
                let k = wire::keys::issue(gate.pool(), &tenant.id, &person.id, now).await?;
                keys.insert(
                    (tenant.id.clone(), person.id.clone()),
                    Held {
                        token: k.token,
                        human: true,
                        admin: person.may_approve || person.is_operator,
                    },
                );
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(wire::serve(
            listener,
            gate,
            wire::WireConfig::default(),
            async move {
                let _ = rx.await;
            },
        ));
        Ok(Wire {
            base,
            client: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()?,
            keys,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    async fn stop(mut self) -> Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.context("the server task")?.context("serving")?;
        }
        Ok(())
    }

    fn held(&self, tenant: &str, actor: &str) -> Option<&Held> {
        self.keys.get(&(tenant.to_string(), actor.to_string()))
    }

    /// A human key of `tenant` that may administer it, preferring `actor`'s.
    fn admin(&self, tenant: &str, actor: Option<&str>) -> Option<(String, String)> {
        if let Some(a) = actor
            && let Some(h) = self.held(tenant, a).filter(|h| h.admin)
        {
            return Some((a.to_string(), h.token.clone()));
        }
        self.keys
            .iter()
            .find(|((t, _), h)| t == tenant && h.admin)
            .map(|((_, a), h)| (a.clone(), h.token.clone()))
    }

    /// A key of `actor`, in `tenant` if it is there, else in any tenant.
    fn key_of(&self, tenant: &str, actor: &str) -> Option<(String, &Held)> {
        self.held(tenant, actor)
            .map(|h| (tenant.to_string(), h))
            .or_else(|| {
                self.keys
                    .iter()
                    .find(|((_, a), _)| a == actor)
                    .map(|((t, _), h)| (t.clone(), h))
            })
    }

    /// How `call` goes to the gate: as which request, or directly and why.
    fn via(&self, call: &Call) -> Via {
        match (self.route(call), self.credential(call)) {
            (Ok(mut req), Ok(token)) => {
                req.token = token;
                Via::Wire(req)
            }
            (Err(why), _) | (_, Err(why)) => Via::Direct(why),
        }
    }

    /// The good key that makes `call` as the step wrote it (`None`: the
    /// route takes no key), or why no key does.
    fn credential(&self, call: &Call) -> Result<Option<String>, &'static str> {
        let human = |tenant: &str, actor: &str, why| {
            self.held(tenant, actor)
                .filter(|h| h.human)
                .map(|h| Some(h.token.clone()))
                .ok_or(why)
        };
        match call {
            Call::Propose { tenant, actor, .. } => self
                .held(tenant, actor)
                .filter(|h| !h.human)
                .map(|h| Some(h.token.clone()))
                .ok_or("proposals by an actor that is no agent of the tenant"),
            Call::Approve {
                tenant, approver, ..
            } => human(
                tenant,
                approver,
                "approvals by an actor that is no human of the tenant",
            ),
            Call::Checkout { tenant, actor, .. } => human(
                tenant,
                actor,
                "checkouts by an actor that is no human of the tenant",
            ),
            Call::Cancel { tenant, actor, .. } => human(
                tenant,
                actor,
                "cancels by an agent or a stranger (a human route)",
            ),
            Call::Pay { tenant, actor, .. } => match actor {
                Some(a) => human(
                    tenant,
                    a,
                    "payments by an agent or a stranger (a human route)",
                ),
                None => Err("payments by the requesting agent (a human route)"),
            },
            Call::Revoke { tenant, actor, .. } => human(
                tenant,
                actor,
                "revocations by an actor that is no human of the tenant",
            ),
            Call::Grant { tenant, grant } => self
                .admin(tenant, Some(&grant.from))
                .map(|(_, t)| Some(t))
                .ok_or("grants in a tenant with no administrator key"),
            Call::SetPrice { tenant, .. } | Call::SetPolicy { tenant, .. } => self
                .admin(tenant, None)
                .map(|(_, t)| Some(t))
                .ok_or("price and policy changes in a tenant with no administrator key"),
            _ => Ok(None),
        }
    }

    /// The route, body and headers of `call`, without a credential; why not
    /// when the wire cannot carry it as written.
    fn route(&self, call: &Call) -> Result<Req, &'static str> {
        let req = |method: Method, path: String, body: Vec<u8>, allow_kind| Req {
            method,
            path,
            body,
            headers: Vec::new(),
            token: None,
            allow_kind,
            propose: false,
        };
        let json = |v: Value| v.to_string().into_bytes();
        Ok(match call {
            Call::Propose { body, key, .. } => {
                let mut r = req(
                    Method::POST,
                    "/v1/requests".into(),
                    body.clone(),
                    DecisionKind::Allow,
                );
                r.propose = true;
                if let Some(k) = key {
                    if !header_ok(k) {
                        return Err("idempotency keys no header carries");
                    }
                    r.headers
                        .push((wire::IDEMPOTENCY_KEY.to_string(), k.clone()));
                }
                r
            }
            Call::Approve { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/approve", segment(request)),
                Vec::new(),
                DecisionKind::Allow,
            ),
            Call::Checkout { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/checkout", segment(request)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Cancel { request, .. } => req(
                Method::POST,
                format!("/v1/requests/{}/cancel", segment(request)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Pay { authority, .. } => req(
                Method::POST,
                format!("/v1/authorities/{}/pay", segment(authority)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Revoke { delegation, .. } => req(
                Method::POST,
                format!("/v1/delegations/{}/revoke", segment(delegation)),
                Vec::new(),
                DecisionKind::Ok,
            ),
            Call::Grant { tenant, grant } => {
                // The service's grantor is the caller, or the `parent` the
                // body names: either way the gate gets `from` as written.
                let caller = self.admin(tenant, Some(&grant.from)).map(|(a, _)| a);
                let mut body = json!({
                    "id": grant.id, "to": grant.to, "budget_paise": grant.budget_paise,
                });
                if caller.as_deref() != Some(grant.from.as_str()) {
                    body["parent"] = json!(grant.from);
                }
                if let Some(skus) = &grant.skus {
                    body["skus"] = json!(skus);
                }
                if let Some(at) = &grant.expires_at {
                    body["expires_at"] = json!(at);
                }
                req(
                    Method::POST,
                    "/v1/delegations".into(),
                    json(body),
                    DecisionKind::Ok,
                )
            }
            Call::SetPrice { sku, price, .. } => req(
                Method::PUT,
                format!("/v1/catalog/{}/price", segment(sku)),
                json(json!({ "price_paise": price })),
                DecisionKind::Ok,
            ),
            Call::SetPolicy { patch, .. } => req(
                Method::PUT,
                "/v1/policy".into(),
                serde_json::to_vec(patch).map_err(|_| "policies that do not serialize")?,
                DecisionKind::Ok,
            ),
            Call::Webhook {
                body,
                signature,
                event_id,
            } => {
                let mut r = req(
                    Method::POST,
                    "/webhooks/razorpay".into(),
                    body.clone(),
                    DecisionKind::Ok,
                );
                if let Some(s) = signature {
                    // What HTTP carries as written (no edge spaces); the gate judges it.
                    if !s.bytes().all(|b| b == b' ' || (0x21..=0x7e).contains(&b))
                        || s.starts_with(' ')
                        || s.ends_with(' ')
                    {
                        return Err("signatures no header carries as written");
                    }
                    r.headers.push((wire::SIGNATURE.to_string(), s.clone()));
                }
                if let Some(e) = event_id {
                    if !header_ok(e) {
                        return Err("event ids no header carries");
                    }
                    r.headers.push((wire::EVENT_ID.to_string(), e.clone()));
                }
                r
            }
            _ => {
                return Err(
                    "operations that are not agent or human calls (sweep, provider, clock)",
                );
            }
        })
    }

    async fn send(&self, req: &Req) -> Result<Answer> {
        let mut r = self
            .client
            .request(req.method.clone(), format!("{}{}", self.base, req.path))
            .body(req.body.clone());
        let has = |name: &str| {
            req.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has("content-type") {
            r = r.header("content-type", "application/json");
        }
        if let Some(token) = &req.token {
            r = r.header("authorization", format!("Bearer {token}"));
        }
        // An empty value is a header the step removed: not sent at all.
        for (k, v) in req.headers.iter().filter(|(_, v)| !v.is_empty()) {
            r = r.header(k.as_str(), v.as_str());
        }
        let answer = r.send().await.context("sending a request to the service")?;
        let status = answer.status().as_u16();
        let bytes = answer
            .bytes()
            .await
            .context("reading the service's answer")?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer { status, body })
    }
}

/// One step's result on the HTTP engine.
struct Sent {
    outcome: StepOutcome,
    id: Option<String>,
    guard: Option<String>,
}

/// Sends `call` over the wire, or to the gate directly, and reads the outcome.
async fn deliver(
    wire: &Wire,
    gate: &Gate<InProcessProvider>,
    call: Call,
    tally: &Mutex<Tally>,
    failures: &Mutex<Vec<String>>,
) -> Result<Sent> {
    let req = match wire.via(&call) {
        Via::Wire(req) => req,
        Via::Direct(why) => {
            if let Ok(mut t) = tally.lock() {
                t.count_direct(why);
            }
            let (outcome, id, guard) = call.send(gate).await?;
            return Ok(Sent { outcome, id, guard });
        }
    };
    let answer = wire.send(&req).await?;
    settle(&req, &answer, call, gate, tally, failures).await
}

/// The outcome of `call` from the service's answer to `req`: the gate's
/// decision it carries, or, when the service refused before the gate, the
/// gate's own (which must refuse too).
async fn settle(
    req: &Req,
    answer: &Answer,
    call: Call,
    gate: &Gate<InProcessProvider>,
    tally: &Mutex<Tally>,
    failures: &Mutex<Vec<String>>,
) -> Result<Sent> {
    if let Some(decision) = answer.decision() {
        let allowed = if req.propose { 201 } else { 200 };
        let want = wire::answer::decision_status(
            decision,
            reqwest::StatusCode::from_u16(allowed).unwrap_or(reqwest::StatusCode::OK),
        );
        if want.as_u16() != answer.status {
            lock(failures).push(format!(
                "{} {}: the service answered {} for {decision:?}, docs/http.md says {}",
                req.method,
                req.path,
                answer.status,
                want.as_u16()
            ));
        }
        if let Ok(mut t) = tally.lock() {
            t.over_wire += 1;
        }
        let outcome = if req.propose {
            StepOutcome::of(decision)
        } else {
            operation(decision, req.allow_kind)
        };
        let id = answer.text(if req.propose { "request_id" } else { "id" });
        return Ok(Sent {
            outcome,
            id,
            guard: answer.text("constraint"),
        });
    }
    let code = answer.reason_text().unwrap_or("").to_string();
    match code.as_str() {
        "ENGINE_UNAVAILABLE" | "TIMEOUT" => bail!(ServiceError::Corrupt {
            what: format!(
                "the service answered {} {code} to {} {}",
                answer.status, req.method, req.path
            ),
        }),
        "NOT_FOUND" | "BODY_INVALID" | "HEADER_INVALID" => {
            // Refused before the gate: the gate must refuse it too.
            if code == "NOT_FOUND"
                && let Some((tenant, what, id)) = scoped_object(&call)
                && wire::read::exists(gate.pool(), &tenant, what, &id).await?
            {
                lock(failures).push(format!(
                    "{} {}: 404 for {id}, which is an object of tenant {tenant}",
                    req.method, req.path
                ));
            }
            let (outcome, id, guard) = call.send(gate).await?;
            if matches!(
                outcome,
                StepOutcome::Decided {
                    kind: DecisionKind::Allow | DecisionKind::Ok,
                    ..
                }
            ) {
                lock(failures).push(format!(
                    "{} {}: the service refused it ({} {code}) but the gate allows it",
                    req.method, req.path, answer.status
                ));
            }
            if let Ok(mut t) = tally.lock() {
                t.refused_at_wire += 1;
            }
            Ok(Sent { outcome, id, guard })
        }
        _ => {
            lock(failures).push(format!(
                "{} {}: the service answered {} {} where the gate decides",
                req.method, req.path, answer.status, answer.body
            ));
            Ok(Sent {
                outcome: StepOutcome::Decided {
                    kind: DecisionKind::Deny,
                    reason: None,
                },
                id: None,
                guard: None,
            })
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The tenant-scoped object a call's path names.
fn scoped_object(call: &Call) -> Option<(String, wire::read::Object, String)> {
    use wire::read::Object;
    match call {
        Call::Approve {
            tenant, request, ..
        }
        | Call::Checkout {
            tenant, request, ..
        }
        | Call::Cancel {
            tenant, request, ..
        } => Some((tenant.clone(), Object::Request, request.clone())),
        Call::Pay {
            tenant, authority, ..
        } => Some((tenant.clone(), Object::Authority, authority.clone())),
        Call::Revoke {
            tenant, delegation, ..
        } => Some((tenant.clone(), Object::Delegation, delegation.clone())),
        _ => None,
    }
}

/// The run's state, beside the database engine's driver.
struct HttpDriver<'a> {
    cx: Driver<'a>,
    wire: Wire,
    tally: Arc<Mutex<Tally>>,
    failures: Arc<Mutex<Vec<String>>>,
}

async fn run_http(pool: PgPool, scenario: Scenario, world: World) -> HttpRun {
    let mut out = HttpRun::default();
    let clock = Arc::new(ManualClock::new(world.now));
    let gate = match Gate::new(
        pool,
        InProcessProvider::new(),
        WEBHOOK_SECRET.to_vec(),
        clock.clone(),
    ) {
        Ok(gate) => Arc::new(gate),
        Err(e) => {
            out.run.error = Some(format!("building the gate: {e}"));
            return out;
        }
    };
    if let Err(e) = gate.seed(&world.seed()).await {
        out.run.error = Some(format!("seeding world `{}`: {e}", scenario.world));
        out.run.engine_error = true;
        return out;
    }
    let wire = match Wire::start(gate.clone(), &world).await {
        Ok(w) => w,
        Err(e) => {
            out.run.error = Some(format!("starting the service: {e:#}"));
            return out;
        }
    };
    // The database engine's driver, as its `run_in` builds it.
    let cx = Driver::new(gate, clock, &world, &scenario);
    let mut d = HttpDriver {
        cx,
        wire,
        tally: Arc::default(),
        failures: Arc::default(),
    };
    let mut stopped = None;
    for (i, step) in scenario.steps.iter().enumerate() {
        let result = if step.wire_only() {
            d.wire_only(i, step).await
        } else {
            d.step(i, step).await
        };
        match result {
            Ok((outcome, named)) => {
                if let Some(name) = &step.name {
                    d.cx.named.insert(name.clone(), named);
                }
                out.run.outcomes.push(outcome);
            }
            Err(e) => {
                out.run.engine_error = from_gate(&e);
                stopped = Some(format!(
                    "step {}: {e:#}",
                    step.name.as_deref().unwrap_or(step.verb.name())
                ));
                break;
            }
        }
    }
    let HttpDriver {
        cx,
        wire,
        tally,
        failures,
    } = d;
    if let Err(e) = wire.stop().await {
        lock(&failures).push(format!("the service did not stop cleanly: {e:#}"));
    }
    out.run.guards = cx.guards.clone();
    match stopped {
        Some(error) => out.run.error = Some(error),
        None => match observe(&cx, &world).await {
            Ok(state) => out.run.state = Some(state),
            Err(e) => {
                out.run.engine_error = from_gate(&e);
                out.run.error = Some(format!("reading the invariants: {e:#}"));
            }
        },
    }
    out.tally = lock(&tally).clone();
    out.wire_failures = lock(&failures).clone();
    out
}

impl HttpDriver<'_> {
    /// A step every engine runs: the database engine's `Driver::step` with
    /// the HTTP transport.
    async fn step(&mut self, i: usize, step: &Step) -> Result<(StepOutcome, Named)> {
        let tenant = self.cx.tenant_of(step);
        let call = match &step.verb {
            Verb::Replay(r) => self
                .cx
                .sent
                .get(&r.of)
                .cloned()
                .with_context(|| format!("step `{}` sent nothing to replay", r.of))?,
            Verb::Concurrent(c) => {
                let call = self.cx.prepare(&c.step)?;
                let outcome = self.concurrent(c.times, call).await?;
                return Ok((outcome, Named { id: None, tenant }));
            }
            _ => self.cx.prepare(step)?,
        };
        if let Some(name) = &step.name {
            self.cx.sent.insert(name.clone(), call.clone());
        }
        let tenant = call.tenant().map(str::to_string).unwrap_or(tenant);
        let was_pay = call.is_pay();
        let sent = match &step.wire {
            // Sent with its wire block (headers that must change nothing).
            Some(block) => {
                let (sent, answer) = self.send_with(i, &call, block, false).await?;
                self.check(i, step, block, &answer);
                sent
            }
            None => deliver(&self.wire, &self.cx.gate, call, &self.tally, &self.failures).await?,
        };
        self.cx.guards.extend(sent.guard);
        self.cx
            .note_unanswered(was_pay, &sent.outcome, sent.id.as_ref());
        Ok((
            sent.outcome,
            Named {
                id: sent.id,
                tenant,
            },
        ))
    }

    /// `times` copies of one call at once, each over its own connection.
    async fn concurrent(&mut self, times: u32, call: Call) -> Result<StepOutcome> {
        let mut set = JoinSet::new();
        let wire = Arc::new(Wire {
            base: self.wire.base.clone(),
            client: self.wire.client.clone(),
            keys: self.wire.keys.clone(),
            shutdown: None,
            task: None,
        });
        for _ in 0..times {
            let call = call.clone();
            let gate = self.cx.gate.clone();
            let wire = wire.clone();
            let tally = self.tally.clone();
            let failures = self.failures.clone();
            set.spawn(async move { deliver(&wire, &gate, call, &tally, &failures).await });
        }
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let sent = match joined {
                Ok(sent) => sent?,
                Err(e) if e.is_panic() => {
                    bail!("a concurrent copy panicked: {}", panic_text(e.into_panic()))
                }
                Err(e) => bail!("a concurrent copy was cancelled: {e}"),
            };
            self.cx.guards.extend(sent.guard);
            if let StepOutcome::Decided { kind, .. } = sent.outcome {
                *counts.entry(kind).or_default() += 1;
            }
        }
        Ok(StepOutcome::Counts(counts))
    }

    /// A wire-only step: sent with its block; the gate must not have been
    /// reached (nothing moves), which the scenario's invariants check.
    async fn wire_only(&mut self, i: usize, step: &Step) -> Result<(StepOutcome, Named)> {
        let tenant = self.cx.tenant_of(step);
        let block = step.wire.clone().unwrap_or_default();
        // Prepared as the other engines would prepare it, but without the
        // provider capturing (a signed capture is prepared unsigned and
        // signed here) and without using up an event number.
        let counter = self.cx.event_counter;
        let unsigned;
        let to_prepare = match &step.verb {
            Verb::Webhook(w) if w.signature_header.is_none() => {
                let mut quiet = w.clone();
                quiet.signature = Some(Signature::Missing);
                unsigned = Step {
                    verb: Verb::Webhook(quiet),
                    ..step.clone()
                };
                &unsigned
            }
            _ => step,
        };
        let mut call = self.cx.prepare(to_prepare)?;
        self.cx.event_counter = counter;
        if let (
            Verb::Webhook(w),
            Call::Webhook {
                body, signature, ..
            },
        ) = (&step.verb, &mut call)
            && w.signature_header.is_none()
        {
            *signature = match w.signature() {
                Signature::Valid => Some(sign_webhook(WEBHOOK_SECRET, body)),
                Signature::Invalid => Some(sign_webhook(FORGED_SECRET, body)),
                Signature::Missing => None,
            };
        }
        let (_, answer) = self.send_with(i, &call, &block, true).await?;
        self.check(i, step, &block, &answer);
        if let Ok(mut t) = self.tally.lock() {
            t.wire_only += 1;
        }
        let outcome = match answer.as_ref().and_then(Answer::decision) {
            Some(d) => StepOutcome::of(d),
            None => StepOutcome::Decided {
                kind: DecisionKind::Deny,
                reason: None,
            },
        };
        Ok((outcome, Named { id: None, tenant }))
    }

    /// Sends `call` as its `wire` block says; the answer, when it went out.
    async fn send_with(
        &mut self,
        i: usize,
        call: &Call,
        block: &WireStep,
        wire_only: bool,
    ) -> Result<(Sent, Option<Answer>)> {
        // A step every engine runs (only its headers change) is settled as
        // any other; a wire-only one is only the service's answer.
        let honest = !wire_only;
        let mut req = match (self.wire.via(call), self.wire.route(call)) {
            (Via::Wire(req), _) => req,
            (Via::Direct(_), Ok(req)) if !honest => req,
            (Via::Direct(why), _) if wire_only => {
                // The other engines skip this step: it must not reach the gate here either.
                lock(&self.failures).push(format!(
                    "step #{}: this wire-only step cannot be sent ({why})",
                    i + 1
                ));
                let outcome = StepOutcome::Decided {
                    kind: DecisionKind::Deny,
                    reason: None,
                };
                return Ok((
                    Sent {
                        outcome,
                        id: None,
                        guard: None,
                    },
                    None,
                ));
            }
            (Via::Direct(why), _) => {
                lock(&self.failures).push(format!(
                    "step #{}: its wire block cannot be sent ({why}); made on the gate directly",
                    i + 1
                ));
                let (outcome, id, guard) = call.clone().send(&self.cx.gate).await?;
                return Ok((Sent { outcome, id, guard }, None));
            }
        };
        let step_tenant = call.tenant().map(str::to_string).unwrap_or_default();
        if let Some(actor) = &block.as_actor {
            let (_, held) = self.wire.key_of(&step_tenant, actor).with_context(|| {
                format!("step #{}: `as: {actor}` is no actor of the world", i + 1)
            })?;
            req.token = Some(held.token.clone());
        }
        match block.key {
            None => {}
            Some(KeyTrick::None) => req.token = None,
            Some(KeyTrick::Malformed) => req.token = Some("not-a-key".into()),
            Some(KeyTrick::Unknown) => req.token = Some(wire::keys::new_key().1),
            Some(KeyTrick::Revoked) => {
                let actor = block
                    .as_actor
                    .clone()
                    .or_else(|| call_actor(call))
                    .with_context(|| format!("step #{}: `key: revoked` of whom?", i + 1))?;
                let (tenant, _) = self
                    .wire
                    .key_of(&step_tenant, &actor)
                    .with_context(|| format!("step #{}: {actor} holds no key", i + 1))?;
                let pool = self.cx.gate.pool();
                let k = wire::keys::issue(pool, &tenant, &actor, self.cx.gate.now()).await?;
                wire::keys::revoke(pool, &k.id, self.cx.gate.now()).await?;
                req.token = Some(k.token);
            }
        }
        if let Some(body) = &block.body {
            req.body = body.clone().into_bytes();
        }
        let signature = sign_webhook(WEBHOOK_SECRET, &req.body);
        for (name, values) in &block.headers {
            req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            let values = values.values();
            if values.is_empty() {
                // Removed: an empty value is never sent, and keeps the
                // default Content-Type out.
                req.headers.push((name.clone(), String::new()));
            }
            for v in values {
                let v = v.replace(scenarios::wire::SIGNATURE_PLACEHOLDER, &signature);
                req.headers.push((name.clone(), v));
            }
        }
        let answer = self.wire.send(&req).await?;
        if honest {
            let sent = settle(
                &req,
                &answer,
                call.clone(),
                &self.cx.gate,
                &self.tally,
                &self.failures,
            )
            .await?;
            return Ok((sent, Some(answer)));
        }
        // Another credential: the gate's answer, if it was reached at all.
        let outcome = match answer.decision() {
            Some(d) if req.propose => StepOutcome::of(d),
            Some(d) => operation(d, req.allow_kind),
            None => StepOutcome::Decided {
                kind: DecisionKind::Deny,
                reason: None,
            },
        };
        let id = answer.text(if req.propose { "request_id" } else { "id" });
        let guard = answer.text("constraint");
        Ok((Sent { outcome, id, guard }, Some(answer)))
    }

    /// Checks the answer against the block's `status` and `reason`.
    fn check(&self, i: usize, step: &Step, block: &WireStep, answer: &Option<Answer>) {
        let label = step.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
        let Some(answer) = answer else {
            if block.status.is_some() || block.reason.is_some() {
                lock(&self.failures).push(format!(
                    "step {label} ({}): its wire expectation could not be checked: the step did not go over the wire",
                    step.verb.name()
                ));
            }
            return;
        };
        let status_ok = block.status.is_none_or(|s| s == answer.status);
        let reason_ok = block
            .reason
            .as_deref()
            .is_none_or(|r| answer.reason_text() == Some(r));
        if !status_ok || !reason_ok {
            lock(&self.failures).push(format!(
                "step {label} ({}): expected the service to answer {}{}, got {} {}",
                step.verb.name(),
                block.status.map(|s| s.to_string()).unwrap_or_default(),
                block
                    .reason
                    .as_deref()
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default(),
                answer.status,
                answer.reason_text().unwrap_or("(no reason)")
            ));
        }
    }
}

/// The actor a call is made by, when it names one.
fn call_actor(call: &Call) -> Option<String> {
    match call {
        Call::Propose { actor, .. }
        | Call::Checkout { actor, .. }
        | Call::Cancel { actor, .. }
        | Call::Revoke { actor, .. } => Some(actor.clone()),
        Call::Approve { approver, .. } => Some(approver.clone()),
        Call::Pay { actor, .. } => actor.clone(),
        Call::Grant { grant, .. } => Some(grant.from.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("req_0001-a.b~c"), "req_0001-a.b~c");
        assert_eq!(segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn only_what_the_service_reads_once_is_a_header() {
        assert!(header_ok("evt_1"));
        assert!(!header_ok(""));
        assert!(!header_ok("a b"));
        assert!(!header_ok(&"x".repeat(256)));
        assert!(header_ok(&"x".repeat(255)));
    }

    /// The codes a `wire` block may expect are the service's own.
    #[test]
    fn the_scenarios_wire_codes_are_the_services() {
        let ours: Vec<&str> = wire::WireCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(ours, scenarios::wire::WIRE_CODES.to_vec());
    }
}
