//! `grant` and `revoke` against Postgres: a chain that narrows at every hop,
//! siblings refused by the database, and revocation ending a branch without
//! touching the rows below it.

use crate::support::*;
use chrono::{DateTime, Utc};
use gate::service::Grant;
use gate::{Decision, Reason};

fn hop(id: &str, from: &str, to: &str, budget: i64) -> Grant {
    Grant {
        id: id.into(),
        from: from.into(),
        to: to.into(),
        budget_paise: budget,
        skus: None,
        expires_at: None,
    }
}

/// finance-lead → buyer-agent (d-buyer, 200000) → procurement-agent (d-proc,
/// 100000) → renewals-agent (d-ren, 50000).
async fn chain(w: &World) -> TestResult {
    assert!(
        w.gate
            .grant_as_written(
                "acme",
                &hop("d-proc", "d-buyer", "procurement-agent", 100000)
            )
            .await?
            .is_ok()
    );
    assert!(
        w.gate
            .grant_as_written("acme", &hop("d-ren", "d-proc", "renewals-agent", 50000))
            .await?
            .is_ok()
    );
    Ok(())
}

#[derive(Debug, PartialEq, sqlx::FromRow)]
struct Row {
    id: String,
    budget_paise: i64,
    allocated_paise: i64,
    spent_paise: i64,
    revoked_at: Option<DateTime<Utc>>,
}

async fn row(w: &World, id: &str) -> Result<Row, sqlx::Error> {
    sqlx::query_as("SELECT id, budget_paise, allocated_paise, spent_paise, revoked_at FROM delegations WHERE id = $1")
        .bind(id)
        .fetch_one(w.pool())
        .await
}

#[tokio::test]
async fn the_leaf_spends_inside_every_bound() -> TestResult {
    on_world(async |w| {
        chain(w).await?;
        let p = w.propose_as("renewals-agent", "SNACK-BOX", 2).await?;
        assert_eq!(p.decision, Decision::Allow);
        let over = w.propose_as("renewals-agent", "SNACK-BOX", 1).await?;
        assert_eq!(
            over.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted),
            "the leaf's last paisa is spent"
        );
        assert_eq!(row(w, "d-buyer").await?.allocated_paise, 100000);
        assert_eq!(row(w, "d-proc").await?.allocated_paise, 50000);
        assert_eq!(row(w, "d-ren").await?.spent_paise, 50000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_sibling_that_oversubscribes_its_parent_is_refused_by_the_database() -> TestResult {
    on_world(async |w| {
        chain(w).await?;
        let g = w
            .gate
            .grant_as_written("acme", &hop("d-sib", "d-proc", "buyer-agent", 50001))
            .await?;
        assert_eq!(
            g.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted)
        );
        assert_eq!(
            g.constraint.as_deref(),
            Some("ck_delegation_budget_partitioned")
        );
        let g = w
            .gate
            .grant_as_written("acme", &hop("d-sib", "d-proc", "buyer-agent", 50000))
            .await?;
        assert!(g.is_ok(), "{g:?}");
        assert_eq!(row(w, "d-proc").await?.allocated_paise, 100000);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_grant_wider_than_its_parent_is_refused() -> TestResult {
    on_world(async |w| {
        let scoped = Grant {
            skus: Some(vec!["SNACK-BOX".into()]),
            expires_at: Some("2026-09-30T00:00:00Z".parse()?),
            ..hop("d-s", "d-buyer", "procurement-agent", 100000)
        };
        assert!(w.gate.grant_as_written("acme", &scoped).await?.is_ok());
        let widen = |f: fn(&mut Grant)| {
            let mut g = Grant {
                skus: Some(vec!["SNACK-BOX".into()]),
                expires_at: Some("2026-09-29T00:00:00Z".parse().unwrap_or_default()),
                ..hop("d-s1", "d-s", "renewals-agent", 1000)
            };
            f(&mut g);
            g
        };
        for (what, g) in [
            ("budget", widen(|g| g.budget_paise = 100001)),
            ("no sku scope", widen(|g| g.skus = None)),
            (
                "another sku",
                widen(|g| g.skus = Some(vec!["SNACK-BOX".into(), "GPU-HOUR".into()])),
            ),
            ("no expiry", widen(|g| g.expires_at = None)),
            (
                "later expiry",
                widen(|g| g.expires_at = Some("2026-10-01T00:00:00Z".parse().unwrap_or_default())),
            ),
            ("nothing", widen(|g| g.budget_paise = 0)),
        ] {
            let out = w.gate.grant_as_written("acme", &g).await?;
            assert_eq!(
                out.decision,
                Decision::Deny(Reason::DelegationWidens),
                "{what}"
            );
        }
        assert!(
            w.gate
                .grant_as_written("acme", &widen(|_| {}))
                .await?
                .is_ok()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn only_a_human_who_may_approve_or_a_live_hop_of_the_tenant_grants() -> TestResult {
    on_world(async |w| {
        for from in ["intern", "buyer-agent", "nobody", "globex-finance"] {
            let out = w
                .gate
                .grant_as_written("acme", &hop("d-x", from, "procurement-agent", 1000))
                .await?;
            assert_eq!(
                out.decision,
                Decision::Deny(Reason::DelegationGrantorNotPermitted),
                "{from}"
            );
        }
        // Another tenant's delegation is no delegation of this one.
        let foreign = w
            .gate
            .grant_as_written("acme", &hop("d-x", "d-globex", "procurement-agent", 1000))
            .await?;
        assert_eq!(foreign.decision, Decision::Deny(Reason::DelegationMissing));
        let to_human = w
            .gate
            .grant_as_written("acme", &hop("d-x", "finance-lead", "intern", 1000))
            .await?;
        assert_eq!(to_human.decision, Decision::Deny(Reason::ActorNotPermitted));
        let elsewhere = w
            .gate
            .grant_as_written("acme", &hop("d-x", "finance-lead", "globex-agent", 1000))
            .await?;
        assert_eq!(elsewhere.decision, Decision::Deny(Reason::TenantMismatch));
        let nowhere = w
            .gate
            .grant_as_written("nope", &hop("d-x", "finance-lead", "buyer-agent", 1000))
            .await?;
        assert_eq!(nowhere.decision, Decision::Deny(Reason::TenantUnknown));
        let rows: i64 =
            sqlx::query_scalar("SELECT count(*) FROM delegations WHERE tenant_id = 'acme'")
                .fetch_one(w.pool())
                .await?;
        assert_eq!(rows, 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn revoking_a_middle_hop_refuses_the_leaf_and_leaves_its_row_untouched() -> TestResult {
    on_world(async |w| {
        chain(w).await?;
        assert_eq!(
            w.propose_as("renewals-agent", "SNACK-BOX", 1)
                .await?
                .decision,
            Decision::Allow
        );
        let leaf_before = row(w, "d-ren").await?;
        assert!(
            w.gate
                .revoke("acme", "d-proc", "finance-lead")
                .await?
                .is_ok()
        );
        let next = w.propose_as("renewals-agent", "SNACK-BOX", 1).await?;
        assert_eq!(next.decision, Decision::Deny(Reason::DelegationRevoked));
        assert_eq!(
            row(w, "d-ren").await?,
            leaf_before,
            "the leaf's own row is untouched"
        );
        assert!(row(w, "d-proc").await?.revoked_at.is_some());
        // A hop cannot be carved from a revoked one.
        let g = w
            .gate
            .grant_as_written("acme", &hop("d-late", "d-proc", "buyer-agent", 1000))
            .await?;
        assert_eq!(
            g.decision,
            Decision::Deny(Reason::DelegationGrantorNotPermitted)
        );
        // The root still spends.
        assert_eq!(w.propose("SNACK-BOX", 1).await?.decision, Decision::Allow);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn only_a_human_who_may_approve_or_operate_revokes() -> TestResult {
    on_world(async |w| {
        for (actor, reason) in [
            ("intern", Reason::ActorNotPermitted),
            ("buyer-agent", Reason::ActorNotPermitted),
            ("globex-finance", Reason::TenantMismatch),
        ] {
            assert_eq!(
                w.gate.revoke("acme", "d-buyer", actor).await?.decision,
                Decision::Deny(reason),
                "{actor}"
            );
        }
        let missing = w.gate.revoke("acme", "d-globex", "finance-lead").await?;
        assert_eq!(
            missing.decision,
            Decision::Deny(Reason::DelegationMissing),
            "another tenant's hop is not ours"
        );
        assert!(row(w, "d-buyer").await?.revoked_at.is_none());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn expiry_and_sku_scope_bind_at_every_hop() -> TestResult {
    on_world(async |w| {
        let scoped = Grant {
            skus: Some(vec!["SNACK-BOX".into()]),
            expires_at: Some("2026-09-03T11:00:00Z".parse()?),
            ..hop("d-proc", "d-buyer", "procurement-agent", 100000)
        };
        assert!(w.gate.grant_as_written("acme", &scoped).await?.is_ok());
        let p = w
            .propose_as("procurement-agent", "CLOUD-STARTER", 1)
            .await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DelegationSkuOutOfScope));
        w.clock.advance_minutes(60);
        let p = w.propose_as("procurement-agent", "SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "expiry is inclusive");
        w.clock.advance_minutes(1);
        let p = w.propose_as("procurement-agent", "SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DelegationExpired));
        let p = w.propose_as("renewals-agent", "SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::DelegationMissing));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn budgets_come_back_together_on_cancel() -> TestResult {
    on_world(async |w| {
        chain(w).await?;
        let p = w.propose_as("renewals-agent", "SNACK-BOX", 2).await?;
        let request = request_id(&p);
        assert_eq!(
            w.gate.cancel("acme", &request, "intern").await?.decision,
            Decision::Deny(Reason::ActorNotPermitted),
            "a human who may not approve may not cancel"
        );
        assert_eq!(
            w.gate
                .cancel("acme", &request, "finance-lead")
                .await?
                .decision,
            Decision::Allow,
            "a human who may approve cancels"
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CANCELLED")
        );
        assert_eq!(w.gate.spent_today_paise("acme").await?, 0);
        assert_eq!(row(w, "d-ren").await?.spent_paise, 0);
        let again = w.gate.cancel("acme", &request, "finance-lead").await?;
        assert_eq!(
            again.decision,
            Decision::Deny(Reason::StateTransitionInvalid)
        );
        let other = request_id(&w.propose_as("renewals-agent", "SNACK-BOX", 1).await?);
        assert_eq!(
            w.gate.cancel("acme", &other, "buyer-agent").await?.decision,
            Decision::Deny(Reason::ActorNotPermitted)
        );
        assert!(
            w.gate
                .cancel("acme", &other, "renewals-agent")
                .await?
                .is_ok(),
            "the requester may withdraw"
        );
        Ok(())
    })
    .await
}
