//! The ledger: one keyed hash chain per tenant. Every proposal, decision,
//! approval, authority, order and provider event is appended to its tenant's
//! chain; `verify` names the first broken entry after the database's OWNER
//! does what an attacker did: forges entries with correct plain SHA-256
//! hashes, edits entries behind the disabled append-only trigger, re-hashes
//! the rest, cuts the tail and moves the head.
//!
//! The tampering statements need the owner's powers (ALTER TABLE ... DISABLE
//! TRIGGER or DROP CONSTRAINT, UPDATE of entries and heads), and nothing
//! more: they run on the owner's pool (`w.owner()`), never on the gate's,
//! which connects as the application role.

use crate::support::*;
use gate::Decision;
use gate::Reason;
use gate::provider::InProcessProvider;
use gate::service::ledger::{GENESIS_HASH, chain_hash};
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{Anchor, Gate, LedgerKey, LedgerReport, sign_webhook, verify_ledger};
use sha2::{Digest, Sha256};
use sqlx::Executor;

type Fallible<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The key the standard world's gate hashes with (derived from its secret).
fn key() -> LedgerKey {
    LedgerKey::derived_from_secret(SECRET)
}

/// What an attacker without the key computes: `SHA-256(prev || entry)`.
fn plain(prev: &str, entry: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(prev.as_bytes());
    hash.update(entry.as_bytes());
    hex::encode(hash.finalize())
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct Row {
    seq: i64,
    kind: String,
    entry: String,
    prev_hash: String,
    hash: String,
}

async fn chain(w: &World, tenant: &str) -> Fallible<Vec<Row>> {
    Ok(sqlx::query_as(
        "SELECT seq, kind, entry, prev_hash, hash FROM ledger_entries \
         WHERE tenant_id = $1 ORDER BY seq",
    )
    .bind(tenant)
    .fetch_all(w.ledger().await?)
    .await?)
}

async fn ledger_rows(w: &World) -> Fallible<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(w.ledger().await?)
        .await?)
}

/// A step-up purchase approved, checked out, paid and captured in acme,
/// plus a forged provider event (which names no tenant, so writes nothing).
async fn history(w: &World) -> Fallible<String> {
    let p = w.propose("CLOUD-TEAM", 1).await?;
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
    let before = ledger_rows(w).await?;
    let forged = w
        .gate
        .webhook(&raw, Some(&sign_webhook(b"guess", &raw)), Some("evt_1"))
        .await?;
    assert!(matches!(forged.decision, Decision::Deny(_)));
    assert_eq!(
        ledger_rows(w).await?,
        before,
        "a tenant-less refusal writes nothing"
    );
    Ok(request)
}

/// Runs `sqls` as the database owner with the append-only trigger disabled.
async fn tamper(w: &World, sqls: &[String]) -> TestResult {
    w.gate.integrate().await?;
    let mut conn = w.owner().acquire().await?;
    conn.execute("ALTER TABLE ledger_entries DISABLE TRIGGER ledger_append_only")
        .await?;
    for sql in sqls {
        conn.execute(sqlx::AssertSqlSafe(sql.as_str())).await?;
    }
    conn.execute("ALTER TABLE ledger_entries ENABLE TRIGGER ledger_append_only")
        .await?;
    Ok(())
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// (tenant, seq, problem) of the report's first break.
fn first_break(report: &LedgerReport) -> Option<(String, i64, String)> {
    report
        .first_break()
        .map(|b| (b.tenant.clone(), b.seq, b.problem.clone()))
}

fn assert_break(report: &LedgerReport, tenant: &str, seq: i64, says: &str) {
    let found = first_break(report);
    assert!(
        found
            .as_ref()
            .is_some_and(|(t, s, p)| t == tenant && *s == seq && p.contains(says)),
        "expected {tenant} entry {seq} to be named ({says}), got {found:?}\n{report:#?}"
    );
}

const ACME_KINDS: [&str; 9] = [
    "seed",
    "proposal",
    "decision",
    "approval",
    "decision",
    "authority.issued",
    "authority.consumed",
    "order.created",
    "provider_event",
];

#[tokio::test]
async fn every_step_is_appended_to_its_tenants_chain_and_each_entry_is_keyed() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let acme = chain(w, "acme").await?;
        let kinds: Vec<&str> = acme.iter().map(|r| r.kind.as_str()).collect();
        assert_eq!(kinds, ACME_KINDS);
        let globex = chain(w, "globex").await?;
        assert_eq!(globex.len(), 1, "globex's chain holds only its seed");
        assert_eq!(ledger_rows(w).await?, 10, "nothing outside the two chains");
        for rows in [&acme, &globex] {
            let mut prev = GENESIS_HASH.to_owned();
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(row.seq, i as i64 + 1);
                assert_eq!(row.prev_hash, prev);
                assert_eq!(row.hash, chain_hash(&key(), &prev, &row.entry));
                assert_ne!(row.hash, plain(&prev, &row.entry), "the hash is keyed");
                prev = row.hash.clone();
            }
        }
        let report = w.gate.verify_ledger().await?;
        assert!(report.intact(), "{report:#?}");
        assert_eq!(report.entries, 10);
        let heads: Vec<(String, i64, String)> = report
            .anchor()
            .heads
            .into_iter()
            .map(|h| (h.tenant, h.seq, h.hash))
            .collect();
        assert_eq!(
            heads,
            vec![
                ("acme".to_owned(), 9, acme[8].hash.clone()),
                ("globex".to_owned(), 1, globex[0].hash.clone()),
            ]
        );
        // One tenant's chain alone; a tenant that does not exist has no chain to break.
        let one = verify_ledger(w.pool(), &key(), Some("globex"), None).await?;
        assert_eq!((one.chains.len(), one.entries), (1, 1));
        let none = verify_ledger(w.pool(), &key(), Some("nobody"), None).await?;
        assert!(none.intact(), "{none:#?}");
        assert_eq!((none.chains.len(), none.entries), (1, 0));
        // The full decision is in the ledger.
        assert!(
            acme[2].entry.contains("\"decision\":\"step_up\"")
                && acme[2].entry.contains("\"amount_paise\":180000")
                && acme[2].entry.contains("\"tenant\":\"acme\""),
            "{}",
            acme[2].entry
        );
        Ok(())
    })
    .await
}

/// Issue 9, seen 4: a forged entry with a correct (plain SHA-256) hash,
/// linked to the last entry, and the head moved to it.
#[tokio::test]
async fn a_forged_entry_with_a_correct_plain_hash_and_the_head_moved_is_named() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let acme = chain(w, "acme").await?;
        let last = &acme[8];
        let forged = last
            .entry
            .replace("\"seq\":9", "\"seq\":10")
            .replace("evt_1", "evt_forged");
        let hash = plain(&last.hash, &forged);
        // No trigger stands in the way: INSERT into the ledger and moving the head are allowed.
        let owner = w.owner();
        owner
            .execute(sqlx::AssertSqlSafe(format!(
                "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
                 SELECT 'acme', 10, kind, at, {}, hash, '{hash}' FROM ledger_entries \
                 WHERE tenant_id = 'acme' AND seq = 9",
                quoted(&forged)
            )))
            .await?;
        owner
            .execute(sqlx::AssertSqlSafe(format!(
                "UPDATE ledger_head SET seq = 10, hash = '{hash}' WHERE tenant_id = 'acme'"
            )))
            .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 10, "not the keyed hash");
        assert_eq!(report.chain("acme").map(|c| c.entries), Some(9));
        assert!(report.chain("globex").is_some_and(|c| c.intact()));
        Ok(())
    })
    .await
}

/// Issue 9, seen 4: with the append-only trigger disabled, two entries edited
/// from 180000 to 1, every later hash recomputed with plain SHA-256, the tail
/// deleted and the head moved to the new end. `verify` names the first edit;
/// with the anchor taken before, it also names the cut.
#[tokio::test]
async fn two_edits_rehashed_with_plain_sha256_and_a_cut_tail_are_named() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let anchor = w.gate.verify_ledger().await?.anchor();
        let acme = chain(w, "acme").await?;
        let mut sqls = Vec::new();
        let mut prev = acme[1].hash.clone();
        // Entries 3 (the decision) and 6 (the authority) are edited; 3..=7 re-hashed; 8 and 9 cut.
        for row in &acme[2..7] {
            let entry = if row.seq == 3 || row.seq == 6 {
                assert!(row.entry.contains("180000"), "{}", row.entry);
                row.entry.replace("180000", "1")
            } else {
                row.entry.clone()
            };
            let hash = plain(&prev, &entry);
            sqls.push(format!(
                "UPDATE ledger_entries SET entry = {}, prev_hash = '{prev}', hash = '{hash}' \
             WHERE tenant_id = 'acme' AND seq = {}",
                quoted(&entry),
                row.seq
            ));
            prev = hash;
        }
        sqls.push("DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > 7".to_owned());
        sqls.push(format!(
            "UPDATE ledger_head SET seq = 7, hash = '{prev}' WHERE tenant_id = 'acme'"
        ));
        tamper(w, &sqls).await?;

        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 3, "not the keyed hash");
        assert_eq!(report.chain("acme").map(|c| c.entries), Some(2));

        let anchored = w.gate.verify_ledger_with(None, Some(&anchor)).await?;
        let acme_chain = anchored.chain("acme").ok_or("no acme chain")?;
        assert_eq!(
            acme_chain.first_break.as_ref().map(|b| b.seq),
            Some(3),
            "the first edit is still named first"
        );
        let cut = acme_chain
            .anchor_break
            .as_ref()
            .ok_or("the cut is not named")?;
        assert_eq!(cut.seq, 8, "{cut:?}");
        assert!(
            cut.problem.contains("the tail was cut")
                && cut.problem.contains("entry 9")
                && cut.problem.contains("entry 7"),
            "{cut:?}"
        );
        let breaks: Vec<(&str, i64)> = anchored
            .breaks()
            .map(|b| (b.tenant.as_str(), b.seq))
            .collect();
        assert_eq!(breaks, vec![("acme", 3), ("acme", 8)]);
        Ok(())
    })
    .await
}

/// Cutting the tail and moving the head back needs no key: the chain that is
/// left verifies. Only the anchor, kept outside the database, names the cut.
#[tokio::test]
async fn a_cut_tail_with_the_head_moved_back_is_named_only_by_the_anchor() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let anchor = w.gate.verify_ledger().await?.anchor();
        let acme = chain(w, "acme").await?;
        tamper(
            w,
            &[
                "DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > 6".to_owned(),
                format!(
                    "UPDATE ledger_head SET seq = 6, hash = '{}' WHERE tenant_id = 'acme'",
                    acme[5].hash
                ),
            ],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert!(report.intact(), "without an anchor the cut cannot be seen");
        let anchored = w.gate.verify_ledger_with(None, Some(&anchor)).await?;
        assert!(!anchored.intact());
        assert_break(&anchored, "acme", 7, "the tail was cut");
        assert!(anchored.chain("globex").is_some_and(|c| c.intact()));
        // Scoped to the tenant that was not touched, the same anchor finds nothing.
        let globex = w
            .gate
            .verify_ledger_with(Some("globex"), Some(&anchor))
            .await?;
        assert!(globex.intact(), "{globex:#?}");
        Ok(())
    })
    .await
}

/// The gate itself refills a cut tail with entries that verify under the
/// key: the chain is intact, but the anchored entry is not the anchored one.
#[tokio::test]
async fn a_cut_tail_refilled_by_the_gate_is_named_by_the_anchor() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let anchor = w.gate.verify_ledger().await?.anchor();
        let acme = chain(w, "acme").await?;
        tamper(
            w,
            &[
                "DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq > 7".to_owned(),
                format!(
                    "UPDATE ledger_head SET seq = 7, hash = '{}' WHERE tenant_id = 'acme'",
                    acme[6].hash
                ),
            ],
        )
        .await?;
        for _ in 0..3 {
            w.propose("USB-HUB", 1).await?;
        }
        assert!(w.gate.verify_ledger().await?.intact());
        let anchored = w.gate.verify_ledger_with(None, Some(&anchor)).await?;
        assert_break(&anchored, "acme", 9, "not the one the anchor records");
        Ok(())
    })
    .await
}

/// The instant is covered. Only the `at` column changes.
#[tokio::test]
async fn an_entry_whose_instant_alone_was_changed_is_named() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        tamper(
            w,
            &["UPDATE ledger_entries SET at = at - interval '1 second' \
           WHERE tenant_id = 'acme' AND seq = 5"
                .to_owned()],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 5, "columns (seq, kind, tenant, at)");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_entry_changed_behind_the_disabled_trigger_is_named() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        tamper(
            w,
            &[
                "UPDATE ledger_entries SET entry = replace(entry, '180000', '1') \
           WHERE tenant_id = 'acme' AND seq = 6"
                    .to_owned(),
            ],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 6, "not the keyed hash");
        assert_eq!(
            report.entries,
            5 + 1,
            "acme's first five and globex's seed verified"
        );
        Ok(())
    })
    .await
}

/// Someone holding the key re-hashes an edited entry: the entry verifies,
/// and the next one, which still links to the old hash, is named.
#[tokio::test]
async fn an_edit_rehashed_with_the_key_is_named_at_the_next_entry() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let acme = chain(w, "acme").await?;
        let forged = acme[5].entry.replace("180000", "1");
        let rehashed = chain_hash(&key(), &acme[5].prev_hash, &forged);
        tamper(
            w,
            &[format!(
                "UPDATE ledger_entries SET entry = {}, hash = '{rehashed}' \
             WHERE tenant_id = 'acme' AND seq = 6",
                quoted(&forged)
            )],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 7, "prev_hash");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_deleted_entry_is_named_as_missing() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        tamper(
            w,
            &["DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq = 4".to_owned()],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(
            &report,
            "acme",
            4,
            "entry 4 is missing (the next entry is 5)",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_entry_whose_kind_column_was_changed_is_named() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        tamper(
            w,
            &[
                "UPDATE ledger_entries SET kind = 'nothing' WHERE tenant_id = 'acme' AND seq = 8"
                    .to_owned(),
            ],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 8, "columns");
        Ok(())
    })
    .await
}

/// An entry moved into another tenant's chain is named in both chains.
#[tokio::test]
async fn an_entry_moved_to_another_chain_is_named_in_both() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        tamper(
            w,
            &["UPDATE ledger_entries SET tenant_id = 'globex', seq = 2 \
           WHERE tenant_id = 'acme' AND seq = 9"
                .to_owned()],
        )
        .await?;
        let report = w.gate.verify_ledger().await?;
        let breaks: Vec<(&str, i64)> = report
            .breaks()
            .map(|b| (b.tenant.as_str(), b.seq))
            .collect();
        // acme's head still says 9; globex's entry 2 is not globex's (prev_hash, hash, tenant).
        assert_eq!(breaks, vec![("acme", 9), ("globex", 2)], "{report:#?}");
        Ok(())
    })
    .await
}

// ---- the head row at its edges -------------------------------------------

#[tokio::test]
async fn verify_names_a_missing_head_row_and_the_gate_will_not_append() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        // The head is referenced by every entry (fk_ledger_entry_head): only the
        // owner, dropping that constraint first, can take it away.
        w.owner()
            .execute(
                "ALTER TABLE ledger_entries DROP CONSTRAINT fk_ledger_entry_head; \
             DELETE FROM ledger_head WHERE tenant_id = 'acme'",
            )
            .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(&report, "acme", 10, "the chain's head row is missing");
        let before = ledger_rows(w).await?;
        let err = w.propose("USB-HUB", 1).await;
        assert!(
            matches!(err, Err(gate::service::ServiceError::LedgerHeadMissing)),
            "{err:?}"
        );
        assert_eq!(ledger_rows(w).await?, before);
        // Another tenant's chain carries on.
        let globex = w
            .gate
            .propose("globex", "globex-agent", &body("SNACK-BOX", 1), None)
            .await?;
        assert_eq!(globex.decision, Decision::Allow);
        // A tenant whose chain is still empty loses its head: named too.
        w.owner()
            .execute(
                "INSERT INTO tenants (id) VALUES ('initech'); \
             DELETE FROM ledger_head WHERE tenant_id = 'initech'",
            )
            .await?;
        let report = w.gate.verify_ledger().await?;
        let breaks: Vec<(&str, i64)> = report
            .breaks()
            .map(|b| (b.tenant.as_str(), b.seq))
            .collect();
        assert_eq!(breaks, vec![("acme", 10), ("initech", 1)]);
        // Verified on its own, by name: the tenant exists, so its missing
        // head is a break there too (not "no chain").
        let one = w.gate.verify_ledger_with(Some("initech"), None).await?;
        assert_eq!(
            one.first_break().map(|b| (b.tenant.as_str(), b.seq)),
            Some(("initech", 1))
        );
        // A tenant that does not exist has no chain to break.
        let none = w.gate.verify_ledger_with(Some("nobody"), None).await?;
        assert!(none.intact(), "{none:?}");
        assert_eq!(none.entries, 0);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn verify_names_the_first_entry_past_a_head_that_is_behind() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let acme = chain(w, "acme").await?;
        w.owner()
            .execute(sqlx::AssertSqlSafe(format!(
                "UPDATE ledger_head SET seq = 7, hash = '{}' WHERE tenant_id = 'acme'",
                acme[6].hash
            )))
            .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(
            &report,
            "acme",
            8,
            "entry 8 is past the head: the head says the chain ends at entry 7",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn verify_names_the_first_missing_entry_below_a_head_that_is_ahead() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        w.owner()
            .execute("UPDATE ledger_head SET seq = 12 WHERE tenant_id = 'acme'")
            .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(
            &report,
            "acme",
            10,
            "entry 10 is missing: the head says the chain ends at entry 12",
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn verify_names_the_last_entry_when_the_heads_hash_is_not_its_hash() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let acme = chain(w, "acme").await?;
        w.owner()
            .execute(sqlx::AssertSqlSafe(format!(
                "UPDATE ledger_head SET hash = '{}' WHERE tenant_id = 'acme'",
                acme[7].hash
            )))
            .await?;
        let report = w.gate.verify_ledger().await?;
        assert_break(
            &report,
            "acme",
            9,
            "the head's hash is not this entry's hash",
        );
        Ok(())
    })
    .await
}

// ---- the key ----------------------------------------------------------------

/// A gate given its own key appends under it; under any other key (the one
/// derived from the secret included) every entry is a forgery.
#[tokio::test]
async fn the_chain_verifies_under_the_gates_own_key_and_no_other() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let own = LedgerKey::new(b"a ledger key the database never sees")?;
    let clock = std::sync::Arc::new(gate::service::ManualClock::new(
        gate::service::standard::now(),
    ));
    let g = Gate::new(db.pool().clone(), InProcessProvider::new(), SECRET, clock)?
        .with_ledger_key(own.clone());
    g.seed(&gate::service::standard::seed()).await?;
    g.propose("acme", "buyer-agent", &body("USB-HUB", 1), None)
        .await?;
    let mine = verify_ledger(g.pool(), &own, None, None).await?;
    assert!(mine.intact(), "{mine:#?}");
    assert_eq!(mine.entries, 4);
    assert!(g.verify_ledger().await?.intact());
    let derived = verify_ledger(g.pool(), &key(), None, None).await?;
    let breaks: Vec<(&str, i64)> = derived
        .breaks()
        .map(|b| (b.tenant.as_str(), b.seq))
        .collect();
    assert_eq!(breaks, vec![("acme", 1), ("globex", 1)]);
    drop(g);
    db.drop().await?;
    Ok(())
}

// ---- what is written, and under which tenant ---------------------------------

/// The spec: a call naming an unknown tenant writes nothing.
#[tokio::test]
async fn two_hundred_proposals_naming_an_unknown_tenant_write_no_ledger_row() -> TestResult {
    on_world(async |w| {
        let before = ledger_rows(w).await?;
        for _ in 0..200 {
            let p = w
                .gate
                .propose("nobody", "buyer-agent", &body("USB-HUB", 1), None)
                .await?;
            assert_eq!(p.decision, Decision::Deny(Reason::TenantUnknown));
        }
        assert_eq!(ledger_rows(w).await?, before);
        let heads: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_head")
            .fetch_one(w.ledger().await?)
            .await?;
        assert_eq!(heads, 2, "no chain was started for the unknown tenant");
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

/// (kind, tenant column, tenant inside the hashed entry) of a chain's last entry.
async fn last_entry(w: &World, tenant: &str) -> Fallible<(String, String, String)> {
    let (kind, column, entry): (String, String, String) = sqlx::query_as(
        "SELECT kind, tenant_id, entry FROM ledger_entries WHERE tenant_id = $1 \
         ORDER BY seq DESC LIMIT 1",
    )
    .bind(tenant)
    .fetch_one(w.ledger().await?)
    .await?;
    let entry: serde_json::Value = serde_json::from_str(&entry)?;
    let hashed = entry["tenant"].as_str().unwrap_or_default().to_owned();
    Ok((kind, column, hashed))
}

fn written(kind: &str, tenant: &str) -> (String, String, String) {
    (kind.to_owned(), tenant.to_owned(), tenant.to_owned())
}

#[tokio::test]
async fn revoke_writes_its_kind_under_the_revoking_tenant() -> TestResult {
    on_world(async |w| {
        let refused = w.gate.revoke("globex", "d-globex", "globex-agent").await?;
        assert!(!refused.is_ok());
        assert_eq!(
            last_entry(w, "globex").await?,
            written("revocation.refused", "globex")
        );
        let revoked = w.gate.revoke("acme", "d-buyer", "finance-lead").await?;
        assert!(revoked.is_ok(), "{revoked:?}");
        assert_eq!(
            last_entry(w, "acme").await?,
            written("delegation.revoked", "acme")
        );
        let (acme, globex) = (chain(w, "acme").await?, chain(w, "globex").await?);
        assert_eq!((acme.len(), globex.len()), (2, 2));
        let before = ledger_rows(w).await?;
        let unknown = w.gate.revoke("nobody", "d-buyer", "finance-lead").await?;
        assert_eq!(unknown.reason(), Some(Reason::TenantUnknown));
        assert_eq!(ledger_rows(w).await?, before);
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

/// A refused cancellation and a refused expiry each write their own kind:
/// the ledger says which of the two was refused.
#[tokio::test]
async fn a_refused_cancel_and_a_refused_expiry_write_their_own_kinds() -> TestResult {
    on_world(async |w| {
        let cancelled = w.gate.cancel("acme", "req-none", "buyer-agent").await?;
        assert!(!cancelled.is_ok(), "{cancelled:?}");
        assert_eq!(
            last_entry(w, "acme").await?,
            written("cancellation.refused", "acme")
        );
        let expired = w.gate.expire("acme", "req-none").await?;
        assert!(!expired.is_ok(), "{expired:?}");
        assert_eq!(
            last_entry(w, "acme").await?,
            written("expiry.refused", "acme")
        );
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn cancel_and_expire_write_their_kinds_under_the_requests_tenant() -> TestResult {
    on_world(async |w| {
        let acme = w.propose("SNACK-BOX", 1).await?;
        assert_eq!(acme.decision, Decision::Allow);
        let globex = w
            .gate
            .propose("globex", "globex-agent", &body("SNACK-BOX", 1), None)
            .await?;
        assert_eq!(globex.decision, Decision::Allow);
        let cancelled = w
            .gate
            .cancel("acme", &request_id(&acme), "buyer-agent")
            .await?;
        assert!(cancelled.is_ok(), "{cancelled:?}");
        assert_eq!(
            last_entry(w, "acme").await?,
            written("request.cancelled", "acme")
        );
        let expired = w.gate.expire("globex", &request_id(&globex)).await?;
        assert!(expired.is_ok(), "{expired:?}");
        assert_eq!(
            last_entry(w, "globex").await?,
            written("request.expired", "globex")
        );
        assert_eq!(
            (
                chain(w, "acme").await?.len(),
                chain(w, "globex").await?.len()
            ),
            (4, 4)
        );
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_chains_survive_concurrent_appends_each_unforked() -> TestResult {
    on_world_with_pool(16, async |w| {
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
        let report = w.gate.verify_ledger().await?;
        assert!(report.intact(), "{report:#?}");
        let per_chain: Vec<(&str, u64, i64)> = report
            .chains
            .iter()
            .map(|c| (c.tenant.as_str(), c.entries, c.last_seq))
            .collect();
        assert_eq!(per_chain, vec![("acme", 33, 33), ("globex", 33, 33)]);
        assert_eq!(report.entries, 66);
        Ok(())
    })
    .await
}

/// An anchor file as `harness ledger anchor` writes it reads back equal.
#[tokio::test]
async fn the_printed_anchor_reads_back_and_verifies() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        // A tenant with an empty chain is anchored at 0, and that holds.
        w.onboard()
            .execute("INSERT INTO tenants (id) VALUES ('initech')")
            .await?;
        let anchor = w.gate.verify_ledger().await?.anchor();
        let read = Anchor::parse(&anchor.to_json())?;
        assert_eq!(read, anchor);
        let heads: Vec<(&str, i64)> = read
            .heads
            .iter()
            .map(|h| (h.tenant.as_str(), h.seq))
            .collect();
        assert_eq!(heads, vec![("acme", 9), ("globex", 1), ("initech", 0)]);
        assert!(w.gate.verify_ledger_with(None, Some(&read)).await?.intact());
        Ok(())
    })
    .await
}

/// The anchored entry itself deleted, with the entries after it kept: the
/// walk names the gap, the anchor names its entry as gone.
#[tokio::test]
async fn an_anchored_entry_deleted_from_the_middle_is_named_gone() -> TestResult {
    on_world(async |w| {
        history(w).await?;
        let mut anchor = w.gate.verify_ledger().await?.anchor();
        let acme = chain(w, "acme").await?;
        for head in &mut anchor.heads {
            if head.tenant == "acme" {
                (head.seq, head.hash) = (5, acme[4].hash.clone());
            }
        }
        tamper(
            w,
            &["DELETE FROM ledger_entries WHERE tenant_id = 'acme' AND seq = 5".to_owned()],
        )
        .await?;
        let report = w.gate.verify_ledger_with(None, Some(&anchor)).await?;
        let breaks: Vec<(&str, i64, &str)> = report
            .breaks()
            .map(|b| (b.tenant.as_str(), b.seq, b.problem.as_str()))
            .collect();
        assert_eq!(
            breaks,
            vec![
                ("acme", 5, "entry 5 is missing (the next entry is 6)"),
                ("acme", 5, "the entry the anchor records is gone"),
            ]
        );
        Ok(())
    })
    .await
}

/// Entries of a tenant that has neither a head nor a tenant row any more
/// are still found (through the entries' own index) and walked.
#[tokio::test]
async fn a_chain_with_no_head_and_no_tenant_row_is_still_walked() -> TestResult {
    on_world(async |w| {
    let entry = r#"{"seq":1,"at":"2026-09-03T10:00:00.000000Z","tenant":"ghost","kind":"seed","subject":"ghost","body":{}}"#;
    w.owner()
        .execute(
            sqlx::AssertSqlSafe(format!(
                "ALTER TABLE ledger_entries DROP CONSTRAINT fk_ledger_entry_head; \
                 INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
                 VALUES ('ghost', 1, 'seed', '2026-09-03T10:00:00Z', {}, '{GENESIS_HASH}', '{}')",
                quoted(entry),
                chain_hash(&key(), GENESIS_HASH, entry)
            )),
        )
        .await?;
    let report = w.gate.verify_ledger().await?;
    let tenants: Vec<&str> = report.chains.iter().map(|c| c.tenant.as_str()).collect();
    assert_eq!(tenants, vec!["acme", "ghost", "globex"]);
    assert_break(&report, "ghost", 2, "the chain's head row is missing");
    assert_eq!(report.chain("ghost").map(|c| c.entries), Some(1));
        Ok(())
    })
    .await
}

/// One append, as `ledger::append` does it, on its own connection: lock the
/// tenant's head, insert the next entry, move the head. Waits at most 1 s
/// for a lock (then Postgres refuses with 55P03, lock_not_available).
async fn raw_append(w: &World, tenant: &str) -> Result<(), sqlx::Error> {
    use sqlx::Connection;
    let mut conn = w.pool().acquire().await?;
    let mut tx = conn.begin().await?;
    tx.execute("SET LOCAL lock_timeout = '1s'").await?;
    let (seq, hash): (i64, String) =
        sqlx::query_as("SELECT seq, hash FROM ledger_head WHERE tenant_id = $1 FOR UPDATE")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
    sqlx::query(
        "INSERT INTO ledger_entries (tenant_id, seq, kind, at, entry, prev_hash, hash) \
         VALUES ($1, $2, 'probe', now(), '{}', $3, $3)",
    )
    .bind(tenant)
    .bind(seq + 1)
    .bind(&hash)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE ledger_head SET seq = $2 WHERE tenant_id = $1")
        .bind(tenant)
        .bind(seq + 1)
        .execute(&mut *tx)
        .await?;
    tx.rollback().await
}

fn lock_not_available(result: &Result<(), sqlx::Error>) -> bool {
    matches!(result, Err(e) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("55P03"))
}

/// Issue 9, seen 3 and 5: an append locks its own tenant's head and nothing
/// of the tenant row (so it never waits on a policy publication holding
/// that row), and tenants never queue on each other's heads.
#[tokio::test]
async fn an_append_locks_only_its_tenants_head_and_never_the_tenant_row() -> TestResult {
    use sqlx::Connection;
    let Some(w) = world().await? else {
        return Ok(());
    };
    let mut holder = w.pool().acquire().await?;
    let mut tenant_row = holder.begin().await?;
    tenant_row
        .execute("SELECT id FROM tenants WHERE id = 'acme' FOR UPDATE")
        .await?;
    raw_append(&w, "acme").await?;
    tenant_row.rollback().await?;

    let mut head = holder.begin().await?;
    head.execute("SELECT seq FROM ledger_head WHERE tenant_id = 'acme' FOR UPDATE")
        .await?;
    raw_append(&w, "globex").await?;
    let queued = raw_append(&w, "acme").await;
    assert!(
        lock_not_available(&queued),
        "a second append to acme waits for acme's head: {queued:?}"
    );
    head.rollback().await?;
    raw_append(&w, "acme").await?;
    w.drop().await
}

// ---- a proposal's entries ride on its request's INSERT ------------------------

/// `propose` writes its request and its two entries in one statement,
/// chained from the head its key remembers. Two gates with the same secret
/// (each key with a memory of its own) take turns in one tenant, so a
/// remembered head has often moved: then the request goes in alone and the
/// entries are appended under the head's lock. Either way every request has
/// exactly its proposal and decision entries, under its own id (`req_` and
/// 32 hex digits, drawn by the gate), in the order the proposals committed,
/// and the chain verifies whole.
#[tokio::test]
async fn proposals_from_two_gates_in_turn_each_write_their_two_entries_once() -> TestResult {
    on_world(async |w| {
        let clock = std::sync::Arc::new(gate::service::ManualClock::new(
            gate::service::standard::now(),
        ));
        let other = Gate::new(w.pool().clone(), InProcessProvider::new(), SECRET, clock)?;
        let before = ledger_rows(w).await?;
        let turns = [
            (&*w.gate, "USB-HUB", deny(Reason::MerchantNotAllowed)),
            (
                &*w.gate,
                "CLOUD-TEAM",
                Decision::StepUp(Reason::ApprovalRequired),
            ),
            (
                &other,
                "CLOUD-TEAM",
                Decision::StepUp(Reason::ApprovalRequired),
            ),
            (&*w.gate, "USB-HUB", deny(Reason::MerchantNotAllowed)),
            (&other, "USB-HUB", deny(Reason::MerchantNotAllowed)),
            (&other, "CLOUD-STARTER", Decision::Allow),
        ];
        let mut ids = Vec::new();
        for (g, sku, expected) in turns {
            let p = g
                .propose("acme", "buyer-agent", &body(sku, 1), None)
                .await?;
            assert_eq!(p.decision, expected, "{sku}");
            let id = request_id(&p);
            assert!(
                id.len() == 36
                    && id.starts_with("req_")
                    && id[4..]
                        .bytes()
                        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
            ids.push(id);
        }
        assert_eq!(ledger_rows(w).await?, before + 12);
        let written: Vec<(String, String)> = sqlx::query_as(
            "SELECT entry::json->>'subject', kind FROM ledger_entries \
             WHERE tenant_id = 'acme' AND kind IN ('proposal', 'decision') ORDER BY seq",
        )
        .fetch_all(w.ledger().await?)
        .await?;
        let expected: Vec<(String, String)> = ids
            .iter()
            .flat_map(|id| {
                [
                    (id.clone(), "proposal".to_owned()),
                    (id.clone(), "decision".to_owned()),
                ]
            })
            .collect();
        assert_eq!(written, expected);
        let report = w.gate.verify_ledger().await?;
        assert!(report.intact(), "{report:#?}");
        Ok(())
    })
    .await
}

/// A proposal that quotes a NUL (`\u0000` in its ledger entry, which
/// Postgres's `jsonb` cannot hold) does not hide the tenant's other
/// requests: each request's entries are found, and its evidence verifies.
#[tokio::test]
async fn evidence_is_found_for_every_request_when_an_entry_quotes_a_nul() -> TestResult {
    use gate::service::tlog::{self, LogKey};
    on_world(async |w| {
        let g = &w.gate;
        let nul = g
            .propose(
                "acme",
                "buyer-agent",
                br#"{"sku":"SNACK-BOX\u0000","quantity":1,"purpose":"team snacks"}"#,
                None,
            )
            .await?;
        assert_eq!(nul.decision, Decision::Deny(Reason::SkuUnknown), "{nul:?}");
        let allowed = g
            .propose("acme", "buyer-agent", &body("SNACK-BOX", 1), None)
            .await?;
        let request = request_id(&allowed);
        let quoted: bool = sqlx::query_scalar(
            "SELECT bool_or(strpos(entry, '\\u0000') > 0) FROM ledger_entries WHERE tenant_id = 'acme'",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        assert!(quoted, "the refusal's entry quotes the NUL");
        let seqs = tlog::request_entry_seqs(w.pool(), "acme", &request).await?;
        assert!(!seqs.is_empty(), "no entry of {request} found");
        let key = LogKey::new(b"a log key for this test, thirty-two bytes at least")?;
        let checked = tlog::check_evidence(w.pool(), &key, "acme").await?;
        assert!(
            checked.as_ref().is_ok_and(|n| *n > 0),
            "evidence: {checked:?}"
        );
        Ok(())
    })
    .await
}

/// The money audit (`spendgate ledger verify`) reads a tenant's ledger
/// whose refusal entry quotes a NUL (the catalog's recorded prices are
/// looked up in it): it finds nothing to name, and no error.
#[tokio::test]
async fn the_money_audit_reads_a_ledger_whose_entry_quotes_a_nul() -> TestResult {
    on_world(async |w| {
        let nul = w
            .gate
            .propose(
                "acme",
                "buyer-agent",
                br#"{"sku":"SNACK-BOX\u0000","quantity":1,"purpose":"team snacks"}"#,
                None,
            )
            .await?;
        assert!(matches!(nul.decision, Decision::Deny(_)), "{nul:?}");
        w.gate.set_price("acme", "SNACK-BOX", 30_000).await?;
        let quoted: bool = sqlx::query_scalar(
            "SELECT bool_or(strpos(entry, '\\u0000') > 0) FROM ledger_entries WHERE tenant_id = 'acme'",
        )
        .fetch_one(w.ledger().await?)
        .await?;
        assert!(quoted, "an entry quotes the NUL");
        let key = gate::service::LedgerKey::derived_from_secret(SECRET);
        let found = gate::service::audit(w.pool(), &key, Some("acme")).await?;
        assert!(found.is_empty(), "{found:?}");
        Ok(())
    })
    .await
}
