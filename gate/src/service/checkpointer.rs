//! The checkpoint signer: each tenant's log signed within a bounded delay of
//! its ledger growing.
//!
//! Guarantees:
//! - One tick ([`Checkpointer::tick`]) finds, in one statement, the tenants
//!   whose ledger head is past the largest size of their kept checkpoints,
//!   and for each signs and keeps ([`tlog::sign_tree`]) the tree of its
//!   ledger as one read sees it. An entry committed before a tick starts is
//!   covered by a kept checkpoint when that tick ends, unless its tenant is
//!   refused (below).
//! - [`Checkpointer::run`] and [`Checkpointer::start`] tick at once and then
//!   every interval (a tick that takes longer delays the next, never
//!   overlaps it), so an entry is covered within one interval and one tick's
//!   work of its commit (`start` returns after its first tick). The
//!   signer keeps no state between ticks: a signer stopped or killed between
//!   a commit and the tick that would have covered it loses nothing (the
//!   entries are in the ledger) and the first tick of the next one covers
//!   them.
//! - It never signs over a rewrite. Before signing a tenant's tree, the tree
//!   computed now must still have, at the size of the tenant's largest kept
//!   checkpoint, that checkpoint's root (and only one root is kept at that
//!   size), and every entry past that size must be numbered in order and
//!   chain under the ledger key from the entry before it (its `prev_hash`
//!   and its keyed hash). A tenant that fails gets no checkpoint: it is
//!   named in the tick's refusals ([`Refusal`]) and tried again next tick;
//!   the other tenants are signed.
//! - An error never ends the loop: a tick that cannot read the heads, or a
//!   tenant that cannot be read or signed, is logged (a tenant's error once
//!   while it stays the same) and tried again next tick. The loop ends when
//!   its [`Running`] is stopped or dropped, between ticks (a tick in flight
//!   finishes first).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use spendgate_verify::merkle::{Tree, hash_to_base64, leaf_hash};
use sqlx::PgPool;

use super::clock::Clock;
use super::ledger::{GENESIS_HASH, LedgerKey, chain_hash};
use super::tlog::{self, LogError, LogKey, StoredCheckpoint};

/// The interval `spendgate serve` signs at unless its `checkpoint_interval_ms`
/// says otherwise, and the one `harness perf` measures the delay at.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1000);

/// Why one tenant got no checkpoint in a tick.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The log could not be read or signed, or its tree no longer holds a
    /// kept checkpoint's root ([`LogError::Rewritten`]), or its numbering
    /// has a gap ([`LogError::Gap`]).
    #[error(transparent)]
    Log(#[from] LogError),
    /// An entry past the largest kept checkpoint does not chain.
    #[error(
        "tenant {tenant}'s ledger entry {seq} {problem}: no checkpoint is signed over it \
         (`spendgate ledger verify` names the break)"
    )]
    Broken {
        tenant: String,
        seq: i64,
        problem: &'static str,
    },
    /// Two roots are kept at the largest size: the log was forked.
    #[error(
        "tenant {tenant} has {roots} checkpoints of size {size} with different roots: \
         its log was forked, and no checkpoint is signed after it"
    )]
    Forked {
        tenant: String,
        size: u64,
        roots: usize,
    },
}

/// What one tick did.
#[derive(Debug, Default)]
pub struct Tick {
    /// The checkpoints signed and kept, by tenant.
    pub signed: Vec<(String, StoredCheckpoint)>,
    /// The tenants that grew but got no checkpoint, and why.
    pub refused: Vec<(String, Refusal)>,
}

/// Signs every grown tenant's checkpoint; see the module.
#[derive(Clone)]
pub struct Checkpointer {
    pool: PgPool,
    ledger_key: LedgerKey,
    log_key: LogKey,
    clock: Arc<dyn Clock>,
    interval: Duration,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// A tenant whose head is past its largest kept checkpoint.
#[derive(Debug, sqlx::FromRow)]
struct Behind {
    tenant_id: String,
    /// The largest kept checkpoint's size, if any is kept.
    size: Option<i64>,
    /// Every root kept at that size.
    roots: Vec<String>,
}

/// One entry as the signer checks it.
#[derive(sqlx::FromRow)]
struct Leaf {
    seq: i64,
    entry: String,
    prev_hash: String,
    hash: String,
}

impl Checkpointer {
    /// A signer over `pool` that checks new entries with `ledger_key`, signs
    /// with `log_key` and dates each checkpoint by `clock`.
    pub fn new(
        pool: PgPool,
        ledger_key: LedgerKey,
        log_key: LogKey,
        clock: Arc<dyn Clock>,
        interval: Duration,
    ) -> Self {
        Checkpointer {
            pool,
            ledger_key,
            log_key,
            clock,
            interval,
        }
    }

    /// How often [`Checkpointer::run`] ticks.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The tenants whose ledger head is past their largest kept checkpoint:
    /// one statement (the heads, and an index probe of `log_checkpoints`
    /// per tenant).
    async fn behind(&self) -> Result<Vec<Behind>, LogError> {
        sqlx::query_as(
            "SELECT h.tenant_id, m.size, \
                    ARRAY(SELECT k.root FROM log_checkpoints k \
                           WHERE k.tenant_id = h.tenant_id AND k.size = m.size \
                           ORDER BY k.root) AS roots \
               FROM ledger_head h \
              CROSS JOIN LATERAL (SELECT max(k.size) AS size FROM log_checkpoints k \
                                   WHERE k.tenant_id = h.tenant_id) m \
              WHERE h.seq > COALESCE(m.size, 0) \
              ORDER BY h.tenant_id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|cause| LogError::Database {
            action: "finding the tenants whose ledger grew past their checkpoint",
            cause,
        })
    }

    /// Signs every grown tenant once; `Err` only when the grown tenants
    /// could not be listed.
    pub async fn tick(&self) -> Result<Tick, LogError> {
        let mut tick = Tick::default();
        for behind in self.behind().await? {
            let tenant = behind.tenant_id.clone();
            match self.sign(behind).await {
                Ok(checkpoint) => tick.signed.push((tenant, checkpoint)),
                Err(refusal) => tick.refused.push((tenant, refusal)),
            }
        }
        Ok(tick)
    }

    /// Checks one tenant's tree against its largest kept checkpoint and its
    /// new entries against the ledger key, then signs and keeps it.
    async fn sign(&self, behind: Behind) -> Result<StoredCheckpoint, Refusal> {
        let tenant = behind.tenant_id.as_str();
        let leaves: Vec<Leaf> = sqlx::query_as(
            "SELECT seq, entry, prev_hash, hash FROM ledger_entries \
              WHERE tenant_id = $1 ORDER BY seq",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await
        .map_err(|cause| LogError::Database {
            action: "reading the tenant's ledger entries",
            cause,
        })?;
        for (i, leaf) in leaves.iter().enumerate() {
            let want = i as i64 + 1;
            if leaf.seq != want {
                return Err(LogError::Gap {
                    tenant: tenant.to_owned(),
                    missing: want,
                }
                .into());
            }
        }
        let tree = Tree::from_leaf_hashes(leaves.iter().map(|l| leaf_hash(l.entry.as_bytes())));
        let kept = behind.size.unwrap_or(0).max(0) as u64;
        if behind.roots.len() > 1 {
            return Err(Refusal::Forked {
                tenant: tenant.to_owned(),
                size: kept,
                roots: behind.roots.len(),
            });
        }
        if let Some(signed) = behind.roots.first() {
            if kept > tree.len() {
                return Err(LogError::Rewritten {
                    tenant: tenant.to_owned(),
                    size: kept,
                    signed: signed.clone(),
                    now: format!("a tree of {} leaves", tree.len()),
                }
                .into());
            }
            let merkle = |cause| LogError::Merkle {
                tenant: tenant.to_owned(),
                cause,
            };
            let now = hash_to_base64(&tree.root_at(kept).map_err(merkle)?);
            if &now != signed {
                return Err(LogError::Rewritten {
                    tenant: tenant.to_owned(),
                    size: kept,
                    signed: signed.clone(),
                    now,
                }
                .into());
            }
        }
        let start = usize::try_from(kept).unwrap_or(usize::MAX);
        let mut prev = match start.checked_sub(1).and_then(|i| leaves.get(i)) {
            Some(leaf) => leaf.hash.as_str(),
            None => GENESIS_HASH,
        };
        for leaf in leaves.iter().skip(start) {
            let broken = |problem| Refusal::Broken {
                tenant: tenant.to_owned(),
                seq: leaf.seq,
                problem,
            };
            if leaf.prev_hash != prev {
                return Err(broken("does not name the previous entry's hash"));
            }
            if chain_hash(&self.ledger_key, prev, &leaf.entry) != leaf.hash {
                return Err(broken(
                    "is not the keyed hash of its contents (forged or changed)",
                ));
            }
            prev = leaf.hash.as_str();
        }
        Ok(tlog::sign_tree(&self.pool, &self.log_key, tenant, &tree, self.clock.now()).await?)
    }

    /// Ticks at once and then every interval until `stop` resolves; every
    /// error is logged, none ends the loop.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        self.run_with(stop, |_| {}).await;
    }

    /// As [`Checkpointer::run`], handing `each` every tick that read the
    /// heads, as soon as it ends (what it signed and refused).
    pub async fn run_with(
        self,
        stop: impl std::future::Future<Output = ()>,
        mut each: impl FnMut(&Tick),
    ) {
        let mut said = Said::default();
        let tick = self.tick().await;
        if let Ok(t) = &tick {
            each(t);
        }
        said.report(&tick);
        self.every_interval(said, stop, each).await;
    }

    /// Ticks every interval, the first an interval from now, until `stop`:
    /// a tick starts an interval after the one before it started, or as
    /// soon as it ended when it took longer.
    async fn every_interval(
        self,
        mut said: Said,
        stop: impl std::future::Future<Output = ()>,
        mut each: impl FnMut(&Tick),
    ) {
        let mut stop = std::pin::pin!(stop);
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + self.interval, self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticks.tick() => {}
            }
            let tick = self.tick().await;
            if let Ok(t) = &tick {
                each(t);
            }
            said.report(&tick);
        }
    }

    /// Ticks once now (so what was committed before the call is covered, or
    /// its refusal logged, when it returns), then runs the signer on the
    /// current runtime until the returned handle is stopped or dropped.
    pub async fn start(self) -> Running {
        let mut said = Said::default();
        said.report(&self.tick().await);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            // A dropped sender stops the loop as a sent signal does.
            let _ = rx.await;
        };
        let handle = tokio::spawn(self.every_interval(said, stop, |_| {}));
        Running {
            stop: Some(tx),
            handle: Some(handle),
        }
    }
}

/// What the signer last logged, so that a tenant refused tick after tick
/// (or a database that stays unreachable) is logged once until what is
/// said changes.
#[derive(Debug, Default)]
struct Said {
    tenants: BTreeMap<String, String>,
    unreadable: Option<String>,
}

impl Said {
    fn report(&mut self, tick: &Result<Tick, LogError>) {
        match tick {
            Ok(tick) => {
                self.unreadable = None;
                for (tenant, _) in &tick.signed {
                    self.tenants.remove(tenant);
                }
                for (tenant, refusal) in &tick.refused {
                    let said = refusal.to_string();
                    if self.tenants.get(tenant) != Some(&said) {
                        tracing::error!(tenant = %tenant, "no checkpoint signed: {said}");
                        self.tenants.insert(tenant.clone(), said);
                    }
                }
            }
            Err(e) => {
                let said = e.to_string();
                if self.unreadable.as_ref() != Some(&said) {
                    tracing::error!("the checkpoint signer could not tick: {said}");
                    self.unreadable = Some(said);
                }
            }
        }
    }
}

/// A running signer ([`Checkpointer::start`]); dropping it stops the loop
/// after the tick in flight.
#[derive(Debug)]
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops the loop and waits for the tick in flight to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
