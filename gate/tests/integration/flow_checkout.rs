//! `checkout` and `pay` against Postgres: single use, 15 minutes, bound to
//! the purchase's hash and the policy version, the chain re-checked when the
//! authority is issued and when it is consumed, exactly one provider order.

use crate::support::*;
use gate::catalog::{Catalog, derive};
use gate::{Decision, PolicyPatch, PurchaseProposal, Reason};

async fn authorized(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-STARTER", 1).await?;
    assert_eq!(p.decision, Decision::Allow);
    Ok(request_id(&p))
}

async fn released(w: &World) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    Ok(w.gate.spent_today_paise("acme").await? == 0
        && w.gate.delegation_spent_paise("acme", "d-buyer").await? == Some(0))
}

#[tokio::test]
async fn only_a_human_of_the_tenant_who_may_approve_issues_a_checkout() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        for (actor, reason) in [
            ("buyer-agent", Reason::ActorNotPermitted),
            ("intern", Reason::ActorNotPermitted),
            ("globex-finance", Reason::TenantMismatch),
            ("nobody", Reason::ActorUnknown),
        ] {
            assert_eq!(
                w.gate.checkout("acme", &request, actor).await?.decision,
                Decision::Deny(reason),
                "{actor}"
            );
        }
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert!(c.is_ok(), "a human who may approve issues it: {c:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn checkout_needs_an_authorized_request_and_happens_once() -> TestResult {
    on_world(async |w| {
        let pending = request_id(&w.propose("CLOUD-TEAM", 1).await?);
        let denied = request_id(&w.propose("USB-HUB", 1).await?);
        for request in [pending.as_str(), denied.as_str(), "req_999999"] {
            let c = w.gate.checkout("acme", request, "finance-lead").await?;
            assert_eq!(
                c.decision,
                Decision::Deny(Reason::RequestNotAuthorized),
                "{request}"
            );
        }
        let request = authorized(w).await?;
        assert!(
            w.gate
                .checkout("acme", &request, "finance-lead")
                .await?
                .is_ok()
        );
        let again = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(again.decision, Decision::Deny(Reason::RequestNotAuthorized));
        let authorities: i64 = sqlx::query_scalar("SELECT count(*) FROM checkout_authorities")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(authorities, 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_authority_binds_the_sha256_of_the_canonical_purchase_for_fifteen_minutes() -> TestResult
{
    on_world(async |w| {
        let request = authorized(w).await?;
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        assert!(
            authority.starts_with("auth_") && authority.len() == 37,
            "{authority}"
        );
        let (digest, issued, expires): (
            String,
            chrono::DateTime<chrono::Utc>,
            chrono::DateTime<chrono::Utc>,
        ) = sqlx::query_as(
            "SELECT purchase_digest, issued_at, expires_at FROM checkout_authorities WHERE id = $1",
        )
        .bind(&authority)
        .fetch_one(w.pool())
        .await?;
        let expected = derive(
            &PurchaseProposal {
                sku: "CLOUD-STARTER".into(),
                quantity: 1,
                purpose: "team credits".into(),
            },
            &Catalog::new(gate::service::standard::catalog()),
        )
        .map_err(|r| r.to_string())?;
        assert_eq!(digest, expected.digest());
        assert_eq!(expires - issued, chrono::Duration::minutes(15));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_price_change_refuses_the_checkout_and_releases_the_budgets() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        w.gate.set_price("acme", "CLOUD-STARTER", 59999).await?;
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(c.decision, Decision::Deny(Reason::AuthorityPurchaseChanged));
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CANCELLED")
        );
        assert!(released(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_new_policy_version_refuses_the_checkout() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    daily_cap_paise: Some(600000),
                    ..Default::default()
                },
            )
            .await?;
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(c.decision, Decision::Deny(Reason::AuthorityPolicyChanged));
        assert!(released(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_revoked_chain_refuses_the_checkout() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        w.gate.revoke("acme", "d-buyer", "finance-lead").await?;
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(c.decision, Decision::Deny(Reason::DelegationRevoked));
        assert!(released(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pay_consumes_the_authority_once_and_makes_one_provider_order() -> TestResult {
    on_world(async |w| {
        let (request, authority, order) = paid_order(w).await?;
        let again = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(again.decision, Decision::Deny(Reason::AuthorityAlreadyUsed));
        assert_eq!(w.gate.provider().orders().len(), 1);
        assert_eq!(w.gate.provider_order_count("acme").await?, 1);
        assert_eq!(w.gate.provider().orders()[0].id, order);
        assert_eq!(w.gate.provider().orders()[0].amount_paise, 60000);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        let unknown = w
            .gate
            .pay(
                "acme",
                "auth_00000000000000000000000000000000",
                "finance-lead",
            )
            .await?;
        assert_eq!(
            unknown.decision,
            Decision::Deny(Reason::RequestNotAuthorized)
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn only_the_requesting_agent_or_an_approving_human_pays() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        for actor in ["procurement-agent", "intern"] {
            let p = w.gate.pay("acme", &authority, actor).await?;
            assert_eq!(
                p.decision,
                Decision::Deny(Reason::ActorNotPermitted),
                "{actor}"
            );
        }
        assert!(w.gate.provider().orders().is_empty());
        let p = w.gate.pay("acme", &authority, "buyer-agent").await?;
        assert!(
            p.is_ok(),
            "the agent that asked consumes its authority: {p:?}"
        );
        assert_eq!(w.gate.provider().orders().len(), 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_authority_whose_request_was_cancelled_pays_nothing() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        assert!(
            w.gate
                .cancel("acme", &request, "finance-lead")
                .await?
                .is_ok()
        );
        assert!(released(w).await?);
        let p = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(p.decision, Decision::Deny(Reason::RequestNotAuthorized));
        assert!(w.gate.provider().orders().is_empty());
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CANCELLED")
        );
        assert!(released(w).await?, "the cancelled request holds nothing");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_price_or_policy_change_names_a_real_sku_and_tenant() -> TestResult {
    on_world(async |w| {
    let entries = || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM ledger_entries WHERE kind IN ('catalog.price_refused', 'policy.refused')",
        )
    };
    let prices =
        || sqlx::query_scalar::<_, i64>("SELECT sum(price_paise)::bigint FROM catalog_items");
    let prices_before = prices().fetch_one(w.pool()).await?;
    let before = entries().fetch_one(w.ledger().await?).await?;
    for (tenant, sku, reason) in [
        ("acme", "NOPE", Reason::SkuUnknown),
        ("acme", "cloud-starter", Reason::SkuUnknown),
        ("acme", "CLOUD\0STARTER", Reason::SkuUnknown),
        ("nobody", "CLOUD-STARTER", Reason::TenantUnknown),
    ] {
        let o = w.gate.set_price(tenant, sku, 1).await?;
        assert_eq!(o.decision, Decision::Deny(reason), "{tenant}/{sku}");
    }
    let patch = PolicyPatch {
        daily_cap_paise: Some(1),
        ..Default::default()
    };
    let o = w.gate.set_policy("nobody", &patch).await?;
    assert_eq!(o.decision, Decision::Deny(Reason::TenantUnknown));
    assert_eq!(
        entries().fetch_one(w.ledger().await?).await?,
        before + 3,
        "each refusal of a known tenant is on its ledger; an unknown tenant's writes nothing"
    );
    assert_eq!(
        prices().fetch_one(w.pool()).await?,
        prices_before,
        "no price moved"
    );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_authority_lives_fifteen_minutes_and_an_expired_one_releases_the_budgets() -> TestResult
{
    on_world(async |w| {
        let on_time = authorized(w).await?;
        let late = authorized(w).await?;
        let a1 = id(&w.gate.checkout("acme", &on_time, "finance-lead").await?);
        let a2 = id(&w.gate.checkout("acme", &late, "finance-lead").await?);
        w.clock.advance_minutes(15);
        assert!(
            w.gate.pay("acme", &a1, "finance-lead").await?.is_ok(),
            "exactly 15 minutes is inside"
        );
        w.clock.advance(chrono::Duration::seconds(1));
        let p = w.gate.pay("acme", &a2, "finance-lead").await?;
        assert_eq!(p.decision, Decision::Deny(Reason::AuthorityExpired));
        assert_eq!(
            w.gate.request_state("acme", &late).await?.as_deref(),
            Some("EXPIRED")
        );
        assert_eq!(
            w.gate.spent_today_paise("acme").await?,
            60000,
            "only the paid one stays reserved"
        );
        assert_eq!(w.gate.provider().orders().len(), 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_lapsed_authority_is_swept_and_its_budgets_come_back() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(w.gate.expire_lapsed("acme").await?, 0);
        w.clock.advance_minutes(16);
        assert_eq!(w.gate.expire_lapsed("acme").await?, 1);
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("EXPIRED")
        );
        assert!(released(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pay_re_checks_the_policy_the_price_and_the_chain() -> TestResult {
    on_world(async |w| {
        let issue = |w: &World| {
            let gate = w.gate.clone();
            async move {
                let p = gate
                    .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), None)
                    .await?;
                let request = request_id(&p);
                let c = gate.checkout("acme", &request, "finance-lead").await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((request, id(&c)))
            }
        };
        let (r1, a1) = issue(w).await?;
        let (r2, a2) = issue(w).await?;
        let (r3, a3) = issue(w).await?;
        w.gate.set_price("acme", "SNACK-BOX", 26000).await?;
        assert_eq!(
            w.gate.pay("acme", &a1, "finance-lead").await?.decision,
            Decision::Deny(Reason::AuthorityPurchaseChanged)
        );
        w.gate.set_price("acme", "SNACK-BOX", 25000).await?;
        w.gate
            .set_policy(
                "acme",
                &PolicyPatch {
                    daily_cap_paise: Some(400000),
                    ..Default::default()
                },
            )
            .await?;
        assert_eq!(
            w.gate.pay("acme", &a2, "finance-lead").await?.decision,
            Decision::Deny(Reason::AuthorityPolicyChanged)
        );
        w.gate.revoke("acme", "d-buyer", "finance-lead").await?;
        let p3 = w.gate.pay("acme", &a3, "finance-lead").await?;
        assert_eq!(
            p3.decision,
            Decision::Deny(Reason::AuthorityPolicyChanged),
            "policy is checked before the chain"
        );
        for r in [&r1, &r2, &r3] {
            assert_eq!(
                w.gate.request_state("acme", r).await?.as_deref(),
                Some("CANCELLED")
            );
        }
        assert!(w.gate.provider().orders().is_empty());
        assert!(released(w).await?);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pay_re_checks_the_whole_chain_when_the_authority_is_consumed() -> TestResult {
    on_world(async |w| {
        let request = authorized(w).await?;
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        w.gate.revoke("acme", "d-buyer", "finance-lead").await?;
        let p = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DelegationRevoked));
        assert!(w.gate.provider().orders().is_empty());
        assert!(released(w).await?);
        Ok(())
    })
    .await
}
