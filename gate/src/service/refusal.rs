//! How a refusal ends an operation: the one place that says which refusals
//! are kept.
//!
//! Guarantees: every operation ends a refusal through [`Gate::close_refused`].
//! A refusal is appended to the ledger of the caller's tenant and committed
//! together with whatever the refusal itself changed (a denied request row, a
//! request moved to CANCELLED or EXPIRED and its budgets released), so a
//! refusal is as durable as a success and counts wherever refusals count.
//! The one exception is a refusal whose tenant cannot be known (its entry
//! carries no tenant: a call naming an unknown tenant, a provider event that
//! is unsigned, malformed or names nothing the gate knows): there is no chain
//! to record it under, so its transaction rolls back and nothing is written
//! to the database. It is never silent: it is counted in
//! [`Gate::untenanted_refusals`] (which `/healthz` reports) and logged at
//! `warn` with its kind and reason code.

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry};
use super::{Gate, Outcome};
use crate::provider::PaymentProvider;
use crate::reason::Reason;

/// Refusals no tenant's ledger could hold, counted since the gate was built.
#[derive(Debug, Default)]
pub(crate) struct Untenanted(AtomicU64);

impl Untenanted {
    fn count(&self, entry: &Entry) {
        self.0.fetch_add(1, Ordering::Relaxed);
        let reason = entry.body["decision"]["reason"]
            .as_str()
            .or_else(|| entry.body["reason"].as_str())
            .unwrap_or("UNKNOWN");
        tracing::warn!(
            kind = entry.kind,
            reason,
            subject = %entry.subject,
            "a refusal with no known tenant: counted, not on any ledger"
        );
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// Records `entry` (the refusal) and commits `tx`; when the entry
    /// belongs to no known tenant, rolls back instead, counts the refusal
    /// and logs it.
    pub(crate) async fn close_refused(
        &self,
        mut tx: Transaction<'static, Postgres>,
        now: DateTime<Utc>,
        entry: Entry,
    ) -> Result<(), ServiceError> {
        if entry.tenant.is_none() {
            self.untenanted().count(&entry);
            return tx
                .rollback()
                .await
                .ctx("ending a refusal of an unknown tenant");
        }
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a refusal")
    }

    /// [`Gate::close_refused`], answering the refusal as an [`Outcome`].
    pub(crate) async fn refuse(
        &self,
        tx: Transaction<'static, Postgres>,
        now: DateTime<Utc>,
        entry: Entry,
        reason: Reason,
    ) -> Result<Outcome, ServiceError> {
        self.close_refused(tx, now, entry).await?;
        Ok(Outcome::refused(reason))
    }

    /// How many refusals this gate could record under no tenant (an unknown
    /// tenant, an unsigned or malformed provider event): each was logged,
    /// none is on a ledger.
    pub fn untenanted_refusals(&self) -> u64 {
        self.untenanted().get()
    }
}
