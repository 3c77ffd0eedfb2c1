//! The one place a row lock is taken, and the one order locks are taken in.
//!
//! Guarantees: every `SELECT ... FOR UPDATE` of the gate's Rust is the one
//! in [`lock`] and [`lock_all`], and the one advisory lock is the one in
//! [`lock_idempotency_key`] (a test parses `gate/src` and fails if any
//! other file holds a row-lock clause). They take a key, never a row: they
//! return the row as read under the lock, so a caller always decides on the
//! locked, current version and never on a copy it read before. The only
//! other locks are the database function `decision_state`'s
//! (`super::decision_state`): the day and the agent's hops a decision is
//! made on, locked and read in one round trip, in this order and with the
//! same rank comments (tests read the migrations and check both).
//!
//! Keys are typed: each lockable row ([`Lockable`]) names the one key type
//! that selects it ([`Lockable::Key`]), so a row cannot be locked with
//! another row's key (a [`RequestKey`] cannot lock a checkout authority, nor
//! a [`TenantKey`] a ledger head), and each key binds its parts with their
//! own types. Each locking
//! statement opens with a comment naming its key's rank and row, so a lock
//! wait or deadlock that Postgres logs says which ranks met.
//!
//! The one lock order. Every operation takes the locks it needs in this order
//! and never another, so two operations never wait on each other in a cycle.
//! Each key type carries its place in it ([`LockKey::RANK`]), as does each
//! lock of `decision_state` (its comment); a test checks that every rank is
//! the number of the item below that names its row:
//! 1. the tenant row, `FOR NO KEY UPDATE` (only `set_policy`, to number
//!    versions, and the database's `world_restamp`, after a write of the
//!    tenant's policy or catalog, to rewrite its world digest:
//!    `migrations/20261205000003_world_stamp.sql`). It never blocks the
//!    key-share locks that foreign-key checks of other writers take on the
//!    same row, so a publication cannot deadlock with a proposal whose
//!    insert references the tenant;
//! 2. the checkout authority (only a payment locks one, to consume it, and
//!    only before its request: no operation locks an authority after a
//!    request);
//! 3. the request (a keyed proposal, before its request exists, holds the
//!    request's idempotency key instead: [`lock_idempotency_key`], a
//!    transaction-scoped advisory lock on a hash of tenant, agent and key,
//!    taken before anything else the proposal locks, so copies of one keyed
//!    proposal decide one after another whatever day row each would lock);
//! 4. the tenant's day of reservations in one currency (`decision_state`);
//! 5. delegation hops, from the leaf upwards (a revocation locks the revoked
//!    branch deepest first, and a release walks from the leaf to the root);
//! 6. the tenant's ledger head: taken only by the sequencer
//!    (`ledger::integrate`), alone in its transaction, the heads of all the
//!    tenants it integrates at once in tenant order; no operation locks it.

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::QueryAs;
use sqlx::{FromRow, PgConnection, Postgres};

/// A query whose key parts are still to be bound.
type Unbound<'q, T> = QueryAs<'q, Postgres, T, PgArguments>;

/// A key naming the rows of one lockable kind: how it selects them, and where
/// that kind stands in the lock order.
pub(crate) trait LockKey: Send {
    /// The row's place in the one lock order: the number of the item of the
    /// module docs' list that names it ([`LockKey::ROW`]).
    const RANK: u8;
    /// The words that item uses for the row.
    const ROW: &'static str;
    /// The WHERE condition over the binds `$1`, `$2`, ... of [`LockKey::bind`].
    const WHERE: &'static str;
    /// Binds the key's parts, in the order [`LockKey::WHERE`] numbers them.
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q;
}

/// A row that may be locked: how to select it and which key selects it.
pub(crate) trait Lockable: for<'r> FromRow<'r, PgRow> + Send + Unpin {
    /// The one key type that names this row.
    type Key<'k>: LockKey;
    /// `SELECT <columns> FROM <table>`, without a WHERE clause.
    const SELECT: &'static str;
    /// How strongly the row is locked (see the module docs for the one weaker lock).
    const STRENGTH: Strength = Strength::Update;
    /// When several rows are locked: the `ORDER BY` they are locked in.
    const ORDER: &'static str = "";
}

/// A row lock's strength.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strength {
    /// `FOR UPDATE`: the row will change.
    Update,
    /// `FOR NO KEY UPDATE`: the row is held, but the key-share locks that
    /// foreign-key checks of other writers take on it are not blocked.
    NoKeyUpdate,
}

impl Strength {
    fn clause(self) -> &'static str {
        match self {
            Strength::Update => " FOR UPDATE",
            Strength::NoKeyUpdate => " FOR NO KEY UPDATE",
        }
    }
}

/// Names the tenant row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TenantKey<'k> {
    pub tenant: &'k str,
}

impl LockKey for TenantKey<'_> {
    const RANK: u8 = 1;
    const ROW: &'static str = "the tenant row";
    const WHERE: &'static str = "id = $1";
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q,
    {
        query.bind(self.tenant)
    }
}

/// Names one checkout authority of a tenant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuthorityKey<'k> {
    pub tenant: &'k str,
    pub authority: &'k str,
}

impl LockKey for AuthorityKey<'_> {
    const RANK: u8 = 2;
    const ROW: &'static str = "the checkout authority";
    const WHERE: &'static str = "tenant_id = $1 AND id = $2";
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q,
    {
        query.bind(self.tenant).bind(self.authority)
    }
}

/// Names one payment request of a tenant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestKey<'k> {
    pub tenant: &'k str,
    pub request: &'k str,
}

impl LockKey for RequestKey<'_> {
    const RANK: u8 = 3;
    const ROW: &'static str = "the request";
    const WHERE: &'static str = "tenant_id = $1 AND id = $2";
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q,
    {
        query.bind(self.tenant).bind(self.request)
    }
}

/// Names a delegation hop and every hop below it: the branch a revocation
/// revokes (locked with [`lock_all`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BranchKey<'k> {
    pub tenant: &'k str,
    pub delegation: &'k str,
}

impl LockKey for BranchKey<'_> {
    const RANK: u8 = 5;
    const ROW: &'static str = "delegation hops";
    const WHERE: &'static str = "tenant_id = $1 AND id IN ( \
        WITH RECURSIVE down AS ( \
            SELECT id FROM delegations WHERE tenant_id = $1 AND id = $2 \
            UNION \
            SELECT c.id FROM delegations c JOIN down ON c.tenant_id = $1 AND c.parent_id = down.id) \
        SELECT id FROM down)";
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q,
    {
        query.bind(self.tenant).bind(self.delegation)
    }
}

/// Names the ledger heads of some tenants (the sequencer locks the heads of
/// every tenant it integrates, in one statement, in tenant order).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LedgerHeadKey<'k> {
    pub tenants: &'k [String],
}

impl LockKey for LedgerHeadKey<'_> {
    const RANK: u8 = 6;
    const ROW: &'static str = "the tenant's ledger head";
    const WHERE: &'static str = "tenant_id = ANY($1)";
    fn bind<'q, T>(self, query: Unbound<'q, T>) -> Unbound<'q, T>
    where
        Self: 'q,
    {
        query.bind(self.tenants)
    }
}

/// The locking statement without its lock clause: `select` with the key's
/// condition and `order`, headed by a comment naming the key's place in the
/// lock order, so a lock wait or deadlock that Postgres logs says which
/// ranks met (`/* lock order 3: the request */ SELECT ...`).
fn statement<K: LockKey>(select: &str, order: &str) -> String {
    format!(
        "/* lock order {}: {} */ {select} WHERE {}{order}",
        K::RANK,
        K::ROW,
        K::WHERE
    )
}

/// Locks the row of `T` named by `key` until the transaction ends and returns
/// it as read under the lock; `None` when there is no such row.
pub(crate) async fn lock<'k, T: Lockable>(
    conn: &mut PgConnection,
    key: T::Key<'k>,
) -> Result<Option<T>, sqlx::Error> {
    let mut sql = statement::<T::Key<'k>>(T::SELECT, "");
    sql.push_str(T::STRENGTH.clause());
    let query = sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql));
    key.bind(query).fetch_optional(conn).await
}

/// Locks every row of `T` the key selects, in `T::ORDER`, until the
/// transaction ends, and returns them as read under the lock.
pub(crate) async fn lock_all<'k, T: Lockable>(
    conn: &mut PgConnection,
    key: T::Key<'k>,
) -> Result<Vec<T>, sqlx::Error> {
    let mut sql = statement::<T::Key<'k>>(T::SELECT, T::ORDER);
    sql.push_str(T::STRENGTH.clause());
    let query = sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql));
    key.bind(query).fetch_all(conn).await
}

/// The idempotency key's lock: `agent`'s `key` in `tenant`, held until the
/// transaction ends (`pg_advisory_xact_lock` on a 64-bit hash of the three,
/// joined by a character no identifier holds). It ranks with the request it
/// stands for (item 3 of the lock order); a proposal takes it first, so two
/// copies of one keyed proposal never decide at once: the later one reads
/// the earlier one's request and replays it or is `IDEMPOTENCY_KEY_REUSED`.
/// Two keys whose hashes meet only wait for each other.
pub(crate) async fn lock_idempotency_key(
    conn: &mut PgConnection,
    tenant: &str,
    agent: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "/* lock order 3: the request (its idempotency key) */ \
         SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2 || '/' || $3, 0))",
    )
    .bind(tenant)
    .bind(agent)
    .bind(key)
    .execute(conn)
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::rows::LedgerHeadRow;
    use sqlx::Connection;

    /// The (rank, row words) of every key type of this file.
    const KEYS: [(u8, &str); 5] = [
        (TenantKey::RANK, TenantKey::ROW),
        (AuthorityKey::RANK, AuthorityKey::ROW),
        (RequestKey::RANK, RequestKey::ROW),
        (BranchKey::RANK, BranchKey::ROW),
        (LedgerHeadKey::RANK, LedgerHeadKey::ROW),
    ];

    /// The database function that locks and reads a decision's state.
    const DECISION_STATE: &str =
        include_str!("../../../migrations/20261204000004_bounded_counts.sql");

    /// The database function that rewrites a tenant's world digest.
    const WORLD_STAMP: &str = include_str!("../../../migrations/20261205000003_world_stamp.sql");

    /// The (rank, row words) of every `/* lock order N: row */` comment of
    /// some SQL, in the order they appear.
    fn sql_locks(sql: &str) -> Vec<(u8, String)> {
        sql.split("/* lock order ")
            .skip(1)
            .filter_map(|rest| {
                let (rank, rest) = rest.split_once(": ")?;
                let (row, _) = rest.split_once(" */")?;
                Some((rank.parse().ok()?, row.to_owned()))
            })
            .collect()
    }

    /// The numbered items of the module docs' lock order, each as one line
    /// (its continuation lines joined, whitespace collapsed).
    fn documented_order(source: &str) -> Vec<(u8, String)> {
        let mut items: Vec<(u8, String)> = Vec::new();
        let mut in_item = false;
        for line in source.lines().map_while(|l| l.strip_prefix("//!")) {
            let line = line.trim();
            let numbered = line
                .split_once(". ")
                .and_then(|(n, rest)| Some((n.parse::<u8>().ok()?, rest)));
            match (numbered, items.last_mut()) {
                (Some((n, rest)), _) => {
                    items.push((n, rest.to_owned()));
                    in_item = true;
                }
                (None, Some((_, text))) if in_item && !line.is_empty() => {
                    text.push(' ');
                    text.push_str(line);
                }
                (None, _) => in_item = false,
            }
        }
        items
    }

    #[test]
    fn every_key_ranks_where_the_documented_order_names_its_row() {
        let source = include_str!("lock.rs");
        let order = documented_order(source);
        let numbers: Vec<u8> = order.iter().map(|(n, _)| *n).collect();
        let expected: Vec<u8> = (1..=u8::try_from(order.len()).unwrap_or(u8::MAX)).collect();
        assert_eq!(numbers, expected, "the lock order is numbered 1, 2, ...");
        // Every key type of this file is in KEYS.
        let declared = source.matches(concat!("impl LockKey", " for ")).count();
        assert_eq!(declared, KEYS.len(), "list every key type in KEYS");
        // Every key's rank, and every rank decision_state's comments give,
        // is the one item that names its row.
        let mut sql = sql_locks(DECISION_STATE);
        sql.extend(sql_locks(WORLD_STAMP));
        let ranked = KEYS
            .iter()
            .map(|(rank, row)| (*rank, (*row).to_owned()))
            .chain(sql.iter().cloned());
        for (rank, row) in ranked {
            let naming: Vec<u8> = order
                .iter()
                .filter(|(_, text)| text.starts_with(&row))
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(naming, vec![rank], "{row:?} has rank {rank}: {order:#?}");
        }
        // And every item of the order is some key's or decision_state's.
        for (n, text) in &order {
            assert!(
                KEYS.iter().any(|(rank, _)| rank == n) || sql.iter().any(|(rank, _)| rank == n),
                "nothing ranks {n} ({text})"
            );
        }
    }

    /// The world digest's writer locks the tenant row, its one lock, under
    /// the rank comment, and no other row.
    #[test]
    fn the_world_stamp_locks_only_the_tenant_row_under_its_rank_comment() {
        assert_eq!(
            sql_locks(WORLD_STAMP),
            [(TenantKey::RANK, TenantKey::ROW.to_owned())]
        );
        let code: String = WORLD_STAMP
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(code.matches("FOR NO KEY UPDATE").count(), 1, "one lock");
        assert_eq!(code.matches("FOR UPDATE").count(), 0);
        let locking = WORLD_STAMP
            .split("/* lock order ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_default();
        assert!(locking.contains("FOR NO KEY UPDATE"), "{locking}");
    }

    /// decision_state takes its locks in the order: every lock clause of the
    /// function follows a rank comment, and the ranks never go down.
    #[test]
    fn decision_state_locks_the_day_then_the_hops_each_under_its_rank_comment() {
        let locks = sql_locks(DECISION_STATE);
        let ranks: Vec<u8> = locks.iter().map(|(rank, _)| *rank).collect();
        assert_eq!(ranks, [4, 4, 5], "{locks:?}");
        let clauses = DECISION_STATE.matches("FOR UPDATE").count();
        assert_eq!(clauses, locks.len(), "one comment per lock clause");
        for piece in DECISION_STATE.split("/* lock order ").skip(1) {
            let statement = piece.split(';').next().unwrap_or_default();
            assert!(statement.contains("FOR UPDATE"), "{statement}");
        }
        assert_eq!(
            sql_locks("x /* lock order 6: the head */ y /* lock order z: w */"),
            [(6, "the head".to_owned())]
        );
    }

    #[test]
    fn the_order_reader_reads_numbered_items_and_their_continuations() {
        let order = documented_order(
            "//! The order:\n//! 1. the a,\n//!    still a;\n//! 2. the b.\n//!\n//! After.\n",
        );
        assert_eq!(
            order,
            vec![(1, "the a, still a;".to_owned()), (2, "the b.".to_owned())]
        );
        assert!(documented_order("//! no list here\n").is_empty());
    }

    #[test]
    fn a_locking_statement_names_its_rank_and_binds_its_key() {
        let sql = statement::<LedgerHeadKey>("SELECT seq, hash FROM ledger_head", "");
        assert_eq!(
            sql,
            "/* lock order 6: the tenant's ledger head */ SELECT seq, hash \
             FROM ledger_head WHERE tenant_id = ANY($1)"
        );
        let sql = statement::<RequestKey>("SELECT id FROM payment_requests", " ORDER BY id");
        assert!(
            sql.ends_with("WHERE tenant_id = $1 AND id = $2 ORDER BY id"),
            "{sql}"
        );
    }

    fn head(tenants: &[String]) -> LedgerHeadKey<'_> {
        LedgerHeadKey { tenants }
    }

    /// The helper decides on the row as it is when the lock is granted, not as
    /// it was when the caller last looked: a second transaction that waited
    /// for the lock sees the first one's committed write.
    #[tokio::test]
    async fn the_locked_row_is_re_read_after_waiting() -> Result<(), Box<dyn std::error::Error>> {
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let pool = db.pool().clone();
        sqlx::query("INSERT INTO tenants (id) VALUES ('acme')")
            .execute(db.owner_pool())
            .await?;
        // The tenant's ledger head is made with it, at 0.
        let mut first = pool.acquire().await?;
        let mut tx1 = first.begin().await?;
        let acme = ["acme".to_owned()];
        let seen: Option<LedgerHeadRow> = lock(&mut tx1, head(&acme)).await?;
        assert_eq!(seen.map(|r| r.seq), Some(0));
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut conn = pool.acquire().await?;
                let mut tx2 = conn.begin().await?;
                let acme = ["acme".to_owned()];
                let row: Option<LedgerHeadRow> = lock(&mut tx2, head(&acme)).await?;
                tx2.rollback().await?;
                Ok::<_, sqlx::Error>(row.map(|r| r.seq))
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "the second lock must wait for the first"
        );
        sqlx::query("UPDATE ledger_head SET seq = 700 WHERE tenant_id = 'acme'")
            .execute(&mut *tx1)
            .await?;
        tx1.commit().await?;
        assert_eq!(waiter.await??, Some(700));
        let nobody = ["nobody".to_owned()];
        let missing: Option<LedgerHeadRow> = lock(&mut first, head(&nobody)).await?;
        assert!(missing.is_none());
        drop(first);
        db.drop().await?;
        Ok(())
    }
}
