//! A call that the gate's own checks let through and the database refuses,
//! through the gate's call itself: the refusal is the reason the
//! constraint stands for (a grant's outcome names that constraint), and
//! nothing is written. (`service::grants_db_refusals` and
//! `service::budget_db_refusals` prove each arm of those mappings on the
//! insert or the reservation alone; here the whole call reaches them.)
//!
//! Two ways the database knows more than the gate's read: a concurrent
//! transaction that commits first (raced for real: the twin is an outside
//! transaction held open until the grant waits on it), and a row the
//! owner's own trigger rewrites before the guards see it (so a constraint
//! the statement's own conditions stand in front of is still met).

use crate::support::*;
use gate::service::Grant;
use gate::{Decision, Reason};

/// A hop of 1,000 paise below acme's d-buyer to procurement-agent.
fn below_d_buyer(id: &str) -> Grant {
    Grant {
        id: id.into(),
        from: "d-buyer".into(),
        to: "procurement-agent".into(),
        budget_paise: 1000,
        skus: None,
        expires_at: None,
    }
}

/// Grants `hop` while `twin` (an outside transaction, still open) holds
/// what the grant's insert needs; commits the twin once the grant waits on
/// it, and returns the grant's outcome.
async fn grant_racing(
    w: &World,
    twin: sqlx::Transaction<'static, sqlx::Postgres>,
    hop: &Grant,
) -> Result<gate::service::Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let gate = w.gate.clone();
    let raced = {
        let hop = hop.clone();
        tokio::spawn(async move { gate.grant_as_written("acme", &hop).await })
    };
    until_waiting(w.owner(), 1).await?;
    twin.commit().await?;
    Ok(raced.await??)
}

async fn delegations_named(w: &World, id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM delegations WHERE tenant_id = 'acme' AND id = $1")
        .bind(id)
        .fetch_one(w.owner())
        .await
}

#[tokio::test]
async fn a_parent_revoked_while_the_grant_waits_refuses_it_as_revoked() -> TestResult {
    on_world(async |w| {
        let mut twin = w.owner().begin().await?;
        sqlx::query(
            "UPDATE delegations SET revoked_at = now(), revoked_by = 'finance-lead' \
              WHERE tenant_id = 'acme' AND id = 'd-buyer'",
        )
        .execute(&mut *twin)
        .await?;
        let outcome = grant_racing(w, twin, &below_d_buyer("d-late")).await?;
        assert_eq!(outcome.decision, Decision::Deny(Reason::DelegationRevoked));
        assert_eq!(outcome.constraint.as_deref(), Some("delegation_attenuates"));
        assert_eq!(delegations_named(w, "d-late").await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_twin_that_takes_the_id_first_refuses_the_grant_as_invalid() -> TestResult {
    on_world(async |w| {
        let mut twin = w.owner().begin().await?;
        sqlx::query(
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, \
             created_at) VALUES ('acme', 'd-twin', 'd-buyer', 'renewals-agent', 500, now())",
        )
        .execute(&mut *twin)
        .await?;
        let outcome = grant_racing(w, twin, &below_d_buyer("d-twin")).await?;
        assert_eq!(outcome.decision, Decision::Deny(Reason::DelegationInvalid));
        assert_eq!(outcome.constraint.as_deref(), Some("pk_delegations"));
        let grantee: String = sqlx::query_scalar(
            "SELECT grantee_id FROM delegations WHERE tenant_id = 'acme' AND id = 'd-twin'",
        )
        .fetch_one(w.owner())
        .await?;
        assert_eq!(grantee, "renewals-agent", "the twin's row, and only it");
        Ok(())
    })
    .await
}

/// Installs, as the owner, a BEFORE INSERT trigger on delegations named
/// `name` (triggers fire in name order: `a_…` before the gate's guards,
/// `zz_…` after them) whose body is `body` (PL/pgSQL, ending in RETURN NEW).
async fn rewrite_inserted_delegations(w: &World, name: &str, body: &str) -> TestResult {
    let sql = format!(
        "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$ \
         BEGIN {body} END $$; \
         CREATE TRIGGER {name} BEFORE INSERT ON delegations \
           FOR EACH ROW EXECUTE FUNCTION {name}()"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(w.owner())
        .await?;
    Ok(())
}

async fn drop_rewrite(w: &World, name: &str) -> TestResult {
    let sql = format!("DROP TRIGGER {name} ON delegations; DROP FUNCTION {name}()");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(w.owner())
        .await?;
    Ok(())
}

#[tokio::test]
async fn each_refusal_the_database_alone_makes_is_named_with_its_reason() -> TestResult {
    on_world(async |w| {
        let root = |id: &str| Grant {
            from: "finance-lead".into(),
            ..below_d_buyer(id)
        };
        let cases = [
            (
                "the grantor loses the right to approve",
                "a_revoke_approval",
                "UPDATE people SET may_approve = false \
                  WHERE tenant_id = NEW.tenant_id AND id = NEW.grantor_id; RETURN NEW;",
                root("d-root-late"),
                Reason::DelegationGrantorNotPermitted,
                "delegation_attenuates",
            ),
            (
                "the hop is wider than its parent",
                "a_widen",
                "NEW.budget_paise := NEW.budget_paise + 1000000000; RETURN NEW;",
                below_d_buyer("d-wide"),
                Reason::DelegationWidens,
                "delegation_attenuates",
            ),
            (
                "the hop is deeper than a chain may be",
                "zz_deepen",
                "NEW.depth := 9; RETURN NEW;",
                below_d_buyer("d-deep"),
                Reason::DelegationDepthExceeded,
                "ck_delegation_depth",
            ),
            (
                "the root's grantor is no person of the tenant",
                "zz_stranger",
                "NEW.grantor_id := 'no-such-person'; RETURN NEW;",
                root("d-root-stranger"),
                Reason::DelegationGrantorNotPermitted,
                "fk_delegation_grantor_same_tenant",
            ),
        ];
        for (what, name, body, hop, reason, constraint) in cases {
            rewrite_inserted_delegations(w, name, body).await?;
            let outcome = w.gate.grant_as_written("acme", &hop).await?;
            drop_rewrite(w, name).await?;
            assert_eq!(outcome.decision, Decision::Deny(reason), "{what}");
            assert_eq!(outcome.constraint.as_deref(), Some(constraint), "{what}");
            assert_eq!(delegations_named(w, &hop.id).await?, 0, "{what}");
        }
        let may_approve: bool = sqlx::query_scalar(
            "SELECT may_approve FROM people WHERE tenant_id = 'acme' AND id = 'finance-lead'",
        )
        .fetch_one(w.owner())
        .await?;
        assert!(
            may_approve,
            "the refused grant's transaction is rolled back whole"
        );
        Ok(())
    })
    .await
}

/// The hop's partition guard refusing a reservation itself (the owner's
/// trigger adds to what the reservation takes, past what the statement's
/// own condition checked) is a budget refusal of the proposal, never an
/// error: DELEGATION_BUDGET_EXHAUSTED, and the hop keeps what it held.
#[tokio::test]
async fn a_reservation_the_partition_guard_refuses_is_a_budget_refusal() -> TestResult {
    on_world(async |w| {
        let spent = || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT spent_paise FROM delegations WHERE tenant_id = 'acme' AND id = 'd-buyer'",
            )
            .fetch_one(w.owner())
            .await
        };
        let before = spent().await?;
        let sql = "CREATE FUNCTION zz_overspend() RETURNS trigger LANGUAGE plpgsql \
                   SECURITY DEFINER AS $$ BEGIN \
                   IF NEW.spent_paise > OLD.spent_paise THEN \
                     NEW.spent_paise := NEW.budget_paise + 1; END IF; RETURN NEW; END $$; \
                   CREATE TRIGGER zz_overspend BEFORE UPDATE ON delegations \
                     FOR EACH ROW EXECUTE FUNCTION zz_overspend()";
        exec(w.owner(), sql).await?;
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(
            p.decision,
            Decision::Deny(Reason::DelegationBudgetExhausted)
        );
        assert_eq!(spent().await?, before, "the hop took nothing");
        Ok(())
    })
    .await
}
