//! The guards of lifetimes, exact delegation partitions, chain depth and
//! per-currency reservations (migrations/20261201000005), each violated
//! directly with SQL and refused by name. The mutation runner drops each one
//! from a fresh database and requires the test named after it to fail.

use crate::support::*;

fn hop(id: &str, parent: &str) -> String {
    format!(
        "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
         VALUES ('acme', '{id}', '{parent}', 'procurement-agent', 100, now())"
    )
}

#[tokio::test]
async fn ck_delegation_depth_refuses_a_ninth_hop() -> TestResult {
    on_world(async |w| {
        let mut parent = "d-buyer".to_owned();
        for depth in 2..=8 {
            let id = format!("d-raw{depth}");
            exec(w.pool(), &hop(&id, &parent)).await?;
            parent = id;
        }
        assert_refused_by(
            exec(w.pool(), &hop("d-raw9", &parent)).await,
            "ck_delegation_depth",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_delegation_claim_refuses_a_live_hop_claiming_less_than_its_budget() -> TestResult {
    on_world(async |w| {
        assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET claim_paise = 1 WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .await,
        "ck_delegation_claim",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_partition_exact_refuses_an_allocation_no_child_claims() -> TestResult {
    on_world(async |w| {
    // Within the budget, so only the exact-partition guard can object.
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET allocated_paise = 5 WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .await,
        "delegation_partition_exact",
    );
    // Revoking a child without giving its unspent budget back is refused too.
    exec(w.pool(), &hop("d-child", "d-buyer")).await?;
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET revoked_at = now(), revoked_by = 'finance-lead', claim_paise = 0 \
             WHERE tenant_id = 'acme' AND id = 'd-child'",
        )
        .await,
        "delegation_partition_exact",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_request_authorized_at_refuses_an_authorized_request_without_its_start() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        assert_refused_by(
            exec(
                w.pool(),
                &format!("UPDATE payment_requests SET authorized_at = NULL WHERE id = '{request}'"),
            )
            .await,
            "ck_request_authorized_at",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_daily_spend_currency_uppercase_refuses_a_made_up_currency() -> TestResult {
    on_world(async |w| {
        assert_refused_by(
            exec(
                w.pool(),
                "INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) \
             VALUES ('acme', '2026-09-03', 'inr', 0, 100)",
            )
            .await,
            "ck_daily_spend_currency_uppercase",
        );
        Ok(())
    })
    .await
}
