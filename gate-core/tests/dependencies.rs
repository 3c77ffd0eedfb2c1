//! The core is pure by construction: its dependency tree, as cargo resolves
//! it for a normal build, holds no database, async runtime, network or HTTP
//! crate.

use std::process::Command;

/// Crates the decision core must never link, directly or through another.
const FORBIDDEN: &[&str] = &[
    "sqlx",
    "tokio",
    "reqwest",
    "axum",
    "hyper",
    "tower",
    "mio",
    "rand",
    "getrandom",
    "rmcp",
];

/// The package names in `cargo tree -p <package> -e normal`, one per line.
fn normal_dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_core_links_no_database_runtime_network_or_http_crate() {
    let deps = normal_dependencies("gate-core");
    assert!(
        deps.iter().any(|d| d == "gate-core") && deps.iter().any(|d| d == "serde"),
        "cargo tree did not list the core and its dependencies: {deps:?}"
    );
    let hits: Vec<&String> = deps
        .iter()
        .filter(|d| FORBIDDEN.contains(&d.as_str()))
        .collect();
    assert!(hits.is_empty(), "the core links {hits:?}");
}

#[test]
fn the_gate_builds_on_the_core() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "gate",
            "-e",
            "normal",
            "--depth",
            "1",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("gate-core ")),
        "gate does not depend on gate-core:\n{text}"
    );
}

#[test]
fn the_corpus_and_the_fuzz_targets_use_the_core_not_the_service() {
    for package in ["scenarios", "fuzz"] {
        let deps = normal_dependencies(package);
        assert!(
            deps.iter().any(|d| d == "gate-core"),
            "{package} does not use the core: {deps:?}"
        );
        let hits: Vec<&String> = deps
            .iter()
            .filter(|d| *d == "gate" || ["sqlx", "tokio", "reqwest", "axum"].contains(&d.as_str()))
            .collect();
        assert!(hits.is_empty(), "{package} links {hits:?}");
    }
}
