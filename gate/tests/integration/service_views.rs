//! The read views the service serves (`gate::service::views`, through the
//! gate's methods), with exact answers: which objects exist in which
//! tenant, a request's redacted decision of each kind, who may administer,
//! the agent's catalog, an approval note's four outcomes, a provider order,
//! and a ping that fails once the gate's pool is closed.

use std::sync::Arc;

use gate::Decision;
use gate::provider::InProcessProvider;
use gate::service::views::{Noted, Object};
use gate::service::{Gate, ManualClock, standard};

use crate::support::*;

#[tokio::test]
async fn an_object_exists_only_in_its_own_tenant_under_a_plausible_id() -> TestResult {
    on_world(async |w| {
        let (request, authority, _) = paid_order(w).await?;
        for (what, id) in [
            (Object::Request, request.as_str()),
            (Object::Authority, authority.as_str()),
            (Object::Delegation, "d-buyer"),
        ] {
            assert!(
                w.gate.object_exists("acme", what, id).await?,
                "{what:?} {id}"
            );
            assert!(
                !w.gate.object_exists("globex", what, id).await?,
                "{what:?} {id} in globex"
            );
            assert!(
                !w.gate.object_exists("acme", what, "nosuchid0001").await?,
                "{what:?}"
            );
            assert!(
                !w.gate
                    .object_exists("acme", what, &format!("{id}\0"))
                    .await?,
                "{what:?}"
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_requests_view_carries_its_first_decision_of_each_kind() -> TestResult {
    on_world(async |w| {
        let stepped = w.propose("CLOUD-TEAM", 1).await?;
        assert!(
            matches!(stepped.decision, Decision::StepUp(_)),
            "{stepped:?}"
        );
        let stepped = request_id(&stepped);
        let allowed = request_id(&w.propose("SNACK-BOX", 1).await?);
        let denied = w.propose("SNACK-BOX", 500).await?;
        assert!(matches!(denied.decision, Decision::Deny(_)), "{denied:?}");
        let denied = request_id(&denied);
        for (id, decision, state) in [
            (&allowed, "allow", "AUTHORIZED"),
            (&stepped, "step_up", "PENDING_APPROVAL"),
            (&denied, "deny", "DENIED"),
        ] {
            let view = w.gate.request_view("acme", id).await?.ok_or("no view")?;
            assert_eq!(
                (
                    view.request_id.as_str(),
                    view.agent_id.as_str(),
                    view.decision,
                    view.state.as_str()
                ),
                (id.as_str(), "buyer-agent", decision, state)
            );
            assert_eq!(view.reason.is_some(), decision != "allow", "{view:?}");
        }
        assert!(w.gate.request_view("acme", "nosuchid0001").await?.is_none());
        assert!(w.gate.request_view("globex", &allowed).await?.is_none());
        assert!(
            w.gate
                .request_view("acme", &format!("{allowed}\0"))
                .await?
                .is_none()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn who_may_administer_and_what_the_agent_may_buy() -> TestResult {
    on_world(async |w| {
        assert!(w.gate.may_administer("acme", "finance-lead").await?);
        assert!(!w.gate.may_administer("acme", "intern").await?);
        assert!(!w.gate.may_administer("globex", "finance-lead").await?);
        let catalog = w.gate.agent_catalog("acme").await?;
        let rows: i64 =
            sqlx::query_scalar("SELECT count(*) FROM catalog_items WHERE tenant_id = 'acme'")
                .fetch_one(w.owner())
                .await?;
        assert_eq!(catalog.len() as i64, rows);
        assert!(catalog.iter().any(|c| c.sku == "SNACK-BOX"), "{catalog:?}");
        assert!(
            catalog.windows(2).all(|p| p[0].sku < p[1].sku),
            "{catalog:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_approval_note_is_left_once_and_only_for_the_agents_waiting_request() -> TestResult {
    on_world(async |w| {
        let stepped = request_id(&w.propose("CLOUD-TEAM", 1).await?);
        let allowed = request_id(&w.propose("SNACK-BOX", 1).await?);
        let note = |agent: &'static str, id: String| async move {
            w.gate.note_approval("acme", agent, &id).await
        };
        assert_eq!(
            note("procurement-agent", stepped.clone()).await?,
            Noted::NotFound
        );
        assert_eq!(
            note("buyer-agent", allowed.clone()).await?,
            Noted::NotPending
        );
        assert_eq!(
            note("buyer-agent", "nosuchid0001".into()).await?,
            Noted::NotFound
        );
        assert_eq!(note("buyer-agent", stepped.clone()).await?, Noted::Noted);
        assert_eq!(
            note("buyer-agent", stepped.clone()).await?,
            Noted::AlreadyNoted
        );
        let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM approval_notes")
            .fetch_one(w.owner())
            .await?;
        assert_eq!(notes, 1);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_orders_view_names_its_request_agent_and_terms() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        let view = w.gate.order_view("acme", &order).await?.ok_or("no view")?;
        assert_eq!(
            (
                view.order_id.as_str(),
                view.request_id.as_str(),
                view.agent_id.as_str(),
                view.amount_paise,
                view.currency.as_str(),
                view.status.as_str()
            ),
            (
                order.as_str(),
                request.as_str(),
                "buyer-agent",
                60_000,
                "INR",
                "CREATED"
            )
        );
        assert!(w.gate.order_view("globex", &order).await?.is_none());
        assert!(
            w.gate
                .order_view("acme", "order_NoSuchOrder01")
                .await?
                .is_none()
        );
        assert!(
            w.gate
                .order_view("acme", &format!("{order}\0"))
                .await?
                .is_none()
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_ping_answers_while_the_pool_is_open_and_fails_once_it_is_closed() -> TestResult {
    on_world(async |w| {
        let gate = Gate::new(
            w.db.pool().clone(),
            InProcessProvider::new(),
            SECRET,
            Arc::new(ManualClock::new(standard::now())),
        )?;
        gate.ping().await?;
        gate.close().await;
        assert!(gate.ping().await.is_err());
        Ok(())
    })
    .await
}

/// A key of each kind the gate issues authenticates as its own caller: an
/// agent's, a human's and an auditor's, each with its role, actor and id.
#[tokio::test]
async fn a_key_of_each_kind_authenticates_as_its_own_caller() -> TestResult {
    use gate::service::api_keys::Role;
    on_world(async |w| {
        let now = w.gate.now();
        let issued = [
            (
                w.gate.issue_key("acme", "buyer-agent", now).await?,
                Role::Agent,
            ),
            (
                w.gate.issue_key("acme", "finance-lead", now).await?,
                Role::Human,
            ),
            (
                w.gate
                    .issue_auditor_key("acme", "finance-lead", now)
                    .await?,
                Role::Auditor,
            ),
        ];
        for (key, role) in issued {
            assert_eq!(key.role, role);
            let caller = w
                .gate
                .authenticate(&key.token)
                .await?
                .ok_or_else(|| format!("{role:?} key refused"))?;
            assert_eq!(
                (
                    caller.key_id,
                    caller.tenant.as_str(),
                    caller.actor,
                    caller.role
                ),
                (key.id, "acme", key.actor, role)
            );
        }
        Ok(())
    })
    .await
}

/// An auditor's key is a person's: asked for an agent it is refused, and
/// for no one of the tenant too; nothing is stored either way.
#[tokio::test]
async fn an_auditor_key_is_issued_to_a_person_only() -> TestResult {
    use gate::service::api_keys::{self, KeyError};
    on_world(async |w| {
        let now = w.gate.now();
        let agent = w.gate.issue_auditor_key("acme", "buyer-agent", now).await;
        assert!(
            matches!(agent, Err(KeyError::AuditorNotAPerson { .. })),
            "{agent:?}"
        );
        let nobody = w.gate.issue_auditor_key("acme", "nobody", now).await;
        assert!(
            matches!(nobody, Err(KeyError::ActorUnknown { .. })),
            "{nobody:?}"
        );
        assert!(api_keys::list(w.pool(), "acme").await?.is_empty());
        Ok(())
    })
    .await
}

/// Keys are listed per tenant, oldest first, with their actor and role; a
/// key is revoked by its id or by its whole token, once (a second revoke
/// says it changed nothing), and a revoked key no longer authenticates.
#[tokio::test]
async fn keys_are_listed_oldest_first_and_revoked_once_by_id_or_token() -> TestResult {
    use gate::service::api_keys::{self, KeyError};
    on_world(async |w| {
        let now = w.gate.now();
        let agent = w.gate.issue_key("acme", "buyer-agent", now).await?;
        w.clock.advance(chrono::Duration::seconds(1));
        let human = w
            .gate
            .issue_key("acme", "finance-lead", w.gate.now())
            .await?;
        w.gate.issue_key("globex", "globex-agent", now).await?;

        let listed = api_keys::list(w.pool(), "acme").await?;
        let seen: Vec<(&str, &str, &str, bool)> = listed
            .iter()
            .map(|k| {
                (
                    k.id.as_str(),
                    k.actor.as_str(),
                    k.role.as_str(),
                    k.revoked_at.is_some(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (agent.id.as_str(), "buyer-agent", "agent", false),
                (human.id.as_str(), "finance-lead", "human", false),
            ]
        );

        let later = w.gate.now();
        assert!(api_keys::revoke(w.pool(), &agent.id.to_uppercase(), later).await?);
        assert!(!api_keys::revoke(w.pool(), &agent.id, later).await?, "once");
        assert!(api_keys::revoke(w.pool(), &human.token, later).await?);
        assert!(w.gate.authenticate(&agent.token).await?.is_none());
        assert!(w.gate.authenticate(&human.token).await?.is_none());
        let listed = api_keys::list(w.pool(), "acme").await?;
        assert!(
            listed.iter().all(|k| k.revoked_at == Some(later)),
            "{listed:?}"
        );
        assert_eq!(api_keys::list(w.pool(), "globex").await?.len(), 1);

        assert!(matches!(
            api_keys::revoke(w.pool(), "00000000000000aa", later).await,
            Err(KeyError::NotFound(_))
        ));
        // Neither an id (16 hex digits) nor a whole key.
        for malformed in ["not a key", "zzzzzzzzzzzzzzzz", "abcdef"] {
            assert!(
                matches!(
                    api_keys::revoke(w.pool(), malformed, later).await,
                    Err(KeyError::Malformed(_))
                ),
                "{malformed}"
            );
        }
        Ok(())
    })
    .await
}
