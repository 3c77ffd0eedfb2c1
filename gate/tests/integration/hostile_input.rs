//! Every input gets a clean, recorded answer: a NUL, an overlong value or an
//! invisible-only string in any field the gate accepts is answered with the
//! spec's code (never a database error), and the refusal is on the tenant's
//! ledger; a call naming an unknown tenant writes nothing at all.

use crate::support::*;
use gate::PolicyPatch;
use gate::service::Grant;
use gate::{Decision, Reason};

/// The strings no identifier may be: a NUL, overlong, invisible-only, blank.
fn hostile() -> Vec<String> {
    vec![
        "buyer\0agent".to_owned(),
        "\0".to_owned(),
        "x".repeat(6000),
        "\u{200B}\u{2060}".to_owned(),
        "\u{2028}".to_owned(),
        " ".to_owned(),
        String::new(),
    ]
}

async fn ledger_rows(w: &World) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.ledger().await?)
        .await?)
}

/// Raises the rate limits out of the way, so every refusal is the field's own.
async fn unlimited(w: &World) -> TestResult {
    let patch = PolicyPatch {
        velocity: Some(gate::policy::Velocity {
            max_proposals: 10_000,
            window_minutes: 60,
        }),
        denial_rate: Some(gate::policy::DenialRate {
            max_denials: 10_000,
            window_minutes: 60,
        }),
        ..Default::default()
    };
    assert!(w.gate.set_policy("acme", &patch).await?.is_ok());
    Ok(())
}

async fn authorized(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("CLOUD-STARTER", 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    Ok(request_id(&p))
}

/// Runs `call`, expects `reason`, and checks that exactly one ledger row was
/// written (the refusal) — or none when the tenant is unknown.
macro_rules! refused_and_recorded {
    ($w:expr, $what:expr, $reason:expr, $call:expr) => {{
        let before = ledger_rows($w).await?;
        let decision = $call;
        assert_eq!(decision, Decision::Deny($reason), "{}", $what);
        let written = ledger_rows($w).await? - before;
        let expected = if $reason == Reason::TenantUnknown {
            0
        } else {
            1
        };
        assert_eq!(written, expected, "ledger rows written for {}", $what);
    }};
}

#[tokio::test]
async fn hostile_identifiers_in_a_proposal_get_the_spec_code_and_a_ledger_entry() -> TestResult {
    on_world(async |w| {
        unlimited(w).await?;
        for bad in hostile() {
            let what = format!("{:?}", &bad[..bad.len().min(12)]);
            refused_and_recorded!(
                &w,
                format!("tenant {what}"),
                Reason::TenantUnknown,
                w.gate
                    .propose(&bad, "buyer-agent", &body("CLOUD-STARTER", 1), None)
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("actor {what}"),
                Reason::ActorUnknown,
                w.gate
                    .propose("acme", &bad, &body("CLOUD-STARTER", 1), None)
                    .await?
                    .decision
            );
            // A sku outside the grammar is unknown; the refusal is a request row.
            let sku_body = serde_json::json!({"sku": bad, "quantity": 1, "purpose": "credits"});
            let before = ledger_rows(w).await?;
            let p = w
                .gate
                .propose("acme", "buyer-agent", sku_body.to_string().as_bytes(), None)
                .await?;
            let expected = if bad.len() > 4096 {
                Reason::ProposalTooLarge
            } else {
                Reason::SkuUnknown
            };
            assert_eq!(p.decision, Decision::Deny(expected), "sku {what}");
            assert!(p.request_id.is_some(), "the refused proposal is recorded");
            assert_eq!(ledger_rows(w).await? - before, 2, "proposal and decision");
            let key_result = w
                .gate
                .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), Some(&bad))
                .await?;
            assert_eq!(
                key_result.decision,
                Decision::Deny(Reason::ProposalMalformed),
                "idempotency key {what}"
            );
            assert!(key_result.request_id.is_some(), "recorded without its key");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn hostile_identifiers_in_human_operations_get_the_spec_code() -> TestResult {
    on_world(async |w| {
        unlimited(w).await?;
        let request = authorized(w).await?;
        let for_authority = authorized(w).await?;
        let authority = id(&w
            .gate
            .checkout("acme", &for_authority, "finance-lead")
            .await?);
        for bad in hostile() {
            let what = format!("{:?}", &bad[..bad.len().min(12)]);
            refused_and_recorded!(
                &w,
                format!("approver {what}"),
                Reason::ActorUnknown,
                w.gate.approve("acme", &request, &bad).await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("approve's request {what}"),
                Reason::ApprovalNotPending,
                w.gate.approve("acme", &bad, "finance-lead").await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("checkout actor {what}"),
                Reason::ActorUnknown,
                w.gate.checkout("acme", &request, &bad).await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("checkout's request {what}"),
                Reason::RequestNotAuthorized,
                w.gate
                    .checkout("acme", &bad, "finance-lead")
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("checkout tenant {what}"),
                Reason::TenantUnknown,
                w.gate
                    .checkout(&bad, &request, "finance-lead")
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("pay actor {what}"),
                Reason::ActorUnknown,
                w.gate.pay("acme", &authority, &bad).await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("pay authority {what}"),
                Reason::RequestNotAuthorized,
                w.gate.pay("acme", &bad, "finance-lead").await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("cancel's request {what}"),
                Reason::StateTransitionInvalid,
                w.gate.cancel("acme", &bad, "finance-lead").await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("revoke id {what}"),
                Reason::DelegationMissing,
                w.gate.revoke("acme", &bad, "finance-lead").await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("revoke actor {what}"),
                Reason::ActorUnknown,
                w.gate.revoke("acme", "d-buyer", &bad).await?.decision
            );
            refused_and_recorded!(
                &w,
                format!("set_price sku {what}"),
                Reason::SkuUnknown,
                w.gate.set_price("acme", &bad, 100).await?.decision
            );
            let patch = PolicyPatch {
                allowed_merchants: Some(vec!["cloudco".into(), bad.clone()]),
                ..Default::default()
            };
            refused_and_recorded!(
                &w,
                format!("set_policy merchant {what}"),
                Reason::PolicyInvalid,
                w.gate.set_policy("acme", &patch).await?.decision
            );
            let grant = |id: &str, from: &str, to: &str, skus: Option<Vec<String>>| Grant {
                id: id.into(),
                from: from.into(),
                to: to.into(),
                budget_paise: 1000,
                skus,
                expires_at: None,
            };
            refused_and_recorded!(
                &w,
                format!("grant id {what}"),
                Reason::DelegationInvalid,
                w.gate
                    .grant_as_written(
                        "acme",
                        &grant(&bad, "finance-lead", "procurement-agent", None)
                    )
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("grant sku scope {what}"),
                Reason::DelegationInvalid,
                w.gate
                    .grant_as_written(
                        "acme",
                        &grant(
                            "d-new",
                            "d-buyer",
                            "procurement-agent",
                            Some(vec![bad.clone()])
                        )
                    )
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("grant from {what}"),
                Reason::DelegationGrantorNotPermitted,
                w.gate
                    .grant_as_written("acme", &grant("d-new", &bad, "procurement-agent", None))
                    .await?
                    .decision
            );
            refused_and_recorded!(
                &w,
                format!("grant to {what}"),
                Reason::ActorUnknown,
                w.gate
                    .grant_as_written("acme", &grant("d-new", "finance-lead", &bad, None))
                    .await?
                    .decision
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn twenty_malformed_proposals_count_towards_velocity() -> TestResult {
    on_world(async |w| {
        let patch = PolicyPatch {
            denial_rate: Some(gate::policy::DenialRate {
                max_denials: 100,
                window_minutes: 60,
            }),
            ..Default::default()
        };
        assert!(w.gate.set_policy("acme", &patch).await?.is_ok());
        for i in 0..20 {
            let hostile = match i % 4 {
                0 => br#"{"sku":"CLOUD\u0000STARTER","quantity":1,"purpose":"x"}"#.to_vec(),
                1 => br#"{"sku":"CLOUD-STARTER","quantity":1e400,"purpose":"x"}"#.to_vec(),
                2 => br#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"\ud800"}"#.to_vec(),
                _ => b"\xff\xfe not json".to_vec(),
            };
            let p = w
                .gate
                .propose("acme", "buyer-agent", &hostile, Some(&format!("k\0{i}")))
                .await?;
            assert!(matches!(p.decision, Decision::Deny(_)), "{p:?}");
            assert!(p.request_id.is_some(), "malformed proposal {i} is recorded");
        }
        let next = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(next.decision, Decision::Deny(Reason::VelocityLimit));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn numbers_and_surrogates_get_their_own_codes() -> TestResult {
    on_world(async |w| {
        let digits = "9".repeat(400);
        for (raw, reason) in [
            (
                format!(r#"{{"sku":"CLOUD-STARTER","quantity":{digits},"purpose":"x"}}"#),
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"CLOUD-STARTER","quantity":1e400,"purpose":"x"}"#.to_owned(),
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"CLOUD-STARTER","quantity":-1,"purpose":"x"}"#.to_owned(),
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"ok \udfff"}"#.to_owned(),
                Reason::PurposeInvalid,
            ),
            (
                r#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"\u200b\u2060"}"#.to_owned(),
                Reason::PurposeInvalid,
            ),
        ] {
            let p = w
                .gate
                .propose("acme", "buyer-agent", raw.as_bytes(), None)
                .await?;
            assert_eq!(
                p.decision,
                Decision::Deny(reason),
                "{}",
                &raw[..60.min(raw.len())]
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_policy_patch_naming_a_date_that_does_not_exist_is_refused_policy_invalid() -> TestResult
{
    on_world(async |w| {
        let version = || {
            sqlx::query_scalar::<_, i32>(
                "SELECT max(version) FROM policy_versions WHERE tenant_id = 'acme'",
            )
        };
        let before = version().fetch_one(w.pool()).await?;
        for text in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "",
            "2026-06-01T00:00:00Z\0",
        ] {
            // As the API and a corpus decode it: any string is a patch, never a decoding error.
            let json = serde_json::json!({ "valid_until": text }).to_string();
            let patch: PolicyPatch = serde_json::from_str(&json)?;
            assert!(!patch.readable(), "{text:?}");
            let o = w.gate.set_policy("acme", &patch).await?;
            assert_eq!(
                o.decision,
                Decision::Deny(Reason::PolicyInvalid),
                "{text:?}"
            );
            // The same date beside a readable one: still refused.
            let both: PolicyPatch = serde_json::from_str(
                &serde_json::json!({ "valid_from": "2026-01-01T00:00:00Z", "valid_until": text })
                    .to_string(),
            )?;
            let o = w.gate.set_policy("acme", &both).await?;
            assert_eq!(
                o.decision,
                Decision::Deny(Reason::PolicyInvalid),
                "{text:?}"
            );
        }
        assert_eq!(
            version().fetch_one(w.pool()).await?,
            before,
            "nothing published"
        );
        // A readable one publishes, and keeps its spelling in the ledger's patch.
        let good: PolicyPatch = serde_json::from_str(r#"{"valid_until":"2026-12-30T00:00:00Z"}"#)?;
        assert!(good.readable());
        assert!(w.gate.set_policy("acme", &good).await?.is_ok());
        assert_eq!(version().fetch_one(w.pool()).await?, before + 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn operators_changes_are_validated_before_they_are_stored() -> TestResult {
    on_world(async |w| {
        for price in [0, -1, i64::MIN] {
            let o = w.gate.set_price("acme", "CLOUD-STARTER", price).await?;
            assert_eq!(o.decision, Decision::Deny(Reason::PriceInvalid), "{price}");
        }
        let versions = || {
            sqlx::query_scalar::<_, i32>(
                "SELECT max(version) FROM policy_versions WHERE tenant_id = 'acme'",
            )
        };
        let version = versions().fetch_one(w.pool()).await?;
        let bad_patches = [
            PolicyPatch {
                currency: Some("rupees".into()),
                ..Default::default()
            },
            PolicyPatch {
                daily_cap_paise: Some(-1),
                ..Default::default()
            },
            PolicyPatch {
                valid_from: Some("2026-12-31T00:00:00Z".parse()?),
                valid_until: Some("2026-01-01T00:00:00Z".parse()?),
                ..Default::default()
            },
            PolicyPatch {
                valid_from: Some("2026-06-01T00:00:00Z".parse()?),
                valid_until: Some("2026-06-01T00:00:00Z".parse()?),
                ..Default::default()
            },
            PolicyPatch {
                velocity: Some(gate::policy::Velocity {
                    max_proposals: 20,
                    window_minutes: u32::MAX,
                }),
                ..Default::default()
            },
        ];
        for patch in &bad_patches {
            let o = w.gate.set_policy("acme", patch).await?;
            assert_eq!(
                o.decision,
                Decision::Deny(Reason::PolicyInvalid),
                "{patch:?}"
            );
        }
        assert_eq!(
            versions().fetch_one(w.pool()).await?,
            version,
            "nothing published"
        );
        // The next proposal is decided as before, not POLICY_INVALID.
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow);
        // A grant id is never reused, not even after a revocation.
        let grant = |id: &str, from: &str| Grant {
            id: id.into(),
            from: from.into(),
            to: "procurement-agent".into(),
            budget_paise: 1000,
            skus: None,
            expires_at: None,
        };
        assert!(
            w.gate
                .grant_as_written("acme", &grant("d-p", "d-buyer"))
                .await?
                .is_ok()
        );
        let again = w
            .gate
            .grant_as_written("acme", &grant("d-p", "d-buyer"))
            .await?;
        assert_eq!(again.decision, Decision::Deny(Reason::DelegationInvalid));
        assert!(w.gate.revoke("acme", "d-p", "finance-lead").await?.is_ok());
        let reused = w
            .gate
            .grant_as_written("acme", &grant("d-p", "finance-lead"))
            .await?;
        assert_eq!(reused.decision, Decision::Deny(Reason::DelegationInvalid));
        // Eight hops are fine; a ninth is refused at grant time.
        let mut parent = "d-buyer".to_owned();
        for hop in 2..=8 {
            let id = format!("d-hop{hop}");
            let o = w
                .gate
                .grant_as_written("acme", &grant(&id, &parent))
                .await?;
            assert!(o.is_ok(), "hop {hop}: {o:?}");
            parent = id;
        }
        let ninth = w
            .gate
            .grant_as_written("acme", &grant("d-hop9", &parent))
            .await?;
        assert_eq!(
            ninth.decision,
            Decision::Deny(Reason::DelegationDepthExceeded)
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_call_naming_an_unknown_tenant_writes_nothing() -> TestResult {
    on_world(async |w| {
        let before = ledger_rows(w).await?;
        for _ in 0..200 {
            let p = w
                .gate
                .propose("nobody", "buyer-agent", &body("CLOUD-STARTER", 1), None)
                .await?;
            assert_eq!(p.decision, Decision::Deny(Reason::TenantUnknown));
        }
        for o in [
            w.gate.set_price("nobody", "CLOUD-STARTER", 1).await?,
            w.gate.approve("nobody", "req_x", "finance-lead").await?,
            w.gate.checkout("nobody", "req_x", "finance-lead").await?,
            w.gate.pay("nobody", "auth_x", "finance-lead").await?,
            w.gate.cancel("nobody", "req_x", "finance-lead").await?,
            w.gate.expire("nobody", "req_x").await?,
            w.gate.revoke("nobody", "d-buyer", "finance-lead").await?,
            w.gate.set_policy("nobody", &PolicyPatch::default()).await?,
            w.gate
                .grant_as_written(
                    "nobody",
                    &Grant {
                        id: "d-x".into(),
                        from: "finance-lead".into(),
                        to: "buyer-agent".into(),
                        budget_paise: 1,
                        skus: None,
                        expires_at: None,
                    },
                )
                .await?,
        ] {
            assert_eq!(o.decision, Decision::Deny(Reason::TenantUnknown), "{o:?}");
        }
        assert_eq!(ledger_rows(w).await?, before, "not one row written");
        Ok(())
    })
    .await
}

/// A delegation that expires at the last instant an operator may send (the
/// end of year 9999) is read and judged like any other: its instant comes
/// back from the decision's state read as a number, not as timestamp text,
/// so the proposal is decided, never an engine error.
#[tokio::test]
async fn a_delegation_expiring_at_the_end_of_year_9999_still_decides() -> TestResult {
    on_world(async |w| {
        let far = chrono::DateTime::<chrono::Utc>::from_timestamp(253_402_300_799, 999_999_000)
            .expect("9999-12-31T23:59:59.999999Z");
        let grant = gate::service::Grant {
            id: "d-far".into(),
            from: "finance-lead".into(),
            to: "procurement-agent".into(),
            budget_paise: 1_000_000,
            skus: None,
            expires_at: Some(far),
        };
        assert!(w.gate.grant_as_written("acme", &grant).await?.is_ok());
        let p = w
            .gate
            .propose("acme", "procurement-agent", &body("CLOUD-STARTER", 1), None)
            .await?;
        assert_eq!(p.decision, Decision::Allow);
        Ok(())
    })
    .await
}

/// One instant past the last an operator may send (year 10000, which
/// Postgres would store) is refused as an invalid delegation before the
/// database sees it, as is an expiry before 1970, whatever the rest of the
/// grant says.
#[tokio::test]
async fn a_delegation_expiring_outside_the_operator_years_is_refused_before_the_database()
-> TestResult {
    on_world(async |w| {
        for (id, at) in [("d-past-9999", 253_402_300_800), ("d-before-1970", -1)] {
            let at = chrono::DateTime::<chrono::Utc>::from_timestamp(at, 0).ok_or("an instant")?;
            let grant = gate::service::Grant {
                id: id.into(),
                from: "d-buyer".into(),
                to: "procurement-agent".into(),
                budget_paise: 1000,
                skus: Some(vec!["SNACK-BOX".into()]),
                expires_at: Some(at),
            };
            let outcome = w.gate.grant_as_written("acme", &grant).await?;
            assert_eq!(
                outcome.decision,
                Decision::Deny(Reason::DelegationInvalid),
                "{id}"
            );
            assert_eq!(
                outcome.constraint, None,
                "{id}: refused before the database"
            );
        }
        let written: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM delegations WHERE id IN ('d-past-9999', 'd-before-1970')",
        )
        .fetch_one(w.owner())
        .await?;
        assert_eq!(written, 0);
        Ok(())
    })
    .await
}
