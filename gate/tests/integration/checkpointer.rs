//! The checkpoint signer (`gate::service::checkpointer`) on a real
//! database: a tick signs exactly the tenants whose ledger grew, with a
//! checkpoint covering every committed entry; a signer stopped between a
//! commit and its tick leaves nothing out once one starts again; a ledger
//! rewritten under a kept checkpoint, or an entry forged past it, gets no
//! new checkpoint and is named, while the other tenants are signed.

use std::time::{Duration, Instant};

use gate::service::checkpointer::{Checkpointer, Refusal};
use gate::service::tlog::{self, LogError, LogKey};
use spendgate_verify::checkpoint;
use spendgate_verify::merkle::hash_to_base64;

use crate::support::*;

const LOG_SECRET: &[u8] = b"the log key of the checkpointer tests, 32 bytes or more";
const HOUR: Duration = Duration::from_secs(3600);

fn signer(w: &World, interval: Duration) -> Result<Checkpointer, LogError> {
    Ok(w.gate.checkpointer(LogKey::new(LOG_SECRET)?, interval))
}

/// The tenant's committed entries, integrated (its head) or still queued:
/// the size its log has once the sequencer ran.
async fn head(w: &World, tenant: &str) -> Result<u64, sqlx::Error> {
    let seq: i64 = sqlx::query_scalar(
        "SELECT h.seq + (SELECT count(*) FROM ledger_queue q WHERE q.tenant_id = h.tenant_id) \
           FROM ledger_head h WHERE h.tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(w.pool())
    .await?;
    Ok(seq as u64)
}

/// The size of the tenant's largest kept checkpoint (0: none).
async fn covered(w: &World, tenant: &str) -> Result<u64, sqlx::Error> {
    let size: i64 = sqlx::query_scalar(
        "SELECT COALESCE(max(size), 0) FROM log_checkpoints WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(w.pool())
    .await?;
    Ok(size as u64)
}

async fn kept(w: &World, tenant: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM log_checkpoints WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(w.pool())
        .await
}

async fn propose_globex(w: &World) -> TestResult {
    w.gate
        .propose("globex", "globex-agent", &body("SNACK-BOX", 1), None)
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_tick_signs_exactly_the_grown_tenants_and_covers_every_entry() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?;
        let key = LogKey::new(LOG_SECRET)?;
        signer.tick().await?;
        w.propose("SNACK-BOX", 1).await?;
        w.propose("SNACK-BOX", 1).await?;
        assert!(covered(w, "acme").await? < head(w, "acme").await?);

        let tick = signer.tick().await?;
        assert!(tick.refused.is_empty(), "{:?}", tick.refused);
        let tenants: Vec<&str> = tick.signed.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tenants, ["acme"], "only the tenant that grew is signed");
        let (_, cp) = &tick.signed[0];
        assert_eq!(cp.size, head(w, "acme").await?);
        let opened = checkpoint::open(cp.note.as_bytes(), &key.verifier("acme")?, None)?;
        assert_eq!(opened.size, cp.size);
        let now = tlog::tree(w.pool(), "acme").await?;
        assert_eq!(opened.root_base64(), hash_to_base64(&now.root()));

        let idle = signer.tick().await?;
        assert!(
            idle.signed.is_empty() && idle.refused.is_empty(),
            "{idle:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_running_signer_covers_a_commit_within_its_interval() -> TestResult {
    on_world(async |w| {
        let interval = Duration::from_millis(100);
        let running = signer(w, interval)?.start().await;
        w.propose("SNACK-BOX", 1).await?;
        let committed = Instant::now();
        let want = head(w, "acme").await?;
        while covered(w, "acme").await? < want {
            assert!(
                committed.elapsed() < Duration::from_secs(10),
                "no checkpoint covered entry {want} within 10 s of a 100 ms interval"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        running.stop().await;
        // Stopped: a commit after it is not signed.
        w.propose("SNACK-BOX", 1).await?;
        tokio::time::sleep(interval * 3).await;
        assert_eq!(covered(w, "acme").await?, want);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_signer_stopped_between_commit_and_tick_leaves_nothing_out() -> TestResult {
    on_world(async |w| {
        // Its first tick is at its start; the next would be an hour later.
        let first = signer(w, HOUR)?.start().await;
        w.propose("SNACK-BOX", 1).await?;
        w.propose("CLOUD-STARTER", 1).await?;
        let want = head(w, "acme").await?;
        // Dropped as a killed process's task is: no tick after the commits.
        drop(first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(covered(w, "acme").await? < want, "nothing signed them yet");

        let second = signer(w, HOUR)?.start().await;
        assert_eq!(
            covered(w, "acme").await?,
            want,
            "the next signer's first tick"
        );
        second.stop().await;
        let consistent =
            tlog::check_consistency(w.pool(), &LogKey::new(LOG_SECRET)?, "acme").await?;
        assert!(consistent.is_ok(), "{consistent:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_ledger_rewritten_under_a_checkpoint_gets_no_new_one_and_is_named() -> TestResult {
    on_world(async |w| {
        // Every tick a full check, as every signer's first tick is.
        let signer = signer(w, HOUR)?.with_full_check_every(1);
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?;
        let before = kept(w, "acme").await?;
        rewrite_acme_proposals(w).await?;
        w.propose("SNACK-BOX", 1).await?;
        propose_globex(w).await?;

        let tick = signer.tick().await?;
        let signed: Vec<&str> = tick.signed.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(signed, ["globex"], "the other tenant is still signed");
        let [(tenant, refusal)] = &tick.refused[..] else {
            panic!("one refusal expected: {:?}", tick.refused);
        };
        assert_eq!(tenant, "acme");
        assert!(
            matches!(refusal, Refusal::Log(LogError::Rewritten { .. })),
            "{refusal:?}"
        );
        let said = refusal.to_string();
        assert!(
            said.contains("acme") && said.contains("no longer has the root"),
            "{said}"
        );
        assert_eq!(
            kept(w, "acme").await?,
            before,
            "no checkpoint papers over it"
        );
        // Tried again next tick, refused again.
        let again = signer.tick().await?;
        assert_eq!(again.refused.len(), 1, "{again:?}");
        assert_eq!(kept(w, "acme").await?, before);
        Ok(())
    })
    .await
}

/// Between full checks the signer reads only the entries past its last
/// checkpoint and signs on the leaves it verified before: a rewrite under
/// that checkpoint is never signed (the tree it signs keeps the history it
/// checked, not the rewritten one), and the next full check names it.
#[tokio::test]
async fn between_full_checks_a_rewrite_is_never_signed_and_the_next_full_check_names_it()
-> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?.with_full_check_every(3);
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?; // full
        rewrite_acme_proposals(w).await?;
        w.propose("SNACK-BOX", 1).await?;
        let tick = signer.tick().await?; // from what it verified
        let [(tenant, cp)] = &tick.signed[..] else {
            panic!("acme signed: {tick:?}");
        };
        assert_eq!(tenant, "acme");
        let rewritten = tlog::tree(w.pool(), "acme").await?;
        assert_eq!(cp.size, rewritten.len());
        assert_ne!(
            cp.root,
            hash_to_base64(&rewritten.root()),
            "it signed the history it checked, not the rewritten one"
        );
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?; // from what it verified
        w.propose("SNACK-BOX", 1).await?;
        let before = kept(w, "acme").await?;
        let full = signer.tick().await?;
        assert!(full.signed.is_empty(), "{full:?}");
        assert!(
            matches!(&full.refused[..], [(t, Refusal::Log(LogError::Rewritten { .. }))] if t == "acme"),
            "{full:?}"
        );
        assert_eq!(kept(w, "acme").await?, before);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_entry_forged_past_the_checkpoint_gets_no_checkpoint() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?;
        signer.tick().await?;
        let before = kept(w, "acme").await?;
        let signed_size = covered(w, "acme").await?;
        w.propose("SNACK-BOX", 1).await?;
        w.gate.integrate().await?;
        // The owner edits an entry no checkpoint covers yet: only the keyed
        // chain can tell.
        edit_ledger_as_owner(
            w,
            "UPDATE ledger_entries SET entry = replace(entry, 'team credits', 'team creditz') \
              WHERE tenant_id = 'acme' AND seq = (SELECT max(seq) FROM ledger_entries \
                WHERE tenant_id = 'acme' AND kind = 'proposal')",
        )
        .await?;
        let forged: i64 = sqlx::query_scalar(
            "SELECT max(seq) FROM ledger_entries WHERE tenant_id = 'acme' AND kind = 'proposal'",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        assert!(forged as u64 > signed_size);

        let tick = signer.tick().await?;
        let [(tenant, refusal)] = &tick.refused[..] else {
            panic!("one refusal expected: {:?}", tick.refused);
        };
        assert_eq!(tenant, "acme");
        assert!(
            matches!(refusal, Refusal::Broken { seq, .. } if *seq == forged),
            "{refusal:?}"
        );
        assert!(
            refusal.to_string().contains("forged or changed"),
            "{refusal}"
        );
        assert_eq!(kept(w, "acme").await?, before);
        Ok(())
    })
    .await
}

/// A read-only proof (the bundle a receipt links to) is never made against
/// a kept checkpoint the ledger no longer has the root of: a rewrite under
/// it is named, not served as a proof that cannot verify.
#[tokio::test]
async fn a_kept_proof_over_a_rewritten_ledger_is_refused_as_rewritten() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?;
        let proposed = w.propose("SNACK-BOX", 1).await?;
        let request = proposed.request_id.ok_or("no request")?;
        signer.tick().await?;
        let pool = w.pool();
        let kept = gate::service::bundle::prove_kept(pool, "acme", &request).await?;
        assert!(kept.is_ok(), "proved before the rewrite: {kept:?}");
        rewrite_acme_proposals(w).await?;
        let after = gate::service::bundle::prove_kept(pool, "acme", &request).await;
        assert!(
            matches!(after, Err(LogError::Rewritten { .. })),
            "{after:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_signer_reports_the_interval_it_ticks_at() -> TestResult {
    on_world(async |w| {
        let interval = Duration::from_millis(250);
        let signer = signer(w, interval)?;
        assert_eq!(signer.interval(), interval);
        let shown = format!("{signer:?}");
        assert!(
            shown.starts_with("Checkpointer") && shown.contains("interval: 250ms"),
            "{shown}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_checkpoint_the_database_refuses_for_one_tenant_leaves_the_others_signed() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?;
        // The owner makes the database refuse globex's checkpoints, so the
        // tick's one statement for both tenants fails.
        exec(
            w.owner(),
            "CREATE FUNCTION refuse_globex_checkpoints() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.tenant_id = 'globex' THEN \
               RAISE EXCEPTION 'globex may not keep a checkpoint'; END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_globex_checkpoints BEFORE INSERT ON log_checkpoints \
               FOR EACH ROW EXECUTE FUNCTION refuse_globex_checkpoints()",
        )
        .await?;
        w.propose("SNACK-BOX", 1).await?;
        propose_globex(w).await?;

        let tick = signer.tick().await?;
        let signed: Vec<&str> = tick.signed.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(signed, ["acme"], "acme is signed on its own");
        let refused: Vec<&str> = tick.refused.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(refused, ["globex"], "{:?}", tick.refused);
        assert_eq!(covered(w, "acme").await?, head(w, "acme").await?);
        assert_eq!(covered(w, "globex").await?, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn run_ticks_at_once_and_ends_when_its_stop_resolves() -> TestResult {
    on_world(async |w| {
        w.propose("SNACK-BOX", 1).await?;
        let want = head(w, "acme").await?;
        // Its next tick is an hour away: only the tick at once can cover it.
        let covered_now = async {
            while covered(w, "acme").await.unwrap_or(0) < want {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let ran =
            tokio::time::timeout(Duration::from_secs(30), signer(w, HOUR)?.run(covered_now)).await;
        assert!(ran.is_ok(), "run never covered entry {want}");
        assert_eq!(covered(w, "acme").await?, want);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn run_with_hands_over_the_tick_at_once_and_the_next_only_an_interval_later() -> TestResult {
    on_world(async |w| {
        w.propose("SNACK-BOX", 1).await?;
        let mut ticks = Vec::new();
        signer(w, HOUR)?
            .run_with(tokio::time::sleep(Duration::from_secs(2)), |tick| {
                let signed: Vec<String> = tick.signed.iter().map(|(t, _)| t.clone()).collect();
                ticks.push(signed);
            })
            .await;
        assert_eq!(
            ticks.len(),
            1,
            "one tick in two seconds of an hourly signer: {ticks:?}"
        );
        assert!(ticks[0].iter().any(|t| t == "acme"), "{ticks:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn stop_waits_for_the_tick_in_flight() -> TestResult {
    on_world(async |w| {
        let running = signer(w, Duration::from_millis(50))?.start().await;
        // The next tick waits on the ledger's heads, held from outside.
        let mut holder = w.owner().begin().await?;
        sqlx::query("LOCK TABLE ledger_head IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *holder)
            .await?;
        until_waiting(w.owner(), 1).await?;
        let stopping = tokio::spawn(running.stop());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !stopping.is_finished(),
            "stop returned with a tick in flight"
        );
        holder.commit().await?;
        tokio::time::timeout(Duration::from_secs(30), stopping).await??;
        Ok(())
    })
    .await
}

/// What the test's thread logs, kept for the test to read.
#[derive(Clone, Default)]
struct Logged(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut kept) = self.0.lock() {
            kept.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logged {
    /// How many logged lines contain `text`.
    fn lines_with(&self, text: &str) -> usize {
        let kept = self.0.lock().map(|k| k.clone()).unwrap_or_default();
        String::from_utf8_lossy(&kept)
            .lines()
            .filter(|l| l.contains(text))
            .count()
    }
}

#[tokio::test]
async fn a_refusal_or_an_unreachable_database_is_logged_once_while_it_stays_the_same() -> TestResult
{
    on_world(async |w| {
        let logged = Logged::default();
        let writer = logged.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _on_this_thread = tracing::subscriber::set_default(subscriber);
        let every_50_ms = || -> Result<Checkpointer, LogError> {
            Ok(signer(w, Duration::from_millis(50))?.with_full_check_every(1))
        };

        // acme's log rewritten under its checkpoint: refused tick after tick.
        w.propose("SNACK-BOX", 1).await?;
        every_50_ms()?.tick().await?;
        rewrite_acme_proposals(w).await?;
        w.propose("SNACK-BOX", 1).await?;
        let mut refused = 0;
        every_50_ms()?
            .run_with(tokio::time::sleep(Duration::from_millis(500)), |tick| {
                refused += tick.refused.len();
            })
            .await;
        assert!(refused >= 2, "acme refused at every tick: {refused}");
        assert_eq!(logged.lines_with("no checkpoint signed"), 1);

        // The gate's pool closed: no tick can read the database.
        let signer = every_50_ms()?;
        w.gate.close().await;
        signer
            .run(tokio::time::sleep(Duration::from_millis(500)))
            .await;
        assert_eq!(logged.lines_with("could not tick"), 1);
        Ok(())
    })
    .await
}

/// The signer's memory of what it signed serves only while the largest
/// kept checkpoint is that very one: a checkpoint of the same size with
/// another root (written by someone else) sends it back to a full check,
/// which names the log as rewritten and signs nothing.
#[tokio::test]
async fn a_checkpoint_replaced_under_the_signer_is_checked_in_full_and_refused() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?.with_full_check_every(100);
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?; // full: it remembers what it signed
        exec(
            w.owner(),
            "UPDATE log_checkpoints SET root = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' \
              WHERE tenant_id = 'acme' \
                AND size = (SELECT max(size) FROM log_checkpoints WHERE tenant_id = 'acme')",
        )
        .await?;
        w.propose("SNACK-BOX", 1).await?;
        let before = kept(w, "acme").await?;
        let tick = signer.tick().await?; // not a full check by the count
        assert!(tick.signed.iter().all(|(t, _)| t != "acme"), "{tick:?}");
        assert!(
            matches!(&tick.refused[..], [(t, Refusal::Log(LogError::Rewritten { .. }))] if t == "acme"),
            "{tick:?}"
        );
        assert_eq!(kept(w, "acme").await?, before);
        Ok(())
    })
    .await
}

/// Deletes acme's ledger entries numbered above `keep`, as the owner.
async fn cut_ledger_after(w: &World, keep: u64) -> Result<u64, sqlx::Error> {
    edit_ledger_as_owner(
        w,
        &format!("DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > {keep}"),
    )
    .await
}

#[tokio::test]
async fn a_ledger_cut_below_its_checkpoint_is_named_as_rewritten() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?.with_full_check_every(1);
        w.propose("SNACK-BOX", 1).await?;
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?;
        let size = covered(w, "acme").await?;
        w.propose("SNACK-BOX", 1).await?;
        w.gate.integrate().await?;
        assert!(cut_ledger_after(w, size - 2).await? > 0);

        let tick = signer.tick().await?;
        let [(tenant, refusal)] = &tick.refused[..] else {
            panic!("acme refused: {tick:?}");
        };
        assert_eq!(tenant, "acme");
        let said = refusal.to_string();
        assert!(
            matches!(refusal, Refusal::Log(LogError::Rewritten { .. }))
                && said.contains(&format!("a tree of {} leaves", size - 2)),
            "{said}"
        );
        assert_eq!(covered(w, "acme").await?, size, "nothing new is signed");
        Ok(())
    })
    .await
}

/// A ledger that still holds exactly its checkpoint's entries (those past
/// it gone) still has that checkpoint's root: the signer finds the same
/// checkpoint again and signs nothing larger. Naming it rewritten would be
/// false; naming the lost entries is `spendgate ledger verify`'s (the head
/// says more than the entries hold).
#[tokio::test]
async fn a_ledger_holding_exactly_its_checkpoint_keeps_that_checkpoint() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?.with_full_check_every(1);
        w.propose("SNACK-BOX", 1).await?;
        let first = signer.tick().await?;
        let size = covered(w, "acme").await?;
        w.propose("SNACK-BOX", 1).await?;
        w.gate.integrate().await?;
        assert!(cut_ledger_after(w, size).await? > 0);

        let tick = signer.tick().await?;
        assert!(tick.refused.is_empty(), "{tick:?}");
        let mine = |t: &gate::service::checkpointer::Tick| {
            t.signed
                .iter()
                .find(|(tenant, _)| tenant == "acme")
                .map(|(_, cp)| (cp.size, cp.root.clone()))
        };
        assert_eq!(
            mine(&tick),
            mine(&first),
            "the same checkpoint, found again"
        );
        assert_eq!(covered(w, "acme").await?, size);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_entry_missing_past_the_checkpoint_is_named_as_a_gap() -> TestResult {
    on_world(async |w| {
        let signer = signer(w, HOUR)?.with_full_check_every(1);
        w.propose("SNACK-BOX", 1).await?;
        signer.tick().await?;
        let size = covered(w, "acme").await?;
        w.propose("SNACK-BOX", 1).await?;
        w.propose("SNACK-BOX", 1).await?;
        w.gate.integrate().await?;
        // The first entry past the checkpoint, with entries after it.
        let missing = size + 1;
        edit_ledger_as_owner(
            w,
            &format!("DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq = {missing}"),
        )
        .await?;

        let tick = signer.tick().await?;
        assert!(
            matches!(
                &tick.refused[..],
                [(t, Refusal::Log(LogError::Gap { missing: m, .. }))] if t == "acme" && *m == missing as i64
            ),
            "{tick:?}"
        );
        assert_eq!(covered(w, "acme").await?, size);
        Ok(())
    })
    .await
}
