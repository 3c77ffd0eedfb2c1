//! Bearer API keys: their shape, issuing, listing, revoking, and who a
//! key belongs to.
//!
//! Guarantees:
//! - A key is `sgk_<16 hex: key id>_<64 hex: secret>`, from 32 bytes of the
//!   OS's randomness (a failure of it issues no key). Only its SHA-256 is
//!   stored (`api_keys.key_sha256`), bound to one tenant and one actor (an
//!   agent or a human) by the database; the key itself is returned once.
//! - A key is issued only for an actor that exists in the tenant (an agent
//!   or a human, never both: ids are checked in that order). Its kind
//!   ([`Role`], stored as plain text in `api_keys.kind`) is the actor's:
//!   `agent` or `human`, or `auditor` for a person's read-only key
//!   ([`issue_auditor`]), which the service lets read its tenant's pages and
//!   call no gate operation. Revoking sets
//!   `revoked_at` once; the database keeps a revocation final
//!   (`api_keys_binding_immutable`).
//! - [`authenticate`] finds the row by the key's public id and compares the
//!   digests with `subtle`'s constant-time equality; an unknown id is
//!   compared against a dummy digest so that both paths do the same work. A
//!   malformed, unknown or revoked key is `None`, all alike. The
//!   [`Caller`]'s tenant and actor are the key row's.
//! - Each key row carries the gate's MAC (`row_mac`, keyed with the ledger
//!   key, which the database never holds) over its id, tenant, actor kind
//!   (as text), actor and digest, written by [`issue`]. A row whose MAC does
//!   not verify is no key ([`KeyCheck::Forged`]): a row a database login
//!   inserted or rebound authenticates no one.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use subtle::ConstantTimeEq;

use super::error::ServiceError;
use super::ledger::{self, LedgerKey};

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
    /// A person's read-only key: the tenant's pages, no gate operation.
    Auditor,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Human => "human",
            Role::Auditor => "auditor",
        }
    }

    /// The kind as stored (`api_keys.kind`).
    pub fn from_kind(kind: &str) -> Option<Role> {
        match kind {
            "agent" => Some(Role::Agent),
            "human" => Some(Role::Human),
            "auditor" => Some(Role::Auditor),
            _ => None,
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

#[derive(sqlx::FromRow)]
struct KeyRow {
    tenant_id: String,
    agent_id: Option<String>,
    person_id: Option<String>,
    kind: String,
    key_sha256: String,
    revoked: bool,
    row_mac: Option<String>,
}

impl KeyRow {
    /// Whether the row's MAC is the one the gate gives for its binding.
    fn mac_holds(&self, key: &LedgerKey, key_id: &str) -> bool {
        let actor = match (&self.agent_id, &self.person_id) {
            (Some(agent), None) => agent.as_str(),
            (None, Some(person)) => person.as_str(),
            _ => return false,
        };
        let fields = ledger::api_key_mac_fields(
            key_id,
            &self.tenant_id,
            &self.kind,
            actor,
            &self.key_sha256,
        );
        ledger::row_mac_holds(
            key,
            "api_keys",
            &ledger::as_strs(&fields),
            self.row_mac.as_deref(),
        )
    }
}

/// What a presented key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// A key the gate issued, live: its caller.
    Caller(Caller),
    /// Malformed, unknown or revoked, all alike.
    Unknown,
    /// The digest matches a live row whose MAC does not verify: a row the
    /// gate never wrote. No key; the tenant's ledger records the attempt.
    Forged { tenant: String, key_id: String },
}

/// A digest no key has (`ck_api_keys_sha256_hex` allows it, `issue` never makes it).
const DUMMY_DIGEST: [u8; 32] = [0u8; 32];

/// What a key given as is (without its `Bearer ` scheme) is: the caller
/// it belongs to, [`KeyCheck::Unknown`] for a malformed, unknown or revoked
/// key, all alike, or [`KeyCheck::Forged`] for a row whose MAC does not
/// verify under `key`.
pub async fn authenticate(
    pool: &PgPool,
    key: &LedgerKey,
    token: &str,
) -> Result<KeyCheck, ServiceError> {
    let Some(key_id) = key_id_of(token) else {
        return Ok(KeyCheck::Unknown);
    };
    let row: Option<KeyRow> = sqlx::query_as(
        "SELECT tenant_id, agent_id, person_id, kind, key_sha256, revoked_at IS NOT NULL AS revoked, \
         row_mac FROM api_keys WHERE id = $1",
    )
    .bind(key_id)
    .fetch_optional(pool)
    .await
    .map_err(|e| ServiceError::from_sqlx("authenticating a key", e))?;
    let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let stored = row
        .as_ref()
        .and_then(|r| hex::decode(&r.key_sha256).ok())
        .and_then(|d| <[u8; 32]>::try_from(d).ok())
        .unwrap_or(DUMMY_DIGEST);
    let matches: bool = presented.ct_eq(&stored).into();
    let Some(row) = row.filter(|r| matches && !r.revoked) else {
        return Ok(KeyCheck::Unknown);
    };
    if !row.mac_holds(key, key_id) {
        return Ok(KeyCheck::Forged {
            tenant: row.tenant_id,
            key_id: key_id.to_owned(),
        });
    }
    let (actor, role) = match (row.agent_id, row.person_id, Role::from_kind(&row.kind)) {
        (Some(agent), None, Some(Role::Agent)) => (agent, Role::Agent),
        (None, Some(person), Some(role @ (Role::Human | Role::Auditor))) => (person, role),
        // ck_api_keys_one_actor and ck_api_keys_kind make this unreachable.
        _ => {
            return Err(ServiceError::Corrupt {
                what: format!("api key {key_id} names no single actor of its kind"),
            });
        }
    };
    Ok(KeyCheck::Caller(Caller {
        key_id: key_id.to_owned(),
        tenant: row.tenant_id,
        actor,
        role,
    }))
}

/// What can go wrong managing keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("tenant {tenant:?} has no agent or human {actor:?}: no key issued")]
    ActorUnknown { tenant: String, actor: String },
    #[error(
        "tenant {tenant:?} has no human {actor:?}: an auditor's key is a person's; no key issued"
    )]
    AuditorNotAPerson { tenant: String, actor: String },
    #[error("no API key {0:?}")]
    NotFound(String),
    #[error("{0:?} is neither a key id (16 hex) nor a key (sgk_...)")]
    Malformed(String),
    #[error("the operating system's random source failed: {0}; no key issued")]
    Randomness(String),
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
pub fn new_key() -> Result<(String, String), KeyError> {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut id).map_err(|e| KeyError::Randomness(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| KeyError::Randomness(e.to_string()))?;
    let id = hex::encode(id);
    let token = format!("{KEY_PREFIX}{id}_{}", hex::encode(secret));
    Ok((id, token))
}

/// Issues a key for `actor` of `tenant` (an agent's or a human's, as the
/// actor is), its row MACed with `key` (the gate's ledger key): the gate
/// authenticates only rows it can verify.
pub async fn issue(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<IssuedKey, KeyError> {
    issue_kind(pool, key, tenant, actor, false, now).await
}

/// Issues an auditor's key (read-only: pages, no gate operation) for the
/// person `actor` of `tenant`.
pub async fn issue_auditor(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<IssuedKey, KeyError> {
    issue_kind(pool, key, tenant, actor, true, now).await
}

async fn issue_kind(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: &str,
    actor: &str,
    auditor: bool,
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
        (true, _) if auditor => {
            return Err(KeyError::AuditorNotAPerson {
                tenant: tenant.to_owned(),
                actor: actor.to_owned(),
            });
        }
        (true, _) => Role::Agent,
        (false, true) if auditor => Role::Auditor,
        (false, true) => Role::Human,
        (false, false) => {
            return Err(KeyError::ActorUnknown {
                tenant: tenant.to_owned(),
                actor: actor.to_owned(),
            });
        }
    };
    let (id, token) = new_key()?;
    let (agent, person) = match role {
        Role::Agent => (Some(actor), None),
        Role::Human | Role::Auditor => (None, Some(actor)),
    };
    let digest = digest_hex(&token);
    let fields = ledger::api_key_mac_fields(&id, tenant, role.as_str(), actor, &digest);
    let row_mac = ledger::row_mac(key, "api_keys", &ledger::as_strs(&fields));
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, agent_id, person_id, key_sha256, created_at, kind, \
         row_mac) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&id)
    .bind(tenant)
    .bind(agent)
    .bind(person)
    .bind(&digest)
    .bind(now)
    .bind(role.as_str())
    .bind(&row_mac)
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
                kind AS role, \
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

    const GOOD: &str =
        "sgk_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

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
    fn new_keys_have_the_shape_and_differ() {
        let (id, token) = new_key().unwrap();
        assert_eq!(key_id_of(&token), Some(id.as_str()));
        let (id2, token2) = new_key().unwrap();
        assert_ne!(id, id2);
        assert_ne!(token, token2);
        assert_eq!(digest_hex(&token).len(), 64);
    }
}
