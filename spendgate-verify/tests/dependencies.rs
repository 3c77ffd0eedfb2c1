//! The verifier runs offline: its dependency graph (normal and build
//! dependencies, every feature) holds no database driver, async runtime or
//! network client.

use std::process::Command;

const FORBIDDEN: &[&str] = &[
    "sqlx",
    "tokio",
    "reqwest",
    "hyper",
    "axum",
    "async-std",
    "smol",
    "postgres",
    "mio",
    "h2",
    "rustls",
    "native-tls",
    "ureq",
    "tower",
];

#[test]
fn the_verifier_depends_on_no_database_runtime_or_network_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "-p",
            "spendgate-verify",
            "--edges",
            "normal,build",
            "--all-features",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(names.contains(&"ed25519-dalek"), "{tree}");
    assert!(names.contains(&"sha2"), "{tree}");
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|f| names.contains(f)).collect();
    assert!(found.is_empty(), "forbidden crates {found:?} in:\n{tree}");
}
