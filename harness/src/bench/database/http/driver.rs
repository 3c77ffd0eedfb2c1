//! One scenario through the HTTP engine: a fresh gate and its service, the
//! steps sent as the database engine's driver prepares them, and what the
//! run observed.
//!
//! Guarantees: the steps, the invariants and the observation are the
//! database engine's (its `Driver`); only the transport differs. The server
//! is shut down at the end of the run.

use super::*;

/// The run's state, beside the database engine's driver.
pub(super) struct HttpDriver<'a> {
    cx: Driver<'a>,
    wire: Wire,
    tally: Arc<Mutex<Tally>>,
    failures: Arc<Mutex<Vec<String>>>,
}

pub(super) async fn run_http(pool: PgPool, scenario: Scenario, world: World) -> HttpRun {
    let mut out = HttpRun::default();
    let clock = Arc::new(ManualClock::new(world.now));
    let gate = match Gate::new(
        pool,
        InProcessProvider::new(),
        WEBHOOK_SECRET.to_vec(),
        clock.clone(),
    ) {
        Ok(gate) => Arc::new(gate),
        Err(e) => {
            out.run.error = Some(format!("building the gate: {e}"));
            return out;
        }
    };
    if let Err(e) = gate.seed(&world.seed()).await {
        out.run.error = Some(format!("seeding world `{}`: {e}", scenario.world));
        out.run.engine_error = true;
        return out;
    }
    let wire = match Wire::start(gate.clone(), &world).await {
        Ok(w) => w,
        Err(e) => {
            out.run.error = Some(format!("starting the service: {e:#}"));
            return out;
        }
    };
    // The database engine's driver, as its `run_in` builds it.
    let cx = Driver::new(gate, clock, &world, &scenario);
    let mut d = HttpDriver {
        cx,
        wire,
        tally: Arc::default(),
        failures: Arc::default(),
    };
    let mut stopped = None;
    for (i, step) in scenario.steps.iter().enumerate() {
        let result = if step.wire_only() {
            d.wire_only(i, step).await
        } else {
            d.step(i, step).await
        };
        match result {
            Ok((outcome, named)) => {
                if let Some(name) = &step.name {
                    d.cx.named.insert(name.clone(), named);
                }
                out.run.outcomes.push(outcome);
            }
            Err(e) => {
                out.run.engine_error = from_gate(&e);
                stopped = Some(format!(
                    "step {}: {e:#}",
                    step.name.as_deref().unwrap_or(step.verb.name())
                ));
                break;
            }
        }
    }
    let HttpDriver {
        cx,
        wire,
        tally,
        failures,
    } = d;
    if let Err(e) = wire.stop().await {
        lock(&failures).push(format!("the service did not stop cleanly: {e:#}"));
    }
    out.run.guards = cx.guards.clone();
    match stopped {
        Some(error) => out.run.error = Some(error),
        None => match observe(&cx, &world).await {
            Ok(state) => out.run.state = Some(state),
            Err(e) => {
                out.run.engine_error = from_gate(&e);
                out.run.error = Some(format!("reading the invariants: {e:#}"));
            }
        },
    }
    out.tally = lock(&tally).clone();
    out.wire_failures = lock(&failures).clone();
    out
}

impl HttpDriver<'_> {
    /// A step every engine runs: the database engine's `Driver::step` with
    /// the HTTP transport.
    pub(super) async fn step(&mut self, i: usize, step: &Step) -> Result<(StepOutcome, Named)> {
        let tenant = self.cx.tenant_of(step);
        let call = match &step.verb {
            Verb::Replay(r) => self
                .cx
                .sent
                .get(&r.of)
                .cloned()
                .with_context(|| format!("step `{}` sent nothing to replay", r.of))?,
            Verb::Concurrent(c) => {
                let call = self.cx.prepared(&c.step).await?;
                let outcome = self.concurrent(c.times, call).await?;
                return Ok((outcome, Named { id: None, tenant }));
            }
            _ => self.cx.prepared(step).await?,
        };
        if let Some(name) = &step.name {
            self.cx.sent.insert(name.clone(), call.clone());
        }
        let tenant = call.tenant().map(str::to_string).unwrap_or(tenant);
        let was_pay = call.is_pay();
        let sent = match &step.wire {
            // Sent with its wire block (headers that must change nothing).
            Some(block) => {
                let (sent, answer) = self.send_with(i, &call, block, false).await?;
                self.check(i, step, block, &answer);
                sent
            }
            None => deliver(&self.wire, &self.cx.gate, call, &self.tally, &self.failures).await?,
        };
        self.cx.guards.extend(sent.guard);
        self.cx
            .note_unanswered(was_pay, &sent.outcome, sent.id.as_ref());
        Ok((
            sent.outcome,
            Named {
                id: sent.id,
                tenant,
            },
        ))
    }

    /// `times` copies of one call at once, each over its own connection.
    pub(super) async fn concurrent(&mut self, times: u32, call: Call) -> Result<StepOutcome> {
        let mut set = JoinSet::new();
        let wire = Arc::new(Wire {
            base: self.wire.base.clone(),
            client: self.wire.client.clone(),
            keys: self.wire.keys.clone(),
            shutdown: None,
            task: None,
        });
        for _ in 0..times {
            let call = call.clone();
            let gate = self.cx.gate.clone();
            let wire = wire.clone();
            let tally = self.tally.clone();
            let failures = self.failures.clone();
            set.spawn(async move { deliver(&wire, &gate, call, &tally, &failures).await });
        }
        let mut counts: BTreeMap<DecisionKind, u32> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let sent = match joined {
                Ok(sent) => sent?,
                Err(e) if e.is_panic() => {
                    bail!("a concurrent copy panicked: {}", panic_text(e.into_panic()))
                }
                Err(e) => bail!("a concurrent copy was cancelled: {e}"),
            };
            // Counts only, as in the database driver: a race's guards are the scheduler's choice.
            if let StepOutcome::Decided { kind, .. } = sent.outcome {
                *counts.entry(kind).or_default() += 1;
            }
        }
        Ok(StepOutcome::Counts(counts))
    }

    /// A wire-only step: sent with its block; the gate must not have been
    /// reached (nothing moves), which the scenario's invariants check.
    pub(super) async fn wire_only(
        &mut self,
        i: usize,
        step: &Step,
    ) -> Result<(StepOutcome, Named)> {
        let tenant = self.cx.tenant_of(step);
        let block = step.wire.clone().unwrap_or_default();
        // Prepared as the other engines would prepare it, but without the
        // provider capturing (a signed capture is prepared unsigned and
        // signed here) and without using up an event number.
        let counter = self.cx.event_counter;
        let unsigned;
        let to_prepare = match &step.verb {
            Verb::Webhook(w) if w.signature_header.is_none() => {
                let mut quiet = w.clone();
                quiet.signature = Some(Signature::Missing);
                unsigned = Step {
                    verb: Verb::Webhook(quiet),
                    ..step.clone()
                };
                &unsigned
            }
            _ => step,
        };
        let mut call = self.cx.prepared(to_prepare).await?;
        self.cx.event_counter = counter;
        if let (
            Verb::Webhook(w),
            Call::Webhook {
                body, signature, ..
            },
        ) = (&step.verb, &mut call)
            && w.signature_header.is_none()
        {
            *signature = match w.signature() {
                Signature::Valid => Some(sign_webhook(WEBHOOK_SECRET, body)),
                Signature::Invalid => Some(sign_webhook(FORGED_SECRET, body)),
                Signature::Missing => None,
            };
        }
        let (_, answer) = self.send_with(i, &call, &block, true).await?;
        self.check(i, step, &block, &answer);
        if let Ok(mut t) = self.tally.lock() {
            t.wire_only += 1;
        }
        let outcome = match answer.as_ref().and_then(Answer::decision) {
            Some(d) => StepOutcome::of(d),
            None => StepOutcome::Decided {
                kind: DecisionKind::Deny,
                reason: None,
            },
        };
        Ok((outcome, Named { id: None, tenant }))
    }

    /// Sends `call` as its `wire` block says; the answer, when it went out.
    pub(super) async fn send_with(
        &mut self,
        i: usize,
        call: &Call,
        block: &WireStep,
        wire_only: bool,
    ) -> Result<(Sent, Option<Answer>)> {
        // A step every engine runs (only its headers change) is settled as
        // any other; a wire-only one is only the service's answer.
        let honest = !wire_only;
        let mut req = match (self.wire.via(call), self.wire.route(call)) {
            (Via::Wire(req), _) => req,
            (Via::Direct(_), Ok(req)) if !honest => req,
            (Via::Direct(why), _) if wire_only => {
                // The other engines skip this step: it must not reach the gate here either.
                lock(&self.failures).push(format!(
                    "step #{}: this wire-only step cannot be sent ({why})",
                    i + 1
                ));
                let outcome = StepOutcome::Decided {
                    kind: DecisionKind::Deny,
                    reason: None,
                };
                return Ok((
                    Sent {
                        outcome,
                        id: None,
                        guard: None,
                    },
                    None,
                ));
            }
            (Via::Direct(why), _) => {
                lock(&self.failures).push(format!(
                    "step #{}: its wire block cannot be sent ({why}); made on the gate directly",
                    i + 1
                ));
                let (outcome, id, guard) = call.clone().send(&self.cx.gate).await?;
                return Ok((Sent { outcome, id, guard }, None));
            }
        };
        let step_tenant = call.tenant().map(str::to_string).unwrap_or_default();
        if let Some(actor) = &block.as_actor {
            let (_, held) = self.wire.key_of(&step_tenant, actor).with_context(|| {
                format!("step #{}: `as: {actor}` is no actor of the world", i + 1)
            })?;
            req.token = Some(held.token.clone());
        }
        match block.key {
            None => {}
            Some(KeyTrick::None) => req.token = None,
            Some(KeyTrick::Malformed) => req.token = Some("not-a-key".into()),
            Some(KeyTrick::Unknown) => {
                req.token = Some(gate::service::api_keys::new_key().expect("a new key").1)
            }
            Some(KeyTrick::Revoked) => {
                let actor = block
                    .as_actor
                    .clone()
                    .or_else(|| call_actor(call))
                    .with_context(|| format!("step #{}: `key: revoked` of whom?", i + 1))?;
                let (tenant, _) = self
                    .wire
                    .key_of(&step_tenant, &actor)
                    .with_context(|| format!("step #{}: {actor} holds no key", i + 1))?;
                let pool = self.cx.gate.onboarding_pool();
                let k = self
                    .cx
                    .gate
                    .issue_key(&tenant, &actor, self.cx.gate.now())
                    .await?;
                gate::service::api_keys::revoke(pool, &k.id, self.cx.gate.now()).await?;
                req.token = Some(k.token);
            }
        }
        if let Some(body) = &block.body {
            req.body = body.clone().into_bytes();
        }
        let signature = sign_webhook(WEBHOOK_SECRET, &req.body);
        for (name, values) in &block.headers {
            req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            let values = values.values();
            if values.is_empty() {
                // Removed: an empty value is never sent, and keeps the
                // default Content-Type out.
                req.headers.push((name.clone(), String::new()));
            }
            for v in values {
                let v = v.replace(scenarios::wire::SIGNATURE_PLACEHOLDER, &signature);
                req.headers.push((name.clone(), v));
            }
        }
        let answer = self.wire.send(&req).await?;
        if honest {
            let sent = settle(
                &req,
                &answer,
                call.clone(),
                &self.cx.gate,
                &self.tally,
                &self.failures,
            )
            .await?;
            return Ok((sent, Some(answer)));
        }
        // Another credential: the gate's answer, if it was reached at all.
        let outcome = match answer.decision() {
            Some(d) if req.propose => StepOutcome::of(d),
            Some(d) => operation(d, req.allow_kind),
            None => StepOutcome::Decided {
                kind: DecisionKind::Deny,
                reason: None,
            },
        };
        let id = answer.text(if req.propose { "request_id" } else { "id" });
        let guard = answer.text("constraint");
        Ok((Sent { outcome, id, guard }, Some(answer)))
    }

    /// Checks the answer against the block's `status` and `reason`.
    pub(super) fn check(&self, i: usize, step: &Step, block: &WireStep, answer: &Option<Answer>) {
        let label = step.name.clone().unwrap_or_else(|| format!("#{}", i + 1));
        let Some(answer) = answer else {
            if block.status.is_some() || block.reason.is_some() {
                lock(&self.failures).push(format!(
                    "step {label} ({}): its wire expectation could not be checked: the step did not go over the wire",
                    step.verb.name()
                ));
            }
            return;
        };
        let status_ok = block.status.is_none_or(|s| s == answer.status);
        let reason_ok = block
            .reason
            .as_deref()
            .is_none_or(|r| answer.reason_text() == Some(r));
        if !status_ok || !reason_ok {
            lock(&self.failures).push(format!(
                "step {label} ({}): expected the service to answer {}{}, got {} {}",
                step.verb.name(),
                block.status.map(|s| s.to_string()).unwrap_or_default(),
                block
                    .reason
                    .as_deref()
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default(),
                answer.status,
                answer.reason_text().unwrap_or("(no reason)")
            ));
        }
    }
}

/// The actor a call is made by, when it names one.
pub(super) fn call_actor(call: &Call) -> Option<String> {
    match call {
        Call::Propose { actor, .. }
        | Call::Checkout { actor, .. }
        | Call::Cancel { actor, .. }
        | Call::Revoke { actor, .. } => Some(actor.clone()),
        Call::Approve { approver, .. } => Some(approver.clone()),
        Call::Pay { actor, .. } => actor.clone(),
        Call::Grant { caller, .. } => Some(caller.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// The codes a `wire` block may expect are the service's own.
    #[test]
    fn the_scenarios_wire_codes_are_the_services() {
        let ours: Vec<&str> = wire::WireCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(ours, scenarios::wire::WIRE_CODES.to_vec());
    }
}
