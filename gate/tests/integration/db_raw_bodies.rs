//! The bytes as received: every recorded proposal keeps its body and every
//! applied provider event its body and signature header, byte for byte
//! (hostile bytes included), in the statement that records them. Each guard
//! of `request_bodies` and `provider_event_bodies` is violated with SQL and
//! seen by name, and the gate's role can neither change nor remove them.

use crate::db_roles::assert_denied;
use crate::support::*;
use gate::proposal::MAX_BODY_BYTES;
use gate::reason::{Decision, Reason};
use gate::service::sign_webhook;
use sha2::{Digest, Sha256};

async fn kept_body(w: &World, request: &str) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT body FROM request_bodies WHERE tenant_id = 'acme' AND request_id = $1",
    )
    .bind(request)
    .fetch_optional(w.pool())
    .await
}

/// A request of acme's buyer-agent recorded from `raw`.
async fn recorded(
    w: &World,
    raw: &[u8],
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w.gate.propose("acme", "buyer-agent", raw, None).await?;
    Ok(request_id(&p))
}

#[tokio::test]
async fn a_proposal_is_kept_byte_for_byte_whatever_it_holds() -> TestResult {
    on_world(async |w| {
        let honest = body("CLOUD-STARTER", 1);
        let bidi = "{\"sku\":\"CLOUD-STARTER\",\"quantity\":1,\"purpose\":\"team \u{202E}gpj.exe \u{200B}\"}"
            .as_bytes()
            .to_vec();
        let nul = b"{\"sku\":\"CLOUD-STARTER\",\"quantity\":1,\"purpose\":\"a\0b\"}".to_vec();
        let not_utf8 = b"{\"sku\":\"CLOUD-STARTER\",\"quantity\":1,\"purpose\":\"\xff\xfe\xc3\"}".to_vec();
        let mut exact = b"{\"sku\":\"CLOUD-STARTER\",\"quantity\":1,\"purpose\":\"x\"}".to_vec();
        exact.resize(MAX_BODY_BYTES, b' ');
        for raw in [&honest, &bidi, &nul, &not_utf8, &exact] {
            let request = recorded(w, raw).await?;
            assert_eq!(
                kept_body(w, &request).await?.as_deref(),
                Some(raw.as_slice()),
                "request {request}: the kept bytes differ from those received"
            );
        }
        // A body past the boundary's limit is refused; only its digest is kept.
        let huge = vec![b'{'; 1024 * 1024];
        let p = w.gate.propose("acme", "buyer-agent", &huge, None).await?;
        assert_eq!(p.decision, Decision::Deny(Reason::ProposalTooLarge), "{p:?}");
        let request = request_id(&p);
        assert_eq!(kept_body(w, &request).await?, None);
        let digest: String =
            sqlx::query_scalar("SELECT body_sha256 FROM payment_requests WHERE id = $1")
                .bind(&request)
                .fetch_one(w.pool())
                .await?;
        assert_eq!(digest, hex::encode(Sha256::digest(&huge)));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn request_body_matches_digest_refuses_bytes_the_request_does_not_name() -> TestResult {
    on_world(async |w| {
        // A request whose body was too long to keep: nothing is kept for it.
        let long = vec![b' '; MAX_BODY_BYTES + 1];
        let bare = recorded(w, &long).await?;
        assert_eq!(kept_body(w, &bare).await?, None);
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "INSERT INTO request_bodies (tenant_id, request_id, body) \
                 VALUES ('acme', '{bare}', '\\x7b7d'::bytea)"
            ),
            "request_body_matches_digest",
        )
        .await;
        // Changed in place by the owner.
        let other = recorded(w, &body("SNACK-BOX", 2)).await?;
        assert_sql_refused_by(
            w.owner(),
            &format!("UPDATE request_bodies SET body = body || '\\x20'::bytea WHERE request_id = '{other}'"),
            "request_body_matches_digest",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_request_body_bounded_refuses_a_body_past_the_boundary_limit() -> TestResult {
    on_world(async |w| {
        // The request's own bytes: the digest agrees, the size does not.
        let long = vec![b' '; MAX_BODY_BYTES + 1];
        let request = recorded(w, &long).await?;
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "INSERT INTO request_bodies (tenant_id, request_id, body) \
                 VALUES ('acme', '{request}', '\\x{}'::bytea)",
                hex::encode(&long)
            ),
            "ck_request_body_bounded",
        )
        .await;
        Ok(())
    })
    .await
}

/// A captured purchase; its event's id, body and signature.
async fn captured(
    w: &World,
) -> Result<(String, Vec<u8>, String), Box<dyn std::error::Error + Send + Sync>> {
    let (_, _, order) = paid_order(w).await?;
    let (body, signature) = event(w, "evt_raw_1", "payment.captured", &order, 60_000);
    // The header exactly as sent: upper-case hex and a trailing space still verify.
    let header = format!("{} ", signature.to_uppercase());
    let out = w
        .gate
        .webhook(&body, Some(&header), Some("evt_raw_1"))
        .await?;
    assert!(out.is_ok(), "{out:?}");
    Ok(("evt_raw_1".to_owned(), body, header))
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test]
async fn an_applied_event_keeps_its_body_and_signature_header_as_received() -> TestResult {
    on_world(async |w| {
        let (event_id, body, header) = captured(w).await?;
        let (kept_body, kept_signature): (Vec<u8>, Vec<u8>) = sqlx::query_as(
            "SELECT body, signature FROM provider_event_bodies WHERE event_id_sha256 = $1",
        )
        .bind(hex_sha256(event_id.as_bytes()))
        .fetch_one(w.pool())
        .await?;
        assert_eq!(kept_body, body);
        assert_eq!(kept_signature, header.as_bytes());
        // The log names both digests, so a copy can be checked against it.
        let entry: String = sqlx::query_scalar(
            "SELECT entry FROM ledger_entries WHERE kind = 'provider_event' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        let entry: serde_json::Value = serde_json::from_str(&entry)?;
        assert_eq!(entry["body"]["body_sha256"], hex_sha256(&body));
        assert_eq!(entry["body"]["signature_sha256"], hex_sha256(header.as_bytes()));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn provider_event_body_matches_digest_refuses_bytes_the_event_does_not_name() -> TestResult {
    on_world(async |w| {
        let (event_id, body, _) = captured(w).await?;
        let digest = hex_sha256(event_id.as_bytes());
        assert_sql_refused_by(
            w.owner(),
            &format!(
                "UPDATE provider_event_bodies SET body = body || '\\x20'::bytea \
                 WHERE event_id_sha256 = '{digest}'"
            ),
            "provider_event_body_matches_digest",
        )
        .await;
        exec(
            w.owner(),
            &format!("DELETE FROM provider_event_bodies WHERE event_id_sha256 = '{digest}'"),
        )
        .await?;
        // The right bytes named for another tenant, then the wrong bytes.
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "INSERT INTO provider_event_bodies (tenant_id, event_id_sha256, body, signature) \
                 VALUES ('globex', '{digest}', '\\x{}'::bytea, '\\x00'::bytea)",
                hex::encode(&body)
            ),
            "provider_event_body_matches_digest",
        )
        .await;
        assert_sql_refused_by(
            w.pool(),
            &format!(
                "INSERT INTO provider_event_bodies (tenant_id, event_id_sha256, body, signature) \
                 VALUES ('acme', '{digest}', '\\x7b7d'::bytea, '\\x00'::bytea)"
            ),
            "provider_event_body_matches_digest",
        )
        .await;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ck_provider_event_body_bounded_refuses_a_body_or_header_past_the_limit() -> TestResult {
    on_world(async |w| {
        let (event_id, _, _) = captured(w).await?;
        let digest = hex_sha256(event_id.as_bytes());
        for (body, signature) in [("repeat('a', 65537)", "'\\x00'::bytea"), ("'{}'", "decode(repeat('61', 1025), 'hex')")] {
            assert_sql_refused_by(
                w.pool(),
                &format!(
                    "INSERT INTO provider_event_bodies (tenant_id, event_id_sha256, body, signature) \
                     VALUES ('acme', '{digest}x', convert_to({body}, 'UTF8'), {signature})"
                ),
                "ck_provider_event_body_bounded",
            )
            .await;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_runtime_role_can_neither_change_nor_remove_what_was_received() -> TestResult {
    on_world(async |w| {
        let request = recorded(w, &body("CLOUD-STARTER", 1)).await?;
        let (event_id, _, _) = captured(w).await?;
        let digest = hex_sha256(event_id.as_bytes());
        for (sql, what) in [
            (
                format!("UPDATE request_bodies SET body = '\\x7b7d' WHERE request_id = '{request}'"),
                "UPDATE request_bodies",
            ),
            (
                format!("DELETE FROM request_bodies WHERE request_id = '{request}'"),
                "DELETE FROM request_bodies",
            ),
            (
                format!("UPDATE provider_event_bodies SET signature = '\\x00' WHERE event_id_sha256 = '{digest}'"),
                "UPDATE provider_event_bodies",
            ),
            (
                format!("DELETE FROM provider_event_bodies WHERE event_id_sha256 = '{digest}'"),
                "DELETE FROM provider_event_bodies",
            ),
            ("TRUNCATE request_bodies".to_owned(), "TRUNCATE request_bodies"),
        ] {
            assert_denied(exec(w.pool(), &sql).await, what);
        }
        assert!(kept_body(w, &request).await?.is_some());
        Ok(())
    })
    .await
}

/// `body`, a JSON object, with a `padding` member that makes it exactly
/// `size` bytes long.
fn padded(body: &[u8], size: usize) -> Result<Vec<u8>, Box<dyn std::error::Error + Send + Sync>> {
    let mut value: serde_json::Value = serde_json::from_slice(body)?;
    value["padding"] = serde_json::Value::String(String::new());
    let bare = serde_json::to_vec(&value)?.len();
    value["padding"] = serde_json::Value::String("x".repeat(size - bare));
    let out = serde_json::to_vec(&value)?;
    assert_eq!(out.len(), size);
    Ok(out)
}

/// An event body as long as the HTTP service's limit (64 KiB) is kept as
/// received; one a byte longer (the gate's own call takes any length) is
/// applied all the same and recorded by its digest only.
#[tokio::test]
async fn an_event_body_is_kept_up_to_64_kib_and_past_that_by_its_digest_only() -> TestResult {
    on_world(async |w| {
        // 64 KiB, written out: the limit is the HTTP service's and
        // `ck_provider_event_body_bounded`'s, not whatever the gate's constant says.
        const LIMIT: usize = 65_536;
        for size in [LIMIT, LIMIT + 1] {
            let (_, _, order) = paid_order(w).await?;
            let event_id = format!("evt_sized_{size}");
            let (body, _) = event(w, &event_id, "payment.captured", &order, 60_000);
            let body = padded(&body, size)?;
            let signature = sign_webhook(SECRET, &body);
            let out = w
                .gate
                .webhook(&body, Some(&signature), Some(&event_id))
                .await?;
            assert!(out.is_ok(), "{size} bytes: {out:?}");
            let kept: Option<Vec<u8>> = sqlx::query_scalar(
                "SELECT body FROM provider_event_bodies WHERE event_id_sha256 = $1",
            )
            .bind(hex_sha256(event_id.as_bytes()))
            .fetch_optional(w.pool())
            .await?;
            if size <= LIMIT {
                assert_eq!(kept.as_deref(), Some(body.as_slice()), "{size} bytes");
            } else {
                assert_eq!(kept, None, "{size} bytes");
            }
        }
        Ok(())
    })
    .await
}
