//! One request's evidence bundle (`gate::service::bundle`) on a real
//! database: none for a missing, foreign or implausible request; the
//! reason there is none before a checkpoint covers its entries; and once
//! one does, a set of files that `spendgate-verify`'s own reader and
//! checker accept with the log's public key alone, each record file
//! holding what the database holds.

use std::collections::BTreeMap;
use std::time::Duration;

use gate::service::bundle::{KeptBundle, Unproved};
use gate::service::tlog::{self, LogKey};
use serde_json::Value;
use sha2::{Digest, Sha256};
use spendgate_verify::bundle_dir;

use crate::support::*;

const LOG_SECRET: &[u8] = b"the log key of the bundle tests, 32 bytes or more";

/// The request's entries' numbers, as the ledger holds them.
async fn seqs_of(w: &World, request: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT seq FROM ledger_entries WHERE tenant_id = 'acme' \
            AND (entry::jsonb ->> 'subject' = $1 OR entry::jsonb -> 'body' ->> 'request' = $1) \
          ORDER BY seq",
    )
    .bind(request)
    .fetch_all(w.pool())
    .await
}

fn json(files: &BTreeMap<String, Vec<u8>>, name: &str) -> Value {
    let bytes = files.get(name).unwrap_or_else(|| panic!("no {name}"));
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[tokio::test]
async fn a_kept_bundle_verifies_offline_with_the_log_key_alone() -> TestResult {
    on_world(async |w| {
        let key = LogKey::new(LOG_SECRET)?;
        let verifier = key.verifier("acme")?;
        let verifier_text = verifier.to_text();
        let (request, event, signature) = captured_order(w, "evt_bundle").await?;

        for (tenant, id) in [
            ("globex", request.as_str()),
            ("acme", "req_missing"),
            ("acme", "req\u{0}"),
        ] {
            assert_eq!(
                w.gate.kept_bundle(tenant, id, &verifier_text).await?,
                KeptBundle::Missing,
                "{tenant} {id:?}"
            );
        }
        let before = w.gate.kept_bundle("acme", &request, &verifier_text).await?;
        w.gate.integrate().await?;
        let seqs = seqs_of(w, &request).await?;
        let need = *seqs.last().ok_or("entries")?;
        assert_eq!(
            before,
            KeptBundle::Unproved(Unproved::NoCheckpoint { need }),
            "no checkpoint yet"
        );
        assert!(
            Unproved::NoCheckpoint { need }
                .to_string()
                .contains(&format!("covers entry {need} yet")),
        );

        w.gate
            .checkpointer(key.clone(), Duration::from_secs(3600))
            .tick()
            .await?;
        let KeptBundle::Files(files) = w.gate.kept_bundle("acme", &request, &verifier_text).await?
        else {
            panic!("a bundle once a checkpoint covers the entries");
        };
        let dir = tempfile::tempdir()?;
        for (path, bytes) in &files {
            let at = dir.path().join(path);
            std::fs::create_dir_all(at.parent().ok_or("a folder")?)?;
            std::fs::write(at, bytes)?;
        }
        let read = bundle_dir::read(dir.path())?;
        assert_eq!(read.entries.len(), seqs.len());
        assert!(read.orphan_proofs.is_empty());
        let checked = bundle_dir::verify(&read, &verifier, Some(&tlog::origin("acme")))?;
        // At least the checkpoint, each entry, the proposal's bytes, the
        // event's body and its signature header.
        assert!(checked > seqs.len() + 3, "{checked} items checked");

        let files: BTreeMap<String, Vec<u8>> = files.into_iter().collect();
        let event_stem = format!(
            "provider_events/{}",
            hex::encode(Sha256::digest("evt_bundle"))
        );
        for name in [
            "checkpoint",
            "log-key.txt",
            "README.md",
            "proposal.raw",
            &format!("{event_stem}.body"),
            &format!("{event_stem}.signature"),
        ] {
            assert!(files.contains_key(name), "{name} in {:?}", files.keys());
        }
        assert_eq!(
            files["log-key.txt"],
            format!("{verifier_text}\n").into_bytes()
        );
        assert_eq!(files["proposal.raw"], body("CLOUD-STARTER", 1));
        assert_eq!(files[&format!("{event_stem}.body")], event);
        assert_eq!(
            files[&format!("{event_stem}.signature")],
            signature.as_bytes()
        );

        let proposal = json(&files, "proposal.json");
        let sent: Value = serde_json::from_slice(&body("CLOUD-STARTER", 1))?;
        assert_eq!(proposal["proposal"], sent);
        assert_eq!(proposal["raw_body"], Value::from("proposal.raw"));
        assert_eq!(proposal["actor"], Value::from("buyer-agent"));
        assert_eq!(
            proposal["body_sha256"],
            Value::from(hex::encode(Sha256::digest(body("CLOUD-STARTER", 1))))
        );
        let first = format!("entries/{:06}.json", seqs[0]);
        assert_eq!(proposal["ledger_entry"], Value::from(first));

        assert_eq!(
            json(&files, "request.json")["id"],
            Value::from(request.clone())
        );
        assert_eq!(
            json(&files, "policy.json")["tenant_id"],
            Value::from("acme")
        );
        assert_eq!(
            json(&files, "delegation.json")["id"],
            Value::from("d-buyer")
        );
        assert_eq!(json(&files, "approvals.json"), Value::Array(Vec::new()));
        assert_eq!(
            json(&files, "authority.json")["request_id"],
            Value::from(request.clone())
        );
        for (name, n) in [
            ("provider_orders.json", 1),
            ("provider_payments.json", 1),
            ("provider_events.json", 1),
        ] {
            let rows = json(&files, name);
            assert_eq!(rows.as_array().map(Vec::len), Some(n), "{name}: {rows}");
        }

        let readme = String::from_utf8(files["README.md"].clone())?;
        let listed = seqs
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let size: i64 =
            sqlx::query_scalar("SELECT max(size) FROM log_checkpoints WHERE tenant_id = 'acme'")
                .fetch_one(w.pool())
                .await?;
        for part in [
            format!("request {request} of tenant acme"),
            format!("tree size {size}"),
            format!("Entries {listed} "),
            format!("--key '{verifier_text}'"),
        ] {
            assert!(readme.contains(&part), "README lacks {part:?}");
        }
        Ok(())
    })
    .await
}
