//! The README's quick start, run verbatim: the fenced block after the
//! `<!-- quickstart ... -->` marker goes to bash unchanged, against a fresh
//! database of the test's own and with the built `spendgate` first on PATH,
//! from the repository's root. It must end by printing CAPTURED, so the
//! README cannot drift from what works.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use support::*;

const MARKER: &str = "<!-- quickstart";

/// The first ```sh block after the marker.
fn quickstart_block(readme: &str) -> String {
    let after = readme
        .split_once(MARKER)
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("README.md has no `{MARKER}` marker"));
    let start = after
        .find("```sh\n")
        .map(|i| i + "```sh\n".len())
        .unwrap_or_else(|| panic!("no ```sh block after the quickstart marker"));
    let body = &after[start..];
    let end = body
        .find("\n```")
        .unwrap_or_else(|| panic!("the quickstart block is not closed"));
    body[..end].to_owned()
}

#[test]
fn the_block_is_found_and_holds_at_most_ten_commands() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let block = quickstart_block(&readme);
    let commands = block.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        commands <= 10,
        "the quick start has {commands} commands:\n{block}"
    );
    assert!(block.contains("spendgate serve"), "{block}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readmes_quick_start_reaches_captured() {
    let Some(db) = fresh_db().await else { return };
    // The block talks to localhost:8080, as a newcomer's would.
    if let Err(e) = TcpListener::bind("127.0.0.1:8080") {
        panic!("the quick start serves on 127.0.0.1:8080, which is taken here: {e}");
    }
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = quickstart_block(&readme);
    let bin = Path::new(env!("CARGO_BIN_EXE_spendgate"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The block as written, and what the test adds around it: stop on the
    // first failure, and stop the server the block left running.
    let script =
        format!("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{block}\n");
    let mut c = Command::new("bash");
    for (name, _) in std::env::vars() {
        if name.starts_with("SPENDGATE_") {
            c.env_remove(name);
        }
    }
    let out = output(
        c.arg("-c")
            .arg(&script)
            .current_dir(&root)
            .env("PATH", path)
            .env("DATABASE_URL", &db.app)
            .env("MIGRATION_DATABASE_URL", &db.owner)
            .env("ONBOARD_DATABASE_URL", &db.onboard)
            .env("SPENDGATE_LOG", "warn"),
    );
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "the quick start failed ({}):\n{stdout}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(
        stdout.lines().last(),
        Some("CAPTURED"),
        "the quick start did not end CAPTURED:\n{stdout}\n{}",
        text(&out.stderr)
    );
}
