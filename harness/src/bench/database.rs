//! The database-backed gate as a scenario driver: one fresh migrated
//! database per scenario, the world seeded into it, every step sent through
//! the gate's own operations exactly as a caller would.
//!
//! Guarantees: nothing is decided here. A step is translated to one call of
//! `gate::service::Gate` (a webhook is built and signed the way the provider
//! does; `replay` resends the named step's request byte for byte;
//! `concurrent` runs its copies as simultaneous tasks), and the outcome is
//! what the gate returned. An operation error stops the scenario with its
//! message. Each scenario's database is dropped afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use chrono::Duration;
use gate::Decision;
use gate::db::{FreshDatabase, fresh_database};
use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock, ProviderEvent, sign_webhook};
use scenarios::{DecisionKind, Scenario, Signature, Step, Verb, World};
use tokio::task::JoinSet;

use super::judge::Run;
use super::observed::{ObservedState, StepOutcome};
use crate::world::{grant, policy_patch, seed};

/// The secret the in-process provider signs webhooks with.
const WEBHOOK_SECRET: &[u8] = b"spendgate-bench-webhook-secret-0123456789";
/// A secret nobody configured: what a forger signs with.
const FORGED_SECRET: &[u8] = b"not-the-webhook-secret";

/// A connection to the server that hands out one database per scenario.
#[derive(Debug, Clone)]
pub struct DatabaseEngine {
    admin_url: String,
}

impl DatabaseEngine {
    /// Uses the server `admin_url` names.
    pub async fn start(admin_url: &str) -> Result<Self> {
        let admin_url = admin_url.to_string();
        // Fail now, clearly, if the server is down or the migrations do not apply.
        let probe = fresh_database(&admin_url).await?;
        probe.drop().await?;
        Ok(DatabaseEngine { admin_url })
    }

    /// `DATABASE_URL`, or an error that says how to get one.
    pub fn url_from_env() -> Result<String> {
        std::env::var(gate::db::DATABASE_URL_ENV).context(
            "DATABASE_URL is not set: run under `harness db run -- …` (as `make bench` does), or use --engines pure",
        )
    }

    /// Runs one scenario in its own database.
    pub async fn run(&self, scenario: &Scenario, world: &World) -> Run {
        let db = match fresh_database(&self.admin_url).await {
            Ok(db) => db,
            Err(e) => {
                return Run {
                    error: Some(format!("could not create the scenario's database: {e}")),
                    ..Run::default()
                };
            }
        };
        let run = run_in(&db, scenario, world).await;
        if let Err(e) = db.drop().await {
            tracing::warn!("could not drop a scenario database: {e}");
        }
        run
    }
}

/// What a step produced that later steps may name.
#[derive(Debug, Clone, Default)]
struct Named {
    /// propose → request id; checkout → authority id; pay → order id.
    id: Option<String>,
}

struct Driver<'a> {
    gate: Arc<Gate<InProcessProvider>>,
    clock: Arc<ManualClock>,
    world: &'a World,
    scenario: &'a Scenario,
    named: BTreeMap<String, Named>,
    /// What each named step sent, for `replay`.
    sent: BTreeMap<String, Call>,
    event_counter: u64,
    guards: std::collections::BTreeSet<String>,
}

async fn run_in(db: &FreshDatabase, scenario: &Scenario, world: &World) -> Run {
    let clock = Arc::new(ManualClock::new(world.now));
    let mut run = Run::default();
    let gate = match Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        WEBHOOK_SECRET.to_vec(),
        clock.clone(),
    ) {
        Ok(gate) => Arc::new(gate),
        Err(e) => {
            run.error = Some(format!("building the gate: {e}"));
            return run;
        }
    };
    if let Err(e) = gate.seed(&seed(world)).await {
        run.error = Some(format!("seeding world `{}`: {e}", scenario.world));
        return run;
    }
    let mut cx = Driver {
        gate,
        clock,
        world,
        scenario,
        named: BTreeMap::new(),
        sent: BTreeMap::new(),
        event_counter: 0,
        guards: Default::default(),
    };
    for step in &scenario.steps {
        match cx.step(step).await {
            Ok((outcome, named)) => {
                if let Some(name) = &step.name {
                    cx.named.insert(name.clone(), named);
                }
                run.outcomes.push(outcome);
            }
            Err(e) => {
                run.error = Some(format!(
                    "step {}: {e:#}",
                    step.name.as_deref().unwrap_or(step.verb.name())
                ));
                return run;
            }
        }
    }
    match observe(&cx.gate, world).await {
        Ok(state) => run.state = Some(state),
        Err(e) => run.error = Some(format!("reading the invariants: {e}")),
    }
    run
}

/// The spec's invariants: `spent_today_paise` is the default tenant's; orders,
/// captures and delegation spend are summed over every tenant of the world.
async fn observe(gate: &Gate<InProcessProvider>, world: &World) -> Result<ObservedState> {
    let mut state = ObservedState {
        ledger_intact: Some(true),
        ..ObservedState::default()
    };
    for (i, tenant) in world.tenants.iter().enumerate() {
        let inv = gate.invariants(&tenant.id).await?;
        if i == 0 {
            state.spent_today_paise = inv.spent_today_paise;
        }
        state.provider_orders += u64::try_from(inv.provider_orders).unwrap_or(0);
        state.captured_paise += inv.captured_paise;
        state
            .delegation_spent_paise
            .extend(inv.delegation_spent_paise);
        state.ledger_intact = Some(state.ledger_intact == Some(true) && inv.ledger_intact);
    }
    Ok(state)
}

fn default_tenant(world: &World) -> String {
    world
        .default_tenant()
        .map(|t| t.id.clone())
        .unwrap_or_default()
}

/// A decision of a non-propose operation: `Allow` is `ok`, except for an
/// approval, where it is `allow` (the request became authorized).
fn operation(decision: Decision, allow_kind: DecisionKind) -> StepOutcome {
    match decision {
        Decision::Allow => StepOutcome::Decided {
            kind: allow_kind,
            reason: None,
        },
        other => StepOutcome::of(other),
    }
}

impl Driver<'_> {
    /// The id a named earlier step produced; a name with no id becomes an id
    /// that exists nowhere, so the gate itself refuses it.
    fn id_of(&self, name: &str) -> String {
        self.named
            .get(name)
            .and_then(|n| n.id.clone())
            .unwrap_or_else(|| format!("missing-{name}"))
    }

    async fn step(&mut self, step: &Step) -> Result<(StepOutcome, Named)> {
        let call = match &step.verb {
            // The named step's request again, byte for byte.
            Verb::Replay(r) => self
                .sent
                .get(&r.of)
                .cloned()
                .with_context(|| format!("step `{}` sent nothing to replay", r.of))?,
            Verb::Concurrent(c) => {
                let call = self.prepare(&c.step.verb, step)?;
                return Ok((self.concurrent(c.times, call).await?, Named::default()));
            }
            other => self.prepare(other, step)?,
        };
        if let Some(name) = &step.name {
            self.sent.insert(name.clone(), call.clone());
        }
        let (outcome, id, guard) = call.send(&self.gate).await?;
        self.guards.extend(guard);
        Ok((outcome, Named { id }))
    }

    /// Sends `times` copies of one call at once.
    async fn concurrent(&mut self, times: u32, call: Call) -> Result<StepOutcome> {
        let mut set = JoinSet::new();
        for _ in 0..times {
            let call = call.clone();
            let gate = self.gate.clone();
            set.spawn(async move { call.send(&gate).await });
        }
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let (outcome, _, guard) = joined.context("a concurrent copy panicked")??;
            self.guards.extend(guard);
            if let StepOutcome::Decided { kind, .. } = outcome {
                *counts.entry(kind).or_default() += 1;
            }
        }
        Ok(StepOutcome::Counts(counts))
    }

    /// Turns a verb into one self-contained call (so copies can run at once).
    fn prepare(&mut self, verb: &Verb, step: &Step) -> Result<Call> {
        let tenant = default_tenant(self.world);
        Ok(match verb {
            Verb::Propose(p) => Call::Propose {
                tenant: p.tenant.clone().unwrap_or(tenant),
                actor: p.actor.clone(),
                body: p.wire_body().into_bytes(),
                key: p.idempotency_key.clone(),
            },
            Verb::Approve(a) => Call::Approve {
                tenant: tenant.clone(),
                request: self.id_of(&a.request),
                approver: a.approver.clone(),
            },
            Verb::Checkout(c) => Call::Checkout {
                tenant: tenant.clone(),
                request: self.id_of(&c.request),
                actor: c.actor.clone(),
            },
            Verb::Pay(p) => Call::Pay {
                tenant: tenant.clone(),
                authority: self.id_of(&p.authority),
                actor: p.actor.clone(),
            },
            Verb::Webhook(w) => {
                let order_id = self.id_of(&w.order);
                let order = self
                    .gate
                    .provider()
                    .orders()
                    .into_iter()
                    .find(|o| o.id == order_id);
                self.event_counter += 1;
                let event = ProviderEvent {
                    id: w.event_id.clone().unwrap_or_else(|| {
                        format!("evt_{}_{}", self.scenario.id, self.event_counter)
                    }),
                    event: w.event().to_string(),
                    created_at: self.clock_now() + Duration::minutes(w.offset_minutes()),
                    order_id: order_id.clone(),
                    amount_paise: w
                        .amount_paise
                        .or(order.as_ref().map(|o| o.amount_paise))
                        .unwrap_or(0),
                    currency: w
                        .currency
                        .clone()
                        .or(order.map(|o| o.currency))
                        .unwrap_or_else(|| "INR".into()),
                };
                let body = match &w.raw {
                    Some(raw) => raw.clone().into_bytes(),
                    None => event.to_body(),
                };
                let signature = match w.signature() {
                    Signature::Valid => Some(sign_webhook(WEBHOOK_SECRET, &body)),
                    Signature::Invalid => Some(sign_webhook(FORGED_SECRET, &body)),
                    Signature::Missing => None,
                };
                Call::Webhook {
                    body,
                    signature,
                    event_id: event.id,
                }
            }
            Verb::Grant(g) => Call::Grant {
                tenant,
                grant: grant(g),
            },
            Verb::Revoke(r) => Call::Revoke {
                tenant,
                delegation: r.delegation.clone(),
                actor: r.actor.clone(),
            },
            Verb::SetPrice(p) => Call::SetPrice {
                tenant,
                sku: p.sku.clone(),
                price: p.price_paise,
            },
            Verb::SetPolicy(p) => Call::SetPolicy {
                tenant,
                patch: policy_patch(p),
            },
            Verb::AdvanceClock(a) => {
                let minutes =
                    i64::try_from(a.minutes).context("advance_clock minutes out of range")?;
                self.clock.advance_minutes(minutes);
                Call::Nothing
            }
            Verb::Replay(_) | Verb::Concurrent(_) => {
                bail!(
                    "step {:?}: `{}` cannot be nested here",
                    step.name,
                    verb.name()
                )
            }
        })
    }

    fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        self.gate.now()
    }
}

/// One call of the gate, with everything it needs.
#[derive(Debug, Clone)]
enum Call {
    Propose {
        tenant: String,
        actor: String,
        body: Vec<u8>,
        key: Option<String>,
    },
    Approve {
        tenant: String,
        request: String,
        approver: String,
    },
    Checkout {
        tenant: String,
        request: String,
        actor: String,
    },
    Pay {
        tenant: String,
        authority: String,
        /// `None`: the agent that asked for the purchase pays.
        actor: Option<String>,
    },
    Webhook {
        body: Vec<u8>,
        signature: Option<String>,
        event_id: String,
    },
    Grant {
        tenant: String,
        grant: gate::service::GrantSeed,
    },
    Revoke {
        tenant: String,
        delegation: String,
        actor: String,
    },
    SetPrice {
        tenant: String,
        sku: String,
        price: i64,
    },
    SetPolicy {
        tenant: String,
        patch: gate::PolicyPatch,
    },
    Nothing,
}

impl Call {
    /// Sends the call; returns the outcome, the id it produced and the
    /// database guard that refused it, if one did.
    async fn send(
        self,
        gate: &Gate<InProcessProvider>,
    ) -> Result<(StepOutcome, Option<String>, Option<String>)> {
        let ok = DecisionKind::Ok;
        let (o, kind) = match self {
            Call::Propose {
                tenant,
                actor,
                body,
                key,
            } => {
                let out = gate.propose(&tenant, &actor, &body, key.as_deref()).await?;
                return Ok((StepOutcome::of(out.decision), out.request_id, None));
            }
            Call::Approve {
                tenant,
                request,
                approver,
            } => (
                gate.approve(&tenant, &request, &approver).await?,
                DecisionKind::Allow,
            ),
            Call::Checkout {
                tenant,
                request,
                actor,
            } => (gate.checkout(&tenant, &request, &actor).await?, ok),
            Call::Pay {
                tenant,
                authority,
                actor,
            } => {
                let actor = match actor {
                    Some(actor) => actor,
                    None => requester(gate, &tenant, &authority).await?,
                };
                (gate.pay(&tenant, &authority, &actor).await?, ok)
            }
            Call::Webhook {
                body,
                signature,
                event_id,
            } => (
                gate.webhook(&body, signature.as_deref(), Some(&event_id))
                    .await?,
                ok,
            ),
            Call::Grant { tenant, grant } => (gate.grant(&tenant, &grant).await?, ok),
            Call::Revoke {
                tenant,
                delegation,
                actor,
            } => (gate.revoke(&tenant, &delegation, &actor).await?, ok),
            Call::SetPrice { tenant, sku, price } => {
                (gate.set_price(&tenant, &sku, price).await?, ok)
            }
            Call::SetPolicy { tenant, patch } => (gate.set_policy(&tenant, &patch).await?, ok),
            Call::Nothing => return Ok((operation(Decision::Allow, ok), None, None)),
        };
        Ok((operation(o.decision, kind), o.id, o.constraint))
    }
}

/// The agent that asked for the purchase an authority pays for (a `pay` step
/// that names no actor is the requester's own); empty when there is none, which
/// the gate refuses as an unknown actor.
async fn requester(
    gate: &Gate<InProcessProvider>,
    tenant: &str,
    authority: &str,
) -> Result<String> {
    let agent: Option<String> = sqlx::query_scalar(
        "SELECT r.agent_id FROM checkout_authorities a JOIN payment_requests r \
           ON r.tenant_id = a.tenant_id AND r.id = a.request_id \
         WHERE a.tenant_id = $1 AND a.id = $2",
    )
    .bind(tenant)
    .bind(authority)
    .fetch_optional(gate.pool())
    .await
    .context("reading the requester of an authority")?;
    Ok(agent.unwrap_or_default())
}
