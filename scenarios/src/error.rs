//! Load errors: every refusal names the file, the scenario id (when there is
//! one), the offending key or value, and a line when one can be found.
//!
//! Guarantees: a [`LoadError`] renders as
//! `FILE[:LINE]: scenario `ID`: MESSAGE`, and every [`LoadErrorKind`]
//! variant that concerns a key or a value carries that key or value, so a
//! caller can both print and match on it.

use std::fmt;
use std::path::PathBuf;

/// One refusal of the loader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    /// The file that holds the problem.
    pub file: PathBuf,
    /// 1-based line, when the loader could find one.
    pub line: Option<usize>,
    /// The scenario id, when the problem is inside a scenario that has one.
    pub scenario: Option<String>,
    /// What is wrong.
    pub kind: LoadErrorKind,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(id) = &self.scenario {
            write!(f, ": scenario `{id}`")?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// What the loader refused, with the key or value that caused it.
///
/// `path` fields locate the problem inside the scenario, e.g.
/// `steps[2].propose`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadErrorKind {
    #[error("cannot read: {message}")]
    Io { message: String },
    #[error("not valid YAML: {message}")]
    Syntax { message: String },
    #[error("expected {expected}")]
    Shape { path: String, expected: String },
    #[error("a scenario has no `id`")]
    MissingId,
    #[error("id `{value}` is not kebab-case")]
    BadId { value: String },
    #[error("duplicate scenario id `{id}` (first seen in {})", first_file.display())]
    DuplicateId { id: String, first_file: PathBuf },
    #[error("{path}: unknown key `{key}`")]
    UnknownKey { path: String, key: String },
    #[error("{path}: missing key `{key}`")]
    MissingKey { path: String, key: String },
    #[error("{path}: invalid value: {message}")]
    InvalidValue { path: String, message: String },
    #[error("{path}: unknown verb `{verb}`")]
    UnknownVerb { path: String, verb: String },
    #[error("{path}: step has no verb (expected exactly one of {})", expected.join(", "))]
    NoVerb {
        path: String,
        /// The verbs a step may name (the loader's table, passed in so that
        /// this module depends on nothing above it).
        expected: &'static [&'static str],
    },
    #[error("{path}: step has more than one verb: {}", verbs.join(", "))]
    TwoVerbs { path: String, verbs: Vec<String> },
    #[error("{path}: duplicate step name `{name}`")]
    DuplicateStepName { path: String, name: String },
    #[error("{path}.{field}: `{target}` {problem}")]
    DanglingReference {
        path: String,
        field: String,
        target: String,
        problem: String,
    },
    #[error("{path}: unknown decision `{value}` (expected allow, step_up, deny or ok)")]
    UnknownDecision { path: String, value: String },
    #[error("{path}: unknown reason code `{code}`")]
    UnknownReason { path: String, code: String },
    #[error("unknown taxonomy class `{class}`")]
    UnknownClass { class: String },
    #[error("unknown world `{world}` (looked in {})", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    UnknownWorld {
        world: String,
        searched: Vec<PathBuf>,
    },
    #[error("world `{world}` did not load (see its own error)")]
    BrokenWorld { world: String },
    #[error(
        "an attack must carry a check its success would break, and this one has none: {missing}"
    )]
    AttackWithoutCheck {
        /// What is missing, in words.
        missing: String,
    },
    #[error("{message}")]
    Invalid { message: String },
}

impl LoadErrorKind {
    /// The key or value this error is about, when it is about one.
    pub fn subject(&self) -> Option<&str> {
        match self {
            LoadErrorKind::UnknownKey { key, .. } | LoadErrorKind::MissingKey { key, .. } => {
                Some(key)
            }
            LoadErrorKind::BadId { value } => Some(value),
            LoadErrorKind::DuplicateId { id, .. } => Some(id),
            LoadErrorKind::UnknownVerb { verb, .. } => Some(verb),
            LoadErrorKind::DuplicateStepName { name, .. } => Some(name),
            LoadErrorKind::DanglingReference { target, .. } => Some(target),
            LoadErrorKind::UnknownDecision { value, .. } => Some(value),
            LoadErrorKind::UnknownReason { code, .. } => Some(code),
            LoadErrorKind::UnknownClass { class } => Some(class),
            LoadErrorKind::UnknownWorld { world, .. } | LoadErrorKind::BrokenWorld { world } => {
                Some(world)
            }
            _ => None,
        }
    }
}

/// A problem found while parsing one value, before the loader knows which
/// file and line it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub LoadErrorKind);

impl From<LoadErrorKind> for ParseError {
    fn from(kind: LoadErrorKind) -> Self {
        ParseError(kind)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ParseError {}
