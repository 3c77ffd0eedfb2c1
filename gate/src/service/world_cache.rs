//! The tenants' policies and catalogs a gate has read, kept between proposals.
//!
//! Guarantees: an entry is a guess, never trusted. It carries the digest the
//! database computed of the tenant's latest policy version (number and text)
//! and of its catalog rows (`tenant_world`,
//! `migrations/20261205000003_world_stamp.sql`). A proposal decides with
//! an entry only when the database finds that digest current, in the very
//! statement that then locks the decision's state (`proposal_state`): equal
//! to the digest every write of the tenant's policy or catalog stores with
//! the tenant (`tenants.world_digest`), or else to the digest of the world
//! read afresh; otherwise the database sends the policy and the catalog as
//! they are, and they replace the entry.
//! So a cached policy or catalog is never older than the one a proposal
//! read in a statement of its own before this cache existed. At most
//! [`MAX_TENANTS`] entries are kept: a full cache is emptied before another
//! tenant goes in, so no caller can grow it without bound. Clones share the
//! entries. An entry's catalog rows were checked against their MACs once,
//! when it was read (`world::TenantCatalog`): the digest covers each row's
//! MAC, so a row edited since is a new world, read and checked afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::world::World;

/// At most this many tenants' worlds are kept.
pub(crate) const MAX_TENANTS: usize = 1024;

/// The worlds a gate has read, by tenant.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorldCache {
    worlds: Arc<Mutex<HashMap<String, Arc<World>>>>,
}

impl WorldCache {
    /// The world last read for `tenant`, if it is kept.
    pub fn get(&self, tenant: &str) -> Option<Arc<World>> {
        let worlds = self.worlds.lock().unwrap_or_else(PoisonError::into_inner);
        worlds.get(tenant).cloned()
    }

    /// Keeps `world` as `tenant`'s, in place of any before it.
    pub fn put(&self, tenant: &str, world: Arc<World>) {
        let mut worlds = self.worlds.lock().unwrap_or_else(PoisonError::into_inner);
        if worlds.len() >= MAX_TENANTS && !worlds.contains_key(tenant) {
            worlds.clear();
        }
        worlds.insert(tenant.to_owned(), world);
    }

    /// How many tenants' worlds are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.worlds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(digest: &str) -> Arc<World> {
        Arc::new(World {
            digest: digest.into(),
            policy: None,
            catalog: None,
        })
    }

    #[test]
    fn a_world_put_is_got_back_replaced_by_the_next_and_shared_by_clones() {
        let cache = WorldCache::default();
        assert!(cache.get("acme").is_none());
        cache.put("acme", world("one"));
        let clone = cache.clone();
        assert_eq!(
            clone.get("acme").map(|w| w.digest.clone()).as_deref(),
            Some("one")
        );
        clone.put("acme", world("two"));
        assert_eq!(
            cache.get("acme").map(|w| w.digest.clone()).as_deref(),
            Some("two")
        );
        assert!(
            cache.get("globex").is_none(),
            "tenants do not share a world"
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_bound_and_a_kept_tenant_is_replaced_in_place() {
        let cache = WorldCache::default();
        for i in 0..MAX_TENANTS {
            cache.put(&format!("t{i}"), world("w"));
        }
        assert_eq!(cache.len(), MAX_TENANTS);
        // Replacing a tenant it holds keeps the others.
        cache.put("t0", world("again"));
        assert_eq!(cache.len(), MAX_TENANTS);
        assert!(cache.get("t1").is_some());
        // One more tenant empties it first.
        cache.put("one-more", world("w"));
        assert_eq!(cache.len(), 1);
        assert!(cache.get("one-more").is_some());
        assert!(cache.get("t1").is_none());
    }
}
