//! `spendgate ledger verify` and `spendgate ledger anchor`.
//!
//! Guarantees: both hash with `ledger_key` (required: without it there is
//! nothing to verify with, an error, never "intact"), and integrate the
//! committed queued entries first. `verify` names every queued row left
//! out (a MAC that fails, a copy), and prints one
//! line per chain, its entries and head when intact or its FIRST broken
//! entry and what is wrong with it, and with `--anchor FILE` also names a
//! chain cut below, or rewritten at, its anchored head. It then audits the
//! money (`gate::service::audit`): every row of the money-bearing tables
//! that disagrees with the ledger or with the gate's MAC is printed with its
//! table, its key and what disagrees (a key the gate never issued, an edited
//! authority, a reset counter, a payment without its event, a policy
//! version or tenant or root delegation without its entry). Exit 0 when
//! every chain is intact and no row disagrees, 1 otherwise. `anchor` prints the heads as JSON only
//! when every chain is intact. A malformed anchor file is named with its
//! field (exit 2).

use std::path::Path;
use std::process::ExitCode;

use gate::service::{Anchor, LedgerReport};

use crate::cli::LedgerCommand;
use crate::config::Config;
use crate::error::Failure;

pub async fn run(config: &Config, command: LedgerCommand) -> Result<ExitCode, Failure> {
    let key = crate::gate_of_config::ledger_key(config)?;
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
        .map_err(|e| Failure::database("reading the ledger", e));
    let audited = match (&report, print_anchor) {
        (Ok(_), false) => gate::service::audit(&pool, &key, tenant.as_deref())
            .await
            .map(Some)
            .map_err(|e| Failure::database("auditing the money", e)),
        _ => Ok(None),
    };
    pool.close().await;
    let (report, audited) = (report?, audited?);
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
    let intact = print_report(&report);
    let disagreements = audited.unwrap_or_default();
    for d in &disagreements {
        println!(
            "{}: DISAGREES {} {}: {}",
            d.tenant, d.table, d.key, d.problem
        );
    }
    if disagreements.is_empty() {
        println!("money audit: every money-bearing row agrees with the ledger and its MAC");
    } else {
        println!(
            "money audit: {} row(s) disagree with the ledger or their MAC",
            disagreements.len()
        );
    }
    match (intact, disagreements.is_empty()) {
        (true, true) => Ok(ExitCode::SUCCESS),
        (false, _) => Err(Failure::CheckFailed("the ledger is broken".into())),
        (true, false) => Err(Failure::CheckFailed(
            "rows disagree with the ledger or their MAC".into(),
        )),
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
    for refused in &report.queue {
        println!("{}: QUEUED ROW REFUSED: {refused}", refused.tenant);
    }
    broken == 0 && report.queue.is_empty()
}
