//! The tenant log's proofs and checks (`gate::service::tlog`), on a real
//! database, with exact figures: the entries naming a request are exactly
//! those whose subject or `body.request` is it; an inclusion proof carries
//! the entry of the number asked for; a consistency proof is made against a
//! kept checkpoint of the tree's own size; the evidence check counts every
//! item it verified and the consistency check every checkpoint and the
//! tree; and a log cut below a kept checkpoint is `Rewritten` (or named by
//! the check), never a proof or an error of another kind.

use std::time::Duration;

use gate::service::tlog::{self, LogError, LogKey};

use crate::support::*;

const LOG_SECRET: &[u8] = b"the log key of the tlog proof tests, 32 bytes or more";

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn key() -> Res<LogKey> {
    Ok(LogKey::new(LOG_SECRET)?)
}

/// Signs a checkpoint of every tenant whose log grew (one signer tick).
async fn sign(w: &World) -> TestResult {
    w.gate
        .checkpointer(key()?, Duration::from_secs(3600))
        .tick()
        .await?;
    Ok(())
}

/// Two SNACK-BOX proposals, the first checked out: their request ids.
async fn two_requests(w: &World) -> Res<(String, String)> {
    let first = request_id(&w.propose("SNACK-BOX", 1).await?);
    let c = w.gate.checkout("acme", &first, "finance-lead").await?;
    assert!(c.is_ok(), "{c:?}");
    let second = request_id(&w.propose("SNACK-BOX", 1).await?);
    w.gate.integrate().await?;
    Ok((first, second))
}

/// acme's entries, by number, as stored.
async fn entries(w: &World) -> Res<Vec<(i64, String)>> {
    Ok(sqlx::query_as(
        "SELECT seq, entry FROM ledger_entries WHERE tenant_id = 'acme' ORDER BY seq",
    )
    .fetch_all(w.ledger().await?)
    .await?)
}

/// Cuts acme's log after entry `keep`, as the owner, and moves its head there.
async fn cut_after(w: &World, keep: i64) -> TestResult {
    edit_ledger_as_owner(
        w,
        &format!(
            "DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > {keep}; \
             UPDATE ledger_head SET seq = {keep}, hash = (SELECT hash FROM ledger_entries \
                 WHERE tenant_id = 'acme' AND seq = {keep}) WHERE tenant_id = 'acme'"
        ),
    )
    .await?;
    Ok(())
}

#[test]
fn the_entries_naming_a_request_are_those_whose_subject_or_body_request_is_it() {
    let leaves: Vec<(i64, String)> = vec![
        (1, r#"{"subject":"r1","body":{}}"#.into()),
        (2, r#"{"subject":"a1","body":{"request":"r1"}}"#.into()),
        (3, r#"{"subject":"r2","body":{"request":"r2"}}"#.into()),
        (4, "not json at all".into()),
        (5, r#"{"subject":"r10","body":{"request":"r11"}}"#.into()),
    ];
    assert_eq!(tlog::seqs_naming(&leaves, "r1"), vec![1, 2]);
    assert_eq!(tlog::seqs_naming(&leaves, "r2"), vec![3]);
    assert_eq!(tlog::seqs_naming(&leaves, "r11"), vec![5]);
    assert_eq!(tlog::seqs_naming(&leaves, "r9"), Vec::<i64>::new());
}

#[tokio::test]
async fn a_requests_entries_are_exactly_those_that_name_it() -> TestResult {
    on_world(async |w| {
        let (first, second) = two_requests(w).await?;
        for request in [&first, &second] {
            let want: Vec<i64> = sqlx::query_scalar(
                "SELECT seq FROM ledger_entries WHERE tenant_id = 'acme' \
                   AND (entry::jsonb ->> 'subject' = $1 \
                        OR entry::jsonb -> 'body' ->> 'request' = $1) ORDER BY seq",
            )
            .bind(request)
            .fetch_all(w.ledger().await?)
            .await?;
            assert!(want.len() >= 2 && want[0] > 1, "{request}: {want:?}");
            let got = tlog::request_entry_seqs(w.pool(), "acme", request).await?;
            assert_eq!(got, want, "{request}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_inclusion_proof_carries_the_entry_of_the_number_asked_for() -> TestResult {
    on_world(async |w| {
        two_requests(w).await?;
        sign(w).await?;
        let all = entries(w).await?;
        let last = all.last().ok_or("no entries")?.0;
        let seqs = [1, 2, last];
        let (checkpoint, proofs) =
            tlog::prove_inclusion(w.pool(), &key()?, "acme", &seqs, w.gate.now()).await?;
        assert_eq!(checkpoint.size, all.len() as u64, "the kept checkpoint");
        assert_eq!(proofs.len(), 3);
        for (proof, seq) in proofs.iter().zip(seqs) {
            assert_eq!(proof.seq, seq);
            assert_eq!(proof.entry, all[(seq - 1) as usize].1, "entry {seq}");
            assert_eq!(proof.proof.index, (seq - 1) as u64, "entry {seq}");
        }
        // The log grows past the kept checkpoint: an entry it covers is
        // still proved against it.
        w.propose("SNACK-BOX", 1).await?;
        w.gate.integrate().await?;
        let grown = entries(w).await?.len() as u64;
        assert!(grown > checkpoint.size);
        let (older, proofs) =
            tlog::prove_inclusion(w.pool(), &key()?, "acme", &[1], w.gate.now()).await?;
        assert_eq!((older.size, proofs.len()), (checkpoint.size, 1));
        assert_eq!(proofs[0].entry, all[0].1);
        let past =
            tlog::prove_inclusion(w.pool(), &key()?, "acme", &[grown as i64 + 1], w.gate.now())
                .await;
        assert!(
            matches!(past, Err(LogError::NoSuchEntry { seq, .. }) if seq == grown as i64 + 1),
            "{past:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_consistency_proof_is_made_against_the_kept_checkpoint_of_the_trees_size() -> TestResult {
    on_world(async |w| {
        two_requests(w).await?;
        sign(w).await?;
        let size = entries(w).await?.len() as u64;
        let (checkpoint, proof) = tlog::prove_consistency(w.pool(), "acme", 1, None).await?;
        assert_eq!((checkpoint.size, proof.old_size), (size, 1));
        assert!(!proof.hashes.is_empty());
        let (named, _) = tlog::prove_consistency(w.pool(), "acme", 1, Some(size)).await?;
        assert_eq!(named.size, size);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_log_cut_below_its_kept_checkpoint_is_rewritten_for_every_proof() -> TestResult {
    on_world(async |w| {
        two_requests(w).await?;
        sign(w).await?;
        let size = entries(w).await?.len() as i64;
        cut_after(w, size - 2).await?;
        let consistency = tlog::prove_consistency(w.pool(), "acme", 1, None).await;
        assert!(
            matches!(&consistency, Err(LogError::Rewritten { size: s, .. }) if *s == size as u64),
            "{consistency:?}"
        );
        let inclusion = tlog::prove_inclusion(w.pool(), &key()?, "acme", &[1], w.gate.now()).await;
        assert!(
            matches!(&inclusion, Err(LogError::Rewritten { size: s, .. }) if *s == size as u64),
            "{inclusion:?}"
        );
        let checked = tlog::check_consistency(w.pool(), &key()?, "acme").await?;
        let named = checked.err().unwrap_or_default();
        assert!(
            named.contains(&format!(
                "has size {size}, after 0, of a tree of {}",
                size - 2
            )),
            "{named}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_evidence_check_counts_every_item_it_verified() -> TestResult {
    on_world(async |w| {
        let (first, second) = two_requests(w).await?;
        let mut want = 0;
        for request in [&first, &second] {
            // The checkpoint, then each entry naming the request.
            want += 1 + tlog::request_entry_seqs(w.pool(), "acme", request)
                .await?
                .len();
        }
        assert!(want >= 6, "{want}");
        let checked = tlog::check_evidence(w.pool(), &key()?, "acme").await?;
        assert_eq!(checked, Ok(want));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_consistency_check_counts_every_kept_checkpoint_and_the_tree() -> TestResult {
    on_world(async |w| {
        w.propose("SNACK-BOX", 1).await?;
        sign(w).await?;
        w.propose("SNACK-BOX", 1).await?;
        sign(w).await?;
        let kept: i64 =
            sqlx::query_scalar("SELECT count(*) FROM log_checkpoints WHERE tenant_id = 'acme'")
                .fetch_one(w.ledger().await?)
                .await?;
        assert!(kept >= 2, "{kept}");
        let checked = tlog::check_consistency(w.pool(), &key()?, "acme").await?;
        assert_eq!(checked, Ok(kept as usize + 1));
        Ok(())
    })
    .await
}
