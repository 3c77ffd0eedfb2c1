//! One scenario on the database-backed gate: a gate on the leased database,
//! the world seeded, each step translated to one call (see the engine's
//! guarantees), and the step's outcome as the gate returned it.
//!
//! Guarantees: nothing is decided here; a step that names an earlier one's
//! id gets that id (or one that exists nowhere, which the gate refuses), and
//! all clock arithmetic is checked.

use super::*;

/// What a step produced that later steps may name.
#[derive(Debug, Clone, Default)]
pub(super) struct Named {
    /// propose → request id; checkout → authority id; pay → order id.
    pub(super) id: Option<String>,
    /// The tenant the step was made in.
    pub(super) tenant: String,
}

pub(super) struct Driver<'a> {
    pub(super) gate: Arc<Gate<InProcessProvider>>,
    pub(super) clock: Arc<ManualClock>,
    pub(super) world: &'a World,
    pub(super) scenario: &'a Scenario,
    pub(super) named: BTreeMap<String, Named>,
    /// What each named step sent, for `replay`.
    pub(super) sent: BTreeMap<String, Call>,
    pub(super) event_counter: u64,
    pub(super) guards: std::collections::BTreeSet<String>,
    /// Orders the provider created for a `pay` it answered too late: the
    /// gate has not recorded them (until reconcile does).
    pub(super) unanswered: std::collections::BTreeSet<String>,
    /// (tenant, id) of every hop a `grant` step of the scenario named so far.
    pub(super) granted: std::collections::BTreeSet<(String, String)>,
}

pub(super) async fn run_in(pool: PgPool, scenario: Scenario, world: World) -> Run {
    if std::env::var(PANIC_ENV).is_ok_and(|id| id == scenario.id) {
        panic!("injected panic in scenario `{}` ({PANIC_ENV})", scenario.id);
    }
    let clock = Arc::new(ManualClock::new(world.now));
    let mut run = Run::default();
    let gate = match Gate::new(
        pool,
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
    if let Err(e) = gate.seed(&world.seed()).await {
        run.error = Some(format!("seeding world `{}`: {e}", scenario.world));
        run.engine_error = true;
        return run;
    }
    let mut cx = Driver::new(gate, clock, &world, &scenario);
    for step in &scenario.steps {
        match cx.step(step).await {
            Ok((outcome, named)) => {
                if let Some(name) = &step.name {
                    cx.named.insert(name.clone(), named);
                }
                run.outcomes.push(outcome);
            }
            Err(e) => {
                run.engine_error = from_gate(&e);
                run.error = Some(format!(
                    "step {}: {e:#}",
                    step.name.as_deref().unwrap_or(step.verb.name())
                ));
                run.guards = cx.guards;
                return run;
            }
        }
    }
    run.guards = std::mem::take(&mut cx.guards);
    match observe(&cx, &world).await {
        Ok(state) => run.state = Some(state),
        Err(e) => {
            run.engine_error = from_gate(&e);
            run.error = Some(format!("reading the invariants: {e:#}"));
        }
    }
    run
}

/// Every tenant of the world, for the expiry sweep.
pub(super) fn all_tenants(world: &World) -> Vec<String> {
    world.tenants.iter().map(|t| t.id.clone()).collect()
}

/// The expiry sweep for these tenants: authorities past their 15 minutes and
/// requests past their 24-hour lifetime (`Gate::expire_sweep`).
pub(super) async fn expiry_sweep(
    gate: &Gate<InProcessProvider>,
    tenants: &[String],
) -> Result<(), ServiceError> {
    for tenant in tenants {
        gate.expire_sweep(tenant).await?;
    }
    Ok(())
}

/// Delivers a provider event as the provider does: the raw body, the
/// signature header and the event id in the `X-Razorpay-Event-Id` header.
pub(super) async fn deliver_webhook(
    gate: &Gate<InProcessProvider>,
    body: &[u8],
    signature: Option<&str>,
    event_id: Option<&str>,
) -> Result<gate::service::Outcome, ServiceError> {
    gate.webhook(body, signature, event_id).await
}

pub(super) fn default_tenant(world: &World) -> String {
    world
        .default_tenant()
        .map(|t| t.id.clone())
        .unwrap_or_default()
}

/// A decision of a non-propose operation: `Allow` is `ok`, except for an
/// approval, where it is `allow` (the request became authorized).
pub(super) fn operation(decision: Decision, allow_kind: DecisionKind) -> StepOutcome {
    match decision {
        Decision::Allow => StepOutcome::Decided {
            kind: allow_kind,
            reason: None,
        },
        other => StepOutcome::of(other),
    }
}

impl<'a> Driver<'a> {
    /// A driver for `scenario` in `world`, before its first step.
    pub(super) fn new(
        gate: Arc<Gate<InProcessProvider>>,
        clock: Arc<ManualClock>,
        world: &'a World,
        scenario: &'a Scenario,
    ) -> Self {
        Driver {
            gate,
            clock,
            world,
            scenario,
            named: BTreeMap::new(),
            sent: BTreeMap::new(),
            event_counter: 0,
            guards: Default::default(),
            unanswered: Default::default(),
            granted: Default::default(),
        }
    }

    /// The gate's call for a `grant` step. `from` names a delegation (one of
    /// the world's, or one an earlier `grant` step of the scenario named):
    /// a hop below it, made by the tenant's operator (its first human who
    /// may approve or operate). Anything else is a root hop made by `from`
    /// itself, whom the gate then judges as a grantor.
    pub(super) fn grant_call(&mut self, tenant: String, g: &gate::service::Grant) -> Call {
        let seeded = self.world.tenant(&tenant);
        let below = seeded.is_some_and(|t| t.delegations.iter().any(|d| d.id == g.from))
            || self.granted.contains(&(tenant.clone(), g.from.clone()));
        self.granted.insert((tenant.clone(), g.id.clone()));
        let (caller, parent) = if below {
            let operator = seeded
                .and_then(|t| {
                    t.people
                        .iter()
                        .find(|p| p.may_approve || p.is_operator)
                        .map(|p| p.id.clone())
                })
                .unwrap_or_default();
            (operator, Some(g.from.clone()))
        } else {
            (g.from.clone(), None)
        };
        Call::Grant {
            tenant,
            caller,
            parent,
            hop: g.terms(),
        }
    }
    /// The id a named earlier step produced; a name with no id becomes an id
    /// that exists nowhere, so the gate itself refuses it.
    pub(super) fn id_of(&self, name: &str) -> String {
        self.named
            .get(name)
            .and_then(|n| n.id.clone())
            .unwrap_or_else(|| format!("missing-{name}"))
    }

    /// The step's tenant: the one it names, else the world's first.
    pub(super) fn tenant_of(&self, step: &Step) -> String {
        step.tenant
            .clone()
            .unwrap_or_else(|| default_tenant(self.world))
    }

    pub(super) async fn step(&mut self, step: &Step) -> Result<(StepOutcome, Named)> {
        let tenant = self.tenant_of(step);
        let call = match &step.verb {
            // The named step's request again, byte for byte.
            Verb::Replay(r) => self
                .sent
                .get(&r.of)
                .cloned()
                .with_context(|| format!("step `{}` sent nothing to replay", r.of))?,
            Verb::Concurrent(c) => {
                let call = self.prepared(&c.step).await?;
                return Ok((
                    self.concurrent(c.times, call).await?,
                    Named { id: None, tenant },
                ));
            }
            _ => self.prepared(step).await?,
        };
        if let Some(name) = &step.name {
            self.sent.insert(name.clone(), call.clone());
        }
        let tenant = call.tenant().map(str::to_string).unwrap_or(tenant);
        let was_pay = call.is_pay();
        let (outcome, id, guard) = call.send(&self.gate).await?;
        self.guards.extend(guard);
        self.note_unanswered(was_pay, &outcome, id.as_ref());
        Ok((outcome, Named { id, tenant }))
    }

    /// Remembers the order of a `pay` the provider answered too late: the
    /// gate has not recorded it, so its capture carries the order entity.
    pub(super) fn note_unanswered(
        &mut self,
        was_pay: bool,
        outcome: &StepOutcome,
        order: Option<&String>,
    ) {
        if was_pay && outcome.reason() == Some(Reason::ProviderUnavailable) {
            self.unanswered.extend(order.cloned());
        }
    }

    /// Sends `times` copies of one call at once.
    pub(super) async fn concurrent(&mut self, times: u32, call: Call) -> Result<StepOutcome> {
        let mut set = JoinSet::new();
        for _ in 0..times {
            let call = call.clone();
            let gate = self.gate.clone();
            set.spawn(async move { call.send(&gate).await });
        }
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            // A race reports counts only: which copy meets the gate's own check
            // and which the database's guard is the scheduler's choice, so the
            // guards a copy reached are not part of the result (as its reasons are not).
            let (outcome, _, _) = match joined {
                Ok(sent) => sent?,
                Err(e) if e.is_panic() => {
                    bail!("a concurrent copy panicked: {}", panic_text(e.into_panic()))
                }
                Err(e) => bail!("a concurrent copy was cancelled: {e}"),
            };
            if let StepOutcome::Decided { kind, .. } = outcome {
                *counts.entry(kind).or_default() += 1;
            }
        }
        Ok(StepOutcome::Counts(counts))
    }

    /// Moves the gate's clock by `by`, or says why it cannot.
    pub(super) fn move_clock(&self, by: Option<TimeDelta>) -> Result<()> {
        let now = self.clock_now();
        let to = by
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| anyhow!("the clock cannot move that far from {now}"))?;
        self.clock.set(to);
        Ok(())
    }

    /// Turns a step into one self-contained call (so copies can run at once).
    /// The call `step` makes, as [`Driver::prepare`] makes it, a
    /// `set_policy` step's mandate signed: the stored policy with the step's
    /// keys changed, as the version in force plus one (or the step's
    /// `version`), signed by the step's human (default the tenant's first
    /// who may approve) with their world key, or as `signature` says:
    /// `other_key` another human's key, `invalid` one bit flipped,
    /// `missing` none.
    pub(super) async fn prepared(&mut self, step: &Step) -> Result<Call> {
        let Verb::SetPolicy(set) = &step.verb else {
            return self.prepare(step);
        };
        let tenant = self.tenant_of(step);
        let (in_force, document) = self
            .gate
            .policy_document(&tenant)
            .await?
            .unwrap_or((0, serde_json::json!({})));
        let world = self.world;
        let people = |t: &str| -> Vec<gate::service::PersonSeed> {
            world
                .tenants
                .iter()
                .filter(|seed| seed.id == t)
                .flat_map(|seed| seed.people.iter().cloned())
                .collect()
        };
        let signer = set
            .signed_by
            .clone()
            .or_else(|| {
                people(&tenant)
                    .into_iter()
                    .find(|p| p.may_approve)
                    .map(|p| p.id)
            })
            .unwrap_or_default();
        // A person's key is the world key of the tenant they belong to.
        let home = if people(&tenant).iter().any(|p| p.id == signer) {
            tenant.clone()
        } else {
            self.world
                .tenants
                .iter()
                .find(|seed| seed.people.iter().any(|p| p.id == signer))
                .map_or_else(|| tenant.clone(), |seed| seed.id.clone())
        };
        let key = match set.signature.unwrap_or_default() {
            MandateSignature::OtherKey => {
                let other = people(&tenant)
                    .into_iter()
                    .find(|p| p.id != signer)
                    .map(|p| p.id)
                    .unwrap_or_else(|| format!("{signer}-other"));
                mandate::world_secret(&tenant, &other)
            }
            _ => mandate::world_secret(&home, &signer),
        };
        let version = set.version.unwrap_or(i64::from(in_force) + 1);
        let unsigned = mandate::Mandate::new(
            tenant.as_str(),
            version,
            signer.as_str(),
            set.patch.applied_to(&document),
        );
        let mut signed = unsigned.sign(&key).context("signing a mandate")?;
        match set.signature.unwrap_or_default() {
            MandateSignature::Missing => signed.signature = None,
            MandateSignature::Invalid => {
                let mut bytes = signed.signature_bytes().context("a signature just made")?;
                bytes[0] ^= 1;
                signed.set_signature_bytes(&bytes);
            }
            MandateSignature::Valid | MandateSignature::OtherKey => {}
        }
        Ok(Call::SetPolicy { tenant, signed })
    }

    pub(super) fn prepare(&mut self, step: &Step) -> Result<Call> {
        let tenant = self.tenant_of(step);
        let verb = &step.verb;
        Ok(match verb {
            Verb::Propose(p) => Call::Propose {
                tenant,
                actor: p.actor.clone(),
                body: p.wire_bytes(),
                key: p.idempotency_key.clone(),
            },
            Verb::Approve(a) => Call::Approve {
                tenant,
                request: self.id_of(&a.request),
                approver: a.approver.clone(),
            },
            Verb::Checkout(c) => Call::Checkout {
                tenant,
                request: self.id_of(&c.request),
                actor: c.actor.clone(),
            },
            Verb::Pay(p) => Call::Pay {
                tenant,
                authority: self.id_of(&p.authority),
                actor: p.actor.clone(),
            },
            Verb::Cancel(c) => Call::Cancel {
                tenant,
                request: self.id_of(&c.request),
                actor: c.actor.clone(),
            },
            Verb::Expire => Call::Expire {
                tenants: match &step.tenant {
                    Some(t) => vec![t.clone()],
                    None => all_tenants(self.world),
                },
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
                let event_id = w
                    .event_id
                    .clone()
                    .unwrap_or_else(|| format!("evt_{}_{}", self.scenario.id, self.event_counter));
                let created_at = TimeDelta::try_minutes(w.offset_minutes())
                    .and_then(|d| self.clock_now().checked_add_signed(d))
                    .context("created_at_offset_minutes is beyond what a clock can show")?;
                let event = ProviderEvent {
                    id: event_id.clone(),
                    event: w.event().to_string(),
                    created_at,
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
                let provider_order = self
                    .gate
                    .provider()
                    .orders()
                    .into_iter()
                    .find(|o| o.id == order_id);
                let as_ordered = provider_order.as_ref().is_some_and(|o| {
                    event.amount_paise == o.amount_paise && event.currency == o.currency
                });
                // A provider sends a capture only after it captured: a signed
                // capture of a real order, for its amount and currency, is the
                // customer paying at the provider first (once; a repeat finds
                // the order paid).
                if w.raw_bytes().is_none()
                    && w.signature_header.is_none()
                    && matches!(w.signature(), Signature::Valid)
                    && [
                        gate::service::webhook::EVENT_CAPTURED,
                        gate::service::webhook::EVENT_ORDER_PAID,
                    ]
                    .contains(&event.event.as_str())
                    && as_ordered
                {
                    self.gate.provider().set_now(event.created_at.timestamp());
                    let _already_paid = self.gate.provider().capture_payment(&order_id);
                }
                // The gate never heard back about this order: the provider's
                // event carries its order entity, receipt included.
                let with_order = provider_order
                    .filter(|_| as_ordered && self.unanswered.contains(&order_id))
                    .filter(|_| event.event != gate::service::webhook::EVENT_FAILED);
                // A receipt names the authority a checkout step issued here.
                let receipt = w.receipt.as_ref().map(|r| self.id_of(r));
                let body = match (w.raw_bytes_for(receipt.as_deref()), with_order) {
                    (Some(raw), _) => raw,
                    (None, Some(order)) => razorpay_envelope(
                        &event.event,
                        event.created_at,
                        Some(&event.payment()),
                        Some(&order),
                    ),
                    (None, None) => event.to_body(),
                };
                let signature = match (&w.signature_header, w.signature()) {
                    (Some(header), _) => Some(header.clone()),
                    (None, Signature::Valid) => Some(sign_webhook(WEBHOOK_SECRET, &body)),
                    (None, Signature::Invalid) => Some(sign_webhook(FORGED_SECRET, &body)),
                    (None, Signature::Missing) => None,
                };
                Call::Webhook {
                    body,
                    signature,
                    event_id: Some(event_id),
                }
            }
            Verb::Grant(g) => self.grant_call(tenant, g),
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
            Verb::SetPolicy(_) => {
                bail!("a set_policy step is signed by `prepared`, which reads the policy in force")
            }
            Verb::AdvanceClock(a) => {
                self.move_clock(a.duration())?;
                Call::Nothing
            }
            Verb::SetClock(s) => {
                self.clock.set(s.at);
                Call::Nothing
            }
            Verb::Provider(p) => Call::Provider {
                mode: match p.mode() {
                    ProviderMode::Ok => Mode::Ok,
                    ProviderMode::Timeout => Mode::Timeout,
                    ProviderMode::Late => Mode::Late,
                    ProviderMode::Reject => Mode::Reject,
                    ProviderMode::Unavailable => Mode::Unavailable,
                    ProviderMode::Mismatch => {
                        let Some(field) = p.field else {
                            bail!("provider: `mode: mismatch` without a `field`");
                        };
                        Mode::Mismatch(field)
                    }
                },
                times: p.times,
            },
            Verb::ProviderCapture(c) => {
                let order = self.named.get(&c.order).and_then(|n| n.id.clone());
                let Some(order) = order else {
                    bail!(
                        "provider_capture: step `{}` produced no provider order to capture",
                        c.order
                    );
                };
                Call::ProviderCapture {
                    order,
                    at: self.clock_now().timestamp(),
                }
            }
            Verb::Reconcile => Call::Reconcile {
                tenant: step.tenant.clone(),
            },
            Verb::Login(l) => Call::Login {
                sql: l.statement(|name| self.id_of(name)),
            },
            Verb::Replay(_) | Verb::Concurrent(_) => {
                bail!(
                    "step {:?}: `{}` cannot be nested here",
                    step.name,
                    verb.name()
                )
            }
        })
    }

    pub(super) fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        self.gate.now()
    }
}
