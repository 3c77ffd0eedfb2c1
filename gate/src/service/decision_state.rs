//! The state one decision is made on: locked and read in one round trip.
//!
//! Guarantees: [`read`] calls the database's `decision_state` function
//! (`migrations/20261204000004_bounded_counts.sql`). It locks the tenant's
//! day of reservations in the policy's currency (rank 4 of the one lock
//! order in [`super::lock`]; opened first on the day's first decision) and
//! then, when the engine will judge, every delegation hop the agent holds
//! (rank 5, deepest first). Only then does it read, each read a statement of
//! its own, so each sees everything the previous holder of the locks
//! committed. The locks are held until the caller's transaction ends, so
//! the budgets, the velocity and the denial rate a decision relies on cannot
//! move before its reservation and its request row are written.
//!
//! [`read_for_proposal`] calls `proposal_state`
//! (`migrations/20261205000003_world_stamp.sql`), which first resolves the
//! caller and checks that the policy and catalog the gate would decide with
//! ([`super::world_cache`]) are still the tenant's (against the digest the
//! tenant's last policy or catalog write stored, and when that differs,
//! against the world read and hashed afresh), and only then calls
//! `decision_state`: a proposal's caller, policy and state in one round trip.
//!
//! What comes back is checked, never assumed whole: a reply that does not
//! decode is an error, and a day row still missing after it was opened (or
//! chains missing from a locked state) is [`ServiceError::Corrupt`]; neither is ever a decision. The agent's recent
//! proposals come back as arrays of timestamps, decoded in binary: the
//! newest of them only, no more than the policy's limits
//! ([`super::decide::Counted`]), so a decision reads as much as its policy
//! allows, however long an agent has gone on proposing.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use sqlx::postgres::PgArguments;
use sqlx::query::QueryAs;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres};

use super::budget::Day;
use super::chain_hops::{ChainHop, chains_of};
use super::current_policy::CurrentPolicy;
use super::decide::Counted;
use super::error::{Ctx, ServiceError};
use super::identity::{Lookup, Who};
use super::world::{CatalogRow, MAX_CHAIN_DEPTH, Recent, World, policy_read};
use crate::delegation::DelegationChain;
use crate::reason::Reason;

/// What to lock and read for one decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub tenant: &'a str,
    pub agent: &'a str,
    /// The UTC day whose reservations the decision may add to.
    pub day: NaiveDate,
    /// The tenant's current policy: it names the day's currency and cap.
    pub policy: Option<&'a CurrentPolicy>,
    /// The engine will judge: lock the agent's hops and read their chains.
    pub judge: bool,
    /// Which of the agent's recorded proposals to read, if any.
    pub counted: Option<Counted>,
    /// Look up the request this idempotency key (already in the identifier
    /// grammar) names for the agent.
    pub key: Option<&'a str>,
}

/// The request an idempotency key already names: what a replay answers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct FirstRequest {
    pub id: String,
    pub decision: String,
    pub reason: Option<String>,
    pub body_sha256: String,
}

/// The state read under the locks.
#[derive(Debug, Clone)]
pub(crate) struct State {
    /// The day's reservations, locked.
    pub today: Day,
    pub first: Option<FirstRequest>,
    /// Every hop the agent holds with the chain above it (root first), the
    /// oldest hop first; empty when the engine will not judge.
    pub chains: Vec<(String, DelegationChain)>,
    /// The agent's proposals [`Ask::counted`] names, newest first, at most
    /// its limits; empty without it.
    pub recent: Recent,
}

/// The function's reply: one row.
#[derive(sqlx::FromRow)]
struct Reply {
    reserved_paise: Option<i64>,
    first: Option<Json<FirstRequest>>,
    chains: Option<Json<Vec<ChainHop>>>,
    proposals: Option<Vec<DateTime<Utc>>>,
    denials: Option<Vec<DateTime<Utc>>>,
}

/// Locks and reads what `ask` names (see the module docs).
pub(crate) async fn read(conn: &mut PgConnection, ask: Ask<'_>) -> Result<State, ServiceError> {
    let (currency, cap_paise) = Day::terms(ask.policy);
    let query = sqlx::query_as(
        "SELECT reserved_paise, first, chains, proposals, denials \
           FROM decision_state($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    );
    let reply: Reply = bind_ask(query, &ask, &currency, cap_paise)
        .fetch_one(conn)
        .await
        .ctx("locking and reading the decision's state")?;
    state_of(&ask, currency, cap_paise, reply)
}

/// Binds `decision_state`'s parameters, `$1` to `$11`, for `ask` under the
/// day's `currency` and cap (`proposal_state` takes the same eleven first).
fn bind_ask<'q, O>(
    query: QueryAs<'q, Postgres, O, PgArguments>,
    ask: &Ask<'q>,
    currency: &'q str,
    cap_paise: i64,
) -> QueryAs<'q, Postgres, O, PgArguments> {
    query
        .bind(ask.tenant)
        .bind(ask.agent)
        .bind(ask.day)
        .bind(currency)
        .bind(cap_paise)
        .bind(ask.judge)
        .bind(ask.counted.map(|c| c.since))
        .bind(ask.counted.map(|c| i64::from(c.proposals)))
        .bind(ask.counted.map(|c| i64::from(c.denials)))
        .bind(ask.key)
        .bind(MAX_CHAIN_DEPTH)
}

/// What a proposal's first round trip found (`proposal_state`).
#[derive(Debug)]
pub(crate) enum ProposalState {
    /// The caller may not propose: it is not known in the tenant as the
    /// identity lookup refuses it, or it is a person (`ACTOR_NOT_PERMITTED`:
    /// humans do not use the agent-facing call). Nothing was locked.
    Refused(Reason),
    /// The world asked about is not the tenant's any more: here it is as it
    /// is now. Nothing was locked.
    Stale(World),
    /// The caller is the tenant's agent, the world asked about is current
    /// (or was just read), and the decision's state is locked and read.
    Locked(State),
}

/// The reply of `proposal_state`: one row.
#[derive(sqlx::FromRow)]
struct ProposalReply {
    #[sqlx(flatten)]
    caller: Lookup,
    world: Option<String>,
    version: Option<i32>,
    policy: Option<serde_json::Value>,
    catalog: Option<Json<Vec<CatalogRow>>>,
    locked: bool,
    #[sqlx(flatten)]
    state: Reply,
}

/// A proposal's first round trip: the caller, whether `world` (the digest of
/// the policy and catalog the gate would decide with) is still current, and
/// when it is, or when `lock_anyway` (the world was read in the statement
/// before), the decision's state locked and read as [`read`] does. `ask`'s
/// policy must be `world`'s.
pub(crate) async fn read_for_proposal(
    conn: &mut PgConnection,
    ask: Ask<'_>,
    world: Option<&str>,
    lock_anyway: bool,
    keys: &mandate::Keyring,
    ledger: &super::ledger::LedgerKey,
) -> Result<ProposalState, ServiceError> {
    let (currency, cap_paise) = Day::terms(ask.policy);
    let query = sqlx::query_as(
        "SELECT tenant_known, is_agent, may_approve, is_operator, elsewhere, world, version, \
                policy, catalog, locked, reserved_paise, first, chains, proposals, denials \
           FROM proposal_state($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    );
    let reply: ProposalReply = bind_ask(query, &ask, &currency, cap_paise)
        .bind(world)
        .bind(lock_anyway)
        .fetch_one(conn)
        .await
        .ctx("resolving the caller, checking the policy and locking the decision's state")?;
    let refusal = match reply.caller.verdict() {
        Err(reason) => Some(reason),
        // Humans do not use the agent-facing call.
        Ok(who) if who != Who::Agent => Some(Reason::ActorNotPermitted),
        Ok(_) => None,
    };
    if let Some(reason) = refusal {
        return Ok(ProposalState::Refused(reason));
    }
    if reply.locked {
        return state_of(&ask, currency, cap_paise, reply.state).map(ProposalState::Locked);
    }
    let digest = reply.world.ok_or_else(|| ServiceError::Corrupt {
        what: format!("the policy of {} came back without its digest", ask.tenant),
    })?;
    let (policy, catalog) = match (reply.version, reply.policy) {
        (Some(version), Some(json)) => {
            policy_read(ask.tenant, version, json, reply.catalog, keys, ledger)
        }
        _ => (None, None),
    };
    Ok(ProposalState::Stale(World {
        digest,
        policy,
        catalog,
    }))
}

/// The state [`read`] and [`read_for_proposal`] return, checked.
fn state_of(
    ask: &Ask<'_>,
    currency: String,
    cap_paise: i64,
    reply: Reply,
) -> Result<State, ServiceError> {
    let reserved_paise = reply.reserved_paise.ok_or_else(|| ServiceError::Corrupt {
        what: format!(
            "the reservations row of {} for {} vanished",
            ask.tenant, ask.day
        ),
    })?;
    let Json(chains) = reply.chains.ok_or_else(|| ServiceError::Corrupt {
        what: format!(
            "the decision state of {} came back without its chains",
            ask.tenant
        ),
    })?;
    Ok(State {
        today: Day {
            day: ask.day,
            currency,
            cap_paise,
            reserved_paise,
        },
        first: reply.first.map(|Json(first)| first),
        chains: chains_of(chains),
        recent: Recent {
            proposals: reply.proposals.unwrap_or_default(),
            denials: reply.denials.unwrap_or_default(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::decide;
    use super::super::rows::DelegationRow;
    use super::*;

    fn hop(leaf: &str, id: &str, parent: Option<&str>) -> ChainHop {
        ChainHop {
            leaf_id: leaf.into(),
            row: DelegationRow {
                id: id.into(),
                parent_id: parent.map(Into::into),
                grantee_id: "buyer-agent".into(),
                budget_paise: 100,
                allocated_paise: 0,
                spent_paise: 0,
                skus: None,
                expires_at: None,
                revoked_at: None,
            },
            expires_at_us: None,
            revoked_at_us: None,
        }
    }

    #[test]
    fn hops_group_into_one_chain_per_leaf_in_the_order_they_came() {
        let chains = chains_of(vec![
            hop("d-b", "d-root", None),
            hop("d-b", "d-b", Some("d-root")),
            hop("d-a", "d-root", None),
            hop("d-a", "d-a", Some("d-root")),
        ]);
        let leaves: Vec<&str> = chains.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(leaves, ["d-b", "d-a"]);
        let ids: Vec<&str> = chains[1].1.hops.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["d-root", "d-a"]);
        assert!(chains_of(Vec::new()).is_empty());
    }

    #[test]
    fn a_hop_as_the_function_builds_it_parses_and_keeps_its_instant_past_year_9999() {
        // 2026-12-03T17:30:00.123456Z and 10000-01-01T00:00:00Z, in µs.
        let hop: ChainHop = serde_json::from_value(serde_json::json!({
            "leaf_id": "d-1", "id": "d-1", "parent_id": null,
            "grantee_id": "buyer-agent", "budget_paise": 5, "allocated_paise": 0,
            "spent_paise": 1, "skus": ["A"],
            "expires_at_us": 1_796_319_000_123_456_i64,
            "revoked_at_us": 253_402_300_800_000_000_i64
        }))
        .unwrap();
        let engine = hop.to_hop();
        let expires = engine.expires_at.unwrap();
        assert_eq!(expires.to_rfc3339(), "2026-12-03T17:30:00.123456+00:00");
        assert!(engine.revoked);
        assert_eq!(engine.skus, Some(vec!["A".to_owned()]));
        let open: ChainHop = serde_json::from_value(serde_json::json!({
            "leaf_id": "d-1", "id": "d-1", "parent_id": null,
            "grantee_id": "buyer-agent", "budget_paise": 5, "allocated_paise": 0,
            "spent_paise": 1, "skus": null, "expires_at_us": null, "revoked_at_us": null
        }))
        .unwrap();
        assert_eq!(open.to_hop().expires_at, None);
        assert!(!open.to_hop().revoked);
        let first: FirstRequest = serde_json::from_value(serde_json::json!({
            "id": "req-1", "decision": "deny", "reason": null, "body_sha256": "ab"
        }))
        .unwrap();
        assert_eq!(first.reason, None);
    }

    type DbResult = Result<(), Box<dyn std::error::Error>>;

    /// What a proposal by `actor` of `tenant` asks, under no policy.
    fn ask<'a>(tenant: &'a str, actor: &'a str) -> Ask<'a> {
        Ask {
            tenant,
            agent: actor,
            day: super::super::standard::now().date_naive(),
            policy: None,
            judge: false,
            counted: None,
            key: None,
        }
    }

    /// A gate on `db` with the standard world seeded, and its manual clock
    /// (at the standard world's now).
    /// A ledger key for reads that check no catalog row.
    fn test_ledger_key() -> super::super::ledger::LedgerKey {
        super::super::ledger::LedgerKey::derived_from_secret(b"spendgate-decision-state-test-key")
    }

    async fn standard_gate(
        db: &crate::db::FreshDatabase,
    ) -> Result<
        (
            super::super::Gate<crate::provider::InProcessProvider>,
            std::sync::Arc<super::super::clock::ManualClock>,
        ),
        Box<dyn std::error::Error>,
    > {
        use super::super::{Gate, clock::ManualClock, standard};
        let clock = std::sync::Arc::new(ManualClock::new(standard::now()));
        let gate = Gate::new(
            db.pool().clone(),
            crate::provider::InProcessProvider::new(),
            b"spendgate-decision-state-test-secret-0123456789".to_vec(),
            clock.clone(),
        )?;
        gate.seed(&standard::seed()).await?;
        Ok((gate, clock))
    }

    /// `proposal_state` looks the caller up as `identity::resolve` does, for
    /// every kind of caller; with a world that is not the tenant's it locks
    /// and opens nothing and sends the world, and with that world's digest
    /// it locks the day (opening it).
    #[tokio::test]
    async fn the_proposal_lookup_agrees_with_resolve_and_only_a_current_world_locks() -> DbResult {
        use super::super::identity;
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        standard_gate(&db).await?;
        let mut conn = db.pool().acquire().await?;
        let days = "SELECT count(*) FROM daily_spend WHERE tenant_id = 'acme'";
        for (tenant, actor) in [
            ("acme", "buyer-agent"),
            ("acme", "finance-lead"),
            ("acme", "intern"),
            ("acme", "globex-agent"),
            ("acme", "globex-finance"),
            ("acme", "ghost-agent"),
            ("nope", "buyer-agent"),
            ("globex", "globex-agent"),
        ] {
            let want = identity::resolve(&mut conn, tenant, actor).await?;
            let got = read_for_proposal(
                &mut conn,
                ask(tenant, actor),
                Some("stale"),
                false,
                &mandate::Keyring::world(),
                &test_ledger_key(),
            )
            .await?;
            match got {
                ProposalState::Refused(reason) => {
                    let expected = want.err().unwrap_or(Reason::ActorNotPermitted);
                    assert_eq!(reason, expected, "{tenant}/{actor}: {want:?}");
                    assert_ne!(want, Ok(Who::Agent), "{tenant}/{actor}: an agent refused");
                }
                ProposalState::Stale(world) => {
                    assert_eq!(want, Ok(Who::Agent), "{tenant}/{actor}");
                    assert!(world.policy.is_some() && world.catalog.is_some());
                }
                ProposalState::Locked(_) => panic!("{tenant}/{actor}: locked a stale world"),
            }
        }
        let opened: i64 = sqlx::query_scalar(days).fetch_one(&mut *conn).await?;
        assert_eq!(opened, 0, "a stale world opened a day");

        let ProposalState::Stale(world) = read_for_proposal(
            &mut conn,
            ask("acme", "buyer-agent"),
            None,
            false,
            &mandate::Keyring::world(),
            &test_ledger_key(),
        )
        .await?
        else {
            panic!("no world was ever named: it must be sent");
        };
        let current = Ask {
            policy: world.policy.as_ref(),
            ..ask("acme", "buyer-agent")
        };
        let locked = read_for_proposal(
            &mut conn,
            current,
            Some(&world.digest),
            false,
            &mandate::Keyring::world(),
            &test_ledger_key(),
        )
        .await?;
        let ProposalState::Locked(state) = locked else {
            panic!("the current world was not locked: {locked:?}");
        };
        assert_eq!(state.today.reserved_paise, 0);
        let opened: i64 = sqlx::query_scalar(days).fetch_one(&mut *conn).await?;
        assert_eq!(opened, 1, "the current world's day was not opened");
        drop(conn);
        db.drop().await?;
        Ok(())
    }

    /// A decision reads only the newest of the agent's recorded proposals,
    /// no more than its policy's limits (20 proposals and 5 refusals in the
    /// standard world), however many the agent has made: they are exactly
    /// the newest rows the table holds, and wider limits read them all.
    #[tokio::test]
    async fn a_decision_reads_only_the_newest_proposals_up_to_the_policys_limits() -> DbResult {
        use super::super::clock::Clock;
        use super::super::decide::Moment;
        use super::super::world;
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let (gate, clock) = standard_gate(&db).await?;
        // Refused (a merchant not allowed) and stepped up, in turn: once
        // the denial rate is reached every one is refused, and recorded.
        for i in 0..40 {
            clock.advance(chrono::Duration::seconds(7));
            let body: &[u8] = match i % 2 {
                0 => br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk"}"#,
                _ => br#"{"sku":"CLOUD-TEAM","quantity":1,"purpose":"team plan"}"#,
            };
            gate.propose("acme", "buyer-agent", body, None).await?;
        }
        let mut conn = db.pool().acquire().await?;
        let newest = |deny_only: bool| {
            sqlx::query_scalar::<_, DateTime<Utc>>(
                "SELECT created_at FROM payment_requests \
                  WHERE tenant_id = 'acme' AND agent_id = 'buyer-agent' \
                    AND (decision = 'deny' OR NOT $1) ORDER BY created_at DESC",
            )
            .bind(deny_only)
        };
        let all = newest(false).fetch_all(&mut *conn).await?;
        let refused = newest(true).fetch_all(&mut *conn).await?;
        assert_eq!(all.len(), 40);
        assert!(refused.len() > 5 && refused.len() < 40, "{}", refused.len());

        let (policy, _) = world::policy_and_catalog(
            &mut conn,
            "acme",
            false,
            &mandate::Keyring::world(),
            &test_ledger_key(),
        )
        .await?;
        let counted = Moment::Proposal
            .counted(clock.now(), policy.as_ref())
            .ok_or("the standard policy counts proposals")?;
        assert_eq!((counted.proposals, counted.denials), (20, 5));
        let asked = |counted| Ask {
            policy: policy.as_ref(),
            judge: true,
            counted: Some(counted),
            ..ask("acme", "buyer-agent")
        };
        let state = read(&mut conn, asked(counted)).await?;
        assert_eq!(state.recent.proposals, all[..20]);
        assert_eq!(state.recent.denials, refused[..5]);

        let wide = decide::Counted {
            proposals: 1_000,
            denials: 1_000,
            ..counted
        };
        let state = read(&mut conn, asked(wide)).await?;
        assert_eq!(state.recent.proposals, all);
        assert_eq!(state.recent.denials, refused);

        // A window's start still bounds the read: nothing before it.
        let later = decide::Counted {
            since: all[9],
            ..wide
        };
        let state = read(&mut conn, asked(later)).await?;
        assert_eq!(state.recent.proposals, all[..9]);
        drop(conn);
        db.drop().await?;
        Ok(())
    }

    /// decision_state's plans are fixed by its own settings (migrations
    /// 20261204000004, 20261205000001 and 20261205000002): generic plans,
    /// no sequential scan and no sort where an index serves, and never a JIT
    /// compilation, which a disabled plan node's cost would otherwise set
    /// off on every call (72 ms a decision when only the sorts were off).
    #[tokio::test]
    async fn a_decision_plans_by_its_own_settings_and_never_compiles() -> DbResult {
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let config: Vec<String> = sqlx::query_scalar(
            "SELECT unnest(proconfig) FROM pg_proc WHERE proname = 'decision_state'",
        )
        .fetch_all(db.pool())
        .await?;
        for setting in [
            "plan_cache_mode=force_generic_plan",
            "enable_seqscan=off",
            "enable_sort=off",
            "jit=off",
        ] {
            assert!(
                config.iter().any(|c| c == setting),
                "{setting} not in {config:?}"
            );
        }
        db.drop().await?;
        Ok(())
    }

    /// A connection that planned its decisions while the requests table's
    /// statistics said it was empty (a new deployment that autovacuum or
    /// ANALYZE saw before its first proposal) keeps that plan, and still
    /// walks the agent's requests newest first and stops at the policy's
    /// limits once the table holds many: no decision scans the table, and
    /// none reads the agent's older requests (an index in another order,
    /// then a sort, read them all), before or after.
    #[tokio::test]
    async fn a_decision_never_scans_the_requests_a_planner_saw_empty() -> DbResult {
        use super::super::clock::Clock;
        use super::super::decide::Moment;
        use super::super::world;
        use sqlx::Connection;
        let Some(db) = crate::db::fresh_test_database().await? else {
            return Ok(());
        };
        let (gate, clock) = standard_gate(&db).await?;
        sqlx::query("VACUUM ANALYZE payment_requests")
            .execute(db.owner_pool())
            .await?;
        // The standard limits: 20 proposals, 5 refusals (every one here is
        // refused: the merchant is not allowed). Each round first records
        // `made` proposals, then decides on the one connection: the first
        // decision plans on a table of 300 rows that the statistics call
        // empty (where Postgres finds a walk of another index, a filter on
        // the window and a sort cheapest), the second runs that plan on 500.
        let propose = |made: usize| {
            let gate = &gate;
            let clock = &clock;
            async move {
                for _ in 0..made {
                    clock.advance(chrono::Duration::seconds(7));
                    let body = br#"{"sku":"USB-HUB","quantity":1,"purpose":"desk"}"#;
                    gate.propose("acme", "buyer-agent", body, None).await?;
                }
                Ok::<_, Box<dyn std::error::Error>>(())
            }
        };
        let mut conn = db.pool().acquire().await?;
        let (policy, _) = world::policy_and_catalog(
            &mut conn,
            "acme",
            false,
            &mandate::Keyring::world(),
            &test_ledger_key(),
        )
        .await?;
        let read_so_far = "SELECT seq_scan, COALESCE(idx_tup_fetch, 0) \
                             FROM pg_stat_xact_user_tables WHERE relname = 'payment_requests'";
        for (round, made) in [(0, 300), (1, 200)] {
            propose(made).await?;
            let counted = Moment::Proposal
                .counted(clock.now(), policy.as_ref())
                .ok_or("the standard policy counts proposals")?;
            let asked = Ask {
                policy: policy.as_ref(),
                judge: true,
                counted: Some(counted),
                ..ask("acme", "buyer-agent")
            };
            // A backend's counters of its transaction are read before and
            // after: they also hold what it has not yet reported.
            let mut tx = conn.begin().await?;
            let (scanned_before, fetched_before): (i64, i64) =
                sqlx::query_as(read_so_far).fetch_one(&mut *tx).await?;
            let state = read(&mut tx, asked).await?;
            let (scanned_after, fetched_after): (i64, i64) =
                sqlx::query_as(read_so_far).fetch_one(&mut *tx).await?;
            tx.rollback().await?;
            let (scanned, fetched) = (
                scanned_after - scanned_before,
                fetched_after - fetched_before,
            );
            assert_eq!(scanned, 0, "round {round}: a decision scanned the requests");
            assert!(
                fetched <= 25,
                "round {round}: a decision fetched {fetched} requests to find its newest 25"
            );
            assert_eq!(state.recent.proposals.len(), 20, "round {round}");
            assert_eq!(state.recent.denials.len(), 5, "round {round}");
        }
        drop(conn);
        db.drop().await?;
        Ok(())
    }
}
