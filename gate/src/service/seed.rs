//! Seeding a world: tenants, people, agents, merchants, catalog, policy
//! version 1 and the delegations that exist when a scenario starts.
//!
//! Guarantees: a seed is written in ONE transaction (all of it or none);
//! delegations go through the same insert as `grant`, so the database's
//! `delegation_attenuates` and `ck_delegation_budget_partitioned` hold for a
//! seed as for anything else, and a refused hop fails the whole seed with
//! [`ServiceError::SeedRefused`]. Each catalog row carries the gate's MAC
//! (`ledger::catalog_item_mac`), and the tenant's seed entry records each
//! sku's price (`catalog_prices`), what `ledger verify` compares the
//! catalog with. The seed structs are plain data with a
//! world file's keys, so a world file deserializes straight into them
//! without knowing the schema.

use serde_json::json;

use super::Gate;
use super::error::{Ctx, ServiceError};
use super::grants::{Under, insert_delegation};
use super::ledger::{self, Entry};
use crate::policy::Policy;
use crate::provider::PaymentProvider;
use crate::reason::Reason;
use crate::seed::Seed;
#[cfg(any(test, feature = "test-support"))]
use mandate::Mandate;
use mandate::{MandateError, SignedMandate};

impl<P: PaymentProvider> Gate<P> {
    /// Writes `seed` in one transaction: each table's rows, every tenant's
    /// together, with one statement (a seed is a handful of round trips,
    /// not one per row), then the delegations hop by hop through `grant`'s
    /// own insert, then one ledger entry per tenant.
    ///
    /// Each tenant's policy version 1 is signed with the world key
    /// ([`mandate::world_secret`]) of its first human who may approve, as a
    /// corpus's world is taken to be: tests, the corpus and the benchmark.
    #[cfg(any(test, feature = "test-support"))]
    pub async fn seed(&self, seed: &Seed) -> Result<(), ServiceError> {
        let mut mandates = Vec::new();
        for t in &seed.tenants {
            let signer = t
                .people
                .iter()
                .find(|p| p.may_approve)
                .map(|p| p.id.clone())
                .unwrap_or_default();
            let policy = serde_json::to_value(&t.policy).map_err(|e| ServiceError::Corrupt {
                what: format!("the policy of {} does not serialize: {e}", t.id),
            })?;
            let signed = Mandate::new(&t.id, 1, signer.as_str(), policy)
                .sign(&mandate::world_secret(&t.id, &signer))
                .map_err(|e| ServiceError::Corrupt {
                    what: format!("the mandate of {} does not canonicalize: {e}", t.id),
                })?;
            mandates.push(signed);
        }
        self.seed_signed(seed, &mandates).await
    }

    /// Writes `seed` as [`Gate::seed`] does, each tenant's policy version 1
    /// being the mandate of `mandates` that names the tenant: version 1,
    /// signed by a human of the seed's tenant who may approve, verified
    /// under that human's configured key, its policy the seed's. Otherwise
    /// nothing is written ([`ServiceError::SeedRefused`]).
    pub async fn seed_signed(
        &self,
        seed: &Seed,
        mandates: &[SignedMandate],
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut rows = SeedRows::of(seed, self.ledger_key())?;
        for t in &seed.tenants {
            let refused = |reason: Reason, why: &str| ServiceError::SeedRefused {
                what: format!("the mandate of tenant {}: {why}", t.id),
                reason,
            };
            let Some(signed) = mandates.iter().find(|m| m.mandate.tenant == t.id) else {
                return Err(refused(Reason::MandateSignatureInvalid, "none was given"));
            };
            let m = &signed.mandate;
            if !t.people.iter().any(|p| p.id == m.signer && p.may_approve) {
                let why = format!("{} is not a human of the tenant who may approve", m.signer);
                return Err(refused(Reason::MandateSignerNotPermitted, &why));
            }
            let verified = signed.verify(self.mandate_keys());
            if matches!(verified, Err(MandateError::NoKey { .. })) {
                let why = format!("{} has no configured key", m.signer);
                return Err(refused(Reason::MandateSignerNotPermitted, &why));
            }
            if verified.is_err() {
                let why = format!("the signature is not by the key of {}", m.signer);
                return Err(refused(Reason::MandateSignatureInvalid, &why));
            }
            let same =
                serde_json::from_value::<Policy>(m.policy.clone()).is_ok_and(|p| p == t.policy);
            if m.version != 1 || !same {
                let why = "a first mandate is version 1 of the tenant's own policy";
                return Err(refused(Reason::PolicyInvalid, why));
            }
            rows.policies.push(m.policy.clone());
            rows.signers.push(m.signer.clone());
            rows.signatures
                .push(signed.signature.clone().unwrap_or_default());
        }
        let mut tx = self.begin_onboarding("seeding").await?;
        sqlx::query("INSERT INTO tenants (id) SELECT * FROM UNNEST($1::text[])")
            .bind(&rows.tenants)
            .execute(&mut *tx)
            .await
            .ctx("seeding the tenants")?;
        self.write_row_tokens(&mut tx, &rows.tenants).await?;
        sqlx::query(
            "INSERT INTO people (tenant_id, id, display_name, may_approve, is_operator) \
             SELECT t, p, p, a, o FROM UNNEST($1::text[], $2::text[], $3::bool[], $4::bool[]) \
               AS u(t, p, a, o)",
        )
        .bind(&rows.people.tenant)
        .bind(&rows.people.id)
        .bind(&rows.people.may_approve)
        .bind(&rows.people.is_operator)
        .execute(&mut *tx)
        .await
        .ctx("seeding the people")?;
        sqlx::query(
            "INSERT INTO agents (tenant_id, id) SELECT * FROM UNNEST($1::text[], $2::text[])",
        )
        .bind(&rows.agents.0)
        .bind(&rows.agents.1)
        .execute(&mut *tx)
        .await
        .ctx("seeding the agents")?;
        sqlx::query(
            "INSERT INTO merchants (tenant_id, id, display_name) \
             SELECT t, m, m FROM UNNEST($1::text[], $2::text[]) AS u(t, m)",
        )
        .bind(&rows.merchants.0)
        .bind(&rows.merchants.1)
        .execute(&mut *tx)
        .await
        .ctx("seeding the merchants")?;
        let c = &rows.catalog;
        sqlx::query(
            "INSERT INTO catalog_items (tenant_id, sku, merchant_id, price_paise, currency, \
             category, max_quantity, available, description, row_mac) \
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], \
               $6::text[], $7::int[], $8::bool[], $9::text[], $10::text[])",
        )
        .bind(&c.tenant)
        .bind(&c.sku)
        .bind(&c.merchant)
        .bind(&c.price_paise)
        .bind(&c.currency)
        .bind(&c.category)
        .bind(&c.max_quantity)
        .bind(&c.available)
        .bind(&c.description)
        .bind(&c.row_mac)
        .execute(&mut *tx)
        .await
        .ctx("seeding the catalog")?;
        sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at, signer, signature) \
             SELECT t, 1, p, $3, s, g \
               FROM UNNEST($1::text[], $2::jsonb[], $4::text[], $5::text[]) AS u(t, p, s, g)",
        )
        .bind(&rows.tenants)
        .bind(&rows.policies)
        .bind(now)
        .bind(&rows.signers)
        .bind(&rows.signatures)
        .execute(&mut *tx)
        .await
        .ctx("seeding the policies")?;
        let mut entries = Vec::new();
        for (t, policy) in seed.tenants.iter().zip(&rows.policies) {
            for g in &t.delegations {
                let under = if t.people.iter().any(|p| p.id == g.from) {
                    Under::Root { grantor: &g.from }
                } else {
                    Under::Parent(&g.from)
                };
                if let Err((reason, constraint)) =
                    insert_delegation(&mut tx, &t.id, &g.terms(), under, now).await?
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
                    "catalog_prices": t
                        .catalog
                        .iter()
                        .map(|i| (i.sku.clone(), i.price_paise))
                        .collect::<std::collections::BTreeMap<_, _>>(),
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

/// A seed's rows, table by table and column by column, every tenant's
/// together, in the seed's order: what the seed's UNNEST inserts bind.
#[derive(Debug, Default)]
struct SeedRows {
    tenants: Vec<String>,
    people: PeopleRows,
    /// (tenant, agent)
    agents: (Vec<String>, Vec<String>),
    /// (tenant, merchant)
    merchants: (Vec<String>, Vec<String>),
    catalog: CatalogRows,
    /// Each tenant's policy document as its mandate was signed, its
    /// signer and its signature, in the tenants' order.
    policies: Vec<serde_json::Value>,
    signers: Vec<String>,
    signatures: Vec<String>,
}

#[derive(Debug, Default)]
struct PeopleRows {
    tenant: Vec<String>,
    id: Vec<String>,
    may_approve: Vec<bool>,
    is_operator: Vec<bool>,
}

#[derive(Debug, Default)]
struct CatalogRows {
    tenant: Vec<String>,
    sku: Vec<String>,
    merchant: Vec<String>,
    price_paise: Vec<i64>,
    currency: Vec<String>,
    category: Vec<String>,
    max_quantity: Vec<i32>,
    available: Vec<bool>,
    description: Vec<String>,
    row_mac: Vec<String>,
}

impl SeedRows {
    fn of(seed: &Seed, key: &ledger::LedgerKey) -> Result<SeedRows, ServiceError> {
        let mut rows = SeedRows::default();
        for t in &seed.tenants {
            rows.tenants.push(t.id.clone());
            for p in &t.people {
                rows.people.tenant.push(t.id.clone());
                rows.people.id.push(p.id.clone());
                rows.people.may_approve.push(p.may_approve);
                rows.people.is_operator.push(p.is_operator);
            }
            for a in &t.agents {
                rows.agents.0.push(t.id.clone());
                rows.agents.1.push(a.clone());
            }
            for m in &t.merchants {
                rows.merchants.0.push(t.id.clone());
                rows.merchants.1.push(m.clone());
            }
            for item in &t.catalog {
                let max_quantity =
                    i32::try_from(item.max_quantity).map_err(|_| ServiceError::Corrupt {
                        what: format!(
                            "sku {}: max_quantity {} is too large",
                            item.sku, item.max_quantity
                        ),
                    })?;
                let c = &mut rows.catalog;
                c.tenant.push(t.id.clone());
                c.sku.push(item.sku.clone());
                c.merchant.push(item.merchant.clone());
                c.price_paise.push(item.price_paise);
                c.currency.push(item.currency.clone());
                c.category.push(item.category.clone());
                c.max_quantity.push(max_quantity);
                c.available.push(item.available);
                c.description.push(item.description.clone());
                c.row_mac.push(ledger::catalog_item_mac(key, &t.id, item));
            }
        }
        Ok(rows)
    }
}
