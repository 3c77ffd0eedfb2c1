//! What the wire costs: propose latency in-process vs through the HTTP service
//! on loopback, with the same world, clients and duration, in one run.
//!
//! ```sh
//! cargo run -q -p harness -- db run -- \
//!   cargo run --release -q -p wire --example wire_latency -- --clients 8 --seconds 5
//! ```
//!
//! Each side gets its own fresh database seeded with the standard world,
//! widened so that every proposal is allowed (caps, velocity and the
//! delegation's budget raised): every call is the full allow path (a request
//! row, the reservations, two ledger entries). `--clients` tasks propose
//! back to back for `--seconds` (bounded, loopback only); the figures are
//! latency percentiles and requests per second. A measurement, not a test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock, Seed};
use scenarios::generate::standard_world;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SECRET: &[u8] = b"whsec_wire_latency_0123456789abcdef0123456";
const BODY: &str = r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#;

fn wide_seed() -> Seed {
    let mut seed = standard_world().seed();
    for t in &mut seed.tenants {
        t.policy.daily_cap_paise = 1_000_000_000_000;
        t.policy.velocity.max_proposals = 100_000_000;
        for d in &mut t.delegations {
            d.budget_paise = 1_000_000_000_000;
        }
    }
    seed
}

struct Figures {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

impl Figures {
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.latencies.clone();
        v.sort();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
    fn rps(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

async fn world(admin: &str) -> Res<(gate::db::FreshDatabase, Arc<Gate<InProcessProvider>>)> {
    let db = gate::db::fresh_database(admin).await?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect_with(db.connect_options().clone())
        .await?;
    let gate = Gate::new(
        pool,
        InProcessProvider::new(),
        SECRET,
        Arc::new(ManualClock::new(standard_world().now)),
    )?;
    gate.seed(&wide_seed()).await?;
    Ok((db, Arc::new(gate)))
}

async fn run<F, Fut>(clients: usize, seconds: u64, one: F) -> Res<Figures>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Res<()>> + Send,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let one = one.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                one().await?;
                out.push(t.elapsed());
            }
            Res::Ok(out)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    Ok(Figures {
        latencies,
        elapsed: start.elapsed(),
    })
}

#[tokio::main]
async fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let clients = arg("--clients", 8).clamp(1, 256) as usize;
    let seconds = arg("--seconds", 5).clamp(1, 60);
    let admin = std::env::var(gate::db::DATABASE_URL_ENV)?;

    let (db, gate) = world(&admin).await?;
    let g = gate.clone();
    let in_process = run(clients, seconds, move || {
        let g = g.clone();
        async move {
            let o = g
                .propose("acme", "buyer-agent", BODY.as_bytes(), None)
                .await?;
            if o.request_id.is_none() || !matches!(o.decision, gate::Decision::Allow) {
                return Err(format!("not allowed: {o:?}").into());
            }
            Ok(())
        }
    })
    .await?;
    drop(gate);
    db.drop().await?;

    let (db, gate) = world(&admin).await?;
    let key = gate
        .issue_key("acme", "buyer-agent", gate.now())
        .await?
        .token;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/requests", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(wire::serve(
        listener,
        gate.clone(),
        wire::WireConfig::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let client = reqwest::Client::new();
    let http = run(clients, seconds, move || {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        async move {
            let r = client
                .post(&url)
                .bearer_auth(&key)
                .header("content-type", "application/json")
                .body(BODY)
                .send()
                .await?;
            if r.status().as_u16() != 201 {
                return Err(format!("status {}", r.status()).into());
            }
            r.bytes().await?;
            Ok(())
        }
    })
    .await?;
    let _ = stop.send(());
    server.await??;
    drop(gate);
    db.drop().await?;

    println!("propose, {clients} clients, {seconds} s each, loopback, one machine:");
    println!("| path | requests | req/s | p50 ms | p95 ms | p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, f) in [("in-process", &in_process), ("http", &http)] {
        println!(
            "| {name} | {} | {:.0} | {:.2} | {:.2} | {:.2} |",
            f.latencies.len(),
            f.rps(),
            f.pct(0.50),
            f.pct(0.95),
            f.pct(0.99)
        );
    }
    println!(
        "http / in-process: p50 x{:.2}, throughput x{:.2}",
        http.pct(0.5) / in_process.pct(0.5).max(f64::MIN_POSITIVE),
        http.rps() / in_process.rps().max(f64::MIN_POSITIVE)
    );
    Ok(())
}
