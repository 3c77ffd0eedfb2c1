//! `spendgate evidence REQUEST --tenant T --out DIR`: one request's
//! evidence bundle.
//!
//! Guarantees:
//! - The bundle holds what the gate keeps of the request: the request row
//!   (the derived purchase, the decision and its reason, the state), the
//!   proposal as the ledger recorded it, the policy version in force, the
//!   delegation it was reserved under, the approvals, the checkout
//!   authority, the provider orders, payments and events, and every ledger
//!   entry that names the request (as its subject or as `body.request`),
//!   each verbatim with its `c2sp.org/tlog-proof@v1` proof against ONE
//!   signed checkpoint, written as `checkpoint` (the newest kept checkpoint
//!   covering them, or one signed now). `README.md` inside says what each
//!   file is and which key checks which.
//! - The files are the gate's own bundle (`gate::service::bundle`): with
//!   them the proposal's body exactly as received (`proposal.raw`) and each
//!   applied provider event's body and signature header
//!   (`provider_events/`), when the gate kept them; what it did not keep is
//!   not invented, and the README says so.
//! - The folder is created; an existing folder that is not empty is refused
//!   (exit 2), so a bundle is never a mix of two. An unknown tenant or
//!   request cannot run (exit 2); a ledger that no longer has the root of a
//!   kept checkpoint, or misses an entry, is a failed check (exit 1).
//! - The log's part (checkpoint, entries, proofs) and the raw files'
//!   digests are checked offline by
//!   `spendgate-verify verify-bundle DIR --key <the tenant's log key>`.

use std::path::Path;
use std::process::ExitCode;

use gate::service::{bundle, tlog};
use sqlx::PgPool;

use super::log::{failure, known_tenant, write_file};
use crate::cli::EvidenceArgs;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, args: &EvidenceArgs) -> Result<ExitCode, Failure> {
    let key = crate::gate_of_config::log_key(config)?;
    let pool = crate::connect::app_pool(config, 1).await?;
    let result = match crate::gate_of_config::integrate_if_keyed(config, &pool).await {
        Ok(()) => write_bundle(&pool, &key, args).await,
        Err(e) => Err(e),
    };
    pool.close().await;
    result
}

async fn write_bundle(
    pool: &PgPool,
    key: &tlog::LogKey,
    args: &EvidenceArgs,
) -> Result<ExitCode, Failure> {
    let (tenant, request, dir) = (args.tenant.as_str(), args.request.as_str(), &args.out);
    known_tenant(pool, tenant).await?;
    let missing = || Failure::Input(format!("tenant {tenant:?} has no request {request:?}"));
    if gate::service::pages::json_rows(pool, gate::service::pages::REQUEST_SQL, tenant, request)
        .await
        .map_err(|e| Failure::database("reading the request's records", e))?
        .is_empty()
    {
        return Err(missing());
    }
    let seqs = tlog::request_entry_seqs(pool, tenant, request)
        .await
        .map_err(failure)?;
    let (checkpoint, proofs) = tlog::prove_inclusion(pool, key, tenant, &seqs, chrono::Utc::now())
        .await
        .map_err(failure)?;

    if dir.exists() {
        let mut listing = std::fs::read_dir(dir)
            .map_err(|e| Failure::Input(format!("cannot read {}: {e}", dir.display())))?;
        if listing.next().is_some() {
            return Err(Failure::Input(format!(
                "{} is not empty: a bundle is written to a new or empty folder",
                dir.display()
            )));
        }
    }
    let verifier = key.verifier(tenant).map_err(failure)?.to_text();
    let files = bundle::files(pool, tenant, request, &checkpoint, &proofs, &verifier)
        .await
        .map_err(|e| Failure::database("reading the request's records", e))?
        .ok_or_else(missing)?;
    for (name, bytes) in &files {
        write_into(dir, name, bytes)?;
    }
    println!(
        "wrote {}: request {request}, {} ledger entries proved against {} size {}, {} files",
        dir.display(),
        proofs.len(),
        tlog::origin(tenant),
        checkpoint.size,
        files.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` as `name` (a path inside the bundle) under `dir`.
fn write_into(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Failure> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure::Other(format!("cannot create {}: {e}", parent.display())))?;
    }
    write_file(&path, bytes)
}
