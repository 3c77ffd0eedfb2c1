//! The triage step for signed mandates: a human's key signs a policy, the
//! gate publishes it, and a forged one is refused.
//!
//! Guarantees: a fresh migrated database seeded with the standard world
//! (each tenant's first policy signed with its first approver's world key),
//! a gate on a manual clock at the world's "now" that trusts only
//! finance-lead's public key for acme. Everything printed is what the gate
//! answered and what the database holds afterwards (the version in force,
//! the digest a decision's ledger entry names). The step fails (an error)
//! when an answer is not the documented one, so the tour cannot print a
//! rule that does not hold.

use std::sync::Arc;

use anyhow::{Result, bail};
use gate::provider::InProcessProvider;
use gate::service::{Gate, ManualClock};
use mandate::{Keyring, Mandate, world_secret};
use scenarios::generate::standard_world;

use crate::triage::say;

const TOUR_SECRET: &[u8] = b"whsec_spendgate_mandate_tour_0123456789";

/// Step 3b: a mandate signed and published, a forged one refused.
pub async fn mandate_step(url: &str) -> Result<()> {
    say!("\nStep 3b · the policy is a mandate a human signed");
    let db = gate::db::fresh_database(url).await?;
    let result = run(db.pool()).await;
    db.drop().await?;
    result
}

async fn run(pool: &sqlx::PgPool) -> Result<()> {
    let world = standard_world();
    let clock = Arc::new(ManualClock::new(world.now));
    let seeding = Gate::new(
        pool.clone(),
        InProcessProvider::new(),
        TOUR_SECRET,
        clock.clone(),
    )?;
    seeding.seed(&world.seed()).await?;
    let lead = world_secret("acme", "finance-lead");
    let keys = Keyring::empty()
        .with("acme", "finance-lead", lead.public())
        .with(
            "globex",
            "globex-finance",
            world_secret("globex", "globex-finance").public(),
        );
    let gate = Gate::new(pool.clone(), InProcessProvider::new(), TOUR_SECRET, clock)?
        .with_mandate_keys(keys);
    say!(
        "  the gate's configuration holds finance-lead's public key {} (never a row)",
        lead.public().to_text()
    );
    let Some((version, mut policy)) = gate.policy_document("acme").await? else {
        bail!("acme has no policy");
    };
    policy["per_transaction_cap_paise"] = 150_000.into();
    let signed = Mandate::new(
        "acme",
        i64::from(version) + 1,
        "finance-lead",
        policy.clone(),
    )
    .sign(&lead)?;
    let digest = signed.mandate.digest()?;
    let published = gate.publish_mandate("acme", &signed).await?;
    if !published.is_ok() {
        bail!("the signed mandate was refused: {published:?}");
    }
    say!(
        "  finance-lead signs version {} (cap 150000): published; digest {}",
        version + 1,
        &digest[..16]
    );
    let mut wide = policy.clone();
    wide["per_transaction_cap_paise"] = 50_000_000.into();
    let mut forged = Mandate::new("acme", i64::from(version) + 2, "finance-lead", wide)
        .sign(&world_secret("acme", "intern"))?;
    let refused = gate.publish_mandate("acme", &forged).await?;
    if refused.reason() != Some(gate::Reason::MandateSignatureInvalid) {
        bail!("a forged mandate was not refused MANDATE_SIGNATURE_INVALID: {refused:?}");
    }
    say!(
        "  the intern signs a cap of 50000000 in finance-lead's name: refused MANDATE_SIGNATURE_INVALID"
    );
    forged.signature = None;
    let unsigned = gate.publish_mandate("acme", &forged).await?;
    if unsigned.reason() != Some(gate::Reason::MandateSignatureInvalid) {
        bail!("an unsigned mandate was not refused: {unsigned:?}");
    }
    say!("  the same without a signature: refused MANDATE_SIGNATURE_INVALID");
    let decided = gate
        .propose(
            "acme",
            "buyer-agent",
            br#"{"sku":"CLOUD-TEAM","quantity":1,"purpose":"team credits"}"#,
            None,
        )
        .await?;
    if decided.decision.reason() != Some(gate::Reason::AmountExceedsTransactionCap) {
        bail!("a 180000 purchase was not refused under the signed cap: {decided:?}");
    }
    let in_force = gate.policy_document("acme").await?.map(|(v, _)| v);
    gate.integrate().await?;
    let named: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ledger_entries WHERE tenant_id = 'acme' AND kind = 'decision' \
           AND strpos(entry, $1) > 0",
    )
    .bind(&digest)
    .fetch_one(pool)
    .await?;
    say!(
        "  read back: version in force {}; CLOUD-TEAM (180000) refused AMOUNT_EXCEEDS_TRANSACTION_CAP; \
         {named} decision entry names the mandate's digest",
        in_force.unwrap_or(0)
    );
    Ok(())
}
