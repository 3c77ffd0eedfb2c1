//! Runs one step against the oracle's state.
//!
//! Guarantees: `replay` re-runs the named step's verb with the same inputs
//! (a webhook keeps its event id, a proposal its bytes and key);
//! `concurrent` runs its copies one after another, which for identical
//! copies gives the counts every serialization gives; what a named step
//! produced (request, authority, order) is what later steps that name it
//! use, and a step that produced nothing leaves them a reference the gate
//! never issued. Every verb acts for the step's tenant (the world's first
//! when the step names none; `reconcile` acts for every tenant unless the
//! step names one). The provider's verbs are modelled in
//! [`super::provider`]; a `provider_capture` of a step that produced no
//! order is [`OracleError::Unsupported`].

use std::collections::BTreeMap;

use gate_core::Reason;

use super::chain;
use super::flow;
use super::proposal;
use super::provider;
use super::state::{Keyed, Produced, Request, RequestState, State};
use super::{OracleError, Outcome, StepOutcome};
use crate::expect::DecisionKind;
use crate::scenario::Scenario;
use crate::step::{Step, Verb};
use crate::verbs::{MandateSignature, Propose};

pub fn step(
    state: &mut State,
    scenario: &Scenario,
    i: usize,
    step: &Step,
) -> Result<StepOutcome, OracleError> {
    if let Verb::Login(_) = &step.verb {
        return Ok(StepOutcome::Outside);
    }
    if let Verb::Concurrent(c) = &step.verb {
        let tenant = tenant_of(state, &c.step);
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        for _ in 0..c.times {
            let (o, _) = verb(state, scenario, i, &c.step, &tenant)?;
            if let Some(message) = state.unsupported.take() {
                return Err(OracleError::Unsupported { step: i, message });
            }
            *counts.entry(o.decision).or_default() += 1;
        }
        return Ok(StepOutcome::Counts(counts));
    }
    let tenant = tenant_of(state, step);
    let (o, produced) = verb(state, scenario, i, step, &tenant)?;
    if let Some(message) = state.unsupported.take() {
        return Err(OracleError::Unsupported { step: i, message });
    }
    if let Some(name) = &step.name {
        state.produced.insert(name.clone(), produced);
    }
    Ok(StepOutcome::Single(o))
}

/// The step's tenant, or the world's first.
fn tenant_of(state: &State, step: &Step) -> String {
    step.tenant
        .clone()
        .unwrap_or_else(|| state.default_tenant().to_string())
}

fn produced(state: &State, name: &str) -> Produced {
    state.produced.get(name).copied().unwrap_or_default()
}

fn verb(
    state: &mut State,
    scenario: &Scenario,
    i: usize,
    step: &Step,
    tenant: &str,
) -> Result<(Outcome, Produced), OracleError> {
    let verb = &step.verb;
    let none = Produced::default();
    Ok(match verb {
        Verb::Propose(p) => propose(state, p, tenant),
        Verb::Approve(a) => {
            let request = produced(state, &a.request).request;
            (
                flow::approve(state, tenant, a, request),
                Produced { request, ..none },
            )
        }
        Verb::Checkout(c) => {
            let request = produced(state, &c.request).request;
            let (o, authority) = flow::checkout(state, tenant, c, request);
            (o, Produced { authority, ..none })
        }
        Verb::Pay(p) => {
            let authority = produced(state, &p.authority).authority;
            let (o, order) = flow::pay(state, tenant, p, authority);
            (o, Produced { order, ..none })
        }
        Verb::Cancel(c) => {
            let request = produced(state, &c.request).request;
            (flow::cancel(state, tenant, &c.actor, request), none)
        }
        Verb::Expire => {
            flow::expire(state, None);
            (Outcome::ok(), none)
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
        Verb::Grant(g) => (result(chain::grant(state, tenant, g)), none),
        Verb::Revoke(r) => (
            result(chain::revoke(state, tenant, &r.delegation, &r.actor)),
            none,
        ),
        Verb::SetPrice(s) => {
            let Some(t) = state.tenant_mut(tenant) else {
                return Ok((Outcome::deny(Reason::TenantUnknown), none));
            };
            let outcome = match t.catalog.iter_mut().find(|c| c.sku == s.sku) {
                None => Outcome::deny(Reason::SkuUnknown),
                Some(_) if s.price_paise <= 0 => Outcome::deny(Reason::PriceInvalid),
                Some(item) => {
                    item.price_paise = s.price_paise;
                    Outcome::ok()
                }
            };
            (outcome, none)
        }
        Verb::SetPolicy(set) => {
            let Some(t) = state.tenant_mut(tenant) else {
                return Ok((Outcome::deny(Reason::TenantUnknown), none));
            };
            let patch = &set.patch;
            let first_approver = t.world.people.iter().find(|p| p.may_approve);
            let signer = set
                .signed_by
                .as_deref()
                .or(first_approver.map(|p| p.id.as_str()));
            let permitted =
                signer.is_some_and(|s| t.world.people.iter().any(|p| p.id == s && p.may_approve));
            let version = set.version.unwrap_or(i64::from(t.policy_version) + 1);
            let next = t.policy.patched(patch);
            if !permitted {
                (Outcome::deny(Reason::MandateSignerNotPermitted), none)
            } else if set.signature.unwrap_or_default() != MandateSignature::Valid {
                (Outcome::deny(Reason::MandateSignatureInvalid), none)
            } else if version <= i64::from(t.policy_version)
                || version > i64::from(i32::MAX)
                || !patch.readable()
                || !policy_valid(&next, &t.world.merchants)
            {
                (Outcome::deny(Reason::PolicyInvalid), none)
            } else {
                t.policy = next;
                t.policy_version = u32::try_from(version).unwrap_or(u32::MAX);
                (Outcome::ok(), none)
            }
        }
        Verb::AdvanceClock(a) => {
            let moved = a.duration().and_then(|d| state.now.checked_add_signed(d));
            state.now = moved.ok_or_else(|| OracleError::Unsupported {
                step: i,
                message: "a clock move chrono cannot represent".into(),
            })?;
            (Outcome::ok(), none)
        }
        Verb::SetClock(s) => {
            state.now = s.at;
            (Outcome::ok(), none)
        }
        Verb::Provider(p) => (provider::set_mode(state, p), none),
        Verb::ProviderCapture(c) => {
            let Some(order) = produced(state, &c.order).order else {
                return Err(OracleError::Unsupported {
                    step: i,
                    message: format!("provider_capture: step `{}` produced no order", c.order),
                });
            };
            (
                provider::capture(state, order),
                Produced {
                    order: Some(order),
                    ..none
                },
            )
        }
        // Every tenant's, unless the step names one.
        Verb::Reconcile => (provider::reconcile(state, step.tenant.as_deref()), none),
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
            let target = scenario.steps[j].clone();
            let tenant = tenant_of(state, &target);
            return self::verb(state, scenario, j, &target, &tenant);
        }
        Verb::Concurrent(_) => {
            return Err(OracleError::Unsupported {
                step: i,
                message: "nested concurrent".into(),
            });
        }
        Verb::Login(_) => {
            return Err(OracleError::Unsupported {
                step: i,
                message: "a login statement is outside the model".into(),
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

/// Whether a policy validates: a three-letter upper-case currency,
/// non-negative caps and threshold, known merchants, a window that starts
/// before it ends, and rate windows of at most [`MAX_RATE_WINDOW_MINUTES`]
/// with a positive length.
fn policy_valid(p: &gate_core::Policy, merchants: &[String]) -> bool {
    let currency_ok = p.currency.len() == 3 && p.currency.bytes().all(|b| b.is_ascii_uppercase());
    let money_ok = p.per_transaction_cap_paise >= 0
        && p.daily_cap_paise >= 0
        && p.approval_threshold_paise >= 0;
    let merchants_ok = p.allowed_merchants.iter().all(|m| merchants.contains(m));
    let window_ok = p.valid_from < p.valid_until
        && chain::operator_instant(p.valid_from)
        && chain::operator_instant(p.valid_until);
    let rate_ok = |w: u32| (1..=MAX_RATE_WINDOW_MINUTES).contains(&w);
    currency_ok
        && money_ok
        && merchants_ok
        && window_ok
        && rate_ok(p.velocity.window_minutes)
        && rate_ok(p.denial_rate.window_minutes)
}

/// The longest rate window the oracle takes as valid: 31 days. (The spec
/// says only "bounded"; the corpus's refused windows are far beyond it.)
pub const MAX_RATE_WINDOW_MINUTES: u32 = 31 * 24 * 60;

fn propose(state: &mut State, p: &Propose, tenant: &str) -> (Outcome, Produced) {
    let tenant = tenant.to_string();
    let wire = p.wire_body();
    let key_ok = p
        .idempotency_key
        .as_deref()
        .is_none_or(|k| proposal::is_identifier(k, proposal::IDEMPOTENCY_KEY_MAX));
    let parsed = match std::str::from_utf8(&p.wire_bytes()) {
        Err(_) => Err(Reason::ProposalMalformed),
        Ok(_) if !key_ok => Err(Reason::ProposalMalformed),
        Ok(text) => proposal::parse_body(text),
    };
    let identified = proposal::identity(state, &tenant, &p.actor).is_ok();
    let key = p
        .idempotency_key
        .as_ref()
        .filter(|_| parsed.is_ok() && identified)
        .map(|k| (tenant.clone(), p.actor.clone(), k.clone()));
    if let Some(k) = &key
        && let Some(stored) = state.idempotency.get(k)
        && stored.wire == wire
    {
        let request = Some(stored.request);
        return (
            stored.outcome,
            Produced {
                request,
                ..Produced::default()
            },
        );
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
        authorized_at: None,
        created_at: state.now,
    };
    let outcome = match verdict {
        Err(reason) => Outcome::deny(reason),
        Ok((purchase, delegation)) => {
            let step_up = purchase.amount > threshold;
            if step_up {
                request.state = RequestState::Pending;
            } else {
                request.state = RequestState::Authorized;
                request.authorized_at = Some(state.now);
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
    if let Some(k) = key
        && outcome.reason != Some(Reason::IdempotencyKeyReused)
    {
        state.idempotency.insert(
            k,
            Keyed {
                wire,
                outcome,
                request: ri,
            },
        );
    }
    (
        outcome,
        Produced {
            request: Some(ri),
            ..Produced::default()
        },
    )
}
