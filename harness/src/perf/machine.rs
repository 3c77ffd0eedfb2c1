//! What the figures were measured on: core count, CPU model, compiler, build
//! profile, load, and this process's memory as Linux reports it.
//!
//! Guarantees: nothing here fails. A fact that cannot be read is `None`
//! (`n/a` in the report), never a guess. The parsers take the text of the
//! /proc file so they can be tested on fixed input.

use serde::{Deserialize, Serialize};

/// The machine facts printed at the top of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `nproc`: the CPUs this process may run on.
    pub nproc: Option<usize>,
    /// `model name` of the first processor in /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// `rustc --version` on this machine.
    pub rustc: Option<String>,
    /// `release` or `debug` (the harness binary's build).
    pub profile: String,
    /// The 1, 5 and 15-minute load averages when the run started and ended.
    pub load_before: Option<[f64; 3]>,
    pub load_after: Option<[f64; 3]>,
    /// The Postgres server's version, when the database phase ran.
    pub postgres: Option<String>,
    /// Whether the kernel groups processes by session for scheduling
    /// (/proc/sys/kernel/sched_autogroup_enabled). When on, `nice` only
    /// ranks processes within their own session: a niced job started from
    /// another session (a background audit, a build) still takes an equal
    /// share of the CPUs from this run.
    pub autogroup: Option<bool>,
}

impl Machine {
    /// Reads the facts of this machine (the end load is filled in later).
    pub fn read() -> Machine {
        Machine {
            nproc: std::thread::available_parallelism().ok().map(|n| n.get()),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|t| cpu_model(&t)),
            rustc: rustc_version(),
            profile: if cfg!(debug_assertions) {
                "debug".into()
            } else {
                "release".into()
            },
            load_before: load_average(),
            load_after: None,
            postgres: None,
            autogroup: std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
                .ok()
                .and_then(|t| parse_flag(&t)),
        }
    }
}

/// The `model name` of the first processor in /proc/cpuinfo text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string())
    })
}

/// A `Vm*:` field of /proc/self/status text, in KiB.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// A /proc/sys flag's text: `1` is on, `0` off, anything else unknown.
pub fn parse_flag(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// The three load averages of /proc/loadavg text.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    Some([parts.next()??, parts.next()??, parts.next()??])
}

/// The load averages now.
pub fn load_average() -> Option<[f64; 3]> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| parse_loadavg(&t))
}

/// This process's peak (`VmHWM`) and current (`VmRSS`) resident set, in KiB.
pub fn memory_kib() -> (Option<u64>, Option<u64>) {
    match std::fs::read_to_string("/proc/self/status") {
        Ok(t) => (status_kib(&t, "VmHWM"), status_kib(&t, "VmRSS")),
        Err(_) => (None, None),
    }
}

fn rustc_version() -> Option<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_first_model_name() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            cpu_model(text).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(cpu_model("processor\t: 0\n"), None);
    }

    #[test]
    fn reads_status_fields_in_kib() {
        let text =
            "Name:\tharness\nVmPeak:\t  300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\n";
        assert_eq!(status_kib(text, "VmHWM"), Some(51234));
        assert_eq!(status_kib(text, "VmRSS"), Some(40000));
        assert_eq!(status_kib(text, "VmSwap"), None);
        // A field name that is only a prefix of another does not match it.
        assert_eq!(status_kib(text, "Vm"), None);
    }

    #[test]
    fn reads_a_proc_sys_flag() {
        assert_eq!(parse_flag("1\n"), Some(true));
        assert_eq!(parse_flag("0"), Some(false));
        assert_eq!(parse_flag("2\n"), None);
        assert_eq!(parse_flag(""), None);
    }

    #[test]
    fn reads_load_averages() {
        assert_eq!(
            parse_loadavg("2.15 2.13 2.48 5/113 31027\n"),
            Some([2.15, 2.13, 2.48])
        );
        assert_eq!(parse_loadavg("garbage"), None);
    }
}
