//! The two database roles (`migrations/*_roles.sql`): the gate connects as
//! the application role, which owns nothing and holds only the privileges the
//! gate uses, so a stolen gate connection cannot switch off the guards the
//! database holds. Every test here acts through the gate's own pool (the
//! application role) and shows the refusal: SQLSTATE 42501
//! (insufficient_privilege) for what the role may not do at all, or the name
//! of the guard that refuses what it may try.
//!
//! The privilege manifest below is the application role's whole authority,
//! read from the catalog table by table: a table added by a later migration
//! fails `the_application_roles_privileges_are_exactly_the_manifest` until it
//! is written into the manifest, a conscious decision.

use crate::support::*;
use gate::db::{APP_ROLE, OWNER_ROLE};
use gate::service::webhook::EVENT_CAPTURED;
use sqlx::{Executor, PgPool};

/// Postgres SQLSTATE `insufficient_privilege`.
pub(crate) const INSUFFICIENT_PRIVILEGE: &str = "42501";

/// What the application role may do, table by table: the table-level
/// privileges, then `UPDATE(col, ..)` for a column-level UPDATE. Everything
/// not listed is refused: no DELETE, TRUNCATE, REFERENCES or TRIGGER anywhere.
const MANIFEST: &[(&str, &str)] = &[
    // The migrations' bookkeeping: read, so a served gate can refuse a
    // schema that lacks one of its migrations; never written.
    ("_sqlx_migrations", "SELECT"),
    // Onboarding (agents, people, merchants, tenants, keys) is the
    // onboarding role's: the runtime role only reads them.
    ("agents", "SELECT"),
    // A key is revoked in place (wire); nothing else about it changes.
    ("api_keys", "SELECT UPDATE(revoked_at)"),
    // An agent's request for approval: written once.
    ("approval_notes", "SELECT INSERT"),
    ("approvals", "SELECT INSERT UPDATE"),
    ("catalog_items", "SELECT INSERT UPDATE"),
    ("checkout_authorities", "SELECT INSERT UPDATE"),
    ("daily_spend", "SELECT INSERT UPDATE"),
    ("delegations", "SELECT INSERT UPDATE"),
    // Captures kept for reconcile are settled in place.
    ("kept_captures", "SELECT INSERT UPDATE"),
    // Append-only: the hash chain is read and appended, never changed.
    ("ledger_entries", "SELECT INSERT"),
    // Signed checkpoints are kept, never changed or removed.
    ("log_checkpoints", "SELECT INSERT"),
    // Seeded by its migration, then only moved (and locked).
    ("ledger_head", "SELECT UPDATE"),
    // Queued entries are inserted by operations and deleted by their
    // integration only (ledger_queue_integrated_only); never changed.
    ("ledger_queue", "SELECT INSERT DELETE"),
    ("merchants", "SELECT"),
    ("payment_requests", "SELECT INSERT UPDATE"),
    ("people", "SELECT"),
    // Published versions are append-only.
    ("policy_versions", "SELECT INSERT"),
    ("provider_events", "SELECT INSERT"),
    // What was received (an event's body and signature header, a
    // proposal's body): kept as it came, never changed or removed.
    ("provider_event_bodies", "SELECT INSERT"),
    // A payment's status moves from failed to captured (an upsert).
    ("provider_payments", "SELECT INSERT UPDATE"),
    ("provider_orders", "SELECT INSERT UPDATE"),
    ("request_bodies", "SELECT INSERT"),
    // The row-security token digests are the onboarding role's: the
    // runtime role neither reads nor writes them.
    ("row_tokens", ""),
    // Only ever locked (SELECT .. FOR UPDATE needs UPDATE on one column).
    ("tenants", "SELECT UPDATE(id)"),
];

/// Sequences the application role draws ids from (USAGE, nothing more):
/// none, since request and approval ids are random.
const SEQUENCES: &[(&str, &str)] = &[];

const TABLE_PRIVILEGES: [&str; 7] = [
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "TRUNCATE",
    "REFERENCES",
    "TRIGGER",
];

async fn exec(pool: &PgPool, sql: &str) -> Result<u64, sqlx::Error> {
    pool.execute(sqlx::AssertSqlSafe(sql))
        .await
        .map(|r| r.rows_affected())
}

/// Asserts that `result` is a refusal for want of privilege (42501).
pub(crate) fn assert_denied<T: std::fmt::Debug>(result: Result<T, sqlx::Error>, what: &str) {
    match result {
        Ok(v) => panic!("{what}: the application role was allowed ({v:?})"),
        Err(e) => {
            let code = e
                .as_database_error()
                .and_then(|d| d.code())
                .map(|c| c.into_owned());
            assert_eq!(
                code.as_deref(),
                Some(INSUFFICIENT_PRIVILEGE),
                "{what}: expected insufficient_privilege, got {e}"
            );
        }
    }
}

/// The application role's privileges on `table`, spelled as in [`MANIFEST`].
async fn privileges_of(pool: &PgPool, table: &str) -> Result<String, sqlx::Error> {
    let mut held = Vec::new();
    for privilege in TABLE_PRIVILEGES {
        let has: bool = sqlx::query_scalar("SELECT has_table_privilege($1, $2::regclass, $3)")
            .bind(APP_ROLE)
            .bind(format!("public.{table}"))
            .bind(privilege)
            .fetch_one(pool)
            .await?;
        if has {
            held.push(privilege.to_owned());
        }
    }
    for privilege in ["SELECT", "INSERT", "UPDATE", "REFERENCES"] {
        if held.iter().any(|p| p == privilege) {
            continue;
        }
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT a.attname::text FROM pg_attribute a \
             WHERE a.attrelid = $2::regclass AND a.attnum > 0 AND NOT a.attisdropped \
               AND has_column_privilege($1, a.attrelid, a.attnum, $3) ORDER BY a.attnum",
        )
        .bind(APP_ROLE)
        .bind(format!("public.{table}"))
        .bind(privilege)
        .fetch_all(pool)
        .await?;
        if !columns.is_empty() {
            held.push(format!("{privilege}({})", columns.join(", ")));
        }
    }
    Ok(held.join(" "))
}

#[tokio::test]
async fn the_gate_connects_as_the_application_role_which_owns_nothing() -> TestResult {
    on_world(async |w| {
        let me: String = sqlx::query_scalar("SELECT current_user::text")
            .fetch_one(w.pool())
            .await?;
        assert_eq!(me, APP_ROLE, "the gate's pool is not the application role");
        let owner: String = sqlx::query_scalar("SELECT current_user::text")
            .fetch_one(w.owner())
            .await?;
        assert_eq!(owner, OWNER_ROLE);

        let attributes: (bool, bool, bool, bool, bool) = sqlx::query_as(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls \
         FROM pg_roles WHERE rolname = current_user",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(
            attributes,
            (false, false, false, false, false),
            "superuser, createrole, createdb, replication, bypassrls"
        );
        // A member of no role, so it inherits nothing and cannot SET ROLE.
        let memberships: Vec<String> = sqlx::query_scalar(
            "SELECT r.rolname::text FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid \
         WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)",
        )
        .fetch_all(w.pool())
        .await?;
        assert_eq!(memberships, Vec::<String>::new());
        assert_denied(
            exec(w.pool(), &format!("SET ROLE {OWNER_ROLE}")).await,
            "SET ROLE to the owner",
        );

        // Owns nothing: no relation, function, type, schema or database.
        let owned: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid) \
              + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid) \
              + (SELECT count(*) FROM pg_type WHERE typowner = r.oid) \
              + (SELECT count(*) FROM pg_namespace WHERE nspowner = r.oid) \
              + (SELECT count(*) FROM pg_database WHERE datdba = r.oid) \
         FROM pg_roles r WHERE r.rolname = current_user",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(owned, 0, "the application role owns {owned} objects");
        let tables_owner: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT pg_get_userbyid(relowner)::text FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace",
        )
        .fetch_all(w.pool())
        .await?;
        assert_eq!(tables_owner, vec![OWNER_ROLE.to_owned()]);

        // And may create nothing it would then own.
        let may_create: bool =
            sqlx::query_scalar("SELECT has_schema_privilege('public', 'CREATE')")
                .fetch_one(w.pool())
                .await?;
        assert!(!may_create, "the application role may create in public");
        assert_denied(
            exec(w.pool(), "CREATE TABLE public.mine (x int)").await,
            "CREATE TABLE",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_role_cannot_disable_a_trigger() -> TestResult {
    on_world(async |w| {
        for sql in [
            "ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only",
            "ALTER TABLE ledger_entries DISABLE TRIGGER ALL",
            "ALTER TABLE payment_requests DISABLE TRIGGER request_state_transition",
            "ALTER TABLE payment_requests DISABLE TRIGGER request_captured_by_event",
            "ALTER TABLE payment_requests ENABLE REPLICA TRIGGER request_captured_by_event",
            "DROP TRIGGER ledger_append_only ON ledger_entries",
        ] {
            assert_denied(exec(w.pool(), sql).await, sql);
        }
        // Still there, and still enabled.
        let enabled: Vec<(String, String)> = sqlx::query_as(
            "SELECT tgname::text, tgenabled::text FROM pg_trigger \
         WHERE tgname IN ('ledger_append_only', 'request_state_transition', \
                          'request_captured_by_event') ORDER BY tgname",
        )
        .fetch_all(w.pool())
        .await?;
        assert_eq!(
            enabled,
            vec![
                ("ledger_append_only".into(), "O".into()),
                ("request_captured_by_event".into(), "A".into()),
                ("request_state_transition".into(), "O".into()),
            ]
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_role_cannot_drop_a_constraint() -> TestResult {
    on_world(async |w| {
        for sql in [
            "ALTER TABLE payment_requests DROP CONSTRAINT ck_request_reservation_matches_state",
            "ALTER TABLE delegations DROP CONSTRAINT ck_delegation_budget_partitioned",
            "ALTER TABLE ledger_entries DROP CONSTRAINT pk_ledger_entries",
            "ALTER TABLE daily_spend ALTER COLUMN cap_paise DROP NOT NULL",
            "DROP INDEX uq_live_approval",
            "ALTER TABLE payment_requests NO FORCE ROW LEVEL SECURITY",
        ] {
            assert_denied(exec(w.pool(), sql).await, sql);
        }
        // The guard still refuses, by name.
        let request = request_id(&w.propose("CLOUD-STARTER", 1).await?);
        assert_refused_by(
            exec(
                w.pool(),
                &format!("UPDATE payment_requests SET reserved_paise = 0 WHERE id = '{request}'"),
            )
            .await,
            "ck_request_reservation_matches_state",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_role_cannot_truncate_any_table() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') ORDER BY relname",
        )
        .fetch_all(w.pool())
        .await?;
        assert!(tables.iter().any(|t| t == "ledger_entries"), "{tables:?}");
        for table in &tables {
            let sql = format!("TRUNCATE {table} CASCADE");
            assert_denied(exec(w.pool(), &sql).await, &sql);
        }
        let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
            .fetch_one(w.ledger().await?)
            .await?;
        assert!(entries > 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_role_cannot_update_or_delete_the_ledger() -> TestResult {
    on_world(async |w| {
        paid_order(w).await?;
        let before: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT seq, entry, hash FROM ledger_entries ORDER BY seq")
                .fetch_all(w.ledger().await?)
                .await?;
        assert!(before.len() > 1, "{before:?}");
        for sql in [
            "UPDATE ledger_entries SET entry = replace(entry, '60000', '1')",
            "UPDATE ledger_entries SET kind = kind WHERE false",
            "DELETE FROM ledger_entries WHERE seq > 1",
            "DELETE FROM ledger_entries WHERE false",
            "INSERT INTO ledger_entries SELECT tenant_id, seq, kind, at, entry, prev_hash, hash \
         FROM ledger_entries ON CONFLICT (tenant_id, seq) DO UPDATE SET entry = 'x'",
            "DELETE FROM policy_versions",
            "DELETE FROM payment_requests",
        ] {
            assert_denied(exec(w.pool(), sql).await, sql);
        }
        let after: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT seq, entry, hash FROM ledger_entries ORDER BY seq")
                .fetch_all(w.ledger().await?)
                .await?;
        assert_eq!(before, after, "the ledger changed");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_role_cannot_set_session_replication_role() -> TestResult {
    on_world(async |w| {
        let mut conn = w.pool().acquire().await?;
        assert_denied(
            exec_conn(&mut conn, "SET session_replication_role = replica").await,
            "SET session_replication_role",
        );
        assert_denied(
            exec_conn(
                &mut conn,
                "SELECT set_config('session_replication_role', 'replica', false)",
            )
            .await,
            "set_config(session_replication_role)",
        );
        assert_denied(
            exec_conn(
                &mut conn,
                &format!("ALTER ROLE {APP_ROLE} SET session_replication_role = replica"),
            )
            .await,
            "ALTER ROLE .. SET session_replication_role",
        );
        let mode: String = sqlx::query_scalar("SHOW session_replication_role")
            .fetch_one(&mut *conn)
            .await?;
        assert_eq!(mode, "origin");
        drop(conn);
        Ok(())
    })
    .await
}

async fn exec_conn(conn: &mut sqlx::PgConnection, sql: &str) -> Result<u64, sqlx::Error> {
    conn.execute(sqlx::AssertSqlSafe(sql))
        .await
        .map(|r| r.rows_affected())
}

/// The third attack, as the application role: a request set to
/// CAPTURED with no capture event recorded. Refused by a guard of its own,
/// which is ENABLE ALWAYS (it would fire even under `replica`, which the
/// role may not set anyway), while the gate's own capture still works.
#[tokio::test]
async fn request_captured_by_event_refuses_capturing_without_a_capture_event() -> TestResult {
    on_world(async |w| {
        let (request, _, order) = paid_order(w).await?;
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        assert_refused_by(
            exec(
                w.pool(),
                &format!("UPDATE payment_requests SET state = 'CAPTURED' WHERE id = '{request}'"),
            )
            .await,
            "request_captured_by_event",
        );
        // An event that was refused is no capture either.
        exec(
            w.pool(),
            &format!(
                "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, \
             request_id, event, amount_paise, currency, event_created_at, received_at, outcome, \
             body_sha256) VALUES ('acme', 'evt_refused', '{order}', '{request}', \
             '{EVENT_CAPTURED}', 60000, 'INR', now(), now(), 'PROVIDER_EVENT_AMOUNT_MISMATCH', \
             repeat('c', 64))"
            ),
        )
        .await?;
        assert_refused_by(
            exec(
                w.pool(),
                &format!("UPDATE payment_requests SET state = 'CAPTURED' WHERE id = '{request}'"),
            )
            .await,
            "request_captured_by_event",
        );
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        // The gate's own path: a verified capture event moves it.
        let (raw, signature) = event(w, "evt_captured", EVENT_CAPTURED, &order, 60000);
        let applied = w
            .gate
            .webhook(&raw, Some(&signature), Some("evt_captured"))
            .await?;
        assert_eq!(applied.decision, gate::Decision::Allow, "{applied:?}");
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("CAPTURED")
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_application_roles_privileges_are_exactly_the_manifest() -> TestResult {
    on_world(async |w| {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'v', 'm', 'f') \
         ORDER BY relname",
    )
    .fetch_all(w.pool())
    .await?;
    let mut mismatches = Vec::new();
    for table in &tables {
        let held = privileges_of(w.pool(), table).await?;
        match MANIFEST.iter().find(|(t, _)| t == table) {
            Some((_, expected)) if *expected == held => {}
            Some((_, expected)) => mismatches.push(format!(
                "{table}: the application role holds [{held}], the manifest says [{expected}]"
            )),
            None => mismatches.push(format!(
                "{table}: not in the manifest; it holds [{held}]. Decide what the gate needs \
                 there (grant it in the table's migration) and add the table to MANIFEST"
            )),
        }
    }
    for (table, _) in MANIFEST {
        if !tables.iter().any(|t| t == table) {
            mismatches.push(format!("{table}: in the manifest but not in the database"));
        }
    }
    let sequences: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace AND relkind = 'S' ORDER BY relname",
    )
    .fetch_all(w.pool())
    .await?;
    let mut held_sequences = Vec::new();
    for sequence in &sequences {
        let mut held = Vec::new();
        for privilege in ["USAGE", "SELECT", "UPDATE"] {
            let has: bool =
                sqlx::query_scalar("SELECT has_sequence_privilege($1, $2::regclass, $3)")
                    .bind(APP_ROLE)
                    .bind(format!("public.{sequence}"))
                    .bind(privilege)
                    .fetch_one(w.pool())
                    .await?;
            if has {
                held.push(privilege);
            }
        }
        held_sequences.push((sequence.clone(), held.join(" ")));
    }
    let expected_sequences: Vec<(String, String)> = SEQUENCES
        .iter()
        .map(|(s, p)| ((*s).to_owned(), (*p).to_owned()))
        .collect();
    if held_sequences != expected_sequences {
        mismatches.push(format!(
            "sequences: the application role holds {held_sequences:?}, expected {expected_sequences:?}"
        ));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        Ok(())
    })
    .await
}

/// A table a later migration adds (created by the owner, as migrations are)
/// gets SELECT and INSERT for the application role and nothing more, without
/// a GRANT of its own.
#[tokio::test]
async fn a_table_added_later_gets_select_and_insert_only() -> TestResult {
    on_world(async |w| {
        exec(
            w.owner(),
            "CREATE TABLE later_table (id bigserial PRIMARY KEY, note text)",
        )
        .await?;
        assert_eq!(
            privileges_of(w.pool(), "later_table").await?,
            "SELECT INSERT"
        );
        exec(w.pool(), "INSERT INTO later_table (note) VALUES ('hello')").await?;
        assert_denied(
            exec(w.pool(), "UPDATE later_table SET note = 'bye'").await,
            "UPDATE of a later table",
        );
        assert_denied(
            exec(w.pool(), "DELETE FROM later_table").await,
            "DELETE of a later table",
        );
        Ok(())
    })
    .await
}

/// Who onboards is not who runs: the runtime role may not create a tenant
/// (and so no ledger head), a person, an agent, a merchant or an API key
/// (42501), nor a root delegation (delegation_root_by_onboarding); the
/// onboarding role may do each, and a hop below a root stays the runtime's.
#[tokio::test]
async fn the_runtime_role_cannot_onboard_and_the_onboarding_role_can() -> TestResult {
    on_world(async |w| {
        for (what, sql) in [
            ("a tenant", "INSERT INTO tenants (id) VALUES ('stolen')"),
            (
                "a ledger head",
                "INSERT INTO ledger_head (tenant_id, seq, hash) VALUES ('acme', 0, repeat('0', 64))",
            ),
            (
                "a person",
                "INSERT INTO people (tenant_id, id, display_name, may_approve) \
                 VALUES ('acme', 'mallory', 'mallory', true)",
            ),
            ("an agent", "INSERT INTO agents (tenant_id, id) VALUES ('acme', 'rogue-agent')"),
            (
                "a merchant",
                "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('acme', 'shell', 'shell')",
            ),
            (
                "an API key",
                "INSERT INTO api_keys (id, tenant_id, person_id, key_sha256, created_at) \
                 VALUES ('00000000000000aa', 'acme', 'finance-lead', repeat('a', 64), now())",
            ),
        ] {
            assert_denied(exec(w.pool(), sql).await, &format!("INSERT of {what}"));
        }
        let root = "INSERT INTO delegations (tenant_id, id, grantor_id, grantee_id, budget_paise, \
                    created_at) VALUES ('acme', 'd-stolen', 'finance-lead', 'procurement-agent', \
                    900000000, now())";
        assert_sql_refused_by(w.pool(), root, "delegation_root_by_onboarding").await;
        // The onboarding role holds each of them.
        let onboard = w.gate.onboarding_pool();
        let me: String = sqlx::query_scalar("SELECT current_user::text")
            .fetch_one(onboard)
            .await?;
        assert_eq!(me, gate::db::ONBOARD_ROLE);
        exec(onboard, "INSERT INTO tenants (id) VALUES ('onboarded')").await?;
        let heads: i64 =
            sqlx::query_scalar("SELECT count(*) FROM ledger_head WHERE tenant_id = 'onboarded'")
                .fetch_one(w.ledger().await?)
                .await?;
        assert_eq!(heads, 1, "a tenant the onboarding role creates has its head");
        exec(onboard, root).await?;
        // Below a root, a hop is the runtime's to grant.
        exec(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, \
             created_at) VALUES ('acme', 'd-below', 'd-stolen', 'procurement-agent', 1000, now())",
        )
        .await?;
        Ok(())
    })
    .await
}

/// A root grant through a gate without the onboarding role's pool is
/// refused by the database and recorded as the grantor not permitted.
#[tokio::test]
async fn a_root_grant_on_the_runtime_login_is_refused_by_the_guard() -> TestResult {
    on_world(async |w| {
        let runtime = gate::service::Gate::open(
            w.pool().clone(),
            gate::provider::InProcessProvider::default(),
            vec![7u8; 32],
            // The world's ledger key: the database knows its row-security
            // tokens (a gate under another key reads no tenant's rows).
            gate::service::LedgerKey::derived_from_secret(SECRET),
            w.gate.clock().clone(),
        )?;
        let terms = gate::service::HopTerms {
            id: "d-runtime-root".into(),
            to: "procurement-agent".into(),
            budget_paise: 1000,
            skus: None,
            expires_at: None,
        };
        let o = runtime.grant("acme", "finance-lead", None, &terms).await?;
        assert_eq!(
            o.decision,
            gate::reason::Decision::Deny(gate::reason::Reason::DelegationGrantorNotPermitted)
        );
        assert_eq!(
            o.constraint.as_deref(),
            Some("delegation_root_by_onboarding")
        );
        Ok(())
    })
    .await
}
