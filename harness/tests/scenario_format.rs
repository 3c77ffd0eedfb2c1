//! `docs/scenario-format.md` equals what `harness scenario-format` writes
//! from the loader's tables, and the check sees a one-line change. Needs no
//! database.

use std::process::Command;

mod support;
use support::workspace_root;

fn harness() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.current_dir(workspace_root());
    cmd
}

#[test]
fn the_committed_scenario_format_equals_a_fresh_rendering_and_the_check_sees_a_change() {
    let out = harness()
        .args(["scenario-format", "--check"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docs/scenario-format.md is stale: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("scenario-format.md");
    let out = harness()
        .args(["scenario-format", "--out"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(out.status.success());
    let committed =
        std::fs::read_to_string(workspace_root().join("docs/scenario-format.md")).unwrap();
    let written = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(written, committed);

    std::fs::write(
        &copy,
        written.replacen("| `actor` | yes |", "| `actor` | no |", 1),
    )
    .unwrap();
    let out = harness()
        .args(["scenario-format", "--check", "--out"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scenario-format.md differs"), "{stderr}");

    std::fs::remove_file(&copy).unwrap();
    let out = harness()
        .args(["scenario-format", "--check", "--out"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a missing file is stale too");
}
