//! A Postgres for one harness command, so that no subcommand asks a newcomer
//! to wrap it in `harness db run`.
//!
//! Guarantees: [`Server::open`] uses `DATABASE_URL` when it is set (and
//! `MIGRATION_DATABASE_URL` with it, as `gate::db` reads them); otherwise it
//! starts a throwaway cluster from the machine's Postgres binaries in a
//! temporary folder, says so in one line on stderr (`no DATABASE_URL: started
//! a throwaway Postgres ...`), and hands out the cluster's administrator URL
//! (from which `gate::db` creates and derives the two roles).
//! [`Server::close`] — or dropping the server — stops that cluster and
//! removes its folder; a server from `DATABASE_URL` is left alone.

use std::ffi::OsString;
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
        if let Some(url) = given_url() {
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
            "no DATABASE_URL: started a throwaway Postgres {} in {} for {purpose}; \
             it is removed on exit",
            running.version,
            dir.display()
        );
        Ok(Server {
            url: running.url,
            throwaway: Some(dir),
        })
    }

    /// Opens a server (as [`Server::open`]) only when `DATABASE_URL` is
    /// unset: `None` when the caller's own is to be used.
    pub async fn open_unless_given(purpose: &str) -> Result<Option<Self>> {
        match given_url() {
            Some(_) => Ok(None),
            None => Self::open(purpose).await.map(Some),
        }
    }

    /// As [`Server::open_unless_given`], for a caller outside any async
    /// runtime (the cluster's processes outlive the runtime used to start it).
    pub fn open_unless_given_blocking(purpose: &str) -> Result<Option<Self>> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?
            .block_on(Self::open_unless_given(purpose))
    }

    /// The variable a child process needs to use this server:
    /// `DATABASE_URL`, this server's URL (an administrator's, for a throwaway
    /// one, from which the child's `gate::db` derives both roles).
    pub fn child_env(&self) -> (OsString, OsString) {
        (
            OsString::from(gate::db::DATABASE_URL_ENV),
            OsString::from(&self.url),
        )
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

/// `DATABASE_URL` when it is set and not blank.
fn given_url() -> Option<String> {
    std::env::var(gate::db::DATABASE_URL_ENV)
        .ok()
        .filter(|url| !url.trim().is_empty())
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
