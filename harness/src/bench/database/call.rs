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
            Call::Nothing => return Ok((operation(Decision::Allow, ok), None, None)),
        };
        Ok((operation(o.decision, kind), o.id, o.constraint))
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
