//! `harness perf --db`: the database-backed gate under concurrent load, side
//! by side with pgbench on the same server.
//!
//! Guarantees:
//! - For each client count, every cell runs back to back in one pass:
//!   pgbench's built-in TPC-B-like script (`pgbench -c N -j N -T T -M
//!   prepared`, in a database of its own initialised by `pgbench -i`), then
//!   the gate's propose and full-flow cells in both shapes. So each ratio is
//!   between figures taken seconds apart on the same server.
//! - The gate is the project's own `gate::service::Gate` on one fresh migrated
//!   database for the phase (`gate::db::fresh_database`), seeded with the
//!   standard world made roomy for load (see [`load_seed`]); its pool has one
//!   connection per client of the largest count. The cells run one after
//!   another on it, so later cells see the rows earlier ones wrote (as a
//!   server in service does). Every operation's outcome is checked: one that
//!   does not do what the cell expects is counted (and reported), not timed
//!   as a success.
//! - At the client counts of [`LoadPlan::unguarded_clients`], the two
//!   tenant-per-client cells run once more in the same pass, on a second
//!   fresh database whose guards [`unguarded::strip`] removed: what the
//!   guards cost, beside the figures they cost it in.
//! - After the passes, one cell measures the delay from a commit to a kept
//!   checkpoint covering it, with the gate's checkpoint signer running at
//!   `spendgate serve`'s default interval ([`checkpoint_delay`]).
//! - After the passes, [`LoadPlan::row_security_pairs`] pairs of flow cells
//!   (tenant per client, [`PROFILED_CLIENTS`] clients) run on two more fresh
//!   databases seeded alike, alternated: row-level security off (and a gate
//!   that sets no tenant token), then on (`spendgate_row_security(true)`, a
//!   gate binding each transaction to its tenant): what it costs
//!   ([`RowSecurity`]). The main cells run as a default deployment does,
//!   with it off.
//! - After those, [`LoadPlan::counter_trigger_pairs`] pairs of flow cells
//!   for each of [`COUNTER_TRIGGERS`] alone and for all of them, each on
//!   two more fresh databases seeded alike, alternated: every counter
//!   trigger disabled, then the ones measured enabled (as the migrations'
//!   owner, `ALTER TABLE … DISABLE/ENABLE ALWAYS TRIGGER`): what each costs
//!   ([`CounterTriggers`]). Both kinds of pair run through one mechanism
//!   ([`paired_cells`], a [`Switch`] per kind).
//! - Latencies go into HDR histograms (`hdrhistogram`), per operation.
//! - Bounded: every cell stops at its deadline; pgbench gets `-T`. Only the
//!   server of `DATABASE_URL` (loopback or unix socket: `harness db run`) is used.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use gate::db::FreshDatabase;
use gate::provider::InProcessProvider;
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{Clock, Gate, ProviderEvent, Seed, TenantSeed, sign_webhook};
use gate::{Decision, Reason};
use hdrhistogram::Histogram;
use scenarios::generate::standard_world;
use serde::{Deserialize, Serialize};
use sqlx::{Connection, Executor, PgConnection};

use super::Progress;
use super::checkpoint_delay::{self, CheckpointDelay};
use super::cpu;
use super::statements::{self, Breakdown};
use super::stats::thousands;
use super::unguarded::{self, Guards};

/// At least the 32 bytes `Gate::new` requires.
pub(super) const SECRET: &[u8] = b"spendgate-perf-load-webhook-secret-0123456789";
/// The simulated clock runs this many times faster than real time, so that
/// the one-minute rate windows of [`load_seed`] hold a fraction of a second of
/// real proposals (a fixed clock would put every proposal of the run in the
/// window, and each decision would read them all).
pub const CLOCK_SPEED: u32 = 600;
/// pgbench's scale factor (`pgbench -i -s`): its default, one branch row.
pub const PGBENCH_SCALE: u32 = 1;

/// What the load phase runs.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub clients: Vec<usize>,
    pub cell: Duration,
    /// The client counts whose latencies are reported.
    pub latency_clients: Vec<usize>,
    /// The gate pool's size, at most; `None`: [`POOL_PER_CPU`] per CPU.
    pub pool: Option<u32>,
    /// CPUs of this machine (the server's too): the default pool's size and
    /// the runtime's worker threads ([`worker_threads`]) follow from it.
    pub cpus: usize,
    /// The client counts at which the tenant-per-client cells run again, in
    /// the same pass, on a copy of the schema without its guards
    /// ([`unguarded`]); empty: not at all.
    pub unguarded_clients: Vec<usize>,
    /// Pairs of flow cells (tenant per client, [`PROFILED_CLIENTS`]
    /// clients) with row-level security off and on, alternated on one
    /// database ([`RowSecurity`]); 0: none.
    pub row_security_pairs: usize,
    /// Pairs of flow cells (tenant per client, [`PROFILED_CLIENTS`]
    /// clients) with the counter triggers disabled and enabled, for each
    /// trigger alone and all together ([`CounterTriggers`]); 0: none.
    pub counter_trigger_pairs: usize,
}

/// The two shapes of load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Every client proposes for the same agent of one tenant.
    OneTenant,
    /// Each client has a tenant of its own (a copy of the standard `acme`).
    TenantPerClient,
}

impl Shape {
    pub fn label(self) -> &'static str {
        match self {
            Shape::OneTenant => "one tenant",
            Shape::TenantPerClient => "tenant per client",
        }
    }
}

/// What one client does in a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// A proposal the merchant allowlist denies: the whole decision path,
    /// recorded and appended to the ledger, no reservation.
    Propose,
    /// propose (allowed) → checkout → pay → signed capture webhook.
    Flow,
    /// propose (step-up) → approve; only the approval is timed.
    Approve,
}

/// One cell's throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub completed: u64,
    pub seconds: f64,
    pub per_sec: Option<f64>,
    /// Operations whose outcome was not the one the cell expects.
    pub unexpected: u64,
    pub first_unexpected: Option<String>,
    /// CPU per operation over the cell (see [`cpu`]).
    pub cpu: Option<cpu::PerOp>,
}

/// One client count: pgbench and the gate side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRow {
    pub clients: usize,
    pub pgbench_tps: Option<f64>,
    pub pgbench_error: Option<String>,
    /// CPU per pgbench transaction (see [`cpu`]).
    pub pgbench_cpu: Option<cpu::PerOp>,
    pub propose_one_tenant: Option<Cell>,
    pub propose_tenant_per_client: Option<Cell>,
    pub flow_one_tenant: Option<Cell>,
    pub flow_tenant_per_client: Option<Cell>,
}

/// The tenant-per-client cells on a copy of the schema without its guards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unguarded {
    /// What the copy was without: the schema's CHECK constraints, foreign
    /// keys and the triggers that guard.
    pub removed: Guards,
    pub rows: Vec<UnguardedRow>,
}

/// One client count on the copy without guards, in the same pass as the
/// [`LoadRow`] of that count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnguardedRow {
    pub clients: usize,
    pub propose_tenant_per_client: Option<Cell>,
    pub flow_tenant_per_client: Option<Cell>,
}

/// The purchase flow, tenant per client, with one switch off and on
/// ([`Switch`]): alternated cells on two fresh databases seeded alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pairs {
    pub clients: usize,
    /// The cells with the switch off, in the order run.
    pub off: Vec<Cell>,
    /// The cells with it on, each run just after the "off" cell of its pair.
    pub on: Vec<Cell>,
}

/// The flow with the database's row-level security off and on
/// (`migrations/*_row_security.sql`): "off" by a gate that sets no tenant
/// token per transaction on tables without row-level security, "on" by a
/// gate that binds each transaction to its tenant with it enforced.
pub type RowSecurity = Pairs;

/// The counter triggers (`migrations/*_counters_agree.sql`), each a
/// deferred constraint trigger: its name and the tables it is on.
pub const COUNTER_TRIGGERS: &[(&str, &[&str])] = &[
    (
        "daily_spend_counts_requests",
        &["daily_spend", "payment_requests"],
    ),
    (
        "delegation_spend_counts_requests",
        &["delegations", "payment_requests"],
    ),
    ("provider_payment_carried_by_event", &["provider_payments"]),
];

/// The flow with the counter triggers disabled and enabled: one row per
/// trigger alone, then one with all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterTriggers {
    pub rows: Vec<CounterTriggerRow>,
}

/// The flow with every counter trigger disabled ("off") and with `enabled`
/// enabled, the others disabled ("on").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterTriggerRow {
    pub enabled: Vec<String>,
    pub pairs: Pairs,
}

/// Percentiles of one operation at one client count in one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRow {
    pub operation: String,
    pub shape: Shape,
    pub clients: usize,
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The whole load phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    pub cell_seconds: f64,
    /// Connections in the gate's pool.
    pub pool: u32,
    /// Worker threads of the phase's runtime.
    pub workers: usize,
    pub pgbench: String,
    pub pgbench_scale: u32,
    pub clock_speed: u32,
    pub rows: Vec<LoadRow>,
    pub latency: Vec<LatencyRow>,
    /// Where the server's time went in the four cells at [`PROFILED_CLIENTS`]
    /// clients (pg_stat_statements), when the server could say.
    pub statements: Option<Breakdown>,
    /// The tenant-per-client cells again on a copy without the guards.
    pub unguarded: Option<Unguarded>,
    /// From an operation's commit to a kept checkpoint covering it, with the
    /// signer `spendgate serve` runs ([`super::checkpoint_delay`]).
    #[serde(default)]
    pub checkpoint_delay: Option<CheckpointDelay>,
    /// The flow with row-level security off and on, side by side.
    #[serde(default)]
    pub row_security: Option<RowSecurity>,
    /// The flow with the counter triggers disabled and enabled, side by side.
    #[serde(default)]
    pub counter_triggers: Option<CounterTriggers>,
    pub seconds: f64,
}

/// The checkpoint cell's shortest run: five of the signer's default
/// intervals, so its delays are many ticks' worth.
const DELAY_CELL: Duration = Duration::from_secs(5);

/// The client count whose cells `pg_stat_statements` breaks down (the
/// goals' count), or the largest count of a plan without it.
pub const PROFILED_CLIENTS: usize = 8;

/// A clock that starts at the standard world's "now" and runs
/// [`CLOCK_SPEED`] times faster than the wall clock.
#[derive(Debug)]
struct Accelerated {
    start: DateTime<Utc>,
    origin: Instant,
}

impl Clock for Accelerated {
    fn now(&self) -> DateTime<Utc> {
        let real = self.origin.elapsed();
        let simulated = real * CLOCK_SPEED;
        self.start + chrono::Duration::from_std(simulated).unwrap_or_default()
    }
}

/// The standard world's `acme`, roomy for load: rate limits a load cannot
/// reach (a million per one-minute window), caps and the delegation budget
/// far above what a run spends, a policy valid for decades; everything else
/// (catalog, allowlists, per-transaction cap, approval threshold) as in the
/// spec. `acme` itself and `tenants` copies of it under the ids `t00`, `t01`, ….
fn load_seed(tenants: usize) -> Seed {
    let standard = standard_world().seed();
    let Some(mut acme) = standard.tenants.into_iter().next() else {
        return Seed { tenants: vec![] };
    };
    acme.policy.velocity.max_proposals = 1_000_000;
    acme.policy.velocity.window_minutes = 1;
    acme.policy.denial_rate.max_denials = 1_000_000;
    acme.policy.denial_rate.window_minutes = 1;
    acme.policy.daily_cap_paise = 1_000_000_000_000_000;
    acme.policy.valid_until = "2099-12-31T23:59:59Z"
        .parse()
        .expect("a literal RFC 3339 instant");
    for d in &mut acme.delegations {
        d.budget_paise = 1_000_000_000_000_000;
    }
    let copies: Vec<TenantSeed> = (0..tenants)
        .map(|i| TenantSeed {
            id: tenant_id(i),
            ..acme.clone()
        })
        .collect();
    Seed {
        tenants: std::iter::once(acme).chain(copies).collect(),
    }
}

pub(super) fn tenant_id(i: usize) -> String {
    format!("t{i:02}")
}

/// The tenant client `i` works in.
fn tenant_of(shape: Shape, i: usize) -> String {
    match shape {
        Shape::OneTenant => "acme".into(),
        Shape::TenantPerClient => tenant_id(i),
    }
}

/// Latencies of one cell, per operation, in microseconds.
pub(super) type Histograms = BTreeMap<&'static str, Histogram<u64>>;

fn new_histogram() -> Result<Histogram<u64>> {
    // 1 µs .. 100 s at 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3).context("creating an HDR histogram")
}

pub(super) fn record(h: &mut Histograms, op: &'static str, since: Instant) -> Result<()> {
    let micros = u64::try_from(since.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, 100_000_000);
    match h.get_mut(op) {
        Some(hist) => hist.record(micros),
        None => {
            let mut hist = new_histogram()?;
            hist.record(micros)?;
            h.insert(op, hist);
            Ok(())
        }
    }
    .context("recording a latency")
}

/// What one client did.
#[derive(Default)]
pub(super) struct ClientRun {
    pub(super) completed: u64,
    pub(super) unexpected: u64,
    pub(super) first_unexpected: Option<String>,
    pub(super) histograms: Histograms,
}

pub(super) type LoadGate = Gate<InProcessProvider>;

/// One client: `work` in a loop until `deadline`.
async fn client(
    gate: Arc<LoadGate>,
    tenant: String,
    index: usize,
    cell_no: usize,
    work: Work,
    deadline: Instant,
) -> Result<ClientRun> {
    let mut run = ClientRun::default();
    let denied = br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk setup"}"#;
    let step_up = br#"{"sku":"CLOUD-TEAM","quantity":1,"purpose":"team plan"}"#;
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let problem = match work {
            Work::Propose => {
                let t = Instant::now();
                let p = gate.propose(&tenant, "buyer-agent", denied, None).await?;
                record(&mut run.histograms, "propose", t)?;
                (p.decision != Decision::Deny(Reason::MerchantNotAllowed))
                    .then(|| format!("propose: {:?}", p.decision))
            }
            Work::Approve => {
                let p = gate.propose(&tenant, "buyer-agent", step_up, None).await?;
                match (p.decision, p.request_id) {
                    (Decision::StepUp(_), Some(request)) => {
                        let t = Instant::now();
                        let a = gate.approve(&tenant, &request, "finance-lead").await?;
                        record(&mut run.histograms, "approve", t)?;
                        (!a.is_ok()).then(|| format!("approve: {:?}", a.decision))
                    }
                    (d, _) => Some(format!("propose for approval: {d:?}")),
                }
            }
            Work::Flow => {
                let event = format!("evt_{cell_no}_{tenant}_{index}_{n}");
                flow(&gate, &tenant, &event, &mut run.histograms).await?
            }
        };
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

/// One full purchase: `None` when every step did what it should.
pub(super) async fn flow(
    gate: &LoadGate,
    tenant: &str,
    event: &str,
    h: &mut Histograms,
) -> Result<Option<String>> {
    let allowed = br#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"team cloud credits"}"#;
    let t = Instant::now();
    let p = gate.propose(tenant, "buyer-agent", allowed, None).await?;
    record(h, "propose (allowed)", t)?;
    let Some(request) = p.request_id.filter(|_| p.decision == Decision::Allow) else {
        return Ok(Some(format!("propose: {:?}", p.decision)));
    };
    let t = Instant::now();
    let c = gate.checkout(tenant, &request, "finance-lead").await?;
    record(h, "checkout", t)?;
    let Some(authority) = c.id.clone().filter(|_| c.is_ok()) else {
        return Ok(Some(format!("checkout: {:?}", c.decision)));
    };
    let t = Instant::now();
    let paid = gate.pay(tenant, &authority, "finance-lead").await?;
    record(h, "pay", t)?;
    let Some(order) = paid.id.clone().filter(|_| paid.is_ok()) else {
        return Ok(Some(format!("pay: {:?}", paid.decision)));
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
    let signature = sign_webhook(SECRET, &body);
    let t = Instant::now();
    let event_id = event.to_string();
    let hook = gate
        .webhook(&body, Some(&signature), Some(&event_id))
        .await?;
    record(h, "webhook", t)?;
    Ok((!hook.is_ok()).then(|| format!("webhook: {:?}", hook.decision)))
}

/// A pool of one connection per client of `clients`.
pub(super) fn one_per_client(clients: usize) -> u32 {
    u32::try_from(clients.max(1)).unwrap_or(u32::MAX)
}

/// Connections per CPU in the load pool when `--pool` does not say: a pool
/// that fits the server, which shares this machine. sqlx hands out its idle
/// connections in the order they came back, so a pool larger than the work
/// needs cycles every operation through all of them, each colder in the
/// server's caches. Measured on 2026-12-05 (2 CPUs), one tenant at 1, 8 and
/// 16 clients: 995, 1,171, 1,159/s and 866, 1,090, 1,016/s on a pool of 16;
/// 1,136, 1,262, 1,211/s and 1,049, 1,202, 1,209/s on 8; tenant per client
/// at 8 clients 2,367 and 2,173/s on 16, 2,495 and 2,498/s on 8.
pub(super) const POOL_PER_CPU: usize = 4;

/// The load pool's size: `asked` (`--pool`), or [`POOL_PER_CPU`] per CPU of
/// `cpus`; never more than one connection per client of the largest count
/// `most` (a larger pool would only open connections nobody uses, or more
/// than the server allows).
fn pool_size(asked: Option<u32>, most: usize, cpus: usize) -> u32 {
    let most = one_per_client(most);
    let fits = u32::try_from(cpus.max(1).saturating_mul(POOL_PER_CPU)).unwrap_or(u32::MAX);
    asked.unwrap_or(fits).clamp(1, most)
}

/// Worker threads of the load phase's runtime on a machine of `cpus` CPUs:
/// a quarter of them, at least one. The gate and the load driver in this
/// process take about a fifth of the machine's CPU at 8 clients (the
/// server's backends, on the same machine, take the rest), and a second
/// worker on 2 CPUs mostly added wakeups from one thread to the other: CPU in
/// this process per proposal at 8 clients, tenant per client, 140, 146,
/// 141 µs with two workers and 126, 125, 123 µs with one; per flow 1,012,
/// 948, 1,039 µs and 871, 890, 856 µs (three alternated pairs, 2026-12-05).
pub(super) fn worker_threads(cpus: usize) -> usize {
    (cpus / 4).max(1)
}

/// One fresh database for the whole phase, seeded with `acme` and one copy
/// per client of the largest count, and a gate on a pool of `pool`
/// connections (a cell of fewer clients uses fewer; one of more clients
/// queues them for a connection).
pub(super) async fn world(
    admin_url: &str,
    clients: usize,
    pool: u32,
) -> Result<(FreshDatabase, Arc<LoadGate>)> {
    let db = gate::db::fresh_database(admin_url).await?;
    let gate = seeded_gate(&db, clients, pool, false).await?;
    Ok((db, gate))
}

/// As [`world`], on a fresh database whose guards [`unguarded::strip`]
/// removed first (as the migrations' owner); with what it removed.
async fn unguarded_world(
    admin_url: &str,
    clients: usize,
    pool: u32,
) -> Result<(FreshDatabase, Arc<LoadGate>, Guards)> {
    let db = gate::db::fresh_database(admin_url).await?;
    let owner = gate::db::server_urls(admin_url).await?.owner;
    let removed = unguarded::strip(&with_database(&owner, db.name())?).await?;
    let gate = seeded_gate(&db, clients, pool, false).await?;
    Ok((db, gate, removed))
}

/// The gate of a load world on `db`: its pool opened whole, then seeded.
async fn seeded_gate(
    db: &FreshDatabase,
    clients: usize,
    pool: u32,
    row_security: bool,
) -> Result<Arc<LoadGate>> {
    let size = pool.max(1);
    let pool = gate::db::pool_options(size)
        .min_connections(size)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(db.connect_options().clone())
        .await
        .context("opening the load pool")?;
    let clock = Accelerated {
        start: standard_world().now,
        origin: Instant::now(),
    };
    let gate = Gate::new(pool, InProcessProvider::new(), SECRET, Arc::new(clock))?
        .with_row_security(row_security);
    warm(gate.pool(), size).await?;
    gate.seed(&load_seed(clients)).await?;
    Ok(Arc::new(gate))
}

/// Opens `size` connections of `pool` before the clock starts.
async fn warm(pool: &sqlx::PgPool, size: u32) -> Result<()> {
    let mut held = Vec::new();
    for _ in 0..size {
        held.push(pool.acquire().await.context("warming the load pool")?);
    }
    drop(held);
    Ok(())
}

/// What differs between the two databases of a pair: what the migrations'
/// owner runs on each after seeding (empty: nothing), and whether the "on"
/// side's gate binds each transaction inside a tenant to it.
struct Switch {
    off_sql: String,
    on_sql: String,
    on_binds_tenant: bool,
}

impl Switch {
    /// Row-level security disabled (a gate that sets no tenant token), then
    /// enabled (`spendgate_row_security(true)`, a gate that binds every
    /// transaction inside a tenant to it).
    fn row_security() -> Self {
        Switch {
            off_sql: String::new(),
            on_sql: "SELECT spendgate_row_security(true)".into(),
            on_binds_tenant: true,
        }
    }

    /// Every counter trigger disabled, then `enabled` enabled (ALWAYS, as
    /// the migration enables them) and the others disabled.
    fn counter_triggers(enabled: &[&str]) -> Self {
        let sql = |on: &[&str]| {
            let mut sql = String::new();
            for (name, tables) in COUNTER_TRIGGERS {
                let state = match on.contains(name) {
                    true => "ENABLE ALWAYS",
                    false => "DISABLE",
                };
                for table in *tables {
                    sql.push_str(&format!("ALTER TABLE {table} {state} TRIGGER {name};\n"));
                }
            }
            sql
        };
        Switch {
            off_sql: sql(&[]),
            on_sql: sql(enabled),
            on_binds_tenant: false,
        }
    }
}

/// The counter triggers the migrations leave enabled on the database at
/// `url`, in [`COUNTER_TRIGGERS`]' order: the set the product ships with.
async fn shipped_counter_triggers(url: &str) -> Result<Vec<&'static str>> {
    let mut conn = PgConnection::connect(url)
        .await
        .context("connecting to read which counter triggers are enabled")?;
    let enabled: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT tgname::text FROM pg_trigger WHERE tgenabled <> 'D'")
            .fetch_all(&mut conn)
            .await
            .context("reading which counter triggers are enabled")?;
    Ok(COUNTER_TRIGGERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| enabled.iter().any(|e| e == name))
        .collect())
}

/// Runs `sql` (the harness's own text) on database `db` of the server of
/// `owner`, as the migrations' owner.
async fn as_owner(owner: &str, db: &FreshDatabase, sql: &str) -> Result<()> {
    if sql.is_empty() {
        return Ok(());
    }
    let mut conn = PgConnection::connect(&with_database(owner, db.name())?)
        .await
        .context("connecting as the owner to switch a pair's side")?;
    conn.execute(sqlx::AssertSqlSafe(sql))
        .await
        .with_context(|| format!("switching a pair's side: {sql}"))?;
    conn.close().await?;
    Ok(())
}

/// Where and how long the alternated pairs of flow cells run: `pairs`
/// pairs, tenant per client at `clients` clients, `seconds` a cell.
struct PairedRun<'a> {
    admin_url: &'a str,
    owner: &'a str,
    clients: usize,
    pairs: usize,
    seconds: Duration,
    server: Option<cpu::Server>,
}

/// `run.pairs` pairs of flow cells on two fresh databases seeded alike (each
/// with a provider of its own, so that their order ids never meet),
/// differing only in `switch`: in each pair a cell on the "off" one, then
/// one on the "on" one. The notes name every cell whose operations did not
/// do what it expects, the pair named by `what`.
async fn paired_cells(
    run: &PairedRun<'_>,
    cell_no: &mut usize,
    switch: &Switch,
    what: &str,
    notes: &mut Vec<String>,
) -> Result<Pairs> {
    let PairedRun {
        admin_url,
        owner,
        clients,
        pairs,
        seconds,
        server,
    } = *run;
    let size = one_per_client(clients);
    let off_db = gate::db::fresh_database(admin_url).await?;
    let on_db = gate::db::fresh_database(admin_url).await?;
    let off = seeded_gate(&off_db, clients, size, false).await?;
    let on = seeded_gate(&on_db, clients, size, switch.on_binds_tenant).await?;
    as_owner(owner, &off_db, &switch.off_sql).await?;
    as_owner(owner, &on_db, &switch.on_sql).await?;
    let off_url = with_database(owner, off_db.name())?;
    let on_url = with_database(owner, on_db.name())?;
    let mut out = Pairs {
        clients,
        off: Vec::new(),
        on: Vec::new(),
    };
    for _ in 0..pairs {
        for switched in [false, true] {
            *cell_no += 1;
            let served = match switched {
                true => Served {
                    gate: &on,
                    owner_url: &on_url,
                },
                false => Served {
                    gate: &off,
                    owner_url: &off_url,
                },
            };
            let (c, _) = cell(
                served,
                *cell_no,
                Shape::TenantPerClient,
                Work::Flow,
                clients,
                seconds,
                server,
            )
            .await?;
            match switched {
                true => out.on.push(c),
                false => out.off.push(c),
            }
        }
    }
    on.pool().close().await;
    off.pool().close().await;
    drop((on, off));
    off_db.drop().await?;
    on_db.drop().await?;
    notes.extend(unexpected_notes(&out, what));
    Ok(out)
}

/// Notes for the cells of `pairs` whose operations did not do what the
/// cell expects; `what` names the pair.
fn unexpected_notes(pairs: &Pairs, what: &str) -> Vec<String> {
    pairs
        .off
        .iter()
        .chain(&pairs.on)
        .filter(|c| c.unexpected > 0)
        .map(|c| {
            format!(
                "{} clients, the flow with {what}: {} operations did not do what the cell \
                 expects (first: {}).",
                pairs.clients,
                c.unexpected,
                c.first_unexpected.as_deref().unwrap_or("?")
            )
        })
        .collect()
}

/// A load world's gate, and its database's URL as the migrations' owner
/// (who may `ANALYZE` it; the gate's role owns nothing).
#[derive(Clone, Copy)]
struct Served<'a> {
    gate: &'a Arc<LoadGate>,
    owner_url: &'a str,
}

/// Runs one cell; returns its throughput and its histograms. The planner's
/// statistics of the world's database are brought up to date first, outside
/// the window (see [`analyze`]).
async fn cell(
    world: Served<'_>,
    cell_no: usize,
    shape: Shape,
    work: Work,
    clients: usize,
    seconds: Duration,
    server: Option<cpu::Server>,
) -> Result<(Cell, Histograms)> {
    analyze(world.owner_url).await?;
    let gate = world.gate;
    let cpu_before = cpu::read(server);
    let start = Instant::now();
    let deadline = start + seconds;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            tokio::spawn(client(
                gate.clone(),
                tenant_of(shape, i),
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
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_after = cpu::read(server);
    let mut histograms = Histograms::new();
    let mut out = Cell {
        completed: 0,
        seconds: elapsed,
        per_sec: None,
        unexpected: 0,
        first_unexpected: None,
        cpu: None,
    };
    for run in runs {
        out.completed += run.completed;
        out.unexpected += run.unexpected;
        if out.first_unexpected.is_none() {
            out.first_unexpected = run.first_unexpected;
        }
        for (op, h) in run.histograms {
            match histograms.get_mut(op) {
                Some(all) => all.add(&h).context("merging histograms")?,
                None => {
                    histograms.insert(op, h);
                }
            }
        }
    }
    out.per_sec = super::stats::rate(out.completed, elapsed);
    out.cpu = cpu::per_op(cpu_before, cpu_after, out.completed);
    Ok((out, histograms))
}

fn latency_rows(
    h: &Histograms,
    shape: Shape,
    clients: usize,
    only: Option<&str>,
) -> Vec<LatencyRow> {
    let ms = |micros: u64| micros as f64 / 1000.0;
    h.iter()
        .filter(|(op, _)| only.is_none_or(|o| o == **op))
        .map(|(op, hist)| LatencyRow {
            operation: (*op).to_string(),
            shape,
            clients,
            count: hist.len(),
            p50_ms: ms(hist.value_at_quantile(0.50)),
            p95_ms: ms(hist.value_at_quantile(0.95)),
            p99_ms: ms(hist.value_at_quantile(0.99)),
            max_ms: ms(hist.max()),
        })
        .collect()
}

/// pgbench next to the server's `initdb`, else on PATH.
fn pgbench_path() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| PathBuf::from("pgbench"))
}

/// `url` with its database replaced by `database`.
pub(super) fn with_database(url: &str, database: &str) -> Result<String> {
    let Some(scheme_end) = url.find("://") else {
        bail!("not a postgres:// URL");
    };
    let start = scheme_end + 3;
    let (head, query) = match url[start..].find(['?', '#']) {
        Some(i) => url.split_at(start + i),
        None => (url, ""),
    };
    let authority_end = head[start..].find('/').map_or(head.len(), |i| start + i);
    Ok(format!("{}/{database}{query}", &head[..authority_end]))
}

/// Collects, outside every measured window, what the phases before the load
/// left for the server's background workers: `VACUUM` in every database the
/// migrations' owner (`owner_url`) owns, then a `CHECKPOINT` when the role may
/// take one. The database phase empties each scenario's database by deleting
/// its rows and keeps it as a spare, and writes the WAL of hundreds of
/// databases; autovacuum and the checkpointer otherwise did that work during
/// the first cells, which the CPU figures count (the server's CPU per
/// proposal at 1 and 2 clients was 2 to 3 times its 8-client figure under
/// `make bench`, and not in a load run alone).
async fn settle(owner_url: &str) -> Result<()> {
    let mut conn = PgConnection::connect(owner_url)
        .await
        .context("connecting to list the server's databases")?;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database \
          WHERE datallowconn AND NOT datistemplate AND datdba = \
                (SELECT oid FROM pg_roles WHERE rolname = current_user) \
          ORDER BY datname",
    )
    .fetch_all(&mut conn)
    .await
    .context("listing the server's databases")?;
    for name in &names {
        execute(&with_database(owner_url, name)?, "VACUUM")
            .await
            .with_context(|| format!("in {name}"))?;
    }
    // Only a superuser or a member of pg_checkpoint may; the vacuum above is
    // the larger part.
    let may: bool = sqlx::query_scalar(
        "SELECT rolsuper OR pg_has_role(current_user, 'pg_checkpoint', 'MEMBER') \
           FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut conn)
    .await
    .context("asking whether the role may take a checkpoint")?;
    if may {
        conn.execute("CHECKPOINT")
            .await
            .context("taking a checkpoint")?;
    }
    conn.close().await.ok();
    Ok(())
}

/// Brings the planner's statistics of the database at `url` up to date,
/// outside every measured window, as autovacuum keeps a serving database's:
/// its tables grow by thousands of rows a cell. Postgres plans each prepared statement
/// once for the table sizes it sees then, and keeps that plan until the
/// table's statistics change: a primary-key lookup planned on a one-page
/// table is a sequential scan, and stays one as the table grows, until
/// autovacuum next analyzes it (its round comes once a minute). A database
/// vacuumed while empty (as a spare of the database phase may be) ran the
/// load on such plans: 505 proposals/s at 8 clients (tenant per client), and
/// 1,964/s with this before each cell, in back-to-back runs.
async fn analyze(url: &str) -> Result<()> {
    execute(url, "ANALYZE").await
}

/// Runs `statement` on a connection of its own to `url`.
async fn execute(url: &str, statement: &'static str) -> Result<()> {
    let mut conn = PgConnection::connect(url)
        .await
        .with_context(|| format!("connecting to run {statement}"))?;
    conn.execute(statement)
        .await
        .with_context(|| format!("running {statement}"))?;
    conn.close().await.ok();
    Ok(())
}

/// The pgbench database: created, initialised, dropped at the end.
struct Pgbench {
    admin_url: String,
    name: String,
    url: String,
    program: PathBuf,
}

impl Pgbench {
    async fn init(admin_url: &str) -> Result<Pgbench> {
        let name = format!("spendgate_pgbench_{}", std::process::id());
        let mut conn = PgConnection::connect(admin_url)
            .await
            .context("connecting for pgbench")?;
        conn.execute(sqlx::AssertSqlSafe(format!(
            r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#
        )))
        .await?;
        conn.execute(sqlx::AssertSqlSafe(format!(r#"CREATE DATABASE "{name}""#)))
            .await
            .context("creating the pgbench database")?;
        conn.close().await.ok();
        let bench = Pgbench {
            admin_url: admin_url.to_string(),
            url: with_database(admin_url, &name)?,
            name,
            program: pgbench_path(),
        };
        let out = tokio::process::Command::new(&bench.program)
            .args(["-i", "-q", "-s", &PGBENCH_SCALE.to_string(), &bench.url])
            .stdin(Stdio::null())
            .output()
            .await
            .with_context(|| format!("running {} -i", bench.program.display()))?;
        if !out.status.success() {
            bail!(
                "pgbench -i failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(bench)
    }

    /// pgbench at `clients` for `seconds`: (TPS, CPU per transaction, the
    /// server's processes counted).
    async fn run(
        &self,
        clients: usize,
        seconds: Duration,
        server: Option<cpu::Server>,
    ) -> Result<(f64, Option<cpu::PerOp>)> {
        let n = clients.to_string();
        let t = seconds.as_secs().max(1).to_string();
        let before = cpu::read(server);
        let out = tokio::process::Command::new(&self.program)
            .args([
                "-n", "-c", &n, "-j", &n, "-T", &t, "-M", "prepared", &self.url,
            ])
            .stdin(Stdio::null())
            .output()
            .await
            .context("running pgbench")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "pgbench -c {n} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let tps =
            parse_tps(&stdout).with_context(|| format!("no tps in pgbench's output: {stdout}"))?;
        let per_tx =
            parse_transactions(&stdout).and_then(|n| cpu::per_op(before, cpu::read(server), n));
        self.collect_garbage().await?;
        Ok((tps, per_tx))
    }

    /// Vacuums and analyzes pgbench's tables now, outside every measured
    /// window: a run leaves tens of thousands of dead rows behind, and
    /// autovacuum would otherwise collect them during the gate's cells that
    /// follow, charging pgbench's cleanup to the gate (seen as two to three
    /// times the server CPU per proposal at 2 and 4 clients).
    async fn collect_garbage(&self) -> Result<()> {
        execute(&self.url, "VACUUM ANALYZE")
            .await
            .context("vacuuming pgbench's tables")
    }

    async fn drop(self) -> Result<()> {
        let mut conn = PgConnection::connect(&self.admin_url).await?;
        conn.execute(sqlx::AssertSqlSafe(format!(
            r#"DROP DATABASE IF EXISTS "{}" WITH (FORCE)"#,
            self.name
        )))
        .await?;
        Ok(())
    }
}

/// The issue's goal for a proposal's p95, in milliseconds.
const P95_GOAL_MS: f64 = 5.0;

/// What the one-tenant proposals' throughput says about their latency: they
/// are serialized by the tenant's day lock, so each holds it for about
/// 1/throughput, and with N clients always waiting a proposal waits for the
/// others' turns (Little's law: mean latency = N / throughput). A pure
/// function of the figures; none without a one-tenant cell past 1 client.
fn serialized_bound(rows: &[LoadRow], goal_ms: f64) -> Option<String> {
    let (clients, per_sec) = rows
        .iter()
        .filter(|r| r.clients > 1)
        .filter_map(|r| Some((r.clients, r.propose_one_tenant.as_ref()?.per_sec?)))
        .filter(|(_, per_sec)| *per_sec > 0.0)
        .min_by_key(|(clients, _)| clients.abs_diff(8))?;
    let held_ms = 1000.0 / per_sec;
    let mean_ms = held_ms * clients as f64;
    let needed = clients as f64 * 1000.0 / goal_ms;
    Some(format!(
        "One tenant's proposals take turns on its day lock: at {clients} clients {} proposals/s \
         is about {held_ms:.2} ms per turn, and a proposal waits for the other clients' turns \
         (Little's law: mean latency ≈ {clients} / throughput ≈ {mean_ms:.1} ms). A p95 of \
         {goal_ms} ms at {clients} clients on one tenant needs at least {}/s, a turn of at most \
         {:.2} ms: fewer round trips under the lock, not more clients.",
        thousands(per_sec.round() as u64),
        thousands(needed.round() as u64),
        goal_ms / clients as f64
    ))
}

/// The `number of transactions actually processed: N` of pgbench's report.
fn parse_transactions(stdout: &str) -> Option<u64> {
    stdout.lines().find_map(|line| {
        let rest = line
            .trim()
            .strip_prefix("number of transactions actually processed: ")?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

/// The `tps = N` figure of pgbench's report.
fn parse_tps(stdout: &str) -> Option<f64> {
    stdout.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("tps = ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The whole load phase.
pub(super) async fn measure(
    admin_url: &str,
    plan: &LoadPlan,
    progress: &Progress,
) -> Result<(Load, Vec<String>)> {
    let started = Instant::now();
    let mut notes = Vec::new();
    // pgbench gets a database of its own, made by the role that may create
    // databases: the migrations' owner (DATABASE_URL is the application's,
    // which may not, under `harness db run`).
    let owner = gate::db::server_urls(admin_url).await?.owner;
    let bench = Pgbench::init(&owner).await?;
    let most = plan.clients.iter().copied().max().unwrap_or(1);
    let pool = pool_size(plan.pool, most, plan.cpus);
    let (db, gate) = world(admin_url, most, pool).await?;
    // The server whose processes the CPU figures count (see `cpu`).
    let server = sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
        .fetch_one(gate.pool())
        .await
        .ok()
        .and_then(cpu::Server::of_backend);
    let bare = match plan.unguarded_clients.is_empty() {
        true => None,
        false => Some(unguarded_world(admin_url, most, pool).await?),
    };
    // The earlier phases' databases (the corpus runs' emptied spares) and
    // their writes are settled before the first window.
    if let Err(e) = settle(&owner).await {
        notes.push(format!(
            "The earlier phases' databases were not settled before the load ({e:#}): \
             autovacuum and the checkpointer may have charged their work to the first cells."
        ));
    }
    let db_url = with_database(&owner, db.name())?;
    let served = Served {
        gate: &gate,
        owner_url: &db_url,
    };
    let bare_served = match &bare {
        Some((bare_db, bare_gate, _)) => Some((bare_gate, with_database(&owner, bare_db.name())?)),
        None => None,
    };
    let mut unguarded_rows = Vec::new();
    let profiled = if plan.clients.contains(&PROFILED_CLIENTS) {
        PROFILED_CLIENTS
    } else {
        most
    };
    let mut breakdown = None;
    let mut cell_no = 0;
    let mut rows = Vec::new();
    let mut latency = Vec::new();
    for &clients in &plan.clients {
        progress.say(&format!("load: {clients} clients"));
        let (pgbench_tps, pgbench_cpu, pgbench_error) =
            match bench.run(clients, plan.cell, server).await {
                Ok((tps, cpu)) => (Some(tps), cpu, None),
                Err(e) => (None, None, Some(format!("{e:#}"))),
            };
        let mut row = LoadRow {
            clients,
            pgbench_tps,
            pgbench_error,
            pgbench_cpu,
            propose_one_tenant: None,
            propose_tenant_per_client: None,
            flow_one_tenant: None,
            flow_tenant_per_client: None,
        };
        let keep = plan.latency_clients.contains(&clients);
        let before = if clients == profiled {
            match statements::snapshot(admin_url, db.name()).await {
                Ok(s) => Some(s),
                Err(e) => {
                    notes.push(format!("No statement breakdown: {e:#}."));
                    None
                }
            }
        } else {
            None
        };
        for (shape, work) in [
            (Shape::OneTenant, Work::Propose),
            (Shape::TenantPerClient, Work::Propose),
            (Shape::OneTenant, Work::Flow),
            (Shape::TenantPerClient, Work::Flow),
        ] {
            cell_no += 1;
            let (c, h) = cell(served, cell_no, shape, work, clients, plan.cell, server).await?;
            if keep {
                latency.extend(latency_rows(&h, shape, clients, None));
            }
            let slot = match (shape, work) {
                (Shape::OneTenant, Work::Propose) => &mut row.propose_one_tenant,
                (Shape::TenantPerClient, Work::Propose) => &mut row.propose_tenant_per_client,
                (Shape::OneTenant, _) => &mut row.flow_one_tenant,
                (Shape::TenantPerClient, _) => &mut row.flow_tenant_per_client,
            };
            if c.unexpected > 0 {
                notes.push(format!(
                    "{} clients, {:?} in {}: {} operations did not do what the cell expects \
                     (first: {}).",
                    clients,
                    work,
                    shape.label(),
                    c.unexpected,
                    c.first_unexpected.as_deref().unwrap_or("?")
                ));
            }
            *slot = Some(c);
        }
        if let Some(before) = &before {
            let window = format!("the four cells at {clients} clients");
            match statements::snapshot(admin_url, db.name()).await {
                Ok(after) => breakdown = Some(statements::between(before, &after, &window)),
                Err(e) => notes.push(format!("No statement breakdown: {e:#}.")),
            }
        }
        if let Some((bare_gate, bare_url)) = &bare_served
            && plan.unguarded_clients.contains(&clients)
        {
            let mut r = UnguardedRow {
                clients,
                propose_tenant_per_client: None,
                flow_tenant_per_client: None,
            };
            for work in [Work::Propose, Work::Flow] {
                cell_no += 1;
                let shape = Shape::TenantPerClient;
                let bare = Served {
                    gate: bare_gate,
                    owner_url: bare_url,
                };
                let (c, _) = cell(bare, cell_no, shape, work, clients, plan.cell, server).await?;
                if c.unexpected > 0 {
                    notes.push(format!(
                        "{clients} clients, {work:?} without guards: {} operations did not do \
                         what the cell expects (first: {}).",
                        c.unexpected,
                        c.first_unexpected.as_deref().unwrap_or("?")
                    ));
                }
                match work {
                    Work::Propose => r.propose_tenant_per_client = Some(c),
                    _ => r.flow_tenant_per_client = Some(c),
                }
            }
            unguarded_rows.push(r);
        }
        if keep {
            for shape in [Shape::OneTenant, Shape::TenantPerClient] {
                cell_no += 1;
                let (_, h) = cell(
                    served,
                    cell_no,
                    shape,
                    Work::Approve,
                    clients,
                    plan.cell,
                    server,
                )
                .await?;
                latency.extend(latency_rows(&h, shape, clients, Some("approve")));
            }
        }
        rows.push(row);
    }
    notes.extend(serialized_bound(&rows, P95_GOAL_MS));
    progress.say("load: from commit to a signed checkpoint");
    analyze(&db_url).await?;
    let checkpoint_delay =
        match checkpoint_delay::measure(&gate, plan.cell.max(DELAY_CELL), tenant_id).await {
            Ok(d) => Some(d),
            Err(e) => {
                notes.push(format!("The checkpoint delay was not measured: {e:#}."));
                None
            }
        };
    let paired = PairedRun {
        admin_url,
        owner: &owner,
        clients: PROFILED_CLIENTS,
        pairs: 0,
        seconds: plan.cell,
        server,
    };
    let row_security = match plan.row_security_pairs {
        0 => None,
        pairs => {
            progress.say("load: the flow with row-level security off and on");
            let run = PairedRun { pairs, ..paired };
            Some(
                paired_cells(
                    &run,
                    &mut cell_no,
                    &Switch::row_security(),
                    "row-level security off or on",
                    &mut notes,
                )
                .await?,
            )
        }
    };
    let counter_triggers = match plan.counter_trigger_pairs {
        0 => None,
        pairs => {
            let names: Vec<&str> = COUNTER_TRIGGERS.iter().map(|(n, _)| *n).collect();
            let shipped = shipped_counter_triggers(&db_url).await?;
            let mut sets: Vec<Vec<&str>> = names.iter().map(|n| vec![*n]).collect();
            if shipped.len() > 1 && shipped.len() < names.len() {
                sets.push(shipped);
            }
            sets.push(names);
            let mut rows = Vec::new();
            for enabled in sets {
                let what = format!("{} disabled or enabled", enabled.join(", "));
                progress.say(&format!("load: the flow with {what}"));
                let run = PairedRun { pairs, ..paired };
                let switch = Switch::counter_triggers(&enabled);
                let r = paired_cells(&run, &mut cell_no, &switch, &what, &mut notes).await?;
                rows.push(CounterTriggerRow {
                    enabled: enabled.iter().map(|n| (*n).to_owned()).collect(),
                    pairs: r,
                });
            }
            Some(CounterTriggers { rows })
        }
    };
    bench.drop().await?;
    gate.pool().close().await;
    drop(gate);
    db.drop().await?;
    let unguarded = match bare {
        Some((bare_db, bare_gate, removed)) => {
            bare_gate.pool().close().await;
            drop(bare_gate);
            bare_db.drop().await?;
            Some(Unguarded {
                removed,
                rows: unguarded_rows,
            })
        }
        None => None,
    };
    Ok((
        Load {
            cell_seconds: plan.cell.as_secs_f64(),
            pool,
            workers: worker_threads(plan.cpus),
            pgbench: format!(
                "pgbench -i -s {PGBENCH_SCALE}; pgbench -n -c N -j N -T {} -M prepared",
                plan.cell.as_secs().max(1)
            ),
            pgbench_scale: PGBENCH_SCALE,
            clock_speed: CLOCK_SPEED,
            rows,
            latency,
            statements: breakdown,
            unguarded,
            checkpoint_delay,
            row_security,
            counter_triggers,
            seconds: started.elapsed().as_secs_f64(),
        },
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_has_a_worker_per_four_cpus_and_at_least_one() {
        assert_eq!(worker_threads(0), 1);
        assert_eq!(worker_threads(2), 1);
        assert_eq!(worker_threads(4), 1);
        assert_eq!(worker_threads(8), 2);
        assert_eq!(worker_threads(64), 16);
    }

    #[test]
    fn the_pool_is_what_was_asked_or_four_per_cpu_but_never_more_than_the_clients() {
        assert_eq!(pool_size(None, 16, 2), 8);
        assert_eq!(pool_size(None, 16, 8), 16);
        assert_eq!(pool_size(None, 4, 2), 4);
        assert_eq!(pool_size(None, 16, 0), 4);
        assert_eq!(pool_size(Some(4), 16, 2), 4);
        assert_eq!(pool_size(Some(12), 16, 2), 12);
        assert_eq!(pool_size(Some(4_000_000_000), 16, 2), 16);
        assert_eq!(pool_size(Some(0), 16, 2), 1);
        assert_eq!(pool_size(None, 0, 2), 1);
    }

    fn row(clients: usize, one_tenant_per_sec: Option<f64>) -> LoadRow {
        LoadRow {
            clients,
            pgbench_tps: None,
            pgbench_error: None,
            pgbench_cpu: None,
            propose_one_tenant: one_tenant_per_sec.map(|per_sec| Cell {
                completed: 1,
                seconds: 1.0,
                per_sec: Some(per_sec),
                unexpected: 0,
                first_unexpected: None,
                cpu: None,
            }),
            propose_tenant_per_client: None,
            flow_one_tenant: None,
            flow_tenant_per_client: None,
        }
    }

    #[test]
    fn pgbench_reports_how_many_transactions_it_processed() {
        let out = "transaction type: <builtin: TPC-B (sort of)>\n\
                   number of transactions actually processed: 12345\n\
                   number of failed transactions: 0 (0.000%)\n\
                   tps = 6172.5 (without initial connection time)\n";
        assert_eq!(parse_transactions(out), Some(12345));
        assert_eq!(parse_tps(out), Some(6172.5));
        // pgbench -T with a target count prints "N/M".
        assert_eq!(
            parse_transactions("number of transactions actually processed: 40/100\n"),
            Some(40)
        );
        assert_eq!(parse_transactions("tps = 1.0\n"), None);
    }

    #[test]
    fn the_serialized_bound_reads_the_one_tenant_cell_nearest_eight_clients() {
        let rows = [
            row(1, Some(300.0)),
            row(4, Some(500.0)),
            row(8, Some(250.0)),
        ];
        let note = serialized_bound(&rows, 5.0).unwrap();
        // 250/s is 4 ms a turn; 8 clients wait about 32 ms; 5 ms needs 1,600/s.
        assert!(note.contains("at 8 clients 250 proposals/s"), "{note}");
        assert!(note.contains("4.00 ms per turn"), "{note}");
        assert!(note.contains("≈ 32.0 ms"), "{note}");
        assert!(note.contains("at least 1,600/s"), "{note}");
        assert!(note.contains("at most 0.62 ms"), "{note}");
    }

    #[test]
    fn no_serialized_bound_without_a_one_tenant_cell_past_one_client() {
        assert_eq!(serialized_bound(&[row(1, Some(300.0))], 5.0), None);
        assert_eq!(serialized_bound(&[row(8, None)], 5.0), None);
        assert_eq!(serialized_bound(&[row(8, Some(0.0))], 5.0), None);
    }

    #[test]
    fn pgbench_tps_is_read_from_its_report() {
        let out = "number of failed transactions: 0 (0.000%)\n\
                   latency average = 1.027 ms\n\
                   initial connection time = 2.130 ms\n\
                   tps = 973.214500 (without initial connection time)\n";
        assert_eq!(parse_tps(out), Some(973.2145));
        assert_eq!(parse_tps("no figure here"), None);
    }

    #[test]
    fn the_database_of_a_url_is_replaced_and_the_rest_kept() -> Result<()> {
        assert_eq!(
            with_database("postgresql://postgres@%2Ftmp%2Fx:5433/postgres", "b")?,
            "postgresql://postgres@%2Ftmp%2Fx:5433/b"
        );
        assert_eq!(
            with_database("postgres://u:p@localhost:5432/app?sslmode=disable", "b")?,
            "postgres://u:p@localhost:5432/b?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@localhost", "b")?,
            "postgres://u@localhost/b"
        );
        Ok(())
    }

    #[test]
    fn the_load_world_copies_acme_under_new_ids_and_keeps_its_terms() {
        let seed = load_seed(3);
        let ids: Vec<&str> = seed.tenants.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["acme", "t00", "t01", "t02"]);
        let standard = &standard_world().tenants[0];
        for t in &seed.tenants {
            assert_eq!(t.catalog, standard.catalog);
            assert_eq!(t.agents, standard.agents);
            assert_eq!(
                t.policy.allowed_merchants,
                standard.policy.allowed_merchants
            );
            assert_eq!(
                t.policy.approval_threshold_paise,
                standard.policy.approval_threshold_paise
            );
            assert!(t.policy.publishable().is_ok());
        }
        assert_eq!(load_seed(0).tenants.len(), 1);
    }
}
