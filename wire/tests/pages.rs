//! The read-only pages, served on a real socket over a fresh database: who
//! may read them, that no page route writes, and, in headless Chromium
//! driven over WebDriver, that the console lists a purchase and that the
//! receipt's verify button checks the ledger's proofs in the browser (and
//! names the entry a database owner changed).
//!
//! The browser test needs `chromium` and `chromedriver` (Debian's
//! `chromium` and `chromium-driver`; `.ci/run` installs them). Without them
//! it is skipped with a message, except under CI (`CI` set) or
//! `SPENDGATE_REQUIRE_BROWSER`, where it fails. With
//! `SPENDGATE_SCREENSHOTS=DIR` it writes `console.png` and `receipt.png`
//! there (a relative DIR is the workspace's: `docs` is the README's).

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use fantoccini::{Client, ClientBuilder, Locator};
use gate::service::tlog::LogKey;
use support::*;
use wire::WireConfig;

const EVENT_CAPTURED: &str = "payment.captured";
/// A secret whose acme verifier key has a `+` inside its base64 (checked
/// below), so the browser's parsing of `name+id+base64` is tested on one.
const LOG_SECRET: &[u8] = b"spendgate-triage-receipt-log-key-0123456789abcdef";

fn log_key() -> LogKey {
    LogKey::new(LOG_SECRET).expect("long enough")
}

async fn served_pages() -> Res<Option<Served>> {
    served_with(
        gate::provider::InProcessProvider::new(),
        WireConfig {
            log_key: Some(log_key()),
            ..WireConfig::default()
        },
    )
    .await
}

/// A captured purchase of acme and one refused proposal; the purchase's id.
async fn purchase(s: &Served, agent: &str, lead: &str) -> Res<String> {
    let (status, p) = answer(
        s.post("/v1/requests", Some(agent), &proposal("CLOUD-STARTER", 1))
            .await?,
    )
    .await?;
    assert_eq!(status, 201, "{p}");
    let request = p["request_id"].as_str().ok_or("no request id")?.to_owned();
    let (status, c) = answer(
        s.post(&format!("/v1/requests/{request}/checkout"), Some(lead), "")
            .await?,
    )
    .await?;
    assert_eq!(status, 200, "{c}");
    let authority = c["id"].as_str().ok_or("no authority")?.to_owned();
    let (status, b) = answer(
        s.post(&format!("/v1/authorities/{authority}/pay"), Some(lead), "")
            .await?,
    )
    .await?;
    assert_eq!(status, 200, "{b}");
    let order = b["id"].as_str().ok_or("no order id")?.to_owned();
    let (body, signature) = s.event("evt_pages_1", EVENT_CAPTURED, &order, 60000);
    let r = s
        .client
        .post(s.url("/webhooks/razorpay"))
        .header("content-type", "application/json")
        .header("x-razorpay-event-id", "evt_pages_1")
        .header("x-razorpay-signature", signature)
        .body(body)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text().await);
    assert_eq!(
        s.gate.request_state("acme", &request).await?.as_deref(),
        Some("CAPTURED")
    );
    let (status, p) = answer(
        s.post("/v1/requests", Some(agent), &proposal("NO-SUCH-SKU", 1))
            .await?,
    )
    .await?;
    assert_eq!(
        (status, p["reason"].as_str()),
        (422, Some("SKU_UNKNOWN")),
        "{p}"
    );
    Ok(request)
}

fn basic(key: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("reader:{key}"))
    )
}

#[tokio::test]
async fn an_agent_key_is_refused_on_every_page_and_no_page_route_writes() -> TestResult {
    let Some(s) = served_pages().await? else {
        return Ok(());
    };
    let agent = s.key("acme", "buyer-agent").await?;
    let lead = s.key("acme", "finance-lead").await?;
    let auditor = s
        .gate
        .issue_auditor_key("acme", "finance-lead", s.gate.now())
        .await?
        .token;
    let request = purchase(&s, &agent, &lead).await?;
    let bundle = format!("/receipts/{request}/bundle");
    // With no kept checkpoint the bundle is 409, and nothing is signed.
    let before = s.snapshot().await?;
    let r = s
        .client
        .get(s.url(&bundle))
        .header("authorization", basic(&auditor))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 409);
    assert!(r.text().await?.contains("spendgate log checkpoint"));
    assert_eq!(
        s.snapshot().await?,
        before,
        "the bundle route wrote something"
    );
    s.gate.integrate().await?;
    gate::service::tlog::sign_checkpoint(s.pool(), &log_key(), "acme", s.gate.now()).await?;
    let pages = [
        "/console".to_owned(),
        format!("/receipts/{request}"),
        "/reports".to_owned(),
        "/reports/benchmark".to_owned(),
        bundle.clone(),
    ];
    let before = s.snapshot().await?;
    for path in &pages {
        // No key: 401 with the browser's sign-in challenge.
        let r = s.client.get(s.url(path)).send().await?;
        assert_eq!(r.status().as_u16(), 401, "{path}");
        assert!(
            r.headers()["www-authenticate"]
                .to_str()?
                .starts_with("Basic realm="),
            "{path}"
        );
        // An agent's key, either way it is presented: 403.
        for auth in [format!("Bearer {agent}"), basic(&agent)] {
            let r = s
                .client
                .get(s.url(path))
                .header("authorization", auth)
                .send()
                .await?;
            assert_eq!(
                r.status().as_u16(),
                403,
                "{path}: an agent's key read a page"
            );
        }
        // A human's and an auditor's key read it, under the page policy.
        for key in [&lead, &auditor] {
            let r = s
                .client
                .get(s.url(path))
                .header("authorization", basic(key))
                .send()
                .await?;
            assert_eq!(r.status().as_u16(), 200, "{path}");
            assert_eq!(
                r.headers()["content-security-policy"].to_str()?,
                wire::pages::CSP
            );
            assert!(wire::pages::CSP.starts_with("default-src 'self'"));
            assert_eq!(r.headers()["x-content-type-options"].to_str()?, "nosniff");
            if *path == bundle {
                assert_eq!(r.headers()["content-type"].to_str()?, "application/x-tar");
                continue;
            }
            let html = r.text().await?;
            assert!(
                !html.contains("method=\"post\""),
                "{path} holds a form that posts"
            );
            assert_eq!(
                html.matches("<script").count(),
                html.matches("<script src=\"/static/").count(),
                "{path} holds an inline script"
            );
        }
        // No page route takes another method, whoever asks.
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            let r = s
                .client
                .request(method.parse()?, s.url(path))
                .header("authorization", basic(&lead))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await?;
            assert_eq!(r.status().as_u16(), 405, "{method} {path}");
        }
    }
    for asset in ["/static/receipt.js", "/static/pages.css"] {
        for method in ["POST", "PUT", "DELETE"] {
            let r = s
                .client
                .request(method.parse()?, s.url(asset))
                .send()
                .await?;
            assert_eq!(r.status().as_u16(), 405, "{method} {asset}");
        }
    }
    // Another tenant's request is 404, like a missing one.
    let globex = s.key("globex", "globex-finance").await?;
    for (key, path) in [
        (&globex, format!("/receipts/{request}")),
        (&lead, "/receipts/req_missing".to_owned()),
    ] {
        let r = s
            .client
            .get(s.url(&path))
            .header("authorization", basic(key))
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    // An auditor's key calls no gate operation: every route refuses it.
    let gate_routes: Vec<(&str, String)> = vec![
        ("POST", "/v1/requests".to_owned()),
        ("GET", format!("/v1/requests/{request}")),
        ("POST", format!("/v1/requests/{request}/approval-note")),
        ("GET", "/v1/orders/order_x".to_owned()),
        ("GET", "/v1/catalog".to_owned()),
        ("GET", "/v1/whoami".to_owned()),
        ("POST", format!("/v1/requests/{request}/approve")),
        ("POST", format!("/v1/requests/{request}/checkout")),
        ("POST", format!("/v1/requests/{request}/cancel")),
        ("POST", "/v1/authorities/auth_x/pay".to_owned()),
        ("POST", "/v1/delegations".to_owned()),
        ("POST", "/v1/delegations/del_x/revoke".to_owned()),
        ("PUT", "/v1/catalog/CLOUD-STARTER/price".to_owned()),
        ("PUT", "/v1/policy".to_owned()),
    ];
    for (method, path) in &gate_routes {
        let r = s
            .client
            .request(method.parse()?, s.url(path))
            .bearer_auth(&auditor)
            .header("content-type", "application/json")
            .body(proposal("CLOUD-STARTER", 1))
            .send()
            .await?;
        assert_eq!(
            r.status().as_u16(),
            403,
            "{method} {path}: an auditor's key was let through"
        );
    }
    assert_eq!(
        s.snapshot().await?,
        before,
        "reading the pages wrote something"
    );
    s.drop().await
}

/// A `chromedriver` on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    /// Stops chromedriver and the browsers it started (its process group),
    /// also when a test fails before it closes its session.
    fn drop(&mut self) {
        #[cfg(unix)]
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium over WebDriver, or `None` (with a message) where it is not
/// installed and not required.
async fn browser() -> Res<Option<(Driver, Client)>> {
    let (Some(driver), Some(chromium)) = (on_path("chromedriver"), on_path("chromium")) else {
        if std::env::var_os("CI").is_some()
            || std::env::var_os("SPENDGATE_REQUIRE_BROWSER").is_some()
        {
            return Err("chromium and chromedriver are required here (apt-get install chromium chromium-driver)".into());
        }
        eprintln!(
            "skipped: no chromium and chromedriver on PATH (apt-get install chromium chromium-driver)"
        );
        return Ok(None);
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut command = Command::new(driver);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let probe = reqwest::Client::new();
    let mut ready = false;
    for _ in 0..100 {
        if let Ok(r) = probe.get(format!("{}/status", driver.url)).send().await
            && r.status().is_success()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !ready {
        return Err("chromedriver did not answer within 10 s".into());
    }
    let capabilities = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1400",
                     "--hide-scrollbars"]
        }
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        return Err("capabilities are an object".into());
    };
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await?;
    Ok(Some((driver, client)))
}

/// `base` with the key as the password of its URL (the browser sends it as
/// `Authorization: Basic` and keeps it out of the address bar).
fn signed_in(base: &str, key: &str, path: &str) -> String {
    format!(
        "{}{path}",
        base.replacen("http://", &format!("http://reader:{key}@"), 1)
    )
}

/// Clicks the verify button and waits for its verdict.
async fn verdict(client: &Client) -> Res<String> {
    client.find(Locator::Id("verify")).await?.click().await?;
    for _ in 0..100 {
        let text = client
            .find(Locator::Id("verify-result"))
            .await?
            .text()
            .await?;
        if text.starts_with("Verified") || text.starts_with("Stopped") {
            return Ok(text);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the verify button gave no verdict within 10 s".into())
}

fn screenshot(name: &str, png: &[u8]) -> TestResult {
    if let Some(dir) = std::env::var_os("SPENDGATE_SCREENSHOTS") {
        // A relative folder is the workspace's (`docs` is the README's).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), png)?;
    }
    Ok(())
}

#[tokio::test]
async fn in_a_browser_the_console_lists_a_purchase_and_its_receipt_verifies_until_the_ledger_is_changed()
-> TestResult {
    let Some(s) = served_pages().await? else {
        return Ok(());
    };
    let Some((_driver, client)) = browser().await? else {
        return s.drop().await;
    };
    let agent = s.key("acme", "buyer-agent").await?;
    let lead = s.key("acme", "finance-lead").await?;
    let auditor = s
        .gate
        .issue_auditor_key("acme", "finance-lead", s.gate.now())
        .await?
        .token;
    let request = purchase(&s, &agent, &lead).await?;
    let verifier = log_key().verifier("acme")?.to_text();
    assert!(verifier.matches('+').count() > 2, "{verifier}");
    s.gate.integrate().await?;
    gate::service::tlog::sign_checkpoint(s.pool(), &log_key(), "acme", s.gate.now()).await?;

    // The console lists the purchase and the refusal, and counts the refusal.
    client
        .goto(&signed_in(&s.base, &auditor, "/console"))
        .await?;
    let table = client.find(Locator::Id("requests")).await?.text().await?;
    assert!(table.contains(&request), "{table}");
    assert!(table.contains("CAPTURED"), "{table}");
    assert!(table.contains("SKU_UNKNOWN"), "{table}");
    let counts = client
        .find(Locator::Id("refusal-counts"))
        .await?
        .text()
        .await?;
    assert!(counts.contains("SKU_UNKNOWN"), "{counts}");
    screenshot("console.png", &client.screenshot().await?)?;

    // The receipt of the untouched purchase verifies in the browser.
    client
        .goto(&signed_in(
            &s.base,
            &auditor,
            &format!("/receipts/{request}"),
        ))
        .await?;
    let said = verdict(&client).await?;
    assert!(said.starts_with("Verified"), "{said}");
    // The proposal as received, its raw text in its untrusted box.
    let raw = client
        .find(Locator::Id("proposal-raw"))
        .await?
        .text()
        .await?;
    assert_eq!(raw, proposal("CLOUD-STARTER", 1));
    if std::env::var_os("SPENDGATE_SCREENSHOTS").is_some() {
        // The whole receipt in one picture, from its top.
        client.set_window_size(1280, 2500).await?;
        client.execute("window.scrollTo(0, 0)", vec![]).await?;
        screenshot("receipt.png", &client.screenshot().await?)?;
        client.set_window_size(1280, 1400).await?;
    }

    // The database owner changes the request's first ledger entry: the
    // button stops there and names it.
    let (seq, kind): (i64, String) = sqlx::query_as(
        "SELECT seq, kind FROM ledger_entries WHERE tenant_id = 'acme' \
         AND (entry::jsonb ->> 'subject' = $1 OR entry::jsonb -> 'body' ->> 'request' = $1) \
         ORDER BY seq LIMIT 1",
    )
    .bind(&request)
    .fetch_one(s.pool())
    .await?;
    let mut owner = s.db.owner_pool().acquire().await?;
    sqlx::query("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only")
        .execute(&mut *owner)
        .await?;
    let changed = sqlx::query(
        "UPDATE ledger_entries SET entry = entry || ' ' WHERE tenant_id = 'acme' AND seq = $1",
    )
    .bind(seq)
    .execute(&mut *owner)
    .await?
    .rows_affected();
    sqlx::query("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only")
        .execute(&mut *owner)
        .await?;
    drop(owner);
    assert_eq!(changed, 1);
    client.refresh().await?;
    let said = verdict(&client).await?;
    assert!(
        said.starts_with(&format!("Stopped: entry #{seq} ({kind})")),
        "{said}"
    );
    let marked = client
        .find(Locator::Id(&format!("entry-{seq}")))
        .await?
        .attr("class")
        .await?
        .unwrap_or_default();
    assert!(marked.contains("bad"), "{marked}");

    // An agent's key reads no page in the browser either.
    client.goto(&signed_in(&s.base, &agent, "/console")).await?;
    let heading = client.find(Locator::Css("h1")).await?.text().await?;
    assert_eq!(heading, "Not for agents");

    client.close().await?;
    s.drop().await
}

/// The receipt's bundle: 409 naming `spendgate log checkpoint` until a
/// checkpoint is kept, then a tar that, unpacked, verifies offline with the
/// log's public key alone, raw files included; and hostile proposal bytes
/// (invalid UTF-8, an RLO, a NUL) are shown inert on the receipt and kept
/// byte for byte in the bundle.
#[tokio::test]
async fn the_receipt_bundle_is_a_tar_that_verifies_offline_once_a_checkpoint_is_kept() -> TestResult
{
    let Some(s) = served_pages().await? else {
        return Ok(());
    };
    let agent = s.key("acme", "buyer-agent").await?;
    let lead = s.key("acme", "finance-lead").await?;
    let request = purchase(&s, &agent, &lead).await?;
    let hostile: &[u8] =
        b"{\"sku\":\"CLOUD-STARTER\",\"purpose\":\"\xe2\x80\xae gpj.exe \x00 \xff\"}";
    let refused = s.gate.propose("acme", "buyer-agent", hostile, None).await?;
    let odd = refused.request_id.clone().ok_or("no request")?;
    let bidi: &[u8] =
        "{\"sku\":\"CLOUD-STARTER\",\"quantity\":1,\"purpose\":\"a\u{202E}b\"}".as_bytes();
    let bidi_request = s
        .gate
        .propose("acme", "buyer-agent", bidi, None)
        .await?
        .request_id
        .ok_or("no request")?;
    let get = |path: String| {
        s.client
            .get(s.url(&path))
            .header("authorization", basic(&lead))
            .send()
    };

    // No checkpoint yet: 409, and the receipt says so instead of linking.
    let r = get(format!("/receipts/{request}/bundle")).await?;
    assert_eq!(r.status().as_u16(), 409);
    assert!(r.text().await?.contains("spendgate log checkpoint"));
    let html = get(format!("/receipts/{request}")).await?.text().await?;
    assert!(html.contains("id=\"bundle-unavailable\""), "no notice");
    assert!(!html.contains("id=\"bundle-link\""));

    // Hostile bytes: hex when not UTF-8, spelled out when invisible.
    let html = get(format!("/receipts/{odd}")).await?.text().await?;
    assert!(
        html.contains(&hex::encode(&hostile[..32])),
        "no hex of the body"
    );
    assert!(html.contains("not UTF-8: hex"));
    let html = get(format!("/receipts/{bidi_request}"))
        .await?
        .text()
        .await?;
    assert!(html.contains("a[U+202E]b"), "the RLO is not spelled out");
    assert!(!html.contains('\u{202E}'), "the RLO is in the page");

    s.gate.integrate().await?;
    gate::service::tlog::sign_checkpoint(s.pool(), &log_key(), "acme", s.gate.now()).await?;
    let html = get(format!("/receipts/{request}")).await?.text().await?;
    assert!(
        html.contains(&format!("href=\"/receipts/{request}/bundle\"")),
        "no bundle link"
    );
    let key = spendgate_verify::note::VerifierKey::parse(&log_key().verifier("acme")?.to_text())?;
    for (id, raw) in [(&request, None), (&odd, Some(hostile))] {
        let r = get(format!("/receipts/{id}/bundle")).await?;
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(r.headers()["content-type"].to_str()?, "application/x-tar");
        let tar = r.bytes().await?;
        let dir = tempfile::tempdir()?;
        tar::Archive::new(&tar[..]).unpack(dir.path())?;
        let files = spendgate_verify::bundle_dir::read(dir.path())?;
        let checked = spendgate_verify::bundle_dir::verify(&files, &key, Some("spendgate/acme"));
        assert!(checked.is_ok(), "{id}: {checked:?}");
        let names: Vec<&str> = files.raw.iter().map(|(n, _)| n.as_str()).collect();
        match raw {
            // The capture: the proposal, the event's body and signature header.
            None => assert_eq!(names.len(), 3, "{names:?}"),
            Some(bytes) => {
                assert_eq!(std::fs::read(dir.path().join("proposal.raw"))?, bytes);
                // One byte changed: named.
                let mut changed = files.clone();
                changed.raw[0].1[5] ^= 1;
                let failed = spendgate_verify::bundle_dir::verify(&changed, &key, None);
                assert!(
                    matches!(&failed, Err(spendgate_verify::bundle::Failure::Item { name, .. }) if name == "proposal.raw"),
                    "{failed:?}"
                );
            }
        }
    }
    s.drop().await
}
