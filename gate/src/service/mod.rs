//! The stateful gate on Postgres: propose → (approve) → checkout → pay →
//! signed provider event, delegation grants and revocations, and the ledger.
//!
//! Guarantees:
//! - The pure engine ([`crate::policy::evaluate`]) decides; this module reads
//!   its inputs from the database under lock and makes the decision stick:
//!   budgets are reserved in the same transaction as the request row, and the
//!   database's named guards (see `migrations/`) refuse overspend, double
//!   consumption and illegal state changes even from a writer that skips
//!   this code.
//! - Each operation is one transaction (pay is two, around the provider
//!   call): it commits whole or not at all, and queues what it did for the
//!   hash-chained ledger as its last statement (the sequencer chains it in).
//! - A refusal is an [`Outcome`] carrying a [`Reason`] (a provider that
//!   refuses or does not answer included: `PROVIDER_REJECTED`,
//!   `PROVIDER_UNAVAILABLE`); a [`ServiceError`] means the gate could not
//!   decide (database down, ...).
//! - A gate is never built with a webhook secret shorter than 32 bytes, and
//!   its `Debug` never shows a secret.
//! - Every time comes from the injected [`Clock`]; every row lock from
//!   [`lock`], or, for the day and the hops a decision is made on, from
//!   [`decision_state`], in the same order. The agent is told only the
//!   redacted [`AgentView`].

mod admin;
pub mod api_keys;
mod approve;
mod audit;
mod budget;
#[cfg(test)]
mod budget_db_refusals;
pub mod bundle;
mod chain_hops;
mod checkout;
pub mod checkpointer;
pub mod clock;
mod current_policy;
mod decide;
mod decision_state;
mod error;
mod grants;
#[cfg(test)]
mod grants_db_refusals;
mod identity;
mod invariants;
pub mod ledger;
pub(crate) mod lock;
mod onboard;
pub mod pages;
mod pay;
mod propose;
mod reconcile;
mod refusal;
mod requests;
mod rows;
mod seed;
#[cfg(any(test, feature = "test-support"))]
pub mod standard;
pub mod tlog;
mod turns;
pub mod views;
pub mod webhook;
mod world;
mod world_cache;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use mandate::Keyring;
use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};

pub use audit::{Disagreement, audit};
pub use checkout::AUTHORITY_TTL_MINUTES;
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::ServiceError;
pub use gate_core::grant::{Grant, HopTerms};
pub use gate_core::request_state::{RequestState, UnknownState};
pub use gate_core::seed::{PersonSeed, Seed, TenantSeed};
pub use invariants::Invariants;
pub use ledger::{
    Anchor, AnchorError, ChainHead, ChainReport, Integrated, LedgerBreak, LedgerKey,
    LedgerKeyError, LedgerReport, QueueRefusal, integrate, verify as verify_ledger,
};
pub use onboard::{TenantAdditions, TenantHoldings};
pub use reconcile::{Books, Reconciled};
pub use webhook::{
    MIN_WEBHOOK_SECRET_BYTES, NEEDS_REVIEW, ProviderEvent, WebhookSecretError, razorpay_envelope,
    sign_webhook,
};

use crate::provider::{PaymentProvider, ProviderHealth};
use crate::reason::{Decision, Reason};
use crate::redact::AgentView;
use error::Ctx;
pub use turns::DEFAULT_TURNS_PER_TENANT;
use turns::Turns;
use world_cache::WorldCache;

/// How long `pay` waits for the provider by default.
pub const DEFAULT_PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// The gate: a pool, a provider, the webhook secrets, the ledger key and a clock.
pub struct Gate<P> {
    pool: PgPool,
    /// The onboarding role's pool, for the operations that create what a
    /// tenant holds (seed, extend, root grants); `None`: the gate's own pool,
    /// on which the database refuses them.
    onboard: Option<PgPool>,
    provider: P,
    secret: Vec<u8>,
    previous_secret: Option<Vec<u8>>,
    ledger_key: LedgerKey,
    mandate_keys: Keyring,
    clock: Arc<dyn Clock>,
    provider_timeout: Duration,
    worlds: WorldCache,
    turns: Turns,
    untenanted: refusal::Untenanted,
    /// Whether each transaction inside one tenant is bound to that tenant's
    /// row-security token ([`Gate::with_row_security`]).
    row_security: bool,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Gate<P> {
    /// Never shows a webhook secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("provider", &self.provider)
            .field("secret", &"[redacted]")
            .field(
                "previous_secret",
                &self.previous_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("provider_timeout", &self.provider_timeout)
            .field("turns_per_tenant", &self.turns.per_tenant())
            .finish_non_exhaustive()
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// A gate over `pool` (already migrated), for what an operator runs.
    /// `webhook_secret` verifies provider events and keys checkout authority
    /// ids; one shorter than [`MIN_WEBHOOK_SECRET_BYTES`] refuses to build a
    /// gate. `ledger_key` keys the ledger's chains: a secret of its own,
    /// never derived from another.
    pub fn open(
        pool: PgPool,
        provider: P,
        webhook_secret: impl Into<Vec<u8>>,
        ledger_key: LedgerKey,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, WebhookSecretError> {
        let secret = webhook_secret.into();
        webhook::check_secret("current", &secret)?;
        let pool = every_tenant_pool(&pool, &ledger_key);
        Ok(Gate {
            pool,
            onboard: None,
            provider,
            ledger_key,
            mandate_keys: Keyring::empty(),
            secret,
            previous_secret: None,
            clock,
            provider_timeout: DEFAULT_PROVIDER_TIMEOUT,
            worlds: WorldCache::default(),
            turns: Turns::default(),
            untenanted: refusal::Untenanted::default(),
            row_security: true,
        })
    }

    /// A gate for tests, the corpus and the benchmark: as [`Gate::open`],
    /// with the ledger keyed by a key derived from the webhook secret
    /// ([`LedgerKey::derived_from_secret`]) unless [`Gate::with_ledger_key`]
    /// sets one, and trusting the deterministic world keys of the corpus
    /// ([`Keyring::world`]) unless [`Gate::with_mandate_keys`] sets others.
    /// Not in a build without `test-support`: a served gate is
    /// always given a ledger key of its own.
    #[cfg(any(test, feature = "test-support"))]
    pub fn new(
        pool: PgPool,
        provider: P,
        webhook_secret: impl Into<Vec<u8>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, WebhookSecretError> {
        let secret = webhook_secret.into();
        let key = LedgerKey::derived_from_secret(&secret);
        let onboard = crate::db::pool_options(2).connect_lazy_with(
            pool.connect_options()
                .as_ref()
                .clone()
                .username(crate::db::ONBOARD_ROLE),
        );
        Ok(Self::open(pool, provider, secret, key, clock)?
            .with_mandate_keys(Keyring::world())
            .with_onboarding_pool(onboard))
    }

    /// The onboarding role's pool ([`crate::db::ONBOARD_ROLE`]): seeding a
    /// world, extending a tenant and granting a root delegation run on it.
    /// Without one they run on the gate's own pool, where the database
    /// refuses them (the runtime role cannot onboard).
    pub fn with_onboarding_pool(mut self, pool: PgPool) -> Self {
        self.onboard = Some(pool);
        self
    }

    /// The onboarding pool: for tests, the corpus and the benchmark only.
    #[cfg(any(test, feature = "test-support"))]
    pub fn onboarding_pool(&self) -> &PgPool {
        self.onboard.as_ref().unwrap_or(&self.pool)
    }

    /// Also accepts events signed with the previous webhook secret (rotation:
    /// the provider retries older events for 24 hours).
    pub fn with_previous_webhook_secret(
        mut self,
        previous: impl Into<Vec<u8>>,
    ) -> Result<Self, WebhookSecretError> {
        let previous = previous.into();
        webhook::check_secret("previous", &previous)?;
        self.previous_secret = Some(previous);
        Ok(self)
    }

    /// Which provider the gate talks to and whether it has keys (never the keys).
    pub fn provider_health(&self) -> ProviderHealth {
        self.provider.health()
    }

    /// How long `pay` waits for the provider before calling it a timeout.
    pub fn with_provider_timeout(mut self, timeout: Duration) -> Self {
        self.provider_timeout = timeout;
        self
    }

    /// How many of one tenant's proposals may hold a database connection at
    /// once (at least one, at most `tokio::sync::Semaphore::MAX_PERMITS`;
    /// [`DEFAULT_TURNS_PER_TENANT`] unless set): the
    /// others wait in the process, so one busy tenant never holds the whole
    /// pool (see the `turns` module).
    pub fn with_turns_per_tenant(mut self, per_tenant: usize) -> Self {
        self.turns = Turns::new(per_tenant);
        self
    }

    /// The key the ledger's chains are hashed with: a secret of the gate's
    /// own, never stored in the database (see [`ledger`]).
    pub fn with_ledger_key(mut self, key: LedgerKey) -> Self {
        self.pool = every_tenant_pool(&self.pool, &key);
        self.ledger_key = key;
        self
    }

    /// Whether each transaction the gate makes inside one tenant begins by
    /// setting that tenant's row-security token (on unless set otherwise), so
    /// that, where the database enforces row-level security, its statements
    /// reach no other tenant's rows. Off, those transactions run under the
    /// every-tenant token every connection of the gate carries: one round
    /// trip fewer per transaction, and the stolen login is kept out all the
    /// same (see `migrations/*_row_security.sql`).
    pub fn with_row_security(mut self, bound: bool) -> Self {
        self.row_security = bound;
        self
    }

    /// The humans' public keys, by tenant and person: a mandate is published,
    /// and a stored policy enforced, only when its signature verifies under
    /// its signer's key here. A gate opened without keys enforces no policy.
    pub fn with_mandate_keys(mut self, keys: Keyring) -> Self {
        self.mandate_keys = keys;
        self
    }

    /// The gate's pool: for tests, the corpus and the benchmark only. What
    /// an operator runs reaches the database through the gate's operations.
    #[cfg(any(test, feature = "test-support"))]
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The checkpoint signer of this gate's tenants: on the gate's pool and
    /// clock, checking new entries with its ledger key, signing with
    /// `log_key` every `interval` ([`checkpointer`]).
    pub fn checkpointer(
        &self,
        log_key: tlog::LogKey,
        interval: Duration,
    ) -> checkpointer::Checkpointer {
        checkpointer::Checkpointer::new(
            self.pool.clone(),
            self.ledger_key.clone(),
            log_key,
            self.clock.clone(),
            interval,
        )
    }

    /// Closes the gate's connections (waiting for those in use).
    pub async fn close(&self) {
        self.pool.close().await;
        if let Some(onboard) = &self.onboard {
            onboard.close().await;
        }
    }

    pub fn provider(&self) -> &P {
        &self.provider
    }

    /// The gate's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The gate's "now".
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    pub(crate) fn ledger_key(&self) -> &LedgerKey {
        &self.ledger_key
    }

    /// The humans' public keys ([`Gate::with_mandate_keys`]).
    pub(crate) fn mandate_keys(&self) -> &Keyring {
        &self.mandate_keys
    }

    /// The tenants' policies and catalogs this gate has read (a guess the
    /// database checks on every proposal: [`world_cache`]).
    pub(crate) fn worlds(&self) -> &WorldCache {
        &self.worlds
    }

    /// Each tenant's turns at the pool for its proposals ([`turns`]).
    pub(crate) fn turns(&self) -> &Turns {
        &self.turns
    }

    /// The count of refusals no tenant's ledger could hold ([`refusal`]).
    pub(crate) fn untenanted(&self) -> &refusal::Untenanted {
        &self.untenanted
    }

    pub(crate) fn previous_secret(&self) -> Option<&[u8]> {
        self.previous_secret.as_deref()
    }

    pub(crate) fn provider_timeout(&self) -> Duration {
        self.provider_timeout
    }

    /// A transaction on a pooled connection, for `action`.
    ///
    /// The pool hands out an idle connection without testing it first
    /// (`crate::db::pool_options`). One that died while idle (a server
    /// restart, an idle timeout) fails its `BEGIN`, which wrote nothing: the
    /// transaction is begun again on another connection, at most once per
    /// connection the pool may hold and once more, so that no operation (a
    /// payment's second transaction, after the provider answered, least of
    /// all) fails for a connection that was already dead. Any other error,
    /// or a lost connection on every try, is the action's error.
    pub(crate) async fn begin(
        &self,
        action: &'static str,
    ) -> Result<Transaction<'static, Postgres>, ServiceError> {
        let tries = self.pool.options().get_max_connections().saturating_add(1);
        let mut tried = 1;
        loop {
            match self.pool.begin().await {
                Err(cause) if error::connection_lost(&cause) && tried < tries => tried += 1,
                begun => return begun.ctx(action),
            }
        }
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// As [`Gate::begin`], inside `tenant`: the transaction's first
    /// statement sets `tenant`'s row-security token (when
    /// [`Gate::with_row_security`] is on), so that under row-level security
    /// it reads, locks and writes no other tenant's rows.
    pub(crate) async fn begin_in(
        &self,
        tenant: &str,
        action: &'static str,
    ) -> Result<Transaction<'static, Postgres>, ServiceError> {
        let mut tx = self.begin(action).await?;
        if self.row_security {
            sqlx::query("SELECT set_config('spendgate.tenant_token', $1, true)")
                .bind(ledger::row_token(&self.ledger_key, tenant))
                .execute(&mut *tx)
                .await
                .ctx(action)?;
        }
        Ok(tx)
    }

    /// Writes the row-security token digests of `tenants` and of every
    /// tenant ([`ledger::EVERY_TENANT`]) for this gate's ledger key, in
    /// `tx` (an onboarding transaction: the runtime role may not write
    /// them). Seeding writes them; `spendgate tenant apply` writes them
    /// again for a tenant that exists, so a deployment migrated before
    /// row-level security, or whose ledger key changed, gets its own.
    pub(crate) async fn write_row_tokens(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        tenants: &[String],
    ) -> Result<(), ServiceError> {
        let mut scopes: Vec<String> = tenants.to_vec();
        scopes.push(ledger::EVERY_TENANT.to_owned());
        let digests: Vec<String> = scopes
            .iter()
            .map(|s| ledger::row_token_digest(&ledger::row_token(&self.ledger_key, s)))
            .collect();
        sqlx::query(
            "INSERT INTO row_tokens (scope, token_sha256) \
             SELECT * FROM UNNEST($1::text[], $2::text[]) \
             ON CONFLICT (scope) DO UPDATE SET token_sha256 = EXCLUDED.token_sha256",
        )
        .bind(&scopes)
        .bind(&digests)
        .execute(&mut **tx)
        .await
        .ctx("writing the row-security tokens")?;
        Ok(())
    }

    /// Writes the row-security token digests of `tenants` (and of every
    /// tenant) in a transaction of their own on the onboarding pool: what
    /// `spendgate tenant apply` runs for a tenant that exists.
    pub async fn register_row_tokens(&self, tenants: &[String]) -> Result<(), ServiceError> {
        let mut tx = self
            .begin_onboarding("writing the row-security tokens")
            .await?;
        self.write_row_tokens(&mut tx, tenants).await?;
        tx.commit().await.ctx("writing the row-security tokens")
    }

    /// A transaction on the onboarding pool (the gate's own without one),
    /// for `action`: begun as [`Gate::begin`] begins one.
    pub(crate) async fn begin_onboarding(
        &self,
        action: &'static str,
    ) -> Result<Transaction<'static, Postgres>, ServiceError> {
        let pool = self.onboard.as_ref().unwrap_or(&self.pool);
        let tries = pool.options().get_max_connections().saturating_add(1);
        let mut tried = 1;
        loop {
            match pool.begin().await {
                Err(cause) if error::connection_lost(&cause) && tried < tries => tried += 1,
                begun => return begun.ctx(action),
            }
        }
    }
}

/// `pool` as the gate connects to it: every new connection carries the
/// every-tenant row-security token as a startup parameter (never in a
/// statement's text, which other sessions of the same role may read), so
/// that the gate's paths that find a tenant first see every tenant's rows
/// where row-level security is enforced. Connections open before are not
/// reused: the pool is a new one, opened lazily, with `pool`'s settings.
fn every_tenant_pool(pool: &PgPool, key: &LedgerKey) -> PgPool {
    let token = ledger::row_token(key, ledger::EVERY_TENANT);
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("spendgate.tenant_token", token)]);
    pool.options().clone().connect_lazy_with(options)
}

/// The outcome of an operation that is not the agent-facing propose.
///
/// `decision` is `Allow` for "ok" (approve: the request is AUTHORIZED) and
/// `Deny(reason)` for a refusal. `id` is what the operation produced:
/// approve → the request id, checkout → the authority id, pay → the
/// provider's order id, webhook → the event id, grant/revoke → the
/// delegation id, set_policy → the new version number, set_price → the sku.
/// `constraint` names the database guard that refused, when one did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    #[serde(flatten)]
    pub decision: Decision,
    pub id: Option<String>,
    pub constraint: Option<String>,
}

impl Outcome {
    pub(crate) fn ok(id: String) -> Self {
        Outcome {
            decision: Decision::Allow,
            id: Some(id),
            constraint: None,
        }
    }

    pub(crate) fn refused(reason: Reason) -> Self {
        Outcome {
            decision: Decision::Deny(reason),
            id: None,
            constraint: None,
        }
    }

    pub(crate) fn with_id(mut self, id: String) -> Self {
        self.id = Some(id);
        self
    }

    /// True when the operation did what it was asked.
    pub fn is_ok(&self) -> bool {
        self.decision == Decision::Allow
    }

    /// The refusal's reason, if refused.
    pub fn reason(&self) -> Option<Reason> {
        self.decision.reason()
    }
}

/// What the agent-facing propose returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposeOutcome {
    /// The recorded request (`None` when the caller was not a known agent of the tenant).
    pub request_id: Option<String>,
    /// The decision kind and reason code (no caps, no budgets).
    pub decision: Decision,
    /// The redacted view: all an agent is ever told.
    pub view: AgentView,
    /// True when an idempotent replay returned the first decision.
    pub replayed: bool,
    /// For a `VELOCITY_LIMIT` or `DENIAL_RATE_LIMIT` refusal: when the
    /// policy's window next lets a proposal through (the oldest counted
    /// proposal, or denial, leaves it).
    pub retry_at: Option<DateTime<Utc>>,
}

impl ProposeOutcome {
    pub(crate) fn new(request_id: Option<String>, decision: Decision, replayed: bool) -> Self {
        ProposeOutcome {
            request_id,
            decision,
            view: AgentView::of(decision),
            replayed,
            retry_at: None,
        }
    }
}
