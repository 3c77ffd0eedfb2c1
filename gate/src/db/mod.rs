//! Postgres access: connecting and migrating, the two roles, and (with the
//! `test-support` feature only) fresh migrated databases for tests and the
//! benchmark.
//!
//! Guarantees:
//! - Every item lives in the file of its job and is used from here, so a
//!   caller names `gate::db::<item>` whatever file holds it:
//!   - `error`: [`DbError`], the one error type; URLs always shown redacted;
//!   - `connect`: [`MIGRATOR`], [`connect()`], [`migrate`], [`pool_options`],
//!     the URL variables, [`redact_url`], [`with_user`];
//!   - `roles`: [`OWNER_ROLE`], [`APP_ROLE`], [`ONBOARD_ROLE`], [`server_urls`],
//!     [`ensure_roles`];
//!   - `factory` (`test-support`): `FreshDatabase`, `fresh_database`,
//!     `fresh_database_with`, `empty_database`, `fresh_test_database`,
//!     `test_admin_url`, `template_name`;
//!   - `drop_guards` (`test-support`): the mutation runner's hook that drops
//!     schema guards from a fresh database;
//!   - `reset` (`test-support`): [`Reset`], the script that empties a
//!     migrated database back to what its migrations left;
//!   - `spares` (`test-support`): emptied databases kept on the server for
//!     the next fresh one, instead of a drop and a `CREATE DATABASE`.
//! - The imports point one way: `error` ← `connect` ← `roles` ← `drop_guards`
//!   ← `reset` ← `spares` ← `factory`.
//! - Without `test-support` (a normal build of the gate) nothing here creates
//!   or drops a database, and nothing honours `SPENDGATE_DROP_GUARDS`: the
//!   gate only connects and migrates. The gate's own tests, `wire`'s and
//!   `fuzz`'s get the feature through their dev-dependencies; `harness`
//!   (bench, triage, perf, mutate) through its normal dependency.

mod connect;
#[cfg(any(test, feature = "test-support"))]
mod drop_guards;
mod error;
#[cfg(any(test, feature = "test-support"))]
mod factory;
#[cfg(any(test, feature = "test-support"))]
mod reset;
mod roles;
#[cfg(any(test, feature = "test-support"))]
mod spares;

pub use connect::{
    DATABASE_URL_ENV, MIGRATION_DATABASE_URL_ENV, MIGRATOR, ONBOARD_DATABASE_URL_ENV, connect,
    migrate, pool_options, redact_url, with_user,
};
#[cfg(any(test, feature = "test-support"))]
pub use drop_guards::{DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV};
pub use error::DbError;
#[cfg(any(test, feature = "test-support"))]
pub use factory::{
    FreshDatabase, SKIP_ENV, empty_database, fresh_database, fresh_database_with,
    fresh_test_database, template_name, test_admin_url,
};
#[cfg(any(test, feature = "test-support"))]
pub use reset::Reset;
pub use roles::{APP_ROLE, ONBOARD_ROLE, OWNER_ROLE, ServerUrls, ensure_roles, server_urls};
