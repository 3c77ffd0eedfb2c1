//! The oracle's state: clock, tenants' policies and catalogs, delegations,
//! requests, authorities, orders and the rate-limit logs.
//!
//! Guarantees: built from a world without changing it; every budget figure
//! is derived from the request records, so a reservation and its release
//! can never disagree with the totals.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::verbs::ProviderMode;
use crate::world::World;
use gate_core::CatalogItem;
use gate_core::Policy;
use gate_core::TenantSeed;

use super::{Observed, OracleError};

#[derive(Debug, Clone)]
pub struct TenantState {
    pub id: String,
    pub world: TenantSeed,
    pub policy: Policy,
    pub policy_version: u32,
    pub catalog: Vec<CatalogItem>,
}

#[derive(Debug, Clone)]
pub struct DelegationState {
    pub id: String,
    pub tenant: String,
    /// `None`: a root hop from a human.
    pub parent: Option<String>,
    pub to: String,
    pub budget: i64,
    pub skus: Option<Vec<String>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked: bool,
}

/// What the gate derived from a proposal's sku and quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchase {
    pub sku: String,
    pub quantity: i64,
    pub unit_price: i64,
    pub amount: i64,
    pub merchant: String,
    pub currency: String,
    pub category: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    Denied,
    Pending,
    Authorized,
    CheckedOut,
    Paid,
    /// Ended before payment (its authority expired, or the ground under it
    /// moved); its reservation was released.
    Ended,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub tenant: String,
    pub actor: String,
    pub purchase: Option<Purchase>,
    pub state: RequestState,
    pub delegation: Option<String>,
    /// Reserved amount (0 when nothing is reserved or it was released).
    pub reserved: i64,
    pub reserved_day: Option<NaiveDate>,
    pub approved: bool,
    pub policy_version: u32,
    /// When the request became AUTHORIZED (its 24-hour lifetime starts).
    pub authorized_at: Option<DateTime<Utc>>,
    /// When it was proposed (a step-up's 24-hour wait for a human starts).
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct Authority {
    pub request: usize,
    pub issued_at: DateTime<Utc>,
    pub policy_version: u32,
    pub used: bool,
}

/// An order on the gate's books: a failed attempt leaves it `Created` (it
/// can still be paid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderState {
    Created,
    Captured,
}

/// An order the provider created. `state` is what the gate's books say of
/// it; the provider's own record is `provider_paid`.
#[derive(Debug, Clone)]
pub struct Order {
    pub amount: i64,
    pub currency: String,
    pub state: OrderState,
    /// The authority whose id is the order's receipt.
    pub authority: usize,
    /// Whether the gate has recorded the order (its answer came in time, or
    /// reconcile found it).
    pub recorded: bool,
    /// Whether the customer paid it at the provider.
    pub provider_paid: bool,
    /// Captured payments on the books beyond the order's first (each id
    /// once, each for the order's amount): money booked NEEDS_REVIEW.
    pub further_payments: Vec<String>,
    /// The payment id a signed body captured the order under; `None` when
    /// it was captured as a `webhook` step or reconcile reports it (under
    /// the id derived from the order alone), or not at all.
    pub capture_id: Option<String>,
}

/// A signed capture of an order the gate has not recorded, kept for
/// reconcile because its receipt names a consumed authority.
#[derive(Debug, Clone)]
pub struct Kept {
    pub authority: usize,
    /// The order id the event named.
    pub order_id: String,
    pub payment_id: String,
    pub amount: i64,
    /// Booked by a reconcile.
    pub settled: bool,
}

/// What a step produced that later steps may name.
#[derive(Debug, Clone, Copy, Default)]
pub struct Produced {
    pub request: Option<usize>,
    pub authority: Option<usize>,
    pub order: Option<usize>,
}

/// A recorded answer under an idempotency key.
#[derive(Debug, Clone)]
pub struct Keyed {
    pub wire: String,
    pub outcome: super::Outcome,
    pub request: usize,
}

#[derive(Debug, Clone)]
pub struct State {
    pub now: DateTime<Utc>,
    pub tenants: Vec<TenantState>,
    pub delegations: BTreeMap<String, DelegationState>,
    /// Grant order, so "the agent's delegation" is the latest granted.
    pub grant_order: Vec<String>,
    pub requests: Vec<Request>,
    pub authorities: Vec<Authority>,
    pub orders: Vec<Order>,
    pub produced: BTreeMap<String, Produced>,
    pub idempotency: BTreeMap<(String, String, String), Keyed>,
    pub proposals: BTreeMap<(String, String), Vec<DateTime<Utc>>>,
    pub denials: BTreeMap<(String, String), Vec<DateTime<Utc>>>,
    pub events: BTreeSet<String>,
    /// Payment ids that signed bodies put on the books, with their order.
    pub payments: BTreeMap<String, usize>,
    /// Captures kept for reconcile, in the order they arrived.
    pub kept: Vec<Kept>,
    /// The event id each webhook step used, so a replay resends it.
    pub event_ids: BTreeMap<usize, String>,
    /// How the simulated provider answers the next `pay` calls.
    pub provider_mode: ProviderMode,
    /// The field a `mismatch` answer differs in.
    pub provider_field: Option<crate::verbs::MismatchField>,
    /// Set by a step the oracle cannot model, with why; the step then fails
    /// as [`super::OracleError::Unsupported`].
    pub unsupported: Option<String>,
    /// Calls left in `provider_mode`; `None` for every later one.
    pub provider_times: Option<u32>,
}

impl State {
    pub fn new(world: &World) -> Result<State, OracleError> {
        if world.tenants.is_empty() {
            return Err(OracleError::EmptyWorld);
        }
        let tenants = world
            .tenants
            .iter()
            .map(|t| TenantState {
                id: t.id.clone(),
                world: t.clone(),
                policy: t.policy.clone(),
                policy_version: 1,
                catalog: t.catalog.clone(),
            })
            .collect();
        let mut state = State {
            now: world.now,
            tenants,
            delegations: BTreeMap::new(),
            grant_order: Vec::new(),
            requests: Vec::new(),
            authorities: Vec::new(),
            orders: Vec::new(),
            produced: BTreeMap::new(),
            idempotency: BTreeMap::new(),
            proposals: BTreeMap::new(),
            denials: BTreeMap::new(),
            events: BTreeSet::new(),
            payments: BTreeMap::new(),
            kept: Vec::new(),
            event_ids: BTreeMap::new(),
            provider_mode: ProviderMode::Ok,
            provider_field: None,
            unsupported: None,
            provider_times: None,
        };
        for t in &world.tenants {
            for d in &t.delegations {
                let parent = (!t.people.iter().any(|p| p.id == d.from)).then(|| d.from.clone());
                state.insert_delegation(DelegationState {
                    id: d.id.clone(),
                    tenant: t.id.clone(),
                    parent,
                    to: d.to.clone(),
                    budget: d.budget_paise,
                    skus: d.skus.clone(),
                    expires_at: d.expires_at,
                    revoked: false,
                });
            }
        }
        Ok(state)
    }

    pub fn insert_delegation(&mut self, d: DelegationState) {
        self.grant_order.push(d.id.clone());
        self.delegations.insert(d.id.clone(), d);
    }

    pub fn today(&self) -> NaiveDate {
        self.now.date_naive()
    }

    pub fn default_tenant(&self) -> &str {
        &self.tenants[0].id
    }

    pub fn tenant(&self, id: &str) -> Option<&TenantState> {
        self.tenants.iter().find(|t| t.id == id)
    }

    pub fn tenant_mut(&mut self, id: &str) -> Option<&mut TenantState> {
        self.tenants.iter_mut().find(|t| t.id == id)
    }

    /// The tenant an agent or person belongs to.
    pub fn tenant_of(&self, principal: &str) -> Option<&TenantState> {
        self.tenants.iter().find(|t| {
            t.world.agents.iter().any(|a| a == principal)
                || t.world.people.iter().any(|p| p.id == principal)
        })
    }

    pub fn is_agent(&self, tenant: &str, who: &str) -> bool {
        self.tenant(tenant)
            .is_some_and(|t| t.world.agents.iter().any(|a| a == who))
    }

    pub fn may_approve(&self, tenant: &str, who: &str) -> bool {
        self.tenant(tenant)
            .is_some_and(|t| t.world.people.iter().any(|p| p.id == who && p.may_approve))
    }

    /// A tenant's reservations on the current UTC day.
    pub fn spent_today(&self, tenant: &str) -> i64 {
        let today = self.today();
        self.requests
            .iter()
            .filter(|r| r.tenant == tenant && r.reserved_day == Some(today))
            .map(|r| r.reserved)
            .sum()
    }

    /// A tenant's reservations on the current UTC day in one currency: the
    /// daily cap never adds amounts in different currencies.
    pub fn spent_today_in(&self, tenant: &str, currency: &str) -> i64 {
        let today = self.today();
        self.requests
            .iter()
            .filter(|r| r.tenant == tenant && r.reserved_day == Some(today))
            .filter(|r| r.purchase.as_ref().is_some_and(|p| p.currency == currency))
            .map(|r| r.reserved)
            .sum()
    }

    /// A delegation's own reservations.
    pub fn delegation_spent(&self, id: &str) -> i64 {
        self.requests
            .iter()
            .filter(|r| r.delegation.as_deref() == Some(id))
            .map(|r| r.reserved)
            .sum()
    }

    /// Events inside the window ending now (`t > now - window`).
    pub fn in_window(log: Option<&Vec<DateTime<Utc>>>, now: DateTime<Utc>, minutes: u32) -> usize {
        let start = now - Duration::minutes(i64::from(minutes));
        log.map_or(0, |l| {
            l.iter().filter(|t| **t > start && **t <= now).count()
        })
    }

    pub fn observed(&self) -> Observed {
        let default = self.default_tenant().to_string();
        Observed {
            provider_orders: self.orders.iter().filter(|o| o.recorded).count() as u64,
            // The sum of the captured payments on the books, each once:
            // an order's first capture (a `webhook` step's payment id
            // derives from its order alone) and every further payment of it
            // a signed body reported under another id.
            captured_paise: self
                .orders
                .iter()
                .filter(|o| o.recorded && o.state == OrderState::Captured)
                .map(|o| o.amount * (1 + o.further_payments.len() as i64))
                .sum(),
            provider_captured_paise: self
                .orders
                .iter()
                .filter(|o| o.provider_paid)
                .map(|o| o.amount)
                .sum(),
            spent_today_paise: self.spent_today(&default),
            delegation_spent_paise: self
                .delegations
                .keys()
                .map(|id| (id.clone(), self.delegation_spent(id)))
                .collect(),
        }
    }
}
