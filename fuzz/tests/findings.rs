//! Every finding, by name: a committed input and a test that sends it through
//! the gate on Postgres, where the property demands a typed answer and the
//! finding was a `ServiceError` (an engine error).
//!
//! A fixed finding's input is in `fuzz/findings/<target>/` (the replays also
//! run it). A finding whose fix is pending in a file this crate does not own
//! has its input in `fuzz/pending/<target>/` and an ignored test naming that
//! file; when the fix lands, un-ignore the test, move the input to
//! `findings/` and drop its entry from `PENDING` in `tests/service_replay.rs`.

mod common;

use std::path::PathBuf;

use common::{TestResult, propose, standard_gate, webhook};
use gate::{Decision, Reason};

fn input(kind: &str, target: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `{"sku":"CLOUD\u0000STARTER","quantity":2,"purpose":"team credits"}`:
/// found at f89e743: `parse_proposal` accepted the sku, and recording the
/// request failed with `invalid byte sequence for encoding "UTF8": 0x00`.
/// Refused by the identifier rules.
#[tokio::test]
async fn a_nul_in_the_sku_is_an_answer_not_a_database_error() -> TestResult {
    let Some((db, gate)) = standard_gate().await? else {
        return Ok(());
    };
    let data = input("findings", "proposal", "nul-escaped-sku");
    let error = propose(&gate, &data).await;
    let answer = gate.propose("acme", "buyer-agent", &data, None).await;
    drop(gate);
    db.drop().await?;
    assert_eq!(error, None, "an engine error instead of an answer");
    let answer = answer.map_err(|e| e.to_string())?;
    assert_eq!(
        answer.decision,
        Decision::Deny(Reason::SkuUnknown),
        "a sku outside the identifier grammar is an unknown sku"
    );
    assert!(answer.request_id.is_some(), "the refusal is recorded");
    Ok(())
}

/// A correctly signed capture whose `id` is `"evt\u0000nul"`: at f89e743
/// looking up the event id failed with `invalid byte sequence for encoding
/// "UTF8": 0x00`; event ids are now deduplicated by their digest.
#[tokio::test]
async fn a_nul_in_a_signed_event_id_is_an_answer_not_a_database_error() -> TestResult {
    let Some((db, gate)) = standard_gate().await? else {
        return Ok(());
    };
    let error = webhook(&gate, &input("findings", "webhook", "signed-nul-event-id")).await;
    drop(gate);
    db.drop().await?;
    assert_eq!(error, None, "an engine error instead of an answer");
    Ok(())
}
