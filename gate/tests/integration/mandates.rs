//! Signed mandates on a real database: what the gate publishes, what it
//! refuses, and what a policy row the gate's own login writes without a
//! valid signature does (nothing: every proposal is POLICY_INVALID).

use gate::Reason;
use gate::service::ServiceError;
use mandate::{Keyring, Mandate, SignedMandate, world_secret};
use serde_json::Value;

use crate::support::*;

async fn document(w: &World) -> Result<(i32, Value), ServiceError> {
    Ok(w.gate
        .policy_document("acme")
        .await?
        .unwrap_or((0, Value::Null)))
}

/// acme's policy in force with `cap` as its per-transaction cap, as
/// `version`, signed by `signer` with `key_of`'s world key.
async fn mandate(
    w: &World,
    version: i64,
    signer: &str,
    key_of: (&str, &str),
    cap: i64,
) -> Result<SignedMandate, Box<dyn std::error::Error + Send + Sync>> {
    let (_, mut policy) = document(w).await?;
    policy["per_transaction_cap_paise"] = cap.into();
    Ok(Mandate::new("acme", version, signer, policy).sign(&world_secret(key_of.0, key_of.1))?)
}

fn refused(outcome: &gate::service::Outcome) -> Option<Reason> {
    outcome.reason()
}

#[tokio::test]
async fn a_mandate_is_published_only_when_its_approver_signed_it_above_the_version_in_force()
-> TestResult {
    on_world(async |w| {
        let g = &w.gate;
        let intern = mandate(w, 2, "intern", ("acme", "intern"), 100_000).await?;
        assert_eq!(
            refused(&g.publish_mandate("acme", &intern).await?),
            Some(Reason::MandateSignerNotPermitted)
        );
        let globex = mandate(
            w,
            2,
            "globex-finance",
            ("globex", "globex-finance"),
            100_000,
        )
        .await?;
        assert_eq!(
            refused(&g.publish_mandate("acme", &globex).await?),
            Some(Reason::MandateSignerNotPermitted)
        );
        let forged = mandate(w, 2, "finance-lead", ("acme", "intern"), 100_000).await?;
        assert_eq!(
            refused(&g.publish_mandate("acme", &forged).await?),
            Some(Reason::MandateSignatureInvalid)
        );
        let mut unsigned = mandate(w, 2, "finance-lead", ("acme", "finance-lead"), 100_000).await?;
        unsigned.signature = None;
        assert_eq!(
            refused(&g.publish_mandate("acme", &unsigned).await?),
            Some(Reason::MandateSignatureInvalid)
        );
        let elsewhere = mandate(w, 2, "finance-lead", ("acme", "finance-lead"), 100_000).await?;
        assert_eq!(
            refused(&g.publish_mandate("globex", &elsewhere).await?),
            Some(Reason::TenantMismatch)
        );
        let again = mandate(w, 1, "finance-lead", ("acme", "finance-lead"), 100_000).await?;
        assert_eq!(
            refused(&g.publish_mandate("acme", &again).await?),
            Some(Reason::PolicyInvalid)
        );
        assert_eq!(document(w).await?.0, 1, "nothing was published");
        let good = mandate(w, 5, "finance-lead", ("acme", "finance-lead"), 100_000).await?;
        let outcome = g.publish_mandate("acme", &good).await?;
        assert!(outcome.is_ok(), "{outcome:?}");
        assert_eq!(outcome.id.as_deref(), Some("5"));
        // The decision applied it, and its ledger entry names its digest.
        let decided = w.propose("CLOUD-TEAM", 1).await?;
        assert_eq!(
            decided.decision.reason(),
            Some(Reason::AmountExceedsTransactionCap)
        );
        let digest = good.mandate.digest()?;
        let named: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM ledger_entries WHERE tenant_id = 'acme' AND kind = 'decision' \
               AND strpos(entry, $1) > 0",
        )
        .bind(&digest)
        .fetch_one(w.ledger().await?)
        .await?;
        assert_eq!(named, 1, "the decision's entry names mandate {digest}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_policy_row_the_runtime_role_inserts_unsigned_refuses_every_proposal() -> TestResult {
    on_world(async |w| {
        assert!(w.propose("CLOUD-STARTER", 1).await?.decision.reason().is_none());
        let (_, policy) = document(w).await?;
        // The gate's own login, as a stolen one would: a wider policy, no
        // valid signature.
        let mut wide = policy.clone();
        wide["per_transaction_cap_paise"] = 50_000_000.into();
        sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at, signer, signature) \
             VALUES ('acme', 2, $1, now(), 'finance-lead', $2)",
        )
        .bind(&wide)
        .bind("AAAA")
        .execute(w.pool())
        .await?;
        for sku in ["CLOUD-STARTER", "GPU-HOUR", "SNACK-BOX"] {
            assert_eq!(
                w.propose(sku, 1).await?.decision.reason(),
                Some(Reason::PolicyInvalid),
                "{sku}"
            );
        }
        // The approver's signature over the same document publishes it.
        let signed = Mandate::new("acme", 3, "finance-lead", policy)
            .sign(&world_secret("acme", "finance-lead"))?;
        assert!(w.gate.publish_mandate("acme", &signed).await?.is_ok());
        assert!(w.propose("CLOUD-STARTER", 1).await?.decision.reason().is_none());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_gate_without_the_signers_key_enforces_and_publishes_no_policy() -> TestResult {
    on_world(async |w| {
        let bare = gate::service::Gate::new(
            w.pool().clone(),
            gate::provider::InProcessProvider::new(),
            SECRET.to_vec(),
            w.clock.clone(),
        )?
        .with_mandate_keys(Keyring::empty().with(
            "acme",
            "intern",
            world_secret("acme", "intern").public(),
        ));
        let decided = bare
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?;
        assert_eq!(decided.decision.reason(), Some(Reason::PolicyInvalid));
        // finance-lead has no configured key here: what they sign is not published.
        let signed = mandate(w, 2, "finance-lead", ("acme", "finance-lead"), 100_000).await?;
        assert_eq!(
            refused(&bare.publish_mandate("acme", &signed).await?),
            Some(Reason::MandateSignerNotPermitted)
        );
        assert_eq!(document(w).await?.0, 1, "nothing was published");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_new_tenants_first_policy_is_the_first_mandate_its_approver_signed() -> TestResult {
    on_fresh(async |db| {
        let pool = pool_of(db, 2).await?;
        let clock = std::sync::Arc::new(gate::service::ManualClock::new(
            gate::service::standard::world().now,
        ));
        let gate = gate::service::Gate::new(
            pool,
            gate::provider::InProcessProvider::new(),
            SECRET.to_vec(),
            clock,
        )?;
        let seed = gate::service::standard::seed();
        let first = |t: &gate::service::TenantSeed, signer: &str, key: &str, version: i64| {
            let policy = serde_json::to_value(&t.policy).map_err(|e| e.to_string())?;
            Mandate::new(&t.id, version, signer, policy)
                .sign(&world_secret(&t.id, key))
                .map_err(|e| e.to_string())
        };
        let (acme, globex) = (&seed.tenants[0], &seed.tenants[1]);
        let globex_first = first(globex, "globex-finance", "globex-finance", 1)?;
        let refusal = async |acme_first: Option<SignedMandate>| {
            let mandates: Vec<SignedMandate> = acme_first
                .into_iter()
                .chain([globex_first.clone()])
                .collect();
            match gate.seed_signed(&seed, &mandates).await {
                Err(ServiceError::SeedRefused { reason, .. }) => Some(reason),
                _ => None,
            }
        };
        assert_eq!(refusal(None).await, Some(Reason::MandateSignatureInvalid));
        let intern = first(acme, "intern", "intern", 1)?;
        assert_eq!(
            refusal(Some(intern)).await,
            Some(Reason::MandateSignerNotPermitted)
        );
        let forged = first(acme, "finance-lead", "intern", 1)?;
        assert_eq!(
            refusal(Some(forged)).await,
            Some(Reason::MandateSignatureInvalid)
        );
        let second = first(acme, "finance-lead", "finance-lead", 2)?;
        assert_eq!(refusal(Some(second)).await, Some(Reason::PolicyInvalid));
        let mut wider = first(acme, "finance-lead", "finance-lead", 1)?;
        wider.mandate.policy["per_transaction_cap_paise"] = 50_000_000.into();
        let wider = wider.mandate.sign(&world_secret("acme", "finance-lead"))?;
        assert_eq!(refusal(Some(wider)).await, Some(Reason::PolicyInvalid));
        let keyless = gate::service::Gate::new(
            pool_of(db, 2).await?,
            gate::provider::InProcessProvider::new(),
            SECRET.to_vec(),
            std::sync::Arc::new(gate::service::ManualClock::new(
                gate::service::standard::world().now,
            )),
        )?
        .with_mandate_keys(Keyring::empty());
        let good = first(acme, "finance-lead", "finance-lead", 1)?;
        let refused_keyless = keyless
            .seed_signed(&seed, &[good.clone(), globex_first.clone()])
            .await;
        assert!(
            matches!(
                refused_keyless,
                Err(ServiceError::SeedRefused {
                    reason: Reason::MandateSignerNotPermitted,
                    ..
                })
            ),
            "{refused_keyless:?}"
        );
        gate.seed_signed(&seed, &[good, globex_first.clone()])
            .await?;
        let held = gate.policy_document("acme").await?;
        assert_eq!(held.map(|(v, _)| v), Some(1));
        Ok(())
    })
    .await
}
