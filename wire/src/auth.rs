//! Who is calling: bearer API keys, stored as SHA-256 digests.
//!
//! Guarantees:
//! - A key is `sgk_<16 hex: key id>_<64 hex: secret>`, 32 bytes of the OS's
//!   randomness. Only its SHA-256 is stored (`api_keys.key_sha256`), bound to
//!   one tenant and one actor (an agent or a human) by the database.
//! - [`authenticate`] accepts exactly `Authorization: Bearer <key>` (the
//!   scheme's case aside), one header, a key of the exact shape; anything
//!   else is [`AuthFailure::Unauthenticated`] without a database read. The
//!   row is found by its public id and the digests are compared with
//!   `subtle`'s constant-time equality; an unknown id is compared against a
//!   dummy digest so that both paths do the same work. A revoked key fails
//!   like an unknown one. Nothing the client sent is ever echoed.
//! - The [`Caller`]'s tenant and actor are the key row's: no header or body
//!   field can change them.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use gate::service::ServiceError;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use subtle::ConstantTimeEq;

/// The fixed prefix of every key.
pub const KEY_PREFIX: &str = "sgk_";
/// Hex characters of the public key id.
pub const KEY_ID_HEX: usize = 16;
/// Hex characters of the secret part.
pub const KEY_SECRET_HEX: usize = 64;

/// What an actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Agent,
    Human,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Human => "human",
        }
    }
}

/// An authenticated caller: everything comes from the key's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub key_id: String,
    pub tenant: String,
    pub actor: String,
    pub role: Role,
}

/// Why a request is not authenticated.
#[derive(Debug)]
pub enum AuthFailure {
    /// Missing, malformed, unknown or revoked: all answered the same (401).
    Unauthenticated,
    /// The key could not be checked (database down).
    Engine(ServiceError),
}

/// The key id of a well-formed key, or `None`.
pub fn key_id_of(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (hex(id, KEY_ID_HEX) && hex(secret, KEY_SECRET_HEX)).then_some(id)
}

/// The hex SHA-256 of a key, as stored.
pub fn digest_hex(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The bearer token of the one `Authorization` header, if it has the exact shape.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    key_id_of(token).map(|_| token)
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    tenant_id: String,
    agent_id: Option<String>,
    person_id: Option<String>,
    key_sha256: String,
    revoked: bool,
}

/// A digest no key has (`ck_api_keys_sha256_hex` allows it, `issue` never makes it).
const DUMMY_DIGEST: [u8; 32] = [0u8; 32];

/// Checks the request's bearer key.
pub async fn authenticate(pool: &PgPool, headers: &HeaderMap) -> Result<Caller, AuthFailure> {
    match bearer_token(headers) {
        Some(token) => authenticate_token(pool, token).await,
        None => Err(AuthFailure::Unauthenticated),
    }
}

/// Checks a key given as is, without its `Bearer ` scheme.
pub async fn authenticate_token(pool: &PgPool, token: &str) -> Result<Caller, AuthFailure> {
    let Some(key_id) = key_id_of(token) else {
        return Err(AuthFailure::Unauthenticated);
    };
    let row: Option<KeyRow> = sqlx::query_as(
        "SELECT tenant_id, agent_id, person_id, key_sha256, revoked_at IS NOT NULL AS revoked \
         FROM api_keys WHERE id = $1",
    )
    .bind(key_id)
    .fetch_optional(pool)
    .await
    .map_err(|e| AuthFailure::Engine(ServiceError::from_sqlx("authenticating a key", e)))?;
    let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let stored = row
        .as_ref()
        .and_then(|r| hex::decode(&r.key_sha256).ok())
        .and_then(|d| <[u8; 32]>::try_from(d).ok())
        .unwrap_or(DUMMY_DIGEST);
    let matches: bool = presented.ct_eq(&stored).into();
    let Some(row) = row.filter(|r| matches && !r.revoked) else {
        return Err(AuthFailure::Unauthenticated);
    };
    let (actor, role) = match (row.agent_id, row.person_id) {
        (Some(agent), None) => (agent, Role::Agent),
        (None, Some(person)) => (person, Role::Human),
        // ck_api_keys_one_actor makes this unreachable.
        _ => {
            return Err(AuthFailure::Engine(ServiceError::Corrupt {
                what: format!("api key {key_id} names no single actor"),
            }));
        }
    };
    Ok(Caller {
        key_id: key_id.to_owned(),
        tenant: row.tenant_id,
        actor,
        role,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const GOOD: &str =
        "sgk_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn only_the_exact_shape_is_a_key() {
        assert_eq!(key_id_of(GOOD), Some("0123456789abcdef"));
        for bad in [
            "",
            "sgk_",
            &GOOD[1..],
            &GOOD[..GOOD.len() - 1],
            &format!("{GOOD}0"),
            &GOOD.to_uppercase(),
            &GOOD.replace("sgk_", "sgK_"),
            &GOOD.replacen('a', "g", 1),
            &format!("{GOOD}\u{200b}"),
        ] {
            assert_eq!(key_id_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_header_must_be_one_bearer_of_the_exact_shape() {
        let good = format!("Bearer {GOOD}");
        assert_eq!(bearer_token(&headers(&[good.as_bytes()])), Some(GOOD));
        let lower = format!("bearer {GOOD}");
        assert_eq!(bearer_token(&headers(&[lower.as_bytes()])), Some(GOOD));
        for bad in [
            format!("Basic {GOOD}"),
            format!("Bearer  {GOOD}"),
            format!("Bearer {GOOD} "),
            format!("Bearer{GOOD}"),
            GOOD.to_owned(),
            "Bearer".to_owned(),
        ] {
            assert_eq!(bearer_token(&headers(&[bad.as_bytes()])), None, "{bad:?}");
        }
        assert_eq!(bearer_token(&headers(&[b"Bearer \xff\xfe"])), None);
        assert_eq!(
            bearer_token(&headers(&[good.as_bytes(), good.as_bytes()])),
            None,
            "two Authorization headers are refused, not picked from"
        );
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
