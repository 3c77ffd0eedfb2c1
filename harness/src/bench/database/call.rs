//! One call of the gate, with everything it needs, and how it is made.
//!
//! Guarantees: a call is one of the gate's own operations (or the
//! provider's, or the reconcile job; a `pay` that names no actor first reads
//! who asked for the purchase); its outcome is what the gate returned, with
//! the id it produced and the database guard that refused it.

use super::*;

/// One call of the gate, with everything it needs.
#[derive(Debug, Clone)]
pub(super) enum Call {
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
        event_id: Option<String>,
    },
    Cancel {
        tenant: String,
        request: String,
        actor: String,
    },
    Expire {
        tenants: Vec<String>,
    },
    /// `caller` grants a hop: a root hop (`parent: None`, the caller its
    /// grantor) or one below `parent`.
    Grant {
        tenant: String,
        caller: String,
        parent: Option<String>,
        hop: gate::service::HopTerms,
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
    /// A signed mandate, as the step's human signed it.
    SetPolicy {
        tenant: String,
        signed: mandate::SignedMandate,
    },
    /// How the provider answers the next `pay` calls.
    Provider {
        mode: Mode,
        times: Option<u32>,
    },
    /// The customer pays `order` at the provider, at unix time `at`.
    ProviderCapture {
        order: String,
        at: i64,
    },
    /// The reconcile job, for one tenant or (`None`) all.
    Reconcile {
        tenant: Option<String>,
    },
    /// One statement as the gate's runtime database role, its placeholders
    /// already replaced.
    Login {
        sql: String,
    },
    Nothing,
}

impl Call {
    /// Whether the call is a `pay`.
    pub(super) fn is_pay(&self) -> bool {
        matches!(self, Call::Pay { .. })
    }

    /// The tenant the call is made in, when it names one.
    pub(super) fn tenant(&self) -> Option<&str> {
        match self {
            Call::Propose { tenant, .. }
            | Call::Approve { tenant, .. }
            | Call::Checkout { tenant, .. }
            | Call::Pay { tenant, .. }
            | Call::Cancel { tenant, .. }
            | Call::Grant { tenant, .. }
            | Call::Revoke { tenant, .. }
            | Call::SetPrice { tenant, .. }
            | Call::SetPolicy { tenant, .. } => Some(tenant),
            Call::Webhook { .. }
            | Call::Expire { .. }
            | Call::Provider { .. }
            | Call::ProviderCapture { .. }
            | Call::Reconcile { .. }
            | Call::Login { .. }
            | Call::Nothing => None,
        }
    }

    /// Sends the call; returns the outcome, the id it produced and the
    /// database guard that refused it, if one did.
    pub(super) async fn send(
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
                let mut paid = gate.pay(&tenant, &authority, &actor).await?;
                // An answer that came too late: the order the provider holds
                // for this receipt is still this step's order.
                if paid.decision == Decision::Deny(Reason::ProviderUnavailable) && paid.id.is_none()
                {
                    paid.id = gate.provider().order_for_receipt(&authority).map(|o| o.id);
                }
                (paid, ok)
            }
            Call::Webhook {
                body,
                signature,
                event_id,
            } => (
                deliver_webhook(gate, &body, signature.as_deref(), event_id.as_deref()).await?,
                ok,
            ),
            Call::Cancel {
                tenant,
                request,
                actor,
            } => (gate.cancel(&tenant, &request, &actor).await?, ok),
            Call::Expire { tenants } => {
                expiry_sweep(gate, &tenants).await?;
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::Grant {
                tenant,
                caller,
                parent,
                hop,
            } => (
                gate.grant(&tenant, &caller, parent.as_deref(), &hop)
                    .await?,
                ok,
            ),
            Call::Revoke {
                tenant,
                delegation,
                actor,
            } => (gate.revoke(&tenant, &delegation, &actor).await?, ok),
            Call::SetPrice { tenant, sku, price } => {
                (gate.set_price(&tenant, &sku, price).await?, ok)
            }
            Call::SetPolicy { tenant, signed } => {
                (gate.publish_mandate(&tenant, &signed).await?, ok)
            }
            Call::Provider { mode, times } => {
                gate.provider().set_mode(mode, times);
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::ProviderCapture { order, at } => {
                gate.provider().set_now(at);
                match gate.provider().capture(&order) {
                    // A customer who finds the order paid pays nothing more.
                    Ok(_) | Err(ProviderError::AlreadyPaid(_)) => {}
                    Err(e) => bail!("provider_capture of order {order}: {e}"),
                }
                return Ok((operation(Decision::Allow, ok), Some(order), None));
            }
            Call::Reconcile { tenant } => {
                gate.reconcile(tenant.as_deref()).await?;
                return Ok((operation(Decision::Allow, ok), None, None));
            }
            Call::Login { sql } => {
                let outcome = login(gate.pool(), &sql).await;
                let guard = match &outcome {
                    LoginOutcome::Refused(g) if g != scenarios::PRIVILEGE => Some(g.clone()),
                    _ => None,
                };
                return Ok((StepOutcome::Login(outcome), None, guard));
            }
            Call::Nothing => return Ok((operation(Decision::Allow, ok), None, None)),
        };
        Ok((operation(o.decision, kind), o.id, o.constraint))
    }
}

/// The longest a `login` statement may run or wait for a lock, so that no
/// statement stalls its scenario into a timeout.
const LOGIN_STATEMENT_TIMEOUT: &str = "5s";

/// Runs one statement on `pool` (the gate's own: its runtime role), in a
/// transaction of its own that bounds its time and then commits. A refusal
/// that names a constraint or trigger is that guard's; SQLSTATE 42501 is
/// `privilege`; any other error is the outcome `error` with its text, never
/// an error of the run.
pub(super) async fn login(pool: &PgPool, sql: &str) -> LoginOutcome {
    let as_outcome = |e: sqlx::Error| match e.as_database_error() {
        Some(db) => match (db.constraint(), db.code()) {
            (Some(name), _) => LoginOutcome::Refused(name.to_string()),
            (None, Some(code)) if code == "42501" => {
                LoginOutcome::Refused(scenarios::PRIVILEGE.to_string())
            }
            (None, code) => LoginOutcome::Error(format!(
                "{}: {}",
                code.as_deref().unwrap_or("no SQLSTATE"),
                db.message()
            )),
        },
        None => LoginOutcome::Error(e.to_string()),
    };
    let mut tx = match pool.begin().await {
        Ok(tx) => tx,
        Err(e) => return as_outcome(e),
    };
    for setting in ["statement_timeout", "lock_timeout"] {
        if let Err(e) = sqlx::query("SELECT set_config($1, $2, true)")
            .bind(setting)
            .bind(LOGIN_STATEMENT_TIMEOUT)
            .execute(&mut *tx)
            .await
        {
            return as_outcome(e);
        }
    }
    // The statement is the corpus's by design: what a thief of the login
    // sends. It goes as one prepared statement, which Postgres refuses to
    // hold more than one command.
    let statement = sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).persistent(false);
    let rows = match statement.execute(&mut *tx).await {
        Ok(done) => done.rows_affected(),
        Err(e) => return as_outcome(e),
    };
    match tx.commit().await {
        Ok(()) => LoginOutcome::Written { rows },
        // A deferred guard refuses at commit.
        Err(e) => as_outcome(e),
    }
}

/// The agent that asked for the purchase an authority pays for (a `pay` step
/// that names no actor is the requester's own); empty when there is none, which
/// the gate refuses as an unknown actor.
pub(super) async fn requester(
    gate: &Gate<InProcessProvider>,
    tenant: &str,
    authority: &str,
) -> Result<String> {
    // Only look up what could be an id: a string Postgres cannot hold (a NUL)
    // is the gate's to refuse, not this lookup's to fail on.
    if tenant.contains('\0') || authority.contains('\0') {
        return Ok(String::new());
    }
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
