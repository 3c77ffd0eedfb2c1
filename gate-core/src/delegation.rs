//! Delegation chains: who may spend, on what, until when, and how much.
//!
//! Guarantees (pure: no I/O, no clock): a chain is checked root to leaf and
//! authority is re-derived from *every* hop at each spend, so a revoked or
//! expired hop anywhere above the leaf ends the branch even though the leaf's
//! own row is untouched. The sku scope is the intersection of every hop's;
//! the leaf spends only what its row has neither spent nor allocated to
//! children. A chain that does not link up (a hop whose parent is not the hop
//! above it) or whose numbers are inconsistent refuses. A grant is checked to
//! narrow its parent in budget, skus and expiry.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::reason::Reason;

/// One hop of a delegation chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationHop {
    pub id: String,
    /// The hop this one was carved from; `None` for a root granted by a human.
    pub parent: Option<String>,
    /// The agent this hop authorizes.
    pub grantee: String,
    pub budget_paise: i64,
    /// Allocated to child hops (taken from this hop when each child was written).
    pub allocated_paise: i64,
    /// Reserved or spent by this hop's grantee directly.
    pub spent_paise: i64,
    /// `None` means every sku the policy allows.
    pub skus: Option<Vec<String>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked: bool,
}

impl DelegationHop {
    /// What this hop may still spend or allocate; negative when its row is inconsistent.
    pub fn remaining_paise(&self) -> i64 {
        self.budget_paise
            .saturating_sub(self.allocated_paise)
            .saturating_sub(self.spent_paise)
    }

    fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| now > e)
    }

    fn covers_sku(&self, sku: &str) -> bool {
        self.skus
            .as_ref()
            .is_none_or(|skus| skus.iter().any(|s| s == sku))
    }
}

/// The hops from the root (granted by a human) down to the leaf (the agent
/// that spends), in that order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationChain {
    pub hops: Vec<DelegationHop>,
}

/// The most hops a chain may have, root included: a grant that would make a
/// longer one is refused `DELEGATION_DEPTH_EXCEEDED` (and `ck_delegation_depth`
/// refuses it in the database too).
pub const MAX_CHAIN_HOPS: usize = 8;

impl DelegationChain {
    pub fn new(hops: Vec<DelegationHop>) -> Self {
        DelegationChain { hops }
    }

    pub fn leaf(&self) -> Option<&DelegationHop> {
        self.hops.last()
    }

    /// Checks that `actor` may spend `amount_paise` on `sku` at `now` under
    /// this chain. The first failing check, in the spec's order, is the reason.
    pub fn authorize(
        &self,
        actor: &str,
        sku: &str,
        amount_paise: i64,
        now: DateTime<Utc>,
    ) -> Result<(), Reason> {
        if self.hops.is_empty() {
            return Err(Reason::DelegationMissing);
        }
        if self.leaf().is_some_and(|leaf| leaf.grantee != actor) {
            return Err(Reason::DelegationMissing);
        }
        self.check_links()?;
        if self.hops.iter().any(|h| h.revoked) {
            return Err(Reason::DelegationRevoked);
        }
        if self.hops.iter().any(|h| h.is_expired(now)) {
            return Err(Reason::DelegationExpired);
        }
        if !self.hops.iter().all(|h| h.covers_sku(sku)) {
            return Err(Reason::DelegationSkuOutOfScope);
        }
        if self.hops.iter().any(|h| h.remaining_paise() < 0) {
            return Err(Reason::DelegationBudgetExhausted);
        }
        if self
            .leaf()
            .is_some_and(|leaf| amount_paise > leaf.remaining_paise())
        {
            return Err(Reason::DelegationBudgetExhausted);
        }
        Ok(())
    }

    fn check_links(&self) -> Result<(), Reason> {
        let mut parent: Option<&str> = None;
        for hop in &self.hops {
            if hop.parent.as_deref() != parent {
                return Err(Reason::DelegationChainBroken);
            }
            parent = Some(&hop.id);
        }
        Ok(())
    }
}

/// Who is granting a new hop.
#[derive(Debug, Clone, Copy)]
pub enum Grantor<'a> {
    /// A human of the tenant; `may_approve` says whether they may root a chain.
    Human { may_approve: bool },
    /// A live hop the new one is carved from.
    Hop(&'a DelegationHop),
    /// Anything else (an agent, an unknown id, a hop of another tenant).
    Unknown,
}

/// What a new hop asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantTerms {
    pub budget_paise: i64,
    pub skus: Option<Vec<String>>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// Checks that a grant narrows its grantor: the grantor may grant, the
/// budget fits in what the parent has left, and skus and expiry are no wider.
pub fn check_grant(
    grantor: Grantor<'_>,
    terms: &GrantTerms,
    now: DateTime<Utc>,
) -> Result<(), Reason> {
    if terms.budget_paise <= 0 {
        return Err(Reason::DelegationWidens);
    }
    let parent = match grantor {
        Grantor::Human { may_approve } => {
            if !may_approve {
                return Err(Reason::DelegationGrantorNotPermitted);
            }
            return Ok(());
        }
        Grantor::Unknown => return Err(Reason::DelegationGrantorNotPermitted),
        Grantor::Hop(parent) => parent,
    };
    // Only a live delegation may grant: a revoked or expired one is "anything
    // else" in the spec's words.
    if parent.revoked || parent.is_expired(now) {
        return Err(Reason::DelegationGrantorNotPermitted);
    }
    if terms.budget_paise > parent.budget_paise {
        return Err(Reason::DelegationWidens);
    }
    let skus_narrow = match (&parent.skus, &terms.skus) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(outer), Some(inner)) => inner.iter().all(|s| outer.contains(s)),
    };
    let expiry_narrow = match (parent.expires_at, terms.expires_at) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(outer), Some(inner)) => inner <= outer,
    };
    if !skus_narrow || !expiry_narrow {
        return Err(Reason::DelegationWidens);
    }
    if terms.budget_paise > parent.remaining_paise() {
        return Err(Reason::DelegationBudgetExhausted);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::TimeZone;

    pub(crate) fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 9, 3, 10, 0, 0).unwrap()
    }

    pub(crate) fn hop(id: &str, parent: Option<&str>, grantee: &str, budget: i64) -> DelegationHop {
        DelegationHop {
            id: id.into(),
            parent: parent.map(Into::into),
            grantee: grantee.into(),
            budget_paise: budget,
            allocated_paise: 0,
            spent_paise: 0,
            skus: None,
            expires_at: None,
            revoked: false,
        }
    }

    fn chain3() -> DelegationChain {
        let mut a = hop("d-buyer", None, "buyer-agent", 200000);
        a.allocated_paise = 100000;
        let mut b = hop("d-proc", Some("d-buyer"), "procurement-agent", 100000);
        b.allocated_paise = 50000;
        let c = hop("d-ren", Some("d-proc"), "renewals-agent", 50000);
        DelegationChain::new(vec![a, b, c])
    }

    #[test]
    fn a_leaf_spends_inside_every_bound() {
        assert_eq!(
            chain3().authorize("renewals-agent", "CLOUD-STARTER", 50000, now()),
            Ok(())
        );
    }

    #[test]
    fn the_last_paisa_is_spendable_and_one_more_is_not() {
        let c = chain3();
        assert_eq!(c.authorize("renewals-agent", "X", 50000, now()), Ok(()));
        assert_eq!(
            c.authorize("renewals-agent", "X", 50001, now()),
            Err(Reason::DelegationBudgetExhausted)
        );
    }

    #[test]
    fn no_chain_or_another_agents_chain_is_missing() {
        assert_eq!(
            DelegationChain::default().authorize("a", "X", 1, now()),
            Err(Reason::DelegationMissing)
        );
        assert_eq!(
            chain3().authorize("buyer-agent", "X", 1, now()),
            Err(Reason::DelegationMissing)
        );
    }

    #[test]
    fn revoking_a_middle_hop_refuses_the_leaf() {
        let mut c = chain3();
        c.hops[1].revoked = true;
        assert!(!c.hops[2].revoked);
        assert_eq!(
            c.authorize("renewals-agent", "X", 1, now()),
            Err(Reason::DelegationRevoked)
        );
    }

    #[test]
    fn an_expired_ancestor_refuses_the_leaf_and_expiry_is_inclusive() {
        let mut c = chain3();
        c.hops[0].expires_at = Some(now());
        assert_eq!(c.authorize("renewals-agent", "X", 1, now()), Ok(()));
        c.hops[0].expires_at = Some(now() - chrono::Duration::seconds(1));
        assert_eq!(
            c.authorize("renewals-agent", "X", 1, now()),
            Err(Reason::DelegationExpired)
        );
    }

    #[test]
    fn sku_scope_is_the_intersection_of_every_hop() {
        let mut c = chain3();
        c.hops[0].skus = Some(vec!["SNACK-BOX".into()]);
        assert_eq!(c.authorize("renewals-agent", "SNACK-BOX", 1, now()), Ok(()));
        assert_eq!(
            c.authorize("renewals-agent", "CLOUD-TEAM", 1, now()),
            Err(Reason::DelegationSkuOutOfScope)
        );
    }

    #[test]
    fn a_broken_link_refuses() {
        let mut c = chain3();
        c.hops[2].parent = Some("d-buyer".into());
        assert_eq!(
            c.authorize("renewals-agent", "X", 1, now()),
            Err(Reason::DelegationChainBroken)
        );
    }

    #[test]
    fn an_oversubscribed_ancestor_refuses() {
        let mut c = chain3();
        c.hops[0].spent_paise = 150000;
        assert_eq!(
            c.authorize("renewals-agent", "X", 1, now()),
            Err(Reason::DelegationBudgetExhausted)
        );
    }

    #[test]
    fn grants_must_narrow() {
        let parent = chain3().hops[1].clone(); // budget 100000, 50000 left
        let terms = |b, skus: Option<Vec<&str>>, exp| GrantTerms {
            budget_paise: b,
            skus: skus.map(|v| v.into_iter().map(String::from).collect()),
            expires_at: exp,
        };
        let g = Grantor::Hop(&parent);
        assert_eq!(check_grant(g, &terms(50000, None, None), now()), Ok(()));
        assert_eq!(
            check_grant(g, &terms(50001, None, None), now()),
            Err(Reason::DelegationBudgetExhausted)
        );
        assert_eq!(
            check_grant(g, &terms(100001, None, None), now()),
            Err(Reason::DelegationWidens)
        );
        assert_eq!(
            check_grant(g, &terms(0, None, None), now()),
            Err(Reason::DelegationWidens)
        );
        let mut scoped = parent.clone();
        scoped.skus = Some(vec!["SNACK-BOX".into()]);
        scoped.expires_at = Some(now());
        let g = Grantor::Hop(&scoped);
        assert_eq!(
            check_grant(g, &terms(1, Some(vec!["SNACK-BOX"]), Some(now())), now()),
            Ok(())
        );
        assert_eq!(
            check_grant(g, &terms(1, None, Some(now())), now()),
            Err(Reason::DelegationWidens)
        );
        assert_eq!(
            check_grant(g, &terms(1, Some(vec!["GPU-HOUR"]), Some(now())), now()),
            Err(Reason::DelegationWidens)
        );
        assert_eq!(
            check_grant(g, &terms(1, Some(vec!["SNACK-BOX"]), None), now()),
            Err(Reason::DelegationWidens)
        );
    }

    #[test]
    fn only_a_human_who_may_approve_roots_a_chain() {
        let t = GrantTerms {
            budget_paise: 1,
            skus: None,
            expires_at: None,
        };
        assert_eq!(
            check_grant(Grantor::Human { may_approve: true }, &t, now()),
            Ok(())
        );
        assert_eq!(
            check_grant(Grantor::Human { may_approve: false }, &t, now()),
            Err(Reason::DelegationGrantorNotPermitted)
        );
        assert_eq!(
            check_grant(Grantor::Unknown, &t, now()),
            Err(Reason::DelegationGrantorNotPermitted)
        );
    }

    #[test]
    fn a_revoked_or_expired_parent_cannot_grant() {
        let mut parent = hop("p", None, "a", 100);
        let t = GrantTerms {
            budget_paise: 1,
            skus: None,
            expires_at: None,
        };
        parent.revoked = true;
        assert_eq!(
            check_grant(Grantor::Hop(&parent), &t, now()),
            Err(Reason::DelegationGrantorNotPermitted)
        );
        parent.revoked = false;
        parent.expires_at = Some(now() - chrono::Duration::seconds(1));
        assert_eq!(
            check_grant(Grantor::Hop(&parent), &t, now()),
            Err(Reason::DelegationGrantorNotPermitted)
        );
    }

    // The outside audit (issue 14): a hop with exactly nothing left.

    #[test]
    fn a_hop_that_allocated_its_whole_budget_still_passes_authority_down() {
        let mut c = chain3();
        c.hops[1].allocated_paise = c.hops[1].budget_paise; // exactly 0 left
        c.hops[2].budget_paise = c.hops[1].budget_paise;
        assert_eq!(c.hops[1].remaining_paise(), 0);
        assert_eq!(c.authorize("renewals-agent", "X", 1, now()), Ok(()));
        assert_eq!(
            c.authorize("renewals-agent", "X", 100000, now()),
            Ok(()),
            "the leaf spends its own whole budget"
        );
    }

    #[test]
    fn a_leaf_that_spent_its_last_paisa_keeps_authority_for_what_it_holds() {
        let mut c = chain3();
        c.hops[2].spent_paise = c.hops[2].budget_paise; // exactly 0 left
        // Checkout and pay re-derive authority for an amount already held: 0.
        assert_eq!(c.authorize("renewals-agent", "X", 0, now()), Ok(()));
        assert_eq!(
            c.authorize("renewals-agent", "X", 1, now()),
            Err(Reason::DelegationBudgetExhausted),
            "but it cannot spend one paisa more"
        );
    }

    #[test]
    fn a_child_may_be_granted_exactly_its_untouched_parents_budget() {
        let parent = hop("p", None, "a", 100000);
        let terms = |budget_paise| GrantTerms {
            budget_paise,
            skus: None,
            expires_at: None,
        };
        assert_eq!(
            check_grant(Grantor::Hop(&parent), &terms(100000), now()),
            Ok(())
        );
        assert_eq!(
            check_grant(Grantor::Hop(&parent), &terms(100001), now()),
            Err(Reason::DelegationWidens)
        );
    }
}
