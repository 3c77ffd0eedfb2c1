//! What can go wrong in the stateful gate that is not a refusal.
//!
//! Guarantees: a refusal is never an error (it is an outcome carrying a
//! [`crate::Reason`]); an error here means the gate could not decide, and it
//! says why in a typed variant: the database is down or unreachable, a
//! statement failed, the ledger's head row is missing, stored data does not
//! parse, or a seed was refused. (A provider that fails or does not answer
//! is a refusal, `PROVIDER_REJECTED` or `PROVIDER_UNAVAILABLE`, not an error.) Every
//! operation runs in a transaction that an error rolls back, so an error
//! leaves no half-written state.

use crate::db::DbError;
use crate::reason::Reason;

/// Postgres SQLSTATE codes that mean "the server went away" (besides class
/// 08, connection exceptions): shut down by an administrator, crashed, not
/// yet accepting connections, and a session ended for idling too long.
const UNAVAILABLE_CODES: &[&str] = &["57P01", "57P02", "57P03", "57P05"];

/// An error of the stateful gate.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Nothing answered, or the connection was lost mid-operation.
    #[error(
        "the database is down or unreachable while {action}: {cause} \
         (nothing was written: the transaction was rolled back)"
    )]
    DatabaseUnavailable {
        action: &'static str,
        cause: sqlx::Error,
    },
    /// A statement failed for another reason.
    #[error("database error while {action}: {cause} (the transaction was rolled back)")]
    Database {
        action: &'static str,
        cause: sqlx::Error,
    },
    /// The ledger's head row is gone: the ledger cannot be appended to.
    #[error(
        "the ledger head row is missing: the ledger cannot be appended to (run `harness ledger verify`)"
    )]
    LedgerHeadMissing,
    /// The system's random source failed: no request id could be drawn,
    /// and nothing was written.
    #[error("the system's random source failed while drawing a request id: {0}")]
    Randomness(getrandom::Error),
    /// A stored row does not mean what the gate wrote.
    #[error("stored data is invalid: {what}")]
    Corrupt { what: String },
    /// A seed asked for something the gate refuses.
    #[error("the seed was refused: {what}: {reason}")]
    SeedRefused { what: String, reason: Reason },
    /// Connecting or migrating failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl ServiceError {
    /// Classifies a sqlx error raised while doing `action`.
    pub fn from_sqlx(action: &'static str, cause: sqlx::Error) -> Self {
        let head_missing = matches!(&cause, sqlx::Error::Database(e)
            if e.constraint() == Some("fk_ledger_queue_head"));
        if head_missing {
            ServiceError::LedgerHeadMissing
        } else if is_unavailable(&cause) {
            ServiceError::DatabaseUnavailable { action, cause }
        } else {
            ServiceError::Database { action, cause }
        }
    }
}

fn is_unavailable(cause: &sqlx::Error) -> bool {
    connection_lost(cause)
        || matches!(
            cause,
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed
        )
}

/// True when `cause` says the one connection it came from is gone (its
/// socket, or the server process behind it), as opposed to the pool or a
/// statement failing.
pub(crate) fn connection_lost(cause: &sqlx::Error) -> bool {
    match cause {
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(e) => e.code().is_some_and(|code| {
            code.starts_with("08") || UNAVAILABLE_CODES.contains(&code.as_ref())
        }),
        _ => false,
    }
}

/// Attaches what the gate was doing to a sqlx error.
pub(crate) trait Ctx<T> {
    fn ctx(self, action: &'static str) -> Result<T, ServiceError>;
}

impl<T> Ctx<T> for Result<T, sqlx::Error> {
    fn ctx(self, action: &'static str) -> Result<T, ServiceError> {
        self.map_err(|cause| ServiceError::from_sqlx(action, cause))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_is_one_connection_gone_and_a_closed_pool_is_not() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(connection_lost(&sqlx::Error::Io(reset)));
        assert!(!connection_lost(&sqlx::Error::PoolClosed));
        assert!(!connection_lost(&sqlx::Error::PoolTimedOut));
        assert!(!connection_lost(&sqlx::Error::RowNotFound));
    }

    #[test]
    fn a_closed_pool_is_unavailable_and_a_decode_error_is_not() {
        assert!(matches!(
            ServiceError::from_sqlx("x", sqlx::Error::PoolClosed),
            ServiceError::DatabaseUnavailable { .. }
        ));
        assert!(matches!(
            ServiceError::from_sqlx("x", sqlx::Error::RowNotFound),
            ServiceError::Database { .. }
        ));
    }
}
