//! `grant` and `revoke`: delegation hops, made by the tenant's operator.
//!
//! Guarantees: these are operator calls, never reachable through the
//! agent-facing `propose`. A root hop's grantor must be a human of the tenant
//! who may approve; a hop below must name a live delegation of the same
//! tenant; anything else is `DELEGATION_GRANTOR_NOT_PERMITTED`. The grantee
//! must be an agent of the tenant. A grant that widens its parent (budget,
//! skus, expiry) is `DELEGATION_WIDENS`. The allocation is taken from the
//! parent by the DATABASE (`delegation_attenuates`) in the insert itself, and
//! oversubscription of the parent is refused by `ck_delegation_budget_partitioned`:
//! the gate lets the database decide it, so the refusal
//! (`DELEGATION_BUDGET_EXHAUSTED`) always carries that constraint's name.
//! Revoking marks one hop revoked and touches no other row: the branch below
//! it stops because authority is re-derived from the whole chain at every
//! spend, not because descendants were edited.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
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
use crate::ident::is_ident;
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};

/// A delegation hop to grant: `from` is a human who may approve (a root
/// hop) or the id of a live delegation of the same tenant (a hop below it).
/// The same keys as a world file's `delegations` and a scenario's `grant`
/// step, none other accepted; absent options are not serialized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub id: String,
    /// A human who may approve (root hop) or the id of a live delegation.
    pub from: String,
    /// The agent that may spend under it.
    pub to: String,
    pub budget_paise: i64,
    /// `None` means every sku the parent allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skus: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Inserts a hop; a refusal by the database comes back as a reason and the
/// name of the constraint or trigger that refused.
pub(crate) async fn insert_delegation(
    conn: &mut PgConnection,
    tenant: &str,
    grant: &Grant,
    root: bool,
    now: DateTime<Utc>,
) -> Result<Result<(), (Reason, String)>, ServiceError> {
    let mut savepoint = conn.begin().await.ctx("opening a savepoint")?;
    let (parent, grantor) = if root {
        (None, Some(grant.from.as_str()))
    } else {
        (Some(grant.from.as_str()), None)
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
                    "fk_delegation_grantor_same_tenant" | "fk_delegation_parent_same_tenant" => {
                        Reason::DelegationGrantorNotPermitted
                    }
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
    /// The tenant's operator grants a hop. The outcome's id is the delegation
    /// id; a refusal by the database names its constraint in `constraint`.
    pub async fn grant(&self, tenant: &str, grant: &Grant) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("granting a delegation").await?;
        let refusal = self.grant_refusal(&mut tx, tenant, grant, now).await?;
        let (outcome, entry) = match refusal {
            Some(reason) => (Outcome::refused(reason), None),
            None => {
                let root = is_person(&mut tx, tenant, &grant.from).await?;
                match insert_delegation(&mut tx, tenant, grant, root, now).await? {
                    Ok(()) => (
                        Outcome::ok(grant.id.clone()),
                        Some(Entry::new(
                            Some(tenant),
                            "delegation.granted",
                            &grant.id,
                            json!({"grant": grant, "root": root}),
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
                }
            }
        };
        let Some(entry) = entry else {
            let known = !matches!(outcome.decision, Decision::Deny(Reason::TenantUnknown));
            let refusal = Entry::new(
                known.then_some(tenant),
                "delegation.refused",
                &grant.id,
                json!({"grant": grant, "decision": outcome.decision, "constraint": outcome.constraint}),
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
        grant: &Grant,
        now: DateTime<Utc>,
    ) -> Result<Option<Reason>, ServiceError> {
        if !identity::tenant_exists(tx, tenant).await? {
            return Ok(Some(Reason::TenantUnknown));
        }
        let scope_ok = grant.skus.iter().flatten().all(|sku| is_ident(sku));
        if !is_ident(&grant.id) || !scope_ok || id_ever_used(tx, tenant, &grant.id).await? {
            return Ok(Some(Reason::DelegationInvalid));
        }
        if !is_ident(&grant.from) {
            return Ok(Some(Reason::DelegationGrantorNotPermitted));
        }
        match identity::resolve(tx, tenant, &grant.to).await? {
            Ok(Who::Agent) => {}
            Ok(Who::Person { .. }) => return Ok(Some(Reason::ActorNotPermitted)),
            Err(reason) => return Ok(Some(reason)),
        }
        let may_approve: Option<bool> =
            sqlx::query_scalar("SELECT may_approve FROM people WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(&grant.from)
                .fetch_optional(&mut *tx)
                .await
                .ctx("looking up the grantor")?;
        let parent: Option<DelegationRow> = if may_approve.is_some() {
            None
        } else {
            let sql = format!(
                "SELECT {DELEGATION_COLUMNS} FROM delegations WHERE tenant_id = $1 AND id = $2"
            );
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(tenant)
                .bind(&grant.from)
                .fetch_optional(&mut *tx)
                .await
                .ctx("looking up the parent delegation")?
        };
        if let Some(parent) = &parent {
            let above = world::chain(tx, tenant, &parent.id).await?;
            if above.hops.len() >= MAX_CHAIN_HOPS {
                return Ok(Some(Reason::DelegationDepthExceeded));
            }
        }
        let parent_hop = parent.as_ref().map(DelegationRow::to_hop);
        let grantor = match (may_approve, &parent_hop) {
            (Some(may_approve), _) => Grantor::Human { may_approve },
            (None, Some(hop)) => Grantor::Hop(hop),
            (None, None) => Grantor::Unknown,
        };
        let terms = GrantTerms {
            budget_paise: grant.budget_paise,
            skus: grant.skus.clone(),
            expires_at: grant.expires_at,
        };
        Ok(match check_grant(grantor, &terms, now) {
            // The database takes the allocation and decides oversubscription.
            Ok(()) | Err(Reason::DelegationBudgetExhausted) => None,
            Err(reason) => Some(reason),
        })
    }

    /// `actor` revokes the hop `delegation_id`. Only that row changes.
    pub async fn revoke(
        &self,
        tenant: &str,
        delegation_id: &str,
        actor: &str,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let mut tx = self.begin("revoking a delegation").await?;
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
            // the parent; the rest goes back to it now, and each reservation
            // comes back when its request ends (budget::release).
            let held: i64 = branch.iter().map(|h| h.spent_paise).sum();
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

async fn is_person(conn: &mut PgConnection, tenant: &str, id: &str) -> Result<bool, ServiceError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM people WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(id)
        .fetch_one(conn)
        .await
        .ctx("looking up the grantor")
}
