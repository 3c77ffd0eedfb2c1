//! `spendgate-verify`: offline checks of checkpoints, inclusion proofs and
//! log consistency, with public keys only.
//!
//! Exit status: 0 when the check passed, 1 when it failed (the message names
//! the first thing that failed), 2 when it could not run (a file that cannot
//! be read or written, a malformed key or command line).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use spendgate_verify::checkpoint;
use spendgate_verify::merkle::{self, hash_to_base64};
use spendgate_verify::note::VerifierKey;
use spendgate_verify::proof::TlogProof;
use spendgate_verify::witness::{ConsistencyProof, Witness};

#[derive(Parser)]
#[command(
    name = "spendgate-verify",
    version,
    about = "Check spendgate's log evidence offline: exit 0 passed, 1 failed, 2 could not run"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct LogKey {
    /// The log's verifier key, `name+keyid+base64(0x01||public key)`.
    #[arg(long)]
    key: String,
    /// The log's origin line (default: the key's name).
    #[arg(long)]
    origin: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Verify a signed checkpoint under the log's key.
    VerifyCheckpoint {
        #[command(flatten)]
        log: LogKey,
        /// The checkpoint note.
        checkpoint: PathBuf,
    },
    /// Verify a `c2sp.org/tlog-proof@v1` file for one entry.
    VerifyInclusion {
        #[command(flatten)]
        log: LogKey,
        /// The entry's bytes (its leaf hash is SHA-256(0x00 || bytes)).
        #[arg(
            long,
            conflicts_with = "leaf_hash",
            required_unless_present = "leaf_hash"
        )]
        entry: Option<PathBuf>,
        /// The entry's leaf hash, in base64.
        #[arg(long)]
        leaf_hash: Option<String>,
        /// The `.tlog-proof` file.
        proof: PathBuf,
    },
    /// Check an evidence bundle written by `spendgate evidence`: its
    /// checkpoint, every entry against its tlog proof and that checkpoint,
    /// and each raw file (the proposal's and the events' bytes as received)
    /// against the digest its proved entry names; names the first thing
    /// that fails.
    VerifyBundle {
        #[command(flatten)]
        log: LogKey,
        /// The bundle's folder.
        dir: PathBuf,
    },
    /// Accept a new checkpoint only if it is consistent with the one in the
    /// state file, and then keep it there.
    Witness {
        /// The last accepted checkpoint (absent: nothing accepted yet).
        #[arg(long)]
        state: PathBuf,
        #[command(flatten)]
        log: LogKey,
        /// The new checkpoint note.
        checkpoint: PathBuf,
        /// The consistency proof: `old <size>` then one base64 hash a line.
        proof: PathBuf,
    },
}

/// Why a command did not pass.
enum Stop {
    Failed(String),
    CouldNotRun(String),
}

fn read(path: &Path) -> Result<Vec<u8>, Stop> {
    std::fs::read(path)
        .map_err(|e| Stop::CouldNotRun(format!("cannot read {}: {e}", path.display())))
}

fn key(log: &LogKey) -> Result<VerifierKey, Stop> {
    VerifierKey::parse(&log.key).map_err(|e| Stop::CouldNotRun(format!("--key: {e}")))
}

fn failed(what: &Path, e: impl std::fmt::Display) -> Stop {
    Stop::Failed(format!("{}: {e}", what.display()))
}

fn run(cli: Cli) -> Result<String, Stop> {
    match cli.command {
        Command::VerifyCheckpoint { log, checkpoint } => {
            let k = key(&log)?;
            let cp = checkpoint::open(&read(&checkpoint)?, &k, log.origin.as_deref())
                .map_err(|e| failed(&checkpoint, e))?;
            Ok(format!(
                "checkpoint verified: {} size {} root {}",
                cp.origin,
                cp.size,
                cp.root_base64()
            ))
        }
        Command::VerifyInclusion {
            log,
            entry,
            leaf_hash,
            proof,
        } => {
            let k = key(&log)?;
            let leaf = match (entry, leaf_hash) {
                (Some(path), _) => merkle::leaf_hash(&read(&path)?),
                (None, Some(b64)) => {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD
                        .decode(&b64)
                        .ok()
                        .and_then(|b| merkle::Hash::try_from(b.as_slice()).ok())
                        .ok_or_else(|| {
                            Stop::CouldNotRun("--leaf-hash is not the base64 of 32 bytes".into())
                        })?
                }
                (None, None) => {
                    return Err(Stop::CouldNotRun("give --entry or --leaf-hash".into()));
                }
            };
            let parsed = TlogProof::parse(&read(&proof)?).map_err(|e| failed(&proof, e))?;
            let cp = parsed
                .verify(&leaf, &k, log.origin.as_deref())
                .map_err(|e| failed(&proof, e))?;
            Ok(format!(
                "entry {} (leaf hash {}) is included in {} size {} root {}",
                parsed.index,
                hash_to_base64(&leaf),
                cp.origin,
                cp.size,
                cp.root_base64()
            ))
        }
        Command::VerifyBundle { log, dir } => {
            let k = key(&log)?;
            let files = spendgate_verify::bundle_dir::read(&dir)
                .map_err(|e| Stop::CouldNotRun(e.to_string()))?;
            let checked = spendgate_verify::bundle_dir::verify(&files, &k, log.origin.as_deref())
                .map_err(|e| failed(&dir, e))?;
            Ok(format!(
                "bundle {} verified: {checked} items, {} entries, {} raw files",
                dir.display(),
                files.entries.len(),
                files.raw.len()
            ))
        }
        Command::Witness {
            state,
            log,
            checkpoint,
            proof,
        } => {
            let k = key(&log)?;
            let old = match std::fs::read_to_string(&state) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(Stop::CouldNotRun(format!(
                        "cannot read {}: {e}",
                        state.display()
                    )));
                }
            };
            let mut witness = Witness::new(k, log.origin.as_deref(), old.as_deref())
                .map_err(|e| Stop::CouldNotRun(format!("{}: {e}", state.display())))?;
            let note = String::from_utf8(read(&checkpoint)?)
                .map_err(|_| failed(&checkpoint, "the checkpoint is not valid UTF-8"))?;
            let consistency =
                ConsistencyProof::parse(&read(&proof)?).map_err(|e| failed(&proof, e))?;
            let accepted = witness
                .check(&note, &consistency)
                .map_err(|e| Stop::Failed(e.to_string()))?;
            write_state(&state, &note)?;
            Ok(format!(
                "accepted {} size {} root {}",
                accepted.origin,
                accepted.size,
                accepted.root_base64()
            ))
        }
    }
}

/// Replaces the state file by writing a sibling and renaming it over.
fn write_state(path: &Path, note: &str) -> Result<(), Stop> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, note)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Stop::CouldNotRun(format!("cannot write {}: {e}", path.display())))
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(msg) => {
            println!("ok: {msg}");
            ExitCode::SUCCESS
        }
        Err(Stop::Failed(msg)) => {
            eprintln!("FAILED: {msg}");
            ExitCode::from(1)
        }
        Err(Stop::CouldNotRun(msg)) => {
            eprintln!("could not run: {msg}");
            ExitCode::from(2)
        }
    }
}
