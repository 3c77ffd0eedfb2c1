//! `spendgate ledger anchor` and `spendgate ledger verify` end to end, on a
//! ledger a served gate wrote: the anchor reads back, a tail cut with the
//! head moved back passes a plain verify and is named against the anchor,
//! and every failure has its exit code (1 broken, 2 could not run) and says
//! what went wrong. The tampering runs as the database's owner.

mod support;

use std::process::Output;

use gate::service::Anchor;
use sqlx::Executor;
use support::*;

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anchor_names_a_cut_tail_that_a_plain_verify_cannot_see() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    let served = Served::serve(&db, work.path());
    for _ in 0..3 {
        let (status, body) = call(
            reqwest::Method::POST,
            &format!("{}/v1/requests", served.url),
            &agent,
            Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
        )
        .await;
        assert!((200..300).contains(&status), "{status}: {body}");
    }
    served.stop();
    let ledger = |args: &[&str]| output(spendgate(&db, work.path()).arg("ledger").args(args));

    let anchored = ledger(&["anchor"]);
    assert_eq!(code(&anchored), Some(0), "{}", text(&anchored.stderr));
    let anchor = Anchor::parse(&text(&anchored.stdout)).unwrap();
    let acme = anchor
        .heads
        .iter()
        .find(|h| h.tenant == "acme")
        .map(|h| h.seq)
        .unwrap();
    assert!(
        acme >= 5,
        "three proposals after onboarding make at least 5 entries: {acme}"
    );
    let file = work.path().join("anchor.json");
    std::fs::write(&file, &anchored.stdout).unwrap();
    let file = file.to_string_lossy().into_owned();
    let intact = ledger(&["verify", "--anchor", &file]);
    assert_eq!(code(&intact), Some(0), "{}", text(&intact.stdout));

    // The owner cuts acme's tail and moves its head back: no key needed.
    let keep = acme - 2;
    let owner = gate::db::connect(&db.owner).await.unwrap();
    owner
        .execute(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only; \
             DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > {keep}; \
             UPDATE ledger_head SET (seq, hash) = (SELECT seq, hash FROM ledger_entries \
               WHERE tenant_id = 'acme' AND seq = {keep}) WHERE tenant_id = 'acme'; \
             ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only"
        )))
        .await
        .unwrap();
    owner.close().await;
    let plain = ledger(&["verify"]);
    assert_eq!(
        code(&plain),
        Some(0),
        "without the anchor the cut is invisible"
    );
    let cut = ledger(&["verify", "--anchor", &file]);
    assert_eq!(code(&cut), Some(1), "{}", text(&cut.stdout));
    let expected = format!(
        "acme: BROKEN against the anchor at entry {}: the tail was cut: the anchor records \
         entry {acme} and the chain now ends at entry {keep}",
        keep + 1
    );
    assert!(
        text(&cut.stdout).contains(&expected),
        "{}",
        text(&cut.stdout)
    );
    let globex_only = ledger(&["verify", "--tenant", "globex", "--anchor", &file]);
    assert_eq!(code(&globex_only), Some(0), "{}", text(&globex_only.stdout));

    // Another key: every chain is forged, and a broken ledger is not anchored.
    let other = |args: &[&str]| {
        output(
            spendgate(&db, work.path())
                .env(
                    "SPENDGATE_LEDGER_KEY",
                    "another-key-that-is-not-the-gates-0123",
                )
                .arg("ledger")
                .args(args),
        )
    };
    let forged = other(&["verify"]);
    assert_eq!(code(&forged), Some(1));
    assert!(
        text(&forged.stdout).contains("globex: BROKEN at entry 1: its hash is not the keyed hash"),
        "{}",
        text(&forged.stdout)
    );
    let refused = other(&["anchor"]);
    assert_eq!(code(&refused), Some(1));
    assert!(
        text(&refused.stdout).is_empty(),
        "{}",
        text(&refused.stdout)
    );
    assert!(text(&refused.stderr).contains("no anchor printed"));

    // Could not run: exit 2, saying why.
    let bad = work.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"format": "spendgate-ledger-anchor/1", "heads": [{"tenant": "acme", "seq": 7}]}"#,
    )
    .unwrap();
    let malformed = ledger(&["verify", "--anchor", &bad.to_string_lossy()]);
    assert_eq!(code(&malformed), Some(2));
    let said = text(&malformed.stderr);
    assert!(
        said.contains(&format!("the anchor file {}", bad.display()))
            && said.contains("field `heads[0].hash`: is missing"),
        "{said}"
    );
    let missing = work.path().join("missing.json");
    let absent = ledger(&["verify", "--anchor", &missing.to_string_lossy()]);
    assert_eq!(code(&absent), Some(2));
    assert!(text(&absent.stderr).contains("cannot read the anchor file"));
}

/// What the runtime login changes outside the gate, `ledger verify` names:
/// a day's reservation reset (`daily_spend_counts_requests`, which would
/// refuse it at commit, ships disabled: what it costs the flow is more than
/// 10%) and a policy version published with no ledger entry, each with its
/// table and key, and it exits 1 though every chain is intact.
#[tokio::test(flavor = "multi_thread")]
async fn verify_names_each_row_the_runtime_login_changed_and_exits_1() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, _) = onboard(&db, work.path());
    let served = Served::serve(&db, work.path());
    let (status, body) = call(
        reqwest::Method::POST,
        &format!("{}/v1/requests", served.url),
        &agent,
        Some(r#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#),
    )
    .await;
    assert!((200..300).contains(&status), "{status}: {body}");
    served.stop();
    let verify = || output(spendgate(&db, work.path()).args(["ledger", "verify"]));
    let clean = verify();
    assert_eq!(code(&clean), Some(0), "{}", text(&clean.stdout));

    let runtime = gate::db::connect(&db.app).await.unwrap();
    runtime
        .execute(
            "UPDATE daily_spend SET reserved_paise = 0 WHERE tenant_id = 'acme'; \
             INSERT INTO policy_versions (tenant_id, version, policy, published_at) \
             SELECT tenant_id, 2, policy, published_at FROM policy_versions \
              WHERE tenant_id = 'acme' AND version = 1",
        )
        .await
        .unwrap();
    runtime.close().await;
    let audited = verify();
    let out = text(&audited.stdout);
    assert_eq!(code(&audited), Some(1), "{out}");
    assert!(out.contains("acme: intact"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("acme: DISAGREES daily_spend day=")
                && l.contains("its requests reserve 25000")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("acme: DISAGREES policy_versions version=2")),
        "{out}"
    );
}
