//! How a refusal ends an operation: the one place that says which refusals
//! are kept.
//!
//! Guarantees: every operation ends a refusal through [`Gate::close_refused`].
//! A refusal is appended to the ledger of the caller's tenant and committed
//! together with whatever the refusal itself changed (a denied request row, a
//! request moved to CANCELLED or EXPIRED and its budgets released), so a
//! refusal is as durable as a success and counts wherever refusals count.
//! The one exception is a call that names no known tenant (its entry carries
//! no tenant): there is nothing to record it under, so its transaction rolls
//! back and nothing at all is written.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry};
use super::{Gate, Outcome};
use crate::provider::PaymentProvider;
use crate::reason::Reason;

impl<P: PaymentProvider> Gate<P> {
    /// Records `entry` (the refusal) and commits `tx`; rolls back instead
    /// when the entry belongs to no known tenant.
    pub(crate) async fn close_refused(
        &self,
        mut tx: Transaction<'static, Postgres>,
        now: DateTime<Utc>,
        entry: Entry,
    ) -> Result<(), ServiceError> {
        if entry.tenant.is_none() {
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
}
