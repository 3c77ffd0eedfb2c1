//! What the database-backed fuzz replays share: the standard world on a
//! fresh database, and one input sent through the gate.
#![allow(dead_code)]

use std::sync::Arc;

use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock, sign_webhook};
use scenarios::generate::standard_world;

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The standard world on a fresh database, or `None` when database tests are
/// skipped (`SPENDGATE_SKIP_DB=1`).
pub async fn standard_gate() -> Result<
    Option<(gate::db::FreshDatabase, Gate<InProcessProvider>)>,
    Box<dyn std::error::Error + Send + Sync>,
> {
    let Some(db) = gate::db::fresh_test_database().await? else {
        return Ok(None);
    };
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        fuzz::WEBHOOK_SECRET,
        clock,
    )?;
    gate.seed(&standard_world().seed()).await?;
    Ok(Some((db, gate)))
}

/// Sends one proposal input; the engine error as text if there is one.
pub async fn propose(gate: &Gate<InProcessProvider>, data: &[u8]) -> Option<String> {
    match gate.propose("acme", "buyer-agent", data, None).await {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// Sends one webhook input, as given and signed; the engine error as text.
pub async fn webhook(gate: &Gate<InProcessProvider>, data: &[u8]) -> Option<String> {
    let delivery = fuzz::Delivery::split(data);
    let given = delivery.header(fuzz::SIGNATURE_HEADER);
    // The event id travels in its own header; a delivery without one still
    // reaches the body's checks under a fixed id.
    let event_id = delivery.header("X-Razorpay-Event-Id").unwrap_or("evt_fuzz");
    if let Err(e) = gate.webhook(delivery.body, given, Some(event_id)).await {
        return Some(format!("as given: {e}"));
    }
    let signed = sign_webhook(fuzz::WEBHOOK_SECRET, delivery.body);
    match gate
        .webhook(delivery.body, Some(&signed), Some(event_id))
        .await
    {
        Ok(_) => None,
        Err(e) => Some(format!("signed: {e}")),
    }
}
