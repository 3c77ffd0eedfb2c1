//! The gate handle itself: its Debug form names its parts and never a
//! webhook secret, current or previous; closing it closes both its pools.

use std::sync::Arc;

use crate::support::*;
use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock, standard};

const PREVIOUS: &[u8] = b"whsec_previous_spendgate_0123456789ab";

#[tokio::test]
async fn a_gates_debug_form_redacts_both_webhook_secrets() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let clock = Arc::new(ManualClock::new(standard::now()));
    let gate = Gate::new(db.pool().clone(), InProcessProvider::new(), SECRET, clock)?
        .with_previous_webhook_secret(PREVIOUS)?;
    let shown = format!("{gate:?}");
    assert!(shown.starts_with("Gate {"), "{shown}");
    assert!(shown.contains("provider"), "{shown}");
    assert_eq!(shown.matches("[redacted]").count(), 2, "{shown}");
    for secret in [SECRET, PREVIOUS] {
        let text = std::str::from_utf8(secret)?;
        assert!(!shown.contains(text), "a secret is shown: {shown}");
    }
    gate.close().await;
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn closing_a_gate_closes_its_pool_and_its_onboarding_pool() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let clock = Arc::new(ManualClock::new(standard::now()));
    let gate = Gate::new(db.pool().clone(), InProcessProvider::new(), SECRET, clock)?;
    gate.seed(&standard::seed()).await?;
    assert!(!gate.pool().is_closed() && !gate.onboarding_pool().is_closed());
    gate.close().await;
    assert!(gate.pool().is_closed(), "the gate's pool is still open");
    assert!(
        gate.onboarding_pool().is_closed(),
        "the onboarding pool is still open"
    );
    db.drop().await?;
    Ok(())
}
