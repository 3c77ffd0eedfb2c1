//! CPU time per operation: what one proposal, one flow or one pgbench
//! transaction costs the machine, read from the kernel's own accounting
//! (`/proc`), beside the throughput the load phase measures.
//!
//! Guarantees:
//! - A window is two readings, one before and one after the same work; its
//!   figures are differences of the kernel's cumulative counters, so only
//!   this process and the server's processes are counted. What else runs on
//!   the host is not counted, but it still slows what is (shared cores and
//!   caches): one disturbed evening moved CPU per operation by up to 2×
//!   between rounds, as much as throughput. Compare figures of one run.
//! - **client**: this process's own user and system time (the gate and the
//!   load driver, every thread), plus the time of children it reaped in the
//!   window (pgbench). **server**: every local process named `postgres`,
//!   with the time of the children each reaped, so a backend that exits in
//!   the window (pgbench's do) is still counted, once, through its
//!   postmaster.
//! - No reading (not Linux, or a server that is not on this machine: no
//!   `postgres` process is visible) gives no figure, never a wrong one.
//! - Ticks are converted with the kernel's `USER_HZ` as `getconf CLK_TCK`
//!   reports it (100 when it cannot be asked).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde::Serialize;

/// Cumulative CPU seconds at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    client: f64,
    server: f64,
}

/// One window's CPU per operation, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerOp {
    /// The gate and the load driver (or pgbench's client).
    pub client_us: f64,
    /// The Postgres server.
    pub server_us: f64,
}

impl PerOp {
    /// Client and server together: the machine's CPU per operation.
    pub fn total_us(&self) -> f64 {
        self.client_us + self.server_us
    }
}

/// The kernel's clock ticks per second for `/proc/*/stat`.
fn ticks_per_second() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|hz| *hz > 0.0)
            .unwrap_or(100.0)
    })
}

/// `(comm, utime + stime, cutime + cstime)` in ticks, from one
/// `/proc/<pid>/stat` text.
fn parse_stat(text: &str) -> Option<(&str, u64, u64)> {
    // The command name is in parentheses and may itself hold spaces or ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state (0), ppid (1), ... utime (11), stime (12),
    // cutime (13), cstime (14).
    let n = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((comm, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// The counters now; `None` where `/proc` cannot be read or no Postgres
/// process is visible.
pub fn read() -> Option<Reading> {
    read_from(Path::new("/proc"))
}

fn read_from(proc: &Path) -> Option<Reading> {
    let own = std::fs::read_to_string(proc.join("self/stat")).ok()?;
    let (_, own_ticks, reaped) = parse_stat(&own)?;
    let mut server = 0u64;
    let mut seen = false;
    for entry in std::fs::read_dir(proc).ok()?.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process may exit between the listing and the read: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(("postgres", ticks, children)) = parse_stat(&text) {
            server += ticks + children;
            seen = true;
        }
    }
    let hz = ticks_per_second();
    seen.then(|| Reading {
        client: (own_ticks + reaped) as f64 / hz,
        server: server as f64 / hz,
    })
}

/// CPU per operation between two readings over `ops` operations.
pub fn per_op(before: Option<Reading>, after: Option<Reading>, ops: u64) -> Option<PerOp> {
    let (b, a) = before.zip(after)?;
    if ops == 0 || a.client < b.client || a.server < b.server {
        return None;
    }
    let ops = ops as f64;
    Some(PerOp {
        client_us: (a.client - b.client) * 1e6 / ops,
        server_us: (a.server - b.server) * 1e6 / ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_both_kinds_of_time() {
        let line = "4242 (postgres) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    125 40 7 3 20 0 1 0 100 2000000 500 18446744073709551615";
        assert_eq!(parse_stat(line), Some(("postgres", 165, 10)));
        // A name with a space and a parenthesis of its own.
        let odd = "7 (tokio (rt) x) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 1 20 0 1 0";
        assert_eq!(parse_stat(odd), Some(("tokio (rt) x", 11, 1)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (short) S 1 2"), None);
    }

    #[test]
    fn per_op_divides_the_difference_and_refuses_what_cannot_be_a_window() {
        let b = Reading {
            client: 1.0,
            server: 10.0,
        };
        let a = Reading {
            client: 1.5,
            server: 12.0,
        };
        let p = per_op(Some(b), Some(a), 1000).expect("a window");
        assert!((p.client_us - 500.0).abs() < 1e-6, "{p:?}");
        assert!((p.server_us - 2000.0).abs() < 1e-6, "{p:?}");
        assert!((p.total_us() - 2500.0).abs() < 1e-6);
        assert_eq!(per_op(Some(b), Some(a), 0), None, "no operations");
        assert_eq!(per_op(None, Some(a), 10), None, "no reading before");
        assert_eq!(per_op(Some(a), Some(b), 10), None, "counters went back");
    }

    #[test]
    fn a_proc_without_postgres_gives_no_reading() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let stat = |pid: &str, comm: &str| {
            std::fs::create_dir_all(dir.path().join(pid)).expect("a pid folder");
            std::fs::write(
                dir.path().join(pid).join("stat"),
                format!("{pid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 300 100 20 0 20 0 1 0"),
            )
            .expect("a stat file");
        };
        stat("self", "harness");
        stat("10", "bash");
        assert_eq!(read_from(dir.path()), None);
        stat("11", "postgres");
        stat("12", "postgres");
        let r = read_from(dir.path()).expect("a reading");
        let hz = ticks_per_second();
        assert!((r.server - 840.0 / hz).abs() < 1e-9, "{r:?}");
        assert!((r.client - 420.0 / hz).abs() < 1e-9, "{r:?}");
    }
}
