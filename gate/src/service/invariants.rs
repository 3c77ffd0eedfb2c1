//! What the harness checks after a scenario, read back from the rows.
//!
//! Guarantees: every number here is read from the database at the moment of
//! the call (nothing is cached in the gate): the tenant's provider orders,
//! what was captured (the sum of recorded captured payments, never of
//! orders), the tenant's reservations for the gate clock's current UTC day
//! (every currency's row of the day summed), each delegation's spent paise,
//! and whether every tenant's ledger chain is intact under the gate's key
//! (with the first break when it is not).

use std::collections::BTreeMap;

use serde::Serialize;

use super::Gate;
use super::error::{Ctx, ServiceError};
use super::ledger::{self, Anchor, LedgerBreak, LedgerReport};
use crate::provider::PaymentProvider;

/// The spec's invariants for one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invariants {
    pub provider_orders: i64,
    pub captured_paise: i64,
    pub spent_today_paise: i64,
    pub delegation_spent_paise: BTreeMap<String, i64>,
    pub ledger_intact: bool,
    pub ledger_break: Option<LedgerBreak>,
}

impl<P: PaymentProvider> Gate<P> {
    /// Every invariant of `tenant`, read now.
    pub async fn invariants(&self, tenant: &str) -> Result<Invariants, ServiceError> {
        let ledger = self.verify_ledger().await?;
        let delegation_spent_paise: Vec<(String, i64)> = sqlx::query_as(
            "SELECT id, spent_paise FROM delegations WHERE tenant_id = $1 ORDER BY id",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await
        .ctx("reading delegation spend")?;
        Ok(Invariants {
            provider_orders: self.provider_order_count(tenant).await?,
            captured_paise: self.captured_paise(tenant).await?,
            spent_today_paise: self.spent_today_paise(tenant).await?,
            delegation_spent_paise: delegation_spent_paise.into_iter().collect(),
            ledger_intact: ledger.intact(),
            ledger_break: ledger.first_break().cloned(),
        })
    }

    /// Provider orders the gate recorded for `tenant`.
    pub async fn provider_order_count(&self, tenant: &str) -> Result<i64, ServiceError> {
        sqlx::query_scalar("SELECT count(*) FROM provider_orders WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_one(&self.pool)
            .await
            .ctx("counting provider orders")
    }

    /// What `tenant`'s books show captured: the sum of the captured payments
    /// the gate recorded, each payment once, those of a request booked
    /// NEEDS_REVIEW included (two payments of one order count twice, as the
    /// day and the hop count them).
    pub async fn captured_paise(&self, tenant: &str) -> Result<i64, ServiceError> {
        sqlx::query_scalar(
            "SELECT COALESCE(sum(amount_paise), 0)::bigint FROM provider_payments \
             WHERE tenant_id = $1 AND status = 'captured'",
        )
        .bind(tenant)
        .fetch_one(&self.pool)
        .await
        .ctx("summing captured paise")
    }

    /// The tenant's reservations for the gate clock's current UTC day: the
    /// sum of the day's rows, one per currency (the spec's invariant counts
    /// every reservation of the day; each cap binds one currency's row).
    pub async fn spent_today_paise(&self, tenant: &str) -> Result<i64, ServiceError> {
        sqlx::query_scalar(
            "SELECT COALESCE(sum(reserved_paise), 0)::bigint FROM daily_spend \
             WHERE tenant_id = $1 AND day = $2",
        )
        .bind(tenant)
        .bind(self.now().date_naive())
        .fetch_one(&self.pool)
        .await
        .ctx("reading today's reservations")
    }

    /// What one delegation hop's grantee has reserved or spent; `None` for no such hop.
    pub async fn delegation_spent_paise(
        &self,
        tenant: &str,
        delegation_id: &str,
    ) -> Result<Option<i64>, ServiceError> {
        sqlx::query_scalar("SELECT spent_paise FROM delegations WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(delegation_id)
            .fetch_optional(&self.pool)
            .await
            .ctx("reading a delegation's spend")
    }

    /// A request's state (`AUTHORIZED`, `CAPTURED`, ...); `None` for no such request.
    pub async fn request_state(
        &self,
        tenant: &str,
        request_id: &str,
    ) -> Result<Option<String>, ServiceError> {
        sqlx::query_scalar("SELECT state FROM payment_requests WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
            .ctx("reading a request's state")
    }

    /// Integrates every tenant's committed queued ledger entries into its
    /// chain: the sequencer's step (see [`ledger::integrate`]), which the
    /// checkpoint signer runs every tick and every reader holding the key
    /// runs before it reads the chain.
    pub async fn integrate(&self) -> Result<ledger::Integrated, ServiceError> {
        ledger::integrate(&self.pool, self.ledger_key()).await
    }

    /// Walks every tenant's chain under the gate's ledger key; see [`ledger::verify`].
    pub async fn verify_ledger(&self) -> Result<LedgerReport, ServiceError> {
        ledger::verify(&self.pool, self.ledger_key(), None, None).await
    }

    /// Walks one tenant's chain, or every chain, under the gate's ledger
    /// key, and checks the heads `anchor` recorded; see [`ledger::verify`].
    pub async fn verify_ledger_with(
        &self,
        tenant: Option<&str>,
        anchor: Option<&Anchor>,
    ) -> Result<LedgerReport, ServiceError> {
        ledger::verify(&self.pool, self.ledger_key(), tenant, anchor).await
    }
}
