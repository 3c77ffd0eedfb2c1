//! `harness perf --http`: the service (`wire`) on a loopback port under N
//! concurrent HTTP clients, beside the in-process gate, in one run.
//!
//! Guarantees:
//! - One fresh migrated database and one gate for the phase, built as the
//!   load phase builds them (`load::world`: the roomy standard world, a copy
//!   of `acme` per client, the accelerated clock); `wire::serve` runs over
//!   that same gate on `127.0.0.1:0`. Client *i* works in tenant `t0i` with
//!   keys issued for its `buyer-agent` and `finance-lead`.
//! - For each client count, a pair of cells per kind of work (in process
//!   and over HTTP), at most `cell` seconds each, run in halves in the order
//!   in process, HTTP, HTTP, in process (so a drift during the pair weighs on
//!   both alike; each cell's figures merge its two halves): propose, then
//!   the full purchase. **propose** is the load phase's
//!   (a proposal the merchant allowlist denies: the whole decision path,
//!   recorded and appended to the ledger); **flow** is propose (allowed) →
//!   checkout → pay → signed capture webhook, timed as one unit. So the
//!   wire's cost is a ratio between figures taken seconds apart.
//! - Each HTTP client has its own `reqwest::Client` (one kept-alive
//!   connection); a latency is from sending the request to having read the
//!   whole answer. Every answer is checked (status and decision); one that is
//!   not what the cell expects is counted, not timed as a success.
//! - Only loopback is used; the server stops (gracefully) at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use gate::Decision;
use gate::Reason;
use gate::service::ProviderEvent;
use gate::service::sign_webhook;
use gate::service::webhook::EVENT_CAPTURED;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::TcpListener;

use super::Progress;
use super::load::{self, ClientRun, Histograms, LoadGate, record, tenant_id};

/// Worker threads of the phase's runtime (the server's and the clients').
pub const WORKERS: usize = 2;

/// The goal: the wire adds at most this much to p50 at [`GOAL_CLIENTS`].
pub const P50_OVERHEAD_GOAL: f64 = 0.25;
pub const GOAL_CLIENTS: usize = 8;

/// What the phase runs.
#[derive(Debug, Clone)]
pub struct HttpPlan {
    pub clients: Vec<usize>,
    pub cell: Duration,
    /// The slow-body attack after the cells; `None` skips it.
    pub slow_body: Option<super::slow_body::SlowBodyPlan>,
}

/// In process or over the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Path {
    InProcess,
    Http,
}

/// One cell: a path, a kind of work, a client count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpCell {
    pub clients: usize,
    /// `propose` or `flow`.
    pub work: String,
    pub path: Path,
    pub completed: u64,
    pub seconds: f64,
    pub per_sec: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub unexpected: u64,
    pub first_unexpected: Option<String>,
}

/// The wire against the in-process path, for one work and client count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCost {
    pub clients: usize,
    pub work: String,
    /// HTTP p50 / in-process p50.
    pub p50_ratio: Option<f64>,
    /// HTTP requests/s / in-process requests/s.
    pub throughput_ratio: Option<f64>,
}

/// The whole phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpLoad {
    pub cell_seconds: f64,
    pub clock_speed: u32,
    pub cells: Vec<HttpCell>,
    pub cost: Vec<WireCost>,
    pub p50_overhead_goal: f64,
    pub goal_clients: usize,
    pub seconds: f64,
    /// Worker threads of the runtime that ran the cells and the server.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Connections in the gate's pool.
    #[serde(default)]
    pub pool: Option<u32>,
    /// The slow-body attack beside the same probes without it.
    #[serde(default)]
    pub slow_body: Option<super::slow_body::SlowBody>,
    #[serde(default)]
    pub slow_body_skipped: Option<String>,
}

impl HttpLoad {
    /// The cost rows at the goal's client count.
    pub fn at_goal(&self) -> impl Iterator<Item = &WireCost> {
        self.cost.iter().filter(|c| c.clients == self.goal_clients)
    }
}

/// The keys of one client's tenant.
#[derive(Clone)]
struct Keys {
    agent: String,
    human: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    Propose,
    Flow,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::Propose => "propose",
            Work::Flow => "flow",
        }
    }
}

const DENIED: &[u8] = br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk setup"}"#;
const ALLOWED: &[u8] = br#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"team cloud credits"}"#;

/// One HTTP call: status and JSON body, timed into `h` under `op`.
async fn call(
    client: &reqwest::Client,
    url: String,
    key: Option<&str>,
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> Result<(u16, Value)> {
    let mut r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = key {
        r = r.header("authorization", format!("Bearer {k}"));
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let answer = r.send().await.context("an HTTP request of the load")?;
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.context("reading an answer")?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// One purchase over the wire: `None` when every answer was the expected one.
async fn http_flow(
    client: &reqwest::Client,
    base: &str,
    keys: &Keys,
    gate: &LoadGate,
    event: &str,
) -> Result<Option<String>> {
    let (s, p) = call(
        client,
        format!("{base}/v1/requests"),
        Some(&keys.agent),
        ALLOWED.to_vec(),
        &[],
    )
    .await?;
    let Some(request) = text(&p, "request_id").filter(|_| s == 201) else {
        return Ok(Some(format!("propose: {s} {p}")));
    };
    let (s, c) = call(
        client,
        format!("{base}/v1/requests/{request}/checkout"),
        Some(&keys.human),
        Vec::new(),
        &[],
    )
    .await?;
    let Some(authority) = text(&c, "id").filter(|_| s == 200) else {
        return Ok(Some(format!("checkout: {s} {c}")));
    };
    let (s, o) = call(
        client,
        format!("{base}/v1/authorities/{authority}/pay"),
        Some(&keys.human),
        Vec::new(),
        &[],
    )
    .await?;
    let Some(order) = text(&o, "id").filter(|_| s == 200) else {
        return Ok(Some(format!("pay: {s} {o}")));
    };
    let body = ProviderEvent {
        id: event.to_string(),
        event: EVENT_CAPTURED.into(),
        created_at: gate.now(),
        order_id: order,
        amount_paise: 60000,
        currency: "INR".into(),
    }
    .to_body();
    let signature = sign_webhook(load::SECRET, &body);
    let (s, w) = call(
        client,
        format!("{base}/webhooks/razorpay"),
        None,
        body,
        &[(wire::SIGNATURE, &signature), (wire::EVENT_ID, event)],
    )
    .await?;
    // A capture acted on is 200 with `allow`; a duplicate or an ignored event is 200 too.
    Ok(
        (s != 200 || w.get("decision").and_then(Value::as_str) != Some("allow"))
            .then(|| format!("webhook: {s} {w}")),
    )
}

/// One client of one cell.
#[allow(clippy::too_many_arguments)]
async fn client(
    gate: Arc<LoadGate>,
    http: Option<(String, Keys)>,
    tenant: String,
    index: usize,
    cell_no: usize,
    work: Work,
    deadline: Instant,
) -> Result<ClientRun> {
    let mut run = ClientRun::default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(30))
        .build()?;
    let mut scratch = Histograms::new();
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let event = format!("evt_http_{cell_no}_{tenant}_{index}_{n}");
        let t = Instant::now();
        let problem = match (&http, work) {
            (None, Work::Propose) => {
                let p = gate.propose(&tenant, "buyer-agent", DENIED, None).await?;
                (p.decision != Decision::Deny(Reason::MerchantNotAllowed))
                    .then(|| format!("propose: {:?}", p.decision))
            }
            (None, Work::Flow) => load::flow(&gate, &tenant, &event, &mut scratch).await?,
            (Some((base, keys)), Work::Propose) => {
                let (s, p) = call(
                    &client,
                    format!("{base}/v1/requests"),
                    Some(&keys.agent),
                    DENIED.to_vec(),
                    &[],
                )
                .await?;
                (s != 403
                    || p.get("reason").and_then(Value::as_str) != Some("MERCHANT_NOT_ALLOWED"))
                .then(|| format!("propose: {s} {p}"))
            }
            (Some((base, keys)), Work::Flow) => {
                http_flow(&client, base, keys, &gate, &event).await?
            }
        };
        record(&mut run.histograms, work.name(), t)?;
        scratch.clear();
        match problem {
            None => run.completed += 1,
            Some(why) => {
                run.unexpected += 1;
                run.first_unexpected.get_or_insert(why);
            }
        }
    }
    Ok(run)
}

/// One run of one cell's clients.
struct Part {
    completed: u64,
    seconds: f64,
    unexpected: u64,
    first_unexpected: Option<String>,
    histogram: Option<hdrhistogram::Histogram<u64>>,
}

/// Runs `clients` clients of `work` on one path for `seconds`.
#[allow(clippy::too_many_arguments)]
async fn run_part(
    gate: &Arc<LoadGate>,
    base: Option<&str>,
    keys: &[Keys],
    cell_no: usize,
    work: Work,
    clients: usize,
    seconds: Duration,
) -> Result<Part> {
    let start = Instant::now();
    let deadline = start + seconds;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let http = base.map(|b| (b.to_string(), keys[i].clone()));
            tokio::spawn(client(
                gate.clone(),
                http,
                tenant_id(i),
                i,
                cell_no,
                work,
                deadline,
            ))
        })
        .collect();
    let mut runs = Vec::new();
    for t in tasks {
        runs.push(t.await.context("a load client panicked")??);
    }
    let mut part = Part {
        completed: 0,
        seconds: start.elapsed().as_secs_f64(),
        unexpected: 0,
        first_unexpected: None,
        histogram: None,
    };
    for run in runs {
        part.completed += run.completed;
        part.unexpected += run.unexpected;
        if part.first_unexpected.is_none() {
            part.first_unexpected = run.first_unexpected;
        }
        for (_, h) in run.histograms {
            match &mut part.histogram {
                Some(all) => all.add(&h).context("merging histograms")?,
                None => part.histogram = Some(h),
            }
        }
    }
    Ok(part)
}

/// One cell from its parts: counts and seconds added, histograms merged.
fn summarize(clients: usize, work: Work, path: Path, parts: Vec<Part>) -> Result<HttpCell> {
    let mut out = HttpCell {
        clients,
        work: work.name().to_string(),
        path,
        completed: 0,
        seconds: 0.0,
        per_sec: None,
        p50_ms: None,
        p95_ms: None,
        p99_ms: None,
        unexpected: 0,
        first_unexpected: None,
    };
    let mut all: Option<hdrhistogram::Histogram<u64>> = None;
    for part in parts {
        out.completed += part.completed;
        out.seconds += part.seconds;
        out.unexpected += part.unexpected;
        if out.first_unexpected.is_none() {
            out.first_unexpected = part.first_unexpected;
        }
        if let Some(h) = part.histogram {
            match &mut all {
                Some(a) => a.add(&h).context("merging histograms")?,
                None => all = Some(h),
            }
        }
    }
    out.per_sec = super::stats::rate(out.completed, out.seconds);
    if let Some(h) = all.filter(|h| !h.is_empty()) {
        let ms = |q: f64| Some(h.value_at_quantile(q) as f64 / 1000.0);
        out.p50_ms = ms(0.50);
        out.p95_ms = ms(0.95);
        out.p99_ms = ms(0.99);
    }
    Ok(out)
}

/// The order the halves of a cell pair run in: in process, HTTP, HTTP, in
/// process, so that a drift of the machine during the pair (a warming
/// cache, a growing table, a neighbour's load) weighs on both paths alike.
const ABBA: [Path; 4] = [Path::InProcess, Path::Http, Path::Http, Path::InProcess];

pub(in crate::perf) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The whole phase.
pub(super) async fn measure(
    admin_url: &str,
    plan: &HttpPlan,
    progress: &Progress,
) -> Result<(HttpLoad, Vec<String>)> {
    let started = Instant::now();
    let mut notes = Vec::new();
    let most = plan.clients.iter().copied().max().unwrap_or(1);
    let pool = load::one_per_client(most);
    let (db, gate) = load::world(admin_url, most, pool).await?;
    let now = gate.now();
    let mut keys = Vec::new();
    for i in 0..most {
        let tenant = tenant_id(i);
        let agent = gate.issue_key(&tenant, "buyer-agent", now).await?;
        let human = gate.issue_key(&tenant, "finance-lead", now).await?;
        keys.push(Keys {
            agent: agent.token,
            human: human.token,
        });
    }
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = wire::WireConfig {
        concurrency_limit: most.max(64),
        ..wire::WireConfig::default()
    };
    let server = tokio::spawn(wire::serve(listener, gate.clone(), config, async move {
        let _ = rx.await;
    }));
    let mut cells = Vec::new();
    let mut cost = Vec::new();
    let mut cell_no = 0;
    for &clients in &plan.clients {
        progress.say(&format!("http: {clients} clients"));
        for work in [Work::Propose, Work::Flow] {
            let mut parts: BTreeMap<Path, Vec<Part>> = BTreeMap::new();
            for path in ABBA {
                cell_no += 1;
                let url = (path == Path::Http).then_some(base.as_str());
                let part =
                    run_part(&gate, url, &keys, cell_no, work, clients, plan.cell / 2).await?;
                parts.entry(path).or_default().push(part);
            }
            let mut pair = Vec::new();
            for (path, parts) in parts {
                let c = summarize(clients, work, path, parts)?;
                if c.unexpected > 0 {
                    notes.push(format!(
                        "{clients} clients, {} {:?}: {} operations did not do what the cell \
                         expects (first: {}).",
                        c.work,
                        c.path,
                        c.unexpected,
                        c.first_unexpected.as_deref().unwrap_or("?")
                    ));
                }
                pair.push(c);
            }
            cost.push(WireCost {
                clients,
                work: work.name().to_string(),
                p50_ratio: ratio(pair[1].p50_ms, pair[0].p50_ms),
                throughput_ratio: ratio(pair[1].per_sec, pair[0].per_sec),
            });
            cells.extend(pair);
        }
    }
    let (slow_body, slow_body_skipped) = match (&plan.slow_body, keys.first()) {
        (Some(attack), Some(k)) if attack.connections > 0 => {
            progress.say(&format!(
                "http: slow-body attack, {} connections for {} s, beside the same probes without it",
                attack.connections,
                attack.seconds.as_secs()
            ));
            let figures = super::slow_body::measure(gate.clone(), &k.agent, attack).await?;
            for (probe, name) in [
                (&figures.proposal, "proposal"),
                (&figures.healthz, "healthz"),
            ] {
                for (window, l) in [("quiet", &probe.quiet), ("attack", &probe.attack)] {
                    if l.unexpected > 0 {
                        notes.push(format!(
                            "slow-body attack, {name} probe, {window}: {} answers were not the \
                             expected one (first: {}).",
                            l.unexpected,
                            l.first_unexpected.as_deref().unwrap_or("?")
                        ));
                    }
                }
            }
            (Some(figures), None)
        }
        _ => (None, Some("`--slow-body-connections 0`".to_string())),
    };
    let _ = tx.send(());
    server
        .await
        .context("the server task")?
        .context("serving")?;
    gate.pool().close().await;
    drop(gate);
    db.drop().await?;
    Ok((
        HttpLoad {
            cell_seconds: plan.cell.as_secs_f64(),
            clock_speed: load::CLOCK_SPEED,
            cells,
            cost,
            p50_overhead_goal: P50_OVERHEAD_GOAL,
            goal_clients: GOAL_CLIENTS,
            seconds: started.elapsed().as_secs_f64(),
            workers: Some(WORKERS),
            pool: Some(pool),
            slow_body,
            slow_body_skipped,
        },
        notes,
    ))
}
