//! `harness ledger anchor` and `harness ledger verify` end to end, through the
//! built binary, against a database the gate wrote: the anchor reads back,
//! a tail cut with the head moved back passes a plain verify and is named
//! against the anchor, and every failure has its exit code (1 broken, 2
//! could not run) and says what went wrong. Needs DATABASE_URL (run under
//! `harness db run`); the tampering runs on the test database's own pool.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use gate::provider::InProcessProvider;
use gate::service::{Anchor, Gate, ManualClock};
use scenarios::generate::standard_world;
use sqlx::Executor;

const SECRET: &str = "whsec_ledger_cli_test_0123456789abcdef";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `harness ledger ARGS` on `database`, keyed by `SECRET` unless `env` says otherwise.
fn ledger(database: &str, args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command
        .arg("ledger")
        .args(args)
        .args(["--database", database])
        .env("SPENDGATE_WEBHOOK_SECRET", SECRET)
        .env_remove("SPENDGATE_LEDGER_KEY");
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[tokio::test]
async fn an_anchor_names_a_cut_tail_that_a_plain_verify_cannot_see() {
    let Some(db) = gate::db::fresh_test_database()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        return;
    };
    let name = db.name().to_owned();
    let clock = Arc::new(ManualClock::new(standard_world().now));
    let g = Gate::new(db.pool().clone(), InProcessProvider::new(), SECRET, clock)
        .unwrap_or_else(|e| panic!("{e}"));
    g.seed(&standard_world().seed())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = br#"{"sku": "SNACK-BOX", "quantity": 1, "purpose": "team snacks"}"#;
    for _ in 0..3 {
        g.propose("acme", "buyer-agent", body, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    let anchored = ledger(&name, &["anchor"], &[]);
    assert_eq!(code(&anchored), Some(0), "{}", text(&anchored.stderr));
    let anchor = Anchor::parse(&text(&anchored.stdout)).unwrap_or_else(|e| panic!("{e}"));
    let heads: Vec<(&str, i64)> = anchor
        .heads
        .iter()
        .map(|h| (h.tenant.as_str(), h.seq))
        .collect();
    assert_eq!(heads, vec![("acme", 7), ("globex", 1)]);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("anchor.json");
    std::fs::write(&file, &anchored.stdout).unwrap_or_else(|e| panic!("{e}"));
    let file = file.to_string_lossy().into_owned();

    let intact = ledger(&name, &["verify", "--anchor", &file], &[]);
    assert_eq!(code(&intact), Some(0), "{}", text(&intact.stderr));
    assert!(
        text(&intact.stdout).contains("ledger intact: 2 chains, 8 entries"),
        "{}",
        text(&intact.stdout)
    );

    // The owner cuts acme's tail and moves its head back: no key needed.
    db.owner_pool()
        .execute(
            "ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only; \
             DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > 5; \
             UPDATE ledger_head SET (seq, hash) = (SELECT seq, hash FROM ledger_entries \
               WHERE tenant_id = 'acme' AND seq = 5) WHERE tenant_id = 'acme'; \
             ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plain = ledger(&name, &["verify"], &[]);
    assert_eq!(
        code(&plain),
        Some(0),
        "without the anchor the cut is invisible"
    );
    let cut = ledger(&name, &["verify", "--anchor", &file], &[]);
    assert_eq!(code(&cut), Some(1), "{}", text(&cut.stdout));
    assert!(
        text(&cut.stdout).contains(
            "acme: BROKEN against the anchor at entry 6: the tail was cut: the anchor records \
             entry 7 and the chain now ends at entry 5"
        ),
        "{}",
        text(&cut.stdout)
    );
    let globex_only = ledger(
        &name,
        &["verify", "--tenant", "globex", "--anchor", &file],
        &[],
    );
    assert_eq!(code(&globex_only), Some(0), "{}", text(&globex_only.stdout));

    // Another key: every chain is forged, and a broken ledger is not anchored.
    let other_key = [("SPENDGATE_LEDGER_KEY", Some("another key, not the gate's"))];
    let forged = ledger(&name, &["verify"], &other_key);
    assert_eq!(code(&forged), Some(1));
    assert!(
        text(&forged.stdout).contains("globex: BROKEN at entry 1: its hash is not the keyed hash"),
        "{}",
        text(&forged.stdout)
    );
    let refused = ledger(&name, &["anchor"], &other_key);
    assert_eq!(code(&refused), Some(1));
    assert!(
        text(&refused.stdout).is_empty(),
        "{}",
        text(&refused.stdout)
    );
    assert!(text(&refused.stderr).contains("no anchor printed"));

    // Could not run: exit 2, saying why.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"format": "spendgate-ledger-anchor/1", "heads": [{"tenant": "acme", "seq": 7}]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let malformed = ledger(&name, &["verify", "--anchor", &bad.to_string_lossy()], &[]);
    assert_eq!(code(&malformed), Some(2));
    let said = text(&malformed.stderr);
    assert!(
        said.contains(&format!("the anchor file {}", bad.display()))
            && said.contains("field `heads[0].hash`: is missing"),
        "{said}"
    );
    let missing = Path::new(dir.path()).join("missing.json");
    let absent = ledger(
        &name,
        &["verify", "--anchor", &missing.to_string_lossy()],
        &[],
    );
    assert_eq!(code(&absent), Some(2));
    assert!(text(&absent.stderr).contains("reading the anchor file"));
    let keyless = ledger(&name, &["verify"], &[("SPENDGATE_WEBHOOK_SECRET", None)]);
    assert_eq!(code(&keyless), Some(2));
    assert!(text(&keyless.stderr).contains("no ledger key"));
    let short = ledger(
        &name,
        &["verify"],
        &[("SPENDGATE_LEDGER_KEY", Some("short"))],
    );
    assert_eq!(code(&short), Some(2));
    assert!(text(&short.stderr).contains("at least 16 bytes"));

    drop(g);
    db.drop().await.unwrap_or_else(|e| panic!("{e}"));
}
