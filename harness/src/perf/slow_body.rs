//! The slow-body attack, measured on loopback beside the same probes without
//! it: `harness perf --http` runs it after the wire's cells.
//!
//! Guarantees:
//! - Loopback only, bounded: `connections` attackers (at most
//!   [`MAX_CONNECTIONS`]) for `seconds` (at most [`MAX_SECONDS`]); every
//!   attacker stops at its deadline by itself and drops its socket, and the
//!   attack's server is stopped after them (given [`SHUTDOWN_GRACE`] to
//!   finish what it holds, then dropped).
//! - The service is the one deployed: `wire::serve` with
//!   `WireConfig::default()` on `127.0.0.1:0`, over the phase's gate.
//! - An attacker is what a client without any key can do: it opens a
//!   connection to `POST /webhooks/razorpay`, declares a body of
//!   `declared_length` bytes and sends one byte a second. When the server
//!   answers or closes the connection, it opens another, until its deadline.
//! - Two probes run through the quiet windows and the attack window alike,
//!   paced at one request per [`PROBE_EVERY`] each: a tenant's proposal (one
//!   the merchant allowlist denies, with its agent's key) and `GET /healthz`.
//!   The quiet windows stand before and after the attack (half the attack's
//!   length each, so a drift weighs on both alike); the figures are the
//!   probes' p99 in the quiet windows and under the attack, side by side.
//!   A probe not answered within its timeout is counted and timed at what it
//!   waited, never dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::load::LoadGate;

/// The attack's goal: a probe's p99 under the attack at most this many
/// times its p99 in the quiet windows.
pub const GOAL_RATIO: f64 = 2.0;
/// The bounds a plan may not pass. Both ends of every attacker's
/// connection are sockets of this one process: 400 connections keep them
/// within a 1,024-descriptor limit, beside the gate's pool.
pub const MAX_CONNECTIONS: usize = 400;
pub const MAX_SECONDS: u64 = 120;
/// Each probe sends one request per this long (or the next at once when one
/// took longer).
pub const PROBE_EVERY: Duration = Duration::from_millis(20);
/// How long the attack's server may take to stop once the attackers have.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// The attackers' route and what they declare.
pub const ROUTE: &str = "/webhooks/razorpay";
pub const DECLARED_LENGTH: usize = 60_000;

/// What the attack runs.
#[derive(Debug, Clone)]
pub struct SlowBodyPlan {
    pub connections: usize,
    pub seconds: Duration,
}

impl SlowBodyPlan {
    /// The plan within its bounds.
    pub fn bounded(connections: usize, seconds: u64) -> SlowBodyPlan {
        SlowBodyPlan {
            connections: connections.min(MAX_CONNECTIONS),
            seconds: Duration::from_secs(seconds.clamp(1, MAX_SECONDS)),
        }
    }
}

/// One probe's latencies in one kind of window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Requests not answered within the probe's timeout (timed at what they waited).
    pub timed_out: u64,
    /// Answers that were not the expected one.
    pub unexpected: u64,
    pub first_unexpected: Option<String>,
}

/// One probe, quiet and under the attack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// What the probe sends, in words.
    pub what: String,
    pub quiet: Latency,
    pub attack: Latency,
    /// p99 under the attack / p99 quiet.
    pub p99_ratio: Option<f64>,
}

impl Probe {
    /// Whether the goal is met; `None` when a p99 is missing.
    pub fn met(&self, goal: f64) -> Option<bool> {
        self.p99_ratio.map(|r| r <= goal)
    }
}

/// The attack's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowBody {
    pub connections: usize,
    pub declared_length: usize,
    pub route: String,
    /// The attack window, seconds.
    pub attack_seconds: f64,
    /// The two quiet windows together, seconds.
    pub quiet_seconds: f64,
    pub probe_every_ms: f64,
    /// Connections the attackers opened (the first ones and the reopened).
    pub opened: u64,
    /// Of those, the ones the server answered or closed before the deadline.
    pub ended_by_server: u64,
    /// Body bytes the attackers sent in all.
    pub bytes_sent: u64,
    pub proposal: Probe,
    pub healthz: Probe,
    pub goal_ratio: f64,
    /// The whole measurement, seconds.
    pub seconds: f64,
}

/// A probe's request.
#[derive(Clone, Copy)]
enum Kind {
    Proposal,
    Healthz,
}

const DENIED: &[u8] = br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk setup"}"#;

/// One probe's record of one window.
struct Record {
    histogram: Histogram<u64>,
    timed_out: u64,
    unexpected: u64,
    first_unexpected: Option<String>,
}

impl Record {
    fn new() -> Result<Record> {
        Ok(Record {
            histogram: Histogram::new_with_bounds(1, 600_000_000, 3)
                .context("a latency histogram")?,
            timed_out: 0,
            unexpected: 0,
            first_unexpected: None,
        })
    }

    fn add(&mut self, other: Record) -> Result<()> {
        self.histogram
            .add(&other.histogram)
            .context("merging histograms")?;
        self.timed_out += other.timed_out;
        self.unexpected += other.unexpected;
        if self.first_unexpected.is_none() {
            self.first_unexpected = other.first_unexpected;
        }
        Ok(())
    }

    fn latency(&self) -> Latency {
        let h = &self.histogram;
        let ms = |v: u64| Some(v as f64 / 1000.0);
        let (p50, p99, max) = if h.is_empty() {
            (None, None, None)
        } else {
            (
                ms(h.value_at_quantile(0.50)),
                ms(h.value_at_quantile(0.99)),
                ms(h.max()),
            )
        };
        Latency {
            count: h.len(),
            p50_ms: p50,
            p99_ms: p99,
            max_ms: max,
            timed_out: self.timed_out,
            unexpected: self.unexpected,
            first_unexpected: self.first_unexpected.clone(),
        }
    }
}

/// Sends `kind`'s request every [`PROBE_EVERY`] until `until`; each is timed
/// from sending to having read the whole answer.
async fn probe(
    base: String,
    agent: String,
    kind: Kind,
    until: Instant,
    timeout: Duration,
) -> Result<Record> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(timeout)
        .build()?;
    let mut record = Record::new()?;
    while Instant::now() < until {
        let started = Instant::now();
        let sent = match kind {
            Kind::Proposal => client
                .post(format!("{base}/v1/requests"))
                .header("content-type", "application/json")
                .header("authorization", format!("Bearer {agent}"))
                .body(DENIED.to_vec())
                .send(),
            Kind::Healthz => client.get(format!("{base}/healthz")).send(),
        };
        let answer = async {
            let r = sent.await?;
            let status = r.status().as_u16();
            let body = r.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        }
        .await;
        let waited = started.elapsed();
        record
            .histogram
            .saturating_record(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX).max(1));
        let problem = match answer {
            Err(e) if e.is_timeout() => {
                record.timed_out += 1;
                None
            }
            Err(e) => Some(format!("{e}")),
            Ok((status, body)) => {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                match kind {
                    Kind::Proposal => (status != 403
                        || v.get("reason").and_then(Value::as_str) != Some("MERCHANT_NOT_ALLOWED"))
                    .then(|| format!("proposal: {status} {v}")),
                    Kind::Healthz => (status != 200).then(|| format!("healthz: {status} {v}")),
                }
            }
        };
        if let Some(p) = problem {
            record.unexpected += 1;
            record.first_unexpected.get_or_insert(p);
        }
        if let Some(rest) = PROBE_EVERY.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    Ok(record)
}

/// Both probes through one window that ends at `until`.
async fn window(
    base: &str,
    agent: &str,
    until: Instant,
    timeout: Duration,
) -> Result<(Record, Record)> {
    let proposal = tokio::spawn(probe(
        base.into(),
        agent.into(),
        Kind::Proposal,
        until,
        timeout,
    ));
    let healthz = tokio::spawn(probe(
        base.into(),
        agent.into(),
        Kind::Healthz,
        until,
        timeout,
    ));
    Ok((
        proposal.await.context("the proposal probe panicked")??,
        healthz.await.context("the healthz probe panicked")??,
    ))
}

/// The attackers' counters.
#[derive(Default)]
struct Counts {
    opened: AtomicU64,
    ended_by_server: AtomicU64,
    bytes_sent: AtomicU64,
}

/// One attacker: a connection that declares a body it sends a byte a second
/// of, opened again whenever the server ends it, until `deadline`.
async fn attacker(addr: SocketAddr, deadline: Instant, counts: Arc<Counts>) {
    let head = format!(
        "POST {ROUTE} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {DECLARED_LENGTH}\r\n{}: {}\r\n{}: evt_slow_body\r\n\r\n",
        wire::SIGNATURE,
        "0".repeat(64),
        wire::EVENT_ID,
    );
    let deadline = tokio::time::Instant::from_std(deadline);
    while tokio::time::Instant::now() < deadline {
        let connected = tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await;
        let Ok(Ok(stream)) = connected else {
            // Refused or out of time: wait a little rather than spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        counts.opened.fetch_add(1, Ordering::Relaxed);
        let (mut reader, mut writer) = stream.into_split();
        if writer.write_all(head.as_bytes()).await.is_err() {
            counts.ended_by_server.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let mut sent = 0usize;
        let mut buf = [0u8; 512];
        loop {
            let tick = tokio::time::sleep(Duration::from_secs(1));
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                // An answer, or the connection closed: the server ended it.
                _ = reader.read(&mut buf) => {
                    counts.ended_by_server.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                _ = tick => {
                    let byte: &[u8] = if sent == 0 { b"{" } else { b" " };
                    if sent + 1 >= DECLARED_LENGTH || writer.write_all(byte).await.is_err() {
                        counts.ended_by_server.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    sent += 1;
                    counts.bytes_sent.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The attack and the probes: quiet, attack, quiet, on a server of its own.
pub(super) async fn measure(
    gate: Arc<LoadGate>,
    agent: &str,
    plan: &SlowBodyPlan,
) -> Result<SlowBody> {
    let started = Instant::now();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let base = format!("http://{addr}");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(wire::serve(
        listener,
        gate,
        wire::WireConfig::default(),
        async move {
            let _ = rx.await;
        },
    ));
    // A probe waits at most the attack's length and a margin: under an attack
    // that holds every permit, it is answered only when the attack ends.
    let timeout = plan.seconds + Duration::from_secs(15);
    let half = plan.seconds / 2;
    let settle = Duration::from_secs(1);

    let (mut quiet_p, mut quiet_h) = window(&base, agent, Instant::now() + half, timeout).await?;

    let counts = Arc::new(Counts::default());
    let attack_start = Instant::now();
    let deadline = attack_start + settle + plan.seconds;
    let attackers: Vec<_> = (0..plan.connections)
        .map(|_| tokio::spawn(attacker(addr, deadline, counts.clone())))
        .collect();
    // The attackers connect and send their heads before the probes start.
    tokio::time::sleep(settle).await;
    let attack_probes = Instant::now();
    let (attack_p, attack_h) = window(&base, agent, deadline, timeout).await?;
    let attack_seconds = deadline
        .saturating_duration_since(attack_probes)
        .as_secs_f64();
    for a in attackers {
        a.await.context("an attacker panicked")?;
    }
    // What the attack left behind settles before the second quiet window.
    tokio::time::sleep(settle).await;
    let (after_p, after_h) = window(&base, agent, Instant::now() + half, timeout).await?;
    quiet_p.add(after_p)?;
    quiet_h.add(after_h)?;

    let _ = tx.send(());
    match tokio::time::timeout(SHUTDOWN_GRACE, server).await {
        Ok(joined) => joined
            .context("the attack's server task")?
            .context("serving")?,
        Err(_) => eprintln!(
            "perf: the slow-body attack's server did not stop within {SHUTDOWN_GRACE:?}; dropped"
        ),
    }

    let probe = |what: &str, quiet: &Record, attack: &Record| {
        let (quiet, attack) = (quiet.latency(), attack.latency());
        Probe {
            what: what.into(),
            p99_ratio: attack
                .p99_ms
                .zip(quiet.p99_ms)
                .and_then(|(a, q)| super::stats::ratio(a, q)),
            quiet,
            attack,
        }
    };
    Ok(SlowBody {
        connections: plan.connections,
        declared_length: DECLARED_LENGTH,
        route: ROUTE.into(),
        attack_seconds,
        quiet_seconds: (half * 2).as_secs_f64(),
        probe_every_ms: PROBE_EVERY.as_secs_f64() * 1000.0,
        opened: counts.opened.load(Ordering::Relaxed),
        ended_by_server: counts.ended_by_server.load(Ordering::Relaxed),
        bytes_sent: counts.bytes_sent.load(Ordering::Relaxed),
        proposal: probe(
            "a tenant's proposal (`POST /v1/requests`, its agent's key)",
            &quiet_p,
            &attack_p,
        ),
        healthz: probe("`GET /healthz`", &quiet_h, &attack_h),
        goal_ratio: GOAL_RATIO,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_stays_within_its_bounds() {
        let p = SlowBodyPlan::bounded(5_000, 999);
        assert_eq!(p.connections, MAX_CONNECTIONS);
        assert_eq!(p.seconds, Duration::from_secs(MAX_SECONDS));
        let p = SlowBodyPlan::bounded(70, 0);
        assert_eq!((p.connections, p.seconds), (70, Duration::from_secs(1)));
    }

    /// Reads what one connection sends until it closes: (bytes, seconds open).
    async fn drain(mut s: TcpStream) -> (Vec<u8>, f64) {
        let t = Instant::now();
        let mut all = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        (all, t.elapsed().as_secs_f64())
    }

    #[tokio::test]
    async fn an_attacker_declares_its_body_sends_a_byte_a_second_and_stops_by_itself() -> Result<()>
    {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let started = Instant::now();
        let attack = tokio::spawn(attacker(
            addr,
            started + Duration::from_millis(2_500),
            counts.clone(),
        ));
        let (stream, _) = listener.accept().await?;
        let (sent, open) = drain(stream).await;
        attack.await?;
        let text = String::from_utf8_lossy(&sent);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(
            head.starts_with("POST /webhooks/razorpay HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("content-length: 60000\r\n"), "{head}");
        // One byte a second for 2.5 s: two bytes, then the attacker closed.
        assert_eq!(body, "{ ", "{text}");
        assert!((2.0..4.0).contains(&open), "open {open} s");
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(counts.opened.load(Ordering::Relaxed), 1);
        assert_eq!(counts.bytes_sent.load(Ordering::Relaxed), 2);
        assert_eq!(counts.ended_by_server.load(Ordering::Relaxed), 0);
        Ok(())
    }

    #[tokio::test]
    async fn an_attacker_whose_connection_the_server_ends_opens_another() -> Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let attack = tokio::spawn(attacker(
            addr,
            Instant::now() + Duration::from_millis(1_500),
            counts.clone(),
        ));
        // The server answers the first connection at once and closes it.
        let (mut first, _) = listener.accept().await?;
        first
            .write_all(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n")
            .await?;
        drop(first);
        let (second, _) = listener.accept().await?;
        let (sent, _) = drain(second).await;
        attack.await?;
        assert!(String::from_utf8_lossy(&sent).starts_with("POST /webhooks/razorpay"));
        assert_eq!(counts.opened.load(Ordering::Relaxed), 2);
        assert_eq!(counts.ended_by_server.load(Ordering::Relaxed), 1);
        Ok(())
    }
}
