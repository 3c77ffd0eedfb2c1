//! `spendgate serve`'s checkpoint signer, end to end: a served gate signs a
//! fresh purchase's entries within its `checkpoint_interval_ms` and the
//! receipt proves them against that checkpoint; a serve killed between the
//! commit and its next tick leaves nothing out, because the next serve
//! signs before it listens; and serve refuses to start without a log key.

mod support;

use std::time::{Duration, Instant};

use gate::service::tlog;
use spendgate_verify::checkpoint;
use support::*;

/// (the tenant's number of entries, the size of its largest kept checkpoint).
async fn head_and_covered(db: &Db, tenant: &str) -> (u64, u64) {
    let pool = gate::db::connect(&db.app).await.unwrap();
    let (head, covered): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT seq FROM ledger_head WHERE tenant_id = $1) \
                + (SELECT count(*) FROM ledger_queue WHERE tenant_id = $1), \
                (SELECT COALESCE(max(size), 0) FROM log_checkpoints WHERE tenant_id = $1)",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    (head as u64, covered as u64)
}

fn log_key() -> tlog::LogKey {
    tlog::LogKey::new(LOG_KEY.as_bytes()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_served_purchase_is_signed_within_the_interval_and_its_receipt_proves_it() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, human) = onboard(&db, work.path());
    let served = Served::start({
        let mut c = spendgate(&db, work.path());
        c.env("SPENDGATE_CHECKPOINT_INTERVAL_MS", "200")
            .arg("serve");
        c
    });
    let (request, _order) = purchase(&served.url, &agent, &human).await;
    let paid = Instant::now();
    let (head, _) = head_and_covered(&db, "acme").await;
    loop {
        let (_, covered) = head_and_covered(&db, "acme").await;
        if covered >= head {
            break;
        }
        assert!(
            paid.elapsed() < Duration::from_secs(10),
            "no checkpoint covered entry {head} within 10 s of a 200 ms interval"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let client = reqwest::Client::new();
    let page = client
        .get(format!("{}/receipts/{request}", served.url))
        .bearer_auth(&human)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("id=\"checkpoint\""), "no checkpoint: {html}");
    assert!(!html.contains("id=\"unproved\""), "unproved: {html}");
    served.stop();

    // The receipt's checkpoint is the signer's, under the tenant's log key.
    let pool = gate::db::connect(&db.app).await.unwrap();
    let note = tlog::latest_checkpoint(&pool, "acme", head)
        .await
        .unwrap()
        .unwrap()
        .note;
    let opened =
        checkpoint::open(note.as_bytes(), &log_key().verifier("acme").unwrap(), None).unwrap();
    assert!(opened.size >= head);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_serve_killed_before_its_tick_leaves_nothing_out() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    let (agent, human) = onboard(&db, work.path());
    // The tests' interval is an hour: this serve signs only at its start.
    let served = Served::serve(&db, work.path());
    purchase(&served.url, &agent, &human).await;
    let (head, covered) = head_and_covered(&db, "acme").await;
    assert!(covered < head, "the purchase is not signed yet");
    // Killed (SIGKILL), not stopped: no tick after the commits.
    drop(served);

    let served = Served::serve(&db, work.path());
    // It signs before it listens: the purchase is covered now.
    let (_, covered) = head_and_covered(&db, "acme").await;
    assert_eq!(covered, head);
    served.stop();
    let pool = gate::db::connect(&db.app).await.unwrap();
    let consistent = tlog::check_consistency(&pool, &log_key(), "acme")
        .await
        .unwrap();
    assert!(consistent.is_ok(), "{consistent:?}");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_to_start_without_a_log_key_or_with_a_bad_interval() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    ok(spendgate(&db, work.path()).arg("migrate"));
    let missing = output(
        spendgate(&db, work.path())
            .env_remove("SPENDGATE_LOG_KEY")
            .arg("serve"),
    );
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    assert!(
        text(&missing.stderr).contains("log_key is not set"),
        "{}",
        text(&missing.stderr)
    );
    let bad = output(
        spendgate(&db, work.path())
            .env("SPENDGATE_CHECKPOINT_INTERVAL_MS", "0")
            .arg("serve"),
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("checkpoint_interval_ms"),
        "{}",
        text(&bad.stderr)
    );
}
