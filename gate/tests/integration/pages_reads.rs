//! What the read-only pages read (`gate::service::pages`), on a real
//! database: the console's pages (newest first, exactly fifty a page, and
//! whether a next one exists), its filters, the refusal counts, and one
//! request's receipt: every record it gathers, the bytes as received, and
//! each ledger entry's inclusion path against the newest kept checkpoint,
//! or the reason there is none.

use std::time::Duration;

use gate::service::checkpointer::Checkpointer;
use gate::service::pages::{ConsoleFilter, PAGE_SIZE};
use gate::service::tlog::LogKey;
use gate::{Decision, Reason};
use serde_json::Value;
use spendgate_verify::merkle::{Tree, hash_to_base64};

use crate::support::*;

fn signer(w: &World) -> Result<Checkpointer, Box<dyn std::error::Error + Send + Sync>> {
    let key = LogKey::new(b"the log key of the pages tests, 32 bytes or more")?;
    Ok(w.gate.checkpointer(key, Duration::from_secs(3600)))
}

/// acme's buyer-agent proposes SNACK-BOX x1 a second after the last.
async fn one_more(w: &World) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    w.clock.advance(chrono::Duration::seconds(1));
    Ok(request_id(&w.propose("SNACK-BOX", 1).await?))
}

fn ids(page: &gate::service::pages::ConsolePage) -> Vec<String> {
    page.rows.iter().map(|r| r.id.clone()).collect()
}

#[tokio::test]
async fn the_console_pages_fifty_newest_first_and_says_when_more_exist() -> TestResult {
    on_world(async |w| {
        let mut made = Vec::new();
        for _ in 0..PAGE_SIZE {
            made.push(one_more(w).await?);
        }
        let first = w
            .gate
            .console_page("acme", &ConsoleFilter::default())
            .await?;
        let newest_first: Vec<String> = made.iter().rev().cloned().collect();
        assert_eq!(ids(&first), newest_first, "exactly fifty, newest first");
        assert!(!first.more, "fifty requests make one page");

        made.push(one_more(w).await?);
        let first = w
            .gate
            .console_page("acme", &ConsoleFilter::default())
            .await?;
        assert!(first.more, "the fifty-first makes a second page");
        assert_eq!(
            ids(&first),
            made[1..].iter().rev().cloned().collect::<Vec<_>>()
        );
        let second = w
            .gate
            .console_page(
                "acme",
                &ConsoleFilter {
                    page: 1,
                    ..Default::default()
                },
            )
            .await?;
        assert_eq!(ids(&second), [made[0].clone()], "the oldest, on page two");
        assert!(!second.more);

        // Another tenant sees none of them.
        let globex = w
            .gate
            .console_page("globex", &ConsoleFilter::default())
            .await?;
        assert!(globex.rows.iter().all(|r| !made.contains(&r.id)));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_console_filters_by_state_agent_and_reason_and_counts_refusals() -> TestResult {
    on_world(async |w| {
        let step_up = w.propose("CLOUD-TEAM", 1).await?;
        assert_eq!(step_up.decision, Decision::StepUp(Reason::ApprovalRequired));
        let step_up = request_id(&step_up);
        let allowed = one_more(w).await?;
        let other = w
            .gate
            .propose("acme", "procurement-agent", &body("SNACK-BOX", 1), None)
            .await?;
        let other_reason = match other.decision {
            Decision::Deny(r) | Decision::StepUp(r) => Some(r.to_string()),
            Decision::Allow => None,
        };
        let other = request_id(&other);

        let listed = |filter: ConsoleFilter| async move {
            w.gate
                .console_page("acme", &filter)
                .await
                .map(|page| ids(&page))
        };
        assert_eq!(
            listed(ConsoleFilter {
                state: Some("PENDING_APPROVAL".into()),
                ..Default::default()
            })
            .await?,
            std::slice::from_ref(&step_up)
        );
        assert_eq!(
            listed(ConsoleFilter {
                agent: Some("procurement-agent".into()),
                ..Default::default()
            })
            .await?,
            [other]
        );
        assert_eq!(
            listed(ConsoleFilter {
                reason: Some("APPROVAL_REQUIRED".into()),
                ..Default::default()
            })
            .await?,
            [step_up]
        );
        let all = listed(ConsoleFilter::default()).await?;
        assert_eq!(all.len(), 3);
        assert!(all.contains(&allowed));

        let mut want = vec![("APPROVAL_REQUIRED".to_owned(), 1)];
        want.extend(other_reason.map(|r| (r, 1)));
        want.sort();
        assert_eq!(
            w.gate.refusal_counts("acme").await?,
            want,
            "by count, then reason"
        );
        assert!(w.gate.refusal_counts("globex").await?.is_empty());
        Ok(())
    })
    .await
}

/// The tenant's ledger entries' texts, in order: the log's leaves.
async fn ledger_leaves(w: &World) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(
        sqlx::query_scalar(
            "SELECT entry FROM ledger_entries WHERE tenant_id = 'acme' ORDER BY seq",
        )
        .fetch_all(w.ledger().await?)
        .await?,
    )
}

#[tokio::test]
async fn a_receipt_gathers_every_record_and_the_bytes_as_received() -> TestResult {
    on_world(async |w| {
        let (request, event, signature) = captured_order(w, "evt_receipt").await?;

        let r = w.gate.receipt("acme", &request).await?.ok_or("a receipt")?;
        assert_eq!(r.request["id"], Value::from(request.clone()));
        assert_eq!(r.request["state"], Value::from("CAPTURED"));
        let sent: Value = serde_json::from_slice(&body("CLOUD-STARTER", 1))?;
        assert_eq!(r.proposal["proposal"], sent, "the proposal entry's body");
        assert_eq!(r.proposal["request"], Value::from(request.clone()));
        assert_eq!(
            r.proposal_raw.as_deref(),
            Some(&body("CLOUD-STARTER", 1)[..])
        );
        assert_eq!(r.policy["tenant_id"], Value::from("acme"));
        assert_eq!(r.delegation["id"], Value::from("d-buyer"));
        assert!(r.approvals.is_empty(), "allowed without a step-up");
        assert_eq!(r.authority["request_id"], Value::from(request.clone()));
        assert_eq!(r.orders.len(), 1);
        assert_eq!(r.events.len(), 1);
        let [raw] = &r.raw_events[..] else {
            panic!("one raw event: {:?}", r.raw_events);
        };
        assert_eq!(raw.body, event);
        assert_eq!(raw.signature, signature.as_bytes());

        let seqs: Vec<i64> = r.entries.iter().map(|e| e.seq).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, sorted, "in the log's order");
        let kinds: Vec<&str> = r.entries.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds.first(), Some(&"proposal"), "{kinds:?}");
        assert!(kinds.len() >= 4, "{kinds:?}");
        let leaves = ledger_leaves(w).await?;
        for e in &r.entries {
            assert_eq!(e.text, leaves[e.seq as usize - 1], "entry {}", e.seq);
            assert!(e.path.is_none(), "no checkpoint is kept yet");
        }
        let why = r.unproved.as_deref().unwrap_or_default();
        assert!(why.contains("no kept checkpoint covers entry"), "{why}");
        assert!(r.checkpoint.is_none());

        // Signed: each entry carries its path to the checkpoint's root.
        signer(w)?.tick().await?;
        let r = w.gate.receipt("acme", &request).await?.ok_or("a receipt")?;
        let checkpoint = r.checkpoint.clone().ok_or("a kept checkpoint")?;
        assert_eq!(r.unproved, None);
        let mut tree = Tree::new();
        for leaf in ledger_leaves(w)
            .await?
            .iter()
            .take(checkpoint.size as usize)
        {
            tree.append(leaf.as_bytes());
        }
        assert_eq!(hash_to_base64(&tree.root()), checkpoint.root);
        for e in &r.entries {
            let want: Vec<String> = tree
                .inclusion_proof(e.seq as u64 - 1, checkpoint.size)?
                .iter()
                .map(hash_to_base64)
                .collect();
            assert_eq!(e.path.as_ref(), Some(&want), "entry {}", e.seq);
        }

        // Another tenant's, a missing and an implausible request: none.
        assert!(w.gate.receipt("globex", &request).await?.is_none());
        assert!(w.gate.receipt("acme", "req_missing").await?.is_none());
        assert!(w.gate.receipt("acme", "req\u{0}x").await?.is_none());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_receipt_over_a_ledger_shorter_than_its_checkpoint_or_with_a_gap_carries_no_proof()
-> TestResult {
    on_world(async |w| {
        let request = one_more(w).await?;
        one_more(w).await?;
        signer(w)?.tick().await?;
        let last: i64 =
            sqlx::query_scalar("SELECT max(seq) FROM ledger_entries WHERE tenant_id = 'acme'")
                .fetch_one(w.pool())
                .await?;
        // The last entry (the second proposal's) gone: the ledger is shorter
        // than the checkpoint.
        edit_ledger_as_owner(
            w,
            &format!("DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq = {last}"),
        )
        .await?;
        let r = w.gate.receipt("acme", &request).await?.ok_or("a receipt")?;
        let why = r.unproved.as_deref().unwrap_or_default();
        assert!(
            why.contains(&format!(
                "covers {last} entries but the ledger now holds {}",
                last - 1
            )),
            "{why}"
        );
        assert!(r.entries.iter().all(|e| e.path.is_none()));
        assert!(!r.entries.is_empty());

        // An entry below the request's gone too: a gap.
        edit_ledger_as_owner(
            w,
            "DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq = 1",
        )
        .await?;
        let r = w.gate.receipt("acme", &request).await?.ok_or("a receipt")?;
        assert!(r.checkpoint.is_none());
        assert!(r.entries.iter().all(|e| e.path.is_none()));
        assert!(r.unproved.is_some(), "{r:?}");
        Ok(())
    })
    .await
}
