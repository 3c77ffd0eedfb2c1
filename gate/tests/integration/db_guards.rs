//! Every named database guard, violated directly with SQL (bypassing the
//! gate's Rust code), and refused by name. The mutation runner drops each
//! guard from a fresh database and requires the test named after it to fail.
//!
//! The world is seeded (and requests moved into the state a test needs)
//! through the gate; the violation itself is always a raw statement.

use crate::support::*;
use gate::service::webhook::EVENT_CAPTURED;

/// A request moved to AUTHORIZED by the gate (CLOUD-STARTER x1, 60000).
async fn authorized(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-STARTER", 1).await?;
    Ok(request_id(&p))
}

/// A request moved to PENDING_APPROVAL by the gate (CLOUD-TEAM, 180000).
async fn pending(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-TEAM", 1).await?;
    Ok(request_id(&p))
}

fn child(id: &str, parent: &str, budget: i64) -> String {
    format!(
        "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
         VALUES ('acme', '{id}', '{parent}', 'procurement-agent', {budget}, now())"
    )
}

// ---- delegation partitioning -------------------------------------------------

#[tokio::test]
async fn ck_delegation_budget_partitioned_refuses_sibling_oversubscription() -> TestResult {
    on_world(async |w| {
        exec(w.pool(), &child("d-a", "d-buyer", 120000)).await?;
        assert_refused_by(
            exec(w.pool(), &child("d-b", "d-buyer", 80001)).await,
            "ck_delegation_budget_partitioned",
        );
        exec(w.pool(), &child("d-c", "d-buyer", 80000)).await?;
        let allocated: i64 =
            sqlx::query_scalar("SELECT allocated_paise FROM delegations WHERE id = 'd-buyer'")
                .fetch_one(w.pool())
                .await?;
        assert_eq!(
            allocated, 200000,
            "the siblings partition the parent exactly"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_delegation_budget_partitioned_refuses_spending_past_the_budget() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
        exec(w.pool(), &child("d-a", "d-buyer", 150000)).await?;
        assert_refused_by(
            exec(
                w.pool(),
                "UPDATE delegations SET spent_paise = 50001 WHERE id = 'd-buyer'",
            )
            .await,
            "ck_delegation_budget_partitioned",
        );
        exec(
            w.pool(),
            "UPDATE delegations SET spent_paise = 50000 WHERE id = 'd-buyer'",
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_attenuates_takes_the_allocation_from_the_parent() -> TestResult {
    on_world(async |w| {
        exec(w.pool(), &child("d-a", "d-buyer", 70000)).await?;
        exec(
        w.pool(),
        "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
         VALUES ('acme', 'd-a1', 'd-a', 'renewals-agent', 30000, now())",
    )
    .await?;
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT id, allocated_paise FROM delegations WHERE tenant_id = 'acme' ORDER BY id",
        )
        .fetch_all(w.pool())
        .await?;
        assert_eq!(
            rows,
            vec![
                ("d-a".into(), 30000),
                ("d-a1".into(), 0),
                ("d-buyer".into(), 70000)
            ]
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_attenuates_refuses_a_child_wider_than_its_parent() -> TestResult {
    on_world(async |w| {
    // budget
    assert_refused_by(
        exec(w.pool(), &child("d-wide", "d-buyer", 200001)).await,
        "delegation_attenuates",
    );
    // sku scope and expiry, below a scoped, expiring parent
    exec(
        w.pool(),
        "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, skus, expires_at, created_at) \
         VALUES ('acme', 'd-s', 'd-buyer', 'procurement-agent', 100000, ARRAY['SNACK-BOX'], \
                 '2026-09-30T00:00:00Z', now())",
    )
    .await?;
    let below = |skus: &str, expires: &str| {
        format!(
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, skus, expires_at, created_at) \
             VALUES ('acme', 'd-s1', 'd-s', 'renewals-agent', 1000, {skus}, {expires}, now())"
        )
    };
    for (skus, expires) in [
        ("NULL", "'2026-09-29T00:00:00Z'"),
        ("ARRAY['SNACK-BOX','GPU-HOUR']", "'2026-09-29T00:00:00Z'"),
        ("ARRAY['SNACK-BOX']", "NULL"),
        ("ARRAY['SNACK-BOX']", "'2026-10-01T00:00:00Z'"),
    ] {
        assert_refused_by(
            exec(w.pool(), &below(skus, expires)).await,
            "delegation_attenuates",
        );
    }
    exec(
        w.pool(),
        &below("ARRAY['SNACK-BOX']", "'2026-09-30T00:00:00Z'"),
    )
    .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_attenuates_refuses_a_root_from_a_human_who_may_not_approve() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, grantor_id, grantee_id, budget_paise, created_at) \
             VALUES ('acme', 'd-intern', 'intern', 'procurement-agent', 1000, now())",
        )
        .await,
        "delegation_attenuates",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_attenuates_refuses_a_child_of_a_revoked_parent() -> TestResult {
    on_world(async |w| {
    exec(w.pool(), "UPDATE delegations SET revoked_at = now(), revoked_by = 'finance-lead' WHERE id = 'd-buyer'").await?;
    assert_refused_by(
        exec(w.pool(), &child("d-late", "d-buyer", 1000)).await,
        "delegation_attenuates",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_attenuates_refuses_a_child_that_starts_with_spend() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, allocated_paise, created_at) \
             VALUES ('acme', 'd-x', 'd-buyer', 'procurement-agent', 1000, 5, now())",
        )
        .await,
        "delegation_attenuates",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn delegation_terms_immutable_refuses_widening_a_written_hop() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET budget_paise = 9000000 WHERE id = 'd-buyer'",
        )
        .await,
        "delegation_terms_immutable",
    );
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET skus = ARRAY['GPU-HOUR'] WHERE id = 'd-buyer'",
        )
        .await,
        "delegation_terms_immutable",
    );
    exec(w.pool(), "UPDATE delegations SET revoked_at = now(), revoked_by = 'finance-lead' WHERE id = 'd-buyer'").await?;
    assert_refused_by(
        exec(
            w.pool(),
            "UPDATE delegations SET revoked_at = NULL, revoked_by = NULL WHERE id = 'd-buyer'",
        )
        .await,
        "delegation_terms_immutable",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_delegation_parent_same_tenant_refuses_a_parent_in_another_tenant() -> TestResult {
    on_world(async |w| {
    // The trigger refuses this first; switch it off (as the owner: the
    // application role may not) to reach the foreign key itself.
    exec(
        w.owner(),
        "ALTER TABLE delegations DISABLE TRIGGER delegation_attenuates",
    )
    .await?;
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, created_at) \
             VALUES ('globex', 'd-x', 'd-buyer', 'globex-agent', 1000, now())",
        )
        .await,
        "fk_delegation_parent_same_tenant",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_delegation_grantee_same_tenant_refuses_another_tenants_agent() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.onboard(),
            "INSERT INTO delegations (tenant_id, id, grantor_id, grantee_id, budget_paise, created_at) \
             VALUES ('acme', 'd-x', 'finance-lead', 'globex-agent', 1000, now())",
        )
        .await,
        "fk_delegation_grantee_same_tenant",
    );
        Ok(())
    })
    .await
}

// ---- requests and reservations ---------------------------------------------

#[tokio::test]
async fn request_state_transition_refuses_capturing_from_anywhere_else() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
        let request = authorized(w).await?;
        // A captured payment recorded for the AUTHORIZED request (borrowing
        // another request's order), so request_captured_by_event, which fires
        // first and refuses any capture without one, lets the statement through
        // to the transition guard. A capture without a payment is refused by
        // request_captured_by_event (gate/tests/integration/db_roles.rs).
        let (_, _, order) = paid_order(w).await?;
        // As the owner: the payment's own foreign key would refuse the borrowing.
        exec(
            w.owner(),
            "ALTER TABLE provider_payments DROP CONSTRAINT fk_provider_payment_matches_order",
        )
        .await?;
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_payments (tenant_id, provider_payment_id, provider_order_id, \
             request_id, amount_paise, currency, status, source, recorded_at) \
             SELECT tenant_id, 'pay_borrowed', provider_order_id, '{request}', amount_paise, \
                    currency, 'captured', 'webhook', now() \
               FROM provider_orders WHERE provider_order_id = '{order}'"
            ),
        )
        .await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!("UPDATE payment_requests SET state = 'CAPTURED' WHERE id = '{request}'"),
            )
            .await,
            "request_state_transition",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_state_transition_refuses_reviving_a_final_state() -> TestResult {
    on_world(async |w| {
        let p = w.propose("USB-HUB", 1).await?;
        let request = request_id(&p);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("DENIED")
        );
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "UPDATE payment_requests SET state = 'PENDING_APPROVAL' WHERE id = '{request}'"
                ),
            )
            .await,
            "request_state_transition",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_state_transition_refuses_a_request_born_checkout_issued() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, state, created_at, updated_at) \
             VALUES ('acme', 'buyer-agent', repeat('a', 64), 'allow', 'CHECKOUT_ISSUED', now(), now())",
        )
        .await,
        "request_state_transition",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_state_transition_lets_a_request_be_born_refused_waiting_or_authorized_but_never_further()
-> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
        // A refusal and a wait for a human hold nothing: a proposal may be born in them.
        exec(
            w.pool(),
            "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, reason, state, \
             state_reason, created_at, updated_at) \
             VALUES ('acme', 'buyer-agent', repeat('b', 64), 'deny', 'SKU_UNKNOWN', 'DENIED', \
             'SKU_UNKNOWN', now(), now())",
        )
        .await?;
        let pending = pending(w).await?;
        let born_like = |state: &str| {
            format!(
                "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, sku, quantity, purpose, \
                 merchant_id, currency, amount_paise, purchase_digest, decision, reason, state, \
                 policy_version, reserved_day, reserved_paise, delegation_id, authorized_at, \
                 created_at, updated_at) \
                 SELECT tenant_id, agent_id, repeat('c', 64), sku, quantity, purpose, merchant_id, \
                 currency, amount_paise, purchase_digest, 'step_up', reason, '{state}', policy_version, \
                 CASE WHEN '{state}' = 'PENDING_APPROVAL' THEN NULL ELSE current_date END, \
                 CASE WHEN '{state}' = 'PENDING_APPROVAL' THEN 0 ELSE amount_paise END, \
                 CASE WHEN '{state}' = 'PENDING_APPROVAL' THEN NULL ELSE 'd-buyer' END, \
                 CASE WHEN '{state}' = 'PENDING_APPROVAL' THEN NULL ELSE now() END, now(), now() \
                 FROM payment_requests WHERE id = '{pending}'"
            )
        };
        assert_eq!(exec(w.pool(), &born_like("PENDING_APPROVAL")).await?, 1);
        // An allowed proposal is born AUTHORIZED, holding its reservation...
        assert_eq!(exec(w.pool(), &born_like("AUTHORIZED")).await?, 1);
        // ...and only holding it: the same row holding nothing is refused.
        assert_refused_by(
            exec(
                w.pool(),
                &born_like("AUTHORIZED").replace(
                    "ELSE amount_paise END",
                    "ELSE 0 END",
                ),
            )
            .await,
            "ck_request_reservation_matches_state",
        );
        // Every state past it is reached only by a move, even with every
        // column a live request needs (CAPTURED is refused first by
        // request_captured_by_event, which fires before it).
        for state in ["CHECKOUT_ISSUED", "PROVIDER_PENDING"] {
            assert_refused_by(
                exec(w.pool(), &born_like(state)).await,
                "request_state_transition",
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_request_reservation_matches_state_refuses_ending_a_request_without_releasing()
-> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    let request = authorized(&w).await?;
    assert_refused_by(
        exec(
            w.pool(),
            &format!("UPDATE payment_requests SET state = 'CANCELLED' WHERE id = '{request}'"),
        )
        .await,
        "ck_request_reservation_matches_state",
    );
    w.drop().await
}

#[tokio::test]
async fn ck_daily_spend_within_cap_refuses_reserving_past_the_cap() -> TestResult {
    on_world(async |w| {
        without_counter_triggers(w).await?;
    authorized(w).await?; // the day's row exists: 60000 of 500000
    assert_refused_by(
        exec(w.pool(), "UPDATE daily_spend SET reserved_paise = reserved_paise + 440001 WHERE tenant_id = 'acme'").await,
        "ck_daily_spend_within_cap",
    );
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) VALUES ('acme', '2026-09-04', 'INR', 500001, 500000)",
        )
        .await,
        "ck_daily_spend_within_cap",
    );
    exec(
        w.pool(),
        "UPDATE daily_spend SET reserved_paise = reserved_paise + 440000 WHERE tenant_id = 'acme'",
    )
    .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn uq_request_idempotency_refuses_a_key_used_twice() -> TestResult {
    on_world(async |w| {
    w.gate
        .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), Some("k-1"))
        .await?;
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO payment_requests (tenant_id, agent_id, idempotency_key, body_sha256, decision, state, created_at, updated_at) \
             VALUES ('acme', 'buyer-agent', 'k-1', repeat('b', 64), 'deny', 'PROPOSED', now(), now())",
        )
        .await,
        "uq_request_idempotency",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_request_agent_same_tenant_refuses_another_tenants_agent() -> TestResult {
    on_world(async |w| {
    assert_refused_by(
        exec(
            w.pool(),
            "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, state, created_at, updated_at) \
             VALUES ('acme', 'globex-agent', repeat('a', 64), 'deny', 'PROPOSED', now(), now())",
        )
        .await,
        "fk_request_agent_same_tenant",
    );
        Ok(())
    })
    .await
}

// ---- approvals -------------------------------------------------------------

#[tokio::test]
async fn uq_live_approval_refuses_a_second_live_approval() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        let approve = format!(
            "INSERT INTO approvals (tenant_id, request_id, approver_id, approved_at) \
         VALUES ('acme', '{request}', 'finance-lead', now())"
        );
        exec(w.pool(), &approve).await?;
        assert_refused_by(exec(w.pool(), &approve).await, "uq_live_approval");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_approval_consumed_once_refuses_a_second_consumption() -> TestResult {
    on_world(async |w| {
    let request = pending(w).await?;
    assert!(
        w.gate
            .approve("acme", &request, "finance-lead")
            .await?
            .is_ok()
    );
    assert_refused_by(
        exec(
            w.pool(),
            &format!("UPDATE approvals SET consumptions = consumptions + 1, consumed_at = now() WHERE request_id = '{request}'"),
        )
        .await,
        "ck_approval_consumed_once",
    );
    assert_refused_by(
        exec(
            w.pool(),
            &format!("UPDATE approvals SET consumed_at = NULL WHERE request_id = '{request}'"),
        )
        .await,
        "ck_approval_consumed_once",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn approval_by_permitted_human_refuses_an_approver_who_may_not_approve() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "INSERT INTO approvals (tenant_id, request_id, approver_id, approved_at) \
                 VALUES ('acme', '{request}', 'intern', now())"
                ),
            )
            .await,
            "approval_by_permitted_human",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_approval_approver_same_tenant_refuses_another_tenants_human() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        exec(
            w.owner(),
            "ALTER TABLE approvals DISABLE TRIGGER approval_by_permitted_human",
        )
        .await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "INSERT INTO approvals (tenant_id, request_id, approver_id, approved_at) \
                 VALUES ('acme', '{request}', 'globex-finance', now())"
                ),
            )
            .await,
            "fk_approval_approver_same_tenant",
        );
        Ok(())
    })
    .await
}

// ---- checkout authorities and orders ---------------------------------------

fn authority_insert(request: &str, id: &str, amount: i64, ttl: &str) -> String {
    format!(
        "INSERT INTO checkout_authorities (tenant_id, id, request_id, issued_by, merchant_id, amount_paise, \
         currency, purchase_digest, policy_version, issued_at, expires_at) \
         SELECT tenant_id, '{id}', id, 'finance-lead', merchant_id, {amount}, currency, purchase_digest, \
                policy_version, now(), now() + interval '{ttl}' \
           FROM payment_requests WHERE id = '{request}'"
    )
}

#[tokio::test]
async fn ck_authority_one_consumer_refuses_a_human_and_an_agent_at_once() -> TestResult {
    on_world(async |w| {
    let request = authorized(w).await?;
    let authority = w.gate.checkout("acme", &request, "finance-lead").await?;
    let authority = authority.id.expect("an authority id");
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET consumptions = 1, consumed_at = now(), \
                 consumed_by = 'finance-lead', consumed_by_agent = 'buyer-agent' WHERE id = '{authority}'"
            ),
        )
        .await,
        "ck_authority_one_consumer",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_authority_agent_consumer_same_tenant_refuses_another_tenants_agent() -> TestResult {
    on_world(async |w| {
    let request = authorized(w).await?;
    let authority = w.gate.checkout("acme", &request, "finance-lead").await?;
    let authority = authority.id.expect("an authority id");
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET consumed_by_agent = 'globex-agent' WHERE id = '{authority}'"
            ),
        )
        .await,
        "fk_authority_agent_consumer_same_tenant",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn uq_authority_per_request_refuses_a_second_authority() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        assert!(
            w.gate
                .checkout("acme", &request, "finance-lead")
                .await?
                .is_ok()
        );
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_second", 60000, "10 minutes"),
            )
            .await,
            "uq_authority_per_request",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_authority_ttl_refuses_a_long_lived_authority() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_long", 60000, "15 minutes 1 second"),
            )
            .await,
            "ck_authority_ttl",
        );
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_dead", 60000, "0 seconds"),
            )
            .await,
            "ck_authority_ttl",
        );
        exec(
            w.pool(),
            &authority_insert(&request, "auth_ok", 60000, "15 minutes"),
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_authority_consumed_once_refuses_a_second_consumption() -> TestResult {
    on_world(async |w| {
    let (_, authority, _) = paid_order(w).await?;
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET consumptions = consumptions + 1, consumed_at = now() WHERE id = '{authority}'"
            ),
        )
        .await,
        "ck_authority_consumed_once",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_authority_matches_request_refuses_an_authority_for_another_amount() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_cheap", 1, "10 minutes"),
            )
            .await,
            "fk_authority_matches_request",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn uq_provider_order_per_authority_refuses_a_second_order() -> TestResult {
    on_world(async |w| {
    let (_, authority, _) = paid_order(w).await?;
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_orders (tenant_id, provider_order_id, authority_id, request_id, merchant_id, \
                 amount_paise, currency, created_at) \
                 SELECT tenant_id, 'order_second', id, request_id, merchant_id, amount_paise, currency, now() \
                   FROM checkout_authorities WHERE id = '{authority}'"
            ),
        )
        .await,
        "uq_provider_order_per_authority",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_provider_order_matches_authority_refuses_an_order_for_another_amount() -> TestResult {
    on_world(async |w| {
    let request = authorized(w).await?;
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_orders (tenant_id, provider_order_id, authority_id, request_id, merchant_id, \
                 amount_paise, currency, created_at) \
                 SELECT tenant_id, 'order_big', id, request_id, merchant_id, 2000000, currency, now() \
                   FROM checkout_authorities WHERE id = '{authority}'"
            ),
        )
        .await,
        "fk_provider_order_matches_authority",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn uq_provider_event_id_refuses_an_event_processed_twice() -> TestResult {
    on_world(async |w| {
    let (_, _, order) = paid_order(w).await?;
    let (b, sig) = event(w, "evt_once", EVENT_CAPTURED, &order, 60000);
    assert!(
        w.gate
            .webhook(&b, Some(&sig), Some("evt_once"))
            .await?
            .is_ok()
    );
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, request_id, event, \
                 amount_paise, currency, event_created_at, received_at, outcome, body_sha256) \
                 SELECT tenant_id, 'evt_once', provider_order_id, request_id, 'payment.captured', amount_paise, \
                        currency, now(), now(), 'applied', repeat('c', 64) \
                   FROM provider_orders WHERE provider_order_id = '{order}'"
            ),
        )
        .await,
        "uq_provider_event_id",
    );
        Ok(())
    })
    .await
}

// ---- tenancy keys: no row reaches into another tenant -----------------------
//
// Each statement below names a principal, merchant, policy version or row that
// exists only in the other tenant, so the composite (tenant_id, ...) foreign key
// is what refuses it.

/// Proposes, checks out and pays CLOUD-STARTER x1 in `tenant`; returns
/// (request id, provider order id).
async fn paid_in(
    w: &World,
    tenant: &str,
    agent: &str,
    human: &str,
) -> Result<(String, String), Box<dyn std::error::Error + Send + Sync>> {
    let p = w
        .gate
        .propose(tenant, agent, &body("CLOUD-STARTER", 1), None)
        .await?;
    let request = request_id(&p);
    let authority = id(&w.gate.checkout(tenant, &request, human).await?);
    let order = id(&w.gate.pay(tenant, &authority, human).await?);
    Ok((request, order))
}

/// A bare PROPOSED request of acme's buyer-agent with `column = value` added.
fn bare_request(column: &str, value: &str) -> String {
    format!(
        "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, state, \
         created_at, updated_at, {column}) \
         VALUES ('acme', 'buyer-agent', repeat('a', 64), 'deny', 'PROPOSED', now(), now(), {value})"
    )
}

#[tokio::test]
async fn fk_delegation_grantor_same_tenant_refuses_another_tenants_human() -> TestResult {
    on_world(async |w| {
    // The trigger refuses this first; switch it off (as the owner: the
    // application role may not) to reach the foreign key itself.
    exec(
        w.owner(),
        "ALTER TABLE delegations DISABLE TRIGGER delegation_attenuates",
    )
    .await?;
    assert_refused_by(
        exec(
            w.onboard(),
            "INSERT INTO delegations (tenant_id, id, grantor_id, grantee_id, budget_paise, created_at) \
             VALUES ('acme', 'd-x', 'globex-finance', 'buyer-agent', 1000, now())",
        )
        .await,
        "fk_delegation_grantor_same_tenant",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_delegation_revoker_same_tenant_refuses_another_tenants_human() -> TestResult {
    on_world(async |w| {
        assert_refused_by(
            exec(
                w.pool(),
                "UPDATE delegations SET revoked_at = now(), revoked_by = 'globex-finance' \
             WHERE tenant_id = 'acme' AND id = 'd-buyer'",
            )
            .await,
            "fk_delegation_revoker_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_request_merchant_same_tenant_refuses_another_tenants_merchant() -> TestResult {
    on_world(async |w| {
        exec(
        w.onboard(),
        "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('globex', 'globex-only', 'G')",
    )
    .await?;
        assert_refused_by(
            exec(w.pool(), &bare_request("merchant_id", "'globex-only'")).await,
            "fk_request_merchant_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_request_delegation_same_tenant_refuses_another_tenants_hop() -> TestResult {
    on_world(async |w| {
        assert_refused_by(
            exec(w.pool(), &bare_request("delegation_id", "'d-globex'")).await,
            "fk_request_delegation_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_request_policy_same_tenant_refuses_another_tenants_version() -> TestResult {
    on_world(async |w| {
        exec(
            w.pool(),
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
         SELECT 'globex', 2, policy, now() FROM policy_versions \
          WHERE tenant_id = 'globex' AND version = 1",
        )
        .await?;
        assert_refused_by(
            exec(w.pool(), &bare_request("policy_version", "2")).await,
            "fk_request_policy_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_approval_request_same_tenant_refuses_another_tenants_request() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!(
                    "INSERT INTO approvals (tenant_id, request_id, approver_id, approved_at) \
                 VALUES ('globex', '{request}', 'globex-finance', now())"
                ),
            )
            .await,
            "fk_approval_request_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_authority_issuer_same_tenant_refuses_another_tenants_human() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_foreign", 60000, "10 minutes")
                    .replace("'finance-lead'", "'globex-finance'"),
            )
            .await,
            "fk_authority_issuer_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_authority_consumer_same_tenant_refuses_another_tenants_human() -> TestResult {
    on_world(async |w| {
    let request = authorized(w).await?;
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    assert_refused_by(
        exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET consumed_by = 'globex-finance' WHERE id = '{authority}'"
            ),
        )
        .await,
        "fk_authority_consumer_same_tenant",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_authority_policy_same_tenant_refuses_another_tenants_version() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        exec(
            w.pool(),
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
         SELECT 'globex', 2, policy, now() FROM policy_versions \
          WHERE tenant_id = 'globex' AND version = 1",
        )
        .await?;
        assert_refused_by(
            exec(
                w.pool(),
                &authority_insert(&request, "auth_foreign", 60000, "10 minutes")
                    .replace("policy_version, now()", "2, now()"),
            )
            .await,
            "fk_authority_policy_same_tenant",
        );
        Ok(())
    })
    .await
}

/// A captured event row for `request` and `order`, recorded under `tenant`.
fn event_row(tenant: &str, request: &str, order: &str) -> String {
    format!(
        "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, request_id, event, \
         amount_paise, currency, event_created_at, received_at, outcome, body_sha256) \
         VALUES ('{tenant}', 'evt_foreign', '{order}', '{request}', 'payment.captured', 60000, 'INR', \
                 now(), now(), 'applied', repeat('c', 64))"
    )
}

#[tokio::test]
async fn fk_provider_event_order_same_tenant_refuses_another_tenants_order() -> TestResult {
    on_world(async |w| {
        let (request, _) = paid_in(w, "acme", "buyer-agent", "finance-lead").await?;
        let (_, globex_order) = paid_in(w, "globex", "globex-agent", "globex-finance").await?;
        assert_refused_by(
            exec(w.pool(), &event_row("acme", &request, &globex_order)).await,
            "fk_provider_event_order_same_tenant",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_provider_event_request_same_tenant_refuses_another_tenants_request() -> TestResult {
    on_world(async |w| {
        let (_, order) = paid_in(w, "acme", "buyer-agent", "finance-lead").await?;
        let (globex_request, _) = paid_in(w, "globex", "globex-agent", "globex-finance").await?;
        assert_refused_by(
            exec(w.pool(), &event_row("acme", &globex_request, &order)).await,
            "fk_provider_event_request_same_tenant",
        );
        Ok(())
    })
    .await
}

// ---- policy versions and the ledger -----------------------------------------

#[tokio::test]
async fn policy_versions_append_only_refuses_editing_a_published_version() -> TestResult {
    on_world(async |w| {
    // As the owner: the application role holds no UPDATE or DELETE here, so
    // it would be refused for want of privilege before reaching the guard.
    assert_refused_by(
        exec(
            w.owner(),
            "UPDATE policy_versions SET policy = jsonb_set(policy, '{daily_cap_paise}', '99999999') WHERE tenant_id = 'acme'",
        )
        .await,
        "policy_versions_append_only",
    );
    assert_refused_by(
        exec(w.owner(), "DELETE FROM policy_versions").await,
        "policy_versions_append_only",
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ledger_append_only_refuses_update() -> TestResult {
    on_world(async |w| {
        authorized(w).await?;
        // As the owner: the application role may not UPDATE, DELETE or TRUNCATE
        // the ledger at all (gate/tests/integration/db_roles.rs), so the guard is for everyone else.
        assert_refused_by(
            exec(
                w.owner(),
                "UPDATE ledger_entries SET kind = 'nothing-happened' WHERE seq = 1",
            )
            .await,
            "ledger_append_only",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ledger_append_only_refuses_delete() -> TestResult {
    on_world(async |w| {
        authorized(w).await?;
        assert_refused_by(
            exec(w.owner(), "DELETE FROM ledger_entries WHERE seq > 1").await,
            "ledger_append_only",
        );
        Ok(())
    })
    .await
}

/// An entry belongs to a chain that has a head: one for a tenant without a
/// head is refused, and so is taking a head away from its entries.
#[tokio::test]
async fn fk_ledger_entry_head_refuses_an_entry_outside_every_chain() -> TestResult {
    on_world(async |w| {
        w.gate.integrate().await?;
        assert_refused_by(
            exec(
                w.pool(),
                "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
             VALUES ('nobody', 1, 'forged', now(), '{}', repeat('0', 64), repeat('0', 64))",
            )
            .await,
            "fk_ledger_entry_head",
        );
        // As the owner: the gate's own role is not granted DELETE on the heads.
        assert_refused_by(
            exec(
                w.owner(),
                "DELETE FROM ledger_head WHERE tenant_id = 'acme'",
            )
            .await,
            "fk_ledger_entry_head",
        );
        Ok(())
    })
    .await
}

/// Every tenant's chain starts when the tenant does: a head at 0 with the
/// genesis hash, so the gate can append to it at once.
#[tokio::test]
async fn ledger_head_for_new_tenant_starts_every_tenant_an_empty_chain() -> TestResult {
    on_world(async |w| {
        exec(w.onboard(), "INSERT INTO tenants (id) VALUES ('initech')").await?;
        let head: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM ledger_head WHERE tenant_id = 'initech'")
                .fetch_optional(w.ledger().await?)
                .await?;
        assert_eq!(head, Some((0, "0".repeat(64))));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ledger_append_only_refuses_truncate() -> TestResult {
    on_world(async |w| {
        authorized(w).await?;
        assert_refused_by(
            exec(w.owner(), "TRUNCATE ledger_entries").await,
            "ledger_append_only",
        );
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
            .fetch_one(w.ledger().await?)
            .await?;
        assert!(left > 0);
        Ok(())
    })
    .await
}

/// Every write of a tenant's catalog or policy leaves the tenant's world
/// stamp equal to the digest of its world as it now is
/// (`world_stamp_follows_catalog`, `world_stamp_follows_policy`), and the
/// application role cannot write the stamp itself.
#[tokio::test]
async fn world_stamp_follows_every_write_of_a_catalog_or_policy() -> TestResult {
    on_world(async |w| {
        let current = "SELECT count(*) FROM tenants t \
                        WHERE t.world_digest = (SELECT d.digest FROM tenant_world(t.id) d)";
        let all: i64 = sqlx::query_scalar("SELECT count(*) FROM tenants")
            .fetch_one(w.pool())
            .await?;
        for write in [
            "UPDATE catalog_items SET price_paise = price_paise + 1 WHERE tenant_id = 'acme'",
            "UPDATE catalog_items SET tenant_id = 'globex', sku = 'USB-HUB-2' \
             WHERE tenant_id = 'acme' AND sku = 'USB-HUB'",
            "DELETE FROM catalog_items WHERE tenant_id = 'globex' AND sku = 'SNACK-BOX'",
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
             SELECT tenant_id, version + 1, policy, published_at FROM policy_versions \
              WHERE tenant_id = 'globex' ORDER BY version DESC LIMIT 1",
        ] {
            let before: Vec<Option<String>> =
                sqlx::query_scalar("SELECT world_digest FROM tenants ORDER BY id")
                    .fetch_all(w.pool())
                    .await?;
            let touched = exec(w.owner(), write).await?;
            assert!(touched > 0, "{write}");
            let stamped: i64 = sqlx::query_scalar(current).fetch_one(w.pool()).await?;
            assert_eq!(stamped, all, "after {write}");
            let after: Vec<Option<String>> =
                sqlx::query_scalar("SELECT world_digest FROM tenants ORDER BY id")
                    .fetch_all(w.pool())
                    .await?;
            assert_ne!(before, after, "{write} changed a world");
        }
        let forged = exec(
            w.pool(),
            "UPDATE tenants SET world_digest = repeat('0', 64) WHERE id = 'acme'",
        )
        .await;
        let message = forged.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("permission denied"), "{message}");
        // Nor may it make the owner's function lock and rewrite every stamp.
        let restamped = exec(w.pool(), "SELECT world_restamp(NULL)").await;
        let message = restamped.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("permission denied for function world_restamp"),
            "{message}"
        );
        Ok(())
    })
    .await
}
