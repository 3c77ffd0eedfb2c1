//! The tour's last step: the receipt of a purchase, as a person opens it.
//!
//! Guarantees: a fresh migrated database seeded with the standard world, a
//! real server (`wire::serve` on `127.0.0.1:0`, with a log key), and one
//! purchase made over HTTP by acme's agent and approver (propose, checkout,
//! pay, the provider's signed capture); then a checkpoint is signed and an
//! auditor's key issued. While the service runs the step prints the
//! receipt's URL and fetches the page with the auditor's key (the answer
//! must be 200 under the pages' policy, or the step fails); it writes a
//! static copy, the page with its script and stylesheet beside it, to
//! `target/triage/receipt/index.html`, which a person opens afterwards with
//! any browser (its verify button runs from the file). The auditor's key is
//! written to `target/triage/receipt/auditor-key` (mode 0600 on Unix) and
//! shown by its id only. Then it fetches the purchase's evidence bundle
//! from the receipt's link (`/receipts/{id}/bundle`, a tar), unpacks it to
//! `target/triage/bundle/` and verifies it offline with the
//! `spendgate_verify` library and the log's public key alone (no database),
//! printing what it checked; then changes one byte of the proposal's raw
//! body in a copy (`target/triage/bundle-tampered/`) and shows the verifier
//! naming that file (the step fails if it does not).
//! `SPENDGATE_TRIAGE_HOLD_SECS` (at most 3600) keeps the service up that
//! long so the URL can be opened.

use crate::triage::say;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use gate::provider::InProcessProvider;
use gate::service::tlog::LogKey;
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{Gate, ManualClock, ProviderEvent, sign_webhook};
use scenarios::generate::standard_world;
use serde_json::Value;

const SECRET: &[u8] = b"spendgate-triage-receipt-webhook-secret-0123456789";
const LOG_SECRET: &[u8] = b"spendgate-triage-receipt-log-key-0123456789abcdef";

/// Runs the step against the server `admin_url` names.
pub async fn receipt_step(admin_url: &str) -> Result<()> {
    say!("\nLast step · the receipt of a purchase, as a person opens it");
    let db = gate::db::fresh_database(admin_url).await?;
    let result = receipt(db.pool().clone()).await;
    db.drop().await?;
    result
}

fn id_in(v: &Value, key: &str) -> Result<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("no `{key}` in {v}"))
}

async fn receipt(pool: sqlx::PgPool) -> Result<()> {
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let gate = Arc::new(Gate::new(
        pool.clone(),
        InProcessProvider::new(),
        SECRET.to_vec(),
        clock,
    )?);
    gate.seed(&standard_world().seed()).await?;
    let now = gate.now();
    let agent = gate.issue_key("acme", "buyer-agent", now).await?.token;
    let human = gate.issue_key("acme", "finance-lead", now).await?.token;
    let auditor = gate
        .issue_auditor_key("acme", "finance-lead", now)
        .await?
        .token;
    let log_key = LogKey::new(LOG_SECRET)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(wire::serve(
        listener,
        gate.clone(),
        wire::WireConfig {
            log_key: Some(log_key.clone()),
            ..wire::WireConfig::default()
        },
        async move {
            let _ = rx.await;
        },
    ));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let result = async {
        let request = purchase(&client, &base, &agent, &human).await?;
        gate.integrate().await?;
        gate::service::tlog::sign_checkpoint(&pool, &log_key, "acme", now).await?;
        show(&client, &base, &request, &auditor).await?;
        let verifier = log_key.verifier("acme")?.to_text();
        bundle(&client, &base, &request, &auditor, &verifier).await
    }
    .await;
    let _ = tx.send(());
    server
        .await
        .context("the server task")?
        .context("serving")?;
    result
}

async fn call(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    body: &str,
) -> Result<Value> {
    let r = client
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    let status = r.status().as_u16();
    let v: Value = serde_json::from_str(&r.text().await?)?;
    if !(200..300).contains(&status) {
        bail!("POST {path} answered {status}: {v}");
    }
    Ok(v)
}

/// A captured purchase of acme, over HTTP; its request id.
async fn purchase(
    client: &reqwest::Client,
    base: &str,
    agent: &str,
    human: &str,
) -> Result<String> {
    let p = call(
        client,
        base,
        "/v1/requests",
        agent,
        r#"{"sku":"CLOUD-STARTER","quantity":1,"purpose":"starter credits for the demo"}"#,
    )
    .await?;
    let request = id_in(&p, "request_id")?;
    let c = call(
        client,
        base,
        &format!("/v1/requests/{request}/checkout"),
        human,
        "",
    )
    .await?;
    let authority = id_in(&c, "id")?;
    let o = call(
        client,
        base,
        &format!("/v1/authorities/{authority}/pay"),
        human,
        "",
    )
    .await?;
    let order = id_in(&o, "id")?;
    let amount = o
        .get("amount")
        .or_else(|| o.get("amount_paise"))
        .and_then(Value::as_i64)
        .unwrap_or(60000);
    let event = ProviderEvent {
        id: "evt_triage_receipt".into(),
        event: EVENT_CAPTURED.into(),
        created_at: standard_world().now,
        order_id: order,
        amount_paise: amount,
        currency: "INR".into(),
    };
    let body = event.to_body();
    let r = client
        .post(format!("{base}/webhooks/razorpay"))
        .header("content-type", "application/json")
        .header("x-razorpay-event-id", &event.id)
        .header("x-razorpay-signature", sign_webhook(SECRET, &body))
        .body(body)
        .send()
        .await?;
    if r.status().as_u16() != 200 {
        bail!("the signed capture answered {}", r.status());
    }
    Ok(request)
}

/// Prints the receipt's URL and writes its static copy.
async fn show(client: &reqwest::Client, base: &str, request: &str, auditor: &str) -> Result<()> {
    let url = format!("{base}/receipts/{request}");
    let r = client
        .get(&url)
        .basic_auth("auditor", Some(auditor))
        .send()
        .await?;
    if r.status().as_u16() != 200 {
        bail!("the receipt answered {}", r.status());
    }
    let csp = r
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if csp != wire::pages::CSP {
        bail!("the receipt came without the pages' policy: {csp:?}");
    }
    let page = r.text().await?;
    let asset = |path: &'static str| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move { client.get(url).send().await?.text().await }
    };
    let script = asset("/static/receipt.js").await?;
    let style = asset("/static/pages.css").await?;
    let dir = crate::workspace::root()?.join("target/triage/receipt");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let copy = page
        .replace("\"/static/receipt.js\"", "\"receipt.js\"")
        .replace("\"/static/pages.css\"", "\"pages.css\"");
    std::fs::write(dir.join("index.html"), copy)?;
    std::fs::write(dir.join("receipt.js"), script)?;
    std::fs::write(dir.join("pages.css"), style)?;
    write_secret(&dir.join("auditor-key"), auditor)?;
    let id = gate::service::api_keys::key_id_of(auditor).unwrap_or("?");
    say!(
        "  a purchase over HTTP (propose, checkout, pay, signed capture), then a signed checkpoint"
    );
    say!("  its receipt, while the service runs: {url}");
    say!(
        "    (an auditor's key, sgk_{id}_…, is in target/triage/receipt/auditor-key: the browser's"
    );
    say!("    sign-in prompt takes it as the password; the service stops when the tour ends)");
    say!("  a static copy to open afterwards: target/triage/receipt/index.html");
    say!(
        "    (its verify button checks the checkpoint's signature and the entries' proofs in the browser)"
    );
    let hold = std::env::var("SPENDGATE_TRIAGE_HOLD_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0)
        .min(3600);
    if hold > 0 {
        say!("  serving for {hold} s (SPENDGATE_TRIAGE_HOLD_SECS) ...");
        tokio::time::sleep(Duration::from_secs(hold)).await;
    }
    Ok(())
}

/// Fetches the purchase's bundle from the receipt's link, unpacks it to
/// `target/triage/bundle/`, verifies it offline, then shows one changed
/// byte of a copy named by the verifier.
async fn bundle(
    client: &reqwest::Client,
    base: &str,
    request: &str,
    auditor: &str,
    verifier: &str,
) -> Result<()> {
    use spendgate_verify::bundle::Failure;
    use spendgate_verify::bundle_dir::{self, PROPOSAL_RAW};

    let r = client
        .get(format!("{base}/receipts/{request}/bundle"))
        .basic_auth("auditor", Some(auditor))
        .send()
        .await?;
    let status = r.status().as_u16();
    if status != 200 {
        bail!("the bundle link answered {status}: {}", r.text().await?);
    }
    let tar = r.bytes().await?;
    let target = crate::workspace::root()?.join("target/triage");
    let dir = target.join("bundle");
    let tampered = target.join("bundle-tampered");
    for d in [&dir, &tampered] {
        if d.exists() {
            std::fs::remove_dir_all(d).with_context(|| format!("removing {}", d.display()))?;
        }
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    tar::Archive::new(&tar[..])
        .unpack(&dir)
        .context("unpacking the bundle")?;
    tar::Archive::new(&tar[..])
        .unpack(&tampered)
        .context("unpacking the bundle's copy")?;

    // Offline: the files on disk and the log's public key, nothing else.
    let key = spendgate_verify::note::VerifierKey::parse(verifier)?;
    let files = bundle_dir::read(&dir)?;
    let checked = bundle_dir::verify(&files, &key, Some("spendgate/acme"))
        .map_err(|e| anyhow::anyhow!("the bundle does not verify: {e}"))?;
    let size = spendgate_verify::checkpoint::open(&files.checkpoint, &key, Some("spendgate/acme"))
        .map(|c| c.size)
        .unwrap_or_default();
    say!(
        "  its evidence bundle, from the receipt's link ({} bytes of tar): target/triage/bundle/",
        tar.len()
    );
    say!(
        "  verified offline (spendgate_verify, the log's public key, no database): {checked} items"
    );
    say!("    the checkpoint's Ed25519 signature (origin spendgate/acme, tree size {size})");
    say!(
        "    {} ledger entries, each by its RFC 6962 inclusion proof against that checkpoint",
        files.entries.len()
    );
    for (name, bytes) in &files.raw {
        // An event's file is named by its id's SHA-256: shown by its first 12 digits.
        let shown = match name
            .split_once('/')
            .and_then(|(dir, f)| Some((dir, f.split_once('.')?)))
        {
            Some((dir, (id, ext))) if id.len() > 12 => format!("{dir}/{}….{ext}", &id[..12]),
            _ => name.clone(),
        };
        say!(
            "    {shown} ({} bytes): its SHA-256 is the digest its proved entry names",
            bytes.len()
        );
    }
    say!("    (the webhook's HMAC needs the webhook secret: the bundle's README says how)");

    // One byte of the proposal's raw body changed, in the copy.
    let path = tampered.join(PROPOSAL_RAW);
    let mut raw = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let at = raw.len() / 2;
    raw[at] ^= 0x01;
    std::fs::write(&path, &raw)?;
    match bundle_dir::verify(&bundle_dir::read(&tampered)?, &key, Some("spendgate/acme")) {
        Err(Failure::Item { name, error }) if name == PROPOSAL_RAW => {
            say!(
                "  one byte of {PROPOSAL_RAW} changed in a copy (target/triage/bundle-tampered/):"
            );
            say!("    the verifier names it: {name}: {error}");
            Ok(())
        }
        other => bail!("a changed byte of {PROPOSAL_RAW} was not named: {other:?}"),
    }
}

fn write_secret(path: &Path, text: &str) -> Result<()> {
    #[cfg(unix)]
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("writing {}", path.display()))?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::write(path, format!("{text}\n"))
            .with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step against a real server: the receipt answers 200 under the
    /// pages' policy and its static copy is written beside its script.
    #[tokio::test]
    async fn the_receipt_step_serves_the_receipt_and_writes_its_static_copy() {
        let Some(url) = gate::db::test_admin_url().unwrap() else {
            return;
        };
        receipt_step(&url).await.unwrap();
        let dir = crate::workspace::root()
            .unwrap()
            .join("target/triage/receipt");
        let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
        assert!(page.contains(r#"<script src="receipt.js"></script>"#));
        assert!(page.contains("UNTRUSTED"));
        assert!(page.contains("data-note=\""));
        assert!(dir.join("receipt.js").is_file());
        // The bundle was unpacked and holds the proposal as received.
        let bundle = crate::workspace::root()
            .unwrap()
            .join("target/triage/bundle");
        let raw = std::fs::read_to_string(bundle.join("proposal.raw")).unwrap();
        assert!(raw.contains("starter credits for the demo"), "{raw}");
    }
}
