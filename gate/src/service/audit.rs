//! The money audit: the rows that authorize or count money, read against
//! the ledger and the gate's MACs.
//!
//! Guarantees: [`audit`] reads, in one read-only snapshot, every row of the
//! money-bearing tables (of one tenant, or of all) and names each row that
//! disagrees, with its table, its key and what disagrees:
//! - an API key whose MAC does not verify (a key the gate never issued);
//! - a checkout authority whose MAC does not verify (edited terms), whose
//!   amount is not the amount its `authority.issued` entry recorded, or
//!   that reads unconsumed though the ledger consumed it;
//! - a day whose `reserved_paise` is not the sum its requests reserve on it;
//! - a hop whose `spent_paise` is not the sum its requests reserve on it;
//! - a captured payment without the signed provider event that carried it
//!   (applied to its order, or kept for reconcile) or, learnt by
//!   reconcile, without the reconcile entry of its order's authority or a
//!   ledger entry naming it;
//! - a capture kept for reconcile without the `provider_event.kept` entry
//!   that recorded its signed event, with the same authority, order,
//!   payment, amount and currency (reconcile books one only when the
//!   provider shows it, but a kept row is a claim the audit still names);
//! - a policy version, a tenant or a root delegation without the ledger
//!   entry that made it;
//! - a catalog row whose MAC does not verify (terms the gate never wrote),
//!   or whose price is not the one the ledger last recorded for its sku
//!   (`catalog.price_changed`, or the `seed` or `tenant.extended` entry
//!   that added it), or that no entry records a price for;
//! - a payment request whose MAC does not verify under the standing its
//!   state needs (one that holds or moved money must be one the gate
//!   authorized; any other, its first decision or an authorization).
//!
//! It changes nothing; a disagreement is a finding, never an error. The
//! day and hop counters and the captured payments are also guarded at
//! commit by deferred constraint triggers (`daily_spend_counts_requests`,
//! `delegation_spend_counts_requests`, `provider_payment_carried_by_event`,
//! `migrations/20261208000200_counters_agree.sql`), each checking only the
//! rows its transaction wrote; what each costs the purchase flow is in
//! `harness perf`'s report ("What the counter triggers cost"). The audit
//! checks every row whether or not a trigger is enabled: it sees what a
//! trigger switched off by the owner let through.

use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};

use super::ledger::{self, AuthorityTerms, LedgerKey, RequestTerms};
use super::world::CatalogRow;

/// One row that disagrees with the ledger or its MAC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    pub tenant: String,
    pub table: &'static str,
    /// The row's key, as `column=value` pairs.
    pub key: String,
    pub problem: String,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    id: String,
    tenant_id: String,
    agent_id: Option<String>,
    person_id: Option<String>,
    kind: String,
    key_sha256: String,
    row_mac: Option<String>,
}

#[derive(sqlx::FromRow)]
struct AuthorityAudit {
    tenant_id: String,
    id: String,
    request_id: String,
    merchant_id: String,
    amount_paise: i64,
    currency: String,
    purchase_digest: String,
    policy_version: i32,
    expires_at: chrono::DateTime<chrono::Utc>,
    row_mac: Option<String>,
    issued_amount: Option<i64>,
}

/// Every disagreement of `tenant`'s rows (every tenant's when `None`).
pub async fn audit(
    pool: &PgPool,
    key: &LedgerKey,
    tenant: Option<&str>,
) -> Result<Vec<Disagreement>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let mut found = Vec::new();
    keys(&mut tx, key, tenant, &mut found).await?;
    authorities(&mut tx, key, tenant, &mut found).await?;
    catalog(&mut tx, key, tenant, &mut found).await?;
    requests(&mut tx, key, tenant, &mut found).await?;
    for (table, sql, problem) in COUNTS {
        let rows: Vec<(String, String, String)> = sqlx::query_as(*sql)
            .bind(tenant)
            .fetch_all(&mut *tx)
            .await?;
        for (t, k, detail) in rows {
            found.push(Disagreement {
                tenant: t,
                table,
                key: k,
                problem: format!("{problem}: {detail}"),
            });
        }
    }
    tx.rollback().await?;
    found.sort_by(|a, b| (&a.tenant, a.table, &a.key).cmp(&(&b.tenant, b.table, &b.key)));
    Ok(found)
}

async fn keys(
    tx: &mut Transaction<'static, Postgres>,
    key: &LedgerKey,
    tenant: Option<&str>,
    found: &mut Vec<Disagreement>,
) -> Result<(), sqlx::Error> {
    let rows: Vec<KeyRow> = sqlx::query_as(
        "SELECT id, tenant_id, agent_id, person_id, kind, key_sha256, row_mac FROM api_keys \
         WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY tenant_id, id",
    )
    .bind(tenant)
    .fetch_all(&mut **tx)
    .await?;
    for r in rows {
        let actor = match (&r.agent_id, &r.person_id) {
            (Some(a), None) => a.as_str(),
            (None, Some(p)) => p.as_str(),
            _ => "",
        };
        let fields = ledger::api_key_mac_fields(&r.id, &r.tenant_id, &r.kind, actor, &r.key_sha256);
        if !ledger::row_mac_holds(
            key,
            "api_keys",
            &ledger::as_strs(&fields),
            r.row_mac.as_deref(),
        ) {
            found.push(Disagreement {
                tenant: r.tenant_id.clone(),
                table: "api_keys",
                key: format!("id={}", r.id),
                problem: format!(
                    "its MAC does not verify: the gate never issued this key (for {} {actor})",
                    r.kind
                ),
            });
        }
    }
    Ok(())
}

async fn authorities(
    tx: &mut Transaction<'static, Postgres>,
    key: &LedgerKey,
    tenant: Option<&str>,
    found: &mut Vec<Disagreement>,
) -> Result<(), sqlx::Error> {
    let rows: Vec<AuthorityAudit> = sqlx::query_as(
        "SELECT a.tenant_id, a.id, a.request_id, a.merchant_id, a.amount_paise, a.currency, \
                a.purchase_digest, a.policy_version, a.expires_at, a.row_mac, \
                (SELECT (e.entry::jsonb -> 'body' ->> 'amount_paise')::bigint \
                   FROM ledger_entries e \
                  WHERE e.tenant_id = a.tenant_id AND e.kind = 'authority.issued' \
                    AND e.entry::jsonb ->> 'subject' = a.id \
                  ORDER BY e.seq LIMIT 1) AS issued_amount \
         FROM checkout_authorities a \
         WHERE $1::text IS NULL OR a.tenant_id = $1 ORDER BY a.tenant_id, a.id",
    )
    .bind(tenant)
    .fetch_all(&mut **tx)
    .await?;
    for a in rows {
        let terms = AuthorityTerms {
            tenant: &a.tenant_id,
            id: &a.id,
            request: &a.request_id,
            digest: &a.purchase_digest,
            amount_paise: a.amount_paise,
            currency: &a.currency,
            merchant: &a.merchant_id,
            policy_version: a.policy_version,
            expires_at: a.expires_at,
        };
        let mut problems = Vec::new();
        if !terms.verifies(key, a.row_mac.as_deref()) {
            problems.push("its MAC does not verify: its terms are not the ones the gate issued");
        }
        let amount = match a.issued_amount {
            None => Some("no authority.issued entry records it".to_owned()),
            Some(issued) if issued != a.amount_paise => Some(format!(
                "amount_paise {} but the ledger issued it for {issued}",
                a.amount_paise
            )),
            Some(_) => None,
        };
        let mut problem = problems.join("; ");
        if let Some(amount) = amount {
            if !problem.is_empty() {
                problem.push_str("; ");
            }
            problem.push_str(&amount);
        }
        if !problem.is_empty() {
            found.push(Disagreement {
                tenant: a.tenant_id.clone(),
                table: "checkout_authorities",
                key: format!("id={}", a.id),
                problem,
            });
        }
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct CatalogAudit {
    tenant_id: String,
    #[sqlx(flatten)]
    row: CatalogRow,
    recorded_price: Option<i64>,
}

/// Each catalog row against its MAC and the price the ledger last recorded
/// for its sku.
async fn catalog(
    tx: &mut Transaction<'static, Postgres>,
    key: &LedgerKey,
    tenant: Option<&str>,
    found: &mut Vec<Disagreement>,
) -> Result<(), sqlx::Error> {
    let rows: Vec<CatalogAudit> = sqlx::query_as(
        "SELECT c.tenant_id, c.sku, c.merchant_id, c.price_paise, c.currency, c.category, \
                c.max_quantity, c.available, c.description, c.row_mac, \
                (SELECT CASE e.kind \
                          WHEN 'catalog.price_changed' \
                            THEN (e.entry::jsonb -> 'body' ->> 'price_paise')::bigint \
                          WHEN 'seed' \
                            THEN (e.entry::jsonb -> 'body' -> 'catalog_prices' ->> c.sku)::bigint \
                          ELSE (SELECT (g ->> 'price_paise')::bigint \
                                  FROM jsonb_array_elements( \
                                           e.entry::jsonb -> 'body' -> 'added' -> 'catalog') g \
                                 WHERE g ->> 'sku' = c.sku LIMIT 1) END \
                   FROM ledger_entries e \
                  WHERE e.tenant_id = c.tenant_id \
                    AND ((e.kind = 'catalog.price_changed' \
                          AND e.entry::jsonb ->> 'subject' = c.sku) \
                      OR (e.kind = 'seed' \
                          AND e.entry::jsonb -> 'body' -> 'catalog_prices' ? c.sku) \
                      OR (e.kind = 'tenant.extended' \
                          AND jsonb_typeof(e.entry::jsonb -> 'body' -> 'added' -> 'catalog') \
                              = 'array' \
                          AND EXISTS (SELECT 1 FROM jsonb_array_elements( \
                                          e.entry::jsonb -> 'body' -> 'added' -> 'catalog') g \
                                       WHERE g ->> 'sku' = c.sku))) \
                  ORDER BY e.seq DESC LIMIT 1) AS recorded_price \
         FROM catalog_items c \
         WHERE $1::text IS NULL OR c.tenant_id = $1 ORDER BY c.tenant_id, c.sku",
    )
    .bind(tenant)
    .fetch_all(&mut **tx)
    .await?;
    for c in rows {
        let (item, mac) = c.row.into_item();
        let mut problems = Vec::new();
        if !ledger::catalog_item_mac_holds(key, &c.tenant_id, &item, mac.as_deref()) {
            problems.push(
                "its MAC does not verify: its terms are not the ones the gate wrote".to_owned(),
            );
        }
        match c.recorded_price {
            None => problems.push(format!(
                "price_paise {} but no ledger entry records a price for it",
                item.price_paise
            )),
            Some(recorded) if recorded != item.price_paise => problems.push(format!(
                "price_paise {} but the ledger last recorded {recorded}",
                item.price_paise
            )),
            Some(_) => {}
        }
        if !problems.is_empty() {
            found.push(Disagreement {
                tenant: c.tenant_id,
                table: "catalog_items",
                key: format!("sku={}", item.sku),
                problem: problems.join("; "),
            });
        }
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct RequestAudit {
    tenant_id: String,
    id: String,
    agent_id: String,
    sku: Option<String>,
    quantity: Option<i32>,
    merchant_id: Option<String>,
    amount_paise: Option<i64>,
    currency: Option<String>,
    purchase_digest: Option<String>,
    policy_version: Option<i32>,
    decision: String,
    state: String,
    row_mac: Option<String>,
}

/// The states of a request that holds or moved money: only a request the
/// gate authorized reaches them.
const AUTHORIZED_STATES: [&str; 4] = [
    "AUTHORIZED",
    "CHECKOUT_ISSUED",
    "PROVIDER_PENDING",
    "CAPTURED",
];

/// Each payment request against its MAC, under the standing its state
/// needs.
async fn requests(
    tx: &mut Transaction<'static, Postgres>,
    key: &LedgerKey,
    tenant: Option<&str>,
    found: &mut Vec<Disagreement>,
) -> Result<(), sqlx::Error> {
    let rows: Vec<RequestAudit> = sqlx::query_as(
        "SELECT tenant_id, id, agent_id, sku, quantity, merchant_id, amount_paise, currency, \
                purchase_digest, policy_version, decision, state, row_mac \
         FROM payment_requests \
         WHERE $1::text IS NULL OR tenant_id = $1 ORDER BY tenant_id, id",
    )
    .bind(tenant)
    .fetch_all(&mut **tx)
    .await?;
    for r in rows {
        let terms = |standing| RequestTerms {
            tenant: &r.tenant_id,
            id: &r.id,
            agent: &r.agent_id,
            sku: r.sku.as_deref(),
            quantity: r.quantity,
            merchant: r.merchant_id.as_deref(),
            amount_paise: r.amount_paise,
            currency: r.currency.as_deref().map(str::trim_end),
            digest: r.purchase_digest.as_deref(),
            policy_version: r.policy_version,
            standing,
        };
        let stored = r.row_mac.as_deref();
        let authorized = terms(ledger::STANDING_ALLOWED).verifies(key, stored);
        let holds = authorized
            || (!AUTHORIZED_STATES.contains(&r.state.as_str())
                && terms(r.decision.as_str()).verifies(key, stored));
        if !holds {
            found.push(Disagreement {
                tenant: r.tenant_id.clone(),
                table: "payment_requests",
                key: format!("id={}", r.id),
                problem: format!(
                    "its MAC does not verify: terms or a standing the gate did not write \
                     (state {}, amount_paise {})",
                    r.state,
                    r.amount_paise
                        .map_or_else(|| "none".to_owned(), |a| a.to_string())
                ),
            });
        }
    }
    Ok(())
}

/// Counters and rows checked in SQL: (table, query returning (tenant, key,
/// detail) of each row that disagrees, what disagrees). `$1` is the tenant
/// or NULL for all.
const COUNTS: &[(&str, &str, &str)] = &[
    (
        "daily_spend",
        "SELECT d.tenant_id, format('day=%s currency=%s', d.day, d.currency), \
                format('reserved_paise %s, its requests reserve %s', d.reserved_paise, \
                       COALESCE(r.total, 0)) \
         FROM daily_spend d \
         LEFT JOIN (SELECT tenant_id, reserved_day, currency, sum(reserved_paise) AS total \
                      FROM payment_requests WHERE reserved_day IS NOT NULL \
                     GROUP BY tenant_id, reserved_day, currency) r \
           ON r.tenant_id = d.tenant_id AND r.reserved_day = d.day AND r.currency = d.currency \
         WHERE ($1::text IS NULL OR d.tenant_id = $1) \
           AND d.reserved_paise <> COALESCE(r.total, 0)",
        "the day's reservation is not its requests'",
    ),
    (
        "delegations",
        "SELECT d.tenant_id, format('id=%s', d.id), \
                format('spent_paise %s, its requests reserve %s', d.spent_paise, \
                       COALESCE(r.total, 0)) \
         FROM delegations d \
         LEFT JOIN (SELECT tenant_id, delegation_id, sum(reserved_paise) AS total \
                      FROM payment_requests WHERE delegation_id IS NOT NULL \
                     GROUP BY tenant_id, delegation_id) r \
           ON r.tenant_id = d.tenant_id AND r.delegation_id = d.id \
         WHERE ($1::text IS NULL OR d.tenant_id = $1) \
           AND d.spent_paise <> COALESCE(r.total, 0)",
        "the hop's spend is not its requests'",
    ),
    (
        "checkout_authorities",
        "SELECT a.tenant_id, format('id=%s', a.id), \
                format('consumptions %s, consumed_at %s', a.consumptions, \
                       COALESCE(a.consumed_at::text, 'none')) \
         FROM checkout_authorities a \
         WHERE ($1::text IS NULL OR a.tenant_id = $1) AND a.consumptions = 0 \
           AND EXISTS (SELECT 1 FROM ledger_entries l \
                        WHERE l.tenant_id = a.tenant_id AND l.kind = 'authority.consumed' \
                          AND l.entry::jsonb ->> 'subject' = a.id)",
        "an authority the ledger consumed reads unconsumed",
    ),
    (
        "provider_payments",
        "SELECT p.tenant_id, format('provider_payment_id=%s', p.provider_payment_id), \
                format('%s paise for request %s, learnt by %s', p.amount_paise, p.request_id, \
                       p.source) \
         FROM provider_payments p \
         WHERE ($1::text IS NULL OR p.tenant_id = $1) AND p.status = 'captured' \
           AND NOT EXISTS (SELECT 1 FROM provider_events e \
                            WHERE e.tenant_id = p.tenant_id \
                              AND e.request_id = p.request_id \
                              AND e.provider_order_id = p.provider_order_id \
                              AND e.event IN ('payment.captured', 'order.paid', \
                                              'payment.authorized') \
                              AND e.outcome = 'applied') \
           AND NOT EXISTS (SELECT 1 FROM kept_captures k \
                            WHERE k.tenant_id = p.tenant_id \
                              AND k.provider_payment_id = p.provider_payment_id \
                              AND k.provider_order_id = p.provider_order_id) \
           AND NOT (p.source = 'reconcile' AND EXISTS ( \
                    SELECT 1 FROM provider_orders o JOIN ledger_entries l \
                      ON l.tenant_id = o.tenant_id AND l.kind = 'reconcile' \
                     AND l.entry::jsonb ->> 'subject' = o.authority_id \
                     WHERE o.tenant_id = p.tenant_id \
                       AND o.provider_order_id = p.provider_order_id)) \
           AND NOT EXISTS (SELECT 1 FROM ledger_entries l \
                            WHERE l.tenant_id = p.tenant_id \
                              AND strpos(l.entry, p.provider_payment_id) > 0)",
        "a captured payment without the signed event or ledger entry that carried it",
    ),
    (
        "kept_captures",
        "SELECT k.tenant_id, format('event_id_sha256=%s', k.event_id_sha256), \
                format('%s %s for authority %s, order %s, payment %s', k.amount_paise, \
                       k.currency, k.authority_id, k.provider_order_id, k.provider_payment_id) \
         FROM kept_captures k \
         WHERE ($1::text IS NULL OR k.tenant_id = $1) \
           AND NOT EXISTS (SELECT 1 FROM ledger_entries l \
                            WHERE l.tenant_id = k.tenant_id AND l.kind = 'provider_event.kept' \
                              AND l.entry::jsonb -> 'body' ->> 'event_id_sha256' = k.event_id_sha256 \
                              AND l.entry::jsonb -> 'body' ->> 'authority' = k.authority_id \
                              AND l.entry::jsonb -> 'body' -> 'event' ->> 'order_id' \
                                  = k.provider_order_id \
                              AND l.entry::jsonb -> 'body' -> 'event' ->> 'payment_id' \
                                  = k.provider_payment_id \
                              AND l.entry::jsonb -> 'body' -> 'event' ->> 'amount_paise' \
                                  = k.amount_paise::text \
                              AND l.entry::jsonb -> 'body' -> 'event' ->> 'currency' = k.currency)",
        "a kept capture without the signed event the ledger kept it for",
    ),
    (
        "policy_versions",
        "SELECT v.tenant_id, format('version=%s', v.version), \
                'no seed or policy.published entry records it' \
         FROM policy_versions v \
         WHERE ($1::text IS NULL OR v.tenant_id = $1) \
           AND NOT EXISTS (SELECT 1 FROM ledger_entries l \
                            WHERE l.tenant_id = v.tenant_id \
                              AND ((l.kind = 'policy.published' \
                                    AND l.entry::jsonb ->> 'subject' = v.version::text) \
                                OR (l.kind = 'seed' AND v.version = 1)))",
        "a policy version without a ledger entry",
    ),
    (
        "tenants",
        "SELECT t.id, format('id=%s', t.id), 'its chain has no seed entry' \
         FROM tenants t \
         WHERE ($1::text IS NULL OR t.id = $1) \
           AND NOT EXISTS (SELECT 1 FROM ledger_entries l \
                            WHERE l.tenant_id = t.id AND l.kind = 'seed')",
        "a tenant created outside onboarding",
    ),
    (
        "delegations",
        "SELECT d.tenant_id, format('id=%s', d.id), \
                format('root granted by %s to %s, budget %s', d.grantor_id, d.grantee_id, \
                       d.budget_paise) \
         FROM delegations d \
         WHERE ($1::text IS NULL OR d.tenant_id = $1) AND d.parent_id IS NULL \
           AND NOT EXISTS (SELECT 1 FROM ledger_entries l \
                            WHERE l.tenant_id = d.tenant_id \
                              AND ((l.kind = 'delegation.granted' \
                                    AND l.entry::jsonb ->> 'subject' = d.id) \
                                OR (l.kind = 'seed' AND EXISTS ( \
                                    SELECT 1 FROM jsonb_array_elements( \
                                        l.entry::jsonb -> 'body' -> 'delegations') g \
                                     WHERE g ->> 'id' = d.id))))",
        "a root delegation without a ledger entry",
    ),
];
