//! What can go wrong talking to Postgres, as one typed error.
//!
//! Guarantees: every [`DbError`] that carries a URL shows it redacted (the
//! password replaced by `***`, see [`super::redact_url`]); a failed
//! connection is classified once, by [`connect_error`], as either
//! [`DbError::Unreachable`] (nothing answered) or [`DbError::Rejected`] (the
//! server answered and refused); a failed statement names what it was doing
//! ([`query_error`]). The two variants only the test-database factory
//! returns (`DbError::NotConfigured`, `DbError::DropGuard`) exist only with
//! the `test-support` feature.

use sqlx::migrate::MigrateError;

/// Postgres SQLSTATE `cannot_connect_now`: the server is starting or stopping.
const CANNOT_CONNECT_NOW: &str = "57P03";

/// What can go wrong talking to Postgres. URLs are always shown redacted.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// `DATABASE_URL` is not set and `SPENDGATE_SKIP_DB=1` is not either
    /// (the test-database factory's refusal).
    #[cfg(any(test, feature = "test-support"))]
    #[error(
        "DATABASE_URL is not set: this test needs a Postgres server. Run the tests with \
         `make verify` (it starts a throwaway cluster), or start one yourself with \
         `export \"$(cargo run -q -p harness -- db up)\"`, or set SPENDGATE_SKIP_DB=1 to skip \
         the database tests"
    )]
    NotConfigured,
    /// The URL does not parse as a Postgres URL.
    #[error("invalid database URL {url}: {cause}")]
    InvalidUrl { url: String, cause: sqlx::Error },
    /// Nothing answered: the server is down, the socket or host is wrong, or it timed out.
    #[error(
        "the database at {url} is down or unreachable: {cause} (is Postgres running? \
         `cargo run -q -p harness -- db up` starts a throwaway cluster)"
    )]
    Unreachable { url: String, cause: sqlx::Error },
    /// The server answered but refused the connection (role, password, database name).
    #[error("the database at {url} refused the connection: {cause}")]
    Rejected { url: String, cause: sqlx::Error },
    /// A named migration failed or no longer matches what the database recorded.
    #[error("migration {version} ({description}) failed: {cause}")]
    Migration {
        version: i64,
        description: String,
        cause: MigrateError,
    },
    /// Applying migrations failed before any one migration ran.
    #[error("applying migrations failed: {cause}")]
    Migrate { cause: MigrateError },
    /// A statement of this module failed; `action` says which.
    #[error("{action} failed: {cause}")]
    Query { action: String, cause: sqlx::Error },
    /// The mutation runner's `SPENDGATE_DROP_GUARDS` could not be honoured: it
    /// does not parse, or an object it names could not be dropped.
    #[cfg(any(test, feature = "test-support"))]
    #[error("SPENDGATE_DROP_GUARDS: {spec}: {message}")]
    DropGuard { spec: String, message: String },
    /// The owner's and application's roles or URLs could not be worked out.
    #[error("database roles on {url}: {message}")]
    Roles { url: String, message: String },
}

/// A failed connection to `shown` (a redacted URL): [`DbError::Unreachable`]
/// when nothing answered (I/O, TLS, pool timeout, a server starting or
/// stopping), else [`DbError::Rejected`].
pub(super) fn connect_error(shown: &str, cause: sqlx::Error) -> DbError {
    let url = shown.to_owned();
    let unreachable = match &cause {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(e) => e.code().as_deref() == Some(CANNOT_CONNECT_NOW),
        _ => false,
    };
    if unreachable {
        DbError::Unreachable { url, cause }
    } else {
        DbError::Rejected { url, cause }
    }
}

/// Wraps a failed statement as [`DbError::Query`] naming `action`.
pub(super) fn query_error(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> DbError {
    let action = action.into();
    move |cause| DbError::Query { action, cause }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::error::Error as StdError;

    use sqlx::error::{DatabaseError, ErrorKind};

    use super::*;

    /// A server's answer with a chosen SQLSTATE, as a driver would report it.
    #[derive(Debug)]
    struct Answer(&'static str);

    impl std::fmt::Display for Answer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "server said {}", self.0)
        }
    }

    impl StdError for Answer {}

    impl DatabaseError for Answer {
        fn message(&self) -> &str {
            "the server answered"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn classify(code: &'static str) -> DbError {
        connect_error(
            "postgres://app:***@db/x",
            sqlx::Error::Database(Box::new(Answer(code))),
        )
    }

    #[test]
    fn a_server_still_starting_or_stopping_is_unreachable_not_a_refusal() {
        assert!(matches!(classify("57P03"), DbError::Unreachable { .. }));
    }

    #[test]
    fn a_server_that_answers_with_any_other_code_refused_the_connection() {
        // 28P01: bad password; 3D000: no such database; 28000: no such role.
        for code in ["28P01", "3D000", "28000"] {
            assert!(matches!(classify(code), DbError::Rejected { .. }), "{code}");
        }
    }

    #[test]
    fn nothing_answering_is_unreachable() {
        for cause in [sqlx::Error::PoolTimedOut, sqlx::Error::PoolClosed] {
            assert!(matches!(
                connect_error("postgres://x", cause),
                DbError::Unreachable { .. }
            ));
        }
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(matches!(
            connect_error("postgres://x", sqlx::Error::Io(io)),
            DbError::Unreachable { .. }
        ));
    }
}
