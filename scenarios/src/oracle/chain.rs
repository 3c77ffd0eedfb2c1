//! Delegation rules: whose authority an agent spends under, and how hops are
//! granted and revoked.
//!
//! Guarantees: an agent spends under the latest delegation granted to it in
//! its tenant; the whole chain above it is re-derived on every call, so a
//! revoked or expired hop anywhere above ends the branch. Delegation reasons
//! come in the spec's order: MISSING, REVOKED, EXPIRED, SKU_OUT_OF_SCOPE,
//! BUDGET_EXHAUSTED. A grant is refused when its grantor is not an approving
//! human of the grantee's tenant nor a live delegation of it, when it widens
//! its parent (budget, skus, expiry), or when the parent's free budget
//! (budget minus own reservations minus children's allocations) is short.

use gate_core::Reason;

use super::state::{DelegationState, State};
use gate_core::Grant;

/// The hops from the agent's delegation up to its root, leaf first.
fn chain<'a>(state: &'a State, leaf: &str) -> Vec<&'a DelegationState> {
    let mut out = Vec::new();
    let mut next = Some(leaf.to_string());
    while let Some(id) = next {
        let Some(d) = state.delegations.get(&id) else {
            break;
        };
        if out.iter().any(|x: &&DelegationState| x.id == d.id) {
            break;
        }
        next = d.parent.clone();
        out.push(d);
    }
    out
}

fn is_expired(state: &State, d: &DelegationState) -> bool {
    d.expires_at.is_some_and(|e| state.now > e)
}

/// Whether a delegation and every hop above it are live.
pub fn is_live(state: &State, id: &str) -> bool {
    let hops = chain(state, id);
    !hops.is_empty() && hops.iter().all(|d| !d.revoked && !is_expired(state, d))
}

/// Re-derives a delegation's chain: REVOKED or EXPIRED anywhere above ends it.
pub fn still_live(state: &State, id: &str) -> Result<(), Reason> {
    let hops = chain(state, id);
    if hops.is_empty() {
        return Err(Reason::DelegationMissing);
    }
    if hops.iter().any(|d| d.revoked) {
        return Err(Reason::DelegationRevoked);
    }
    if hops.iter().any(|d| is_expired(state, d)) {
        return Err(Reason::DelegationExpired);
    }
    Ok(())
}

/// What a delegation's children hold of its budget: a live child its whole
/// budget; a revoked child only what its branch still has reserved (the rest
/// came back when it was revoked, and each reservation comes back when its
/// request ends).
pub fn allocated(state: &State, id: &str) -> i64 {
    state
        .delegations
        .values()
        .filter(|c| c.parent.as_deref() == Some(id))
        .map(|c| {
            if c.revoked {
                branch_reserved(state, &c.id, 0)
            } else {
                c.budget
            }
        })
        .sum()
}

/// Reservations held by requests under a delegation and its descendants.
fn branch_reserved(state: &State, id: &str, depth: usize) -> i64 {
    if depth > state.delegations.len() {
        return 0;
    }
    state.delegation_spent(id)
        + state
            .delegations
            .values()
            .filter(|c| c.parent.as_deref() == Some(id))
            .map(|c| branch_reserved(state, &c.id, depth + 1))
            .sum::<i64>()
}

/// The budget a delegation can still spend or hand down.
pub fn free_budget(state: &State, d: &DelegationState) -> i64 {
    d.budget - state.delegation_spent(&d.id) - allocated(state, &d.id)
}

/// The most hops a chain may have.
pub const MAX_DEPTH: usize = 8;

/// Precedence step 9: the delegation `actor` may spend `amount` of `sku`
/// under, or the reason it may not.
pub fn authority(
    state: &State,
    tenant: &str,
    actor: &str,
    sku: &str,
    amount: i64,
) -> Result<String, Reason> {
    let leaf = state
        .grant_order
        .iter()
        .rev()
        .filter_map(|id| state.delegations.get(id))
        .find(|d| d.tenant == tenant && d.to == actor)
        .ok_or(Reason::DelegationMissing)?;
    let hops = chain(state, &leaf.id);
    if hops.iter().any(|d| d.revoked) {
        return Err(Reason::DelegationRevoked);
    }
    if hops.iter().any(|d| is_expired(state, d)) {
        return Err(Reason::DelegationExpired);
    }
    if hops
        .iter()
        .any(|d| d.skus.as_ref().is_some_and(|s| !s.iter().any(|x| x == sku)))
    {
        return Err(Reason::DelegationSkuOutOfScope);
    }
    // A hop whose spend and children exceed its budget (a capture booked
    // for review can carry it past) refuses every spend below it.
    if hops.iter().any(|d| free_budget(state, d) < 0) || amount > free_budget(state, leaf) {
        return Err(Reason::DelegationBudgetExhausted);
    }
    Ok(leaf.id.clone())
}

/// The `grant` verb, made by the operator of `caller` (the step's tenant).
/// A delegation id is checked first: one that is not an identifier, or was
/// ever used (revoked ids included), is `DELEGATION_INVALID`; a hop that
/// would make a chain longer than [`MAX_DEPTH`] is
/// `DELEGATION_DEPTH_EXCEEDED`, checked once the parent is known.
/// The spec's range for operators' timestamps: 1970-01-01 to 9999-12-31.
pub fn operator_instant(at: chrono::DateTime<chrono::Utc>) -> bool {
    (1970..=9999).contains(&chrono::Datelike::year(&at))
}

pub fn grant(state: &mut State, caller: &str, g: &Grant) -> Result<(), Reason> {
    if state.tenant(caller).is_none() {
        return Err(Reason::TenantUnknown);
    }
    if !super::proposal::is_identifier(&g.id, super::proposal::IDENTIFIER_MAX)
        || g.expires_at.is_some_and(|at| !operator_instant(at))
        || state.delegations.contains_key(&g.id)
    {
        return Err(Reason::DelegationInvalid);
    }
    let grantee_tenant = state.tenant_of(&g.to).map(|t| t.id.clone());
    let (tenant, parent) = if let Some(t) = state.tenant_of(&g.from).map(|t| t.id.clone()) {
        if t != caller || !state.may_approve(&t, &g.from) {
            return Err(Reason::DelegationGrantorNotPermitted);
        }
        if grantee_tenant.as_deref() != Some(t.as_str()) {
            return Err(Reason::DelegationGrantorNotPermitted);
        }
        (t, None)
    } else if let Some(p) = state.delegations.get(&g.from).cloned() {
        if p.tenant != caller || !is_live(state, &p.id) {
            return Err(Reason::DelegationGrantorNotPermitted);
        }
        if grantee_tenant.as_deref() != Some(p.tenant.as_str()) {
            return Err(Reason::TenantMismatch);
        }
        if chain(state, &p.id).len() >= MAX_DEPTH {
            return Err(Reason::DelegationDepthExceeded);
        }
        (p.tenant.clone(), Some(p))
    } else {
        return Err(Reason::DelegationGrantorNotPermitted);
    };
    if !state.is_agent(&tenant, &g.to) {
        return Err(Reason::ActorUnknown);
    }
    if g.skus.iter().flatten().any(|s| {
        !super::proposal::is_identifier(s, super::proposal::IDENTIFIER_MAX)
            || state
                .tenant(&tenant)
                .is_some_and(|t| t.catalog.iter().all(|i| &i.sku != s))
    }) {
        return Err(Reason::SkuUnknown);
    }
    if g.budget_paise <= 0 {
        return Err(Reason::DelegationWidens);
    }
    if let Some(p) = &parent {
        let widens_budget = g.budget_paise > p.budget;
        let widens_skus = match (&p.skus, &g.skus) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(ps), Some(cs)) => cs.iter().any(|c| !ps.contains(c)),
        };
        let widens_expiry = match (p.expires_at, g.expires_at) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(pe), Some(ce)) => ce > pe,
        };
        if widens_budget || widens_skus || widens_expiry {
            return Err(Reason::DelegationWidens);
        }
        if g.budget_paise > free_budget(state, p) {
            return Err(Reason::DelegationBudgetExhausted);
        }
    }
    state.insert_delegation(DelegationState {
        id: g.id.clone(),
        tenant,
        parent: parent.map(|p| p.id),
        to: g.to.clone(),
        budget: g.budget_paise,
        skus: g.skus.clone(),
        expires_at: g.expires_at,
        revoked: false,
    });
    Ok(())
}

/// The `revoke` verb: an approving human of the delegation's tenant, which
/// must be the caller's (another tenant's delegation is missing).
pub fn revoke(state: &mut State, caller: &str, id: &str, actor: &str) -> Result<(), Reason> {
    if state.tenant(caller).is_none() {
        return Err(Reason::TenantUnknown);
    }
    let tenant = state
        .delegations
        .get(id)
        .filter(|d| d.tenant == caller)
        .map(|d| d.tenant.clone())
        .ok_or(Reason::DelegationMissing)?;
    if !state.may_approve(&tenant, actor) {
        return Err(Reason::ActorNotPermitted);
    }
    if let Some(d) = state.delegations.get_mut(id) {
        d.revoked = true;
    }
    Ok(())
}
