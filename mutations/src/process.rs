//! Runs one child process with a time limit and a cancellation flag.
//!
//! Guarantees: the child runs in its own process group (so a terminal's
//! Ctrl-C reaches only the runner, which decides), its stdout and stderr are
//! captured completely, and when the limit passes or the flag is set the
//! whole group (cargo, rustc, test binaries and anything they started) is
//! killed and reaped before this returns. Nothing is left running. The pid of
//! every child killed that way is remembered ([`take_killed_pids`]), so the
//! caller can clean up what a killed test left behind (a test database named
//! after its process id, say).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit status 0.
    Success,
    /// A non-zero exit status.
    Code(i32),
    /// Killed by a signal the runner did not send.
    Signal(i32),
    /// Killed by the runner at the time limit.
    TimedOut,
}

/// A finished child.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

const POLL: Duration = Duration::from_millis(20);

/// Children killed by [`run`] (timeout or cancel) and not yet taken.
static KILLED: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// The pids of the children [`run`] killed since the last call (each is also
/// its process group id), oldest first.
pub fn take_killed_pids() -> Vec<u32> {
    match KILLED.lock() {
        Ok(mut v) => std::mem::take(&mut *v),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

/// Runs `cmd` to completion, or until `limit` or `cancel`.
pub fn run(mut cmd: Command, limit: Option<Duration>, cancel: &Cancel) -> Result<Finished> {
    cancel.check()?;
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        program: program.clone(),
        source,
    })?;
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break match (status.code(), status.signal()) {
                    (Some(0), _) => Exit::Success,
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    (None, None) => Exit::Code(-1),
                };
            }
            Ok(None) => {}
            Err(source) => {
                kill_group(&mut child);
                return Err(Error::Spawn { program, source });
            }
        }
        if cancel.is_cancelled() {
            kill_group(&mut child);
            let _ = out.join();
            let _ = err.join();
            return Err(Error::Interrupted);
        }
        if limit.is_some_and(|l| start.elapsed() > l) {
            kill_group(&mut child);
            break Exit::TimedOut;
        }
        thread::sleep(POLL);
    };
    let elapsed = start.elapsed();
    // A grandchild that escaped the group could hold the pipes open; the
    // group kill above covers timeouts, and a normal exit closes them.
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Finished {
        exit,
        stdout,
        stderr,
        elapsed,
    })
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Kills the child's whole process group, then reaps the child.
fn kill_group(child: &mut Child) {
    match KILLED.lock() {
        Ok(mut v) => v.push(child.id()),
        Err(poisoned) => poisoned.into_inner().push(child.id()),
    }
    let pgid = format!("-{}", child.id());
    let _ = Command::new("kill")
        .args(["-KILL", "--", &pgid])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    all[from..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn output_and_status_are_captured() {
        let f = run(sh("echo out; echo err >&2; exit 3"), None, &Cancel::new()).unwrap();
        assert_eq!(f.exit, Exit::Code(3));
        assert_eq!(f.stdout, "out\n");
        assert_eq!(f.stderr, "err\n");
    }

    #[test]
    fn the_time_limit_kills_the_whole_group() {
        let start = Instant::now();
        // The grandchild `sleep` holds the pipes; only a group kill ends it.
        let f = run(
            sh("sleep 30 & sleep 30; echo never"),
            Some(Duration::from_millis(300)),
            &Cancel::new(),
        )
        .unwrap();
        assert_eq!(f.exit, Exit::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(!f.stdout.contains("never"));
    }

    #[test]
    fn cancel_interrupts_and_kills() {
        let cancel = Cancel::new();
        let c2 = cancel.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            c2.cancel();
        });
        let start = Instant::now();
        let r = run(sh("sleep 30"), None, &cancel);
        t.join().unwrap();
        assert!(matches!(r, Err(Error::Interrupted)));
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
