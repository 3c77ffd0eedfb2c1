//! `spendgate tenant apply`: onboarding without SQL. A file is checked whole
//! before anything is written, a dry run writes nothing, applying twice
//! changes nothing the second time, and what a later file adds lands with
//! the name of who applied it on the tenant's ledger.

mod support;

use support::*;

const WORLD: &str = r#"
tenants:
  - id: initech
    people:
      - {id: lumbergh, may_approve: true}
      - {id: milton, may_approve: false}
    agents: [stapler-agent]
    merchants: [officeco]
    catalog:
      - sku: STAPLER
        merchant: officeco
        price_paise: 45000
        currency: INR
        category: office
        max_quantity: 2
    policy:
      currency: INR
      per_transaction_cap_paise: 100000
      daily_cap_paise: 200000
      approval_threshold_paise: 50000
      allowed_merchants: [officeco]
      allowed_categories: [office]
      valid_from: "2026-01-01T00:00:00Z"
      valid_until: "2099-12-31T23:59:59Z"
      velocity: {max_proposals: 20, window_minutes: 60}
      denial_rate: {max_denials: 5, window_minutes: 60}
    delegations:
      - {id: d-stapler, from: lumbergh, to: stapler-agent, budget_paise: 100000}
"#;

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_with_problems_writes_nothing_and_names_each_line_and_field() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    ok(spendgate(&db, work.path()).arg("migrate"));
    let broken = WORLD
        .replace("price_paise: 45000", "price_paise: 0")
        .replace("from: lumbergh", "from: milton")
        .replace(
            "valid_until: \"2099-12-31T23:59:59Z\"",
            "valid_until: \"2025-01-01T00:00:00Z\"",
        );
    let file = write(work.path(), "broken.yaml", &broken);
    let out = output(
        spendgate(&db, work.path())
            .args(["tenant", "apply"])
            .arg(&file),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let line_of = |needle: &str| {
        broken
            .lines()
            .position(|l| l.contains(needle))
            .map(|i| i + 1)
            .unwrap()
    };
    for (code, needle, field) in [
        (
            "PRICE_INVALID",
            "price_paise: 0",
            "catalog[STAPLER].price_paise",
        ),
        (
            "DELEGATION_GRANTOR_NOT_PERMITTED",
            "from: milton",
            "delegations[d-stapler].from",
        ),
        ("POLICY_INVALID", "policy:", "tenants[initech].policy"),
    ] {
        let expected = format!("broken.yaml, line {}: {code} at", line_of(needle));
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&expected) && l.contains(field)),
            "no `{expected} ... {field}` in:\n{stderr}"
        );
    }
    assert!(stderr.contains("nothing was written"), "{stderr}");
    // Nothing was written: the good file still plans the tenant whole.
    let good = write(work.path(), "good.yaml", WORLD);
    let plan = ok(spendgate(&db, work.path())
        .args(["tenant", "apply", "--dry-run"])
        .arg(&good));
    assert!(plan.contains("would create tenant initech"), "{plan}");

    // A file that does not decode names its line.
    let undecodable = write(
        work.path(),
        "typo.yaml",
        &WORLD.replace("price_paise: 45000", "pricepaise: 45000"),
    );
    let out = output(
        spendgate(&db, work.path())
            .args(["tenant", "apply"])
            .arg(&undecodable),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("typo.yaml, line") && stderr.contains("pricepaise"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_is_idempotent_only_adds_and_records_who_applied_it() {
    let Some(db) = fresh_db().await else { return };
    let work = tempfile::tempdir().unwrap();
    ok(spendgate(&db, work.path()).arg("migrate"));
    let file = write(work.path(), "initech.yaml", WORLD);

    let dry = ok(spendgate(&db, work.path())
        .args(["tenant", "apply", "--dry-run"])
        .arg(&file));
    assert!(dry.contains("dry run: nothing was written"), "{dry}");
    let mandates = signed_first_mandates(&db, work.path(), &file, &[("initech", "lumbergh")]);
    let applied = ok(spendgate(&db, work.path())
        .args(["tenant", "apply", "--by", "ops-alice"])
        .arg(&file)
        .args(&mandates));
    assert!(applied.contains("create tenant initech"), "{applied}");
    let again = ok(spendgate(&db, work.path())
        .args(["tenant", "apply"])
        .arg(&file));
    assert!(again.contains("nothing to change"), "{again}");

    // A later file: one agent more, a new price, a second delegation.
    let extended = WORLD
        .replace("agents: [stapler-agent]", "agents: [stapler-agent, tps-agent]")
        .replace("price_paise: 45000", "price_paise: 47000")
        .replace(
            "budget_paise: 100000}",
            "budget_paise: 100000}\n      - {id: d-tps, from: lumbergh, to: tps-agent, budget_paise: 50000}",
        );
    let file = write(work.path(), "initech.yaml", &extended);
    let applied = ok(spendgate(&db, work.path())
        .args(["tenant", "apply", "--by", "ops-bob"])
        .arg(&file));
    for change in [
        "add agents tps-agent",
        "price of STAPLER 45000 -> 47000",
        "grant delegation d-tps",
    ] {
        assert!(applied.contains(change), "no `{change}` in:\n{applied}");
    }
    assert!(
        !applied.contains("publish"),
        "the policy did not change: {applied}"
    );
    let again = ok(spendgate(&db, work.path())
        .args(["tenant", "apply"])
        .arg(&file));
    assert!(again.contains("nothing to change"), "{again}");

    // A change that would rewrite history refuses the whole plan.
    let rewritten = extended.replace(
        "{id: milton, may_approve: false}",
        "{id: milton, may_approve: true}",
    );
    let file = write(work.path(), "initech.yaml", &rewritten);
    let out = output(
        spendgate(&db, work.path())
            .args(["tenant", "apply"])
            .arg(&file),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("person milton exists with other rights"));

    // The ledger is intact and names who applied each file.
    let verified = ok(spendgate(&db, work.path()).args(["ledger", "verify"]));
    assert!(verified.contains("ledger intact"), "{verified}");
    let pool = gate::db::connect(&db.app).await.unwrap();
    let by: Vec<String> = sqlx::query_scalar(
        "SELECT (entry::jsonb)->'body'->>'by' FROM ledger_entries \
         WHERE tenant_id = 'initech' AND kind = 'tenant.applied' ORDER BY seq",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(by, ["ops-alice", "ops-bob"]);
}
