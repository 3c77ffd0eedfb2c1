//! Migrated databases handed from scenario to scenario: the bench's clean
//! world without a `CREATE DATABASE` per scenario.
//!
//! Guarantees:
//! - A database is leased to one scenario at a time. It comes back through
//!   [`DatabasePool::give_back`], which empties it before anyone else gets it
//!   with the schema's reset script (`gate::db::Reset`: one transaction, run
//!   by the tables' owner, that deletes every row the scenario wrote and
//!   restarts every sequence, the DELETE guards lifted only inside it).
//! - A database is reused only when the migrations left every table empty
//!   (checked once, when the pool first opens one), and only after a run
//!   that ended cleanly: a run that errored, panicked or timed out, or a
//!   reset that failed, drops its database instead, and the next lease
//!   makes a fresh one. So a scenario never sees what another left behind.
//! - Every database the pool made is dropped by [`DatabasePool::close`] (and,
//!   failing that, when the pool is dropped: `FreshDatabase`'s own `Drop`).

use std::sync::Mutex;

use gate::db::{DbError, FreshDatabase, Reset, fresh_database};

/// The template's reset script, read from one of the pool's databases as
/// its owner (`None` when its migrations leave rows behind).
async fn reset_of(db: &FreshDatabase, require_empty: bool) -> Result<Option<Reset>, sqlx::Error> {
    let mut conn = db.owner_pool().acquire().await?;
    Reset::for_schema(&mut conn, require_empty).await
}

/// Whether databases are reused, once the pool knows.
#[derive(Debug, Clone)]
enum Reuse {
    Unknown,
    Yes(Reset),
    No,
}

/// Databases for scenarios, reused after an empty-out when that is safe.
#[derive(Debug)]
pub struct DatabasePool {
    url: String,
    state: Mutex<(Reuse, Vec<FreshDatabase>)>,
}

/// How a leased database's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The run finished (passing or failing its expectations): reusable.
    Clean,
    /// An engine error, a panic or a timeout: its database is dropped.
    Broken,
}

impl DatabasePool {
    /// A pool on the server `url` names; it opens databases as they are asked for.
    pub fn new(url: &str) -> Self {
        DatabasePool {
            url: url.to_string(),
            state: Mutex::new((Reuse::Unknown, Vec::new())),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut (Reuse, Vec<FreshDatabase>)) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// An empty, migrated database for one scenario.
    pub async fn lease(&self) -> Result<FreshDatabase, DbError> {
        if let Some(db) = self.with(|s| s.1.pop()) {
            return Ok(db);
        }
        let db = fresh_database(&self.url).await?;
        if matches!(self.with(|s| s.0.clone()), Reuse::Unknown) {
            let reuse = match reset_of(&db, true).await {
                Ok(Some(reset)) => Reuse::Yes(reset),
                Ok(None) => Reuse::No,
                Err(e) => {
                    tracing::warn!(
                        "could not read the schema to reuse databases ({e}); each scenario gets a new one"
                    );
                    Reuse::No
                }
            };
            self.with(|s| s.0 = reuse);
        }
        Ok(db)
    }

    /// Takes a leased database back: emptied for the next scenario, or dropped.
    pub async fn give_back(&self, db: FreshDatabase, end: RunEnd) {
        let reset = match self.with(|s| s.0.clone()) {
            Reuse::Yes(reset) if end == RunEnd::Clean => reset,
            _ => return drop_now(db).await,
        };
        match reset.run(db.owner_pool()).await {
            Ok(_) => self.with(|s| s.1.push(db)),
            Err(e) => {
                tracing::warn!("could not empty database {} for reuse: {e}", db.name());
                drop_now(db).await;
            }
        }
    }

    /// Drops every database the pool holds.
    pub async fn close(&self) {
        let held = self.with(|s| std::mem::take(&mut s.1));
        for db in held {
            drop_now(db).await;
        }
    }
}

/// Empties `db` as a database handed back to the pool is emptied, and says
/// how long that statement took (reading the schema first is not counted).
/// For `harness perf`, which weighs it against a new database per scenario.
pub async fn time_reset(db: &FreshDatabase) -> Result<f64, String> {
    let reset = reset_of(db, false)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the schema could not be read")?;
    let t = std::time::Instant::now();
    reset
        .run(db.owner_pool())
        .await
        .map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_secs_f64())
}

async fn drop_now(db: FreshDatabase) {
    let name = db.name().to_string();
    if let Err(e) = db.drop().await {
        tracing::warn!("could not drop scenario database {name}: {e}");
    }
}
