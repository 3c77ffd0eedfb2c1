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
//! - a policy version, a tenant or a root delegation without the ledger
//!   entry that made it.
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

use super::ledger::{self, AuthorityTerms, LedgerKey};

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
