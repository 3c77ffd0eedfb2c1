//! `grant` and `revoke`: delegation hops, made by the tenant's operator.
//!
//! Guarantees: these are operator calls, never reachable through the
//! agent-facing `propose`. No argument names a grantor: the grantor of a
//! root hop is the caller, who must be a human of the tenant who may
//! approve; a hop below names its parent, which must be a live delegation of
//! the same tenant (a name that is no delegation of the tenant, a person's
//! included, is `DELEGATION_MISSING`), and its caller must be a human who
//! may approve or operate; any other caller is
//! `DELEGATION_GRANTOR_NOT_PERMITTED`, as is a revoked or expired parent.
//! The grantee must be an agent of the tenant. A hop's expiry is an instant
//! from 1970 to 9999 (`DELEGATION_INVALID` otherwise). A grant that widens
//! its parent (budget, skus, expiry) is `DELEGATION_WIDENS`. The allocation
//! is taken from the parent by the DATABASE (`delegation_attenuates`) in the
//! insert itself, and oversubscription of the parent is refused by
//! `ck_delegation_budget_partitioned`: the gate lets the database decide it,
//! so the refusal (`DELEGATION_BUDGET_EXHAUSTED`) always carries that
//! constraint's name. Revoking marks one hop revoked and touches no other
//! row but its parent's allocation: the branch below it stops because
//! authority is re-derived from the whole chain at every spend, not because
//! descendants were edited. Revoking always succeeds for a human who may:
//! a branch whose spend a capture booked NEEDS_REVIEW carried past its
//! budget returns nothing to its parent.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{Connection, PgConnection};

use super::error::{Ctx, ServiceError};
use super::identity::{self, Who};
use super::ledger::{self, Entry};
use super::lock::{BranchKey, lock_all};
use super::rows::{BranchRow, DELEGATION_COLUMNS, DelegationRow};
use super::world;
use super::{Gate, Outcome};
use crate::delegation::{GrantTerms, Grantor, MAX_CHAIN_HOPS, check_grant};
use crate::grant::HopTerms;
use crate::ident::is_ident;
use crate::policy::is_operator_instant;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};

/// Where a new hop hangs: a root granted by a human, or a hop below a parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Under<'a> {
    /// A root hop; the human who grants it.
    Root { grantor: &'a str },
    /// A hop carved from this delegation.
    Parent(&'a str),
}

/// Inserts a hop; a refusal by the database comes back as a reason and the
/// name of the constraint or trigger that refused.
pub(crate) async fn insert_delegation(
    conn: &mut PgConnection,
    tenant: &str,
    grant: &HopTerms,
    under: Under<'_>,
    now: DateTime<Utc>,
) -> Result<Result<(), (Reason, String)>, ServiceError> {
    let mut savepoint = conn.begin().await.ctx("opening a savepoint")?;
    let (parent, grantor) = match under {
        Under::Root { grantor } => (None, Some(grantor)),
        Under::Parent(parent) => (Some(parent), None),
    };
    let inserted = sqlx::query(
        "INSERT INTO delegations (tenant_id, id, parent_id, grantor_id, grantee_id, budget_paise, \
         skus, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(tenant)
    .bind(&grant.id)
    .bind(parent)
    .bind(grantor)
    .bind(&grant.to)
    .bind(grant.budget_paise)
    .bind(&grant.skus)
    .bind(grant.expires_at)
    .bind(now)
    .execute(&mut *savepoint)
    .await;
    match inserted {
        Ok(_) => {
            savepoint.commit().await.ctx("releasing a savepoint")?;
            Ok(Ok(()))
        }
        Err(e) => {
            let refusal = e.as_database_error().and_then(|db| {
                let name = db.constraint()?.to_owned();
                let reason = match name.as_str() {
                    "ck_delegation_budget_partitioned" => Reason::DelegationBudgetExhausted,
                    "delegation_attenuates" if db.message().contains("is revoked") => {
                        Reason::DelegationRevoked
                    }
                    "delegation_attenuates" if db.message().contains("may approve") => {
                        Reason::DelegationGrantorNotPermitted
                    }
                    "delegation_attenuates" | "ck_delegation_budget_positive" => {
                        Reason::DelegationWidens
                    }
                    "ck_delegation_depth" => Reason::DelegationDepthExceeded,
                    // A concurrent twin took the id first.
                    "pk_delegations" => Reason::DelegationInvalid,
                    "fk_delegation_grantor_same_tenant"
                    | "fk_delegation_parent_same_tenant"
                    | "delegation_root_by_onboarding" => Reason::DelegationGrantorNotPermitted,
                    _ => return None,
                };
                Some((reason, name))
            });
            match refusal {
                Some(refusal) => {
                    savepoint.rollback().await.ctx("rolling back a savepoint")?;
                    Ok(Err(refusal))
                }
                None => Err(ServiceError::from_sqlx("writing a delegation", e)),
            }
        }
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// `caller` grants a hop: a root hop when `parent` is `None` (the caller
    /// is its grantor), else a hop below the delegation `parent`. The
    /// outcome's id is the delegation id; a refusal by the database names
    /// its constraint in `constraint`.
    pub async fn grant(
        &self,
        tenant: &str,
        caller: &str,
        parent: Option<&str>,
        hop: &HopTerms,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        // A root hop is onboarding: the runtime role may not insert one
        // (delegation_root_by_onboarding).
        let mut tx = match parent {
            None => self.begin_onboarding("granting a root delegation").await?,
            Some(_) => self.begin_in(tenant, "granting a delegation").await?,
        };
        let refusal = self
            .grant_refusal(&mut tx, tenant, caller, parent, hop, now)
            .await?;
        let under = match parent {
            None => Under::Root { grantor: caller },
            Some(parent) => Under::Parent(parent),
        };
        let (outcome, entry) = match refusal {
            Some(reason) => (Outcome::refused(reason), None),
            None => match insert_delegation(&mut tx, tenant, hop, under, now).await? {
                Ok(()) => (
                    Outcome::ok(hop.id.clone()),
                    Some(Entry::new(
                        Some(tenant),
                        "delegation.granted",
                        &hop.id,
                        json!({
                            "grant": hop,
                            "parent": parent,
                            "granted_by": caller,
                            "root": parent.is_none(),
                        }),
                    )),
                ),
                Err((reason, constraint)) => (
                    Outcome {
                        decision: Decision::Deny(reason),
                        id: None,
                        constraint: Some(constraint),
                    },
                    None,
                ),
            },
        };
        let Some(entry) = entry else {
            let known = !matches!(outcome.decision, Decision::Deny(Reason::TenantUnknown));
            let refusal = Entry::new(
                known.then_some(tenant),
                "delegation.refused",
                &hop.id,
                json!({
                    "grant": hop,
                    "parent": parent,
                    "caller": caller,
                    "decision": outcome.decision,
                    "constraint": outcome.constraint,
                }),
            );
            self.close_refused(tx, now, refusal).await?;
            return Ok(outcome);
        };
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a grant")?;
        Ok(outcome)
    }

    /// Why a grant is refused before the database sees it, if it is.
    async fn grant_refusal(
        &self,
        tx: &mut PgConnection,
        tenant: &str,
        caller: &str,
        parent: Option<&str>,
        hop: &HopTerms,
        now: DateTime<Utc>,
    ) -> Result<Option<Reason>, ServiceError> {
        if !identity::tenant_exists(tx, tenant).await? {
            return Ok(Some(Reason::TenantUnknown));
        }
        let scope_ok = hop.skus.iter().flatten().all(|sku| is_ident(sku));
        let expiry_ok = hop.expires_at.is_none_or(is_operator_instant);
        if !is_ident(&hop.id)
            || !scope_ok
            || !expiry_ok
            || id_ever_used(tx, tenant, &hop.id).await?
        {
            return Ok(Some(Reason::DelegationInvalid));
        }
        if !is_ident(caller) {
            return Ok(Some(Reason::DelegationGrantorNotPermitted));
        }
        match identity::resolve(tx, tenant, &hop.to).await? {
            Ok(Who::Agent) => {}
            Ok(Who::Person { .. }) => return Ok(Some(Reason::ActorNotPermitted)),
            Err(reason) => return Ok(Some(reason)),
        }
        let who = identity::resolve(tx, tenant, caller).await?.ok();
        let Some(parent) = parent else {
            let grantor = match who {
                Some(Who::Person { may_approve, .. }) => Grantor::Human { may_approve },
                Some(Who::Agent) | None => Grantor::Unknown,
            };
            return Ok(verdict(check_grant(grantor, &terms_of(hop), now)));
        };
        if !who.is_some_and(may_operate) {
            return Ok(Some(Reason::DelegationGrantorNotPermitted));
        }
        if !is_ident(parent) {
            return Ok(Some(Reason::DelegationMissing));
        }
        let sql = format!(
            "SELECT {DELEGATION_COLUMNS} FROM delegations WHERE tenant_id = $1 AND id = $2"
        );
        let row: Option<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(parent)
            .fetch_optional(&mut *tx)
            .await
            .ctx("looking up the parent delegation")?;
        let Some(row) = row else {
            return Ok(Some(Reason::DelegationMissing));
        };
        let above = world::chain(tx, tenant, &row.id).await?;
        if above.hops.len() >= MAX_CHAIN_HOPS {
            return Ok(Some(Reason::DelegationDepthExceeded));
        }
        let parent_hop = row.to_hop();
        Ok(verdict(check_grant(
            Grantor::Hop(&parent_hop),
            &terms_of(hop),
            now,
        )))
    }

    /// `actor` revokes the hop `delegation_id`. Only that row changes.
    pub async fn revoke(
        &self,
        tenant: &str,
        delegation_id: &str,
        actor: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin_in(tenant, "revoking a delegation").await?;
        let mut refusal = match identity::resolve(&mut tx, tenant, actor).await? {
            Err(reason) => Some(reason),
            Ok(who) if !may_revoke(who) => Some(Reason::ActorNotPermitted),
            Ok(_) => None,
        };
        // The revoked branch, deepest hop first (the lock order).
        let branch: Vec<BranchRow> = match refusal {
            None if is_ident(delegation_id) => lock_all(
                &mut tx,
                BranchKey {
                    tenant,
                    delegation: delegation_id,
                },
            )
            .await
            .ctx("locking the delegation's branch")?,
            _ => Vec::new(),
        };
        let hop = branch.iter().find(|h| h.id == delegation_id);
        if refusal.is_none() && hop.is_none() {
            refusal = Some(Reason::DelegationMissing);
        }
        let entry = |decision: Decision, already: bool, returned: i64| {
            Entry::new(
                (refusal != Some(Reason::TenantUnknown)).then_some(tenant),
                if decision == Decision::Allow {
                    "delegation.revoked"
                } else {
                    "revocation.refused"
                },
                delegation_id,
                json!({
                    "delegation": delegation_id,
                    "actor": actor,
                    "decision": decision,
                    "already_revoked": already,
                    "returned_paise": returned,
                }),
            )
        };
        let (Some(hop), None) = (hop, refusal) else {
            let reason = refusal.unwrap_or(Reason::DelegationMissing);
            return self
                .refuse(tx, now, entry(Decision::Deny(reason), false, 0), reason)
                .await;
        };
        let mut returned = 0;
        if !hop.revoked {
            // What the branch has spent or still reserves stays claimed from
            // the parent, up to the hop's own claim; the rest goes back to it
            // now, and each reservation comes back when its request ends
            // (budget::release). A branch whose spend a capture booked
            // NEEDS_REVIEW carried past its budget keeps its whole claim and
            // returns nothing.
            let spent: i64 = branch.iter().map(|h| h.spent_paise).sum();
            let held = spent.min(hop.claim_paise).max(0);
            returned = hop.claim_paise - held;
            sqlx::query(
                "UPDATE delegations SET revoked_at = $3, revoked_by = $4, claim_paise = $5 \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(delegation_id)
            .bind(now)
            .bind(actor)
            .bind(held)
            .execute(&mut *tx)
            .await
            .ctx("revoking the delegation")?;
            if let Some(parent) = &hop.parent_id {
                sqlx::query(
                    "UPDATE delegations SET allocated_paise = allocated_paise - $3 \
                     WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant)
                .bind(parent)
                .bind(returned)
                .execute(&mut *tx)
                .await
                .ctx("returning a revoked branch's budget to its parent")?;
            }
        }
        let entry = entry(Decision::Allow, hop.revoked, returned);
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a revocation")?;
        Ok(Outcome::ok(delegation_id.to_owned()))
    }
}

/// The pure check's terms of `hop`.
fn terms_of(hop: &HopTerms) -> GrantTerms {
    GrantTerms {
        budget_paise: hop.budget_paise,
        skus: hop.skus.clone(),
        expires_at: hop.expires_at,
    }
}

/// The pure check's answer as a refusal before the insert: the database
/// takes the allocation and decides oversubscription itself.
fn verdict(checked: Result<(), Reason>) -> Option<Reason> {
    match checked {
        Ok(()) | Err(Reason::DelegationBudgetExhausted) => None,
        Err(reason) => Some(reason),
    }
}

/// A human of the tenant who may approve or operate may carve a hop below a
/// delegation; an agent may not.
fn may_operate(who: Who) -> bool {
    may_revoke(who)
}

/// A human of the tenant who may approve or operate may revoke; an agent may not.
fn may_revoke(who: Who) -> bool {
    matches!(
        who,
        Who::Person {
            may_approve: true,
            ..
        } | Who::Person {
            is_operator: true,
            ..
        }
    )
}

/// True when `id` names a delegation of the tenant, live or revoked: an id
/// is never granted twice.
async fn id_ever_used(
    conn: &mut PgConnection,
    tenant: &str,
    id: &str,
) -> Result<bool, ServiceError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM delegations WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(id)
        .fetch_one(conn)
        .await
        .ctx("looking up the delegation id")
}
