//! The crate's one error type.
//!
//! Guarantees: every failure that stops a mutation run, a registry check or a
//! completeness walk is one of these variants, and its message names what the
//! person fixing it needs: the registry entry id, the file, the function, the
//! test. Per-mutant results (caught, missed, unviable, timeout) are *not*
//! errors; they are [`crate::outcome::Verdict`]s.

use std::path::PathBuf;

/// Everything that can stop the mutation machinery.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read, written or copied.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The registry file is not valid YAML of the expected shape.
    #[error("{path}: not a valid mutation registry: {message}")]
    RegistryFormat { path: PathBuf, message: String },

    /// One registry entry is inconsistent on its own (bad id, no tests,
    /// operator that does not fit its kind, ...).
    #[error("registry entry `{id}`: {message}")]
    RegistryEntry { id: String, message: String },

    /// A source locator no longer picks exactly one node: the code moved
    /// under the registry. The run stops; nothing is judged.
    #[error(
        "registry drift: entry `{id}`: {file}: fn `{function}`, {selector}: found {found}, expected exactly one"
    )]
    Drift {
        id: String,
        file: PathBuf,
        function: String,
        selector: String,
        found: String,
    },

    /// A schema locator names an object that no migration mentions.
    #[error(
        "registry drift: entry `{id}`: {object_kind} `{object}` on `{table}` is not named in any migration under {dir}"
    )]
    SchemaDrift {
        id: String,
        object_kind: String,
        object: String,
        table: String,
        dir: PathBuf,
    },

    /// A privilege guard's privilege is held by the application role after
    /// the migrations: the file named granted it last.
    #[error(
        "registry drift: entry `{id}`: privilege {privilege} on `{table}` is granted to {role} by {file}"
    )]
    PrivilegeGranted {
        id: String,
        privilege: String,
        table: String,
        role: String,
        file: PathBuf,
    },

    /// The located node exists but the operator cannot be applied to it so
    /// that the crate still builds (a `let` binding, a block's value, an
    /// `if let` condition, ...).
    #[error("registry entry `{id}`: {file}:{line}: {message}")]
    Unmutable {
        id: String,
        file: PathBuf,
        line: usize,
        message: String,
    },

    /// A source file does not parse with syn.
    #[error("{file}: does not parse as Rust: {message}")]
    Parse { file: PathBuf, message: String },

    /// A rewrite or an instrumentation produced text that no longer parses:
    /// a bug in this crate, or a registry entry that selects something odd.
    #[error("{file}: the {what} no longer parses ({message})")]
    EditBroke {
        file: PathBuf,
        what: String,
        message: String,
    },

    /// Two edits of one file overlap in a way that cannot be applied.
    #[error("{file}: overlapping edits at bytes {first:?} and {second:?}")]
    EditConflict {
        file: PathBuf,
        first: std::ops::Range<usize>,
        second: std::ops::Range<usize>,
    },

    /// `--only` names an id the registry does not have, or `--shard` is malformed.
    #[error("{0}")]
    Selection(String),

    /// A named test does not exist in its test target.
    #[error("registry entry `{id}`: test `{test}` matches no test in its target")]
    TestNotFound { id: String, test: String },

    /// The unmutated tree does not build.
    #[error("baseline: `{command}` failed to build the unmutated tree:\n{tail}")]
    BaselineBuild { command: String, tail: String },

    /// A named test fails (or times out) on the unmutated tree.
    #[error("baseline: test `{test}` (registry entry `{id}`) does not pass unmutated:\n{tail}")]
    BaselineFailed {
        id: String,
        test: String,
        tail: String,
    },

    /// A child process could not be started or waited for.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// cargo's output could not be understood.
    #[error("cargo: {0}")]
    Cargo(String),

    /// The run was interrupted (SIGINT/SIGTERM, or a cancel from the caller).
    /// The scratch copy has been removed when this is returned.
    #[error(
        "interrupted; a temporary scratch copy was removed (schemata mode keeps its own for the next run)"
    )]
    Interrupted,

    /// The user's tree is not what it was when the run started. The runner
    /// never opens it for writing, so this means someone else edited it
    /// while the run was going; the verdicts so far are in `outcomes.json`
    /// (`complete: false`).
    #[error("the workspace changed during the run, so its verdicts may not describe the tree as it is now (the runner itself only reads it): {}", .changes.join(", "))]
    TreeChanged { changes: Vec<String> },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
