//! From a scenario world (YAML, the corpus's terms) to the gate's own types.
//!
//! Guarantees: the conversion is total and loses nothing the gate decides
//! on: catalog rows, the policy (timestamps rendered back to RFC 3339), and
//! each agent's delegation chain, root first, built by following `from`
//! links up to a human, with each hop's allocation to its children. The `standard` world is compiled into the binary, so
//! the tour needs no files beside it.

use anyhow::{Context, Result, bail};
use chrono::{DateTime, SecondsFormat, Utc};
use gate::delegation::{DelegationChain, DelegationHop};
use gate::policy::{DenialRate, Velocity};
use gate::service::{GrantSeed, PersonSeed, Seed, TenantSeed};
use gate::{Catalog, CatalogItem, Policy, PolicyPatch};
use scenarios::policy::WorldPolicy;
use scenarios::world::{Tenant, World};

/// The spec's `standard` world, as committed in `scenarios/worlds/standard.yaml`.
pub const STANDARD_YAML: &str = include_str!("../../scenarios/worlds/standard.yaml");

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
        let world: World = crate::yaml::from_str(STANDARD_YAML)
            .context("the compiled-in standard world does not parse")?;
        let tenant = world
            .default_tenant()
            .context("the standard world has no tenant")?;
        Ok(StandardWorld {
            now: world.now,
            catalog: catalog(tenant),
            policy: policy(&tenant.policy),
            buyer_chain: chain_for(&delegation_hops(tenant)?, "buyer-agent"),
        })
    }
}

/// A tenant's catalog.
pub fn catalog(tenant: &Tenant) -> Catalog {
    Catalog::new(tenant.catalog.iter().map(|i| CatalogItem {
        sku: i.sku.clone(),
        merchant: i.merchant.clone(),
        price_paise: i.price_paise,
        currency: i.currency.clone(),
        category: i.category.clone(),
        max_quantity: i.max_quantity,
        available: i.available,
        description: i.description.clone(),
    }))
}

fn instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A world policy in the gate's terms.
pub fn policy(p: &WorldPolicy) -> Policy {
    Policy {
        currency: p.currency.clone(),
        per_transaction_cap_paise: p.per_transaction_cap_paise,
        daily_cap_paise: p.daily_cap_paise,
        approval_threshold_paise: p.approval_threshold_paise,
        allowed_merchants: p.allowed_merchants.clone(),
        allowed_categories: p.allowed_categories.clone(),
        valid_from: instant(p.valid_from),
        valid_until: instant(p.valid_until),
        velocity: Velocity {
            max_proposals: p.velocity.max_proposals,
            window_minutes: p.velocity.window_minutes,
        },
        denial_rate: DenialRate {
            max_denials: p.denial_rate.max_denials,
            window_minutes: p.denial_rate.window_minutes,
        },
    }
}

/// Every delegation hop of a tenant, in grant order, each with its parent
/// link and what its children were allocated.
pub fn delegation_hops(tenant: &Tenant) -> Result<Vec<DelegationHop>> {
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

/// A world as the database-backed gate seeds it.
pub fn seed(world: &World) -> Seed {
    Seed {
        tenants: world
            .tenants
            .iter()
            .map(|t| TenantSeed {
                id: t.id.clone(),
                people: t
                    .people
                    .iter()
                    .map(|p| PersonSeed {
                        id: p.id.clone(),
                        may_approve: p.may_approve,
                        is_operator: p.is_operator,
                    })
                    .collect(),
                agents: t.agents.clone(),
                merchants: t.merchants.clone(),
                catalog: catalog(t).items().cloned().collect(),
                policy: policy(&t.policy),
                delegations: t.delegations.iter().map(grant).collect(),
            })
            .collect(),
    }
}

/// A delegation hop (world or `grant` step) as the gate takes it.
pub fn grant(d: &scenarios::Delegation) -> GrantSeed {
    GrantSeed {
        id: d.id.clone(),
        from: d.from.clone(),
        to: d.to.clone(),
        budget_paise: d.budget_paise,
        skus: d.skus.clone(),
        expires_at: d.expires_at,
    }
}

/// A `set_policy` step as the gate takes it.
pub fn policy_patch(p: &scenarios::PolicyPatch) -> PolicyPatch {
    PolicyPatch {
        currency: p.currency.clone(),
        per_transaction_cap_paise: p.per_transaction_cap_paise,
        daily_cap_paise: p.daily_cap_paise,
        approval_threshold_paise: p.approval_threshold_paise,
        allowed_merchants: p.allowed_merchants.clone(),
        allowed_categories: p.allowed_categories.clone(),
        valid_from: p.valid_from.map(instant),
        valid_until: p.valid_until.map(instant),
        velocity: p.velocity.map(|v| Velocity {
            max_proposals: v.max_proposals,
            window_minutes: v.window_minutes,
        }),
        denial_rate: p.denial_rate.map(|d| DenialRate {
            max_denials: d.max_denials,
            window_minutes: d.window_minutes,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_world_converts_with_the_spec_values() {
        let w = StandardWorld::load().unwrap();
        assert_eq!(instant(w.now), "2026-09-03T10:00:00Z");
        assert_eq!(w.policy.per_transaction_cap_paise, 300000);
        assert_eq!(w.policy.valid_until, "2026-12-31T23:59:59Z");
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
        let mut world: World = crate::yaml::from_str(STANDARD_YAML).unwrap();
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
