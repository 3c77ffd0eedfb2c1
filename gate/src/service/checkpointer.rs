//! The sequencer and checkpoint signer: each committed operation's queued
//! ledger entries integrated into its tenant's chain, and the log signed,
//! within a bounded delay of the commit.
//!
//! Guarantees:
//! - One tick ([`Checkpointer::tick`]) first integrates every committed
//!   queued entry ([`ledger::integrate`]; a row it refuses is named in the
//!   tick's refusals), then finds, in one statement, the tenants
//!   whose ledger head is past the largest size of their kept checkpoints,
//!   and for each signs and keeps ([`tlog::sign_tree`]) a tree covering
//!   every entry one read of its ledger sees. An entry committed before a
//!   tick starts is covered by a kept checkpoint when that tick ends, unless
//!   its tenant is refused (below).
//! - [`Checkpointer::run`] and [`Checkpointer::start`] tick at once and then
//!   every interval (a tick that takes longer delays the next, never
//!   overlaps it), so an entry is covered within one interval and one tick's
//!   work of its commit (`start` returns after its first tick). Nothing the
//!   database does not hold is needed to catch up: a signer stopped or
//!   killed between a commit and the tick that would have integrated or
//!   covered it loses nothing (the entries are in the queue or the ledger),
//!   and the first tick of the next one integrates and covers them.
//! - It never signs over a rewrite. A full check (a signer's first tick,
//!   then every [`DEFAULT_FULL_CHECK_EVERY`]th) reads the tenant's whole log:
//!   its tree must still have, at the size of the tenant's largest kept
//!   checkpoint, that checkpoint's root (and only one root may be kept at
//!   that size). Between full checks, when the largest kept checkpoint is
//!   the one this signer signed last, only the entries past it are read and
//!   the leaves it verified then are signed again as they were (in memory,
//!   32 bytes an entry): a tick's read no longer grows with the log, and a
//!   rewrite under that checkpoint is never signed (the tree keeps the
//!   history that was checked) and is named at the next full check. Either
//!   way every entry past the checkpoint must be numbered in order and chain
//!   under the ledger key from the one before it (its `prev_hash` and its
//!   keyed hash). A tenant that fails gets no checkpoint: it is named in the
//!   tick's refusals ([`Refusal`]) and tried again next tick; the other
//!   tenants are signed.
//! - An error never ends the loop: a tick that cannot read the heads, or a
//!   tenant that cannot be read or signed, is logged (a tenant's error once
//!   while it stays the same) and tried again next tick. The loop ends when
//!   its [`Running`] is stopped or dropped, between ticks (a tick in flight
//!   finishes first).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spendgate_verify::merkle::{Hash, Tree, hash_to_base64, leaf_hash};
use sqlx::PgPool;

use super::clock::Clock;
use super::error::ServiceError;
use super::ledger::{self, GENESIS_HASH, LedgerKey, QueueRefusal, chain_hash};
use super::tlog::{self, LogError, LogKey, StoredCheckpoint};

/// The interval `spendgate serve` signs at unless its `checkpoint_interval_ms`
/// says otherwise, and the one `harness perf` measures the delay at.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1000);
/// Every how many ticks a tick re-reads and re-checks every grown tenant's
/// whole log unless [`Checkpointer::with_full_check_every`] says otherwise:
/// once a minute at the default interval.
pub const DEFAULT_FULL_CHECK_EVERY: u64 = 60;

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
    /// A queued entry was left out of the chain.
    #[error("{0}")]
    Queue(QueueRefusal),
    /// The tenant's queued entries could not be integrated this tick.
    #[error("tenant {tenant}'s queued ledger entries could not be integrated: {cause}")]
    Integration { tenant: String, cause: ServiceError },
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
    /// Queued entries the tick chained into the ledger.
    pub integrated: u64,
    /// How long the tick took to integrate the queue, and then to check and
    /// sign the grown tenants.
    pub integrating: Duration,
    pub signing: Duration,
}

/// Signs every grown tenant's checkpoint; see the module.
#[derive(Clone)]
pub struct Checkpointer {
    pool: PgPool,
    ledger_key: LedgerKey,
    log_key: LogKey,
    clock: Arc<dyn Clock>,
    interval: Duration,
    /// Every how many ticks a tick re-reads and re-checks whole logs.
    full_every: u64,
    /// Ticks begun; a tick whose number is a multiple of `full_every` is full.
    ticks: Arc<AtomicU64>,
    /// What the last signing of each tenant verified.
    verified: Arc<Mutex<HashMap<String, Verified>>>,
}

/// What the signer checked and signed of one tenant's log: the leaf hashes
/// of its tree, its size and root, and the keyed hash of its last entry.
#[derive(Clone)]
struct Verified {
    size: u64,
    root: String,
    last_hash: String,
    leaves: Vec<Hash>,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// One tenant's log as checked, ready to sign.
struct Checked {
    tenant: String,
    tree: Tree,
    last_hash: String,
    leaves: Vec<Hash>,
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
    tenant_id: String,
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
            full_every: DEFAULT_FULL_CHECK_EVERY,
            ticks: Arc::new(AtomicU64::new(0)),
            verified: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Re-reads and re-checks whole logs every `ticks` ticks (at least 1:
    /// every tick) instead of every [`DEFAULT_FULL_CHECK_EVERY`].
    pub fn with_full_check_every(mut self, ticks: u64) -> Self {
        self.full_every = ticks.max(1);
        self
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

    /// Integrates every committed queued entry, then signs every grown
    /// tenant once; `Err` only when the queued or the grown tenants could
    /// not be listed.
    pub async fn tick(&self) -> Result<Tick, LogError> {
        let mut tick = Tick::default();
        let began = std::time::Instant::now();
        let integrated = ledger::integrate(&self.pool, &self.ledger_key)
            .await
            .map_err(|e| LogError::Integration(Box::new(e)))?;
        tick.integrated = integrated.entries;
        tick.integrating = began.elapsed();
        for refusal in integrated.refused {
            tick.refused
                .push((refusal.tenant.clone(), Refusal::Queue(refusal)));
        }
        for (tenant, cause) in integrated.failed {
            tick.refused
                .push((tenant.clone(), Refusal::Integration { tenant, cause }));
        }
        let full = self
            .ticks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(self.full_every);
        self.sign_grown(full, &mut tick).await?;
        tick.signing = began.elapsed().saturating_sub(tick.integrating);
        Ok(tick)
    }

    /// Checks and signs every grown tenant: one statement reads the entries
    /// each needs (past the checkpoint the last signing verified, or its
    /// whole log on a full check), one keeps every checkpoint signed. Should
    /// that keep fail, each checkpoint is kept by a statement of its own, so
    /// a refusal names its own tenant only.
    async fn sign_grown(&self, full: bool, tick: &mut Tick) -> Result<(), LogError> {
        let mut plans = Vec::new();
        for behind in self.behind().await? {
            let kept = behind.size.unwrap_or(0).max(0) as u64;
            if behind.roots.len() > 1 {
                let refusal = Refusal::Forked {
                    tenant: behind.tenant_id.clone(),
                    size: kept,
                    roots: behind.roots.len(),
                };
                tick.refused.push((behind.tenant_id, refusal));
                continue;
            }
            let cached = if full {
                None
            } else {
                self.cached(&behind.tenant_id, kept, &behind.roots)
            };
            plans.push((behind, cached));
        }
        if plans.is_empty() {
            return Ok(());
        }
        let mut read = self
            .entries_after(plans.iter().map(|(behind, cached)| {
                let after = cached.as_ref().map_or(0, |v| v.size);
                (behind.tenant_id.as_str(), after)
            }))
            .await?;
        let mut ready = Vec::new();
        for (behind, cached) in plans {
            let rows = read.remove(&behind.tenant_id).unwrap_or_default();
            let tenant = behind.tenant_id.clone();
            match self.check(behind, cached, rows) {
                Ok(checked) => ready.push(checked),
                Err(refusal) => tick.refused.push((tenant, refusal)),
            }
        }
        let trees: Vec<(&str, &Tree)> =
            ready.iter().map(|c| (c.tenant.as_str(), &c.tree)).collect();
        let now = self.clock.now();
        let kept = match tlog::sign_trees(&self.pool, &self.log_key, &trees, now).await {
            Ok(kept) => kept.into_iter().map(Ok).collect(),
            Err(e) if trees.len() == 1 => vec![Err(e)],
            Err(_) => {
                let mut each = Vec::new();
                for (tenant, tree) in &trees {
                    each.push(tlog::sign_tree(&self.pool, &self.log_key, tenant, tree, now).await);
                }
                each
            }
        };
        for (checked, kept) in ready.into_iter().zip(kept) {
            match kept {
                Ok(checkpoint) => {
                    if let Ok(mut verified) = self.verified.lock() {
                        verified.insert(
                            checked.tenant.clone(),
                            Verified {
                                size: checkpoint.size,
                                root: checkpoint.root.clone(),
                                last_hash: checked.last_hash,
                                leaves: checked.leaves,
                            },
                        );
                    }
                    tick.signed.push((checked.tenant, checkpoint));
                }
                Err(e) => tick.refused.push((checked.tenant, e.into())),
            }
        }
        Ok(())
    }

    /// What the last signing verified of `tenant`, when its largest kept
    /// checkpoint is still the one that signing kept.
    fn cached(&self, tenant: &str, kept: u64, roots: &[String]) -> Option<Verified> {
        let verified = self.verified.lock().ok()?;
        let v = verified.get(tenant)?;
        (v.size == kept && roots == std::slice::from_ref(&v.root)).then(|| v.clone())
    }

    /// Each tenant's entries numbered above its `after`, in order, in one
    /// statement.
    async fn entries_after(
        &self,
        wanted: impl Iterator<Item = (&str, u64)>,
    ) -> Result<HashMap<String, Vec<Leaf>>, LogError> {
        let (tenants, afters): (Vec<&str>, Vec<i64>) = wanted
            .map(|(tenant, after)| (tenant, i64::try_from(after).unwrap_or(i64::MAX)))
            .unzip();
        let leaves: Vec<Leaf> = sqlx::query_as(
            "SELECT e.tenant_id, e.seq, e.entry, e.prev_hash, e.hash \
               FROM UNNEST($1::text[], $2::bigint[]) AS w(tenant_id, after) \
               JOIN ledger_entries e ON e.tenant_id = w.tenant_id AND e.seq > w.after \
              ORDER BY e.tenant_id, e.seq",
        )
        .bind(&tenants)
        .bind(&afters)
        .fetch_all(&self.pool)
        .await
        .map_err(|cause| LogError::Database {
            action: "reading the tenants' ledger entries",
            cause,
        })?;
        let mut by_tenant: HashMap<String, Vec<Leaf>> = HashMap::new();
        for leaf in leaves {
            by_tenant
                .entry(leaf.tenant_id.clone())
                .or_default()
                .push(leaf);
        }
        Ok(by_tenant)
    }

    /// Checks one tenant's log, read past `cached`'s size (or whole, with
    /// no `cached`: a full check, or the last signing's work does not match
    /// the largest kept checkpoint), and builds the tree to sign. Read
    /// whole, its tree must still have the largest kept checkpoint's root
    /// at its size; otherwise the leaves the last signing verified are
    /// taken as they were. Either way every entry past the checkpoint must
    /// be numbered in order and chain under the ledger key from the one
    /// before it.
    fn check(
        &self,
        behind: Behind,
        cached: Option<Verified>,
        mut rows: Vec<Leaf>,
    ) -> Result<Checked, Refusal> {
        let tenant = behind.tenant_id.as_str();
        let kept = behind.size.unwrap_or(0).max(0) as u64;
        let (mut hashes, mut prev, rows) = match cached {
            Some(v) => (v.leaves, v.last_hash, rows),
            None => {
                numbered(tenant, &rows, 1)?;
                let split = usize::try_from(kept).unwrap_or(usize::MAX);
                if let Some(signed) = behind.roots.first() {
                    if split > rows.len() {
                        return Err(LogError::Rewritten {
                            tenant: tenant.to_owned(),
                            size: kept,
                            signed: signed.clone(),
                            now: format!("a tree of {} leaves", rows.len()),
                        }
                        .into());
                    }
                    let prefix = Tree::from_leaf_hashes(
                        rows[..split].iter().map(|l| leaf_hash(l.entry.as_bytes())),
                    );
                    let now = hash_to_base64(&prefix.root());
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
                let split = split.min(rows.len());
                let after = rows.split_off(split);
                let prev = rows
                    .last()
                    .map_or_else(|| GENESIS_HASH.to_owned(), |l| l.hash.clone());
                let hashes = rows.iter().map(|l| leaf_hash(l.entry.as_bytes())).collect();
                (hashes, prev, after)
            }
        };
        numbered(tenant, &rows, kept as i64 + 1)?;
        for leaf in &rows {
            let broken = |problem| Refusal::Broken {
                tenant: tenant.to_owned(),
                seq: leaf.seq,
                problem,
            };
            if leaf.prev_hash != prev {
                return Err(broken("does not name the previous entry's hash"));
            }
            if chain_hash(&self.ledger_key, &prev, &leaf.entry) != leaf.hash {
                return Err(broken(
                    "is not the keyed hash of its contents (forged or changed)",
                ));
            }
            prev.clone_from(&leaf.hash);
            hashes.push(leaf_hash(leaf.entry.as_bytes()));
        }
        Ok(Checked {
            tree: Tree::from_leaf_hashes(hashes.iter().copied()),
            tenant: behind.tenant_id,
            last_hash: prev,
            leaves: hashes,
        })
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

/// Entries `rows` must be numbered `first`, `first + 1`, ... .
fn numbered(tenant: &str, rows: &[Leaf], first: i64) -> Result<(), LogError> {
    for (i, leaf) in rows.iter().enumerate() {
        let want = first + i as i64;
        if leaf.seq != want {
            return Err(LogError::Gap {
                tenant: tenant.to_owned(),
                missing: want,
            });
        }
    }
    Ok(())
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
