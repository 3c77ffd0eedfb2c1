//! Money terms are immutable once decided: a request's and a checkout
//! authority's terms, changed with SQL as the gate's own database login, are
//! refused by name (`request_terms_immutable`, `authority_terms_immutable`),
//! and the outside red team's inflate-and-pay (one statement multiplying an
//! issued authority's amount by 100 with its request's amount and
//! reservation) is refused before any payment could follow.

use crate::support::*;
use gate::reason::Decision;

#[tokio::test]
async fn request_terms_immutable_refuses_changing_what_was_asked_or_derived() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        let request = request_id(&p);
        for set in [
            "amount_paise = amount_paise * 100",
            "currency = 'USD'",
            "merchant_id = 'gadgetmart'",
            "sku = 'GPU-HOUR'",
            "quantity = 2",
            "purchase_digest = repeat('0', 64)",
            "agent_id = 'procurement-agent'",
            "tenant_id = 'globex'",
        ] {
            assert_sql_refused_by(
                w.pool(),
                &format!("UPDATE payment_requests SET {set} WHERE id = '{request}'"),
                "request_terms_immutable",
            )
            .await;
        }
        // Naming a guarded column without changing it is not a change.
        exec(
            w.pool(),
            &format!(
                "UPDATE payment_requests SET amount_paise = amount_paise WHERE id = '{request}'"
            ),
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn authority_terms_immutable_refuses_changing_an_issued_authority() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert!(c.is_ok(), "{c:?}");
        let authority = id(&c);
        for set in [
            "amount_paise = amount_paise * 100",
            "currency = 'USD'",
            "merchant_id = 'gadgetmart'",
            "expires_at = expires_at + interval '1 day'",
            "issued_by = 'intern'",
            "policy_version = policy_version + 1",
        ] {
            assert_sql_refused_by(
                w.pool(),
                &format!("UPDATE checkout_authorities SET {set} WHERE id = '{authority}'"),
                "authority_terms_immutable",
            )
            .await;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn inflating_an_issued_authority_with_its_request_is_refused_and_pays_the_approved_amount()
-> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        let authority = id(&c);
        // The red team's statement: the authority, its request and the
        // request's reservation, all multiplied by 100 at once.
        let inflate = format!(
            "WITH a AS (UPDATE checkout_authorities SET amount_paise = amount_paise * 100 \
                        WHERE id = '{authority}' RETURNING request_id) \
             UPDATE payment_requests SET amount_paise = amount_paise * 100, \
                    reserved_paise = reserved_paise * 100 \
             WHERE id IN (SELECT request_id FROM a)"
        );
        let refused = exec(w.pool(), &inflate).await;
        let message = format!("{refused:?}");
        assert!(
            message.contains("authority_terms_immutable")
                || message.contains("request_terms_immutable"),
            "the inflation was not refused by a terms guard: {message}"
        );
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert!(paid.is_ok(), "{paid:?}");
        let orders = w.gate.provider().orders();
        assert_eq!(orders.len(), 1);
        assert_eq!(
            orders[0].amount_paise, 60_000,
            "the order is for the approved amount"
        );
        Ok(())
    })
    .await
}
