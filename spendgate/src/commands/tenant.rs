//! `spendgate tenant apply FILE`: onboarding without SQL.
//!
//! Guarantees:
//! - The whole file is checked first ([`crate::world_file`]); a file with
//!   any problem writes nothing, and every problem is listed with the file,
//!   the line, the field and an operator's code (exit 2).
//! - The plan is the difference between the file and each tenant as it is:
//!   a tenant that does not exist is created whole (the gate's seed, one
//!   transaction); one that exists gets what the file adds (people, agents,
//!   merchants, catalog items: one transaction), changed prices
//!   (`set_price`), a new policy version when the policy differs
//!   (`publish_mandate`, with the signed mandate `--mandate` names; a new
//!   tenant's first policy is the first mandate signed, version 1) and the delegations it does not hold yet (`grant`).
//!   Nothing is deleted. A change apply cannot make without rewriting
//!   history (a person's approval rights, a catalog item's merchant,
//!   currency or category) refuses the whole plan before anything is
//!   written.
//! - `--dry-run` prints the plan and writes nothing. Applying a file again
//!   plans nothing and writes nothing.
//! - Every change is on the tenant's ledger: each operation's own entry, and
//!   one `tenant.applied` entry naming who applied which changes. Changes
//!   are applied in order, each in its own transaction; an apply that stops
//!   half way is completed by running it again.
//! - It connects as the onboarding role (`onboard_database_url`), the one
//!   login that may create tenants, people, agents, merchants and root
//!   delegations.

use std::process::ExitCode;

use gate::CatalogItem;
use gate::service::{
    Grant, Outcome, PersonSeed, Seed, TenantAdditions, TenantHoldings, TenantSeed,
};
use mandate::SignedMandate;
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::TenantCommand;
use crate::config::Config;
use crate::error::Failure;
use crate::world_file::{self, Loaded};

/// One change the plan makes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
enum Change {
    CreateTenant {
        tenant: String,
    },
    Add {
        tenant: String,
        added: TenantAdditions,
    },
    SetPrice {
        tenant: String,
        sku: String,
        from: i64,
        to: i64,
    },
    PublishPolicy {
        tenant: String,
        policy: Value,
    },
    Grant {
        tenant: String,
        grant: Grant,
    },
}

impl Change {
    fn describe(&self) -> String {
        match self {
            Change::CreateTenant { tenant } => format!("create tenant {tenant} as the file says"),
            Change::Add { tenant, added } => {
                let mut parts = Vec::new();
                let ids = |v: Vec<&str>| v.join(", ");
                if !added.people.is_empty() {
                    parts.push(format!(
                        "people {}",
                        ids(added.people.iter().map(|p| p.id.as_str()).collect())
                    ));
                }
                if !added.agents.is_empty() {
                    parts.push(format!(
                        "agents {}",
                        ids(added.agents.iter().map(String::as_str).collect())
                    ));
                }
                if !added.merchants.is_empty() {
                    parts.push(format!(
                        "merchants {}",
                        ids(added.merchants.iter().map(String::as_str).collect())
                    ));
                }
                if !added.catalog.is_empty() {
                    parts.push(format!(
                        "catalog items {}",
                        ids(added.catalog.iter().map(|i| i.sku.as_str()).collect())
                    ));
                }
                format!("tenant {tenant}: add {}", parts.join("; "))
            }
            Change::SetPrice {
                tenant,
                sku,
                from,
                to,
            } => {
                format!("tenant {tenant}: price of {sku} {from} -> {to}")
            }
            Change::PublishPolicy { tenant, .. } => {
                format!("tenant {tenant}: publish the file's policy as a new version")
            }
            Change::Grant { tenant, grant } => format!(
                "tenant {tenant}: grant delegation {} from {} to {} (budget {})",
                grant.id, grant.from, grant.to, grant.budget_paise
            ),
        }
    }
}

pub async fn run(config: &Config, command: TenantCommand) -> Result<ExitCode, Failure> {
    let TenantCommand::Apply {
        file,
        dry_run,
        by,
        mandate,
    } = command;
    let mandates = mandate
        .iter()
        .map(|path| super::mandate::signed_mandate(path))
        .collect::<Result<Vec<_>, _>>()?;
    let loaded = world_file::read(&file)?;
    let problems = loaded.check();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("{}", loaded.render(p));
        }
        return Err(Failure::Input(format!(
            "{}: {} problem(s); nothing was written",
            file.display(),
            problems.len()
        )));
    }
    let by = by
        .or_else(|| std::env::var("USER").ok())
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "operator".to_owned());
    // Onboarding runs as the onboarding role: the gate's own login cannot
    // create a tenant, its actors or its root delegations.
    let pool = crate::connect::onboard_pool(config, 2).await?;
    let gate = crate::gate_of_config::open_gate(config, pool)?;
    let mut plan = Vec::new();
    let mut conflicts = Vec::new();
    for t in &loaded.file.tenants {
        let held = gate
            .tenant_holdings(&t.id)
            .await
            .map_err(|e| Failure::gate(format!("reading tenant {}", t.id), e))?;
        match held {
            None => plan.push(Change::CreateTenant {
                tenant: t.id.clone(),
            }),
            Some(held) => diff(&loaded, t, &held, &mut plan, &mut conflicts)?,
        }
    }
    if !conflicts.is_empty() {
        for c in &conflicts {
            eprintln!("{}: {c}", file.display());
        }
        return Err(Failure::Input(format!(
            "{}: {} change(s) would rewrite what exists; nothing was written",
            file.display(),
            conflicts.len()
        )));
    }
    if !dry_run {
        // Each tenant's row-security token digest, for this gate's ledger
        // key: a tenant that exists gets its own (a deployment migrated
        // before row-level security, or a changed ledger key).
        let ids: Vec<String> = loaded.file.tenants.iter().map(|t| t.id.clone()).collect();
        gate.register_row_tokens(&ids)
            .await
            .map_err(|e| Failure::gate("writing the row-security tokens".to_owned(), e))?;
    }
    if plan.is_empty() {
        println!(
            "nothing to change: every tenant of {} is as the file says",
            file.display()
        );
        gate.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    for change in &plan {
        println!(
            "{}{}",
            if dry_run { "would " } else { "" },
            change.describe()
        );
    }
    if dry_run {
        println!(
            "dry run: nothing was written ({} change(s) planned)",
            plan.len()
        );
        gate.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    for change in &plan {
        apply(&gate, &loaded, &mandates, change).await?;
    }
    for t in &loaded.file.tenants {
        let mine: Vec<&Change> = plan.iter().filter(|c| tenant_of(c) == t.id).collect();
        if mine.is_empty() {
            continue;
        }
        gate.record_onboarding(&t.id, &by, json!(mine))
            .await
            .map_err(|e| Failure::gate(format!("recording the changes to {}", t.id), e))?;
    }
    println!(
        "applied {} change(s) from {} (by {by})",
        plan.len(),
        file.display()
    );
    gate.close().await;
    Ok(ExitCode::SUCCESS)
}

fn tenant_of(change: &Change) -> &str {
    match change {
        Change::CreateTenant { tenant }
        | Change::Add { tenant, .. }
        | Change::SetPrice { tenant, .. }
        | Change::PublishPolicy { tenant, .. }
        | Change::Grant { tenant, .. } => tenant,
    }
}

/// What the file changes in a tenant that exists; what it cannot change
/// without rewriting history goes to `conflicts`.
fn diff(
    loaded: &Loaded,
    t: &TenantSeed,
    held: &TenantHoldings,
    plan: &mut Vec<Change>,
    conflicts: &mut Vec<String>,
) -> Result<(), Failure> {
    let mut added = TenantAdditions::default();
    for p in &t.people {
        match held.people.iter().find(|h| h.id == p.id) {
            None => added.people.push(p.clone()),
            Some(h) if same_person(h, p) => {}
            Some(_) => conflicts.push(format!(
                "tenant {}: person {} exists with other rights (may_approve, is_operator); \
                 apply adds people, it never changes one",
                t.id, p.id
            )),
        }
    }
    added.agents = missing(&t.agents, &held.agents);
    added.merchants = missing(&t.merchants, &held.merchants);
    let mut prices = Vec::new();
    for item in &t.catalog {
        match held.catalog.iter().find(|h| h.sku == item.sku) {
            None => added.catalog.push(item.clone()),
            Some(h) if same_item_but_price(h, item) => {
                if h.price_paise != item.price_paise {
                    prices.push(Change::SetPrice {
                        tenant: t.id.clone(),
                        sku: item.sku.clone(),
                        from: h.price_paise,
                        to: item.price_paise,
                    });
                }
            }
            Some(_) => conflicts.push(format!(
                "tenant {}: catalog item {} exists with another merchant, currency, category, \
                 quantity, availability or description; apply changes only prices",
                t.id, item.sku
            )),
        }
    }
    if !added.is_empty() {
        plan.push(Change::Add {
            tenant: t.id.clone(),
            added,
        });
    }
    plan.extend(prices);
    let wanted = serde_json::to_value(&t.policy).map_err(|e| {
        Failure::Input(format!(
            "{}: the policy of {} does not serialize: {e}",
            loaded.path.display(),
            t.id
        ))
    })?;
    let current = held.policy.as_ref().map(|(_, p)| p);
    if current != Some(&wanted) {
        plan.push(Change::PublishPolicy {
            tenant: t.id.clone(),
            policy: wanted,
        });
    }
    for g in &t.delegations {
        if !held.delegations.contains(&g.id) {
            plan.push(Change::Grant {
                tenant: t.id.clone(),
                grant: g.clone(),
            });
        }
    }
    Ok(())
}

fn same_person(a: &PersonSeed, b: &PersonSeed) -> bool {
    a.may_approve == b.may_approve && a.is_operator == b.is_operator
}

fn same_item_but_price(held: &CatalogItem, file: &CatalogItem) -> bool {
    held.merchant == file.merchant
        && held.currency == file.currency
        && held.category == file.category
        && held.max_quantity == file.max_quantity
        && held.available == file.available
        && held.description == file.description
}

fn missing(wanted: &[String], held: &[String]) -> Vec<String> {
    wanted
        .iter()
        .filter(|w| !held.contains(w))
        .cloned()
        .collect()
}

/// Makes one change, or says which operation refused it and why.
async fn apply(
    gate: &gate::service::Gate<crate::provider::Provider>,
    loaded: &Loaded,
    mandates: &[SignedMandate],
    change: &Change,
) -> Result<(), Failure> {
    let refused = |what: String, outcome: &Outcome| {
        Failure::Input(format!(
            "{}: {what} was refused {}; the changes before it were applied, none after it",
            loaded.path.display(),
            outcome.reason().map_or("(no reason)", |r| r.code())
        ))
    };
    match change {
        Change::CreateTenant { tenant } => {
            let seed = loaded
                .file
                .tenants
                .iter()
                .find(|t| &t.id == tenant)
                .cloned()
                .into_iter()
                .collect();
            gate.seed_signed(&Seed { tenants: seed }, mandates)
                .await
                .map_err(|e| Failure::gate(format!("creating tenant {tenant}"), e))
        }
        Change::Add { tenant, added } => gate
            .extend_tenant(tenant, added, "tenant apply")
            .await
            .map_err(|e| Failure::gate(format!("adding to tenant {tenant}"), e)),
        Change::SetPrice {
            tenant, sku, to, ..
        } => {
            let outcome = gate
                .set_price(tenant, sku, *to)
                .await
                .map_err(|e| Failure::gate(format!("changing the price of {sku}"), e))?;
            outcome
                .is_ok()
                .then_some(())
                .ok_or_else(|| refused(format!("the price of {sku}"), &outcome))
        }
        Change::PublishPolicy { tenant, policy } => {
            // The file's policy, as a human signed it.
            let wanted: Option<gate::Policy> = serde_json::from_value(policy.clone()).ok();
            let signed = mandates
                .iter()
                .find(|m| {
                    &m.mandate.tenant == tenant
                        && serde_json::from_value::<gate::Policy>(m.mandate.policy.clone()).ok()
                            == wanted
                })
                .ok_or_else(|| {
                    Failure::Input(format!(
                        "{}: the policy of {tenant} changed; give the mandate a human signed \
                         for it with --mandate (spendgate mandate sign)",
                        loaded.path.display()
                    ))
                })?;
            let outcome = gate
                .publish_mandate(tenant, signed)
                .await
                .map_err(|e| Failure::gate(format!("publishing the policy of {tenant}"), e))?;
            outcome
                .is_ok()
                .then_some(())
                .ok_or_else(|| refused(format!("the policy of {tenant}"), &outcome))
        }
        Change::Grant { tenant, grant } => {
            let (caller, parent) = grantor(loaded, tenant, grant);
            let outcome = gate
                .grant(tenant, &caller, parent.as_deref(), &grant.terms())
                .await
                .map_err(|e| Failure::gate(format!("granting {}", grant.id), e))?;
            outcome
                .is_ok()
                .then_some(())
                .ok_or_else(|| refused(format!("delegation {}", grant.id), &outcome))
        }
    }
}

/// Who makes `grant`, and below which delegation: a hop whose `from` is a
/// person is a root hop that person grants; one whose `from` is a delegation
/// hangs below it, granted by the human at the root of that chain in the file.
fn grantor(loaded: &Loaded, tenant: &str, grant: &Grant) -> (String, Option<String>) {
    let Some(t) = loaded.file.tenants.iter().find(|t| t.id == tenant) else {
        return (grant.from.clone(), None);
    };
    if t.people.iter().any(|p| p.id == grant.from) {
        return (grant.from.clone(), None);
    }
    let mut from = grant.from.as_str();
    for _ in 0..t.delegations.len() {
        match t.delegations.iter().find(|d| d.id == from) {
            Some(d) if t.people.iter().any(|p| p.id == d.from) => {
                return (d.from.clone(), Some(grant.from.clone()));
            }
            Some(d) => from = &d.from,
            None => break,
        }
    }
    (grant.from.clone(), Some(grant.from.clone()))
}
