//! How a call's answer becomes the step's outcome: the gate's decision the
//! service's answer carries, or, when the service refused before the gate,
//! the gate's own, which must refuse too.
//!
//! Guarantees: an answer's status must be the one docs/http.md gives for
//! its decision; a 404 must be for an object that is not the tenant's; the
//! wire refusing what the gate allows is a failure. Every step is counted
//! in the tally by how it reached the gate.

use super::*;

/// One step's result on the HTTP engine.
pub(super) struct Sent {
    pub(super) outcome: StepOutcome,
    pub(super) id: Option<String>,
    pub(super) guard: Option<String>,
}

/// Sends `call` over the wire, or to the gate directly, and reads the outcome.
pub(super) async fn deliver(
    wire: &Wire,
    gate: &Gate<InProcessProvider>,
    call: Call,
    tally: &Mutex<Tally>,
    failures: &Mutex<Vec<String>>,
) -> Result<Sent> {
    let req = match wire.via(&call) {
        Via::Wire(req) => req,
        Via::Direct(why) => {
            if let Ok(mut t) = tally.lock() {
                t.count_direct(why);
            }
            let (outcome, id, guard) = call.send(gate).await?;
            return Ok(Sent { outcome, id, guard });
        }
    };
    let answer = wire.send(&req).await?;
    settle(&req, &answer, call, gate, tally, failures).await
}

/// The outcome of `call` from the service's answer to `req`: the gate's
/// decision it carries, or, when the service refused before the gate, the
/// gate's own (which must refuse too).
pub(super) async fn settle(
    req: &Req,
    answer: &Answer,
    call: Call,
    gate: &Gate<InProcessProvider>,
    tally: &Mutex<Tally>,
    failures: &Mutex<Vec<String>>,
) -> Result<Sent> {
    if let Some(decision) = answer.decision() {
        let allowed = if req.propose { 201 } else { 200 };
        let want = wire::answer::decision_status(
            decision,
            reqwest::StatusCode::from_u16(allowed).unwrap_or(reqwest::StatusCode::OK),
        );
        if want.as_u16() != answer.status {
            lock(failures).push(format!(
                "{} {}: the service answered {} for {decision:?}, docs/http.md says {}",
                req.method,
                req.path,
                answer.status,
                want.as_u16()
            ));
        }
        if let Ok(mut t) = tally.lock() {
            t.over_wire += 1;
        }
        let outcome = if req.propose {
            StepOutcome::of(decision)
        } else {
            operation(decision, req.allow_kind)
        };
        let id = answer.text(if req.propose { "request_id" } else { "id" });
        return Ok(Sent {
            outcome,
            id,
            guard: answer.text("constraint"),
        });
    }
    let code = answer.reason_text().unwrap_or("").to_string();
    match code.as_str() {
        "ENGINE_UNAVAILABLE" | "TIMEOUT" => bail!(ServiceError::Corrupt {
            what: format!(
                "the service answered {} {code} to {} {}",
                answer.status, req.method, req.path
            ),
        }),
        "NOT_FOUND" | "BODY_INVALID" | "HEADER_INVALID" => {
            // Refused before the gate: the gate must refuse it too.
            if code == "NOT_FOUND"
                && let Some((tenant, what, id)) = scoped_object(&call)
                && gate::service::views::exists(gate.pool(), &tenant, what, &id).await?
            {
                lock(failures).push(format!(
                    "{} {}: 404 for {id}, which is an object of tenant {tenant}",
                    req.method, req.path
                ));
            }
            let (outcome, id, guard) = call.send(gate).await?;
            if matches!(
                outcome,
                StepOutcome::Decided {
                    kind: DecisionKind::Allow | DecisionKind::Ok,
                    ..
                }
            ) {
                lock(failures).push(format!(
                    "{} {}: the service refused it ({} {code}) but the gate allows it",
                    req.method, req.path, answer.status
                ));
            }
            if let Ok(mut t) = tally.lock() {
                t.refused_at_wire += 1;
            }
            Ok(Sent { outcome, id, guard })
        }
        _ => {
            lock(failures).push(format!(
                "{} {}: the service answered {} {} where the gate decides",
                req.method, req.path, answer.status, answer.body
            ));
            Ok(Sent {
                outcome: StepOutcome::Decided {
                    kind: DecisionKind::Deny,
                    reason: None,
                },
                id: None,
                guard: None,
            })
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The tenant-scoped object a call's path names.
pub(super) fn scoped_object(call: &Call) -> Option<(String, gate::service::views::Object, String)> {
    use gate::service::views::Object;
    match call {
        Call::Approve {
            tenant, request, ..
        }
        | Call::Checkout {
            tenant, request, ..
        }
        | Call::Cancel {
            tenant, request, ..
        } => Some((tenant.clone(), Object::Request, request.clone())),
        Call::Pay {
            tenant, authority, ..
        } => Some((tenant.clone(), Object::Authority, authority.clone())),
        Call::Revoke {
            tenant, delegation, ..
        } => Some((tenant.clone(), Object::Delegation, delegation.clone())),
        _ => None,
    }
}
