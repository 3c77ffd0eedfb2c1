//! Seeding a world: tenants, people, agents, merchants, catalog, policy
//! version 1 and the delegations that exist when a scenario starts.
//!
//! Guarantees: a seed is written in ONE transaction (all of it or none);
//! delegations go through the same insert as `grant`, so the database's
//! `delegation_attenuates` and `ck_delegation_budget_partitioned` hold for a
//! seed as for anything else, and a refused hop fails the whole seed with
//! [`ServiceError::SeedRefused`]. The seed structs are plain data with a
//! world file's keys, so a world file deserializes straight into them
//! without knowing the schema.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Gate;
use super::error::{Ctx, ServiceError};
use super::grants::{Grant, insert_delegation};
use super::ledger::{self, Entry};
use crate::catalog::CatalogItem;
use crate::policy::Policy;
use crate::provider::PaymentProvider;

/// A world's tenants, the first being the default one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    pub tenants: Vec<TenantSeed>,
}

/// One tenant and everything it owns, with a world file's keys (none other
/// accepted; `delegations` may be left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSeed {
    pub id: String,
    pub people: Vec<PersonSeed>,
    pub agents: Vec<String>,
    /// Every merchant the tenant knows; which may be paid is the policy's
    /// `allowed_merchants`.
    pub merchants: Vec<String>,
    pub catalog: Vec<CatalogItem>,
    pub policy: Policy,
    /// Granted in order, so a hop's parent comes before it.
    #[serde(default)]
    pub delegations: Vec<Grant>,
}

impl TenantSeed {
    /// The catalog row for a sku.
    pub fn item(&self, sku: &str) -> Option<&CatalogItem> {
        self.catalog.iter().find(|i| i.sku == sku)
    }
}

/// A human of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonSeed {
    pub id: String,
    pub may_approve: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_operator: bool,
}

impl<P: PaymentProvider> Gate<P> {
    /// Writes `seed` in one transaction.
    pub async fn seed(&self, seed: &Seed) -> Result<(), ServiceError> {
        let now = self.now();
        let mut tx = self.begin("seeding").await?;
        let mut entries = Vec::new();
        for t in &seed.tenants {
            sqlx::query("INSERT INTO tenants (id) VALUES ($1)")
                .bind(&t.id)
                .execute(&mut *tx)
                .await
                .ctx("seeding a tenant")?;
            for p in &t.people {
                sqlx::query(
                    "INSERT INTO people (tenant_id, id, display_name, may_approve, is_operator) \
                     VALUES ($1, $2, $2, $3, $4)",
                )
                .bind(&t.id)
                .bind(&p.id)
                .bind(p.may_approve)
                .bind(p.is_operator)
                .execute(&mut *tx)
                .await
                .ctx("seeding a person")?;
            }
            for a in &t.agents {
                sqlx::query("INSERT INTO agents (tenant_id, id) VALUES ($1, $2)")
                    .bind(&t.id)
                    .bind(a)
                    .execute(&mut *tx)
                    .await
                    .ctx("seeding an agent")?;
            }
            for m in &t.merchants {
                sqlx::query(
                    "INSERT INTO merchants (tenant_id, id, display_name) VALUES ($1, $2, $2)",
                )
                .bind(&t.id)
                .bind(m)
                .execute(&mut *tx)
                .await
                .ctx("seeding a merchant")?;
            }
            for item in &t.catalog {
                let max_quantity =
                    i32::try_from(item.max_quantity).map_err(|_| ServiceError::Corrupt {
                        what: format!(
                            "sku {}: max_quantity {} is too large",
                            item.sku, item.max_quantity
                        ),
                    })?;
                sqlx::query(
                    "INSERT INTO catalog_items (tenant_id, sku, merchant_id, price_paise, currency, \
                     category, max_quantity, available, description) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&t.id)
                .bind(&item.sku)
                .bind(&item.merchant)
                .bind(item.price_paise)
                .bind(&item.currency)
                .bind(&item.category)
                .bind(max_quantity)
                .bind(item.available)
                .bind(&item.description)
                .execute(&mut *tx)
                .await
                .ctx("seeding a catalog item")?;
            }
            let policy = serde_json::to_value(&t.policy).map_err(|e| ServiceError::Corrupt {
                what: format!("the policy of {} does not serialize: {e}", t.id),
            })?;
            sqlx::query(
                "INSERT INTO policy_versions (tenant_id, version, policy, published_at) VALUES ($1, 1, $2, $3)",
            )
            .bind(&t.id)
            .bind(&policy)
            .bind(now)
            .execute(&mut *tx)
            .await
            .ctx("seeding the policy")?;
            for g in &t.delegations {
                let root = t.people.iter().any(|p| p.id == g.from);
                if let Err((reason, constraint)) =
                    insert_delegation(&mut tx, &t.id, g, root, now).await?
                {
                    return Err(ServiceError::SeedRefused {
                        what: format!(
                            "delegation {} of tenant {} (refused by {constraint})",
                            g.id, t.id
                        ),
                        reason,
                    });
                }
            }
            entries.push(Entry::new(
                Some(&t.id),
                "seed",
                &t.id,
                json!({
                    "people": t.people.len(),
                    "agents": t.agents,
                    "merchants": t.merchants,
                    "catalog": t.catalog.len(),
                    "policy": policy,
                    "policy_version": 1,
                    "delegations": t.delegations,
                }),
            ));
        }
        ledger::append(&mut tx, self.ledger_key(), now, entries).await?;
        tx.commit().await.ctx("committing the seed")
    }
}
