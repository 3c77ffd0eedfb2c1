//! The triage tour's database step: a delegation chain on a real database.
//! It lives in the harness: the gate crate holds only the gate, and this is
//! a tour of it through its public API.
//!
//! Guarantees: [`delegation_tour`] runs on the pool it is given (an empty,
//! migrated database: it seeds the standard world into it) with the
//! in-process provider and a manual clock at the standard world's "now", so
//! two runs print the same thing. It grants finance-lead → buyer-agent →
//! procurement-agent → renewals-agent, shows the leaf spending inside every
//! bound (proposed, checked out, paid, captured by a signed event), a sibling
//! refused by the DATABASE (`DELEGATION_BUDGET_EXHAUSTED`, naming
//! `ck_delegation_budget_partitioned`), the middle hop revoked and the leaf's
//! next spend refused `DELEGATION_REVOKED` with its own row untouched, the
//! authority consumed twice (the second refused), and a forged webhook
//! refused. Every number in the report is READ BACK from the rows after the
//! step, never taken from what the gate returned.

use std::fmt;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use gate::Decision;
use gate::provider::InProcessProvider;
use gate::service::webhook::{EVENT_CAPTURED, ProviderEvent, sign_webhook};
use gate::service::{Gate, HopTerms, ManualClock, Outcome};
use scenarios::generate::standard_world;
use serde::Serialize;
use sqlx::PgPool;

const TOUR_SECRET: &[u8] = b"whsec_spendgate_tour_0123456789abcdef";
const ACME: &str = "acme";

/// One step of the tour: what was asked, what the gate said, and numbers read back from the rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TourStep {
    pub title: String,
    /// `ok`, `allow`, `step_up` or `deny REASON`.
    pub outcome: String,
    /// The database guard that refused, when one did.
    pub constraint: Option<String>,
    /// (what, value) pairs, each read from the database after the step.
    pub readback: Vec<(String, String)>,
}

/// The whole database step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TourReport {
    pub steps: Vec<TourStep>,
    pub ledger_entries: u64,
    pub ledger_intact: bool,
}

impl fmt::Display for TourReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            writeln!(f, "{}. {}", i + 1, step.title)?;
            write!(f, "   gate: {}", step.outcome)?;
            if let Some(c) = &step.constraint {
                write!(f, " (refused by the database: {c})")?;
            }
            writeln!(f)?;
            for (what, value) in &step.readback {
                writeln!(f, "   rows: {what} = {value}")?;
            }
        }
        write!(
            f,
            "ledger: {} entries, hash chain {}",
            self.ledger_entries,
            if self.ledger_intact {
                "intact"
            } else {
                "BROKEN"
            }
        )
    }
}

fn outcome_text(decision: Decision, non_decision: bool) -> String {
    match decision {
        Decision::Allow if non_decision => "ok".to_owned(),
        Decision::Deny(r) => format!("deny {r}"),
        d => d.kind().to_owned(),
    }
}

/// Reads numbers back from the rows.
struct Rows<'a>(&'a PgPool);

impl Rows<'_> {
    async fn int(&self, what: &str, sql: &str) -> Result<(String, String)> {
        let value: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.0)
            .await
            .context("reading back the tour's rows")?;
        Ok((
            what.to_owned(),
            value.map_or("none".to_owned(), |v| v.to_string()),
        ))
    }

    async fn text(&self, what: &str, sql: &str) -> Result<(String, String)> {
        let value: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.0)
            .await
            .context("reading back the tour's rows")?;
        Ok((what.to_owned(), value.unwrap_or_else(|| "none".to_owned())))
    }

    async fn hop(&self, id: &str) -> Result<Vec<(String, String)>> {
        let row: (i64, i64, i64, bool) = sqlx::query_as(
            "SELECT budget_paise, allocated_paise, spent_paise, revoked_at IS NOT NULL \
             FROM delegations WHERE tenant_id = 'acme' AND id = $1",
        )
        .bind(id)
        .fetch_one(self.0)
        .await
        .context("reading back a delegation")?;
        Ok(vec![(
            format!("{id} budget/allocated/spent/revoked"),
            format!("{}/{}/{}/{}", row.0, row.1, row.2, row.3),
        )])
    }
}

fn step(
    title: &str,
    outcome: &Outcome,
    non_decision: bool,
    readback: Vec<(String, String)>,
) -> TourStep {
    TourStep {
        title: title.to_owned(),
        outcome: outcome_text(outcome.decision, non_decision),
        constraint: outcome.constraint.clone(),
        readback,
    }
}

/// A hop below `parent`, granted by the tenant's operator (finance-lead).
async fn grant(
    gate: &Gate<InProcessProvider>,
    id: &str,
    parent: &str,
    to: &str,
    budget_paise: i64,
) -> Result<Outcome> {
    let hop = HopTerms {
        id: id.to_owned(),
        to: to.to_owned(),
        budget_paise,
        skus: None,
        expires_at: None,
    };
    Ok(gate.grant(ACME, "finance-lead", Some(parent), &hop).await?)
}

fn proposal(sku: &str, quantity: u32) -> Vec<u8> {
    serde_json::json!({"sku": sku, "quantity": quantity, "purpose": "renew the team's snacks"})
        .to_string()
        .into_bytes()
}

/// Runs the tour on `pool` (an empty, migrated database) and reports what the rows say.
pub async fn delegation_tour(pool: &PgPool) -> Result<TourReport> {
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let gate = Gate::new(pool.clone(), InProcessProvider::new(), TOUR_SECRET, clock)
        .map_err(|e| anyhow!("building the tour's gate: {e}"))?;
    gate.seed(&standard_world().seed()).await?;
    let rows = Rows(pool);
    let mut steps = Vec::new();

    let a = grant(&gate, "d-proc", "d-buyer", "procurement-agent", 100000).await?;
    let b = grant(&gate, "d-ren", "d-proc", "renewals-agent", 50000).await?;
    let granted = Outcome {
        decision: if a.is_ok() { b.decision } else { a.decision },
        id: b.id.clone(),
        constraint: a.constraint.or(b.constraint),
    };
    let mut readback = rows.hop("d-buyer").await?;
    readback.extend(rows.hop("d-proc").await?);
    readback.extend(rows.hop("d-ren").await?);
    steps.push(step(
        "grant finance-lead → buyer-agent (d-buyer) → procurement-agent (d-proc, 100000) → renewals-agent (d-ren, 50000)",
        &granted,
        true,
        readback,
    ));

    let p = gate
        .propose(ACME, "renewals-agent", &proposal("SNACK-BOX", 1), None)
        .await?;
    let request = p.request_id.clone().unwrap_or_default();
    let checkout = gate.checkout("acme", &request, "finance-lead").await?;
    let authority = checkout.id.clone().unwrap_or_default();
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    let order = paid.id.clone().unwrap_or_default();
    let capture = ProviderEvent {
        id: "evt_tour_capture".to_owned(),
        event: EVENT_CAPTURED.to_owned(),
        created_at: gate.now(),
        order_id: order.clone(),
        amount_paise: 25000,
        currency: "INR".to_owned(),
    }
    .to_body();
    let captured = gate
        .webhook(
            &capture,
            Some(&sign_webhook(TOUR_SECRET, &capture)),
            Some("evt_tour_capture"),
        )
        .await?;
    let all_ok = [
        p.decision,
        checkout.decision,
        paid.decision,
        captured.decision,
    ]
    .into_iter()
    .find(|d| *d != Decision::Allow)
    .unwrap_or(Decision::Allow);
    let mut readback = vec![
        rows.text(
            "request state",
            &format!("SELECT state FROM payment_requests WHERE id = '{request}'"),
        )
        .await?,
        rows.int(
            "acme reserved today",
            "SELECT sum(reserved_paise)::bigint FROM daily_spend WHERE tenant_id = 'acme'",
        )
        .await?,
        rows.int(
            "captured paise",
            "SELECT sum(amount_paise)::bigint FROM provider_orders WHERE status = 'CAPTURED'",
        )
        .await?,
    ];
    readback.extend(rows.hop("d-ren").await?);
    steps.push(TourStep {
        title: "renewals-agent buys SNACK-BOX x1 (25000): propose, checkout, pay, signed capture"
            .to_owned(),
        outcome: outcome_text(all_ok, false),
        constraint: None,
        readback,
    });

    let sibling = grant(&gate, "d-sib", "d-proc", "buyer-agent", 50001).await?;
    let mut readback = rows.hop("d-proc").await?;
    readback.push(
        rows.int(
            "children of d-proc",
            "SELECT count(*) FROM delegations WHERE parent_id = 'd-proc'",
        )
        .await?,
    );
    steps.push(step(
        "a sibling of d-ren asks for 50001 of d-proc's remaining 50000",
        &sibling,
        true,
        readback,
    ));

    let leaf_before = rows.hop("d-ren").await?;
    let revoked = gate.revoke(ACME, "d-proc", "finance-lead").await?;
    let next = gate
        .propose(ACME, "renewals-agent", &proposal("SNACK-BOX", 1), None)
        .await?;
    let leaf_after = rows.hop("d-ren").await?;
    let mut readback = rows.hop("d-proc").await?;
    readback.extend(leaf_after.clone());
    readback.push((
        "d-ren row unchanged by the revocation".to_owned(),
        (leaf_before == leaf_after).to_string(),
    ));
    steps.push(TourStep {
        title:
            "finance-lead revokes the middle hop d-proc; renewals-agent tries SNACK-BOX x1 again"
                .to_owned(),
        outcome: format!(
            "revoke {}, then propose {}",
            outcome_text(revoked.decision, true),
            outcome_text(next.decision, false)
        ),
        constraint: None,
        readback,
    });

    let twice = gate.pay("acme", &authority, "finance-lead").await?;
    let readback = vec![
        rows.int("provider orders", "SELECT count(*) FROM provider_orders")
            .await?,
        rows.int(
            "authority consumptions",
            &format!(
                "SELECT consumptions::bigint FROM checkout_authorities WHERE id = '{authority}'"
            ),
        )
        .await?,
    ];
    steps.push(step(
        "the same checkout authority is paid a second time",
        &twice,
        true,
        readback,
    ));

    let forged_body = ProviderEvent {
        id: "evt_tour_forged".to_owned(),
        event: EVENT_CAPTURED.to_owned(),
        created_at: gate.now(),
        order_id: order,
        amount_paise: 2_000_000,
        currency: "INR".to_owned(),
    }
    .to_body();
    let forged = gate
        .webhook(
            &forged_body,
            Some(&sign_webhook(b"attacker-guess", &forged_body)),
            Some("evt_tour_forged"),
        )
        .await?;
    let readback = vec![
        rows.int(
            "provider events recorded",
            "SELECT count(*) FROM provider_events",
        )
        .await?,
        rows.int(
            "captured paise",
            "SELECT sum(amount_paise)::bigint FROM provider_orders WHERE status = 'CAPTURED'",
        )
        .await?,
    ];
    steps.push(step(
        "a forged capture webhook for 2000000 paise (signed with a guessed key)",
        &forged,
        true,
        readback,
    ));

    let ledger = gate.verify_ledger().await?;
    Ok(TourReport {
        steps,
        ledger_entries: ledger.entries,
        ledger_intact: ledger.intact(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tour_reads_its_numbers_back_from_the_rows()
    -> Result<(), Box<dyn std::error::Error>> {
        let Some(db) = gate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let report = delegation_tour(db.pool()).await?;
        let text = report.to_string();
        println!("{text}");
        let expect = [
            "d-buyer budget/allocated/spent/revoked = 200000/100000/0/false",
            "d-proc budget/allocated/spent/revoked = 100000/50000/0/false",
            "gate: allow",
            "request state = CAPTURED",
            "captured paise = 25000",
            "d-ren budget/allocated/spent/revoked = 50000/0/25000/false",
            "gate: deny DELEGATION_BUDGET_EXHAUSTED (refused by the database: ck_delegation_budget_partitioned)",
            "children of d-proc = 1",
            "revoke ok, then propose deny DELEGATION_REVOKED",
            "d-proc budget/allocated/spent/revoked = 100000/50000/0/true",
            "d-ren row unchanged by the revocation = true",
            "gate: deny AUTHORITY_ALREADY_USED",
            "provider orders = 1",
            "authority consumptions = 1",
            "gate: deny WEBHOOK_SIGNATURE_INVALID",
            "provider events recorded = 1",
            "hash chain intact",
        ];
        for line in expect {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(report.ledger_intact);
        db.drop().await?;
        Ok(())
    }
}
