//! A Postgres for one harness command, so that no subcommand asks a newcomer
//! to wrap it in `harness db run`.
//!
//! Guarantees: [`Server::open`] uses `DATABASE_URL` when it is set (and
//! `MIGRATION_DATABASE_URL` with it, as `gate::db` reads them); otherwise it
//! starts a throwaway cluster from the machine's Postgres binaries in a
//! temporary folder, says so in one line on stderr, and hands out the
//! cluster's administrator URL (from which `gate::db` creates and derives the
//! two roles). [`Server::close`] — or dropping the server — stops that
//! cluster and removes its folder; a server from `DATABASE_URL` is left alone.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::cluster;

/// The server one command talks to.
#[derive(Debug)]
pub struct Server {
    /// The URL to hand to `gate::db` (`fresh_database`, `connect`, ...).
    pub url: String,
    throwaway: Option<PathBuf>,
}

impl Server {
    /// `DATABASE_URL`, or a throwaway cluster started for `purpose` (a few
    /// words for the one line that announces it).
    pub async fn open(purpose: &str) -> Result<Self> {
        if let Ok(url) = std::env::var(gate::db::DATABASE_URL_ENV)
            && !url.trim().is_empty()
        {
            return Ok(Server {
                url,
                throwaway: None,
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("spendgate-pg-cmd-")
            .tempdir()
            .context("creating a folder for a throwaway Postgres")?
            .keep();
        let running = match cluster::start(&dir, None).await {
            Ok(running) => running,
            Err(err) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(err.context(
                    "DATABASE_URL is not set and no throwaway Postgres could be started: \
                     install the postgresql package or set DATABASE_URL",
                ));
            }
        };
        eprintln!(
            "DATABASE_URL is not set: started a throwaway Postgres {} in {} for {purpose} \
             (removed afterwards)",
            running.version,
            dir.display()
        );
        Ok(Server {
            url: running.url,
            throwaway: Some(dir),
        })
    }

    /// Stops the throwaway cluster, if this command started one.
    pub fn close(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(dir) = self.throwaway.take()
            && let Err(e) = cluster::stop(&dir)
        {
            eprintln!(
                "warning: could not remove the throwaway Postgres in {}: {e:#}",
                dir.display()
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
