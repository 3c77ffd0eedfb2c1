//! The three roles of a spendgate database and which URL connects as which.
//!
//! Guarantees:
//! - Three roles ([`OWNER_ROLE`], [`APP_ROLE`], [`ONBOARD_ROLE`]): the
//!   migrations run as the owner, the gate connects as the application role,
//!   which owns nothing and holds only the privileges the gate uses
//!   (`migrations/*_roles.sql`); onboarding (tenants, people, agents,
//!   merchants, API keys, root delegations) connects as the onboarding role,
//!   which holds what the application role holds and those INSERTs
//!   (`migrations/*_onboarding_role.sql`).
//! - [`server_urls`] resolves the pair of URLs ([`ServerUrls`]): both from the
//!   environment when `MIGRATION_DATABASE_URL` is set (and not blank);
//!   otherwise the one URL given is taken for an administrator's (the
//!   throwaway cluster's superuser, `docker compose`'s `postgres`), the two
//!   roles are created if missing ([`ensure_roles`]), and both URLs are
//!   derived from it by changing only the user ([`super::with_user`]).
//! - [`ensure_roles`] is safe to run from many processes at once (one
//!   transaction under an advisory lock), makes the owner a member of the
//!   application role and of `pg_signal_backend` (so it may end sessions in
//!   the databases it drops), and fails with [`DbError::Roles`], saying what
//!   to do, when a role is missing and the URL may not create it.
//! - [`ServerUrls`] never shows a password (`Debug` redacts both URLs).

use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor};

use super::connect::{DATABASE_URL_ENV, MIGRATION_DATABASE_URL_ENV, parse, redact_url, with_user};
use super::error::{DbError, connect_error, query_error};

/// The role that runs the migrations and owns every table.
pub const OWNER_ROLE: &str = "spendgate_owner";
/// The role the gate connects as: owns nothing, holds only what the gate uses.
pub const APP_ROLE: &str = "spendgate_app";
/// The role onboarding connects as (`spendgate tenant apply`, `spendgate
/// keys`): the application role's privileges and the INSERTs that create a
/// tenant, its actors, its keys and its root delegations.
pub const ONBOARD_ROLE: &str = "spendgate_onboard";

/// The two URLs of one server: the application role's and the owner's.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrls {
    /// Where the gate connects: `DATABASE_URL`, as [`APP_ROLE`].
    pub app: String,
    /// Where the migrations run: `MIGRATION_DATABASE_URL`, as [`OWNER_ROLE`].
    pub owner: String,
}

/// Shows both URLs redacted.
impl std::fmt::Debug for ServerUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerUrls")
            .field("app", &redact_url(&self.app))
            .field("owner", &redact_url(&self.owner))
            .finish()
    }
}

/// The URLs to use for `url` (normally `DATABASE_URL`): `url` and
/// `MIGRATION_DATABASE_URL` when that is set; otherwise `url` is taken for an
/// administrator's and [`ensure_roles`] creates the roles (if missing) and
/// derives both URLs from it.
pub async fn server_urls(url: &str) -> Result<ServerUrls, DbError> {
    match given_urls(url, std::env::var(MIGRATION_DATABASE_URL_ENV).ok()) {
        Some(urls) => Ok(urls),
        None => ensure_roles(url).await,
    }
}

/// Both URLs when the owner's is given (and not blank); `None`: derive them.
fn given_urls(url: &str, owner: Option<String>) -> Option<ServerUrls> {
    owner
        .filter(|u| !u.trim().is_empty())
        .map(|owner| ServerUrls {
            app: url.to_owned(),
            owner,
        })
}

/// Connected through `admin_url` (a role that may create roles, unless both
/// exist already): creates [`OWNER_ROLE`] (`LOGIN CREATEDB`) and [`APP_ROLE`]
/// (`LOGIN`) if missing, makes the owner a member of the application role (so
/// it may end the application's sessions when it drops a test database), and
/// returns both URLs derived from `admin_url` ([`with_user`]). A role it
/// creates gets the password of `admin_url`, if that has one, so the derived
/// URLs log in. Safe to run from many processes at once (an advisory lock).
pub async fn ensure_roles(admin_url: &str) -> Result<ServerUrls, DbError> {
    let urls = ServerUrls {
        app: with_user(admin_url, APP_ROLE)?,
        owner: with_user(admin_url, OWNER_ROLE)?,
    };
    let shown = redact_url(admin_url);
    let mut conn = PgConnection::connect_with(&parse(admin_url)?)
        .await
        .map_err(|cause| connect_error(&shown, cause))?;
    let ensured = create_roles(&mut conn, &shown, url_password(admin_url), ROLES).await;
    let _ = conn.close().await;
    ensured.map(|()| urls)
}

/// The names of the two roles [`create_roles`] makes: [`ROLES`] everywhere
/// but in the tests, which make roles of their own so that they can watch
/// them being created without touching the roles other tests connect as.
#[derive(Debug, Clone, Copy)]
struct RoleNames<'n> {
    owner: &'n str,
    app: &'n str,
    onboard: &'n str,
}

/// [`OWNER_ROLE`] and [`APP_ROLE`].
const ROLES: RoleNames<'static> = RoleNames {
    owner: OWNER_ROLE,
    app: APP_ROLE,
    onboard: ONBOARD_ROLE,
};

/// The advisory lock key [`ensure_roles`] serializes on ("spendgate roles").
const ROLES_LOCK: i64 = 0x7370_656e_6472_6f6c;

async fn create_roles(
    conn: &mut PgConnection,
    shown: &str,
    password: Option<String>,
    names: RoleNames<'_>,
) -> Result<(), DbError> {
    let mut tx = conn
        .begin()
        .await
        .map_err(query_error("starting the role transaction"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(ROLES_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(query_error("taking the roles lock"))?;
    let (me, may_create): (String, bool) = sqlx::query_as(
        "SELECT rolname::text, rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(query_error("reading the connected role"))?;
    for (role, attributes) in [
        (names.owner, "LOGIN CREATEDB"),
        (names.app, "LOGIN"),
        (names.onboard, "LOGIN"),
    ] {
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
                .bind(role)
                .fetch_one(&mut *tx)
                .await
                .map_err(query_error(format!("looking up role {role}")))?;
        if exists {
            continue;
        }
        if !may_create {
            return Err(DbError::Roles {
                url: shown.to_owned(),
                message: format!(
                    "{MIGRATION_DATABASE_URL_ENV} is not set, so this URL was taken for an \
                     administrator's, but role {role} does not exist and {me} may not create \
                     it: create {}, {} and {} (README, \"Deploying\") and set \
                     {DATABASE_URL_ENV} and {MIGRATION_DATABASE_URL_ENV}",
                    names.owner, names.app, names.onboard
                ),
            });
        }
        let sql: String = sqlx::query_scalar(
            "SELECT format('CREATE ROLE %I ' || $2 || CASE WHEN $3::text IS NULL THEN '' \
             ELSE format(' PASSWORD %L', $3::text) END, $1::text)",
        )
        .bind(role)
        .bind(attributes)
        .bind(password.as_deref())
        .fetch_one(&mut *tx)
        .await
        .map_err(query_error(format!("quoting the creation of role {role}")))?;
        tx.execute(sqlx::AssertSqlSafe(sql))
            .await
            .map_err(query_error(format!("creating role {role}")))?;
    }
    if may_create {
        grant_membership(
            &mut tx,
            names.owner,
            names.app,
            "making the owner a member of the application role",
        )
        .await?;
        grant_membership(
            &mut tx,
            names.owner,
            names.onboard,
            "making the owner a member of the onboarding role",
        )
        .await?;
        // DROP DATABASE .. WITH (FORCE) also ends an autovacuum worker busy in
        // the database, which belongs to no role the owner is a member of.
        grant_membership(
            &mut tx,
            names.owner,
            "pg_signal_backend",
            "letting the owner end sessions in its databases",
        )
        .await?;
    }
    tx.commit()
        .await
        .map_err(query_error("committing the roles"))
}

/// Makes `owner` a member of `role` unless it already is.
async fn grant_membership(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    owner: &str,
    role: &str,
    what: &'static str,
) -> Result<(), DbError> {
    let member: bool = sqlx::query_scalar("SELECT pg_has_role($1, $2, 'MEMBER')")
        .bind(owner)
        .bind(role)
        .fetch_one(&mut **tx)
        .await
        .map_err(query_error(what))?;
    if !member {
        (&mut **tx)
            .execute(sqlx::AssertSqlSafe(format!("GRANT {role} TO {owner}")))
            .await
            .map_err(query_error(what))?;
    }
    Ok(())
}

/// The password of a URL's userinfo, percent-decoded, if it has one.
fn url_password(url: &str) -> Option<String> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let userinfo = &url[start..start + url[start..end].rfind('@')?];
    let (_, encoded) = userinfo.split_once(':')?;
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .ok()
        .map(|decoded| decoded.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_of_a_url_is_percent_decoded() {
        assert_eq!(
            url_password("postgres://u:sp%40nd%3A1@h/db").as_deref(),
            Some("sp@nd:1")
        );
        assert_eq!(url_password("postgres://u@h/db"), None);
        assert_eq!(url_password("postgres://h/db"), None);
        assert_eq!(
            url_password("postgres://u:%zz@h/db").as_deref(),
            Some("%zz")
        );
        assert_eq!(
            url_password("postgres://u:%C3%A9%4@h/db").as_deref(),
            Some("\u{e9}%4"),
            "a two-byte character, then a cut-off escape kept as it is"
        );
        assert_eq!(url_password("postgres://u:%FF@h/db"), None, "not UTF-8");
    }

    #[test]
    fn a_given_owner_url_is_used_as_is_and_a_missing_one_means_derive() {
        assert_eq!(
            given_urls("postgres://app@h/db", Some("postgres://own@h/db".into())),
            Some(ServerUrls {
                app: "postgres://app@h/db".into(),
                owner: "postgres://own@h/db".into()
            })
        );
        assert_eq!(given_urls("postgres://a@h/db", Some("  ".into())), None);
        assert_eq!(given_urls("postgres://a@h/db", None), None);
        let shown = format!(
            "{:?}",
            ServerUrls {
                app: "postgres://a:s3cret@h/db".into(),
                owner: "postgres://o:s3cret@h/db".into()
            }
        );
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    /// Roles of this test's own, made by `create_roles` as on a fresh
    /// server: both created with their attributes, the owner a member of
    /// the application role and of `pg_signal_backend`; a second run finds
    /// them and changes nothing. Skipped unless the test URL may create
    /// roles (the throwaway cluster's superuser may).
    #[tokio::test]
    async fn on_a_server_without_them_both_roles_are_made_with_their_memberships()
    -> Result<(), Box<dyn std::error::Error>> {
        let Some(url) = crate::db::test_admin_url()? else {
            return Ok(());
        };
        let mut conn = PgConnection::connect_with(&parse(&url)?).await?;
        let may_create: bool = sqlx::query_scalar(
            "SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user",
        )
        .fetch_one(&mut conn)
        .await?;
        if !may_create {
            return Ok(());
        }
        let tag = format!("{}_{}", std::process::id(), line!());
        let (owner, app) = (format!("sg_test_owner_{tag}"), format!("sg_test_app_{tag}"));
        let onboard = format!("sg_test_onboard_{tag}");
        let names = RoleNames {
            owner: &owner,
            app: &app,
            onboard: &onboard,
        };
        let check = async |conn: &mut PgConnection| -> Result<(), Box<dyn std::error::Error>> {
            let made: Vec<(String, bool, bool)> = sqlx::query_as(
                "SELECT rolname::text, rolcanlogin, rolcreatedb FROM pg_roles \
                 WHERE rolname IN ($1, $2) ORDER BY rolname DESC",
            )
            .bind(&owner)
            .bind(&app)
            .fetch_all(&mut *conn)
            .await?;
            assert_eq!(
                made,
                [(owner.clone(), true, true), (app.clone(), true, false)]
            );
            let member: (bool, bool) = sqlx::query_as(
                "SELECT pg_has_role($1, $2, 'MEMBER'), pg_has_role($1, 'pg_signal_backend', 'MEMBER')",
            )
            .bind(&owner)
            .bind(&app)
            .fetch_one(&mut *conn)
            .await?;
            assert_eq!(member, (true, true));
            Ok(())
        };
        // Twice: made, then found. The roles go whatever the outcome.
        let checked = async {
            for _ in 0..2 {
                create_roles(&mut conn, "test", None, names).await?;
                check(&mut conn).await?;
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        for role in [&app, &onboard, &owner] {
            conn.execute(sqlx::AssertSqlSafe(format!("DROP ROLE IF EXISTS {role}")))
                .await?;
        }
        conn.close().await?;
        checked
    }
}
