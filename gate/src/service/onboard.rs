//! Onboarding: what a tenant holds, read whole, and additions to it.
//!
//! Guarantees:
//! - [`Gate::tenant_holdings`] reads a tenant's people, agents, merchants,
//!   catalog, latest policy and delegation ids in one transaction, so an
//!   onboarding tool can compare a file with the tenant as it is.
//! - [`Gate::extend_tenant`] adds people, agents, merchants and catalog
//!   items to a tenant that exists, in one transaction with one ledger entry
//!   naming who applied them and what was added. It only ever adds: a row
//!   that already exists is refused by its primary key, never overwritten,
//!   and nothing is deleted. Prices, policies and delegations change only
//!   through their own operations (`set_price`, `set_policy`, `grant`).
//!   Each catalog item carries the gate's MAC (`ledger::catalog_item_mac`),
//!   and the entry records its price.
//! - [`Gate::record_onboarding`] appends one entry saying who applied which
//!   changes to a tenant.

use serde::Serialize;
use serde_json::{Value, json};

use super::Gate;
use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry};
use crate::catalog::CatalogItem;
use crate::ident::is_ident;
use crate::provider::PaymentProvider;
use crate::seed::PersonSeed;

/// A tenant's rows, as onboarding compares them with a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TenantHoldings {
    pub people: Vec<PersonSeed>,
    pub agents: Vec<String>,
    pub merchants: Vec<String>,
    pub catalog: Vec<CatalogItem>,
    /// The latest policy version's number and text.
    pub policy: Option<(i32, Value)>,
    pub delegations: Vec<String>,
}

/// What [`Gate::extend_tenant`] adds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TenantAdditions {
    pub people: Vec<PersonSeed>,
    pub agents: Vec<String>,
    pub merchants: Vec<String>,
    pub catalog: Vec<CatalogItem>,
}

impl TenantAdditions {
    /// True when there is nothing to add.
    pub fn is_empty(&self) -> bool {
        self.people.is_empty()
            && self.agents.is_empty()
            && self.merchants.is_empty()
            && self.catalog.is_empty()
    }
}

#[derive(sqlx::FromRow)]
struct CatalogRow {
    sku: String,
    merchant_id: String,
    price_paise: i64,
    currency: String,
    category: String,
    max_quantity: i32,
    available: bool,
    description: String,
}

impl<P: PaymentProvider> Gate<P> {
    /// The tenant's rows, or `None` when there is no such tenant.
    pub async fn tenant_holdings(
        &self,
        tenant: &str,
    ) -> Result<Option<TenantHoldings>, ServiceError> {
        if !is_ident(tenant) {
            return Ok(None);
        }
        let mut tx = self.begin("reading a tenant's holdings").await?;
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)")
                .bind(tenant)
                .fetch_one(&mut *tx)
                .await
                .ctx("looking up the tenant")?;
        if !exists {
            return Ok(None);
        }
        let people: Vec<(String, bool, bool)> = sqlx::query_as(
            "SELECT id, may_approve, is_operator FROM people WHERE tenant_id = $1 ORDER BY id",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await
        .ctx("reading the people")?;
        let agents: Vec<String> =
            sqlx::query_scalar("SELECT id FROM agents WHERE tenant_id = $1 ORDER BY id")
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await
                .ctx("reading the agents")?;
        let merchants: Vec<String> =
            sqlx::query_scalar("SELECT id FROM merchants WHERE tenant_id = $1 ORDER BY id")
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await
                .ctx("reading the merchants")?;
        let catalog: Vec<CatalogRow> = sqlx::query_as(
            "SELECT sku, merchant_id, price_paise, currency, category, max_quantity, available, \
             description FROM catalog_items WHERE tenant_id = $1 ORDER BY sku",
        )
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await
        .ctx("reading the catalog")?;
        let policy: Option<(i32, Value)> = sqlx::query_as(
            "SELECT version, policy FROM policy_versions WHERE tenant_id = $1 \
             ORDER BY version DESC LIMIT 1",
        )
        .bind(tenant)
        .fetch_optional(&mut *tx)
        .await
        .ctx("reading the policy")?;
        let delegations: Vec<String> =
            sqlx::query_scalar("SELECT id FROM delegations WHERE tenant_id = $1 ORDER BY id")
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await
                .ctx("reading the delegations")?;
        tx.commit().await.ctx("ending the read")?;
        Ok(Some(TenantHoldings {
            people: people
                .into_iter()
                .map(|(id, may_approve, is_operator)| PersonSeed {
                    id,
                    may_approve,
                    is_operator,
                })
                .collect(),
            agents,
            merchants,
            catalog: catalog
                .into_iter()
                .map(|r| CatalogItem {
                    sku: r.sku,
                    merchant: r.merchant_id,
                    price_paise: r.price_paise,
                    currency: r.currency,
                    category: r.category,
                    max_quantity: u32::try_from(r.max_quantity).unwrap_or(0),
                    available: r.available,
                    description: r.description,
                })
                .collect(),
            policy,
            delegations,
        }))
    }

    /// Adds `additions` to `tenant` in one transaction, with one ledger
    /// entry naming `by`. A row that exists already is refused by the
    /// database, never overwritten.
    pub async fn extend_tenant(
        &self,
        tenant: &str,
        additions: &TenantAdditions,
        by: &str,
    ) -> Result<(), ServiceError> {
        if additions.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let mut tx = self.begin_onboarding("extending a tenant").await?;
        let person_ids: Vec<&str> = additions.people.iter().map(|p| p.id.as_str()).collect();
        let approves: Vec<bool> = additions.people.iter().map(|p| p.may_approve).collect();
        let operates: Vec<bool> = additions.people.iter().map(|p| p.is_operator).collect();
        sqlx::query(
            "INSERT INTO people (tenant_id, id, display_name, may_approve, is_operator) \
             SELECT $1, p, p, a, o FROM UNNEST($2::text[], $3::bool[], $4::bool[]) AS u(p, a, o)",
        )
        .bind(tenant)
        .bind(&person_ids)
        .bind(&approves)
        .bind(&operates)
        .execute(&mut *tx)
        .await
        .ctx("adding people")?;
        sqlx::query(
            "INSERT INTO agents (tenant_id, id) SELECT $1, a FROM UNNEST($2::text[]) AS u(a)",
        )
        .bind(tenant)
        .bind(&additions.agents)
        .execute(&mut *tx)
        .await
        .ctx("adding agents")?;
        sqlx::query(
            "INSERT INTO merchants (tenant_id, id, display_name) \
             SELECT $1, m, m FROM UNNEST($2::text[]) AS u(m)",
        )
        .bind(tenant)
        .bind(&additions.merchants)
        .execute(&mut *tx)
        .await
        .ctx("adding merchants")?;
        for item in &additions.catalog {
            let max_quantity =
                i32::try_from(item.max_quantity).map_err(|_| ServiceError::Corrupt {
                    what: format!(
                        "sku {}: max_quantity {} is too large",
                        item.sku, item.max_quantity
                    ),
                })?;
            sqlx::query(
                "INSERT INTO catalog_items (tenant_id, sku, merchant_id, price_paise, currency, \
                 category, max_quantity, available, description, row_mac) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(tenant)
            .bind(&item.sku)
            .bind(&item.merchant)
            .bind(item.price_paise)
            .bind(&item.currency)
            .bind(&item.category)
            .bind(max_quantity)
            .bind(item.available)
            .bind(&item.description)
            .bind(ledger::catalog_item_mac(self.ledger_key(), tenant, item))
            .execute(&mut *tx)
            .await
            .ctx("adding a catalog item")?;
        }
        let entry = Entry::new(
            Some(tenant),
            "tenant.extended",
            tenant,
            json!({"by": by, "added": additions}),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing the additions")
    }

    /// Appends one entry to `tenant`'s chain: `by` applied `changes`.
    pub async fn record_onboarding(
        &self,
        tenant: &str,
        by: &str,
        changes: Value,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut tx = self.begin_in(tenant, "recording an onboarding").await?;
        let entry = Entry::new(
            Some(tenant),
            "tenant.applied",
            tenant,
            json!({"by": by, "changes": changes}),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing the record")
    }
}
