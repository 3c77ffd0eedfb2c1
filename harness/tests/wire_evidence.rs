//! An attack is evidence only on an engine that sends its attack steps: the
//! committed `scenarios/corpus/wire.yaml` through `harness bench --engines
//! database,http`. The attacks whose attack steps are wire-only are "not
//! run" on the database engine (never blocked, out of its score) and
//! counted on the HTTP engine, and each attack is credited to the step that
//! carried it, not to a step that set it up.
//!
//! Needs the machine's Postgres binaries; skipped when they are missing and
//! `SPENDGATE_SKIP_DB=1`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::Value;

mod support;
use support::{skip, workspace_root};

/// The three attacks with no step but wire-only ones.
const WIRE_ONLY: [&str; 3] = [
    "wire-human-key-on-the-agent-route",
    "wire-revoked-unknown-malformed-and-no-keys",
    "wire-proposals-whose-type-lies",
];

fn find<'a>(results: &'a Value, id: &str) -> &'a Value {
    results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

#[test]
fn wire_only_attacks_count_only_on_the_http_engine() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out");
    let exe = env!("CARGO_BIN_EXE_harness");
    let output = Command::new(exe)
        .env_remove("DATABASE_URL")
        .env_remove("MIGRATION_DATABASE_URL")
        .args([
            "db",
            "run",
            "--",
            exe,
            "bench",
            "--engines",
            "database,http",
        ])
        .arg("--corpus")
        .arg(workspace_root().join("scenarios/corpus/wire.yaml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file: Value =
        serde_json::from_str(&fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let engines = file["engines"].as_array().unwrap();
    let engine = |name: &str| {
        engines
            .iter()
            .find(|e| e["engine"] == name)
            .unwrap_or_else(|| panic!("no {name} engine in {file:#}"))
    };
    let (database, http) = (engine("database"), engine("http"));
    for id in WIRE_ONLY {
        let on_db = find(&database["results"], id);
        assert_eq!(on_db["not_run"], true, "{on_db:#}");
        assert_eq!(on_db["blocked"], false, "{on_db:#}");
        let on_http = find(&http["results"], id);
        assert_eq!(on_http["not_run"], false, "{on_http:#}");
        assert_eq!(on_http["blocked"], true, "{on_http:#}");
        assert_eq!(find(&file["results"], id)["blocked"], true);
    }
    // Every attack of the file with a wire-only step is out of the database
    // engine's score; the HTTP engine scores all of them.
    let attacks = |e: &Value| e["summary"]["attacks"]["total"].as_u64().unwrap();
    let not_run = |e: &Value| e["summary"]["not_run"].as_u64().unwrap();
    assert_eq!((attacks(database), not_run(database)), (3, 11), "{stdout}");
    assert_eq!((attacks(http), not_run(http)), (14, 0), "{stdout}");
    assert!(stdout.contains("11 not run"), "{stdout}");
    // Credited to the key refused on the human routes, not to the proposal
    // that stepped up first.
    let human_routes = find(&file["results"], "wire-agent-key-on-human-routes");
    assert_eq!(
        human_routes["attack_reasons"],
        serde_json::json!(["ACTOR_NOT_PERMITTED"]),
        "{human_routes:#}"
    );
    assert_eq!(
        find(&database["results"], "wire-agent-key-on-human-routes")["attack_reasons"],
        serde_json::json!([])
    );
}
