//! The command line: every command, its arguments and its help.
//!
//! Guarantees: the help wraps at 80 columns; no argument carries a secret
//! (secrets come from the configuration file or the environment only, so
//! they never reach a process listing or a shell history).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Configuration: spendgate.toml (--config, SPENDGATE_CONFIG, or ./spendgate.toml)
and SPENDGATE_<KEY> variables; `spendgate config check` shows what is in force.
Exit codes: 0 success, 1 a check failed, 2 the command could not run.";

/// spendgate: the authorization gate between an AI buyer agent and a payment
/// provider, for operators.
#[derive(Debug, Parser)]
#[command(name = "spendgate", version, max_term_width = 80, after_help = AFTER_HELP)]
pub struct Cli {
    /// The configuration file [default: $SPENDGATE_CONFIG, or ./spendgate.toml
    /// when it exists].
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations, as the owner role
    /// (migration_database_url). Safe to run again: applied ones are skipped.
    Migrate,
    /// Serve the gate over HTTP on `bind` until SIGTERM or Ctrl-C, with the
    /// provider `provider` names, signing each grown tenant's log checkpoint
    /// every checkpoint_interval_ms. Needs ledger_key, log_key and
    /// webhook_secret.
    Serve(ServeArgs),
    /// Issue, list and revoke the bearer keys agents and humans call with.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Onboard a tenant from a world file: people, agents, merchants,
    /// catalog, policy and delegations.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Check the ledger's chains with ledger_key.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// Each tenant's log: its ledger entries as an RFC 6962 tree, signed
    /// checkpoints (needs log_key) and proofs anyone can check with
    /// `spendgate-verify`.
    #[command(subcommand)]
    Log(LogCommand),
    /// Write a request's evidence bundle: the request, its policy,
    /// approvals, authority, order and provider events, and its ledger
    /// entries each with a tlog proof against one signed checkpoint.
    Evidence(EvidenceArgs),
    /// Settle every PROVIDER_PENDING request against the provider by its
    /// receipt (the checkout authority's id).
    Reconcile(ReconcileArgs),
    /// The agent's MCP tools over stdio, as an HTTP client of a running
    /// `spendgate serve`: needs only SPENDGATE_AGENT_KEY and SPENDGATE_URL,
    /// reads no configuration file, and refuses to start when DATABASE_URL
    /// is set.
    Mcp,
    /// Show the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Signed mandates: a human's key pair, a policy signed with it, and
    /// its publication as the tenant's next policy version.
    #[command(subcommand)]
    Mandate(MandateCommand),
}

#[derive(Debug, Subcommand)]
pub enum MandateCommand {
    /// Write an Ed25519 key pair: PREFIX.key (the secret, mode 0600) and
    /// PREFIX.pub; prints the line for the `mandate_keys` file.
    Keygen {
        /// The tenant of the human the key is for.
        #[arg(long)]
        tenant: String,
        /// The human (a person of the tenant who may approve).
        #[arg(long)]
        person: String,
        /// Where to write the two files [default: TENANT-PERSON].
        #[arg(long, value_name = "PREFIX")]
        out: Option<PathBuf>,
    },
    /// Print a tenant's first mandate document (version 1 of the policy a
    /// world file holds) for a human to sign.
    Draft {
        /// The world file.
        file: PathBuf,
        #[arg(long)]
        tenant: String,
        /// The signer [default: the tenant's first human who may approve].
        #[arg(long)]
        signer: Option<String>,
    },
    /// Sign a mandate document ({tenant, version, signer, policy}) with a
    /// secret key; writes the signed mandate to stdout or --out.
    Sign {
        file: PathBuf,
        #[arg(long, value_name = "KEY")]
        key: PathBuf,
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Publish a signed mandate as its tenant's next policy version.
    Publish { file: PathBuf },
    /// Verify an AP2 v0.2 open payment mandate (an SD-JWT its issuer signed
    /// with ES256) and map it onto a policy document, ready for `mandate
    /// sign`; a constraint with no counterpart is refused
    /// MANDATE_CONSTRAINT_UNKNOWN and nothing is written (exit 1).
    ImportAp2(crate::commands::mandate_ap2::ImportAp2Args),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Seconds one request may take before it is answered 503 TIMEOUT.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout_secs: u64,
    /// Authenticated requests served at once; the rest wait their turn.
    /// /healthz takes none of these, nor does the provider's webhook.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub concurrency: u64,
    /// Provider webhooks (the one route open without a key) served at
    /// once, apart from --concurrency.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub webhook_concurrency: u64,
    /// Seconds a client has to send its whole body (read before it takes
    /// a permit); past it, 408 BODY_TIMEOUT.
    #[arg(long, value_name = "SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_deadline_secs: u64,
    /// Connections to the database the gate may hold: a few per CPU of the
    /// database server.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pool: u32,
    /// How many of one tenant's proposals may hold a connection at once;
    /// the rest wait in the gate, so one busy tenant never holds the pool.
    #[arg(long, value_name = "N", default_value_t = gate::service::DEFAULT_TURNS_PER_TENANT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub turns_per_tenant: usize,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Issue a key for an agent or a human of a tenant; prints it once on
    /// stdout (only its SHA-256 is stored).
    Issue {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        actor: String,
        /// A read-only key for a human: the console and receipt pages of
        /// the tenant, and no gate operation.
        #[arg(long)]
        auditor: bool,
    },
    /// Revoke a key, named by the key itself or its 16-hex id.
    Revoke { key: String },
    /// List a tenant's keys: ids, actors, dates; never a digest.
    List {
        #[arg(long)]
        tenant: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create or extend tenants from a world file (the format of
    /// scenarios/worlds/*.yaml). The whole file is checked before anything
    /// is written; applying it again changes nothing; nothing is ever
    /// deleted; each change is on the tenant's ledger with who applied it.
    Apply {
        /// The world file.
        file: PathBuf,
        /// Print what would change, and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Who applies it, as recorded on the ledger [default: $USER].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// A signed mandate: a new tenant's first policy, or an existing
        /// tenant's next one (repeat for several tenants).
        #[arg(long, value_name = "FILE")]
        mandate: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Walk each tenant's chain and name its first broken entry (exit 1
    /// when one is broken).
    Verify {
        /// Only this tenant's chain.
        #[arg(long)]
        tenant: Option<String>,
        /// An anchor printed earlier by `spendgate ledger anchor`: also name a
        /// chain cut below, or rewritten at, the head it records.
        #[arg(long, value_name = "FILE")]
        anchor: Option<PathBuf>,
    },
    /// Verify, then print each tenant's head as JSON, to keep outside the
    /// database for `verify --anchor`.
    Anchor,
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Sign a checkpoint of each tenant's tree as its ledger holds it now
    /// (or of one tenant's), keep it, and print the signed note.
    Checkpoint {
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Print a tenant's log verifier key
    /// (`spendgate/<tenant>+keyid+base64(0x01||public key)`).
    PublicKey {
        #[arg(long)]
        tenant: String,
    },
    /// Write an entry's `c2sp.org/tlog-proof@v1` proof against the newest
    /// kept checkpoint that covers it (one is signed when none is).
    Prove {
        #[arg(long)]
        tenant: String,
        /// The entry's number in the tenant's ledger (leaf index seq - 1).
        #[arg(long)]
        seq: i64,
        /// Where to write the proof [default: stdout].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print the consistency proof (`old <size>` then one base64 hash a
    /// line) from an older size to the newest kept checkpoint, for
    /// `spendgate-verify witness`.
    Consistency {
        #[arg(long)]
        tenant: String,
        /// The older tree size (a checkpoint a witness kept).
        #[arg(long, value_name = "SIZE")]
        from: u64,
        /// The newer checkpoint's size [default: the newest kept].
        #[arg(long, value_name = "SIZE")]
        to: Option<u64>,
        /// Also write the newer checkpoint's note here.
        #[arg(long, value_name = "FILE")]
        checkpoint_out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct EvidenceArgs {
    /// The request's id.
    pub request: String,
    #[arg(long)]
    pub tenant: String,
    /// The folder to write the bundle to (created; must be empty if it exists).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Only this tenant [default: every tenant].
    #[arg(long)]
    pub tenant: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting in force and where it came from, secrets
    /// redacted; exit 2 when a setting that is set is not valid.
    Check,
}
