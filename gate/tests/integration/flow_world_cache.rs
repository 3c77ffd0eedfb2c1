//! A gate keeps the tenants' policies and catalogs between proposals
//! (`service::world_cache`); the database checks the kept copy in the
//! statement that locks each proposal's state. These tests change the price,
//! the catalog and the policy behind one gate's back (through a second gate
//! with a memory of its own, and by plain SQL) and require its very next
//! proposal to be decided on the world as it now is.

use std::sync::Arc;

use crate::support::*;
use gate::CatalogItem;
use gate::provider::InProcessProvider;
use gate::service::Gate;
use gate::service::LedgerKey;
use gate::service::ledger::catalog_item_mac;
use gate::service::standard;
use gate::{Decision, PolicyPatch, Reason};
use sqlx::PgPool;

/// The MAC the gate's key gives acme's catalog row `item`: what a writer
/// holding the key stores with a row it writes by SQL.
fn mac(item: &CatalogItem) -> String {
    catalog_item_mac(&LedgerKey::derived_from_secret(SECRET), "acme", item)
}

/// The standard world's acme row for `sku`.
fn standard_item(sku: &str) -> CatalogItem {
    standard::catalog()
        .into_iter()
        .find(|i| i.sku == sku)
        .expect("the standard world sells the sku")
}

/// The amount and the policy version recorded for a request.
async fn recorded(pool: &PgPool, id: &str) -> Result<(Option<i64>, Option<i32>), sqlx::Error> {
    sqlx::query_as("SELECT amount_paise, policy_version FROM payment_requests WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
}

#[tokio::test]
async fn a_price_catalog_or_policy_changed_behind_a_gates_back_decides_its_next_proposal()
-> TestResult {
    on_world(async |w| {
        let other = Gate::new(
            w.pool().clone(),
            InProcessProvider::new(),
            SECRET,
            w.clock.clone(),
        )?;

        // The first proposal reads the world; the second decides on the copy.
        for _ in 0..2 {
            let p = w.propose("SNACK-BOX", 1).await?;
            assert_eq!(p.decision, Decision::Allow);
            let (amount, _) = recorded(w.pool(), &request_id(&p)).await?;
            assert_eq!(amount, Some(25_000));
        }

        // Another gate changes the price.
        assert_eq!(
            other.set_price("acme", "SNACK-BOX", 30_000).await?.decision,
            Decision::Allow
        );
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        let (amount, version) = recorded(w.pool(), &request_id(&p)).await?;
        assert_eq!(amount, Some(30_000), "decided on the price as it is now");

        // A plain SQL writer holding the key takes the sku off sale.
        let off_sale = CatalogItem {
            price_paise: 30_000,
            available: false,
            ..standard_item("SNACK-BOX")
        };
        sqlx::query(
            "UPDATE catalog_items SET available = false, row_mac = $1 \
              WHERE tenant_id = 'acme' AND sku = 'SNACK-BOX'",
        )
        .bind(mac(&off_sale))
        .execute(w.owner())
        .await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, deny(Reason::SkuUnavailable));

        // Another gate publishes a policy in another currency: the proposal
        // is judged under it, and its day is locked in that currency.
        let published = other
            .set_policy(
                "acme",
                &PolicyPatch {
                    currency: Some("USD".into()),
                    ..PolicyPatch::default()
                },
            )
            .await?;
        assert_eq!(published.decision, Decision::Allow);
        let p = w.propose("CLOUD-STARTER", 1).await?;
        assert_eq!(p.decision, deny(Reason::CurrencyNotAllowed));
        let (_, new_version) = recorded(w.pool(), &request_id(&p)).await?;
        assert_eq!(
            new_version,
            version.map(|v| v + 1),
            "the new version decided"
        );
        let usd_days: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM daily_spend WHERE tenant_id = 'acme' AND currency = 'USD'",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(
            usd_days, 1,
            "the day was locked in the new policy's currency"
        );
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

/// Proposals racing a policy change through one gate are never an engine
/// error, none recorded under the new version (a cap of one paisa) is
/// allowed, and the first proposal after the change records the new version.
#[tokio::test]
async fn proposals_racing_a_policy_change_each_record_the_version_that_decided_them() -> TestResult
{
    on_world_with_pool(16, async |w| {
        let gate = Arc::clone(&w.gate);
        let first = w.propose("SNACK-BOX", 1).await?;
        let (_, before) = recorded(w.pool(), &request_id(&first)).await?;
        let racers: Vec<_> = (0..12)
            .map(|_| {
                let gate = Arc::clone(&gate);
                tokio::spawn(async move {
                    gate.propose("acme", "buyer-agent", &body("SNACK-BOX", 1), None)
                        .await
                })
            })
            .collect();
        let published = w
            .gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    per_transaction_cap_paise: Some(1),
                    ..PolicyPatch::default()
                },
            )
            .await?;
        assert_eq!(published.decision, Decision::Allow);
        let new_version = before.map(|v| v + 1);
        for racer in racers {
            let p = racer.await??;
            let (_, version) = recorded(w.pool(), &request_id(&p)).await?;
            assert!(version == before || version == new_version, "{version:?}");
            if version == new_version {
                assert_ne!(p.decision, Decision::Allow, "allowed under a one-paisa cap");
            }
        }
        let after = w.propose("SNACK-BOX", 1).await?;
        assert_ne!(after.decision, Decision::Allow);
        let (_, version) = recorded(w.pool(), &request_id(&after)).await?;
        assert_eq!(version, new_version);
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

/// A `proposal_state` that never locks (a function replaced by its owner, or
/// a bug) makes a proposal an error after the second call, never a loop
/// and never a decision on state nobody locked.
#[tokio::test]
async fn a_state_function_that_never_locks_is_an_error_not_a_loop() -> TestResult {
    on_world(async |w| {
        sqlx::query(
            "CREATE OR REPLACE FUNCTION proposal_state( \
                 p_tenant text, p_agent text, p_day date, p_currency text, p_cap bigint, \
                 p_judge boolean, p_since timestamptz, p_proposals_max bigint, \
                 p_denials_max bigint, p_key text, p_max_depth integer, \
                 p_world text, p_lock_anyway boolean) \
             RETURNS TABLE (tenant_known boolean, is_agent boolean, may_approve boolean, \
                 is_operator boolean, elsewhere boolean, world text, version integer, \
                 policy jsonb, catalog json, locked boolean, reserved_paise bigint, \
                 first jsonb, chains jsonb, proposals timestamptz[], denials timestamptz[]) \
             LANGUAGE sql AS $$ SELECT true, true, NULL::boolean, NULL::boolean, false, \
                 'never-current', NULL::integer, NULL::jsonb, NULL::json, false, \
                 NULL::bigint, NULL::jsonb, NULL::jsonb, NULL::timestamptz[], \
                 NULL::timestamptz[] $$",
        )
        .execute(w.owner())
        .await?;
        let proposed = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            w.propose("SNACK-BOX", 1),
        )
        .await
        .map_err(|_| "the proposal did not end within 30 s")?;
        assert!(
            matches!(proposed, Err(gate::service::ServiceError::Corrupt { .. })),
            "{proposed:?}"
        );
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM payment_requests")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(rows, 0, "nothing was recorded on unlocked state");
        Ok(())
    })
    .await
}

/// The stamp a proposal compares its gate's copy with
/// (`tenants.world_digest`), and the digest of the world as it is.
async fn stamp_and_world(pool: &PgPool) -> Result<(Option<String>, String), sqlx::Error> {
    sqlx::query_as(
        "SELECT t.world_digest, (SELECT w.digest FROM tenant_world(t.id) w) \
           FROM tenants t WHERE t.id = 'acme'",
    )
    .fetch_one(pool)
    .await
}

/// A catalog row added and one removed by plain SQL, behind a gate that holds
/// the catalog without them (so the stamp, `world_stamp_follows_catalog`, is
/// all that tells it): its next proposals are decided on the catalog as it is.
#[tokio::test]
async fn a_catalog_row_added_or_removed_by_sql_decides_the_next_proposal() -> TestResult {
    on_world(async |w| {
        let p = w.propose("SNACK-MINI", 1).await?;
        assert_eq!(p.decision, deny(Reason::SkuUnknown));
        assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);

        // Written by plain SQL with the MAC the gate's key gives the row.
        let mini = CatalogItem {
            sku: "SNACK-MINI".into(),
            merchant: "snackshop".into(),
            price_paise: 5000,
            currency: "INR".into(),
            category: "food".into(),
            max_quantity: 4,
            available: true,
            description: "a small box".into(),
        };
        sqlx::query(
            "INSERT INTO catalog_items (tenant_id, sku, merchant_id, price_paise, currency, \
             category, max_quantity, available, description, row_mac) \
             VALUES ('acme', 'SNACK-MINI', 'snackshop', 5000, 'INR', 'food', 4, true, \
                     'a small box', $1)",
        )
        .bind(mac(&mini))
        .execute(w.owner())
        .await?;
        let p = w.propose("SNACK-MINI", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "the added row decides");
        let (amount, _) = recorded(w.pool(), &request_id(&p)).await?;
        assert_eq!(amount, Some(5_000));

        exec(
            w.owner(),
            "DELETE FROM catalog_items WHERE tenant_id = 'acme' AND sku = 'SNACK-BOX'",
        )
        .await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(
            p.decision,
            deny(Reason::SkuUnknown),
            "the removed row is gone"
        );
        let (stamp, world) = stamp_and_world(w.pool()).await?;
        assert_eq!(stamp.as_deref(), Some(world.as_str()));
        Ok(())
    })
    .await
}

/// A catalog emptied by TRUNCATE behind a gate that holds it
/// (`world_stamp_follows_catalog_truncate`): its next proposal finds no sku.
#[tokio::test]
async fn a_truncated_catalog_decides_the_next_proposal() -> TestResult {
    on_world(async |w| {
        assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        exec(w.owner(), "TRUNCATE catalog_items").await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, deny(Reason::SkuUnknown));
        let (stamp, world) = stamp_and_world(w.pool()).await?;
        assert_eq!(stamp.as_deref(), Some(world.as_str()));
        Ok(())
    })
    .await
}

/// A policy version inserted by plain SQL behind a gate that holds the one
/// before (`world_stamp_follows_policy`): its next proposal is decided, and
/// recorded, under the new version, when the row carries the approver's
/// signature (the mandate the gate verifies), and refused POLICY_INVALID
/// when it carries none.
#[tokio::test]
async fn a_policy_version_inserted_by_sql_decides_the_next_proposal() -> TestResult {
    on_world(async |w| {
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        let (_, version) = recorded(w.pool(), &request_id(&p)).await?;
        let (held, mut policy) = w
            .gate
            .policy_document("acme")
            .await?
            .ok_or("acme has a policy")?;
        policy["allowed_merchants"] = serde_json::json!([]);
        let signed = mandate::Mandate::new("acme", i64::from(held) + 1, "finance-lead", policy)
            .sign(&mandate::world_secret("acme", "finance-lead"))?;
        sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at, signer, signature) \
             VALUES ('acme', $1, $2, now(), 'finance-lead', $3)",
        )
        .bind(held + 1)
        .bind(&signed.mandate.policy)
        .bind(&signed.signature)
        .execute(w.owner())
        .await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, deny(Reason::MerchantNotAllowed));
        let (_, now) = recorded(w.pool(), &request_id(&p)).await?;
        assert_eq!(now, version.map(|v| v + 1), "the new version decided");
        exec(
            w.owner(),
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
             SELECT tenant_id, version + 1, policy, published_at \
               FROM policy_versions WHERE tenant_id = 'acme' \
              ORDER BY version DESC LIMIT 1",
        )
        .await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, deny(Reason::PolicyInvalid), "an unsigned row decides nothing");
        Ok(())
    })
    .await
}
