//! The pure engine as a scenario driver: the gate's boundary parser and
//! policy engine with the spend state held in memory.
//!
//! Guarantees: it runs only scenarios it can run faithfully — every step a
//! `propose` in the default tenant with no idempotency key ([`eligible`]). It checks identity as the database gate does
//! (an unknown actor, an actor of another tenant, a human at the agent-facing
//! call), records every proposal of a known agent towards velocity and every
//! refusal towards the denial rate, and reserves daily and delegation budgets
//! on allow. It never pretends to have a provider or a ledger.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use chrono::{DateTime, Utc};
use gate::delegation::DelegationHop;
use gate::{Catalog, Decision, Inputs, Policy, Reason, SpendState, evaluate, parse_proposal};
use scenarios::{Scenario, Verb, World};

use super::observed::{ObservedState, StepOutcome};
use crate::world::{catalog, chain_for, delegation_hops};

/// True when the pure engine can run every step of the scenario faithfully.
/// (It keeps no ledger: a `ledger_intact` invariant is left to the database
/// engine, or reported as unchecked when the pure engine runs alone.)
pub fn eligible(scenario: &Scenario) -> bool {
    scenario.steps.iter().all(|s| match &s.verb {
        Verb::Propose(p) => p.idempotency_key.is_none() && s.tenant.is_none(),
        _ => false,
    }) && scenario.invariants.books_balanced.is_none()
        && scenario.invariants.request_states.is_none()
}

/// One scenario's in-memory state.
pub struct PureDriver<'w> {
    world: &'w World,
    catalog: Catalog,
    policy: Policy,
    hops: Vec<DelegationHop>,
    now: DateTime<Utc>,
    spent_today: i64,
    proposals: BTreeMap<String, Vec<DateTime<Utc>>>,
    denials: BTreeMap<String, Vec<DateTime<Utc>>>,
}

impl<'w> PureDriver<'w> {
    pub fn new(world: &'w World) -> Result<Self> {
        let Some(tenant) = world.default_tenant() else {
            bail!("the world has no tenant");
        };
        Ok(PureDriver {
            world,
            catalog: catalog(tenant),
            policy: tenant.policy.clone(),
            hops: delegation_hops(tenant)?,
            now: world.now,
            spent_today: 0,
            proposals: BTreeMap::new(),
            denials: BTreeMap::new(),
        })
    }

    fn identity(&self, actor: &str) -> Result<(), Reason> {
        let tenant = self.world.default_tenant();
        if tenant.is_some_and(|t| t.agents.iter().any(|a| a == actor)) {
            return Ok(());
        }
        if tenant.is_some_and(|t| t.people.iter().any(|p| p.id == actor)) {
            return Err(Reason::ActorNotPermitted);
        }
        if self.world.tenant_of(actor).is_some() {
            return Err(Reason::TenantMismatch);
        }
        Err(Reason::ActorUnknown)
    }

    /// Runs the agent-facing call.
    pub fn propose(&mut self, actor: &str, raw: &[u8]) -> StepOutcome {
        let decision = self.decide(actor, raw);
        if self.identity(actor).is_ok() {
            self.proposals
                .entry(actor.to_string())
                .or_default()
                .push(self.now);
            if matches!(decision, Decision::Deny(_)) {
                self.denials
                    .entry(actor.to_string())
                    .or_default()
                    .push(self.now);
            }
        }
        StepOutcome::of(decision)
    }

    fn decide(&mut self, actor: &str, raw: &[u8]) -> Decision {
        let proposal = match parse_proposal(raw) {
            Ok(p) => p,
            Err(reason) => return Decision::Deny(reason),
        };
        if let Err(reason) = self.identity(actor) {
            return Decision::Deny(reason);
        }
        let chain = chain_for(&self.hops, actor);
        let spend = SpendState {
            spent_today_paise: self.spent_today,
            proposals: self.proposals.get(actor).cloned().unwrap_or_default(),
            denials: self.denials.get(actor).cloned().unwrap_or_default(),
        };
        let evaluation = evaluate(&Inputs {
            actor,
            proposal: &proposal,
            catalog: &self.catalog,
            policy: &self.policy,
            chain: &chain,
            spend: &spend,
            now: self.now,
        });
        if let (Decision::Allow, Some(purchase), Some(leaf)) =
            (evaluation.decision, &evaluation.purchase, chain.leaf())
        {
            self.spent_today += purchase.amount_paise;
            if let Some(hop) = self.hops.iter_mut().find(|h| h.id == leaf.id) {
                hop.spent_paise += purchase.amount_paise;
            }
        }
        evaluation.decision
    }

    pub fn state(&self) -> ObservedState {
        ObservedState {
            provider_orders: 0,
            captured_paise: 0,
            spent_today_paise: self.spent_today,
            delegation_spent_paise: self
                .hops
                .iter()
                .map(|h| (h.id.clone(), h.spent_paise))
                .collect(),
            ledger_intact: None,
            ..ObservedState::default()
        }
    }
}

/// Runs an eligible scenario through the pure engine.
pub fn run(scenario: &Scenario, world: &World) -> super::judge::Run {
    let mut run = super::judge::Run::default();
    let mut driver = match PureDriver::new(world) {
        Ok(d) => d,
        Err(e) => {
            run.error = Some(format!("{e:#}"));
            return run;
        }
    };
    for step in &scenario.steps {
        match &step.verb {
            Verb::Propose(p) => run.outcomes.push(driver.propose(&p.actor, &p.wire_bytes())),
            other => {
                run.error = Some(format!(
                    "the pure engine cannot run a `{}` step",
                    other.name()
                ));
                return run;
            }
        }
    }
    run.state = Some(driver.state());
    run
}
