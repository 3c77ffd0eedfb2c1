//! The sequencer: an operation queues its ledger entries without touching
//! its tenant's head, and `integrate` chains the committed ones in. A crash
//! before integration loses nothing, concurrent operations and concurrent
//! sequencers make one chain with every entry once, and a row a database
//! login forged or copied into the queue is never chained in and is named.

use std::time::Duration;

use crate::support::*;
use gate::service::QueueRefusal;

type Fallible<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn count(w: &World, sql: &str) -> Fallible<i64> {
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(w.pool())
        .await?)
}

/// How many times each request's entries are in acme's chain, by request.
async fn entries_of(w: &World, request: &str) -> Fallible<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM ledger_entries \
          WHERE tenant_id = 'acme' AND entry::jsonb->>'subject' = $1",
    )
    .bind(request)
    .fetch_one(w.pool())
    .await?)
}

/// Every entry id in the ledger once, the queue empty, every chain intact.
async fn one_whole_chain(w: &World) -> Fallible<()> {
    let report = w.gate.verify_ledger().await?;
    assert!(report.intact(), "{report:#?}");
    assert_eq!(count(w, "SELECT count(*) FROM ledger_queue").await?, 0);
    let doubled = count(
        w,
        "SELECT count(*) FROM (SELECT entry_id FROM ledger_entries \
          WHERE entry_id IS NOT NULL GROUP BY tenant_id, entry_id HAVING count(*) > 1) d",
    )
    .await?;
    assert_eq!(doubled, 0);
    Ok(())
}

#[tokio::test]
async fn an_operation_queues_its_entries_and_leaves_the_head_where_it_was() -> TestResult {
    on_world(async |w| {
        w.gate.integrate().await?;
        let head = count(w, "SELECT seq FROM ledger_head WHERE tenant_id = 'acme'").await?;
        let id = request_id(&w.propose("USB-HUB", 1).await?);
        assert_eq!(
            count(w, "SELECT seq FROM ledger_head WHERE tenant_id = 'acme'").await?,
            head
        );
        assert_eq!(entries_of(w, &id).await?, 0);
        assert_eq!(count(w, "SELECT count(*) FROM ledger_queue").await?, 2);
        let done = w.gate.integrate().await?;
        assert_eq!((done.entries, done.refused.len()), (2, 0));
        assert_eq!(entries_of(w, &id).await?, 2);
        assert_eq!(
            count(w, "SELECT seq FROM ledger_head WHERE tenant_id = 'acme'").await?,
            head + 2
        );
        one_whole_chain(w).await?;
        Ok(())
    })
    .await
}

/// A sequencer dropped while it integrates (here: waiting on the head's
/// lock, its transaction open) commits nothing and loses nothing: the
/// entries wait in the queue, and the next sequencer chains them in once.
#[tokio::test]
async fn a_sequencer_dropped_before_it_commits_loses_nothing_and_the_next_integrates() -> TestResult
{
    on_world(async |w| {
        w.gate.integrate().await?;
        let id = request_id(&w.propose("USB-HUB", 1).await?);
        let mut holder = w.owner().begin().await?;
        sqlx::query("SELECT seq FROM ledger_head WHERE tenant_id = 'acme' FOR UPDATE")
            .execute(&mut *holder)
            .await?;
        let gate = w.gate.clone();
        let first = tokio::spawn(async move { gate.integrate().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!first.is_finished(), "the sequencer waits on the head");
        first.abort();
        assert!(first.await.is_err_and(|e| e.is_cancelled()));
        holder.commit().await?;
        assert_eq!(entries_of(w, &id).await?, 0);
        assert_eq!(count(w, "SELECT count(*) FROM ledger_queue").await?, 2);
        let next = w.gate.integrate().await?;
        assert_eq!(next.entries, 2);
        assert_eq!(entries_of(w, &id).await?, 2);
        one_whole_chain(w).await?;
        Ok(())
    })
    .await
}

/// Proposals of one tenant from many connections, with two sequencers
/// integrating all the while: each proposal's two entries land exactly
/// once, in one chain that verifies.
#[tokio::test]
async fn concurrent_operations_of_one_tenant_each_land_once_in_one_chain() -> TestResult {
    on_world_with_pool(12, async |w| {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut sequencers = Vec::new();
        for _ in 0..2 {
            let (gate, stop) = (w.gate.clone(), stop.clone());
            sequencers.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    gate.integrate().await?;
                }
                Ok::<_, gate::service::ServiceError>(())
            }));
        }
        let mut proposals = Vec::new();
        for _ in 0..24 {
            let gate = w.gate.clone();
            proposals.push(tokio::spawn(async move {
                gate.propose("acme", "buyer-agent", &body("USB-HUB", 1), None)
                    .await
            }));
        }
        let mut ids = Vec::new();
        for p in proposals {
            ids.push(request_id(&p.await??));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in sequencers {
            s.await??;
        }
        w.gate.integrate().await?;
        for id in &ids {
            assert_eq!(entries_of(w, id).await?, 2, "{id}");
        }
        one_whole_chain(w).await?;
        Ok(())
    })
    .await
}

/// Two sequencers started at once over the same queue: one chain, every
/// queued entry integrated by exactly one of them.
#[tokio::test]
async fn two_sequencers_at_once_make_one_chain() -> TestResult {
    on_world(async |w| {
        w.gate.integrate().await?;
        for _ in 0..10 {
            w.propose("USB-HUB", 1).await?;
        }
        w.gate
            .propose("globex", "globex-agent", &body("SNACK-BOX", 1), None)
            .await?;
        let queued = count(w, "SELECT count(*) FROM ledger_queue").await?;
        let (a, b) = tokio::join!(w.gate.integrate(), w.gate.integrate());
        let (a, b) = (a?, b?);
        assert_eq!((a.entries + b.entries) as i64, queued);
        one_whole_chain(w).await?;
        Ok(())
    })
    .await
}

/// What a stolen database login can put in the queue: a row with a MAC of
/// its own making, and a byte-for-byte copy of a row the gate queued and
/// the sequencer already integrated. Neither is chained in; each is named
/// by the sequencer and by `ledger verify`, and stays where it is.
#[tokio::test]
async fn a_forged_and_a_copied_queue_row_are_never_integrated_and_are_named() -> TestResult {
    on_world(async |w| {
        w.gate.integrate().await?;
        let id = request_id(&w.propose("USB-HUB", 1).await?);
        let copy = "INSERT INTO ledger_queue (tenant_id, entry_id, ord, kind, at, subject, body, row_mac) \
                    SELECT tenant_id, entry_id, ord, kind, at, subject, body, row_mac \
                      FROM kept_queue";
        exec(
            w.owner(),
            "CREATE TABLE kept_queue AS SELECT * FROM ledger_queue WHERE kind = 'decision'",
        )
        .await?;
        exec(w.owner(), "GRANT SELECT ON kept_queue TO PUBLIC").await?;
        // A copy of a row still queued is refused by its id.
        assert_sql_refused_by(w.pool(), copy, "pk_ledger_queue").await;
        w.gate.integrate().await?;
        let copied: String = sqlx::query_scalar("SELECT entry_id FROM kept_queue")
            .fetch_one(w.owner())
            .await?;
        exec(w.pool(), copy).await?;
        let forged = "0123456789abcdef0123456789abcdef";
        exec(
            w.pool(),
            &format!(
                "INSERT INTO ledger_queue (tenant_id, entry_id, ord, kind, at, subject, body, row_mac) \
                 VALUES ('acme', '{forged}', 1, 'decision', now(), '\"{id}\"', \
                         '{{\"decision\": \"allow\"}}', repeat('ab', 32))"
            ),
        )
        .await?;
        let before = count(w, "SELECT count(*) FROM ledger_entries").await?;
        let done = w.gate.integrate().await?;
        assert_eq!(done.entries, 0);
        let named = |refused: &[QueueRefusal]| {
            let mut named: Vec<(String, bool)> = refused
                .iter()
                .map(|r| (r.entry_id.clone(), r.problem.contains("copy")))
                .collect();
            named.sort();
            named
        };
        let mut expected = vec![(copied.clone(), true), (forged.to_owned(), false)];
        expected.sort();
        assert_eq!(named(&done.refused), expected);
        assert!(
            done.refused
                .iter()
                .any(|r| r.entry_id == forged && r.problem.contains("MAC")),
            "{:?}",
            done.refused
        );
        // What an operator reads of a refusal names the tenant, the entry
        // and the problem.
        let refusal = done
            .refused
            .iter()
            .find(|r| r.entry_id == forged)
            .ok_or("no refusal of the forged entry")?;
        assert_eq!(
            refusal.to_string(),
            format!(
                "tenant acme's queued ledger entry {forged} {}: it is not integrated",
                refusal.problem
            )
        );
        assert_eq!(count(w, "SELECT count(*) FROM ledger_entries").await?, before);
        assert_eq!(entries_of(w, &id).await?, 2);
        let report = w.gate.verify_ledger().await?;
        assert!(!report.intact());
        assert!(report.first_break().is_none(), "{report:#?}");
        assert_eq!(named(&report.queue), expected);
        // Verifying one tenant names that tenant's refused rows, and only its.
        let acme = w.gate.verify_ledger_with(Some("acme"), None).await?;
        assert_eq!(named(&acme.queue), expected);
        let globex = w.gate.verify_ledger_with(Some("globex"), None).await?;
        assert_eq!(named(&globex.queue), vec![], "{globex:#?}");
        // Neither can be taken out of the queue: only an integration deletes.
        assert_sql_refused_by(
            w.pool(),
            &format!("DELETE FROM ledger_queue WHERE entry_id = '{forged}'"),
            "ledger_queue_integrated_only",
        )
        .await;
        exec(w.owner(), "DROP TABLE kept_queue").await?;
        Ok(())
    })
    .await
}

/// Each guard of the queue, violated directly with SQL, names itself.
#[tokio::test]
async fn each_guard_of_the_queue_names_itself() -> TestResult {
    on_world(async |w| {
        w.propose("USB-HUB", 1).await?;
        // The runtime role may not update a queued row at all (the grant)...
        let update = "UPDATE ledger_queue SET body = '{}'";
        let refused = exec(w.pool(), update).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.to_string().contains("permission denied")),
            "{refused:?}"
        );
        // ... and nobody may (the trigger), nor delete a row not integrated,
        // nor truncate the queue.
        assert_sql_refused_by(w.owner(), update, "ledger_queue_integrated_only").await;
        assert_sql_refused_by(
            w.pool(),
            "DELETE FROM ledger_queue",
            "ledger_queue_integrated_only",
        )
        .await;
        assert_sql_refused_by(
            w.owner(),
            "TRUNCATE ledger_queue",
            "ledger_queue_integrated_only",
        )
        .await;
        let row = |tenant: &str, id: &str, mac: &str| {
            format!(
                "INSERT INTO ledger_queue (tenant_id, entry_id, ord, kind, at, subject, body, row_mac) \
                 VALUES ('{tenant}', '{id}', 1, 'probe', now(), '\"x\"', '{{}}', '{mac}')"
            )
        };
        let (id, mac) = ("00112233445566778899aabbccddeeff", "ab".repeat(32));
        assert_sql_refused_by(w.owner(), &row("nobody", id, &mac), "fk_ledger_queue_head").await;
        assert_sql_refused_by(w.pool(), &row("acme", "X1", &mac), "ck_ledger_queue_entry_id")
            .await;
        assert_sql_refused_by(w.pool(), &row("acme", id, "mac"), "ck_ledger_queue_row_mac").await;
        w.gate.integrate().await?;
        assert_sql_refused_by(
            w.pool(),
            "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash, entry_id) \
             SELECT tenant_id, seq + 1000, kind, at, entry, prev_hash, hash, entry_id \
               FROM ledger_entries WHERE entry_id IS NOT NULL LIMIT 1",
            "uq_ledger_entry_id",
        )
        .await;
        Ok(())
    })
    .await
}

/// The sequencer integrates every tenant in one transaction; when that
/// transaction fails, each tenant is integrated in one of its own, so a
/// fault of one tenant's rows (here acme's head moved back under its last
/// entry by the database's owner, so its next entry's number is taken)
/// holds back no other tenant: globex's entries are chained, acme's stay
/// queued, and acme is named.
#[tokio::test]
async fn one_tenants_fault_holds_back_no_other_tenant() -> TestResult {
    on_world(async |w| {
        w.gate.integrate().await?;
        w.propose("USB-HUB", 1).await?;
        w.gate
            .propose(
                "globex",
                "globex-agent",
                br#"{"sku":"SNACK-BOX","quantity":1,"purpose":"office"}"#,
                None,
            )
            .await?;
        let queued = |tenant: &'static str| {
            format!("SELECT count(*) FROM ledger_queue WHERE tenant_id = '{tenant}'")
        };
        assert!(count(w, &queued("globex")).await? > 0);
        let acme_queued = count(w, &queued("acme")).await?;
        assert!(acme_queued > 0);
        sqlx::query("UPDATE ledger_head SET seq = seq - 1 WHERE tenant_id = 'acme'")
            .execute(w.owner())
            .await?;
        let done = w.gate.integrate().await?;
        let failed: Vec<&str> = done.failed.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(failed, ["acme"], "{:?}", done.failed);
        assert_eq!(count(w, &queued("globex")).await?, 0);
        assert!(done.entries > 0);
        assert_eq!(count(w, &queued("acme")).await?, acme_queued);
        Ok(())
    })
    .await
}
