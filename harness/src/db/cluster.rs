//! A throwaway Postgres cluster in a folder of its own.
//!
//! Guarantees:
//! - [`start`] runs `initdb` (trust authentication, superuser `postgres`) and
//!   then `postgres` through `pg_ctl`, listening on a unix socket inside the
//!   folder and nowhere else (`listen_addresses = ''`), and returns only once
//!   the server has answered `select 1` through the URL it returns. When the
//!   harness runs as root, the folder is handed to the `postgres` account and
//!   every Postgres program runs as that account (Postgres refuses root).
//! - The folder holds a state file from its first moment. Nothing here
//!   removes a folder without that file, so `--dir` can never delete a folder
//!   this module did not create.
//! - [`stop`] leaves no server process (fast shutdown, then SIGKILL for the
//!   postmaster and its children) and no folder; with nothing up it is a no-op.
//! - A failed [`start`] cleans up after itself; its error carries the tail of
//!   the initdb or server log.
//! - The URL has the form `postgresql://postgres@<percent-encoded socket
//!   folder>:5432/postgres`, which libpq (`psql`) and sqlx both accept, and
//!   which needs no shell quoting.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The port in the socket's name (`.s.PGSQL.5432`); no TCP port is opened.
const PORT: u16 = 5432;
const STATE_FILE: &str = "spendgate-db.json";
const DATA_DIR: &str = "data";
const SERVER_LOG: &str = "postgres.log";
const INITDB_LOG: &str = "initdb.log";
/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
const LOG_TAIL_LINES: usize = 25;

/// Where the Postgres programs live, and which version they are.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub dir: PathBuf,
    pub version: String,
    major: u32,
}

/// Who runs the Postgres programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    /// The harness's own user.
    Me,
    /// Root: the `postgres` system account, through `runuser` or `setpriv`.
    Postgres { uid: u32, gid: u32 },
}

/// What the state file records.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    /// `starting` until the server has answered, then `up`.
    status: String,
    url: String,
    pid: Option<u32>,
    bin_dir: PathBuf,
    version: String,
    run_as_postgres: bool,
}

/// A server that answered.
#[derive(Debug)]
pub struct Running {
    pub url: String,
    pub pid: u32,
    pub version: String,
    /// False when [`start`] found the cluster already up.
    pub started: bool,
}

/// The default folder: `$TMPDIR/spendgate-pg-<uid>` (`/tmp/...` without TMPDIR).
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("spendgate-pg-{}", effective_uid().unwrap_or(0)))
}

/// The unix-socket URL for a cluster whose socket lives in `dir`.
pub fn url_for(dir: &Path) -> String {
    let mut encoded = String::new();
    for byte in dir.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(byte) {
            encoded.push(char::from(*byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    format!("postgresql://postgres@{encoded}:{PORT}/postgres")
}

/// Finds `initdb`, `pg_ctl` and `postgres`: `explicit` if given, else the
/// highest version among the folders of PATH and `/usr/lib/postgresql/*/bin`.
pub fn find_binaries(explicit: Option<&Path>) -> Result<Binaries> {
    if let Some(dir) = explicit {
        return probe(dir).with_context(|| {
            format!(
                "{} does not hold working initdb, pg_ctl and postgres programs",
                dir.display()
            )
        });
    }
    search(
        &std::env::var_os("PATH").unwrap_or_default(),
        Path::new("/usr/lib/postgresql"),
    )
}

/// The highest version among the folders of `path` and `<versions>/*/bin`.
fn search(path: &std::ffi::OsStr, versions: &Path) -> Result<Binaries> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path) {
        // Follow a symlinked initdb to the folder its siblings live in.
        if let Ok(initdb) = fs::canonicalize(dir.join("initdb")) {
            candidates.extend(initdb.parent().map(Path::to_path_buf));
        }
    }
    if let Ok(entries) = fs::read_dir(versions) {
        candidates.extend(entries.flatten().map(|e| e.path().join("bin")));
    }
    candidates.sort();
    candidates.dedup();
    let best = candidates
        .iter()
        .filter_map(|dir| probe(dir).ok())
        .max_by_key(|b| b.major);
    best.with_context(|| {
        format!(
            "no Postgres binaries found: looked for initdb, pg_ctl and postgres on PATH ({}) and \
             under {}/*/bin. `apt-get install postgresql` installs them (or pass --pg-bin DIR, \
             or set DATABASE_URL to a server you already have, e.g. one from \
             `docker compose up -d`)",
            path.to_string_lossy(),
            versions.display()
        )
    })
}

fn probe(dir: &Path) -> Result<Binaries> {
    for program in ["initdb", "pg_ctl", "postgres"] {
        let path = dir.join(program);
        if !path.is_file() {
            bail!("{} is missing", path.display());
        }
    }
    let out = Command::new(dir.join("initdb"))
        .arg("--version")
        .output()
        .with_context(|| format!("running {}/initdb --version", dir.display()))?;
    // "initdb (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)"
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .with_context(|| format!("cannot read the version from {text:?}"))?
        .to_owned();
    let major = version
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|m| m.parse().ok())
        .with_context(|| format!("cannot read the major version from {version:?}"))?;
    Ok(Binaries {
        dir: dir.to_path_buf(),
        version,
        major,
    })
}

/// Starts a cluster in `dir`, or reports the one already up there.
pub async fn start(dir: &Path, bin: Option<&Path>) -> Result<Running> {
    check_socket_path(dir)?;
    if dir.join(STATE_FILE).is_file() {
        if let Some(running) = already_up(dir).await {
            return Ok(running);
        }
        eprintln!(
            "found a stale cluster folder in {}: cleaning it up and starting afresh",
            dir.display()
        );
        stop(dir)?;
    } else if dir.exists() && fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{} exists, is not empty and holds no {STATE_FILE}: it is not a spendgate cluster \
             folder, so it is left alone; choose another --dir",
            dir.display()
        );
    }
    let binaries = find_binaries(bin)?;
    let runner = Runner::for_this_process()?;
    match start_fresh(dir, &binaries, runner).await {
        Ok(running) => Ok(running),
        Err(err) => {
            if let Err(cleanup) = stop(dir) {
                eprintln!("warning: cleaning up {} failed: {cleanup:#}", dir.display());
            }
            Err(err)
        }
    }
}

async fn start_fresh(dir: &Path, binaries: &Binaries, runner: Runner) -> Result<Running> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let url = url_for(dir);
    let mut state = State {
        status: "starting".into(),
        url: url.clone(),
        pid: None,
        bin_dir: binaries.dir.clone(),
        version: binaries.version.clone(),
        run_as_postgres: runner != Runner::Me,
    };
    write_state(dir, &state)?;
    set_mode(dir, 0o700)?;
    if let Runner::Postgres { uid, gid } = runner {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))
            .with_context(|| format!("handing {} to the postgres account", dir.display()))?;
        let reachable = runner
            .command(Path::new("test"))
            .args(["-w".as_ref(), dir.as_os_str()])
            .status()
            .context("running `test` as the postgres account")?;
        if !reachable.success() {
            bail!(
                "the postgres account cannot write to {} (a parent folder is probably private \
                 to root); choose a --dir under /tmp",
                dir.display()
            );
        }
    }

    let data = dir.join(DATA_DIR);
    let initdb_log = dir.join(INITDB_LOG);
    let initdb_output = File::create(&initdb_log)?;
    let status = runner
        .command(&binaries.dir.join("initdb"))
        .arg("--pgdata")
        .arg(&data)
        .args([
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(initdb_output.try_clone()?)
        .stderr(initdb_output)
        .status()
        .context("running initdb")?;
    if !status.success() {
        bail!(
            "initdb failed ({status}); the end of {}:\n{}",
            initdb_log.display(),
            tail(&initdb_log)
        );
    }

    let mut conf = OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))?;
    let socket_dir = dir.to_string_lossy().replace('\'', "''");
    write!(
        conf,
        "\n# spendgate throwaway cluster: unix socket only, durability traded for speed\n\
         listen_addresses = ''\n\
         unix_socket_directories = '{socket_dir}'\n\
         port = {PORT}\n\
         max_connections = 200\n\
         fsync = off\n\
         synchronous_commit = off\n\
         full_page_writes = off\n"
    )?;
    // `harness perf --db` breaks the server's time down by statement with
    // pg_stat_statements, which must be preloaded; loaded only when the
    // machine's Postgres has it (Debian's keeps it beside the binaries).
    let statement_stats = binaries
        .dir
        .parent()
        .is_some_and(|root| root.join("lib/pg_stat_statements.so").is_file());
    if statement_stats {
        writeln!(conf, "shared_preload_libraries = 'pg_stat_statements'")?;
    }
    drop(conf);

    let log = dir.join(SERVER_LOG);
    let out = runner
        .command(&binaries.dir.join("pg_ctl"))
        .arg("start")
        .arg("--pgdata")
        .arg(&data)
        .arg("--log")
        .arg(&log)
        .args(["--wait", "--timeout=60", "--silent"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("running pg_ctl start")?;
    if !out.status.success() {
        bail!(
            "Postgres did not start ({}): {}; the end of {}:\n{}",
            out.status,
            output_text(&out),
            log.display(),
            tail(&log)
        );
    }
    let pid = postmaster_pid(dir).with_context(|| {
        format!(
            "Postgres started but left no readable postmaster.pid; the end of {}:\n{}",
            log.display(),
            tail(&log)
        )
    })?;
    answer(&url).await.with_context(|| {
        format!(
            "Postgres started (pid {pid}) but does not answer; the end of {}:\n{}",
            log.display(),
            tail(&log)
        )
    })?;
    if statement_stats {
        // In the `postgres` database, where `harness perf` reads it (the
        // view holds every database's statements); as the superuser, since
        // the gate's roles may not create extensions. A measurement aid
        // only: without it the cluster serves as before, and `perf` says
        // why its breakdown is missing.
        if let Err(e) = enable_statement_stats(&url).await {
            eprintln!("pg_stat_statements not created in the throwaway cluster: {e:#}");
        }
    }
    state.status = "up".into();
    state.pid = Some(pid);
    write_state(dir, &state)?;
    Ok(Running {
        url,
        pid,
        version: binaries.version.clone(),
        started: true,
    })
}

/// `Some` when the state file says up, the postmaster lives and the URL answers.
async fn already_up(dir: &Path) -> Option<Running> {
    let state = read_state(dir).ok()?;
    let pid = state.pid?;
    if state.status != "up" || !is_postgres(pid) {
        return None;
    }
    answer(&state.url).await.ok()?;
    Some(Running {
        url: state.url,
        pid,
        version: state.version,
        started: false,
    })
}

async fn enable_statement_stats(url: &str) -> Result<()> {
    let pool = gate::db::connect(url).await?;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(())
}

async fn answer(url: &str) -> Result<()> {
    let pool = gate::db::connect(url).await?;
    let one: i32 = sqlx::query_scalar("select 1").fetch_one(&pool).await?;
    pool.close().await;
    anyhow::ensure!(one == 1, "select 1 returned {one}");
    Ok(())
}

/// What [`stop`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// No folder: nothing was up.
    NothingUp,
    /// The server (if it still ran) is gone and so is the folder.
    Removed { pid: Option<u32> },
}

/// Stops the cluster in `dir` and removes the folder.
pub fn stop(dir: &Path) -> Result<Stopped> {
    if !dir.exists() {
        return Ok(Stopped::NothingUp);
    }
    if !dir.join(STATE_FILE).is_file() {
        bail!(
            "{} holds no {STATE_FILE}: it is not a spendgate cluster folder, so it is left alone",
            dir.display()
        );
    }
    let state = read_state(dir).ok();
    let pid = postmaster_pid(dir).or(state.as_ref().and_then(|s| s.pid));
    if let Some(pid) = pid.filter(|&pid| is_postgres(pid)) {
        let binaries = state
            .as_ref()
            .and_then(|s| probe(&s.bin_dir).ok())
            .or_else(|| find_binaries(None).ok());
        let runner = Runner::for_this_process();
        if let (Some(binaries), Ok(runner)) = (binaries, runner) {
            let stopped = runner
                .command(&binaries.dir.join("pg_ctl"))
                .arg("stop")
                .arg("--pgdata")
                .arg(dir.join(DATA_DIR))
                .args(["--mode=fast", "--wait", "--timeout=30", "--silent"])
                .current_dir(dir)
                .stdin(Stdio::null())
                .output();
            if let Ok(out) = &stopped
                && !out.status.success()
            {
                eprintln!("pg_ctl stop failed: {}; killing", output_text(out));
            }
        }
        kill_cluster(pid)?;
    }
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    Ok(Stopped::Removed { pid })
}

/// SIGKILLs the postmaster and its children if they still run, and waits until they are gone.
fn kill_cluster(pid: u32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut signalled = false;
    loop {
        let mut alive = children_of(pid);
        if is_postgres(pid) {
            alive.push(pid);
        }
        if alive.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("Postgres processes {alive:?} are still running after SIGKILL");
        }
        if !signalled || Instant::now() + Duration::from_secs(5) > deadline {
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(alive.iter().map(u32::to_string))
                .stderr(Stdio::null())
                .status();
            signalled = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn check_socket_path(dir: &Path) -> Result<()> {
    let socket = dir.join(format!(".s.PGSQL.{PORT}"));
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        bail!(
            "the socket path {} is {len} bytes, more than the {MAX_SOCKET_PATH} a unix socket \
             allows; choose a shorter --dir",
            socket.display()
        );
    }
    Ok(())
}

impl Runner {
    fn for_this_process() -> Result<Runner> {
        if effective_uid()? != 0 {
            return Ok(Runner::Me);
        }
        let id = |flag: &str| -> Result<u32> {
            let out = Command::new("id")
                .args([flag, "postgres"])
                .output()
                .context("running `id postgres`")?;
            anyhow::ensure!(
                out.status.success(),
                "Postgres refuses to run as root, and there is no `postgres` account to run it \
                 as: `apt-get install postgresql` creates one (or `useradd --system postgres`)"
            );
            Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
        };
        Ok(Runner::Postgres {
            uid: id("-u")?,
            gid: id("-g")?,
        })
    }

    /// `program`, run as this runner's user.
    fn command(self, program: &Path) -> Command {
        match self {
            Runner::Me => Command::new(program),
            Runner::Postgres { .. } => {
                let mut command = if let Some(runuser) = find_tool("runuser") {
                    let mut c = Command::new(runuser);
                    c.args(["-u", "postgres", "--"]);
                    c
                } else {
                    let mut c = Command::new("setpriv");
                    c.args([
                        "--reuid=postgres",
                        "--regid=postgres",
                        "--init-groups",
                        "--",
                    ]);
                    c
                };
                command.arg(program);
                command
            }
        }
    }
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn effective_uid() -> Result<u32> {
    Ok(fs::metadata("/proc/self")
        .context("reading /proc/self to learn the effective user")?
        .uid())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

fn write_state(dir: &Path, state: &State) -> Result<()> {
    let path = dir.join(STATE_FILE);
    fs::write(&path, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("writing {}", path.display()))
}

fn read_state(dir: &Path) -> Result<State> {
    let path = dir.join(STATE_FILE);
    Ok(serde_json::from_slice(&fs::read(&path)?)?)
}

/// The first line of `data/postmaster.pid`.
fn postmaster_pid(dir: &Path) -> Option<u32> {
    fs::read_to_string(dir.join(DATA_DIR).join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// `(comm, state, ppid)` from `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(String, char, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, state, ppid))
}

/// A live (not zombie) process named `postgres` (guards against pid reuse).
fn is_postgres(pid: u32) -> bool {
    matches!(proc_stat(pid), Some((comm, state, _)) if comm == "postgres" && state != 'Z')
}

fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            matches!(proc_stat(pid), Some((_, state, ppid)) if ppid == parent && state != 'Z')
        })
        .collect()
}

fn output_text(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text.trim().to_owned()
}

/// The last lines of a log, or a note that it could not be read.
fn tail(path: &Path) -> String {
    match fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(err) => format!("({} could not be read: {err})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_percent_encodes_the_socket_folder() {
        assert_eq!(
            url_for(Path::new("/tmp/spendgate-pg-0")),
            "postgresql://postgres@%2Ftmp%2Fspendgate-pg-0:5432/postgres"
        );
        assert_eq!(
            url_for(Path::new("/tmp/a b&c")),
            "postgresql://postgres@%2Ftmp%2Fa%20b%26c:5432/postgres"
        );
    }

    #[test]
    fn socket_path_longer_than_a_unix_socket_allows_is_refused() {
        assert!(check_socket_path(Path::new("/tmp/short")).is_ok());
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(100)));
        let err = check_socket_path(&long).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("choose a shorter --dir")),
            "{err:?}"
        );
    }

    #[test]
    fn stop_refuses_a_folder_it_did_not_create() -> Result<()> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("precious.txt"), "keep me")?;
        let err = stop(dir.path()).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("not a spendgate cluster folder")),
            "{err:?}"
        );
        assert!(dir.path().join("precious.txt").is_file());
        assert_eq!(stop(&dir.path().join("absent"))?, Stopped::NothingUp);
        Ok(())
    }

    #[test]
    fn no_binaries_anywhere_says_where_it_looked_and_how_to_fix_it() {
        let err = search(
            "/nonexistent/a:/nonexistent/b".as_ref(),
            Path::new("/nonexistent/pg"),
        )
        .err()
        .map(|e| e.to_string());
        let err = err.unwrap_or_default();
        for needle in [
            "/nonexistent/a:/nonexistent/b",
            "/nonexistent/pg/*/bin",
            "apt-get install postgresql",
        ] {
            assert!(err.contains(needle), "{needle:?} missing from {err:?}");
        }
    }

    #[test]
    fn the_highest_version_wins() -> Result<()> {
        let root = tempfile::tempdir()?;
        for (major, version) in [("9.6", "9.6.24"), ("16", "16.4"), ("13", "13.9")] {
            let bin = root.path().join(major).join("bin");
            fs::create_dir_all(&bin)?;
            for program in ["initdb", "pg_ctl", "postgres"] {
                let script = bin.join(program);
                fs::write(
                    &script,
                    format!("#!/bin/sh\necho '{program} (PostgreSQL) {version}'\n"),
                )?;
                set_mode(&script, 0o755)?;
            }
        }
        let found = search("".as_ref(), root.path())?;
        assert_eq!(found.version, "16.4");
        assert_eq!(found.dir, root.path().join("16").join("bin"));
        Ok(())
    }

    #[test]
    fn an_explicit_folder_without_binaries_is_named_in_the_error() {
        let err = find_binaries(Some(Path::new("/nonexistent/pg/bin")))
            .err()
            .map(|e| format!("{e:#}"));
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("/nonexistent/pg/bin")),
            "{err:?}"
        );
    }
}
