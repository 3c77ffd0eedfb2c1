//! Who is calling, relative to one tenant.
//!
//! Guarantees: an actor is resolved against the tenant named by the call (or
//! by the row the call is about), never against whichever tenant happens to
//! know the id. The refusals are, in order: `TENANT_UNKNOWN` (no such
//! tenant), `TENANT_MISMATCH` (the id exists only in another tenant),
//! `ACTOR_UNKNOWN` (the id exists nowhere). A tenant or actor that is not an
//! identifier ([`crate::ident`]) is unknown and never reaches SQL. What the caller may then do with
//! the identity is decided by each operation, not here.

use sqlx::PgConnection;

use super::error::{Ctx, ServiceError};
use crate::ident::is_ident;
use crate::reason::Reason;

/// A known actor of the tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Agent,
    Person {
        may_approve: bool,
        is_operator: bool,
    },
}

impl Who {
    pub fn may_approve(self) -> bool {
        matches!(
            self,
            Who::Person {
                may_approve: true,
                ..
            }
        )
    }
}

/// What the database knows of one actor id, relative to one tenant.
#[derive(sqlx::FromRow)]
pub(crate) struct Lookup {
    tenant_known: bool,
    is_agent: bool,
    may_approve: Option<bool>,
    is_operator: Option<bool>,
    elsewhere: bool,
}

impl Lookup {
    /// The identity found, or the refusal, in the module's order.
    pub(crate) fn verdict(&self) -> Result<Who, Reason> {
        if !self.tenant_known {
            Err(Reason::TenantUnknown)
        } else if self.is_agent {
            Ok(Who::Agent)
        } else if let Some(may_approve) = self.may_approve {
            Ok(Who::Person {
                may_approve,
                is_operator: self.is_operator.unwrap_or(false),
            })
        } else if self.elsewhere {
            Err(Reason::TenantMismatch)
        } else {
            Err(Reason::ActorUnknown)
        }
    }
}

/// Resolves `actor` inside `tenant`. A tenant or actor that is not an
/// identifier is unknown without asking the database.
pub(crate) async fn resolve(
    conn: &mut PgConnection,
    tenant: &str,
    actor: &str,
) -> Result<Result<Who, Reason>, ServiceError> {
    if let Some(refusal) = refused_unasked(conn, tenant, actor).await? {
        return Ok(Err(refusal));
    }
    // `caller_lookup` (migrations/20261204000002_caller_lookup.sql) is the
    // one lookup; `proposal_state` makes a proposal's through it too.
    let found: Lookup = sqlx::query_as(
        "SELECT tenant_known, is_agent, may_approve, is_operator, elsewhere \
         FROM caller_lookup($1, $2)",
    )
    .bind(tenant)
    .bind(actor)
    .fetch_one(&mut *conn)
    .await
    .ctx("resolving the caller")?;
    Ok(found.verdict())
}

/// The refusal of a pair that is never looked up, because the actor or the
/// tenant is not an identifier (an actor's refusal still says whether the
/// tenant exists); `None` when the pair may be looked up.
pub(crate) async fn refused_unasked(
    conn: &mut PgConnection,
    tenant: &str,
    actor: &str,
) -> Result<Option<Reason>, ServiceError> {
    if !is_ident(actor) {
        return Ok(Some(if tenant_exists(conn, tenant).await? {
            Reason::ActorUnknown
        } else {
            Reason::TenantUnknown
        }));
    }
    if !is_ident(tenant) {
        return Ok(Some(Reason::TenantUnknown));
    }
    Ok(None)
}

/// True when `tenant` exists (never for a string that is not an identifier).
pub(crate) async fn tenant_exists(
    conn: &mut PgConnection,
    tenant: &str,
) -> Result<bool, ServiceError> {
    if !is_ident(tenant) {
        return Ok(false);
    }
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)")
        .bind(tenant)
        .fetch_one(conn)
        .await
        .ctx("looking up the tenant")
}
