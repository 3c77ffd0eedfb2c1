//! The triage step on the wire: the service on a loopback port, and the
//! rules that only exist once the gate is one, shown as request and answer
//! with the rows read back.
//!
//! Guarantees: a fresh migrated database seeded with the standard world, a
//! real server (`wire::serve` on `127.0.0.1:0`), real HTTP requests
//! (reqwest) with keys issued for the actors; everything printed is what the
//! service answered and what the database holds afterwards. A key is shown
//! by its public id only (`sgk_<id>_…`), never its secret; the provider line
//! says which provider is in use and whether its keys are present, never the
//! keys. The step fails (an error) when an answer is not the one the service
//! documents, so the tour cannot print a rule that does not hold.

use crate::triage::say;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use gate::provider::{ENV_WEBHOOK_SECRET, InProcessProvider, PaymentProvider, RazorpayProvider};
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{Gate, ManualClock, ProviderEvent, sign_webhook};
use scenarios::generate::standard_world;
use serde_json::Value;
use sqlx::PgPool;

/// The in-process provider's webhook secret for the tour.
const TOUR_SECRET: &[u8] = b"spendgate-triage-wire-webhook-secret-0123456789";
/// What a forger signs with.
const FORGED: &[u8] = b"a-secret-the-gate-never-had-0123456789";

/// Which provider the tour uses, and the line that says so.
pub fn provider_choice() -> (Option<(RazorpayProvider, Vec<u8>)>, String) {
    match RazorpayProvider::from_env() {
        Ok(None) => (
            None,
            "provider: in-process (RAZORPAY_KEY_ID / RAZORPAY_KEY_SECRET are not set; \
             set them with a rzp_test_ key and RAZORPAY_WEBHOOK_SECRET to use Razorpay Test Mode)"
                .into(),
        ),
        Err(e) => (
            None,
            format!("provider: in-process (the Razorpay keys were refused: {e})"),
        ),
        Ok(Some(p)) => match std::env::var(ENV_WEBHOOK_SECRET) {
            Ok(s) if s.len() >= 32 => {
                let line = {
                    let h = p.health();
                    format!(
                        "provider: Razorpay Test Mode (mode `{}`, keys present: {})",
                        h.mode,
                        if h.has_keys { "yes" } else { "no" }
                    )
                };
                (Some((p, s.into_bytes())), line)
            }
            _ => (
                None,
                format!(
                    "provider: in-process (Razorpay test keys are set but {ENV_WEBHOOK_SECRET} \
                     is missing or shorter than 32 bytes)"
                ),
            ),
        },
    }
}

/// Runs the step against the server `admin_url` names.
pub async fn wire_step(admin_url: &str) -> Result<()> {
    say!("\nStep 3 · the gate on the wire: who calls comes from the key, never the request");
    let (razorpay, line) = provider_choice();
    say!("  {line}");
    let db = gate::db::fresh_database(admin_url).await?;
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let result = match razorpay {
        Some((provider, secret)) => tour(db.pool().clone(), provider, secret, clock).await,
        None => {
            tour(
                db.pool().clone(),
                InProcessProvider::new(),
                TOUR_SECRET.to_vec(),
                clock,
            )
            .await
        }
    };
    db.drop().await?;
    result
}

struct Tour {
    base: String,
    client: reqwest::Client,
    pool: PgPool,
}

/// `sgk_<id>_…`: the key's public id, never its secret.
fn shown(token: &str) -> String {
    let id = gate::service::api_keys::key_id_of(token).unwrap_or("?");
    format!("sgk_{id}_…")
}

impl Tour {
    async fn send(
        &self,
        method: &str,
        path: &str,
        key: Option<(&str, &str)>,
        body: &[u8],
        headers: &[(&str, String)],
    ) -> Result<(u16, Value)> {
        let mut shown_headers = Vec::new();
        let mut r = self
            .client
            .request(method.parse()?, format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some((who, token)) = key {
            r = r.header("authorization", format!("Bearer {token}"));
            shown_headers.push(format!("Authorization: Bearer {} ({who})", shown(token)));
        }
        for (k, v) in headers {
            r = r.header(*k, v.as_str());
            let v = if v.len() > 24 {
                format!("{}…", &v[..24])
            } else {
                v.clone()
            };
            shown_headers.push(format!("{k}: {v}"));
        }
        say!("    → {method} {path}");
        for h in shown_headers {
            say!("        {h}");
        }
        if !body.is_empty() {
            let text = String::from_utf8_lossy(body);
            let text = if text.len() > 110 {
                format!("{}…", &text[..110])
            } else {
                text.into_owned()
            };
            say!("        {text}");
        }
        let answer = r.send().await.context("a request of the tour")?;
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        say!("    ← {status} {value}");
        Ok((status, value))
    }

    /// The acme request's row and the tenant's money, read back.
    async fn rows(&self, tenant: &str) -> Result<()> {
        let rows: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, state, decision, reason FROM payment_requests WHERE tenant_id = $1 ORDER BY id",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        let (orders, captured): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM provider_orders WHERE tenant_id = $1), \
                    COALESCE((SELECT sum(amount_paise) FROM payment_requests \
                              WHERE tenant_id = $1 AND state = 'CAPTURED'), 0)::bigint",
        )
        .bind(tenant)
        .fetch_one(&self.pool)
        .await?;
        let entries: i64 =
            sqlx::query_scalar("SELECT count(*) FROM ledger_entries WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_one(&self.pool)
                .await?;
        let requests: Vec<String> = rows
            .iter()
            .map(|(id, state, decision, reason)| {
                format!(
                    "{id} {state} (proposed: {decision}{})",
                    reason
                        .as_deref()
                        .map(|r| format!(" {r}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        say!(
            "      rows of {tenant}: {}; provider orders {orders}; captured {captured} paise; {entries} ledger entries",
            if requests.is_empty() {
                "no requests".to_string()
            } else {
                requests.join(", ")
            }
        );
        Ok(())
    }
}

fn expect(status: u16, want: u16, answer: &Value, what: &str) -> Result<()> {
    if status != want {
        bail!("{what}: the service answered {status} {answer}, the tour expects {want}");
    }
    Ok(())
}

fn id_in(v: &Value, key: &str) -> Result<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("no `{key}` in {v}"))
}

async fn tour<P: PaymentProvider + 'static>(
    pool: PgPool,
    provider: P,
    secret: Vec<u8>,
    clock: Arc<ManualClock>,
) -> Result<()> {
    let gate = Arc::new(Gate::new(pool.clone(), provider, secret.clone(), clock)?);
    gate.seed(&standard_world().seed()).await?;
    let now = gate.now();
    let key = |tenant: &'static str, actor: &'static str| {
        let gate = gate.clone();
        async move { gate.issue_key(tenant, actor, now).await.map(|k| k.token) }
    };
    let agent = key("acme", "buyer-agent").await?;
    let human = key("acme", "finance-lead").await?;
    let stranger = key("globex", "globex-finance").await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(wire::serve(
        listener,
        gate.clone(),
        wire::WireConfig {
            provider_mode: gate.provider_health().mode,
            ..wire::WireConfig::default()
        },
        async move {
            let _ = rx.await;
        },
    ));
    say!(
        "  the service: {base} (keys issued for buyer-agent and finance-lead of acme, globex-finance of globex)"
    );
    let t = Tour {
        base,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
        pool,
    };
    let result = run(&t, &agent, &human, &stranger, &secret).await;
    let _ = tx.send(());
    server
        .await
        .context("the server task")?
        .context("serving")?;
    result
}

async fn run(t: &Tour, agent: &str, human: &str, stranger: &str, secret: &[u8]) -> Result<()> {
    say!("\n  1. the agent's key proposes a purchase that needs a human");
    let (s, p) = t
        .send(
            "POST",
            "/v1/requests",
            Some(("buyer-agent", agent)),
            br#"{"sku":"CLOUD-TEAM","quantity":1,"purpose":"team credits"}"#,
            &[("X-Tenant-Id", "globex".into())],
        )
        .await?;
    expect(s, 202, &p, "propose")?;
    let request = id_in(&p, "request_id")?;
    say!("      (the X-Tenant-Id header changed nothing: the key is acme's)");
    t.rows("acme").await?;

    say!("\n  2. the same key tries to approve its own request");
    let path = format!("/v1/requests/{request}/approve");
    let (s, a) = t
        .send("POST", &path, Some(("buyer-agent", agent)), b"", &[])
        .await?;
    expect(s, 403, &a, "an agent approving")?;
    t.rows("acme").await?;

    say!("\n  3. another tenant's approver names acme's request id");
    let (s, a) = t
        .send("POST", &path, Some(("globex-finance", stranger)), b"", &[])
        .await?;
    expect(s, 404, &a, "another tenant's id")?;
    say!("      (the same answer as for an id that does not exist: nothing to enumerate)");
    t.rows("acme").await?;

    say!(
        "\n  acme's approver approves, issues the checkout and pays (the order exists at the provider)"
    );
    let (s, a) = t
        .send("POST", &path, Some(("finance-lead", human)), b"", &[])
        .await?;
    expect(s, 200, &a, "approve")?;
    let (s, c) = t
        .send(
            "POST",
            &format!("/v1/requests/{request}/checkout"),
            Some(("finance-lead", human)),
            b"",
            &[],
        )
        .await?;
    expect(s, 200, &c, "checkout")?;
    let authority = id_in(&c, "id")?;
    let (s, o) = t
        .send(
            "POST",
            &format!("/v1/authorities/{authority}/pay"),
            Some(("finance-lead", human)),
            b"",
            &[],
        )
        .await?;
    expect(s, 200, &o, "pay")?;
    let order = id_in(&o, "id")?;
    t.rows("acme").await?;

    let amount: i64 = sqlx::query_scalar(
        "SELECT amount_paise FROM payment_requests WHERE tenant_id = 'acme' AND id = $1",
    )
    .bind(&request)
    .fetch_one(&t.pool)
    .await?;
    let event = ProviderEvent {
        id: "evt_triage_1".into(),
        event: EVENT_CAPTURED.into(),
        created_at: standard_world().now,
        order_id: order,
        amount_paise: amount,
        currency: "INR".into(),
    };
    let body = event.to_body();

    say!("\n  4. a forged capture: the right body, signed with a secret the gate never had");
    let (s, w) = t
        .send(
            "POST",
            "/webhooks/razorpay",
            None,
            &body,
            &[
                ("X-Razorpay-Signature", sign_webhook(FORGED, &body)),
                ("X-Razorpay-Event-Id", event.id.clone()),
            ],
        )
        .await?;
    expect(s, 400, &w, "a forged webhook")?;
    t.rows("acme").await?;

    say!("\n  5. the provider's signed capture");
    let (s, w) = t
        .send(
            "POST",
            "/webhooks/razorpay",
            None,
            &body,
            &[
                ("X-Razorpay-Signature", sign_webhook(secret, &body)),
                ("X-Razorpay-Event-Id", event.id.clone()),
            ],
        )
        .await?;
    expect(s, 200, &w, "the signed webhook")?;
    t.rows("acme").await?;
    say!(
        "\n  every rule of the service, each through a real socket: wire/tests/http.rs; the whole corpus\n  through the service: make bench-http (harness bench --engines database,http)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole step against a real server: every answer is the documented
    /// one (the step fails otherwise), and the capture lands once.
    #[tokio::test]
    async fn the_wire_step_runs_and_every_answer_is_the_documented_one() {
        let Some(url) = gate::db::test_admin_url().unwrap() else {
            return;
        };
        wire_step(&url).await.unwrap();
    }

    #[test]
    fn without_razorpay_keys_the_provider_is_in_process_and_no_key_is_printed() {
        // The test process sets none of the Razorpay variables.
        if std::env::var_os("RAZORPAY_KEY_ID").is_some() {
            return;
        }
        let (razorpay, line) = provider_choice();
        assert!(razorpay.is_none());
        assert!(line.starts_with("provider: in-process"), "{line}");
    }

    #[test]
    fn a_key_is_shown_by_its_id_only() {
        let (id, token) = gate::service::api_keys::new_key().expect("a new key");
        let s = shown(&token);
        assert_eq!(s, format!("sgk_{id}_…"));
        assert!(!s.contains(&token[21..]));
    }
}
