//! The database guards of requests, delegations, daily reservations, policy
//! versions, the ledger and its queue, log checkpoints, provider and
//! demo-provider orders, API keys, approval notes and kept request bodies
//! that no other test violates by name: each is violated here directly with
//! SQL, and the refusal must name it (a CHECK, UNIQUE or FOREIGN KEY by its
//! constraint name, a trigger by the name it raises with).
//!
//! Each statement is sent by the least privileged login that may send it:
//! the gate's runtime role (`spendgate_app`, what a stolen login holds)
//! where it has the privilege, else the onboarding role, else the owner;
//! each case says which. Where another guard would refuse the same
//! statement first, the test switches that one off (as the owner, the only
//! role that may) and says so, so the refusal is the named guard's alone.

use crate::support::*;
use sqlx::PgPool;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Who sends a statement.
#[derive(Clone, Copy, Debug)]
enum Login {
    /// The gate's runtime role (`World::pool`).
    Runtime,
    /// The onboarding role (`World::onboard`).
    Onboarding,
    /// The tables' owner (`World::owner`).
    Owner,
}

impl Login {
    fn pool(self, w: &World) -> &PgPool {
        match self {
            Login::Runtime => w.pool(),
            Login::Onboarding => w.onboard(),
            Login::Owner => w.owner(),
        }
    }
}

/// Runs each case in order: `sql`, sent as `login`, must be refused by
/// `guard` (a refusal by another name, or none, fails naming the guard).
async fn refuse_each(w: &World, cases: &[(&str, Login, String)]) {
    for (guard, login, sql) in cases {
        assert_sql_refused_by(login.pool(w), sql, guard).await;
    }
}

/// A request moved to PENDING_APPROVAL by the gate (CLOUD-TEAM, 180000).
async fn pending(w: &World) -> Result<String, Error> {
    let p = w.propose("CLOUD-TEAM", 1).await?;
    Ok(request_id(&p))
}

/// A PROPOSED request of acme's buyer-agent with `decision` and
/// `column = value`: a bare row, checked by nothing but the CHECKs below.
fn bare_request(decision: &str, column: &str, value: &str) -> String {
    format!(
        "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, state, \
         created_at, updated_at, {column}) \
         VALUES ('acme', 'buyer-agent', repeat('a', 64), '{decision}', 'PROPOSED', now(), now(), \
                 {value})"
    )
}

// ---- payment requests ---------------------------------------------------------

#[tokio::test]
async fn request_checks_refuse_an_unknown_decision_or_state_and_nothing_bought() -> TestResult {
    on_world(async |w| {
        // As the runtime role: it records every request.
        refuse_each(
            w,
            &[
                (
                    "ck_request_decision_known",
                    Login::Runtime,
                    bare_request("maybe", "quantity", "1"),
                ),
                (
                    "ck_request_amount_positive",
                    Login::Runtime,
                    bare_request("deny", "amount_paise", "0"),
                ),
                (
                    "ck_request_quantity_positive",
                    Login::Runtime,
                    bare_request("deny", "quantity", "0"),
                ),
            ],
        )
        .await;
        // Every state a request may be born in or moved to is a known one, so
        // request_state_transition refuses an unknown state before the CHECK
        // sees it; with the trigger switched off (as the owner), the CHECK is
        // what refuses the runtime role's move.
        let request = pending(w).await?;
        exec(
            w.owner(),
            "ALTER TABLE payment_requests DISABLE TRIGGER request_state_transition",
        )
        .await?;
        assert_sql_refused_by(
            w.pool(),
            &format!("UPDATE payment_requests SET state = 'LIMBO' WHERE id = '{request}'"),
            "ck_request_state_known",
        )
        .await;
        Ok(())
    })
    .await
}

// ---- the unique keys foreign keys point at -----------------------------------
//
// uq_payment_request_purchase, uq_checkout_authority_terms and
// uq_provider_order_terms exist to be the targets of the foreign keys that
// bind an authority to its request's terms, an order to its authority's and
// a payment to its order's. Each holds the row's key and more, so a row that
// repeats one repeats the key too and is refused by the key first. Each test
// drops the narrower keys (as the owner, CASCADE taking the foreign keys
// that point at them) and then repeats a row as the runtime role: what
// refuses it is the named key alone.

/// Drops `narrower` keys of `table` as the owner, then repeats the row whose
/// `column` is `value` as the runtime role: `guard` alone refuses it.
async fn repeated_row_refused_by(
    w: &World,
    table: &str,
    narrower: &[&str],
    column: &str,
    value: &str,
    guard: &str,
) -> TestResult {
    let drops: Vec<String> = narrower
        .iter()
        .map(|k| format!("DROP CONSTRAINT {k} CASCADE"))
        .collect();
    exec(
        w.owner(),
        &format!("ALTER TABLE {table} {}", drops.join(", ")),
    )
    .await?;
    assert_sql_refused_by(
        w.pool(),
        &format!("INSERT INTO {table} SELECT * FROM {table} WHERE {column} = '{value}'"),
        guard,
    )
    .await;
    Ok(())
}

#[tokio::test]
async fn uq_payment_request_purchase_refuses_a_repeated_purchase() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        repeated_row_refused_by(
            w,
            "payment_requests",
            &["pk_payment_requests", "uq_payment_request_id"],
            "id",
            &request,
            "uq_payment_request_purchase",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn uq_checkout_authority_terms_refuses_a_repeated_authority() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
        repeated_row_refused_by(
            w,
            "checkout_authorities",
            &[
                "pk_checkout_authorities",
                "uq_checkout_authority_id",
                "uq_authority_per_request",
            ],
            "id",
            &authority,
            "uq_checkout_authority_terms",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn uq_provider_order_terms_refuses_a_repeated_order() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        repeated_row_refused_by(
            w,
            "provider_orders",
            &[
                "pk_provider_orders",
                "uq_provider_order_id",
                "uq_provider_order_per_authority",
            ],
            "provider_order_id",
            &order,
            "uq_provider_order_terms",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn ck_provider_order_status_known_refuses_an_unknown_status() -> TestResult {
    on_world(async |w| {
        let (_, _, order) = paid_order(w).await?;
        // As the runtime role: it moves an order's status.
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "UPDATE provider_orders SET status = 'REFUNDED' WHERE provider_order_id = '{order}'"
            ),
            "ck_provider_order_status_known",
        )
        .await;
        Ok(())
    })
    .await
}

// ---- delegations ------------------------------------------------------------

#[tokio::test]
async fn delegation_checks_refuse_a_blank_id_no_budget_two_grantors_and_half_a_revocation()
-> TestResult {
    on_world(async |w| {
        // As the runtime role: it writes every hop below a root, and updates
        // hops (spend and revocation). Each child below d-buyer is within it,
        // so delegation_attenuates lets it through to the CHECKs.
        let below_buyer = |id: &str, budget: i64, grantor: &str| {
            format!(
                "INSERT INTO delegations (tenant_id, id, parent_id, grantor_id, grantee_id, \
                 budget_paise, created_at) \
                 VALUES ('acme', '{id}', 'd-buyer', {grantor}, 'procurement-agent', {budget}, now())"
            )
        };
        refuse_each(
            w,
            &[
                (
                    "ck_delegation_id_not_blank",
                    Login::Runtime,
                    below_buyer("  ", 1000, "NULL"),
                ),
                (
                    "ck_delegation_budget_positive",
                    Login::Runtime,
                    below_buyer("d-nothing", 0, "NULL"),
                ),
                (
                    "ck_delegation_one_grantor",
                    Login::Runtime,
                    below_buyer("d-both", 1000, "'finance-lead'"),
                ),
                (
                    "ck_delegation_amounts_not_negative",
                    Login::Runtime,
                    "UPDATE delegations SET spent_paise = -1 \
                     WHERE tenant_id = 'acme' AND id = 'd-buyer'"
                        .to_owned(),
                ),
                (
                    "ck_delegation_revocation_complete",
                    Login::Runtime,
                    "UPDATE delegations SET revoked_at = now() \
                     WHERE tenant_id = 'acme' AND id = 'd-buyer'"
                        .to_owned(),
                ),
                (
                    "ck_delegation_revocation_complete",
                    Login::Runtime,
                    "UPDATE delegations SET revoked_by = 'finance-lead' \
                     WHERE tenant_id = 'acme' AND id = 'd-buyer'"
                        .to_owned(),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

/// `delegation_derived_columns` refuses nothing itself: it overwrites the
/// depth and claim a writer gives a new hop with the derived ones (the
/// parent's depth plus one, the hop's budget). Without it a hop written as
/// shallow as it likes escapes ck_delegation_depth, and one written with a
/// small claim is refused by ck_delegation_claim: so the test reads the
/// derived values back, and sees a ninth hop written at depth 1 refused by
/// the depth limit the derivation feeds.
#[tokio::test]
async fn delegation_derived_columns_overrides_the_depth_and_claim_a_writer_gives() -> TestResult {
    on_world(async |w| {
        // As the runtime role: it writes every hop below a root.
        let hop = |id: &str, parent: &str| {
            format!(
                "INSERT INTO delegations (tenant_id, id, parent_id, grantee_id, budget_paise, \
                 depth, claim_paise, created_at) \
                 VALUES ('acme', '{id}', '{parent}', 'procurement-agent', 1000, 1, 1, now())"
            )
        };
        exec(w.pool(), &hop("d-1", "d-buyer")).await?;
        let written: (i16, i64) = sqlx::query_as(
            "SELECT depth, claim_paise FROM delegations WHERE tenant_id = 'acme' AND id = 'd-1'",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(
            written,
            (2, 1000),
            "a hop's depth and claim are derived, never what the writer gave"
        );
        for n in 2..=7 {
            exec(w.pool(), &hop(&format!("d-{n}"), &format!("d-{}", n - 1))).await?;
        }
        // d-7 is the eighth hop of d-buyer's chain: a ninth is too deep,
        // whatever depth its writer claims.
        assert_sql_refused_by(w.pool(), &hop("d-8", "d-7"), "ck_delegation_depth").await;
        Ok(())
    })
    .await
}

// ---- daily reservations, policy versions, the ledger, log checkpoints --------

#[tokio::test]
async fn daily_spend_refuses_a_negative_reservation_and_a_day_of_no_tenant() -> TestResult {
    on_world(async |w| {
        // As the runtime role: it opens and moves the day's reservations.
        exec(
            w.pool(),
            "INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) \
             VALUES ('acme', '2026-09-04', 'INR', 0, 500000)",
        )
        .await?;
        refuse_each(
            w,
            &[
                (
                    "ck_daily_spend_not_negative",
                    Login::Runtime,
                    "UPDATE daily_spend SET reserved_paise = -1 \
                     WHERE tenant_id = 'acme' AND day = '2026-09-04'"
                        .to_owned(),
                ),
                (
                    "fk_daily_spend_tenant",
                    Login::Runtime,
                    "INSERT INTO daily_spend (tenant_id, day, currency, reserved_paise, cap_paise) \
                     VALUES ('initech', '2026-09-04', 'INR', 0, 500000)"
                        .to_owned(),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn policy_versions_refuse_version_zero_a_policy_not_an_object_and_no_tenant() -> TestResult {
    on_world(async |w| {
        // As the runtime role: it may publish a version (INSERT is granted).
        let version = |tenant: &str, version: i32, policy: &str| {
            format!(
                "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
                 VALUES ('{tenant}', {version}, '{policy}', now())"
            )
        };
        refuse_each(
            w,
            &[
                (
                    "ck_policy_version_positive",
                    Login::Runtime,
                    version("acme", 0, "{}"),
                ),
                (
                    "ck_policy_is_object",
                    Login::Runtime,
                    version("acme", 99, "[]"),
                ),
                (
                    "fk_policy_versions_tenant",
                    Login::Runtime,
                    version("initech", 1, "{}"),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ledger_refuses_entry_zero_a_head_below_zero_and_a_head_of_no_tenant() -> TestResult {
    on_world(async |w| {
        refuse_each(
            w,
            &[
                // As the runtime role: it appends entries and moves heads.
                (
                    "ck_ledger_seq_positive",
                    Login::Runtime,
                    "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
                     VALUES ('acme', 0, 'forged', now(), '{}', repeat('0', 64), repeat('0', 64))"
                        .to_owned(),
                ),
                (
                    "ck_ledger_head_seq",
                    Login::Runtime,
                    "UPDATE ledger_head SET seq = -1 WHERE tenant_id = 'acme'".to_owned(),
                ),
                // As the owner: no other role may insert a head.
                (
                    "fk_ledger_head_tenant",
                    Login::Owner,
                    "INSERT INTO ledger_head (tenant_id, seq, hash) \
                     VALUES ('initech', 0, repeat('0', 64))"
                        .to_owned(),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn log_checkpoints_refuse_a_negative_size_and_a_checkpoint_of_no_tenant() -> TestResult {
    on_world(async |w| {
        // As the runtime role: it keeps each checkpoint it signs.
        let checkpoint = |tenant: &str, size: i64| {
            format!(
                "INSERT INTO log_checkpoints (tenant_id, size, root, note, signed_at) \
                 VALUES ('{tenant}', {size}, repeat('0', 64), 'note', now())"
            )
        };
        refuse_each(
            w,
            &[
                (
                    "ck_log_checkpoint_size",
                    Login::Runtime,
                    checkpoint("acme", -1),
                ),
                (
                    "fk_log_checkpoint_tenant",
                    Login::Runtime,
                    checkpoint("initech", 0),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

/// The queue's TRUNCATE guard shares its function with the row guard, so
/// the refusal carries `ledger_queue_integrated_only`'s name and the
/// operation it refused: TRUNCATE is refused by this trigger alone (the row
/// trigger fires on UPDATE and DELETE only).
#[tokio::test]
async fn ledger_queue_no_truncate_refuses_emptying_the_queue() -> TestResult {
    on_world(async |w| {
        w.propose("USB-HUB", 1).await?;
        // As the owner: the runtime role holds no TRUNCATE anywhere.
        let refused = exec(w.owner(), "TRUNCATE ledger_queue").await;
        let message = refused
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert_refused_by(refused, "ledger_queue_integrated_only");
        assert!(message.contains("TRUNCATE refused"), "{message}");
        Ok(())
    })
    .await
}

// ---- the demo provider's book -------------------------------------------------

#[tokio::test]
async fn demo_provider_orders_refuse_no_amount_and_a_receipt_used_twice() -> TestResult {
    on_world(async |w| {
        // As the runtime role: the demo provider writes its book through the
        // gate's own pool. The book is no tenant table, and is not emptied
        // when a test database is reset for reuse, so every row written
        // here is rolled back.
        let order = |id: &str, amount: i64| {
            format!(
                "INSERT INTO demo_provider.orders \
                 (id, receipt, merchant, amount_paise, currency, created_at) \
                 VALUES ('{id}', 'rcpt_probe', 'cloudco', {amount}, 'INR', 1788429600)"
            )
        };
        assert_sql_refused_by(
            w.pool(),
            &order("order_free", 0),
            "ck_demo_order_amount_positive",
        )
        .await;
        let mut tx = w.pool().begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(order("order_first", 60000)))
            .execute(&mut *tx)
            .await?;
        assert_refused_by(
            sqlx::query(sqlx::AssertSqlSafe(order("order_again", 60000)))
                .execute(&mut *tx)
                .await,
            "uq_demo_order_receipt",
        );
        tx.rollback().await?;
        Ok(())
    })
    .await
}

// ---- API keys and approval notes ----------------------------------------------

/// An API key of acme's, `agent` or `person` its actor (empty: none).
fn key(id: &str, tenant: &str, agent: &str, person: &str, digest: char, kind: &str) -> String {
    let actor = |v: &str| {
        if v.is_empty() {
            "NULL".to_owned()
        } else {
            format!("'{v}'")
        }
    };
    format!(
        "INSERT INTO api_keys (id, tenant_id, agent_id, person_id, key_sha256, created_at, kind) \
         VALUES ('{id}', '{tenant}', {}, {}, repeat('{digest}', 64), now(), '{kind}')",
        actor(agent),
        actor(person)
    )
}

#[tokio::test]
async fn api_key_guards_refuse_a_malformed_key_a_foreign_actor_and_a_changed_binding() -> TestResult
{
    on_world(async |w| {
        // Keys are issued by the onboarding role (the runtime role holds no
        // INSERT on api_keys), which sends every insert below.
        let live = "00000000000000a1";
        exec(
            w.onboard(),
            &key(live, "acme", "", "finance-lead", 'a', "human"),
        )
        .await?;
        let next = "00000000000000a2";
        refuse_each(
            w,
            &[
                (
                    "ck_api_keys_id_shape",
                    Login::Onboarding,
                    key("00000000000000A2", "acme", "buyer-agent", "", 'b', "agent"),
                ),
                (
                    "ck_api_keys_kind",
                    Login::Onboarding,
                    key(next, "acme", "buyer-agent", "", 'b', "auditor"),
                ),
                (
                    "ck_api_keys_one_actor",
                    Login::Onboarding,
                    key(next, "acme", "", "", 'b', "human"),
                ),
                (
                    "fk_api_keys_agent_same_tenant",
                    Login::Onboarding,
                    key(next, "acme", "globex-agent", "", 'b', "agent"),
                ),
                (
                    "fk_api_keys_person_same_tenant",
                    Login::Onboarding,
                    key(next, "acme", "", "globex-finance", 'b', "human"),
                ),
                // As the runtime role: it may set a key's revocation, and
                // nothing else of it.
                (
                    "ck_api_keys_revoked_after_created",
                    Login::Runtime,
                    format!(
                        "UPDATE api_keys SET revoked_at = created_at - interval '1 second' \
                         WHERE id = '{live}'"
                    ),
                ),
                // As the owner: no other role may write a key's kind or actor.
                (
                    "api_keys_kind_immutable",
                    Login::Owner,
                    format!("UPDATE api_keys SET kind = 'auditor' WHERE id = '{live}'"),
                ),
                (
                    "api_keys_binding_immutable",
                    Login::Owner,
                    format!("UPDATE api_keys SET person_id = 'intern' WHERE id = '{live}'"),
                ),
            ],
        )
        .await;
        // A revocation is final: the runtime role revokes, and may not undo it.
        exec(
            w.pool(),
            &format!(
                "UPDATE api_keys SET revoked_at = created_at + interval '1 minute' \
                 WHERE id = '{live}'"
            ),
        )
        .await?;
        assert_sql_refused_by(
            w.pool(),
            &format!("UPDATE api_keys SET revoked_at = NULL WHERE id = '{live}'"),
            "api_keys_binding_immutable",
        )
        .await;
        // A key of no tenant names an actor of no tenant too, so the actor's
        // own key refuses it first; with that one dropped (as the owner), the
        // tenant's key is what refuses the onboarding role's insert.
        exec(
            w.owner(),
            "ALTER TABLE api_keys DROP CONSTRAINT fk_api_keys_agent_same_tenant",
        )
        .await?;
        assert_sql_refused_by(
            w.onboard(),
            &key(next, "initech", "initech-agent", "", 'b', "agent"),
            "fk_api_keys_tenant",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn approval_notes_refuse_another_agents_note_and_a_note_across_tenants() -> TestResult {
    on_world(async |w| {
        let request = pending(w).await?;
        // As the runtime role: it records an agent's note.
        let note = |tenant: &str, agent: &str| {
            format!(
                "INSERT INTO approval_notes (tenant_id, request_id, agent_id, created_at) \
                 VALUES ('{tenant}', '{request}', '{agent}', now())"
            )
        };
        refuse_each(
            w,
            &[
                (
                    "approval_notes_by_requester",
                    Login::Runtime,
                    note("acme", "procurement-agent"),
                ),
                (
                    "fk_approval_notes_request_same_tenant",
                    Login::Runtime,
                    note("globex", "globex-agent"),
                ),
            ],
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn fk_request_body_request_refuses_bytes_of_no_request() -> TestResult {
    on_world(async |w| {
        // request_body_matches_digest refuses bytes of no request too (no
        // request's digest names them); switched off (as the owner), the
        // foreign key is what refuses the runtime role's insert.
        exec(
            w.owner(),
            "ALTER TABLE request_bodies DISABLE TRIGGER request_body_matches_digest",
        )
        .await?;
        assert_sql_refused_by(
            w.pool(),
            "INSERT INTO request_bodies (tenant_id, request_id, body) \
             VALUES ('acme', 'req_none', '\\x7b7d'::bytea)",
            "fk_request_body_request",
        )
        .await;
        Ok(())
    })
    .await
}
