//! Issuing, listing and revoking API keys (`harness keys`).
//!
//! Guarantees: a key is issued only for an actor that exists in the tenant
//! (an agent or a human, never both: ids are checked in that order), from 32
//! bytes of the OS's randomness; the key itself is returned once and only its
//! SHA-256 is stored. Revoking sets `revoked_at` once; the database keeps a
//! revocation final (`api_keys_binding_immutable`).

use chrono::{DateTime, Utc};
use rand::Rng as _;
use rand::rand_core::UnwrapErr;
use rand::rngs::SysRng;
use sqlx::PgPool;

use crate::auth::{KEY_PREFIX, Role, digest_hex, key_id_of};

/// What can go wrong managing keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("tenant {tenant:?} has no agent or human {actor:?}: no key issued")]
    ActorUnknown { tenant: String, actor: String },
    #[error("no API key {0:?}")]
    NotFound(String),
    #[error("{0:?} is neither a key id (16 hex) nor a key (sgk_...)")]
    Malformed(String),
    #[error("database error while {action}: {cause}")]
    Database {
        action: &'static str,
        cause: sqlx::Error,
    },
}

fn db(action: &'static str) -> impl FnOnce(sqlx::Error) -> KeyError {
    move |cause| KeyError::Database { action, cause }
}

/// A key just issued: `token` is shown once and never stored.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    pub id: String,
    pub token: String,
    pub tenant: String,
    pub actor: String,
    pub role: Role,
}

/// One stored key, without its digest.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyInfo {
    pub id: String,
    pub tenant_id: String,
    pub actor: String,
    pub role: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A new random key: its id and the whole token.
pub fn new_key() -> (String, String) {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    // As OsRng did: a failure of the OS's randomness is a panic, never a weak key.
    UnwrapErr(SysRng).fill_bytes(&mut id);
    UnwrapErr(SysRng).fill_bytes(&mut secret);
    let id = hex::encode(id);
    let token = format!("{KEY_PREFIX}{id}_{}", hex::encode(secret));
    (id, token)
}

/// Issues a key for `actor` of `tenant`.
pub async fn issue(
    pool: &PgPool,
    tenant: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<IssuedKey, KeyError> {
    let (is_agent, is_person): (bool, bool) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM agents WHERE tenant_id = $1 AND id = $2), \
                EXISTS (SELECT 1 FROM people WHERE tenant_id = $1 AND id = $2)",
    )
    .bind(tenant)
    .bind(actor)
    .fetch_one(pool)
    .await
    .map_err(db("looking up the actor"))?;
    let role = match (is_agent, is_person) {
        (true, _) => Role::Agent,
        (false, true) => Role::Human,
        (false, false) => {
            return Err(KeyError::ActorUnknown {
                tenant: tenant.to_owned(),
                actor: actor.to_owned(),
            });
        }
    };
    let (id, token) = new_key();
    let (agent, person) = match role {
        Role::Agent => (Some(actor), None),
        Role::Human => (None, Some(actor)),
    };
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, agent_id, person_id, key_sha256, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(tenant)
    .bind(agent)
    .bind(person)
    .bind(digest_hex(&token))
    .bind(now)
    .execute(pool)
    .await
    .map_err(db("storing the key"))?;
    Ok(IssuedKey {
        id,
        token,
        tenant: tenant.to_owned(),
        actor: actor.to_owned(),
        role,
    })
}

/// Revokes the key named by its id or by the whole key. `Ok(false)` when it
/// was already revoked (nothing changes).
pub async fn revoke(pool: &PgPool, key: &str, now: DateTime<Utc>) -> Result<bool, KeyError> {
    let id = if key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit()) {
        key.to_ascii_lowercase()
    } else {
        key_id_of(key)
            .map(str::to_owned)
            .ok_or_else(|| KeyError::Malformed(key.chars().take(24).collect()))?
    };
    let revoked: Option<bool> = sqlx::query_scalar(
        "WITH k AS (SELECT id, revoked_at FROM api_keys WHERE id = $1), \
              u AS (UPDATE api_keys SET revoked_at = $2 \
                    WHERE id = $1 AND revoked_at IS NULL RETURNING id) \
         SELECT EXISTS (SELECT 1 FROM u) FROM k",
    )
    .bind(&id)
    .bind(now)
    .fetch_optional(pool)
    .await
    .map_err(db("revoking the key"))?;
    revoked.ok_or(KeyError::NotFound(id))
}

/// The keys of `tenant`, oldest first.
pub async fn list(pool: &PgPool, tenant: &str) -> Result<Vec<KeyInfo>, KeyError> {
    sqlx::query_as(
        "SELECT id, tenant_id, COALESCE(agent_id, person_id) AS actor, \
                CASE WHEN agent_id IS NOT NULL THEN 'agent' ELSE 'human' END AS role, \
                created_at, revoked_at \
         FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await
    .map_err(db("listing keys"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_keys_have_the_shape_and_differ() {
        let (id, token) = new_key();
        assert_eq!(key_id_of(&token), Some(id.as_str()));
        let (id2, token2) = new_key();
        assert_ne!(id, id2);
        assert_ne!(token, token2);
        assert_eq!(digest_hex(&token).len(), 64);
    }
}
