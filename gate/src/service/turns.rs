//! Turns: how many of one tenant's proposals may hold a database
//! connection at once.
//!
//! Guarantees:
//! - At most `per_tenant` holders of a [`Turn`] for one tenant at a time;
//!   other callers of [`Turns::take`] for that tenant wait in this process,
//!   in the order they asked (tokio's semaphore is fair), holding no
//!   connection.
//! - Tenants never wait on each other's turns.
//! - The map holds only tenants with a turn held or awaited: an entry whose
//!   last turn ended is dropped when a new tenant is added, so its size is
//!   bounded by the proposals in flight, whatever names callers send.
//! - A turn is a scheduling aid, not a guard: the database's locks keep a
//!   tenant's decisions exact with or without it (two gates over one
//!   database each have their own turns).
//!
//! Why: every proposal takes its tenant's day lock (`decision_state`), so a
//! tenant's proposals are decided one at a time in the database however
//! many are in flight. Without turns, each of them holds a pooled
//! connection while it waits for that lock: one tenant with as many
//! proposals in flight as the pool has connections (an agent in a loop)
//! holds every connection, and every other tenant waits behind it. With
//! turns, the proposals past a tenant's turns wait in the process, and the
//! rest of the pool serves the other tenants.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Turns per tenant unless [`super::Gate::with_turns_per_tenant`] says
/// otherwise: one proposal deciding under the tenant's day lock, and one
/// ready to take it the moment it is free.
pub const DEFAULT_TURNS_PER_TENANT: usize = 2;

/// The turns of every tenant with a proposal in flight.
#[derive(Debug)]
pub(crate) struct Turns {
    per_tenant: usize,
    tenants: Mutex<HashMap<String, Weak<Semaphore>>>,
}

/// One tenant's turn, held until it is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: Option<OwnedSemaphorePermit>,
}

impl Default for Turns {
    fn default() -> Self {
        Turns::new(DEFAULT_TURNS_PER_TENANT)
    }
}

impl Turns {
    /// `per_tenant` turns for each tenant: at least one, and at most as
    /// many as a semaphore holds (`Semaphore::MAX_PERMITS`, which would
    /// otherwise panic at a tenant's first proposal; far past any pool).
    pub(crate) fn new(per_tenant: usize) -> Self {
        Turns {
            per_tenant: per_tenant.clamp(1, Semaphore::MAX_PERMITS),
            tenants: Mutex::new(HashMap::new()),
        }
    }

    /// How many turns each tenant has.
    pub(crate) fn per_tenant(&self) -> usize {
        self.per_tenant
    }

    /// Waits for one of `tenant`'s turns.
    pub(crate) async fn take(&self, tenant: &str) -> Turn {
        let turns = self.of(tenant);
        // Acquiring fails only on a closed semaphore, and these are never
        // closed; without a permit the proposal still runs, under the
        // database's locks.
        Turn {
            _permit: turns.acquire_owned().await.ok(),
        }
    }

    /// `tenant`'s semaphore: the one its turns in flight share, or a new one.
    fn of(&self, tenant: &str) -> Arc<Semaphore> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = tenants.get(tenant).and_then(Weak::upgrade) {
            return live;
        }
        tenants.retain(|_, turns| turns.strong_count() > 0);
        let turns = Arc::new(Semaphore::new(self.per_tenant));
        tenants.insert(tenant.to_owned(), Arc::downgrade(&turns));
        turns
    }

    /// How many tenants the map holds (tests).
    #[cfg(test)]
    fn tenants_held(&self) -> usize {
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `take` for `tenant` finishes within a moment (it only ever
    /// waits for another turn to end).
    async fn gets_a_turn(turns: &Turns, tenant: &str) -> Option<Turn> {
        tokio::time::timeout(Duration::from_millis(50), turns.take(tenant))
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_tenant_has_its_turns_and_no_more_until_one_ends() {
        let turns = Turns::new(2);
        let first = gets_a_turn(&turns, "acme").await;
        let second = gets_a_turn(&turns, "acme").await;
        assert!(first.is_some() && second.is_some());
        assert!(gets_a_turn(&turns, "acme").await.is_none(), "a third turn");
        drop(first);
        assert!(gets_a_turn(&turns, "acme").await.is_some(), "a turn ended");
    }

    #[tokio::test]
    async fn tenants_never_wait_on_each_others_turns() {
        let turns = Turns::new(1);
        let _acme = gets_a_turn(&turns, "acme").await;
        assert!(gets_a_turn(&turns, "acme").await.is_none());
        assert!(gets_a_turn(&turns, "globex").await.is_some());
    }

    #[tokio::test]
    async fn waiting_turns_are_given_in_the_order_they_were_asked_for() {
        let turns = Arc::new(Turns::new(1));
        let held = turns.take("acme").await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut waiting = Vec::new();
        for i in 0..4 {
            let (turns, tx) = (turns.clone(), tx.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = turns.take("acme").await;
                let _ = tx.send(i);
            }));
            // Each asks only once the one before is waiting.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(held);
        for w in waiting {
            w.await.expect("a waiting task panicked");
        }
        let order: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(order, [0, 1, 2, 3]);
    }

    #[tokio::test]
    async fn the_map_keeps_only_tenants_with_a_turn_in_flight() {
        let turns = Turns::new(2);
        for i in 0..100 {
            let _turn = turns.take(&format!("tenant-{i}")).await;
        }
        // Each new tenant dropped the ended ones before it was added.
        assert_eq!(turns.tenants_held(), 1);
        let held: Vec<Turn> = held_turns(&turns, 3).await;
        assert_eq!(turns.tenants_held(), 3);
        drop(held);
        let _next = turns.take("another").await;
        assert_eq!(turns.tenants_held(), 1);
    }

    async fn held_turns(turns: &Turns, n: usize) -> Vec<Turn> {
        let mut held = Vec::new();
        for i in 0..n {
            held.push(turns.take(&format!("held-{i}")).await);
        }
        held
    }

    #[test]
    fn a_tenant_always_has_at_least_one_turn() {
        assert_eq!(Turns::new(0).per_tenant(), 1);
        assert_eq!(Turns::default().per_tenant(), DEFAULT_TURNS_PER_TENANT);
    }

    #[tokio::test]
    async fn a_huge_number_of_turns_is_capped_not_a_panic() {
        let turns = Turns::new(usize::MAX);
        assert_eq!(turns.per_tenant(), Semaphore::MAX_PERMITS);
        assert!(gets_a_turn(&turns, "acme").await.is_some());
    }
}
