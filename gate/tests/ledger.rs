//! The ledger: every proposal, decision, approval, authority, order and
//! provider event appended and hash-chained; `verify` names the first broken
//! entry after a superuser tampers with it behind the disabled trigger.

mod support;

use gate::Decision;
use gate::service::ledger::{GENESIS_HASH, chain_hash};
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{LedgerReport, sign_webhook, verify_ledger};
use sqlx::Executor;
use support::*;

/// A step-up purchase approved, checked out, paid and captured, plus a forged event.
async fn history(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let p = w
        .gate
        .propose("acme", "buyer-agent", &body("CLOUD-TEAM", 1), None)
        .await?;
    let request = request_id(&p);
    assert!(
        w.gate
            .approve("acme", &request, "finance-lead")
            .await?
            .is_ok()
    );
    let authority = id(&w.gate.checkout("acme", &request, "finance-lead").await?);
    let order = id(&w.gate.pay("acme", &authority, "finance-lead").await?);
    let (raw, sig) = event(w, "evt_1", EVENT_CAPTURED, &order, 180000);
    assert!(
        w.gate
            .webhook(&raw, Some(&sig), Some("evt_1"))
            .await?
            .is_ok()
    );
    let forged = w
        .gate
        .webhook(&raw, Some(&sign_webhook(b"guess", &raw)), Some("evt_1"))
        .await?;
    assert!(matches!(forged.decision, Decision::Deny(_)));
    Ok(request)
}

async fn tamper(w: &World, sql: &str) -> TestResult {
    let mut conn = w.db.pool().acquire().await?;
    conn.execute("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only")
        .await?;
    conn.execute(sql).await?;
    conn.execute("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only")
        .await?;
    Ok(())
}

fn broken_at(report: &LedgerReport) -> Option<i64> {
    report.first_break.as_ref().map(|b| b.seq)
}

#[tokio::test]
async fn every_step_is_appended_and_each_entry_hashes_the_one_before() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    history(&w).await?;
    let rows: Vec<(i64, String, String, String, String)> =
        sqlx::query_as("SELECT seq, kind, entry, prev_hash, hash FROM ledger_entries ORDER BY seq")
            .fetch_all(w.pool())
            .await?;
    let kinds: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "seed",
            "seed",
            "proposal",
            "decision",
            "approval",
            "decision",
            "authority.issued",
            "authority.consumed",
            "order.created",
            "provider_event",
            "provider_event.refused",
        ]
    );
    let mut prev = GENESIS_HASH.to_owned();
    for (i, (seq, _, entry, prev_hash, hash)) in rows.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1);
        assert_eq!(prev_hash, &prev);
        assert_eq!(hash, &chain_hash(&prev, entry));
        prev = hash.clone();
    }
    let report = verify_ledger(w.pool()).await?;
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.entries, report.last_hash.as_str()),
        (11, prev.as_str())
    );
    // The full decision is in the ledger; the forged event is recorded without a tenant.
    let decision: String = sqlx::query_scalar("SELECT entry FROM ledger_entries WHERE seq = 4")
        .fetch_one(w.pool())
        .await?;
    assert!(
        decision.contains("\"decision\":\"step_up\"")
            && decision.contains("\"amount_paise\":180000"),
        "{decision}"
    );
    let forged: Option<String> =
        sqlx::query_scalar("SELECT tenant_id FROM ledger_entries WHERE seq = 11")
            .fetch_one(w.pool())
            .await?;
    assert_eq!(forged, None);
    w.drop().await
}

#[tokio::test]
async fn verify_names_an_entry_changed_behind_the_disabled_trigger() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    history(&w).await?;
    tamper(
        &w,
        "UPDATE ledger_entries SET entry = replace(entry, '180000', '1') WHERE seq = 6",
    )
    .await?;
    let report = verify_ledger(w.pool()).await?;
    assert_eq!(broken_at(&report), Some(6), "{report:?}");
    assert!(
        report
            .first_break
            .as_ref()
            .is_some_and(|b| b.problem.contains("hash does not match"))
    );
    assert_eq!(report.entries, 5, "the entries before it verified");
    w.drop().await
}

#[tokio::test]
async fn verify_names_the_next_entry_when_a_changed_entry_was_rehashed() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    history(&w).await?;
    let (prev, entry): (String, String) =
        sqlx::query_as("SELECT prev_hash, entry FROM ledger_entries WHERE seq = 6")
            .fetch_one(w.pool())
            .await?;
    let forged = entry.replace("180000", "1");
    let rehashed = chain_hash(&prev, &forged);
    tamper(
        &w,
        &format!(
            "UPDATE ledger_entries SET entry = '{}', hash = '{rehashed}' WHERE seq = 6",
            forged.replace('\'', "''")
        ),
    )
    .await?;
    let report = verify_ledger(w.pool()).await?;
    assert_eq!(broken_at(&report), Some(7), "{report:?}");
    assert!(
        report
            .first_break
            .as_ref()
            .is_some_and(|b| b.problem.contains("prev_hash"))
    );
    w.drop().await
}

#[tokio::test]
async fn verify_names_a_deleted_entry_and_a_cut_tail() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    history(&w).await?;
    tamper(&w, "DELETE FROM ledger_entries WHERE seq >= 10").await?;
    let report = verify_ledger(w.pool()).await?;
    assert_eq!(
        broken_at(&report),
        Some(10),
        "a cut tail disagrees with the head: {report:?}"
    );
    tamper(&w, "DELETE FROM ledger_entries WHERE seq = 4").await?;
    let report = verify_ledger(w.pool()).await?;
    assert_eq!(broken_at(&report), Some(4), "{report:?}");
    assert!(
        report
            .first_break
            .as_ref()
            .is_some_and(|b| b.problem.contains("missing"))
    );
    w.drop().await
}

#[tokio::test]
async fn verify_names_an_entry_whose_columns_were_changed() -> TestResult {
    let Some(w) = world().await? else {
        return Ok(());
    };
    history(&w).await?;
    tamper(
        &w,
        "UPDATE ledger_entries SET tenant_id = 'globex' WHERE seq = 8",
    )
    .await?;
    let report = verify_ledger(w.pool()).await?;
    assert_eq!(broken_at(&report), Some(8), "{report:?}");
    assert!(
        report
            .first_break
            .as_ref()
            .is_some_and(|b| b.problem.contains("columns"))
    );
    w.drop().await
}

#[tokio::test]
async fn the_ledger_survives_concurrent_appends_as_one_chain() -> TestResult {
    let Some(w) = world_with_pool(16).await? else {
        return Ok(());
    };
    let mut tasks = Vec::new();
    for i in 0..32 {
        let gate = w.gate.clone();
        tasks.push(tokio::spawn(async move {
            let agent = ["buyer-agent", "globex-agent"][i % 2];
            let tenant = ["acme", "globex"][i % 2];
            gate.propose(tenant, agent, &body("USB-HUB", 1), None).await
        }));
    }
    for t in tasks {
        t.await??;
    }
    let report = verify_ledger(w.pool()).await?;
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.entries, 2 + 32 * 2);
    w.drop().await
}
