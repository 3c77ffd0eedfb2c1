//! Findings whose fix is pending in a file this crate does not own. Each is a
//! committed input in `fuzz/pending/<target>/` and an ignored test that sends
//! it through the gate on Postgres; it fails today with a `ServiceError` (an
//! engine error) where the property demands a typed answer.
//!
//! When a fix lands: un-ignore the test, move its input to
//! `fuzz/findings/<target>/` (the replays then run it for good) and drop its
//! entry from `PENDING` in `tests/service_replay.rs`.

mod common;

use std::path::PathBuf;

use common::{TestResult, propose, standard_gate, webhook};

fn pending(target: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("pending")
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `{"sku":"CLOUD\u0000STARTER","quantity":2,"purpose":"team credits"}`:
/// `parse_proposal` accepts the sku, and recording the request fails with
/// `invalid byte sequence for encoding "UTF8": 0x00`.
#[tokio::test]
#[ignore = "finding: a NUL in the sku is a database error, fix pending in gate/src/proposal.rs or gate/src/service/propose.rs (issue 8, item 1)"]
async fn a_nul_in_the_sku_is_an_answer_not_a_database_error() -> TestResult {
    let Some((db, gate)) = standard_gate().await? else {
        return Ok(());
    };
    let error = propose(&gate, &pending("proposal", "nul-escaped-sku")).await;
    drop(gate);
    db.drop().await?;
    assert_eq!(error, None, "an engine error instead of an answer");
    Ok(())
}

/// A correctly signed capture whose `id` is `"evt\u0000nul"`: looking up the
/// event id fails with `invalid byte sequence for encoding "UTF8": 0x00`.
#[tokio::test]
#[ignore = "finding: a NUL in a signed event id is a database error, fix pending in gate/src/service/webhook.rs (issue 8, item 1)"]
async fn a_nul_in_a_signed_event_id_is_an_answer_not_a_database_error() -> TestResult {
    let Some((db, gate)) = standard_gate().await? else {
        return Ok(());
    };
    let error = webhook(&gate, &pending("webhook", "signed-nul-event-id")).await;
    drop(gate);
    db.drop().await?;
    assert_eq!(error, None, "an engine error instead of an answer");
    Ok(())
}
