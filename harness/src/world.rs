//! What the harness derives from a scenario world beyond the gate's own seed
//! types (which a world file deserializes into directly): the pure engine's
//! catalog and each agent's delegation chain.
//!
//! Guarantees: each agent's delegation chain is built root first by
//! following `from` links up to a human, with each hop's allocation to its
//! children; a hop whose grantor is neither a person nor an earlier hop is
//! an error. The `standard` world is the one compiled into `scenarios`, so
//! the tour needs no files beside it.

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use gate::delegation::{DelegationChain, DelegationHop};
use gate::service::TenantSeed;
use gate::{Catalog, Policy};

/// The default tenant of the standard world in the gate's types.
pub struct StandardWorld {
    pub now: DateTime<Utc>,
    pub catalog: Catalog,
    pub policy: Policy,
    /// `buyer-agent`'s chain (`d-buyer`).
    pub buyer_chain: DelegationChain,
}

impl StandardWorld {
    pub fn load() -> Result<Self> {
        let world = scenarios::generate::standard_world();
        let tenant = world
            .default_tenant()
            .context("the standard world has no tenant")?;
        Ok(StandardWorld {
            now: world.now,
            catalog: catalog(tenant),
            policy: tenant.policy.clone(),
            buyer_chain: chain_for(&delegation_hops(tenant)?, "buyer-agent"),
        })
    }
}

/// A tenant's catalog.
pub fn catalog(tenant: &TenantSeed) -> Catalog {
    Catalog::new(tenant.catalog.iter().cloned())
}

/// Every delegation hop of a tenant, in grant order, each with its parent
/// link and what its children were allocated.
pub fn delegation_hops(tenant: &TenantSeed) -> Result<Vec<DelegationHop>> {
    let mut hops: Vec<DelegationHop> = Vec::with_capacity(tenant.delegations.len());
    for d in &tenant.delegations {
        let parent = hops.iter().position(|h| h.id == d.from);
        if let Some(p) = parent {
            hops[p].allocated_paise = hops[p]
                .allocated_paise
                .checked_add(d.budget_paise)
                .context("delegation allocations overflow")?;
        } else if !tenant.people.iter().any(|p| p.id == d.from) {
            bail!(
                "delegation `{}` comes from `{}`, neither a person nor an earlier delegation",
                d.id,
                d.from
            );
        }
        hops.push(DelegationHop {
            id: d.id.clone(),
            parent: parent.map(|p| hops[p].id.clone()),
            grantee: d.to.clone(),
            budget_paise: d.budget_paise,
            allocated_paise: 0,
            spent_paise: 0,
            skus: d.skus.clone(),
            expires_at: d.expires_at,
            revoked: false,
        });
    }
    Ok(hops)
}

/// The chain of the agent's last-granted hop, root first; empty when it holds none.
pub fn chain_for(hops: &[DelegationHop], agent: &str) -> DelegationChain {
    let Some(leaf) = hops.iter().rev().find(|h| h.grantee == agent) else {
        return DelegationChain::default();
    };
    let mut path = vec![leaf.clone()];
    while let Some(parent_id) = path.last().and_then(|h| h.parent.clone()) {
        match hops.iter().find(|h| h.id == parent_id) {
            // Parents are granted before children, so this walk always ends.
            Some(parent) if path.len() <= hops.len() => path.push(parent.clone()),
            _ => break,
        }
    }
    path.reverse();
    DelegationChain::new(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_world_has_the_spec_values_in_the_gates_types() {
        let w = StandardWorld::load().unwrap();
        assert_eq!(
            w.now,
            "2026-09-03T10:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(w.policy.per_transaction_cap_paise, 300000);
        assert_eq!(
            w.policy.valid_until.to_rfc3339(),
            "2026-12-31T23:59:59+00:00"
        );
        assert_eq!(
            w.catalog.get("GPU-HOUR").map(|i| i.price_paise),
            Some(450000)
        );
        assert_eq!(w.buyer_chain.hops.len(), 1);
        assert_eq!(w.buyer_chain.hops[0].budget_paise, 200000);
        assert!(w.policy.validated().is_ok());
    }

    #[test]
    fn chains_follow_parents_and_count_allocations() {
        let mut world = scenarios::generate::standard_world().clone();
        let t = &mut world.tenants[0];
        let mut child = t.delegations[0].clone();
        child.id = "d-proc".into();
        child.from = "d-buyer".into();
        child.to = "procurement-agent".into();
        child.budget_paise = 50000;
        t.delegations.push(child);
        let hops = delegation_hops(t).unwrap();
        assert_eq!(hops[0].allocated_paise, 50000);
        let chain = chain_for(&hops, "procurement-agent");
        let ids: Vec<&str> = chain.hops.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["d-buyer", "d-proc"]);
        assert!(chain_for(&hops, "renewals-agent").hops.is_empty());
    }
}
