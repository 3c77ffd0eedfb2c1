//! `spendgate ledger verify` and `spendgate ledger anchor`.
//!
//! Guarantees: both hash with `ledger_key` (required: without it there is
//! nothing to verify with, an error, never "intact"). `verify` prints one
//! line per chain, its entries and head when intact or its FIRST broken
//! entry and what is wrong with it, and with `--anchor FILE` also names a
//! chain cut below, or rewritten at, its anchored head: exit 0 when every
//! chain is intact, 1 when one is not. `anchor` prints the heads as JSON only
//! when every chain is intact. A malformed anchor file is named with its
//! field (exit 2).

use std::path::Path;
use std::process::ExitCode;

use gate::service::{Anchor, LedgerReport};

use crate::cli::LedgerCommand;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, command: LedgerCommand) -> Result<ExitCode, Failure> {
    let key = super::ledger_key(config)?;
    let (tenant, anchor, print_anchor) = match command {
        LedgerCommand::Verify { tenant, anchor } => {
            let anchor = anchor.as_deref().map(read_anchor).transpose()?;
            (tenant, anchor, false)
        }
        LedgerCommand::Anchor => (None, None, true),
    };
    let pool = crate::connect::app_pool(config, 1).await?;
    let report = gate::service::verify_ledger(&pool, &key, tenant.as_deref(), anchor.as_ref())
        .await
        .map_err(|e| Failure::database("reading the ledger", e))?;
    pool.close().await;
    if print_anchor {
        if !report.intact() {
            for broken in report.breaks() {
                eprintln!(
                    "{}: BROKEN at entry {}: {}",
                    broken.tenant, broken.seq, broken.problem
                );
            }
            return Err(Failure::CheckFailed(
                "the ledger is broken: no anchor printed (verify and repair it first)".into(),
            ));
        }
        println!("{}", report.anchor().to_json());
        return Ok(ExitCode::SUCCESS);
    }
    if print_report(&report) {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::CheckFailed("the ledger is broken".into()))
    }
}

fn read_anchor(path: &Path) -> Result<Anchor, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::Input(format!(
            "cannot read the anchor file {}: {e}",
            path.display()
        ))
    })?;
    Anchor::parse(&text)
        .map_err(|e| Failure::Input(format!("the anchor file {}: {e}", path.display())))
}

/// One line per chain; whether all are intact.
fn print_report(report: &LedgerReport) -> bool {
    for chain in &report.chains {
        match &chain.first_break {
            None => println!(
                "{}: intact, {} entries, head {} {}",
                chain.tenant, chain.entries, chain.last_seq, chain.last_hash
            ),
            Some(broken) => println!(
                "{}: BROKEN at entry {}: {} ({} entries before it verified)",
                chain.tenant, broken.seq, broken.problem, chain.entries
            ),
        }
        if let Some(cut) = &chain.anchor_break {
            println!(
                "{}: BROKEN against the anchor at entry {}: {}",
                chain.tenant, cut.seq, cut.problem
            );
        }
    }
    let broken = report.chains.iter().filter(|c| !c.intact()).count();
    if broken == 0 {
        println!(
            "ledger intact: {} chains, {} entries",
            report.chains.len(),
            report.entries
        );
    } else {
        println!(
            "ledger BROKEN: {broken} of {} chains ({} entries verified)",
            report.chains.len(),
            report.entries
        );
    }
    broken == 0
}
