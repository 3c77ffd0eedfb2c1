//! Runs one step against the oracle's state.
//!
//! Guarantees: `replay` re-runs the named step's verb with the same inputs
//! (a webhook keeps its event id, a proposal its bytes and key);
//! `concurrent` runs its copies one after another, which for identical
//! copies gives the counts every serialization gives; what a named step
//! produced (request, authority, order) is what later steps that name it
//! use, and a step that produced nothing leaves them a reference the gate
//! never issued.

use std::collections::BTreeMap;

use gate::Reason;

use super::chain;
use super::flow;
use super::proposal;
use super::state::{Keyed, Produced, Request, RequestState, State};
use super::{OracleError, Outcome, StepOutcome};
use crate::expect::DecisionKind;
use crate::scenario::Scenario;
use crate::step::{Step, Verb};
use crate::verbs::Propose;

pub fn step(
    state: &mut State,
    scenario: &Scenario,
    i: usize,
    step: &Step,
) -> Result<StepOutcome, OracleError> {
    if let Verb::Concurrent(c) = &step.verb {
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        for _ in 0..c.times {
            let (o, _) = verb(state, scenario, i, &c.step.verb)?;
            *counts.entry(o.decision).or_default() += 1;
        }
        return Ok(StepOutcome::Counts(counts));
    }
    let (o, produced) = verb(state, scenario, i, &step.verb)?;
    if let Some(name) = &step.name {
        state.produced.insert(name.clone(), produced);
    }
    Ok(StepOutcome::Single(o))
}

fn produced(state: &State, name: &str) -> Produced {
    state.produced.get(name).copied().unwrap_or_default()
}

fn verb(
    state: &mut State,
    scenario: &Scenario,
    i: usize,
    verb: &Verb,
) -> Result<(Outcome, Produced), OracleError> {
    let none = Produced::default();
    Ok(match verb {
        Verb::Propose(p) => propose(state, p),
        Verb::Approve(a) => {
            let request = produced(state, &a.request).request;
            (
                flow::approve(state, a, request),
                Produced { request, ..none },
            )
        }
        Verb::Checkout(c) => {
            let request = produced(state, &c.request).request;
            let (o, authority) = flow::checkout(state, c, request);
            (o, Produced { authority, ..none })
        }
        Verb::Pay(p) => {
            let authority = produced(state, &p.authority).authority;
            let (o, order) = flow::pay(state, p, authority);
            (o, Produced { order, ..none })
        }
        Verb::Webhook(w) => {
            let event_id = match &w.event_id {
                Some(id) => id.clone(),
                None => state
                    .event_ids
                    .entry(i)
                    .or_insert_with(|| format!("evt-auto-{i}"))
                    .clone(),
            };
            let order = produced(state, &w.order).order;
            (flow::webhook(state, i, w, order, &event_id)?, none)
        }
        Verb::Grant(g) => (result(chain::grant(state, g)), none),
        Verb::Revoke(r) => (result(chain::revoke(state, &r.delegation, &r.actor)), none),
        Verb::SetPrice(s) => {
            let default = state.default_tenant().to_string();
            let tenant = state.tenant_mut(&default).expect("default tenant");
            match tenant.catalog.iter_mut().find(|c| c.sku == s.sku) {
                Some(item) => item.price_paise = s.price_paise,
                None => {
                    return Err(OracleError::Unsupported {
                        step: i,
                        message: format!("set_price of unknown sku `{}`", s.sku),
                    });
                }
            }
            (Outcome::ok(), none)
        }
        Verb::SetPolicy(patch) => {
            let default = state.default_tenant().to_string();
            let tenant = state.tenant_mut(&default).expect("default tenant");
            tenant.policy = tenant.policy.apply(patch);
            tenant.policy_version += 1;
            (Outcome::ok(), none)
        }
        Verb::AdvanceClock(a) => {
            let minutes = i64::try_from(a.minutes).map_err(|_| OracleError::Unsupported {
                step: i,
                message: "clock advance too large".into(),
            })?;
            state.now += chrono::Duration::minutes(minutes);
            (Outcome::ok(), none)
        }
        Verb::Replay(r) => {
            let j = scenario
                .steps
                .iter()
                .position(|s| s.name.as_deref() == Some(r.of.as_str()))
                .filter(|&j| j < i)
                .ok_or_else(|| OracleError::Unsupported {
                    step: i,
                    message: format!("replay of unknown step `{}`", r.of),
                })?;
            let target = scenario.steps[j].verb.clone();
            return self::verb(state, scenario, j, &target);
        }
        Verb::Concurrent(_) => {
            return Err(OracleError::Unsupported {
                step: i,
                message: "nested concurrent".into(),
            });
        }
    })
}

fn result(r: Result<(), Reason>) -> Outcome {
    match r {
        Ok(()) => Outcome::ok(),
        Err(reason) => Outcome::deny(reason),
    }
}

fn propose(state: &mut State, p: &Propose) -> (Outcome, Produced) {
    let tenant = p
        .tenant
        .clone()
        .unwrap_or_else(|| state.default_tenant().to_string());
    let wire = p.wire_body();
    let parsed = proposal::parse_body(&wire);
    let identified = proposal::identity(state, &tenant, &p.actor).is_ok();
    let key = p
        .idempotency_key
        .as_ref()
        .filter(|_| parsed.is_ok() && identified)
        .map(|k| (tenant.clone(), p.actor.clone(), k.clone()));
    if let Some(k) = &key {
        if let Some(stored) = state.idempotency.get(k) {
            if stored.wire == wire {
                let request = Some(stored.request);
                return (
                    stored.outcome,
                    Produced {
                        request,
                        ..Produced::default()
                    },
                );
            }
        }
    }
    let verdict = (|| {
        let body = parsed.clone()?;
        proposal::identity(state, &tenant, &p.actor)?;
        if key
            .as_ref()
            .is_some_and(|k| state.idempotency.contains_key(k))
        {
            return Err(Reason::IdempotencyKeyReused);
        }
        proposal::rate_limits(state, &tenant, &p.actor)?;
        let purchase = proposal::purchase_checks(state, &tenant, &body.sku, body.quantity)?;
        let delegation =
            chain::authority(state, &tenant, &p.actor, &purchase.sku, purchase.amount)?;
        Ok((purchase, delegation))
    })();
    if identified {
        let who = (tenant.clone(), p.actor.clone());
        state
            .proposals
            .entry(who.clone())
            .or_default()
            .push(state.now);
        if verdict.is_err() {
            state.denials.entry(who).or_default().push(state.now);
        }
    }
    let threshold = state
        .tenant(&tenant)
        .map_or(0, |t| t.policy.approval_threshold_paise);
    let version = state.tenant(&tenant).map_or(0, |t| t.policy_version);
    let mut request = Request {
        tenant: tenant.clone(),
        actor: p.actor.clone(),
        purchase: None,
        state: RequestState::Denied,
        delegation: None,
        reserved: 0,
        reserved_day: None,
        approved: false,
        policy_version: version,
    };
    let outcome = match verdict {
        Err(reason) => Outcome::deny(reason),
        Ok((purchase, delegation)) => {
            let step_up = purchase.amount > threshold;
            if step_up {
                request.state = RequestState::Pending;
            } else {
                request.state = RequestState::Authorized;
                request.reserved = purchase.amount;
                request.reserved_day = Some(state.today());
                request.delegation = Some(delegation);
            }
            request.purchase = Some(purchase);
            if step_up {
                Outcome::step_up(Reason::ApprovalRequired)
            } else {
                Outcome::allow()
            }
        }
    };
    state.requests.push(request);
    let ri = state.requests.len() - 1;
    if let Some(k) = key {
        if outcome.reason != Some(Reason::IdempotencyKeyReused) {
            state.idempotency.insert(
                k,
                Keyed {
                    wire,
                    outcome,
                    request: ri,
                },
            );
        }
    }
    (
        outcome,
        Produced {
            request: Some(ri),
            ..Produced::default()
        },
    )
}
