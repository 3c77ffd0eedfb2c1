//! A stolen database login moves no money: the red team's attempts,
//! replayed as the gate's runtime role (`spendgate_app`, the login `serve`
//! holds). Each is refused by a named guard (SQLSTATE 42501 for a privilege
//! the role lacks, or the guard's name), or the money audit that
//! `spendgate ledger verify` runs (`gate::service::audit`) names the row it
//! changed. Step 2, inflate and pay, creates no provider order.
//!
//! Attempts 15 and 16, locking every tenant's rows (`SELECT … FOR UPDATE`)
//! and reading them, are replayed with row-level security enforced
//! (`migrations/*_row_security.sql`, the `tenant_rows` policies): the
//! login, on a connection of its own, reads and locks no row of any tenant,
//! whatever it sets `spendgate.tenant_token` to short of a token only the
//! ledger key computes; one tenant's token opens no other tenant's rows.

use crate::support::*;
use gate::service::{Disagreement, LedgerKey, audit};
use gate::{Decision, Reason};

use crate::db_roles::assert_denied;
use gate::service::ledger::{EVERY_TENANT, row_token, row_token_digest};
use sqlx::PgPool;

pub(crate) fn key() -> LedgerKey {
    LedgerKey::derived_from_secret(SECRET)
}

/// The audit's findings for `table`, as (key, problem).
async fn named(
    w: &World,
    table: &str,
) -> Result<Vec<Disagreement>, Box<dyn std::error::Error + Send + Sync>> {
    w.gate.integrate().await?;
    Ok(audit(w.pool(), &key(), None)
        .await?
        .into_iter()
        .filter(|d| d.table == table)
        .collect())
}

/// A checked-out SNACK-BOX x1 (25,000 paise, below the approval
/// threshold): (request id, authority id).
async fn checked_out(
    w: &World,
) -> Result<(String, String), Box<dyn std::error::Error + Send + Sync>> {
    let p = w.propose("SNACK-BOX", 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    let request = request_id(&p);
    let c = w.gate.checkout("acme", &request, "finance-lead").await?;
    assert!(c.is_ok(), "{c:?}");
    Ok((request, id(&c)))
}

/// Attempt 1: a human key of the login's own making.
#[tokio::test]
async fn attempt_01_a_minted_api_key_is_refused_and_named() -> TestResult {
    on_world(async |w| {
        let digest = gate::service::api_keys::digest_hex(
            "sgk_00000000000000aa_0000000000000000000000000000000000000000000000000000000000000000",
        );
        let sql = format!(
            "INSERT INTO api_keys (id, tenant_id, person_id, key_sha256, created_at, kind) \
             VALUES ('00000000000000aa', 'acme', 'finance-lead', '{digest}', now(), 'human')"
        );
        assert_denied(exec(w.pool(), &sql).await, "a minted key");
        // A login that could write it anyway (the onboarding role's) mints
        // no key: the gate refuses the row, and the audit names it.
        exec(w.onboard(), &sql).await?;
        let token =
            "sgk_00000000000000aa_0000000000000000000000000000000000000000000000000000000000000000";
        assert_eq!(w.gate.authenticate(token).await?, None);
        let found = named(w, "api_keys").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, "id=00000000000000aa");
        Ok(())
    })
    .await
}

/// Attempt 2: multiply an issued authority's amount by 100, with its
/// request's, then pay. Refused by the money-terms guards; and where a
/// login gets past them, pay refuses AUTHORITY_PURCHASE_CHANGED before the
/// provider is called, and the audit names the authority.
#[tokio::test]
async fn attempt_02_inflate_and_pay_creates_no_provider_order() -> TestResult {
    on_world(async |w| {
        let (request, authority) = checked_out(w).await?;
        let inflate = format!(
            "WITH a AS (UPDATE checkout_authorities SET amount_paise = amount_paise * 100 \
                         WHERE id = '{authority}' RETURNING 1) \
             UPDATE payment_requests SET amount_paise = amount_paise * 100, \
                    reserved_paise = reserved_paise * 100 WHERE id = '{request}'"
        );
        let refused = exec(w.pool(), &inflate).await;
        let guard = refused
            .as_ref()
            .err()
            .and_then(|e| e.as_database_error())
            .and_then(|d| d.constraint())
            .map(str::to_owned);
        assert!(
            matches!(
                guard.as_deref(),
                Some("authority_terms_immutable" | "request_terms_immutable")
            ),
            "{refused:?}"
        );
        // Past the guards (as the owner, with them switched off): the MAC.
        exec(
            w.owner(),
            "ALTER TABLE checkout_authorities DISABLE TRIGGER authority_terms_immutable; \
             ALTER TABLE payment_requests DISABLE TRIGGER request_terms_immutable; \
             ALTER TABLE payment_requests DISABLE TRIGGER daily_spend_counts_requests; \
             ALTER TABLE payment_requests DISABLE TRIGGER delegation_spend_counts_requests",
        )
        .await?;
        let inflated = exec(w.owner(), &inflate).await?;
        assert_eq!(inflated, 1);
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(
            paid.decision,
            Decision::Deny(Reason::AuthorityPurchaseChanged),
            "{paid:?}"
        );
        assert!(
            w.gate.provider().orders().is_empty(),
            "a provider order was created: {:?}",
            w.gate.provider().orders()
        );
        let found = named(w, "checkout_authorities").await?;
        assert!(
            found.iter().any(|d| d.key == format!("id={authority}")
                && d.problem.contains("MAC does not verify")
                && d.problem.contains("2500000")),
            "{found:?}"
        );
        Ok(())
    })
    .await
}

/// Attempts 3 to 7: a tenant (and its ledger head), a person, an agent, a
/// merchant, and a root delegation of any budget.
#[tokio::test]
async fn attempts_03_to_07_onboarding_rows_are_refused() -> TestResult {
    on_world(async |w| {
        for (what, sql) in [
            ("a tenant", "INSERT INTO tenants (id) VALUES ('shadow')"),
            (
                "a ledger head",
                "INSERT INTO ledger_head (tenant_id, seq, hash) VALUES ('acme', 0, repeat('0', 64))",
            ),
            (
                "a person",
                "INSERT INTO people (tenant_id, id, display_name, may_approve) \
                 VALUES ('acme', 'mallory', 'mallory', true)",
            ),
            ("an agent", "INSERT INTO agents (tenant_id, id) VALUES ('acme', 'rogue')"),
            (
                "a merchant",
                "INSERT INTO merchants (tenant_id, id, display_name) VALUES ('acme', 'shell', 'x')",
            ),
        ] {
            assert_denied(exec(w.pool(), sql).await, what);
        }
        assert_sql_refused_by(
            w.pool(),
            "INSERT INTO delegations (tenant_id, id, grantor_id, grantee_id, budget_paise, \
             created_at) VALUES ('acme', 'd-any', 'finance-lead', 'buyer-agent', 900000000, now())",
            "delegation_root_by_onboarding",
        )
        .await;
        Ok(())
    })
    .await
}

/// Attempt 8: a policy version with no gate call and no ledger entry.
#[tokio::test]
async fn attempt_08_a_policy_version_without_a_ledger_entry_is_named() -> TestResult {
    on_world(async |w| {
        exec(
            w.pool(),
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
             SELECT tenant_id, 2, jsonb_set(policy, '{approval_threshold_paise}', '900000000'), \
                    published_at FROM policy_versions WHERE tenant_id = 'acme' AND version = 1",
        )
        .await?;
        let found = named(w, "policy_versions").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].tenant.as_str(), found[0].key.as_str()),
            ("acme", "version=2")
        );
        Ok(())
    })
    .await
}

/// Attempts 9 and 10: a day's reservation and cap, and a hop's spend, set
/// to 0. The counters' triggers ship disabled (each costs more than 10% of
/// the flow's throughput), so both resets are written; the audit names
/// both rows.
#[tokio::test]
async fn attempts_09_10_reset_counters_are_named() -> TestResult {
    on_world(async |w| {
        checked_out(w).await?;
        let reset_day =
            "UPDATE daily_spend SET reserved_paise = 0, cap_paise = 0 WHERE tenant_id = 'acme'";
        let reset_hop =
            "UPDATE delegations SET spent_paise = 0 WHERE tenant_id = 'acme' AND id = 'd-buyer'";
        assert_eq!(exec(w.pool(), reset_day).await?, 1);
        assert_eq!(exec(w.pool(), reset_hop).await?, 1);
        let days = named(w, "daily_spend").await?;
        assert_eq!(days.len(), 1, "{days:?}");
        assert!(
            days[0].problem.contains("its requests reserve 25000"),
            "{days:?}"
        );
        let hops = named(w, "delegations").await?;
        assert!(
            hops.iter()
                .any(|d| d.key == "id=d-buyer" && d.problem.contains("its requests reserve 25000")),
            "{hops:?}"
        );
        Ok(())
    })
    .await
}

/// Attempt 11: an authority's consumption reset. Paying it again is
/// refused (its request is no longer CHECKOUT_ISSUED), no second order is
/// made, and the audit names the authority.
#[tokio::test]
async fn attempt_11_a_reset_consumption_pays_nothing_and_is_named() -> TestResult {
    on_world(async |w| {
        let (_request, authority) = checked_out(w).await?;
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert!(paid.is_ok(), "{paid:?}");
        exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET consumptions = 0, consumed_at = NULL, \
                 consumed_by = NULL WHERE id = '{authority}'"
            ),
        )
        .await?;
        let again = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(again.decision, Decision::Deny(Reason::RequestNotAuthorized));
        assert_eq!(w.gate.provider().orders().len(), 1);
        let found = named(w, "checkout_authorities").await?;
        assert!(
            found
                .iter()
                .any(|d| d.key == format!("id={authority}") && d.problem.contains("consumed")),
            "{found:?}"
        );
        Ok(())
    })
    .await
}

/// Attempts 12 and 13: a captured payment no provider sent (refused at
/// commit; past the guard, named by the audit), and CAPTURED without a
/// payment.
#[tokio::test]
async fn attempts_12_13_a_captured_payment_without_its_event_is_named() -> TestResult {
    on_world(async |w| {
        let (request, _authority, order) = paid_order(w).await?;
        assert_sql_refused_by(
            w.pool(),
            &format!("UPDATE payment_requests SET state = 'CAPTURED' WHERE id = '{request}'"),
            "request_captured_by_event",
        )
        .await;
        let forge = format!(
            "INSERT INTO provider_payments (tenant_id, provider_payment_id, provider_order_id, \
             request_id, amount_paise, currency, status, source, recorded_at) \
             SELECT tenant_id, 'pay_forged', provider_order_id, request_id, amount_paise, \
                    currency, 'captured', 'webhook', now() \
             FROM provider_orders WHERE provider_order_id = '{order}'"
        );
        assert_sql_refused_by(w.pool(), &forge, "provider_payment_carried_by_event").await;
        // Past the guard (as the owner, with it switched off): the audit.
        exec(
            w.owner(),
            "ALTER TABLE provider_payments DISABLE TRIGGER provider_payment_carried_by_event",
        )
        .await?;
        exec(w.pool(), &forge).await?;
        let found = named(w, "provider_payments").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, "provider_payment_id=pay_forged");
        Ok(())
    })
    .await
}

/// Attempt 14: an API key rebound to another human keeps no key: the
/// binding guard refuses it.
#[tokio::test]
async fn attempt_14_a_rebound_key_is_refused() -> TestResult {
    on_world(async |w| {
        let k = w
            .gate
            .issue_key("acme", "buyer-agent", w.gate.now())
            .await?;
        assert_denied(
            exec(
                w.pool(),
                &format!(
                    "UPDATE api_keys SET agent_id = NULL, person_id = 'finance-lead' \
                     WHERE id = '{}'",
                    k.id
                ),
            )
            .await,
            "a rebound key",
        );
        assert!(w.gate.authenticate(&k.token).await?.is_some());
        assert!(named(w, "api_keys").await?.is_empty());
        Ok(())
    })
    .await
}

/// The stolen login: the runtime role on a connection of its own, which
/// carries no row-security token (the gate's connections carry the
/// every-tenant token, which only the ledger key computes).
async fn stolen(w: &World) -> Result<PgPool, sqlx::Error> {
    pool_of(&w.db, 2).await
}

/// Every table of tenant rows (a `tenant_id` column, and `tenants`), read as
/// the owner: the tables `tenant_rows` must guard.
async fn guarded_tables(w: &World) -> Result<Vec<String>, sqlx::Error> {
    // Read from the schema, never from the policies themselves: a table
    // whose policy is gone is still a table of tenant rows, and is checked.
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c \
           JOIN pg_namespace n ON n.oid = c.relnamespace \
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') \
            AND (c.relname = 'tenants' OR EXISTS ( \
                   SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid \
                      AND a.attname = 'tenant_id' AND NOT a.attisdropped)) \
          ORDER BY 1",
    )
    .fetch_all(w.owner())
    .await
}

/// What the login may set `spendgate.tenant_token` to without the ledger
/// key: nothing, a guess, tenant ids, the every-tenant scope, and the
/// digests the database compares against.
fn guesses() -> Vec<Option<String>> {
    vec![
        None,
        Some("guess".into()),
        Some("acme".into()),
        Some("globex".into()),
        Some(EVERY_TENANT.into()),
        Some(row_token_digest(&row_token(&key(), "acme"))),
        Some(row_token_digest(&row_token(&key(), EVERY_TENANT))),
    ]
}

/// Runs `sql` on `login` in a transaction whose token is `token`: the rows
/// it returned, or the error.
pub(crate) async fn rows_as(
    login: &PgPool,
    token: Option<&str>,
    sql: &str,
) -> Result<usize, sqlx::Error> {
    let mut tx = login.begin().await?;
    if let Some(token) = token {
        sqlx::query("SELECT set_config('spendgate.tenant_token', $1, true)")
            .bind(token)
            .execute(&mut *tx)
            .await?;
    }
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *tx)
        .await?;
    tx.rollback().await?;
    Ok(rows.len())
}

/// Attempt 15: `SELECT … FOR UPDATE` on every tenant's rows locks none: a
/// table the role may update yields no row, one it may not is refused
/// (42501), whatever the login sets its token to.
#[tokio::test]
async fn attempt_15_locking_every_tenants_rows_locks_none() -> TestResult {
    on_world(async |w| {
        checked_out(w).await?;
        let login = stolen(w).await?;
        let tables = guarded_tables(w).await?;
        assert!(tables.len() >= 20, "{tables:?}");
        let mut locked_by_rls = 0;
        for token in guesses() {
            for t in &tables {
                match rows_as(
                    &login,
                    token.as_deref(),
                    &format!("SELECT 1 FROM {t} FOR UPDATE"),
                )
                .await
                {
                    Ok(n) => {
                        assert_eq!(n, 0, "{t} under {token:?}: {n} rows locked");
                        locked_by_rls += 1;
                    }
                    Err(e) => assert_denied::<()>(Err(e), &format!("locking {t}")),
                }
            }
        }
        // The money tables are the ones the role may update: there, the
        // policy is what holds.
        assert!(locked_by_rls >= 7 * 5, "{locked_by_rls}");
        // Not vacuous: the rows are there.
        for t in ["payment_requests", "daily_spend", "delegations", "people"] {
            let n: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {t}")))
                    .fetch_one(w.owner())
                    .await?;
            assert!(n > 0, "{t} is empty");
        }
        login.close().await;
        Ok(())
    })
    .await
}

/// Attempt 16: reading every tenant's rows reads none, whatever the login
/// sets its token to; and the token table itself is not the login's to
/// read or write, nor is the switch.
#[tokio::test]
async fn attempt_16_reading_every_tenants_rows_reads_none() -> TestResult {
    on_world(async |w| {
        checked_out(w).await?;
        let login = stolen(w).await?;
        for token in guesses() {
            for t in guarded_tables(w).await? {
                let n = rows_as(&login, token.as_deref(), &format!("SELECT * FROM {t}")).await?;
                assert_eq!(n, 0, "{t} under {token:?}: {n} rows read");
            }
        }
        assert_denied(
            exec(&login, "SELECT * FROM row_tokens").await,
            "reading the tokens",
        );
        assert_denied(
            exec(
                &login,
                &format!(
                    "INSERT INTO row_tokens (scope, token_sha256) VALUES ('acme', '{}')",
                    row_token_digest("mine")
                ),
            )
            .await,
            "writing a token",
        );
        assert_denied(
            exec(&login, "SELECT spendgate_row_security(false)").await,
            "switching row-level security off",
        );
        login.close().await;
        Ok(())
    })
    .await
}

/// acme's token opens acme's rows and no other tenant's: globex's rows are
/// neither read, locked nor updated, and a row written into globex is
/// refused by `tenant_rows`.
#[tokio::test]
async fn one_tenants_token_opens_no_other_tenant() -> TestResult {
    on_world(async |w| {
        checked_out(w).await?;
        let login = stolen(w).await?;
        let acme = row_token(&key(), "acme");
        let people = rows_as(&login, Some(&acme), "SELECT 1 FROM people").await?;
        let acme_people: i64 =
            sqlx::query_scalar("SELECT count(*) FROM people WHERE tenant_id = 'acme'")
                .fetch_one(w.owner())
                .await?;
        assert_eq!(people as i64, acme_people);
        for t in guarded_tables(w).await? {
            let column = if t == "tenants" { "id" } else { "tenant_id" };
            let sql = format!("SELECT 1 FROM {t} WHERE {column} <> 'acme'");
            assert_eq!(rows_as(&login, Some(&acme), &sql).await?, 0, "{t}");
        }
        let globex_token = row_token(&key(), "globex");
        let globex = rows_as(&login, Some(&globex_token), "SELECT 1 FROM people").await?;
        assert!(globex > 0);
        let mut tx = login.begin().await?;
        sqlx::query("SELECT set_config('spendgate.tenant_token', $1, true)")
            .bind(&acme)
            .execute(&mut *tx)
            .await?;
        let updated =
            sqlx::query("UPDATE delegations SET spent_paise = 0 WHERE tenant_id = 'globex'")
                .execute(&mut *tx)
                .await?;
        assert_eq!(updated.rows_affected(), 0);
        let written = sqlx::query(
            "INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
             VALUES ('globex', 99, '{}', now())",
        )
        .execute(&mut *tx)
        .await;
        assert_refused_by(written, "policy \"tenant_rows\"");
        tx.rollback().await?;
        login.close().await;
        Ok(())
    })
    .await
}

/// The token table's own guards, violated with SQL by the onboarding role
/// (the one role that writes it): a digest is 64 lower-case hex characters,
/// and one digest names one scope.
#[tokio::test]
async fn a_row_token_digest_is_hex_and_names_one_scope() -> TestResult {
    on_world(async |w| {
        assert_sql_refused_by(
            w.onboard(),
            "INSERT INTO row_tokens (scope, token_sha256) VALUES ('shadow', 'not hex')",
            "ck_row_token_sha256_hex",
        )
        .await;
        assert_sql_refused_by(
            w.onboard(),
            "INSERT INTO row_tokens (scope, token_sha256) \
             SELECT 'shadow', token_sha256 FROM row_tokens WHERE scope = 'acme'",
            "uq_row_token_sha256",
        )
        .await;
        Ok(())
    })
    .await
}

/// How many `kind` entries the ledger holds about `subject`: each refusal
/// goes through the one refusal path, which records it.
async fn recorded(
    w: &World,
    kind: &str,
    subject: &str,
) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    w.ledger().await?;
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM ledger_entries \
          WHERE kind = $1 AND entry::jsonb ->> 'subject' = $2",
    )
    .bind(kind)
    .bind(subject)
    .fetch_one(w.owner())
    .await?)
}

/// Attempt 17: the login sets a catalog price. The next proposal for the
/// sku is refused PRICE_INVALID (recorded), an authority issued before the
/// change pays nothing, a price change by the gate does not give the row
/// its MAC, and the audit names the row and the price the ledger recorded.
#[tokio::test]
async fn attempt_17_a_price_set_by_the_login_moves_no_money_and_is_named() -> TestResult {
    on_world(async |w| {
        let (_request, authority) = checked_out(w).await?;
        let set = exec(
            w.pool(),
            "UPDATE catalog_items SET price_paise = 2500 \
              WHERE tenant_id = 'acme' AND sku = 'SNACK-BOX'",
        )
        .await?;
        assert_eq!(set, 1, "the runtime role may update catalog rows");

        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, deny(Reason::PriceInvalid), "{p:?}");
        let refused: Option<String> =
            sqlx::query_scalar("SELECT reason FROM payment_requests WHERE id = $1")
                .bind(request_id(&p))
                .fetch_one(w.owner())
                .await?;
        assert_eq!(refused.as_deref(), Some("PRICE_INVALID"));
        // Another sku's row still verifies and still decides.
        assert_eq!(
            w.propose("CLOUD-STARTER", 1).await?.decision,
            Decision::Allow
        );

        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(
            paid.decision,
            deny(Reason::AuthorityPurchaseChanged),
            "{paid:?}"
        );
        assert!(
            w.gate.provider().orders().is_empty(),
            "a provider order was created: {:?}",
            w.gate.provider().orders()
        );

        let again = w.gate.set_price("acme", "SNACK-BOX", 2500).await?;
        assert_eq!(again.decision, deny(Reason::PriceInvalid), "{again:?}");
        assert_eq!(recorded(w, "catalog.price_refused", "SNACK-BOX").await?, 1);
        assert_eq!(
            w.propose("SNACK-BOX", 1).await?.decision,
            deny(Reason::PriceInvalid),
            "the gate's price change laundered the row"
        );

        let found = named(w, "catalog_items").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].tenant.as_str(), found[0].key.as_str()),
            ("acme", "sku=SNACK-BOX")
        );
        assert!(
            found[0].problem.contains("MAC does not verify")
                && found[0]
                    .problem
                    .contains("price_paise 2500 but the ledger last recorded 25000"),
            "{found:?}"
        );
        Ok(())
    })
    .await
}

/// A price the gate sets is recorded and MACed: proposals decide on it, and
/// the audit finds nothing in the catalog.
#[tokio::test]
async fn a_price_the_gate_sets_decides_and_the_audit_agrees() -> TestResult {
    on_world(async |w| {
        assert!(named(w, "catalog_items").await?.is_empty());
        let set = w.gate.set_price("acme", "SNACK-BOX", 30_000).await?;
        assert_eq!(set.decision, Decision::Allow, "{set:?}");
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        let amount: Option<i64> =
            sqlx::query_scalar("SELECT amount_paise FROM payment_requests WHERE id = $1")
                .bind(request_id(&p))
                .fetch_one(w.owner())
                .await?;
        assert_eq!(amount, Some(30_000));
        assert!(named(w, "catalog_items").await?.is_empty());
        assert!(named(w, "payment_requests").await?.is_empty());
        Ok(())
    })
    .await
}

/// The login's copy of `request` as a new AUTHORIZED request `forged`, for
/// `amount` paise (its reservation too) and otherwise the same terms.
fn forged_copy(request: &str, forged: &str, amount: i64) -> String {
    format!(
        "INSERT INTO payment_requests (id, tenant_id, agent_id, body_sha256, sku, quantity, \
         purpose, merchant_id, currency, amount_paise, purchase_digest, decision, state, \
         policy_version, reserved_paise, reserved_day, delegation_id, authorized_at, \
         created_at, updated_at, row_mac) \
         SELECT '{forged}', tenant_id, agent_id, body_sha256, sku, quantity, purpose, \
                merchant_id, currency, {amount}, purchase_digest, decision, state, \
                policy_version, {amount}, reserved_day, delegation_id, authorized_at, \
                created_at, updated_at, row_mac \
           FROM payment_requests WHERE id = '{request}'"
    )
}

/// Attempt 18: the login inserts an AUTHORIZED request of its own (a copy
/// of a real one, at 100 times its amount, with the real one's MAC).
/// Checkout refuses it AUTHORITY_PURCHASE_CHANGED (recorded): no
/// authority, no provider order; the audit names it.
#[tokio::test]
async fn attempt_18_a_login_inserted_authorized_request_gets_no_authority() -> TestResult {
    on_world(async |w| {
        let p = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        let forged = "req_0000000000000000000000000000f0a9";
        let insert = forged_copy(&request_id(&p), forged, 2_500_000);
        exec(w.pool(), &insert).await?;

        let c = w.gate.checkout("acme", forged, "finance-lead").await?;
        assert_eq!(c.decision, deny(Reason::AuthorityPurchaseChanged), "{c:?}");
        assert_eq!(recorded(w, "checkout.refused", forged).await?, 1);
        let authorities: i64 =
            sqlx::query_scalar("SELECT count(*) FROM checkout_authorities WHERE request_id = $1")
                .bind(forged)
                .fetch_one(w.owner())
                .await?;
        assert_eq!(
            authorities, 0,
            "an authority was issued for a forged request"
        );
        assert!(w.gate.provider().orders().is_empty());
        let state: String = sqlx::query_scalar("SELECT state FROM payment_requests WHERE id = $1")
            .bind(forged)
            .fetch_one(w.owner())
            .await?;
        assert_eq!(
            state, "AUTHORIZED",
            "nothing is done on a forged row's word"
        );

        let found = named(w, "payment_requests").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, format!("id={forged}"));
        assert!(found[0].problem.contains("2500000"), "{found:?}");
        Ok(())
    })
    .await
}

/// Attempt 19: the login edits a pending request's amount. The terms
/// trigger refuses it; past the trigger (the owner switches it off), the
/// approval is refused AUTHORITY_PURCHASE_CHANGED (recorded) before any
/// approval is written, and the audit names the request.
#[tokio::test]
async fn attempt_19_a_login_edited_pending_request_is_not_approved() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-TEAM", 1).await?;
        assert!(matches!(p.decision, Decision::StepUp(_)), "{p:?}");
        let request = request_id(&p);
        let edit = format!("UPDATE payment_requests SET amount_paise = 100 WHERE id = '{request}'");
        assert_sql_refused_by(w.pool(), &edit, "request_terms_immutable").await;
        exec(
            w.owner(),
            "ALTER TABLE payment_requests DISABLE TRIGGER request_terms_immutable",
        )
        .await?;
        assert_eq!(exec(w.pool(), &edit).await?, 1);

        let a = w.gate.approve("acme", &request, "finance-lead").await?;
        assert_eq!(a.decision, deny(Reason::AuthorityPurchaseChanged), "{a:?}");
        assert_eq!(recorded(w, "approval.refused", &request).await?, 1);
        let approvals: i64 =
            sqlx::query_scalar("SELECT count(*) FROM approvals WHERE request_id = $1")
                .bind(&request)
                .fetch_one(w.owner())
                .await?;
        assert_eq!(approvals, 0);
        let found = named(w, "payment_requests").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].key, format!("id={request}"));
        Ok(())
    })
    .await
}

/// Attempt 20: the login approves a pending request itself, moving it to
/// AUTHORIZED with a reservation. Its MAC is still the step-up's, so
/// checkout refuses it AUTHORITY_PURCHASE_CHANGED: no authority; the audit
/// names it. A request a human approved through the gate checks out.
#[tokio::test]
async fn attempt_20_a_request_the_login_authorized_gets_no_authority() -> TestResult {
    on_world(async |w| {
        let p = w.propose("CLOUD-TEAM", 1).await?;
        assert!(matches!(p.decision, Decision::StepUp(_)), "{p:?}");
        let request = request_id(&p);
        let authorize = format!(
            "UPDATE payment_requests SET state = 'AUTHORIZED', reserved_paise = amount_paise, \
                    reserved_day = created_at::date, delegation_id = 'd-buyer', \
                    authorized_at = created_at \
              WHERE id = '{request}'"
        );
        exec(w.pool(), &authorize).await?;
        let c = w.gate.checkout("acme", &request, "finance-lead").await?;
        assert_eq!(c.decision, deny(Reason::AuthorityPurchaseChanged), "{c:?}");
        assert_eq!(recorded(w, "checkout.refused", &request).await?, 1);
        assert!(
            named(w, "payment_requests")
                .await?
                .iter()
                .any(|d| d.key == format!("id={request}")),
            "the audit did not name it"
        );

        // The same sku, approved by a human through the gate, checks out.
        let p = w.propose("CLOUD-TEAM", 1).await?;
        let approved = request_id(&p);
        let a = w.gate.approve("acme", &approved, "finance-lead").await?;
        assert_eq!(a.decision, Decision::Allow, "{a:?}");
        let c = w.gate.checkout("acme", &approved, "finance-lead").await?;
        assert!(c.is_ok(), "{c:?}");
        assert!(
            !named(w, "payment_requests")
                .await?
                .iter()
                .any(|d| d.key == format!("id={approved}")),
            "the audit named a request the gate approved"
        );
        Ok(())
    })
    .await
}

/// Attempt 21: a request handed to another agent after its authority was
/// issued (past the terms trigger, which the owner switches off), so that
/// agent may pay it. Pay refuses AUTHORITY_PURCHASE_CHANGED (recorded): no
/// provider order.
#[tokio::test]
async fn attempt_21_a_request_edited_after_checkout_pays_nothing() -> TestResult {
    on_world(async |w| {
        let (request, authority) = checked_out(w).await?;
        exec(
            w.owner(),
            "ALTER TABLE payment_requests DISABLE TRIGGER request_terms_immutable",
        )
        .await?;
        exec(
            w.pool(),
            &format!(
                "UPDATE payment_requests SET agent_id = 'procurement-agent' WHERE id = '{request}'"
            ),
        )
        .await?;
        let paid = w.gate.pay("acme", &authority, "procurement-agent").await?;
        assert_eq!(
            paid.decision,
            deny(Reason::AuthorityPurchaseChanged),
            "{paid:?}"
        );
        assert_eq!(recorded(w, "authority.refused", &authority).await?, 1);
        assert!(w.gate.provider().orders().is_empty());
        Ok(())
    })
    .await
}

/// Attempt 22: an expired authority's instants moved an hour on by the
/// login (past the terms trigger, which the owner switches off; its 15
/// minutes kept, so `ck_authority_ttl` holds), so that it reads live
/// again. Its request is untouched and still verifies; the authority's
/// own MAC, which covers its expiry, is what refuses it:
/// AUTHORITY_PURCHASE_CHANGED, no provider order.
#[tokio::test]
async fn attempt_22_an_expired_authority_the_login_revived_pays_nothing() -> TestResult {
    on_world(async |w| {
        let (_request, authority) = checked_out(w).await?;
        w.clock.advance_minutes(20);
        exec(
            w.owner(),
            "ALTER TABLE checkout_authorities DISABLE TRIGGER authority_terms_immutable",
        )
        .await?;
        let moved = exec(
            w.pool(),
            &format!(
                "UPDATE checkout_authorities SET issued_at = issued_at + interval '1 hour', \
                        expires_at = expires_at + interval '1 hour' WHERE id = '{authority}'"
            ),
        )
        .await?;
        assert_eq!(moved, 1);
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(
            paid.decision,
            deny(Reason::AuthorityPurchaseChanged),
            "{paid:?}"
        );
        assert!(
            w.gate.provider().orders().is_empty(),
            "a provider order was created: {:?}",
            w.gate.provider().orders()
        );
        Ok(())
    })
    .await
}

/// A request paid while the provider answered late (the order exists at
/// the provider, the gate never recorded it): (request id, authority id,
/// the provider's order).
async fn paid_late(
    w: &World,
) -> Result<(String, String, gate::provider::ProviderOrder), Box<dyn std::error::Error + Send + Sync>>
{
    let (request, authority) = checked_out(w).await?;
    w.gate
        .provider()
        .set_mode(gate::provider::Mode::Late, Some(1));
    let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, deny(Reason::ProviderUnavailable), "{paid:?}");
    let order = w
        .gate
        .provider()
        .order_for_receipt(&authority)
        .ok_or("the provider made no order")?;
    Ok((request, authority, order))
}

/// Attempt 23: a capture kept for reconcile that no webhook kept, written
/// by the login for a request still waiting on the provider, under its
/// real order and the authority's own amount, so that reconcile would book
/// it CAPTURED with no money taken. Refused at commit by
/// `kept_capture_carried_by_event`; past the guard (the owner switches it
/// off), the audit names the row, and only that one: a capture the webhook
/// kept is not named.
#[tokio::test]
async fn attempt_23_a_kept_capture_no_webhook_kept_is_refused_and_named() -> TestResult {
    on_world(async |w| {
        // A capture the webhook kept, signed, for one late answer.
        let (_, _, order) = paid_late(w).await?;
        let payment = w.gate.provider().capture_payment(&order.id)?;
        let order = w
            .gate
            .provider()
            .order_for_receipt(&order.receipt)
            .ok_or("the provider lost the order")?;
        let body = gate::service::razorpay_envelope(
            gate::service::webhook::EVENT_CAPTURED,
            w.gate.now(),
            Some(&payment),
            Some(&order),
        );
        let h = w
            .gate
            .webhook(
                &body,
                Some(&gate::service::sign_webhook(SECRET, &body)),
                Some("evt_signed_kept"),
            )
            .await?;
        assert!(h.is_ok(), "{h:?}");
        // The login's own, for another late answer the provider never captured.
        let (request, authority, order) = paid_late(w).await?;
        let forge = format!(
            "INSERT INTO kept_captures (tenant_id, provider_event_id, authority_id, \
             provider_order_id, provider_payment_id, amount_paise, currency, \
             event_created_at, received_at) \
             SELECT tenant_id, 'evt_forged'::bytea, id, '{}', 'pay_Forged000001', amount_paise, \
                    currency, now(), now() \
             FROM checkout_authorities WHERE id = '{authority}'",
            order.id
        );
        assert_sql_refused_by(w.pool(), &forge, "kept_capture_carried_by_event").await;
        assert_eq!(w.gate.books(Some("acme")).await?.kept_unsettled, 1);
        exec(
            w.owner(),
            "ALTER TABLE kept_captures DISABLE TRIGGER kept_capture_carried_by_event",
        )
        .await?;
        assert_eq!(exec(w.pool(), &forge).await?, 1);
        let found = named(w, "kept_captures").await?;
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].problem.contains("pay_Forged000001") && found[0].problem.contains(&authority),
            "{found:?}"
        );
        assert_eq!(
            recorded_state(w, &request).await?.as_deref(),
            Some("PROVIDER_PENDING")
        );
        Ok(())
    })
    .await
}

/// The state of `request`, as the gate's login reads it.
async fn recorded_state(w: &World, request: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT state FROM payment_requests WHERE id = $1")
        .bind(request)
        .fetch_optional(w.pool())
        .await
}
