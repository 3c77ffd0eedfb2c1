//! `harness keys` and `harness serve` through the built binary, against a
//! fresh database on the `DATABASE_URL` server: a key issued by the CLI
//! proposes over a real socket, a revoked one is 401, and SIGTERM stops the
//! server cleanly (exit 0) after answering; the server runs on a pool of two
//! connections and one turn per tenant (`--pool`, `--turns-per-tenant`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use gate::provider::InProcessProvider;
use gate::service::{Gate, SystemClock};
use scenarios::generate::standard_world;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const SECRET: &str = "whsec_serve_cli_test_0123456789abcdef0123";

fn harness(database: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.env("SPENDGATE_WEBHOOK_SECRET", SECRET)
        .env("SPENDGATE_LOG", "warn")
        .args(["serve", "--bind", "127.0.0.1:0", "--database", database])
        // A small pool and one turn per tenant: the flags a deployment sizes.
        .args(["--pool", "2", "--turns-per-tenant", "1"]);
    c
}

fn cli(database: &str, args: &[&str]) -> Result<(bool, String, String), std::io::Error> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args(args).arg("--database").arg(database);
    let out = c.output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_from_the_cli_work_over_serve_and_sigterm_stops_it_cleanly() -> TestResult {
    let Some(db) = gate::db::fresh_test_database().await? else {
        return Ok(());
    };
    let gate = Gate::new(
        db.pool().clone(),
        InProcessProvider::new(),
        SECRET,
        Arc::new(SystemClock),
    )?;
    gate.seed(&standard_world().seed()).await?;

    let (ok, key, err) = cli(
        db.name(),
        &[
            "keys",
            "issue",
            "--tenant",
            "acme",
            "--actor",
            "buyer-agent",
        ],
    )?;
    assert!(ok, "{err}");
    let key = key.trim().to_owned();
    assert!(key.starts_with("sgk_") && key.len() == 85, "{key:?}");
    assert!(
        !err.contains(&key),
        "the key is printed once, on stdout only"
    );
    let (ok, _, err) = cli(
        db.name(),
        &[
            "keys",
            "issue",
            "--tenant",
            "acme",
            "--actor",
            "globex-agent",
        ],
    )?;
    assert!(!ok && err.contains("no agent or human"), "{err}");
    let (ok, spare, _) = cli(
        db.name(),
        &[
            "keys",
            "issue",
            "--tenant",
            "acme",
            "--actor",
            "renewals-agent",
        ],
    )?;
    assert!(ok);
    let spare = spare.trim().to_owned();
    let (ok, out, err) = cli(db.name(), &["keys", "revoke", &spare])?;
    assert!(ok && out.contains("revoked"), "{out}{err}");
    let (ok, out, _) = cli(db.name(), &["keys", "list", "--tenant", "acme"])?;
    assert!(
        ok && out.lines().count() == 2 && !out.contains("sgk_"),
        "{out}"
    );

    let mut server = harness(db.name())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = server.stderr.take().ok_or("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let first = lines.next().ok_or("the server said nothing")??;
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("no address in {first:?}"))?
        .to_owned();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()?;
    let health: serde_json::Value = client
        .get(format!("{base}/healthz"))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(health["database"], "reachable");
    let propose = |key: String| {
        client
            .post(format!("{base}/v1/requests"))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#)
            .send()
    };
    assert_eq!(propose(key.clone()).await?.status().as_u16(), 201);
    assert_eq!(propose(spare.clone()).await?.status().as_u16(), 401);

    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()?;
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || server.wait()).await??;
    assert!(status.success(), "serve exited {status:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.contains("spendgate stopped")),
        "{rest:?}"
    );
    db.drop().await?;
    Ok(())
}
