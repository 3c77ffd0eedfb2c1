//! `harness db`: Postgres on any machine.
//!
//! Guarantees:
//! - `db up` prints exactly one line on stdout,
//!   `DATABASE_URL=<app url> MIGRATION_DATABASE_URL=<owner url>
//!   ONBOARD_DATABASE_URL=<onboarding url>`, once a throwaway cluster
//!   answers, the three database roles exist and the database
//!   `spendgate`, owned by the owner role, exists (so `export $(harness db
//!   up)` sets all three, and the migrations may create tables on Postgres 15 and
//!   later, whose `public` schema only the database's owner may create in);
//!   if one is already up in the folder it says so and prints the same line.
//!   Everything else goes to stderr. The cluster outlives the command.
//! - `db down` leaves no server process and no folder; with nothing up it
//!   says so and exits 0.
//! - `db run -- CMD ARGS...` runs CMD with `DATABASE_URL` in its environment:
//!   the caller's if set, as is (with the caller's `MIGRATION_DATABASE_URL`,
//!   if any), otherwise a throwaway cluster's, removed afterwards whether CMD
//!   succeeds, fails, or the harness gets SIGINT or SIGTERM (which is passed
//!   on to CMD). For a throwaway cluster it creates the three roles
//!   (`spendgate_owner`, `spendgate_app`, `spendgate_onboard`) and exports
//!   their URLs: `DATABASE_URL` the application role's,
//!   `MIGRATION_DATABASE_URL` the owner's, `ONBOARD_DATABASE_URL` the
//!   onboarding role's. It exits with CMD's exit code (128 + signal when CMD was killed
//!   by one).
//!
//! The cluster itself lives in [`cluster`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use tokio::signal::unix::{SignalKind, signal};

pub mod cluster;
pub mod server;

pub use server::Server;

/// `harness db ...`
#[derive(Debug, Args)]
pub struct DbArgs {
    #[command(subcommand)]
    command: DbCommand,
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Start a throwaway Postgres cluster (unix socket only), create the owner and application
    /// roles, and print `DATABASE_URL=...` (the superuser's: both roles' URLs derive from it).
    ///
    /// Use it as `export "$(harness db up)"`. The cluster keeps running until `harness db down`.
    Up(UpArgs),
    /// Stop the throwaway cluster and remove its folder.
    Down(DirArgs),
    /// Run a command with DATABASE_URL (the application role's) and MIGRATION_DATABASE_URL
    /// (the owner's) set, bringing up (and then removing) a throwaway cluster unless
    /// DATABASE_URL is already set (then both are passed on as the caller set them).
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct DirArgs {
    /// The cluster's folder (data, socket, logs, state file)
    /// [default: $TMPDIR/spendgate-pg-<uid>].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BinArgs {
    /// The folder holding initdb, pg_ctl and postgres [default: the highest version on PATH
    /// or under /usr/lib/postgresql/*/bin].
    #[arg(long, value_name = "DIR")]
    pg_bin: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct UpArgs {
    #[command(flatten)]
    dir: DirArgs,
    #[command(flatten)]
    bin: BinArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    bin: BinArgs,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// Runs `harness db <subcommand>`.
pub fn run(args: DbArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        DbCommand::Up(up) => runtime.block_on(db_up(&up)),
        DbCommand::Down(down) => db_down(&dir_or_default(&down)),
        DbCommand::Run(run) => runtime.block_on(db_run(&run)),
    }
}

fn dir_or_default(args: &DirArgs) -> PathBuf {
    let dir = args.dir.clone().unwrap_or_else(cluster::default_dir);
    std::path::absolute(&dir).unwrap_or(dir)
}

async fn db_up(args: &UpArgs) -> Result<ExitCode> {
    let dir = dir_or_default(&args.dir);
    let running = cluster::start(&dir, args.bin.pg_bin.as_deref()).await?;
    let urls = gate::db::ensure_roles(&running.url)
        .await
        .context("creating the database roles")?;
    eprintln!(
        "roles {owner} (migrations), {app} (the gate) and {onboard} (onboarding) exist",
        owner = gate::db::OWNER_ROLE,
        app = gate::db::APP_ROLE,
        onboard = gate::db::ONBOARD_ROLE,
    );
    let how_to_stop = match &args.dir.dir {
        Some(_) => format!("harness db down --dir {}", dir.display()),
        None => "harness db down".to_owned(),
    };
    if running.started {
        eprintln!(
            "started Postgres {} (pid {}) in {}; stop it with `{how_to_stop}`",
            running.version,
            running.pid,
            dir.display()
        );
    } else {
        eprintln!(
            "a cluster is already up in {} (Postgres {}, pid {}); stop it with `{how_to_stop}`",
            dir.display(),
            running.version,
            running.pid
        );
    }
    let app = in_database(&urls.app, SERVED_DATABASE)?;
    let owner = in_database(&urls.owner, SERVED_DATABASE)?;
    let onboard = in_database(
        &gate::db::with_user(&urls.app, gate::db::ONBOARD_ROLE)?,
        SERVED_DATABASE,
    )?;
    create_owned_database(&running.url, SERVED_DATABASE)
        .await
        .with_context(|| format!("creating the database {SERVED_DATABASE}"))?;
    eprintln!(
        "database {SERVED_DATABASE} is owned by {owner_role}; export both URLs with \
         `export $(harness db up)`",
        owner_role = gate::db::OWNER_ROLE,
    );
    println!(
        "{app_var}={app} {owner_var}={owner} {onboard_var}={onboard}",
        app_var = gate::db::DATABASE_URL_ENV,
        owner_var = gate::db::MIGRATION_DATABASE_URL_ENV,
        onboard_var = gate::db::ONBOARD_DATABASE_URL_ENV,
    );
    Ok(ExitCode::SUCCESS)
}

/// The database `db up` makes for a served gate: owned by the owner role, so
/// the migrations may create their tables in its `public` schema (which
/// Postgres 15 and later keep from every role but the database's owner).
const SERVED_DATABASE: &str = "spendgate";

/// `url` (a cluster URL ending in `/postgres`) naming `database` instead.
fn in_database(url: &str, database: &str) -> Result<String> {
    url.strip_suffix("/postgres")
        .map(|head| format!("{head}/{database}"))
        .with_context(|| {
            format!(
                "{} does not name the postgres database",
                gate::db::redact_url(url)
            )
        })
}

/// Creates `database` owned by the owner role, unless it exists.
async fn create_owned_database(admin_url: &str, database: &str) -> Result<()> {
    let pool = gate::db::connect(admin_url).await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(database)
            .fetch_one(&pool)
            .await?;
    if !exists {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE {database} OWNER {}",
            gate::db::OWNER_ROLE
        )))
        .execute(&pool)
        .await?;
    }
    pool.close().await;
    Ok(())
}

fn db_down(dir: &Path) -> Result<ExitCode> {
    match cluster::stop(dir)? {
        cluster::Stopped::NothingUp => {
            eprintln!("no cluster is up in {}: nothing to stop", dir.display());
        }
        cluster::Stopped::Removed { pid: Some(pid) } => {
            eprintln!("stopped Postgres (pid {pid}) and removed {}", dir.display());
        }
        cluster::Stopped::Removed { pid: None } => {
            eprintln!("no server was running; removed {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn db_run(args: &RunArgs) -> Result<ExitCode> {
    // Registered first, so a Ctrl-C while the cluster starts cannot orphan it.
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;

    let existing = std::env::var(gate::db::DATABASE_URL_ENV)
        .ok()
        .filter(|url| !url.trim().is_empty());
    if let Some(url) = existing {
        let env = [(gate::db::DATABASE_URL_ENV, url)];
        return run_child(&args.command, &env, &mut interrupt, &mut terminate).await;
    }

    let dir = tempfile::Builder::new()
        .prefix("spendgate-pg-run-")
        .tempdir()
        .context("creating a folder for the throwaway cluster")?
        .keep();
    let running = match cluster::start(&dir, args.bin.pg_bin.as_deref()).await {
        Ok(running) => running,
        Err(err) => {
            // start cleans up its own folder; this removes the empty one tempfile made.
            let _ = std::fs::remove_dir(&dir);
            return Err(err);
        }
    };
    eprintln!(
        "started a throwaway Postgres {} in {} for this command",
        running.version,
        dir.display()
    );
    let outcome = match gate::db::ensure_roles(&running.url).await {
        Ok(urls) => match gate::db::with_user(&urls.app, gate::db::ONBOARD_ROLE) {
            Ok(onboard) => {
                let env = [
                    (gate::db::DATABASE_URL_ENV, urls.app),
                    (gate::db::MIGRATION_DATABASE_URL_ENV, urls.owner),
                    (gate::db::ONBOARD_DATABASE_URL_ENV, onboard),
                ];
                run_child(&args.command, &env, &mut interrupt, &mut terminate).await
            }
            Err(err) => Err(anyhow::Error::new(err).context("the onboarding role's URL")),
        },
        Err(err) => Err(anyhow::Error::new(err).context("creating the database roles")),
    };
    match (&outcome, cluster::stop(&dir)) {
        (_, Ok(cluster::Stopped::Removed { .. })) => {
            eprintln!(
                "stopped the throwaway Postgres and removed {}",
                dir.display()
            );
        }
        (_, Ok(cluster::Stopped::NothingUp)) => {
            eprintln!("warning: {} had already gone", dir.display());
        }
        (Ok(_), Err(err)) => {
            return Err(err.context(format!("tearing down the cluster in {}", dir.display())));
        }
        (Err(_), Err(err)) => eprintln!("warning: tearing down {} failed: {err:#}", dir.display()),
    }
    outcome
}

/// Runs the command to completion, passing SIGINT/SIGTERM on; returns its exit code.
async fn run_child(
    command: &[OsString],
    env: &[(&str, String)],
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> Result<ExitCode> {
    let (program, args) = command.split_first().context("no command given")?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .with_context(|| format!("running {}", program.to_string_lossy()))?;
    let received = tokio::select! {
        status = child.wait() => return Ok(exit_code(status?)),
        _ = interrupt.recv() => "INT",
        _ = terminate.recv() => "TERM",
    };
    eprintln!("got SIG{received}: passing it on to the command, then cleaning up");
    if let Some(pid) = child.id() {
        let _ = tokio::process::Command::new("kill")
            .args(["-s", received, &pid.to_string()])
            .status()
            .await;
    }
    let status = match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            eprintln!("the command did not stop within 30 s of SIG{received}: killing it");
            child.kill().await?;
            child.wait().await?
        }
    };
    let signal_number: u8 = if received == "INT" { 2 } else { 15 };
    // A command that handled the signal and exited normally still ends this run as interrupted.
    Ok(match status.code() {
        Some(0) | None => ExitCode::from(128 + signal_number),
        Some(_) => exit_code(status),
    })
}

fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        (None, None) => ExitCode::FAILURE,
    }
}
