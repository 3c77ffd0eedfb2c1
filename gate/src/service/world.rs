//! What the pure engine needs, read from the database.
//!
//! Guarantees: the policy is the tenant's latest published version, and a
//! missing or unparsable policy is `POLICY_INVALID` (fail closed, never "no
//! limit"); the catalog is the tenant's own rows only, each checked once per
//! read against the gate's MAC (`row_mac`, keyed from the ledger key): a row
//! that does not verify derives no purchase, and its sku is kept aside
//! (`TenantCatalog`'s `unverified` skus) so that it is refused, never a guess at
//! its price; a delegation chain is
//! read root to leaf by following the leaf's parents inside the tenant. These
//! are plain reads: the rows a decision spends from, and the spend state it
//! is judged on, are locked and read by [`super::decision_state`].

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sqlx::PgConnection;
use sqlx::types::Json;

use super::chain_hops::ChainHop;
use super::current_policy::CurrentPolicy;
use super::error::{Ctx, ServiceError};
use super::ledger::{self, LedgerKey};
use super::rows::{DELEGATION_COLUMNS, DelegationRow};
use crate::catalog::{Catalog, CatalogItem};
use crate::delegation::DelegationChain;
use crate::policy::Policy;
use crate::spend::SpendState;
use mandate::Keyring;

/// One tenant's policy and catalog as the database last sent them.
#[derive(Debug)]
pub(crate) struct World {
    /// The database's digest of what this entry holds; empty for a world
    /// read for one re-check and never kept (`world::world_and_chain`), which
    /// no stamp equals.
    pub digest: String,
    /// The latest policy version; `None` when the tenant has none.
    pub policy: Option<CurrentPolicy>,
    /// The catalog, its rows checked against their MACs once, when read;
    /// `None` unless the policy is enforceable.
    pub catalog: Option<TenantCatalog>,
}

/// The deepest chain the gate will follow.
pub(crate) const MAX_CHAIN_DEPTH: i32 = 64;

/// The tenant's current policy and, when `want_catalog` and the policy is
/// enforceable, its catalog (the tenant's own rows only), in one statement:
/// the one read of the catalog. No policy, no catalog.
pub(crate) async fn policy_and_catalog(
    conn: &mut PgConnection,
    tenant: &str,
    want_catalog: bool,
    keys: &Keyring,
    ledger: &LedgerKey,
) -> Result<(Option<CurrentPolicy>, Option<TenantCatalog>), ServiceError> {
    type Read = (i32, serde_json::Value, Option<Json<Vec<CatalogRow>>>);
    let row: Option<Read> = sqlx::query_as(concat!(
        "SELECT v.version, v.policy, CASE WHEN $2 THEN ( \
               SELECT COALESCE(json_agg(c), '[]') FROM (",
        catalog_select!(),
        ") c) END FROM (",
        latest_policy!(),
        ") v"
    ))
    .bind(tenant)
    .bind(want_catalog)
    .fetch_optional(conn)
    .await
    .ctx("reading the policy and the catalog")?;
    let Some((version, json, rows)) = row else {
        return Ok((None, None));
    };
    Ok(policy_read(tenant, version, json, rows, keys, ledger))
}

/// The tenant's policy and catalog, and the chain from the root down to
/// `leaf` (as [`chain`] reads it), in one statement: what an authorized
/// request is checked against again at checkout and at payment.
///
/// `cached` is the world this gate last read for the tenant. It is used only
/// when the database finds its digest equal to the tenant's stamp
/// (`tenants.world_digest`, rewritten by every write of the tenant's policy
/// versions or catalog rows: see `migrations/20261205000003_world_stamp.sql`)
/// in this very statement, as `proposal_state` uses it; then the policy and
/// the catalog are not sent again. Otherwise they are read as
/// [`policy_and_catalog`] reads them (a catalog only under an enforceable
/// policy) into a world of their own, which is not kept. No policy: a world
/// without one. No leaf: an empty chain.
pub(crate) async fn world_and_chain(
    conn: &mut PgConnection,
    tenant: &str,
    leaf: Option<&str>,
    cached: Option<Arc<World>>,
    keys: &Keyring,
    ledger: &LedgerKey,
) -> Result<(Arc<World>, DelegationChain), ServiceError> {
    type Read = (
        bool,
        Option<i32>,
        Option<serde_json::Value>,
        Option<Json<Vec<CatalogRow>>>,
        Json<Vec<ChainHop>>,
    );
    let (kept, version, json, rows, Json(hops)): Read = sqlx::query_as(concat!(
        "SELECT s.kept, v.version, v.policy, CASE WHEN v.version IS NOT NULL THEN ( \
               SELECT COALESCE(json_agg(c), '[]') FROM (",
        catalog_select!(),
        ") c) END, ( \
               WITH RECURSIVE up AS ( \
                   SELECT d.*, 0 AS hops_up FROM delegations d \
                    WHERE d.tenant_id = $1 AND d.id = $2 \
                   UNION ALL \
                   SELECT p.*, up.hops_up + 1 FROM delegations p \
                     JOIN up ON p.tenant_id = up.tenant_id AND p.id = up.parent_id \
                    WHERE up.hops_up < $3) \
               SELECT COALESCE(jsonb_agg(jsonb_build_object( \
                          'leaf_id', $2::text, 'id', up.id, 'parent_id', up.parent_id, \
                          'grantee_id', up.grantee_id, 'budget_paise', up.budget_paise, \
                          'allocated_paise', up.allocated_paise, 'spent_paise', up.spent_paise, \
                          'skus', up.skus, \
                          'expires_at_us', (extract(epoch FROM up.expires_at) * 1000000)::bigint, \
                          'revoked_at_us', (extract(epoch FROM up.revoked_at) * 1000000)::bigint) \
                        ORDER BY up.hops_up DESC), '[]') \
                 FROM up) \
             FROM (SELECT COALESCE( \
                       (SELECT t.world_digest = $4 FROM tenants t WHERE t.id = $1), false) AS kept) s \
             LEFT JOIN LATERAL (",
        latest_policy!(),
        ") v ON NOT s.kept"
    ))
    .bind(tenant)
    .bind(leaf)
    .bind(MAX_CHAIN_DEPTH)
    .bind(cached.as_ref().map(|w| w.digest.as_str()))
    .fetch_one(conn)
    .await
    .ctx("reading the policy, the catalog and a delegation chain")?;
    let chain = DelegationChain::new(hops.iter().map(ChainHop::to_hop).collect());
    let world = match (kept, cached) {
        (true, Some(world)) => world,
        _ => {
            let (policy, catalog) = match (version, json) {
                (Some(version), Some(json)) => {
                    policy_read(tenant, version, json, rows, keys, ledger)
                }
                _ => (None, None),
            };
            // Read for this check alone: the digest is never compared.
            Arc::new(World {
                digest: String::new(),
                policy,
                catalog,
            })
        }
    };
    Ok((world, chain))
}

/// A policy version as read, and the catalog read beside it: the catalog
/// only under an enforceable policy, each row checked against its MAC
/// under `ledger` ([`catalog_of`]).
pub(crate) fn policy_read(
    tenant: &str,
    version: i32,
    json: serde_json::Value,
    rows: Option<Json<Vec<CatalogRow>>>,
    keys: &Keyring,
    ledger: &LedgerKey,
) -> (Option<CurrentPolicy>, Option<TenantCatalog>) {
    let current = CurrentPolicy::parsed(tenant, version, json, keys);
    let catalog = rows
        .filter(|_| current.policy.is_ok())
        .map(|Json(rows)| catalog_of(tenant, rows, ledger));
    (Some(current), catalog)
}

/// A tenant's catalog as the gate read it: the rows whose MAC verifies, and
/// the skus of the rows whose MAC does not (written or edited by someone
/// without the ledger key), which derive no purchase.
#[derive(Debug, Clone, Default)]
pub(crate) struct TenantCatalog {
    pub items: Catalog,
    pub unverified: BTreeSet<String>,
}

impl TenantCatalog {
    /// Whether `sku`'s row is one the gate did not write: a purchase of it
    /// has no price the gate can stand behind.
    pub fn unverified(&self, sku: &str) -> bool {
        self.unverified.contains(sku)
    }
}

/// The one read of a tenant's latest policy version (`$1` the tenant): its
/// number and its mandate (`{policy, signer, signature}`, as `tenant_world`
/// sends it too), no row when it has none.
macro_rules! latest_policy {
    () => {
        "SELECT version, jsonb_build_object('policy', policy, 'signer', signer, \
                'signature', signature) AS policy \
           FROM policy_versions WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1"
    };
}
pub(crate) use latest_policy;

/// The one read of a tenant's catalog rows (`$1` the tenant), inside
/// [`policy_and_catalog`].
macro_rules! catalog_select {
    () => {
        "SELECT sku, merchant_id, price_paise, currency, category, max_quantity, available, \
         description, row_mac FROM catalog_items WHERE tenant_id = $1"
    };
}
use catalog_select;

#[derive(sqlx::FromRow, serde::Deserialize)]
pub(crate) struct CatalogRow {
    sku: String,
    merchant_id: String,
    price_paise: i64,
    currency: String,
    category: String,
    max_quantity: i32,
    available: bool,
    description: String,
    row_mac: Option<String>,
}

impl CatalogRow {
    /// The row as the catalog's item, and the MAC stored beside it.
    pub(crate) fn into_item(self) -> (CatalogItem, Option<String>) {
        let item = CatalogItem {
            sku: self.sku,
            merchant: self.merchant_id,
            price_paise: self.price_paise,
            currency: self.currency.trim_end().to_owned(),
            category: self.category,
            // A negative maximum cannot be stored (ck_catalog_max_quantity_positive).
            max_quantity: u32::try_from(self.max_quantity).unwrap_or(0),
            available: self.available,
            description: self.description,
        };
        (item, self.row_mac)
    }
}

/// `tenant`'s catalog rows, each checked against its MAC under `ledger`:
/// the rows that verify make the catalog, the others' skus are kept aside.
fn catalog_of(tenant: &str, rows: Vec<CatalogRow>, ledger: &LedgerKey) -> TenantCatalog {
    let mut unverified = BTreeSet::new();
    let mut items = Vec::with_capacity(rows.len());
    for r in rows {
        let (item, mac) = r.into_item();
        if ledger::catalog_item_mac_holds(ledger, tenant, &item, mac.as_deref()) {
            items.push(item);
        } else {
            unverified.insert(item.sku);
        }
    }
    TenantCatalog {
        items: Catalog::new(items),
        unverified,
    }
}

/// The chain from the root down to `leaf`, root first.
pub(crate) async fn chain(
    conn: &mut PgConnection,
    tenant: &str,
    leaf: &str,
) -> Result<DelegationChain, ServiceError> {
    let sql = format!(
        "WITH RECURSIVE up AS ( \
             SELECT d.*, 0 AS hops_up FROM delegations d WHERE d.tenant_id = $1 AND d.id = $2 \
             UNION ALL \
             SELECT p.*, up.hops_up + 1 FROM delegations p \
               JOIN up ON p.tenant_id = up.tenant_id AND p.id = up.parent_id \
              WHERE up.hops_up < $3) \
         SELECT {DELEGATION_COLUMNS} FROM up ORDER BY hops_up DESC"
    );
    let rows: Vec<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(leaf)
        .bind(MAX_CHAIN_DEPTH)
        .fetch_all(conn)
        .await
        .ctx("reading a delegation chain")?;
    Ok(DelegationChain::new(
        rows.iter().map(DelegationRow::to_hop).collect(),
    ))
}

/// An agent's recorded proposals since some instant: when each was made,
/// and when each refused one was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recent {
    pub proposals: Vec<DateTime<Utc>>,
    pub denials: Vec<DateTime<Utc>>,
}

impl Recent {
    /// The spend state these proposals and `spent_today_paise` (read under
    /// the caller's lock) make.
    pub fn spend_state(self, spent_today_paise: i64) -> SpendState {
        SpendState {
            spent_today_paise,
            proposals: self.proposals,
            denials: self.denials,
        }
    }
}

/// The start of the windows an agent's proposals are counted in at `now`:
/// the longer of the policy's velocity and denial-rate windows.
pub(crate) fn window_start(now: DateTime<Utc>, policy: &Policy) -> DateTime<Utc> {
    let window = policy
        .velocity
        .window_minutes
        .max(policy.denial_rate.window_minutes);
    now - Duration::minutes(i64::from(window))
}
