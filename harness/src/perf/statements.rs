//! Where a load cell's server time goes: the gate's statements as Postgres'
//! own `pg_stat_statements` counted them, most total execution time first.
//!
//! Guarantees: the window is exactly the cells it is taken around (a
//! snapshot before, one after, and their difference statement by
//! statement, so nothing needs the privilege to reset the counters), and
//! only the gate's database is counted (pgbench's is another database).
//! Times are Postgres' own execution times: they include waiting for row
//! locks and for the CPU, so under load they say where the gate waits as
//! well as where it works. When the server has not loaded the module
//! (`shared_preload_libraries`; the throwaway cluster loads it, and creates
//! it in its `postgres` database, when the machine has it) the breakdown is
//! absent and a note says why; the measurement goes on without it.

use std::collections::HashMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sqlx::{Connection, PgConnection};

/// How many statements the breakdown lists.
pub const TOP: usize = 12;

/// One statement's share of the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementCost {
    /// The statement as Postgres normalised it, whitespace collapsed.
    pub query: String,
    pub calls: i64,
    pub total_ms: f64,
    pub mean_ms: f64,
    /// Of the window's total execution time over all the gate's statements.
    pub share: f64,
}

/// The breakdown of one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Which cells the window held.
    pub window: String,
    /// Execution time of every statement of the gate's database in the window.
    pub total_ms: f64,
    pub calls: i64,
    pub top: Vec<StatementCost>,
}

/// The counters of one database's statements at one moment, by query id.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    by_id: HashMap<i64, (String, i64, f64)>,
}

/// The counters of `database`'s top-level statements now, read through `url`
/// (any database of the server where the extension exists).
pub async fn snapshot(url: &str, database: &str) -> Result<Snapshot> {
    let mut conn = PgConnection::connect(url)
        .await
        .context("connecting to read pg_stat_statements")?;
    let rows: Vec<(Option<i64>, Option<String>, i64, f64)> = sqlx::query_as(
        "SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements \
         WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = $1)",
    )
    .bind(database)
    .fetch_all(&mut conn)
    .await
    .context("reading pg_stat_statements (is it in shared_preload_libraries and created?)")?;
    conn.close().await.ok();
    Ok(Snapshot {
        by_id: rows
            .into_iter()
            .filter_map(|(id, query, calls, total)| Some((id?, (query?, calls, total))))
            .collect(),
    })
}

/// What ran between `before` and `after`, most total time first.
pub fn between(before: &Snapshot, after: &Snapshot, window: &str) -> Breakdown {
    let mut costs: Vec<StatementCost> = after
        .by_id
        .iter()
        .filter_map(|(id, (query, calls, total))| {
            let (c0, t0) = before.by_id.get(id).map_or((0, 0.0), |(_, c, t)| (*c, *t));
            let calls = calls - c0;
            (calls > 0).then(|| StatementCost {
                query: collapse(query),
                calls,
                total_ms: total - t0,
                mean_ms: (total - t0) / calls as f64,
                share: 0.0,
            })
        })
        .collect();
    let total_ms: f64 = costs.iter().map(|c| c.total_ms).sum();
    let calls = costs.iter().map(|c| c.calls).sum();
    costs.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    costs.truncate(TOP);
    for c in &mut costs {
        c.share = if total_ms > 0.0 {
            c.total_ms / total_ms
        } else {
            0.0
        };
    }
    Breakdown {
        window: window.to_owned(),
        total_ms,
        calls,
        top: costs,
    }
}

/// Whitespace runs as one space.
fn collapse(query: &str) -> String {
    query.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_shown_on_one_line() {
        assert_eq!(
            collapse("SELECT a,\n       b\n  FROM t\tWHERE x = $1"),
            "SELECT a, b FROM t WHERE x = $1"
        );
    }

    #[test]
    fn the_window_is_the_difference_of_two_snapshots_most_time_first() {
        let snap = |rows: &[(i64, &str, i64, f64)]| Snapshot {
            by_id: rows
                .iter()
                .map(|(id, q, c, t)| (*id, ((*q).to_owned(), *c, *t)))
                .collect(),
        };
        let before = snap(&[(1, "SELECT 1", 10, 5.0), (2, "UPDATE t", 4, 8.0)]);
        let after = snap(&[
            (1, "SELECT 1", 30, 15.0),
            (2, "UPDATE t", 4, 8.0),
            (3, "INSERT  INTO\nt", 5, 30.0),
        ]);
        let b = between(&before, &after, "w");
        assert_eq!((b.calls, b.total_ms), (25, 40.0));
        let got: Vec<_> = b
            .top
            .iter()
            .map(|c| (c.query.as_str(), c.calls, c.mean_ms, c.share))
            .collect();
        assert_eq!(
            got,
            [("INSERT INTO t", 5, 6.0, 0.75), ("SELECT 1", 20, 0.5, 0.25)],
            "a statement that did not run in the window is not listed"
        );
    }
}
