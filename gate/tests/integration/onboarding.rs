//! Onboarding through the gate: what a tenant holds, read whole, and
//! additions to it. Reading a tenant that is not there, or whose name is no
//! identifier, reads nothing; an addition lands whole with one ledger entry
//! naming who made it, and a row that exists already is refused, never
//! overwritten; a recorded onboarding is one entry naming who applied what.

use gate::CatalogItem;
use gate::service::{PersonSeed, TenantAdditions};
use serde_json::{Value, json};

use crate::support::*;

/// The bodies of acme's ledger entries of `kind`, oldest first.
async fn bodies_of_kind(
    w: &World,
    kind: &str,
) -> Result<Vec<Value>, Box<dyn std::error::Error + Send + Sync>> {
    w.gate.integrate().await?;
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT entry FROM ledger_entries WHERE tenant_id = 'acme' AND kind = $1 ORDER BY seq",
    )
    .bind(kind)
    .fetch_all(w.owner())
    .await?;
    rows.iter()
        .map(|r| Ok(serde_json::from_str::<Value>(r)?["body"].clone()))
        .collect()
}

fn additions() -> TenantAdditions {
    TenantAdditions {
        people: vec![PersonSeed {
            id: "new-approver".to_owned(),
            may_approve: true,
            is_operator: false,
        }],
        agents: vec!["new-agent".to_owned()],
        merchants: vec!["newshop".to_owned()],
        catalog: vec![CatalogItem {
            sku: "NEW-THING".to_owned(),
            merchant: "newshop".to_owned(),
            price_paise: 12_345,
            currency: "INR".to_owned(),
            category: "cloud-credits".to_owned(),
            max_quantity: 3,
            available: true,
            description: "a new thing".to_owned(),
        }],
    }
}

#[tokio::test]
async fn a_tenants_holdings_are_read_whole_and_no_other_name_reads_any() -> TestResult {
    on_world(async |w| {
        let acme = w
            .gate
            .tenant_holdings("acme")
            .await?
            .ok_or("acme has no holdings")?;
        let people: Vec<(&str, bool)> = acme
            .people
            .iter()
            .map(|p| (p.id.as_str(), p.may_approve))
            .collect();
        assert_eq!(people, [("finance-lead", true), ("intern", false)]);
        assert_eq!(
            acme.agents,
            ["buyer-agent", "procurement-agent", "renewals-agent"]
        );
        assert_eq!(acme.merchants, ["cloudco", "gadgetmart", "snackshop"]);
        let cloud = acme
            .catalog
            .iter()
            .find(|i| i.sku == "CLOUD-STARTER")
            .ok_or("no CLOUD-STARTER")?;
        assert_eq!(
            (
                cloud.merchant.as_str(),
                cloud.price_paise,
                cloud.max_quantity
            ),
            ("cloudco", 60_000, 2)
        );
        let (version, policy) = acme.policy.ok_or("acme has no policy")?;
        assert!(version >= 1, "{version}");
        assert_eq!(policy["daily_cap_paise"], json!(500_000));
        assert!(
            acme.delegations.iter().any(|d| d == "d-buyer"),
            "{:?}",
            acme.delegations
        );
        for nobody in ["nosuch", "", "acme\0", "ACME", "acme "] {
            assert_eq!(w.gate.tenant_holdings(nobody).await?, None, "{nobody:?}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_addition_lands_whole_with_one_entry_and_is_never_overwritten() -> TestResult {
    on_world(async |w| {
        let before = w.gate.tenant_holdings("acme").await?.ok_or("no acme")?;
        w.gate
            .extend_tenant("acme", &additions(), "ops-lead")
            .await?;
        let after = w.gate.tenant_holdings("acme").await?.ok_or("no acme")?;
        assert!(
            after
                .people
                .iter()
                .any(|p| p.id == "new-approver" && p.may_approve)
        );
        assert!(after.agents.iter().any(|a| a == "new-agent"));
        assert!(after.merchants.iter().any(|m| m == "newshop"));
        let added = after
            .catalog
            .iter()
            .find(|i| i.sku == "NEW-THING")
            .ok_or("NEW-THING was not added")?;
        assert_eq!((added.price_paise, added.max_quantity), (12_345, 3));
        assert_eq!(after.catalog.len(), before.catalog.len() + 1);
        let extended = bodies_of_kind(w, "tenant.extended").await?;
        assert_eq!(extended.len(), 1, "{extended:?}");
        assert_eq!(extended[0]["by"], json!("ops-lead"), "{}", extended[0]);
        assert_eq!(
            extended[0]["added"]["catalog"][0]["price_paise"],
            json!(12_345),
            "{}",
            extended[0]
        );
        // The same additions again: every row exists, so nothing is written.
        let mut again = additions();
        again.catalog[0].price_paise = 1;
        assert!(
            w.gate
                .extend_tenant("acme", &again, "ops-lead")
                .await
                .is_err()
        );
        assert_eq!(w.gate.tenant_holdings("acme").await?, Some(after));
        assert_eq!(bodies_of_kind(w, "tenant.extended").await?.len(), 1);
        // One kind of row alone is an addition too.
        let agent_only = TenantAdditions {
            agents: vec!["lone-agent".to_owned()],
            ..TenantAdditions::default()
        };
        w.gate
            .extend_tenant("acme", &agent_only, "ops-lead")
            .await?;
        let holdings = w.gate.tenant_holdings("acme").await?.ok_or("no acme")?;
        assert!(
            holdings.agents.iter().any(|a| a == "lone-agent"),
            "{:?}",
            holdings.agents
        );
        assert_eq!(bodies_of_kind(w, "tenant.extended").await?.len(), 2);
        // Nothing to add writes nothing.
        w.gate
            .extend_tenant("acme", &TenantAdditions::default(), "ops-lead")
            .await?;
        assert_eq!(bodies_of_kind(w, "tenant.extended").await?.len(), 2);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_recorded_onboarding_is_one_entry_naming_who_applied_what() -> TestResult {
    on_world(async |w| {
        let changes = json!({"policy": "daily cap to 400000"});
        w.gate
            .record_onboarding("acme", "ops-lead", changes.clone())
            .await?;
        let applied = bodies_of_kind(w, "tenant.applied").await?;
        assert_eq!(applied.len(), 1, "{applied:?}");
        assert_eq!(applied[0]["by"], json!("ops-lead"));
        assert_eq!(applied[0]["changes"], changes);
        Ok(())
    })
    .await
}
