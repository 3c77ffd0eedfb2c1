//! `harness db` end to end, through the built binary: `up` prints a URL that
//! psql and sqlx both accept, `down` leaves no folder and no server process,
//! `run` tears its cluster down whatever the command does, and failures say
//! what went wrong. Each test brings up its own cluster in its own folder.
//!
//! These tests need the machine's Postgres binaries (not `DATABASE_URL`). If
//! they are missing the tests fail, saying `apt-get install postgresql` fixes
//! it, unless `SPENDGATE_SKIP_DB=1`, in which case they are skipped.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{skip, workdir};

/// The harness binary, never inheriting the caller's `DATABASE_URL` or `MIGRATION_DATABASE_URL`.
fn harness() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("MIGRATION_DATABASE_URL");
    command
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `db up --dir`, which must succeed and print exactly
/// `DATABASE_URL=<app url> MIGRATION_DATABASE_URL=<owner url>
/// ONBOARD_DATABASE_URL=<onboarding url>`: the owner's URL.
fn up(dir: &Path) -> (String, String) {
    url_printed_by(run(harness().args(["db", "up", "--dir"]).arg(dir)))
}

/// The owner's URL and stderr of a successful `db up`, which prints exactly
/// one line: `DATABASE_URL=<app url> MIGRATION_DATABASE_URL=<owner url>
/// ONBOARD_DATABASE_URL=<onboarding url>`, each naming the database
/// `spendgate`, the application role's, the owner role's and the onboarding
/// role's.
fn url_printed_by(out: Output) -> (String, String) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "db up failed: {stderr}");
    let line = stdout
        .strip_suffix('\n')
        .filter(|line| !line.contains('\n'))
        .unwrap_or_else(|| panic!("db up printed {stdout:?}, not one line"));
    let parts: Vec<&str> = line.split(' ').collect();
    let (app, owner, onboard) = match parts.as_slice() {
        [a, o, b] => a
            .strip_prefix("DATABASE_URL=")
            .zip(o.strip_prefix("MIGRATION_DATABASE_URL="))
            .zip(b.strip_prefix("ONBOARD_DATABASE_URL="))
            .map(|((a, o), b)| (a, o, b)),
        _ => None,
    }
    .unwrap_or_else(|| {
        panic!(
            "db up printed {line:?}, not DATABASE_URL=... MIGRATION_DATABASE_URL=... \
             ONBOARD_DATABASE_URL=..."
        )
    });
    assert!(
        onboard.contains("spendgate_onboard@") && onboard.ends_with("/spendgate"),
        "{onboard}"
    );
    assert!(
        app.contains("spendgate_app@") && app.ends_with("/spendgate"),
        "{app}"
    );
    assert!(
        owner.contains("spendgate_owner@") && owner.ends_with("/spendgate"),
        "{owner}"
    );
    (owner.to_owned(), stderr)
}

fn postmaster_pid(dir: &Path) -> u32 {
    let pid_file = dir.join("data/postmaster.pid");
    fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()))
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {}", pid_file.display()))
}

/// Processes whose command line mentions `dir` (the postmaster runs with `-D <dir>/data`).
fn processes_mentioning(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|raw| text(&raw).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(&needle) && !cmdline.contains("db_cli"))
        .collect()
}

/// Waits (up to 10 s) until no process mentions `dir`; returns the ones left.
fn gone(dir: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn psql_select_1(url: &str) {
    let Ok(out) = Command::new("psql")
        .args([url, "-Atc", "select 1"])
        .output()
    else {
        eprintln!("psql is not on PATH: checked with sqlx only");
        return;
    };
    assert!(out.status.success(), "psql failed: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "1");
}

async fn sqlx_select_1(url: &str) {
    let pool = gate::db::connect(url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one, 1);
    pool.close().await;
}

/// A process that runs (a zombie waiting for init to reap it does not).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

fn effective_uid() -> u32 {
    fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

/// The socket folder a `postgresql://<user>@<percent-encoded dir>:5432/postgres` URL
/// names (the user: `postgres`, or `db run`'s `spendgate_app` and `spendgate_owner`).
fn socket_dir(url: &str) -> PathBuf {
    let host = url
        .strip_prefix("postgresql://")
        .and_then(|rest| rest.split_once('@'))
        .filter(|(user, _)| ["postgres", "spendgate_app", "spendgate_owner"].contains(user))
        .and_then(|(_, rest)| rest.split_once(':'))
        .map(|(host, _)| host)
        .unwrap_or_else(|| panic!("unexpected URL {url}"));
    let bytes = host.as_bytes();
    let mut decoded = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            decoded.push(u8::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{url}: {e}")));
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(text(&decoded))
}

#[tokio::test]
async fn up_prints_a_working_url_and_down_leaves_nothing_behind() {
    if skip() {
        return;
    }
    let work = workdir();
    let dir = work.path().join("pg");
    let (url, _) = up(&dir);
    assert_eq!(socket_dir(&url), dir);
    let pid = postmaster_pid(&dir);
    assert!(alive(pid));
    psql_select_1(&url);
    sqlx_select_1(&url).await;
    // The owner may create tables in the database's public schema, which
    // Postgres 15 and later allow only the database's owner.
    let owner = gate::db::connect(&url).await.unwrap();
    for sql in [
        "CREATE TABLE owner_may_create (x int)",
        "DROP TABLE owner_may_create",
    ] {
        sqlx::query(sql)
            .execute(&owner)
            .await
            .unwrap_or_else(|e| panic!("the owner cannot create a table: {e}"));
    }
    owner.close().await;

    // Idempotent: a second `up` finds it and prints the same URL.
    let (again, stderr) = up(&dir);
    assert_eq!(again, url);
    assert!(stderr.contains("already up"), "{stderr}");
    assert_eq!(postmaster_pid(&dir), pid);

    let down = run(harness().args(["db", "down", "--dir"]).arg(&dir));
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert_eq!(gone(&dir), Vec::<String>::new());
    assert!(!alive(pid), "pid {pid} lives on");

    let again = run(harness().args(["db", "down", "--dir"]).arg(&dir));
    assert!(again.status.success());
    assert!(text(&again.stderr).contains("nothing to stop"));
}

#[tokio::test]
async fn up_works_for_an_ordinary_user() {
    if skip() {
        return;
    }
    if effective_uid() != 0 {
        eprintln!("not root: the other tests already run the ordinary-user path");
        return;
    }
    // As root, run the harness itself as `nobody`: the cluster must run as nobody too.
    let work = workdir();
    // nobody's own folder, so that nobody can create and remove the cluster folder in it.
    let home = work.path().join("nobody");
    fs::create_dir(&home).unwrap_or_else(|e| panic!("{e}"));
    let nobody = |flag: &str| -> u32 {
        text(&run(Command::new("id").args([flag, "nobody"])).stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("no nobody account: {e}"))
    };
    std::os::unix::fs::chown(&home, Some(nobody("-u")), Some(nobody("-g")))
        .unwrap_or_else(|e| panic!("{e}"));
    // A copy of the harness nobody can run, wherever the build folder lives.
    let binary = home.join("harness");
    let copied = run(Command::new("cp")
        .arg(env!("CARGO_BIN_EXE_harness"))
        .arg(&binary));
    assert!(copied.status.success(), "{}", text(&copied.stderr));
    let as_nobody = |args: &[&str]| {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "nobody", "--"])
            .arg(&binary)
            .args(args)
            .env_remove("DATABASE_URL");
        command
    };
    let dir = home.join("pg");
    let (url, _) = url_printed_by(run(as_nobody(&["db", "up", "--dir"]).arg(&dir)));
    let pid = postmaster_pid(&dir);
    let owner = fs::metadata(format!("/proc/{pid}")).map(|m| m.uid());
    assert_eq!(
        owner.ok(),
        Some(nobody("-u")),
        "the server does not run as nobody"
    );
    sqlx_select_1(&url).await;
    let down = run(as_nobody(&["db", "down", "--dir"]).arg(&dir));
    assert!(down.status.success(), "{}", text(&down.stderr));
    assert!(!dir.exists());
    assert_eq!(gone(&dir), Vec::<String>::new());
}

#[test]
fn run_gives_the_command_a_cluster_and_removes_it_whatever_the_exit_code() {
    if skip() {
        return;
    }
    let work = workdir();
    let seen = work.path().join("url");
    let script = format!(
        "echo \"$DATABASE_URL\" > {}; if command -v psql >/dev/null; then \
         psql \"$DATABASE_URL\" -Atc 'select 1' || exit 9; fi; exit 3",
        seen.display()
    );
    let out = run(harness().args(["db", "run", "--", "sh", "-c", &script]));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let url = fs::read_to_string(&seen).unwrap_or_else(|e| panic!("{e}"));
    let dir = socket_dir(url.trim());
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert_eq!(gone(&dir), Vec::<String>::new());
}

/// `db run` creates the two roles and hands the command the application
/// role's URL as DATABASE_URL and the owner's as MIGRATION_DATABASE_URL.
#[test]
fn run_exports_the_application_and_owner_urls() {
    if skip() {
        return;
    }
    let work = workdir();
    let seen = work.path().join("urls");
    let has_psql = Command::new("psql").arg("--version").output().is_ok();
    let who = "SELECT current_user || ' ' || rolsuper || ' ' || rolcreatedb FROM pg_roles \
               WHERE rolname = current_user";
    let script = if has_psql {
        format!(
            "{{ echo \"$DATABASE_URL\"; echo \"$MIGRATION_DATABASE_URL\"; \
             psql \"$DATABASE_URL\" -Atc \"{who}\" && psql \"$MIGRATION_DATABASE_URL\" -Atc \"{who}\"; }} > {}",
            seen.display()
        )
    } else {
        format!(
            "{{ echo \"$DATABASE_URL\"; echo \"$MIGRATION_DATABASE_URL\"; }} > {}",
            seen.display()
        )
    };
    let out = run(harness().args(["db", "run", "--", "sh", "-c", &script]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = fs::read_to_string(&seen)
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(str::to_owned)
        .collect();
    let app = lines.first().map(String::as_str).unwrap_or_default();
    let owner = lines.get(1).map(String::as_str).unwrap_or_default();
    assert!(app.starts_with("postgresql://spendgate_app@"), "{lines:?}");
    assert!(
        owner.starts_with("postgresql://spendgate_owner@"),
        "{lines:?}"
    );
    assert_eq!(socket_dir(app), socket_dir(owner));
    if has_psql {
        assert_eq!(
            lines.get(2..).unwrap_or_default(),
            ["spendgate_app false false", "spendgate_owner false true"],
            "{lines:?}"
        );
    } else {
        eprintln!(
            "psql is not on PATH: the roles' attributes are checked by gate/tests/integration/db_roles.rs"
        );
    }
}

#[test]
fn run_uses_an_existing_database_url_as_is() {
    let out = run(harness()
        .env("DATABASE_URL", "postgresql://someone@db.example/x")
        .args(["db", "run", "--", "sh", "-c"])
        .arg("test \"$DATABASE_URL\" = postgresql://someone@db.example/x"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("throwaway"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_cleans_up_when_terminated() {
    if skip() {
        return;
    }
    let work = workdir();
    let seen = work.path().join("url");
    let child = harness()
        .args(["db", "run", "--", "sh", "-c"])
        .arg(format!(
            "echo \"$DATABASE_URL\" > {}.tmp && mv {0}.tmp {0} && exec sleep 60",
            seen.display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = fs::read_to_string(&seen).unwrap_or_else(|e| panic!("{e}"));
    let dir = socket_dir(url.trim());
    assert!(dir.exists());
    let killed = run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    assert!(killed.status.success());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert_eq!(gone(&dir), Vec::<String>::new());
}

/// A fake Postgres whose programs report `version` and otherwise run `body`.
fn fake_binaries(root: &Path, version: &str, initdb: &str, pg_ctl: &str) -> PathBuf {
    let bin = root.join("fakebin");
    fs::create_dir(&bin).unwrap_or_else(|e| panic!("{e}"));
    for (program, body) in [
        ("initdb", initdb),
        ("pg_ctl", pg_ctl),
        ("postgres", "exit 1"),
    ] {
        // Written by a child process, so no writable descriptor of ours can make it busy.
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{program} (PostgreSQL) {version}'; \
             exit 0; fi\n{body}\n"
        );
        let path = bin.join(program);
        let status = Command::new("sh")
            .args([
                "-c",
                "printf '%s' \"$1\" > \"$2\" && chmod 755 \"$2\"",
                "sh",
            ])
            .arg(&script)
            .arg(&path)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success());
    }
    bin
}

#[test]
fn an_initdb_failure_shows_its_log_and_leaves_no_folder() {
    let work = workdir();
    let bin = fake_binaries(
        work.path(),
        "17.0",
        "echo 'initdb: error: the disk is on fire' >&2; exit 1",
        "exit 1",
    );
    let dir = work.path().join("pg");
    let out = run(harness()
        .args(["db", "up", "--dir"])
        .arg(&dir)
        .arg("--pg-bin")
        .arg(&bin));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("initdb failed"), "{stderr}");
    assert!(stderr.contains("the disk is on fire"), "{stderr}");
    assert!(out.stdout.is_empty(), "printed {:?}", text(&out.stdout));
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn a_server_that_does_not_start_shows_its_log_and_leaves_no_folder() {
    let work = workdir();
    let bin = fake_binaries(
        work.path(),
        "17.0",
        // initdb "succeeds": it makes the data folder and its config file.
        "mkdir -p \"$2\" && touch \"$2/postgresql.conf\"",
        "echo 'FATAL:  could not create lock file' >> \"$5\"; \
         echo 'pg_ctl: server did not start in time' >&2; exit 1",
    );
    let dir = work.path().join("pg");
    let out = run(harness()
        .args(["db", "up", "--dir"])
        .arg(&dir)
        .arg("--pg-bin")
        .arg(&bin));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Postgres did not start"), "{stderr}");
    assert!(stderr.contains("server did not start in time"), "{stderr}");
    assert!(stderr.contains("could not create lock file"), "{stderr}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn missing_binaries_are_named() {
    let work = workdir();
    let out = run(harness()
        .args(["db", "up", "--dir"])
        .arg(work.path().join("pg"))
        .args(["--pg-bin", "/nonexistent/pg/bin"]));
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("/nonexistent/pg/bin"), "{stderr}");
}

#[test]
fn up_refuses_a_folder_it_did_not_create() {
    let work = workdir();
    fs::write(work.path().join("precious.txt"), "keep me").unwrap_or_else(|e| panic!("{e}"));
    let out = run(harness().args(["db", "up", "--dir"]).arg(work.path()));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not a spendgate cluster folder"));
    assert!(work.path().join("precious.txt").is_file());
    let out = run(harness().args(["db", "down", "--dir"]).arg(work.path()));
    assert!(!out.status.success());
    assert!(work.path().join("precious.txt").is_file());
}
