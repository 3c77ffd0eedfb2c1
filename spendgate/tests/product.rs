//! The `spendgate` binary as an operator runs it: migrate, onboard, keys,
//! serve with the demo provider across restarts, the ledger with its own
//! key, and the settings that stop it before it listens.

mod support;

use std::process::Command;

use support::*;

#[tokio::test(flavor = "multi_thread")]
async fn purchases_survive_restarts_and_the_ledger_verifies_only_with_its_key() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, human) = onboard(&db, work.path());

    // Restart between pay and the webhook.
    let served = Served::serve(&db, work.path());
    let (first, first_order) = purchase(&served.url, &agent, &human).await;
    assert_eq!(
        state_of(&served.url, &agent, &first).await,
        "PROVIDER_PENDING"
    );
    served.stop();
    let served = Served::serve(&db, work.path());
    let sent = send_webhook(&served.url, &first_order, 25_000);
    assert!(
        sent.status.success(),
        "{}{}",
        text(&sent.stdout),
        text(&sent.stderr)
    );
    assert_eq!(state_of(&served.url, &agent, &first).await, "CAPTURED");

    // Restart between two purchases: the second gets an order of its own.
    served.stop();
    let served = Served::serve(&db, work.path());
    let (second, second_order) = purchase(&served.url, &agent, &human).await;
    assert_ne!(
        second_order, first_order,
        "an order id came back after a restart"
    );
    let sent = send_webhook(&served.url, &second_order, 25_000);
    assert!(
        sent.status.success(),
        "{}{}",
        text(&sent.stdout),
        text(&sent.stderr)
    );
    assert_eq!(state_of(&served.url, &agent, &second).await, "CAPTURED");
    served.stop();

    // The ledger verifies with the key the gate was served with ...
    let verified = ok(spendgate(&db, work.path()).args(["ledger", "verify"]));
    assert!(verified.contains("ledger intact"), "{verified}");
    // ... and with any other key breaks at its first entry.
    let other = output(
        spendgate(&db, work.path())
            .env(
                "SPENDGATE_LEDGER_KEY",
                "another-ledger-key-0123456789abcdef0123",
            )
            .args(["ledger", "verify"]),
    );
    assert_eq!(other.status.code(), Some(1), "{}", text(&other.stderr));
    assert!(
        text(&other.stdout).contains("acme: BROKEN at entry 1"),
        "{}",
        text(&other.stdout)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_that_writes_or_verifies_the_ledger_needs_a_ledger_key() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    ok(spendgate(&db, work.path()).arg("migrate"));
    let world = workspace_root().join("scenarios/worlds/standard.yaml");
    let commands: Vec<Vec<String>> = vec![
        vec!["serve".into()],
        vec!["reconcile".into()],
        vec!["ledger".into(), "verify".into()],
        vec!["ledger".into(), "anchor".into()],
        vec!["tenant".into(), "apply".into(), world.display().to_string()],
    ];
    for args in commands {
        let out = output(
            spendgate(&db, work.path())
                .env_remove("SPENDGATE_LEDGER_KEY")
                .args(&args),
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("ledger_key is not set") && stderr.contains("SPENDGATE_LEDGER_KEY"),
            "{args:?}: {stderr}"
        );
    }
    // A key shorter than 32 bytes is refused too, never padded or derived.
    let out = output(
        spendgate(&db, work.path())
            .env("SPENDGATE_LEDGER_KEY", "short-key-of-31-bytes-012345678")
            .args(["ledger", "verify"]),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("31 bytes"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_live_razorpay_key_stops_serve_before_it_listens() {
    let work = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_spendgate"));
    let out = output(
        c.current_dir(work.path())
            .env("SPENDGATE_PROVIDER", "razorpay")
            .env("SPENDGATE_RAZORPAY_KEY_ID", "rzp_live_0123456789abcd")
            .env("SPENDGATE_RAZORPAY_KEY_SECRET", "secret")
            .env("SPENDGATE_LEDGER_KEY", LEDGER_KEY)
            .env("SPENDGATE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("SPENDGATE_BIND", "127.0.0.1:0")
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
            .arg("serve"),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("razorpay_key_id") && stderr.contains("live-mode"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_a_schema_that_was_never_migrated() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let out = output(spendgate(&db, work.path()).arg("serve"));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("spendgate migrate"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn config_check_names_the_source_and_never_shows_a_secret() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("spendgate.toml"),
        "provider = \"demo\"\nledger_key = \"a-ledger-key-from-the-file-0123456789\"\n",
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_spendgate"));
    let out = output(
        c.current_dir(work.path())
            .env_remove("SPENDGATE_LEDGER_KEY")
            .env_remove("SPENDGATE_CONFIG")
            .env("SPENDGATE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env(
                "DATABASE_URL",
                "postgres://app:hunter2@db.example/spendgate",
            )
            .args(["config", "check"]),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        !stdout.contains("a-ledger-key-from") && !stdout.contains("hunter2"),
        "{stdout}"
    );
    assert!(!stdout.contains(WEBHOOK_SECRET), "{stdout}");
    assert!(stdout.contains("spendgate.toml"), "{stdout}");
    assert!(stdout.contains("$SPENDGATE_WEBHOOK_SECRET"), "{stdout}");

    // A key that is not a setting: the file, its line and the key.
    std::fs::write(
        work.path().join("spendgate.toml"),
        "provider = \"demo\"\nledgerkey = \"x\"\n",
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_spendgate"));
    let out = output(c.current_dir(work.path()).args(["config", "check"]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("spendgate.toml, line 2") && stderr.contains("`ledgerkey`"),
        "{stderr}"
    );
}

#[test]
fn the_operators_binary_is_built_without_test_support() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = output(Command::new(cargo).current_dir(workspace_root()).args([
        "tree",
        "-p",
        "spendgate",
        "-e",
        "features",
        "--offline",
    ]));
    let tree = text(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        text(&out.stderr)
    );
    assert!(tree.contains("gate v"), "the tree names no gate: {tree}");
    assert!(
        !tree.contains("test-support"),
        "spendgate's dependency graph enables test-support:\n{tree}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_revoked_from_the_cli_is_refused_by_a_running_serve() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    let served = Served::start({
        let mut c = spendgate(&db, work.path());
        c.args(["serve", "--pool", "2", "--turns-per-tenant", "1"]);
        c
    });
    let url = format!("{}/v1/requests", served.url);
    let propose = || {
        call(
            reqwest::Method::POST,
            &url,
            &agent,
            Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
        )
    };
    let (status, body) = propose().await;
    assert!((200..300).contains(&status), "{status}: {body}");
    let listed = ok(spendgate(&db, work.path()).args(["keys", "list", "--tenant", "acme"]));
    assert!(
        listed.contains("buyer-agent") && listed.contains("live"),
        "{listed}"
    );
    assert!(!listed.contains(&agent), "list shows a key: {listed}");
    assert_eq!(
        ok(spendgate(&db, work.path())
            .args(["keys", "revoke"])
            .arg(&agent))
        .trim(),
        "revoked"
    );
    let again = ok(spendgate(&db, work.path())
        .args(["keys", "revoke"])
        .arg(&agent));
    assert!(again.contains("already revoked"), "{again}");
    let (status, _) = propose().await;
    assert_eq!(status, 401);
    served.stop();
    // An actor the tenant does not have gets no key.
    let out = output(
        spendgate(&db, work.path())
            .args(["keys", "issue", "--tenant", "acme", "--actor", "mallory"]),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("mallory"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn serve_without_a_database_url_names_the_setting() {
    let work = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_spendgate"));
    let out = output(
        c.current_dir(work.path())
            .env_remove("DATABASE_URL")
            .env_remove("SPENDGATE_DATABASE_URL")
            .env_remove("SPENDGATE_CONFIG")
            .env("SPENDGATE_PROVIDER", "demo")
            .env("SPENDGATE_LEDGER_KEY", LEDGER_KEY)
            .env("SPENDGATE_LOG_KEY", LOG_KEY)
            .env("SPENDGATE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .arg("serve"),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("database_url is not set") && stderr.contains("SPENDGATE_DATABASE_URL"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_auditor_key_from_the_cli_reads_the_pages_and_calls_no_gate_operation() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    let auditor = ok(spendgate(&db, work.path()).args([
        "keys",
        "issue",
        "--tenant",
        "acme",
        "--actor",
        "finance-lead",
        "--auditor",
    ]))
    .trim()
    .to_owned();
    let listed = ok(spendgate(&db, work.path()).args(["keys", "list", "--tenant", "acme"]));
    assert!(listed.contains("auditor"), "{listed}");
    // An agent gets no auditor's key.
    let out = output(spendgate(&db, work.path()).args([
        "keys",
        "issue",
        "--tenant",
        "acme",
        "--actor",
        "buyer-agent",
        "--auditor",
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stdout).is_empty());
    let served = Served::start({
        let mut c = spendgate(&db, work.path());
        c.args(["serve", "--pool", "2"]);
        c
    });
    let (status, body) = call(
        reqwest::Method::POST,
        &format!("{}/v1/requests", served.url),
        &auditor,
        Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = call(
        reqwest::Method::GET,
        &format!("{}/v1/whoami", served.url),
        &auditor,
        None,
    )
    .await;
    assert_eq!(status, 403);
    for (key, want) in [(&auditor, 200), (&agent, 403)] {
        let page = reqwest::Client::new()
            .get(format!("{}/console", served.url))
            .basic_auth("reader", Some(key))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status().as_u16(), want);
    }
    served.stop();
}
