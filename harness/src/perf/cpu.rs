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
//!   window (pgbench). **server**: the one server the load talks to, found
//!   from a backend's pid (`pg_backend_pid()`): its postmaster, with the time
//!   of the children it reaped, and every process it started, so a backend
//!   that exits in the window (pgbench's do) is still counted, once. Another
//!   Postgres on the same machine is never counted.
//! - No reading (not Linux, or a server that is not on this machine, whose
//!   backend's pid is not a process here) gives no figure, never a wrong
//!   one.
//! - Ticks are converted with the kernel's `USER_HZ` as `getconf CLK_TCK`
//!   reports it (100 when it cannot be asked).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Cumulative CPU seconds at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    client: f64,
    server: f64,
}

/// One window's CPU per operation, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

/// One process's line of `/proc/<pid>/stat`, times in ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat<'a> {
    comm: &'a str,
    ppid: u32,
    /// Its own user and system time.
    ticks: u64,
    /// The user and system time of the children it reaped.
    reaped: u64,
}

fn parse_stat(text: &str) -> Option<Stat<'_>> {
    // The command name is in parentheses and may itself hold spaces or ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state (0), ppid (1), ... utime (11), stime (12),
    // cutime (13), cstime (14).
    let n = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        comm,
        ppid: u32::try_from(n(1)?).ok()?,
        ticks: n(11)? + n(12)?,
        reaped: n(13)? + n(14)?,
    })
}

/// The Postgres server a reading counts: its postmaster's pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    postmaster: u32,
}

impl Server {
    /// The server of the backend whose pid is `backend` (what
    /// `pg_backend_pid()` answers), when that backend runs on this machine.
    pub fn of_backend(backend: i32) -> Option<Server> {
        Server::of_backend_in(Path::new("/proc"), backend)
    }

    fn of_backend_in(proc: &Path, backend: i32) -> Option<Server> {
        let pid = u32::try_from(backend).ok().filter(|p| *p > 0)?;
        let text = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")).ok()?;
        let stat = parse_stat(&text)?;
        (stat.comm == "postgres").then_some(Server {
            postmaster: stat.ppid,
        })
    }
}

/// The counters now; `None` without a server on this machine, or where
/// `/proc` cannot be read.
pub fn read(server: Option<Server>) -> Option<Reading> {
    read_from(Path::new("/proc"), server?)
}

fn read_from(proc: &Path, server: Server) -> Option<Reading> {
    let own = std::fs::read_to_string(proc.join("self/stat")).ok()?;
    let own = parse_stat(&own)?;
    let mut total = 0u64;
    let mut seen = false;
    for entry in std::fs::read_dir(proc).ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may exit between the listing and the read: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(stat) = parse_stat(&text) else {
            continue;
        };
        if pid == server.postmaster {
            total += stat.ticks + stat.reaped;
            seen = true;
        } else if stat.ppid == server.postmaster {
            total += stat.ticks + stat.reaped;
        }
    }
    let hz = ticks_per_second();
    seen.then(|| Reading {
        client: (own.ticks + own.reaped) as f64 / hz,
        server: total as f64 / hz,
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
    fn a_stat_line_gives_its_name_parent_and_both_kinds_of_time() {
        let line = "4242 (postgres) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    125 40 7 3 20 0 1 0 100 2000000 500 18446744073709551615";
        let stat = parse_stat(line).expect("a stat line");
        assert_eq!(
            (stat.comm, stat.ppid, stat.ticks, stat.reaped),
            ("postgres", 1, 165, 10)
        );
        // A name with a space and a parenthesis of its own.
        let odd = "7 (tokio (rt) x) R 3 7 7 0 -1 0 0 0 0 0 5 6 0 1 20 0 1 0";
        let stat = parse_stat(odd).expect("a stat line");
        assert_eq!(
            (stat.comm, stat.ppid, stat.ticks, stat.reaped),
            ("tokio (rt) x", 3, 11, 1)
        );
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
    fn only_the_server_of_the_backend_is_counted() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let stat = |pid: &str, comm: &str, ppid: u32, ticks: u32| {
            std::fs::create_dir_all(dir.path().join(pid)).expect("a pid folder");
            std::fs::write(
                dir.path().join(pid).join("stat"),
                format!("{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 100 20 0 20 0 1 0"),
            )
            .expect("a stat file");
        };
        stat("self", "harness", 1, 300);
        // The server the load talks to: postmaster 10, backend 11.
        stat("10", "postgres", 1, 200);
        stat("11", "postgres", 10, 300);
        // Another cluster on the same machine, and an unrelated process.
        stat("20", "postgres", 1, 5000);
        stat("21", "postgres", 20, 5000);
        stat("30", "bash", 1, 5000);
        let server = Server::of_backend_in(dir.path(), 11).expect("backend 11's server");
        assert_eq!(server, Server { postmaster: 10 });
        let r = read_from(dir.path(), server).expect("a reading");
        let hz = ticks_per_second();
        // (200 + 100 + 20) + (300 + 100 + 20)
        assert!((r.server - 740.0 / hz).abs() < 1e-9, "{r:?}");
        assert!((r.client - 420.0 / hz).abs() < 1e-9, "{r:?}");
        // A backend that is not a Postgres process here gives no server;
        // a server whose postmaster is gone gives no reading.
        assert_eq!(Server::of_backend_in(dir.path(), 30), None);
        assert_eq!(Server::of_backend_in(dir.path(), 99), None);
        assert_eq!(Server::of_backend_in(dir.path(), -1), None);
        assert_eq!(read_from(dir.path(), Server { postmaster: 40 }), None);
        assert_eq!(read(None), None);
    }
}
