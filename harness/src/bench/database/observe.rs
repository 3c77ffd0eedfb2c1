//! What a run left behind, read back for the scenario's invariants.
//!
//! Guarantees: `spent_today_paise` is the default tenant's; orders, captures
//! and delegation spend are summed over every tenant of the world;
//! `books_balanced` also fails when a scenario that ran a reconcile step
//! leaves a kept capture off the books; only reads (nothing is written).

use super::*;
use gate::service::tlog::{self, LogKey};

/// The log key the database engine signs its checkpoints with.
const BENCH_LOG_KEY: &[u8] = b"spendgate-bench-log-key-not-a-secret-0123456789";

fn bench_log_key() -> Result<LogKey> {
    Ok(LogKey::new(BENCH_LOG_KEY)?)
}

/// The spec's invariants: `spent_today_paise` is the default tenant's; orders,
/// captures and delegation spend are summed over every tenant of the world.
pub(super) async fn observe(cx: &Driver<'_>, world: &World) -> Result<ObservedState> {
    let gate = &cx.gate;
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
        let pool = gate.pool();
        let key = bench_log_key()?;
        // Read only when the scenario asks: each reads the tenant's whole
        // ledger and signs a checkpoint.
        let asked = &cx.scenario.invariants;
        if asked.evidence_verifies.is_some()
            && state.evidence_verifies.as_ref().is_none_or(Result::is_ok)
        {
            state.evidence_verifies = Some(
                tlog::check_evidence(pool, &key, &tenant.id)
                    .await?
                    .map(|_| ()),
            );
        }
        if asked.log_consistent.is_some() && state.log_consistent.as_ref().is_none_or(Result::is_ok)
        {
            state.log_consistent = Some(
                tlog::check_consistency(pool, &key, &tenant.id)
                    .await?
                    .map(|_| ()),
            );
        }
    }
    state.provider_captured_paise = gate.provider().captured_paise();
    let books = gate.books(None).await?;
    let mut problems = Vec::new();
    if books.captured_paise != state.provider_captured_paise {
        problems.push(format!(
            "the provider captured {} paise, the gate's books hold {} captured",
            state.provider_captured_paise, books.captured_paise
        ));
    }
    for (day, (booked, held)) in &books.unbalanced_days {
        problems.push(format!(
            "{day}: {booked} paise reserved, its requests hold {held}"
        ));
    }
    for (hop, (spent, held)) in &books.unbalanced_hops {
        problems.push(format!(
            "hop {hop}: {spent} paise spent, its requests hold {held}"
        ));
    }
    // After a reconcile step, a capture kept for reconcile is money the
    // provider took that the books must hold.
    let reconciled = cx.scenario.steps.iter().any(|s| match &s.verb {
        Verb::Reconcile => true,
        Verb::Concurrent(c) => matches!(c.step.verb, Verb::Reconcile),
        _ => false,
    });
    if reconciled && books.kept_unsettled > 0 {
        problems.push(format!(
            "{} captures kept for reconcile are still off the books after a reconcile",
            books.kept_unsettled
        ));
    }
    state.books_balanced = Some(problems.is_empty());
    state.books_problems = problems;
    if let Some(wanted) = &cx.scenario.invariants.request_states {
        for name in wanted.keys() {
            let found = match cx.named.get(name) {
                Some(Named {
                    id: Some(id),
                    tenant,
                }) => gate.request_state(tenant, id).await?,
                _ => None,
            };
            state.request_states.insert(name.clone(), found);
        }
    }
    Ok(state)
}
