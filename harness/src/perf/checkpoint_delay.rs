//! The load phase's checkpoint cell: the delay from an operation's commit to
//! the first kept checkpoint that covers its entries, with the signer
//! `spendgate serve` runs (`gate::service::checkpointer`) at its default
//! interval.
//!
//! Guarantees:
//! - The signer is the gate's own, run by `Checkpointer::run_with` (the loop
//!   `serve` runs), on the load world's gate; every tick it ends hands this
//!   cell the checkpoints it kept and the instant it ended.
//! - [`DELAY_CLIENTS`] clients, each in a tenant of its own, propose (the
//!   denied proposal of the load's propose cell: one committed operation
//!   that appends to the ledger) for the cell's time. After each one the
//!   client notes the instant the call returned (after its commit) and the
//!   number its last entry has once integrated: the tenant's count before
//!   the first (the head's number plus the queued rows, in one snapshot:
//!   only that client writes to its tenant) plus the entries each operation
//!   appends, counted after the first; the count after the last must agree,
//!   or the cell fails. An operation's delay is from that instant to the end of
//!   the first tick that kept a checkpoint of its tenant of at least that
//!   size, so it includes the sequencer's integration.
//! - After the clients stop the signer runs on for at most
//!   [`DRAIN_INTERVALS`] intervals, until every operation is covered; one
//!   still uncovered is counted, never dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use gate::provider::InProcessProvider;
use gate::service::Gate;
use gate::service::checkpointer::{DEFAULT_INTERVAL, Tick};
use gate::service::tlog::LogKey;
use serde::{Deserialize, Serialize};

use super::stats::{min_max, percentile};

/// The gate the load phase drives.
type LoadGate = Gate<InProcessProvider>;

/// Clients of the cell: the goals' count.
pub const DELAY_CLIENTS: usize = 8;
/// How many intervals the signer may run on after the clients stop.
pub const DRAIN_INTERVALS: u32 = 3;
/// The bench's log key: not a secret (its checkpoints are thrown away).
const LOG_SECRET: &[u8] = b"spendgate-perf-log-key-not-a-secret-0123456789";

/// What the cell measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointDelay {
    /// The signer's interval, milliseconds (`checkpoint_interval_ms`).
    pub interval_ms: u64,
    pub clients: usize,
    /// How long the clients proposed, seconds.
    pub seconds: f64,
    /// Committed operations.
    pub operations: u64,
    /// Of them, covered by a kept checkpoint before the signer stopped.
    pub covered: u64,
    /// Ticks the signer ended during the cell, and checkpoints it kept.
    pub ticks: u64,
    pub checkpoints: u64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// The longest tick (read, check and sign every grown tenant), ms.
    pub longest_tick_ms: Option<f64>,
    /// The ticks after the first (which took the earlier cells' backlog):
    /// their mean time integrating the queue and checking and signing, ms,
    /// and the entries each integrated on average.
    #[serde(default)]
    pub mean_integrate_ms: Option<f64>,
    #[serde(default)]
    pub mean_sign_ms: Option<f64>,
    #[serde(default)]
    pub mean_entries_per_tick: Option<f64>,
}

/// One committed operation: its tenant, its last entry, when it returned.
struct Committed {
    tenant: String,
    seq: u64,
    at: Instant,
}

/// Each tenant's kept sizes, with the instant the tick that kept each ended.
#[derive(Default)]
struct Signed {
    by_tenant: BTreeMap<String, Vec<(u64, Instant)>>,
    ticks: u64,
    checkpoints: u64,
    longest_tick: Duration,
    /// Every tick after the first: (integrating, signing, entries).
    work: Vec<(Duration, Duration, u64)>,
}

impl Signed {
    /// When the first checkpoint of `tenant` of at least `seq` was kept.
    fn covering(&self, tenant: &str, seq: u64) -> Option<Instant> {
        let kept = self.by_tenant.get(tenant)?;
        let i = kept.partition_point(|(size, _)| *size < seq);
        kept.get(i).map(|(_, at)| *at)
    }
}

/// The number the tenant's last committed entry has, or will have once
/// integrated.
async fn head(gate: &LoadGate, tenant: &str) -> Result<u64> {
    let seq: i64 = sqlx::query_scalar(
        "SELECT h.seq + (SELECT count(*) FROM ledger_queue q WHERE q.tenant_id = h.tenant_id) \
           FROM ledger_head h WHERE h.tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(gate.pool())
    .await
    .context("reading a ledger head and its queue")?;
    Ok(seq.max(0) as u64)
}

async fn client(gate: Arc<LoadGate>, tenant: String, deadline: Instant) -> Result<Vec<Committed>> {
    let denied = br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk setup"}"#;
    let mut out = Vec::new();
    let start = head(&gate, &tenant).await?;
    // Every denied proposal appends the same entries; the first says how
    // many, so the load sends no query of the cell's own after the others.
    let mut per_operation = None;
    let mut seq = start;
    while Instant::now() < deadline {
        gate.propose(&tenant, "buyer-agent", denied, None).await?;
        let at = Instant::now();
        let step = match per_operation {
            Some(step) => step,
            None => {
                let step = head(&gate, &tenant).await?.saturating_sub(start);
                per_operation = Some(step);
                step
            }
        };
        seq += step;
        out.push(Committed {
            tenant: tenant.clone(),
            seq,
            at,
        });
    }
    let end = head(&gate, &tenant).await?;
    anyhow::ensure!(
        end == seq,
        "tenant {tenant}'s log holds {end} entries after {} operations of {} entries each \
         from {start}: another writer, or an operation that appended a different count",
        out.len(),
        per_operation.unwrap_or(0)
    );
    Ok(out)
}

/// How long the signer's first tick (the earlier cells' backlog) may take
/// before the cell gives up.
const FIRST_TICK_LIMIT: Duration = Duration::from_secs(600);

/// The cell: [`DELAY_CLIENTS`] clients for `cell`, client `i` in the tenant
/// `tenant_of(i)` names, the signer at [`DEFAULT_INTERVAL`].
pub(super) async fn measure(
    gate: &Arc<LoadGate>,
    cell: Duration,
    tenant_of: fn(usize) -> String,
) -> Result<CheckpointDelay> {
    let interval = DEFAULT_INTERVAL;
    let signer = gate.checkpointer(LogKey::new(LOG_SECRET)?, interval);
    let signed = Arc::new(Mutex::new(Signed::default()));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let seen = signed.clone();
    let mut tick_started = Instant::now();
    let running = tokio::spawn(signer.run_with(
        async move {
            let _ = stop_rx.await;
        },
        move |tick: &Tick| {
            let now = Instant::now();
            if let Ok(mut s) = seen.lock() {
                s.ticks += 1;
                s.longest_tick = s.longest_tick.max(now.duration_since(tick_started));
                if s.ticks > 1 {
                    s.work
                        .push((tick.integrating, tick.signing, tick.integrated));
                }
                for (tenant, cp) in &tick.signed {
                    s.checkpoints += 1;
                    s.by_tenant
                        .entry(tenant.clone())
                        .or_default()
                        .push((cp.size, now));
                }
            }
            // The next tick starts an interval after this one started, or
            // now when this one took longer.
            tick_started = (tick_started + interval).max(now);
        },
    ));
    // The first tick integrates and signs what the earlier cells left (they
    // ran without a sequencer, as no served gate does); the clients start
    // once it has ended, so every operation waits on the signer's own
    // rhythm and none on that backlog.
    let first = Instant::now() + FIRST_TICK_LIMIT;
    loop {
        let ticks = signed
            .lock()
            .map_err(|_| anyhow::anyhow!("a poisoned lock"))?
            .ticks;
        if ticks > 0 {
            break;
        }
        if Instant::now() >= first {
            anyhow::bail!(
                "the signer's first tick did not end within {} s",
                FIRST_TICK_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let start = Instant::now();
    let deadline = start + cell;
    let tasks: Vec<_> = (0..DELAY_CLIENTS)
        .map(|i| tokio::spawn(client(gate.clone(), tenant_of(i), deadline)))
        .collect();
    let mut committed = Vec::new();
    for t in tasks {
        committed.extend(t.await.context("a checkpoint-delay client panicked")??);
    }
    let seconds = start.elapsed().as_secs_f64();
    let drain = Instant::now() + interval * DRAIN_INTERVALS;
    loop {
        let all = {
            let s = signed
                .lock()
                .map_err(|_| anyhow::anyhow!("a poisoned lock"))?;
            committed
                .iter()
                .all(|c| s.covering(&c.tenant, c.seq).is_some())
        };
        if all || Instant::now() >= drain {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(());
    running.await.context("the signer panicked")?;
    let s = signed
        .lock()
        .map_err(|_| anyhow::anyhow!("a poisoned lock"))?;
    let delays: Vec<f64> = committed
        .iter()
        .filter_map(|c| {
            s.covering(&c.tenant, c.seq)
                .map(|at| at.saturating_duration_since(c.at).as_secs_f64() * 1000.0)
        })
        .collect();
    Ok(CheckpointDelay {
        interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
        clients: DELAY_CLIENTS,
        seconds,
        operations: committed.len() as u64,
        covered: delays.len() as u64,
        ticks: s.ticks,
        checkpoints: s.checkpoints,
        p50_ms: percentile(&delays, 50.0),
        p95_ms: percentile(&delays, 95.0),
        max_ms: min_max(&delays).map(|(_, hi)| hi),
        longest_tick_ms: (s.ticks > 0).then(|| s.longest_tick.as_secs_f64() * 1000.0),
        mean_integrate_ms: mean(s.work.iter().map(|w| w.0.as_secs_f64() * 1000.0)),
        mean_sign_ms: mean(s.work.iter().map(|w| w.1.as_secs_f64() * 1000.0)),
        mean_entries_per_tick: mean(s.work.iter().map(|w| w.2 as f64)),
    })
}

/// The mean of `values`, none when there are none.
fn mean(values: impl ExactSizeIterator<Item = f64>) -> Option<f64> {
    let n = values.len();
    (n > 0).then(|| values.sum::<f64>() / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_is_covered_by_the_first_checkpoint_at_least_its_size() {
        let t0 = Instant::now();
        let mut s = Signed::default();
        s.by_tenant.insert(
            "t00".into(),
            vec![
                (3, t0 + Duration::from_millis(10)),
                (7, t0 + Duration::from_millis(20)),
            ],
        );
        assert_eq!(s.covering("t00", 1), Some(t0 + Duration::from_millis(10)));
        assert_eq!(s.covering("t00", 3), Some(t0 + Duration::from_millis(10)));
        assert_eq!(s.covering("t00", 4), Some(t0 + Duration::from_millis(20)));
        assert_eq!(s.covering("t00", 8), None);
        assert_eq!(s.covering("t01", 1), None);
    }
}
