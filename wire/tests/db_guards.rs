//! Every named guard of `migrations/20261201000020_api_keys.sql` and
//! `migrations/20261206000900_auditor_keys.sql`, violated
//! directly with SQL and refused by name, plus a check that no constraint of
//! those tables goes untested.

mod support;

use std::collections::BTreeSet;

use sqlx::PgPool;
use support::*;

const DIGEST_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DIGEST_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn key_insert(id: &str, tenant: &str, agent: &str, person: &str, digest: &str) -> String {
    let opt = |v: &str| {
        if v.is_empty() {
            "NULL".to_owned()
        } else {
            format!("'{v}'")
        }
    };
    let kind = if agent.is_empty() { "human" } else { "agent" };
    format!(
        "INSERT INTO api_keys (id, tenant_id, agent_id, person_id, key_sha256, created_at, kind) \
         VALUES ('{id}', '{tenant}', {}, {}, '{digest}', now(), '{kind}')",
        opt(agent),
        opt(person)
    )
}

async fn assert_refused_by(pool: &PgPool, sql: &str, name: &str) {
    match sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await {
        Ok(_) => panic!("the database accepted {sql:?}; {name} should refuse it"),
        Err(sqlx::Error::Database(e)) => assert_eq!(
            e.constraint(),
            Some(name),
            "{sql:?} was refused, but not by {name}: {e}"
        ),
        Err(e) => panic!("{sql:?} failed without a database refusal: {e}"),
    }
}

#[tokio::test]
async fn every_api_key_guard_refuses_its_violation_by_name() -> TestResult {
    let Some(s) = served().await? else {
        return Ok(());
    };
    // The violations run as the owner: the application role may not even
    // try most of them, and each must be refused by the guard's own name.
    let pool = s.db.owner_pool();
    sqlx::query(sqlx::AssertSqlSafe(key_insert(
        "0000000000000001",
        "acme",
        "buyer-agent",
        "",
        DIGEST_A,
    )))
    .execute(pool)
    .await?;
    let cases: Vec<(String, &str)> = vec![
        (key_insert("0000000000000001", "acme", "buyer-agent", "", DIGEST_B), "pk_api_keys"),
        (key_insert("0000000000000002", "nope", "x", "", DIGEST_B), "fk_api_keys_tenant"),
        (key_insert("0000000000000002", "acme", "globex-agent", "", DIGEST_B), "fk_api_keys_agent_same_tenant"),
        (key_insert("0000000000000002", "acme", "", "globex-finance", DIGEST_B), "fk_api_keys_person_same_tenant"),
        (key_insert("0000000000000002", "acme", "", "", DIGEST_B), "ck_api_keys_one_actor"),
        (key_insert("0000000000000002", "acme", "buyer-agent", "finance-lead", DIGEST_B), "ck_api_keys_one_actor"),
        (key_insert("ABCDEF0000000002", "acme", "buyer-agent", "", DIGEST_B), "ck_api_keys_id_shape"),
        (key_insert("0000000000000002", "acme", "buyer-agent", "", "sgk_plaintext_key"), "ck_api_keys_sha256_hex"),
        (key_insert("0000000000000002", "acme", "buyer-agent", "", DIGEST_A), "uq_api_keys_sha256"),
        (
            "UPDATE api_keys SET revoked_at = created_at - interval '1 second' WHERE id = '0000000000000001'".to_owned(),
            "ck_api_keys_revoked_after_created",
        ),
        (key_insert("0000000000000002", "acme", "buyer-agent", "", DIGEST_B).replace("'agent')", "'auditor')"), "ck_api_keys_kind"),
        (key_insert("0000000000000002", "acme", "", "finance-lead", DIGEST_B).replace("'human')", "'agent')"), "ck_api_keys_kind"),
        (key_insert("0000000000000002", "acme", "", "finance-lead", DIGEST_B).replace("'human')", "'root')"), "ck_api_keys_kind"),
        (
            "UPDATE api_keys SET kind = 'human' WHERE id = '0000000000000001'".to_owned(),
            "api_keys_kind_immutable",
        ),
        (
            "UPDATE api_keys SET agent_id = 'procurement-agent' WHERE id = '0000000000000001'".to_owned(),
            "api_keys_binding_immutable",
        ),
        (
            format!("UPDATE api_keys SET key_sha256 = '{DIGEST_B}' WHERE id = '0000000000000001'"),
            "api_keys_binding_immutable",
        ),
    ];
    let mut tested = BTreeSet::new();
    for (sql, name) in &cases {
        assert_refused_by(pool, sql, name).await;
        tested.insert((*name).to_owned());
    }
    // A revocation is final: revoked, it cannot be lifted or moved.
    sqlx::query(
        "UPDATE api_keys SET revoked_at = now() + interval '1 hour' WHERE id = '0000000000000001'",
    )
    .execute(pool)
    .await?;
    assert_refused_by(
        pool,
        "UPDATE api_keys SET revoked_at = NULL WHERE id = '0000000000000001'",
        "api_keys_binding_immutable",
    )
    .await;
    assert_refused_by(
        pool,
        "UPDATE api_keys SET revoked_at = now() + interval '2 hours' WHERE id = '0000000000000001'",
        "api_keys_binding_immutable",
    )
    .await;

    // Approval notes.
    let agent = s.key("acme", "buyer-agent").await?;
    let (status, p) = answer(
        s.post("/v1/requests", Some(&agent), &proposal("CLOUD-TEAM", 1))
            .await?,
    )
    .await?;
    assert_eq!(status, 202, "{p}");
    let request = p["request_id"].as_str().ok_or("no id")?.to_owned();
    let note = |tenant: &str, agent: &str| {
        format!(
            "INSERT INTO approval_notes (tenant_id, request_id, agent_id, created_at) \
             VALUES ('{tenant}', '{request}', '{agent}', now())"
        )
    };
    sqlx::query(sqlx::AssertSqlSafe(note("acme", "buyer-agent")))
        .execute(pool)
        .await?;
    let notes: Vec<(String, &str)> = vec![
        (note("acme", "buyer-agent"), "pk_approval_notes"),
        (
            note("globex", "globex-agent"),
            "fk_approval_notes_request_same_tenant",
        ),
        (
            note("acme", "procurement-agent").replace(&format!("'{request}'"), "'req_x'"),
            "fk_approval_notes_request_same_tenant",
        ),
    ];
    for (sql, name) in &notes {
        assert_refused_by(pool, sql, name).await;
        tested.insert((*name).to_owned());
    }
    sqlx::query("DELETE FROM approval_notes")
        .execute(pool)
        .await?;
    assert_refused_by(
        pool,
        &note("acme", "procurement-agent"),
        "approval_notes_by_requester",
    )
    .await;
    assert_refused_by(
        pool,
        &note("acme", "globex-agent"),
        "approval_notes_by_requester",
    )
    .await;
    sqlx::query(sqlx::AssertSqlSafe(note("acme", "buyer-agent")))
        .execute(pool)
        .await?;
    assert_refused_by(
        pool,
        "UPDATE approval_notes SET agent_id = 'renewals-agent'",
        "approval_notes_by_requester",
    )
    .await;
    tested.insert("api_keys_binding_immutable".to_owned());
    tested.insert("approval_notes_by_requester".to_owned());

    // No constraint or trigger of these tables goes without a case above.
    let declared: BTreeSet<String> = sqlx::query_scalar(
        "SELECT conname::text FROM pg_constraint WHERE conrelid::regclass::text = ANY($1) \
         UNION SELECT tgname::text FROM pg_trigger WHERE NOT tgisinternal \
           AND tgrelid::regclass::text = ANY($1)",
    )
    .bind(&["api_keys", "approval_notes"][..])
    .fetch_all(pool)
    .await?
    .into_iter()
    .collect();
    assert_eq!(declared, tested, "guards and their cases differ");
    s.drop().await
}

/// Only digests are stored: the key itself appears in no column.
#[tokio::test]
async fn an_issued_key_is_stored_only_as_its_digest() -> TestResult {
    let Some(s) = served().await? else {
        return Ok(());
    };
    let issued = s
        .gate
        .issue_key("acme", "buyer-agent", s.gate.now())
        .await?;
    let row: String =
        sqlx::query_scalar("SELECT row_to_json(k)::text FROM api_keys k WHERE id = $1")
            .bind(&issued.id)
            .fetch_one(s.pool())
            .await?;
    assert!(
        !row.contains(&issued.token[21..]),
        "the secret is stored: {row}"
    );
    assert!(row.contains(&gate::service::api_keys::digest_hex(&issued.token)));
    // Keys for actors the tenant does not have are refused.
    for (tenant, actor) in [
        ("acme", "globex-agent"),
        ("acme", "nobody"),
        ("nope", "buyer-agent"),
    ] {
        assert!(matches!(
            s.gate.issue_key(tenant, actor, s.gate.now()).await,
            Err(gate::service::api_keys::KeyError::ActorUnknown { .. })
        ));
    }
    let listed = gate::service::api_keys::list(s.pool(), "acme").await?;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].actor.as_str(), listed[0].role.as_str()),
        ("buyer-agent", "agent")
    );
    s.drop().await
}
