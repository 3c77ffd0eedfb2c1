//! The money audit (`gate::service::audit`, what `spendgate ledger verify`
//! runs) names nothing the gate wrote itself (an agent's, a human's and an
//! auditor's key, an issued and a consumed authority), and names an edited
//! authority with every problem it has, each once, in one exact text.

use gate::service::{LedgerKey, audit};

use crate::support::*;

async fn findings(
    w: &World,
) -> Result<Vec<gate::service::Disagreement>, Box<dyn std::error::Error + Send + Sync>> {
    w.gate.integrate().await?;
    Ok(audit(
        w.pool(),
        &LedgerKey::derived_from_secret(SECRET),
        Some("acme"),
    )
    .await?)
}

#[tokio::test]
async fn the_audit_names_nothing_the_gate_wrote_itself() -> TestResult {
    on_world(async |w| {
        let now = w.gate.now();
        w.gate.issue_key("acme", "buyer-agent", now).await?;
        w.gate.issue_key("acme", "finance-lead", now).await?;
        w.gate
            .issue_auditor_key("acme", "finance-lead", now)
            .await?;
        let (_request, _authority, _order) = paid_order(w).await?;
        let issued = request_id(&w.propose("SNACK-BOX", 1).await?);
        let c = w.gate.checkout("acme", &issued, "finance-lead").await?;
        assert!(c.is_ok(), "{c:?}");
        let keys: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM api_keys WHERE tenant_id = 'acme' AND person_id IS NOT NULL",
        )
        .fetch_one(w.owner())
        .await?;
        assert!(keys >= 2, "the human and the auditor keys: {keys}");
        let found = findings(w).await?;
        assert!(found.is_empty(), "{found:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_inflated_authority_is_named_with_both_its_problems_in_one_text() -> TestResult {
    on_world(async |w| {
        let request = request_id(&w.propose("SNACK-BOX", 1).await?);
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert!(c.is_ok(), "{c:?}");
        let authority = id(&c);
        exec(
            w.owner(),
            &format!(
                "ALTER TABLE checkout_authorities DISABLE TRIGGER authority_terms_immutable; \
                 ALTER TABLE payment_requests DISABLE TRIGGER request_terms_immutable; \
                 ALTER TABLE payment_requests DISABLE TRIGGER daily_spend_counts_requests; \
                 ALTER TABLE payment_requests DISABLE TRIGGER delegation_spend_counts_requests; \
                 WITH a AS (UPDATE checkout_authorities SET amount_paise = amount_paise * 100 \
                             WHERE id = '{authority}' RETURNING 1) \
                 UPDATE payment_requests SET amount_paise = amount_paise * 100, \
                        reserved_paise = reserved_paise * 100 WHERE id = '{request}'"
            ),
        )
        .await?;
        let named: Vec<_> = findings(w)
            .await?
            .into_iter()
            .filter(|d| d.table == "checkout_authorities")
            .collect();
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!(named[0].key, format!("id={authority}"));
        assert_eq!(
            named[0].problem,
            "its MAC does not verify: its terms are not the ones the gate issued; \
             amount_paise 2500000 but the ledger issued it for 25000"
        );
        Ok(())
    })
    .await
}
