//! Build script: rebuilds the crate when `migrations/` changes, so
//! `gate::db::MIGRATOR` (embedded by `sqlx::migrate!`) never goes stale.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
