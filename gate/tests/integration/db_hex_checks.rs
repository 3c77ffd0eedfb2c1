//! The hex-digest CHECKs (migrations/20261204000003_hex_checks_by_length.sql),
//! each violated directly with SQL and refused by name, with the values on
//! both sides of every edge: exactly 64 characters of 0-9 and a-f pass; 63
//! or 65, an uppercase digit, a `g`, a trailing newline, a non-ASCII letter
//! or nothing at all are refused.

use crate::support::*;
use sqlx::PgPool;

/// Refused by every hex CHECK: each differs from a valid digest in one way.
fn refused_values() -> Vec<(String, &'static str)> {
    let hex63 = "0123456789abcdef".repeat(4)[..63].to_owned();
    vec![
        (hex63.clone(), "63 characters"),
        (format!("{hex63}ab"), "65 characters"),
        (format!("{hex63}A"), "an uppercase digit"),
        (format!("{hex63}g"), "a letter past f"),
        (format!("{hex63}\n"), "a trailing newline"),
        (format!("{hex63}é"), "a non-ASCII letter"),
        (String::new(), "nothing"),
        ("A".repeat(64), "all uppercase"),
    ]
}

/// 64 lowercase hex characters, distinct for each `n`.
fn valid(n: u32) -> String {
    format!("{n:064x}")
}

/// `template` with `{v}` replaced by `value` as an SQL literal.
fn with(template: &str, value: &str) -> String {
    template.replace("{v}", &format!("'{}'", value.replace('\'', "''")))
}

/// Every refused value refused by `guard`, the `n`th put into
/// `statement(n)` in place of `{v}`.
async fn refuses_every_bad_value(pool: &PgPool, statement: impl Fn(u32) -> String, guard: &str) {
    for (n, (value, what)) in (0..).zip(refused_values()) {
        let result = exec(pool, &with(&statement(n), &value)).await;
        assert!(result.is_err(), "{guard} accepted {what}");
        assert_refused_by(result, guard);
    }
}

/// Every refused value refused by `guard`, and two valid digests accepted.
async fn holds(pool: &PgPool, template: &str, guard: &str) -> TestResult {
    refuses_every_bad_value(pool, |_| template.to_owned(), guard).await;
    for n in [1, 2] {
        let done = exec(pool, &with(template, &valid(n))).await?;
        assert_eq!(done, 1, "{guard} refused a valid digest");
    }
    Ok(())
}

#[tokio::test]
async fn ck_request_body_digest_hex_refuses_anything_but_64_lowercase_hex() -> TestResult {
    on_world(async |w| {
        holds(
            w.pool(),
            "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, decision, reason, state, \
             state_reason, created_at, updated_at) \
             VALUES ('acme', 'buyer-agent', {v}, 'deny', 'SKU_UNKNOWN', 'DENIED', 'SKU_UNKNOWN', \
             now(), now())",
            "ck_request_body_digest_hex",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn ck_request_purchase_digest_hex_refuses_anything_but_64_lowercase_hex() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        holds(
            w.pool(),
            &format!(
                "INSERT INTO payment_requests (tenant_id, agent_id, body_sha256, sku, quantity, \
                 purpose, merchant_id, currency, amount_paise, purchase_digest, decision, reason, \
                 state, state_reason, created_at, updated_at) \
                 SELECT tenant_id, agent_id, body_sha256, sku, quantity, purpose, merchant_id, \
                 currency, amount_paise, {{v}}, 'deny', 'SKU_UNKNOWN', 'DENIED', 'SKU_UNKNOWN', \
                 now(), now() FROM payment_requests WHERE id = '{request}'"
            ),
            "ck_request_purchase_digest_hex",
        )
        .await
    })
    .await
}

#[tokio::test]
async fn ck_authority_digest_hex_refuses_anything_but_64_lowercase_hex() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-STARTER", 1).await?;
        let request = request_id(&p);
        let insert = |n: u32| {
            format!(
                "INSERT INTO checkout_authorities (tenant_id, id, request_id, issued_by, merchant_id, \
                 amount_paise, currency, purchase_digest, policy_version, issued_at, expires_at) \
                 SELECT tenant_id, 'auth-hex-{n}', id, 'finance-lead', merchant_id, amount_paise, \
                 currency, {{v}}, policy_version, now(), now() + interval '5 minutes' \
                 FROM payment_requests WHERE id = '{request}'"
            )
        };
        refuses_every_bad_value(w.pool(), insert, "ck_authority_digest_hex").await;
        // A valid digest passes the CHECK and is then refused by the key
        // that binds an authority to its request's own digest: the CHECK is
        // not what refused the values above for want of a match.
        assert_refused_by(
            exec(w.pool(), &with(&insert(99), &valid(1))).await,
            "fk_authority_matches_request",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_ledger_hashes_hex_refuses_anything_but_64_lowercase_hex_on_either_side() -> TestResult {
    on_world(async |w| {
        // Each row at a seq of its own, far past the chain's.
        let entry = |prev: &str, hash: &str| {
            format!(
                "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
                 SELECT 'acme', 1000000 + count(*), 'forged', now(), '{{}}', {prev}, {hash} \
                 FROM ledger_entries WHERE tenant_id = 'acme' AND seq >= 1000000"
            )
        };
        holds(
            w.pool(),
            &entry("{v}", &format!("'{}'", valid(7))),
            "ck_ledger_hashes_hex",
        )
        .await?;
        // The same values in the entry's own hash.
        let own_hash = entry(&format!("'{}'", valid(7)), "{v}");
        refuses_every_bad_value(w.pool(), |_| own_hash.clone(), "ck_ledger_hashes_hex").await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_ledger_head_hash_hex_refuses_anything_but_64_lowercase_hex() -> TestResult {
    on_world(async |w| {
        let update = "UPDATE ledger_head SET hash = {v} WHERE tenant_id = 'acme'";
        refuses_every_bad_value(w.owner(), |_| update.to_owned(), "ck_ledger_head_hash_hex").await;
        let moved = exec(w.owner(), &with(update, &valid(3))).await?;
        assert_eq!(moved, 1, "ck_ledger_head_hash_hex refused a valid hash");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_api_keys_sha256_hex_refuses_anything_but_64_lowercase_hex() -> TestResult {
    on_world(async |w| {
        let key = |n: u32| {
            format!(
                "INSERT INTO api_keys (id, tenant_id, agent_id, person_id, key_sha256, created_at, kind) \
                 VALUES ('{n:016x}', 'acme', 'buyer-agent', NULL, {{v}}, now(), 'agent')"
            )
        };
        refuses_every_bad_value(w.owner(), key, "ck_api_keys_sha256_hex").await;
        assert_eq!(exec(w.owner(), &with(&key(99), &valid(5))).await?, 1);
        Ok(())
    })
    .await
}
