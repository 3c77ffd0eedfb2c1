//! What the `spendgate` binary's tests share: a fresh database per test on
//! the server `harness db run` gives them, the binary with a test's settings,
//! a served gate on a loopback port, and the HTTP calls of a purchase.
//!
//! Guarantees: every test runs the built binary as an operator would, with
//! settings from the environment only (its working folder holds no
//! spendgate.toml), against a database of its own: created by the owner
//! role, so `spendgate migrate` is tested too. Without `DATABASE_URL` and
//! `MIGRATION_DATABASE_URL` a test panics saying how to run it, unless
//! `SPENDGATE_SKIP_DB=1` says to skip.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const WEBHOOK_SECRET: &str = "whsec_spendgate_cli_test_0123456789abcdef";
pub const LEDGER_KEY: &str = "ledger-key-of-the-spendgate-cli-tests-0123456789";
pub const LOG_KEY: &str = "log-key-of-the-spendgate-cli-tests-0123456789abc";
/// `serve`'s checkpoint interval unless a test sets its own: an hour, so a
/// served gate signs only at its start (its first tick) and a test that
/// signs its own checkpoints meets no other.
pub const CHECKPOINT_INTERVAL_MS: &str = "3600000";

/// The workspace's root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("the spendgate crate has no parent folder"))
}

/// `url` naming the database `name` instead of its own.
pub fn with_database(url: &str, name: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = head.find("://").map_or(0, |i| i + 3);
    let base = match head[after_scheme..].find('/') {
        Some(i) => &head[..after_scheme + i],
        None => head,
    };
    format!("{base}/{name}{query}")
}

/// A database of a test's own: both URLs.
pub struct Db {
    pub app: String,
    pub owner: String,
    /// The onboarding role's: `ONBOARD_DATABASE_URL`, or the application
    /// role's URL with the user changed.
    pub onboard: String,
    pub name: String,
}

/// A new empty database owned by the owner role, or `None` to skip.
pub async fn fresh_db() -> Option<Db> {
    let (Ok(app), Ok(owner)) = (
        std::env::var("DATABASE_URL"),
        std::env::var("MIGRATION_DATABASE_URL"),
    ) else {
        if std::env::var("SPENDGATE_SKIP_DB").as_deref() == Ok("1") {
            eprintln!("skipped: no DATABASE_URL and SPENDGATE_SKIP_DB=1");
            return None;
        }
        panic!(
            "DATABASE_URL and MIGRATION_DATABASE_URL are not set: run under `harness db run -- \
             cargo test -p spendgate` (make test does), or set SPENDGATE_SKIP_DB=1 to skip"
        );
    };
    let mut bytes = [0u8; 8];
    getrandom(&mut bytes);
    let name = format!("sgcli_{}", hex(&bytes));
    let pool = gate::db::connect(&owner)
        .await
        .unwrap_or_else(|e| panic!("connecting as the owner: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    pool.close().await;
    let onboard = std::env::var("ONBOARD_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| {
            gate::db::with_user(&app, gate::db::ONBOARD_ROLE)
                .unwrap_or_else(|e| panic!("the onboarding role's URL: {e}"))
        });
    Some(Db {
        onboard: with_database(&onboard, &name),
        app: with_database(&app, &name),
        owner: with_database(&owner, &name),
        name,
    })
}

fn getrandom(bytes: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(bytes))
        .unwrap_or_else(|e| panic!("/dev/urandom: {e}"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The built binary with `db`'s URLs, the tests' secrets, the demo provider,
/// an hourly checkpoint interval ([`CHECKPOINT_INTERVAL_MS`]) and an empty
/// working folder; nothing from the caller's SPENDGATE_*.
pub fn spendgate(db: &Db, workdir: &Path) -> Command {
    // The humans' keys file the configuration names; empty until a test's
    // approvers add theirs (`first_mandates`).
    let keys = workdir.join("mandate-keys");
    if !keys.exists() {
        std::fs::write(&keys, "").unwrap();
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_spendgate"));
    for (name, _) in std::env::vars() {
        if name.starts_with("SPENDGATE_") {
            c.env_remove(name);
        }
    }
    c.current_dir(workdir)
        .env("DATABASE_URL", &db.app)
        .env("MIGRATION_DATABASE_URL", &db.owner)
        .env("ONBOARD_DATABASE_URL", &db.onboard)
        .env("SPENDGATE_LEDGER_KEY", LEDGER_KEY)
        .env("SPENDGATE_LOG_KEY", LOG_KEY)
        .env("SPENDGATE_CHECKPOINT_INTERVAL_MS", CHECKPOINT_INTERVAL_MS)
        .env("SPENDGATE_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("SPENDGATE_PROVIDER", "demo")
        .env("SPENDGATE_BIND", "127.0.0.1:0")
        .env("SPENDGATE_MANDATE_KEYS", workdir.join("mandate-keys"))
        .env("SPENDGATE_LOG", "warn");
    c
}

/// Each standard-world tenant's first approver gets a key pair (its public
/// key added to the `mandate_keys` file) and signs the tenant's first
/// mandate, as an operator does; the `--mandate` arguments of `tenant apply`.
pub fn first_mandates(db: &Db, workdir: &Path) -> Vec<String> {
    let world = workspace_root().join("scenarios/worlds/standard.yaml");
    signed_first_mandates(
        db,
        workdir,
        &world,
        &[("acme", "finance-lead"), ("globex", "globex-finance")],
    )
}

/// As [`first_mandates`], for the tenants and approvers of `world`.
pub fn signed_first_mandates(
    db: &Db,
    workdir: &Path,
    world: &Path,
    approvers: &[(&str, &str)],
) -> Vec<String> {
    let mut args = Vec::new();
    for &(tenant, person) in approvers {
        let prefix = workdir.join(tenant);
        let printed = ok(spendgate(db, workdir)
            .args([
                "mandate", "keygen", "--tenant", tenant, "--person", person, "--out",
            ])
            .arg(&prefix));
        let line = printed.lines().last().unwrap_or_default().to_owned();
        let keys = workdir.join("mandate-keys");
        let mut held = std::fs::read_to_string(&keys).unwrap_or_default();
        held.push_str(&line);
        held.push('\n');
        std::fs::write(&keys, held).unwrap();
        let draft = ok(spendgate(db, workdir)
            .args(["mandate", "draft", "--tenant", tenant])
            .arg(world));
        let doc = workdir.join(format!("{tenant}.json"));
        std::fs::write(&doc, draft).unwrap();
        let signed = workdir.join(format!("{tenant}.mandate"));
        ok(spendgate(db, workdir)
            .args(["mandate", "sign"])
            .arg(&doc)
            .arg("--key")
            .arg(prefix.with_extension("key"))
            .arg("--out")
            .arg(&signed));
        args.push("--mandate".to_owned());
        args.push(signed.display().to_string());
    }
    args
}

/// Runs `c` to its end.
pub fn output(c: &mut Command) -> Output {
    c.output().unwrap_or_else(|e| panic!("running {c:?}: {e}"))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `c` and requires success; its stdout.
pub fn ok(c: &mut Command) -> String {
    let out = output(c);
    assert!(
        out.status.success(),
        "{c:?} failed ({}): {}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `spendgate migrate`, the standard world applied, and a key each for
/// buyer-agent and finance-lead.
pub fn onboard(db: &Db, workdir: &Path) -> (String, String) {
    ok(spendgate(db, workdir).arg("migrate"));
    let world = workspace_root().join("scenarios/worlds/standard.yaml");
    let mandates = first_mandates(db, workdir);
    ok(spendgate(db, workdir)
        .args(["tenant", "apply"])
        .arg(world)
        .args(&mandates));
    let key = |actor: &str| {
        ok(spendgate(db, workdir).args(["keys", "issue", "--tenant", "acme", "--actor", actor]))
            .trim()
            .to_owned()
    };
    (key("buyer-agent"), key("finance-lead"))
}

/// A `spendgate serve` on a loopback port.
pub struct Served {
    child: Child,
    pub url: String,
}

impl Served {
    /// `spendgate serve` on `db`, configured from `dir` as [`spendgate`]
    /// configures every command, started as [`Served::start`] starts one.
    pub fn serve(db: &Db, dir: &Path) -> Served {
        let mut c = spendgate(db, dir);
        c.arg("serve");
        Served::start(c)
    }

    /// Starts `c` (a `serve` command) and waits for its "listening" line.
    pub fn start(mut c: Command) -> Served {
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting serve: {e}"));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let url = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("serve ended before listening: {}", seen.join("\n"));
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
            }
            seen.push(line);
        };
        // Keep reading, so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Served { child, url }
    }

    /// SIGTERM, then its exit; panics unless it exits 0 within 20 s.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "serve exited {status} on SIGTERM");
                return;
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP call with a bearer key; (status, JSON body).
pub async fn call(
    method: reqwest::Method,
    url: &str,
    key: &str,
    body: Option<&str>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let answer = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("calling {url}: {e}"));
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The id an answer names (`request_id` or `id`).
pub fn id_of(answer: &Value) -> String {
    answer
        .get("request_id")
        .or_else(|| answer.get("id"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no id in {answer}"))
        .to_owned()
}

/// Propose a SNACK-BOX, check it out and pay it: (request, order).
pub async fn purchase(base: &str, agent: &str, human: &str) -> (String, String) {
    use reqwest::Method;
    let (status, proposed) = call(
        Method::POST,
        &format!("{base}/v1/requests"),
        agent,
        Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
    )
    .await;
    assert!((200..300).contains(&status), "{status}: {proposed}");
    let request = id_of(&proposed);
    let (status, checked_out) = call(
        Method::POST,
        &format!("{base}/v1/requests/{request}/checkout"),
        human,
        None,
    )
    .await;
    assert!((200..300).contains(&status), "{status}: {checked_out}");
    let authority = id_of(&checked_out);
    let (status, paid) = call(
        Method::POST,
        &format!("{base}/v1/authorities/{authority}/pay"),
        human,
        None,
    )
    .await;
    assert!((200..300).contains(&status), "{status}: {paid}");
    (request, id_of(&paid))
}

/// The state of a request, as its agent sees it.
pub async fn state_of(base: &str, agent: &str, request: &str) -> String {
    let (status, body) = call(
        reqwest::Method::GET,
        &format!("{base}/v1/requests/{request}"),
        agent,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["state"].as_str().unwrap_or_default().to_owned()
}

/// `scripts/send-webhook.sh ORDER AMOUNT` against `base`: the shipped script.
pub fn send_webhook(base: &str, order: &str, amount: i64) -> Output {
    let mut c = Command::new("bash");
    c.arg(workspace_root().join("scripts/send-webhook.sh"))
        .arg(order)
        .arg(amount.to_string())
        .env("SPENDGATE_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("SPENDGATE_URL", base);
    output(&mut c)
}
