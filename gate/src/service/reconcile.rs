//! `reconcile`: settles every request the provider may hold money for.
//!
//! Guarantees:
//! - It examines every PROVIDER_PENDING request, and every authority with a
//!   capture kept for reconcile, of one tenant or of all, and asks the
//!   provider for the order by its receipt (the authority id).
//! - An order found that is the one asked for (`matches_request`) is
//!   recorded (once, whoever records it first) with its payments' state,
//!   through the same `apply_payment` the webhook uses: a captured payment
//!   moves the request to CAPTURED (or NEEDS_REVIEW when it had ended), a
//!   failed one is an attempt and changes nothing else.
//! - Manual capture: an authorised payment of the order, while the request
//!   still waits and the order has no captured payment, is captured through
//!   the provider for the authority's own amount and currency first.
//! - A refunded payment is money that moved: its capture is booked like any
//!   other and stays on the books, the refund is recorded beside it (the
//!   reconcile entry's `refunded`), and the request moves to NEEDS_REVIEW.
//! - Every capture kept for the authority that is still off the books is
//!   booked on its request (NEEDS_REVIEW when the request had moved on),
//!   before a missing order could fail the request.
//! - When the provider has no such order and the authority has expired, the
//!   request FAILS and its reservations are released. Before the authority
//!   expires, a missing order leaves the request PROVIDER_PENDING.
//! - A provider that fails or does not answer leaves everything as it was.
//! - Idempotent: a second run changes nothing and writes nothing. Safe
//!   concurrently with webhooks, pay and other reconciles: every change is
//!   made under the request's row lock, and each payment is recorded once
//!   (`uq_provider_payment_id`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;

use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry};
use super::lock::{RequestKey, lock};
use super::pay::{insert_order, matches_request};
use super::requests::{self, Transition};
use super::rows::{AUTHORITY_COLUMNS, AuthorityRow, OrderRow, RequestRow};
use super::webhook::{Applied, Source, apply_payment, find_order};
use super::{Gate, Outcome};
use crate::ident::is_ident;
use crate::provider::{OrderRequest, OrderSnapshot, PaymentProvider, PaymentStatus, ProviderError};
use crate::reason::Reason;
use crate::request_state::RequestState;

/// What one reconcile run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// Authorities examined.
    pub examined: usize,
    /// Orders the gate recorded for the first time.
    pub orders_recorded: usize,
    /// Requests moved PROVIDER_PENDING → CAPTURED.
    pub captured: usize,
    /// Requests moved to NEEDS_REVIEW (money after they ended).
    pub needs_review: usize,
    /// Failed payment attempts recorded.
    pub attempts: usize,
    /// Requests failed (no order, authority expired), reservations released.
    pub failed: usize,
    /// Requests still PROVIDER_PENDING afterwards.
    pub still_pending: usize,
    /// Kept captures now on the books.
    pub kept_settled: usize,
    /// Refunded payments recorded (their requests are NEEDS_REVIEW).
    pub refunds: usize,
    /// Provider calls that failed (those requests are left as they were).
    pub provider_errors: usize,
}

/// The books of one tenant (or all), as `books_balanced` checks them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Books {
    /// Every captured payment the gate recorded, in minor units.
    pub captured_paise: i64,
    /// Days whose reservations differ from the requests holding them.
    pub unbalanced_days: BTreeMap<String, (i64, i64)>,
    /// Hops whose spend differs from the requests holding it.
    pub unbalanced_hops: BTreeMap<String, (i64, i64)>,
    /// Captures kept for reconcile and not yet on the books.
    pub kept_unsettled: i64,
}

impl Books {
    /// The spec's `books_balanced`: every paisa the provider captured is a
    /// captured paisa on the gate's books, and every reservation belongs to
    /// a request that still holds it.
    pub fn balanced(&self, provider_captured_paise: i64) -> bool {
        self.captured_paise == provider_captured_paise
            && self.unbalanced_days.is_empty()
            && self.unbalanced_hops.is_empty()
    }

    /// [`Books::balanced`] once a reconcile has run: a capture kept for
    /// reconcile is money the provider took, so none may still be off the
    /// books.
    pub fn balanced_after_reconcile(&self, provider_captured_paise: i64) -> bool {
        self.balanced(provider_captured_paise) && self.kept_unsettled == 0
    }
}

/// What settling one authority did.
#[derive(Debug, Default)]
struct Settled {
    order_recorded: bool,
    applied: Vec<Applied>,
    failed: bool,
    pending: bool,
    kept_settled: u64,
    refunded: Vec<String>,
}

fn order_request(a: &AuthorityRow) -> OrderRequest {
    OrderRequest {
        receipt: a.id.clone(),
        merchant: a.merchant_id.clone(),
        amount_paise: a.amount_paise,
        currency: a.currency.clone(),
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// Settles every PROVIDER_PENDING request (and every kept capture) of
    /// `tenant`, or of every tenant when `None`, against the provider.
    pub async fn reconcile(&self, tenant: Option<&str>) -> Result<Reconciled, ServiceError> {
        let mut out = Reconciled::default();
        if tenant.is_some_and(|t| !is_ident(t)) {
            return Ok(out);
        }
        let sql = format!(
            "SELECT {} FROM checkout_authorities a \
             JOIN payment_requests r ON r.tenant_id = a.tenant_id AND r.id = a.request_id \
             WHERE ($1::text IS NULL OR a.tenant_id = $1) \
               AND (r.state = 'PROVIDER_PENDING' OR EXISTS (SELECT 1 FROM kept_captures k \
                    WHERE k.tenant_id = a.tenant_id AND k.authority_id = a.id AND k.settled_at IS NULL)) \
             ORDER BY a.tenant_id, a.id",
            AUTHORITY_COLUMNS
                .split(", ")
                .map(|c| format!("a.{}", c.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let authorities: Vec<AuthorityRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .fetch_all(&self.pool)
            .await
            .ctx("listing requests to reconcile")?;
        for authority in authorities {
            out.examined += 1;
            let asked = tokio::time::timeout(
                self.provider_timeout(),
                self.provider().find_by_receipt(&authority.id),
            )
            .await
            .unwrap_or(Err(ProviderError::Timeout));
            let snapshot = match asked {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(authority = %authority.id, "reconcile could not ask the provider: {e}");
                    out.provider_errors += 1;
                    continue;
                }
            };
            let (snapshot, capture_errors) = self.capture_authorized(&authority, snapshot).await?;
            out.provider_errors += capture_errors;
            let settled = self.settle(&authority, snapshot).await?;
            out.orders_recorded += usize::from(settled.order_recorded);
            for a in &settled.applied {
                match a {
                    Applied::Captured => out.captured += 1,
                    Applied::NeedsReview { .. } => out.needs_review += 1,
                    Applied::Attempt => out.attempts += 1,
                    Applied::AlreadyRecorded | Applied::OtherOrder => {}
                }
            }
            out.failed += usize::from(settled.failed);
            out.still_pending += usize::from(settled.pending);
            out.kept_settled += usize::try_from(settled.kept_settled).unwrap_or(usize::MAX);
            out.refunds += settled.refunded.len();
        }
        Ok(out)
    }

    /// Manual capture: captures, through the provider, an authorised
    /// payment of the order found for `authority` (for the authority's own
    /// amount and currency) while its request still waits on the provider
    /// and the order has no captured payment; the snapshot then shows it
    /// captured. Returns the snapshot and how many captures failed.
    async fn capture_authorized(
        &self,
        authority: &AuthorityRow,
        snapshot: Option<OrderSnapshot>,
    ) -> Result<(Option<OrderSnapshot>, usize), ServiceError> {
        let Some(mut snap) = snapshot else {
            return Ok((None, 0));
        };
        let wanted = snap.payments.iter().any(|p| {
            p.status == PaymentStatus::Authorized
                && p.amount_paise == authority.amount_paise
                && p.currency == authority.currency
        });
        if !wanted
            || snap.captured().next().is_some()
            || matches_request(&snap.order, &order_request(authority)).is_err()
            || self
                .request_state(&authority.tenant_id, &authority.request_id)
                .await?
                .as_deref()
                != Some(RequestState::ProviderPending.as_str())
        {
            return Ok((Some(snap), 0));
        }
        let mut errors = 0;
        for payment in &mut snap.payments {
            if payment.status != PaymentStatus::Authorized
                || payment.amount_paise != authority.amount_paise
                || payment.currency != authority.currency
            {
                continue;
            }
            let answered = tokio::time::timeout(
                self.provider_timeout(),
                self.provider().capture_authorized(
                    &payment.id,
                    authority.amount_paise,
                    &authority.currency,
                ),
            )
            .await
            .unwrap_or(Err(ProviderError::Timeout));
            match answered {
                Ok(captured)
                    if captured.id == payment.id
                        && captured.status == PaymentStatus::Captured
                        && captured.amount_paise == authority.amount_paise
                        && captured.currency == authority.currency =>
                {
                    *payment = captured;
                    // An order is paid once.
                    break;
                }
                Ok(other) => {
                    tracing::warn!(authority = %authority.id, payment = %other.id,
                        "the provider's capture answered another payment or amount");
                    errors += 1;
                }
                Err(e) => {
                    tracing::warn!(authority = %authority.id, "reconcile could not capture an authorised payment: {e}");
                    errors += 1;
                }
            }
        }
        Ok((Some(snap), errors))
    }

    /// Settles one authority against what the provider said, in one
    /// transaction under the request's lock.
    async fn settle(
        &self,
        authority: &AuthorityRow,
        snapshot: Option<OrderSnapshot>,
    ) -> Result<Settled, ServiceError> {
        let now = self.now();
        let mut tx = self
            .begin_in(&authority.tenant_id, "reconciling a request")
            .await?;
        let tenant = authority.tenant_id.clone();
        let mut request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &tenant,
                request: &authority.request_id,
            },
        )
        .await
        .ctx("locking the request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the request of authority {} vanished", authority.id),
        })?;
        let from = request.state;
        let mut settled = Settled::default();
        // Only the order asked for counts; a mismatching answer is as good as none.
        let snapshot = snapshot.filter(|s| {
            let ok = matches_request(&s.order, &order_request(authority)).is_ok();
            if !ok {
                tracing::warn!(authority = %authority.id, order = %s.order.id,
                    "reconcile ignored an order that does not match its authority");
            }
            ok
        });
        let mut absent = false;
        match snapshot {
            Some(snap) => {
                settled.order_recorded =
                    insert_order(&mut tx, authority, &snap.order.id, now).await?;
                let order = find_order(&mut tx, &snap.order.id).await?;
                match order {
                    Some(order) if order.request_id == authority.request_id => {
                        for payment in &snap.payments {
                            // An authorisation is not money until captured
                            // (`capture_authorized`, before this transaction).
                            if payment.status == PaymentStatus::Authorized
                                || payment.amount_paise != order.amount_paise
                                || payment.currency != order.currency
                                || !is_ident(&payment.id)
                            {
                                continue;
                            }
                            let applied = apply_payment(
                                &mut tx,
                                &request,
                                &order,
                                &payment.id,
                                payment.status.was_captured(),
                                Source::Reconcile,
                                now,
                            )
                            .await?;
                            if payment.status == PaymentStatus::Refunded {
                                settled.refunded.push(payment.id.clone());
                            }
                            if !matches!(applied, Applied::AlreadyRecorded | Applied::OtherOrder) {
                                settled.applied.push(applied);
                                request = lock(
                                    &mut tx,
                                    RequestKey {
                                        tenant: &tenant,
                                        request: &authority.request_id,
                                    },
                                )
                                .await
                                .ctx("re-reading the request")?
                                .ok_or_else(|| {
                                    ServiceError::Corrupt {
                                        what: format!("request {} vanished", request.id),
                                    }
                                })?;
                            }
                        }
                    }
                    _ => {
                        // The gate recorded another order for this authority:
                        // left for a human (the ledger says so below).
                        tracing::warn!(authority = %authority.id,
                            "reconcile found an order other than the one recorded");
                    }
                }
            }
            None => absent = true,
        }
        // Captures kept for this authority are money: booked before a
        // missing order could fail the request.
        // A refund is recorded beside the capture it returns: the capture
        // stays on the books and the request waits for a human.
        if !settled.refunded.is_empty() && request.state == RequestState::Captured {
            Transition::needs_review(&request, 0)
                .apply(&mut tx, now)
                .await?;
            request.state = RequestState::NeedsReview;
        }
        let booked = book_kept(&mut tx, authority, &mut request, now).await?;
        settled.order_recorded |= booked.order_recorded;
        settled.applied.extend(booked.applied.iter().copied());
        if absent && request.state == RequestState::ProviderPending && now > authority.expires_at {
            Transition::new(&request, RequestState::Failed)
                .because(Reason::AuthorityExpired)
                .apply(&mut tx, now)
                .await?;
            settled.failed = true;
        }
        let kept = sqlx::query(
            "UPDATE kept_captures SET settled_at = $3 \
             WHERE tenant_id = $1 AND authority_id = $2 AND settled_at IS NULL \
               AND provider_payment_id IN (SELECT provider_payment_id FROM provider_payments \
                   WHERE tenant_id = $1 AND status = 'captured')",
        )
        .bind(&tenant)
        .bind(&authority.id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .ctx("settling kept captures")?;
        settled.kept_settled = kept.rows_affected();
        let to = requests::state_of(&mut tx, &tenant, &authority.request_id).await?;
        settled.pending = to == Some(RequestState::ProviderPending);
        let changed = settled.order_recorded
            || !settled.refunded.is_empty()
            || !settled.applied.is_empty()
            || settled.failed
            || settled.kept_settled > 0;
        if changed {
            let entry = Entry::new(
                Some(&tenant),
                "reconcile",
                &authority.id,
                json!({
                    "authority": authority.id,
                    "request": authority.request_id,
                    "from": from,
                    "state": to,
                    "order_recorded": settled.order_recorded,
                    "payments": settled.applied.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>(),
                    "released_paise": if settled.failed { request.reserved_paise } else { 0 },
                    "kept_settled": settled.kept_settled,
                    "kept_booked": booked.orders,
                    "refunded": settled.refunded,
                }),
            );
            ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        }
        tx.commit().await.ctx("committing a reconcile")?;
        Ok(settled)
    }

    /// The books of `tenant` (or of every tenant), for `books_balanced`.
    pub async fn books(&self, tenant: Option<&str>) -> Result<Books, ServiceError> {
        let captured_paise: i64 = sqlx::query_scalar(
            "SELECT COALESCE(sum(amount_paise), 0)::bigint FROM provider_payments \
             WHERE status = 'captured' AND ($1::text IS NULL OR tenant_id = $1)",
        )
        .bind(tenant)
        .fetch_one(&self.pool)
        .await
        .ctx("summing captured payments")?;
        let days: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT d.tenant_id || '/' || d.day::text || '/' || d.currency, d.reserved_paise, \
                    COALESCE((SELECT sum(r.reserved_paise) FROM payment_requests r \
                      WHERE r.tenant_id = d.tenant_id AND r.reserved_day = d.day \
                        AND r.currency = d.currency), 0)::bigint \
             FROM daily_spend d WHERE ($1::text IS NULL OR d.tenant_id = $1)",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await
        .ctx("balancing the days")?;
        let hops: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT h.tenant_id || '/' || h.id, h.spent_paise, \
                    COALESCE((SELECT sum(r.reserved_paise) FROM payment_requests r \
                      WHERE r.tenant_id = h.tenant_id AND r.delegation_id = h.id), 0)::bigint \
             FROM delegations h WHERE ($1::text IS NULL OR h.tenant_id = $1)",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await
        .ctx("balancing the hops")?;
        let kept_unsettled: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM kept_captures WHERE settled_at IS NULL \
             AND ($1::text IS NULL OR tenant_id = $1)",
        )
        .bind(tenant)
        .fetch_one(&self.pool)
        .await
        .ctx("counting kept captures")?;
        let off = |rows: Vec<(String, i64, i64)>| {
            rows.into_iter()
                .filter(|(_, held, owed)| held != owed)
                .map(|(k, held, owed)| (k, (held, owed)))
                .collect()
        };
        Ok(Books {
            captured_paise,
            unbalanced_days: off(days),
            unbalanced_hops: off(hops),
            kept_unsettled,
        })
    }
}

/// What booking the kept captures of one authority did.
#[derive(Debug, Default)]
struct Booked {
    order_recorded: bool,
    applied: Vec<Applied>,
    /// The order id each booked capture's event named.
    orders: Vec<String>,
}

/// A capture kept for reconcile, as it was kept.
#[derive(sqlx::FromRow)]
struct KeptRow {
    provider_order_id: String,
    provider_payment_id: String,
    amount_paise: i64,
    currency: String,
}

/// Books every capture kept for `authority` that is still off the books, on
/// the LOCKED `request` its receipt names: under the order the gate recorded
/// for the authority, or, when it has none, under the kept capture's own
/// order, recorded now. A request still PROVIDER_PENDING is CAPTURED by it;
/// one that had moved on (its own order captured, failed, or reviewed
/// already) goes to NEEDS_REVIEW with the money counted. `request` is
/// re-read after each move.
async fn book_kept(
    conn: &mut PgConnection,
    authority: &AuthorityRow,
    request: &mut RequestRow,
    now: DateTime<Utc>,
) -> Result<Booked, ServiceError> {
    let mut booked = Booked::default();
    let kept: Vec<KeptRow> = sqlx::query_as(
        "SELECT provider_order_id, provider_payment_id, amount_paise, currency FROM kept_captures k \
         WHERE tenant_id = $1 AND authority_id = $2 AND settled_at IS NULL \
           AND NOT EXISTS (SELECT 1 FROM provider_payments p \
                WHERE p.provider_payment_id = k.provider_payment_id) \
         ORDER BY received_at, event_id_sha256",
    )
    .bind(&authority.tenant_id)
    .bind(&authority.id)
    .fetch_all(&mut *conn)
    .await
    .ctx("reading kept captures off the books")?;
    // Only a request that reached the provider can have been paid.
    let reached = matches!(
        request.state,
        RequestState::ProviderPending
            | RequestState::Captured
            | RequestState::Failed
            | RequestState::NeedsReview
    );
    if !kept.is_empty() && !reached {
        tracing::warn!(authority = %authority.id, state = ?request.state,
            "kept captures name a request that never reached the provider");
        return Ok(booked);
    }
    for k in kept {
        if k.amount_paise != authority.amount_paise
            || k.currency != authority.currency
            || !is_ident(&k.provider_payment_id)
            || !is_ident(&k.provider_order_id)
        {
            continue;
        }
        let order = match order_of(conn, authority).await? {
            Some(order) => order,
            None => {
                booked.order_recorded |=
                    insert_order(conn, authority, &k.provider_order_id, now).await?;
                match order_of(conn, authority).await? {
                    Some(order) => order,
                    None => {
                        tracing::warn!(authority = %authority.id, order = %k.provider_order_id,
                            "a kept capture's order is recorded for another authority");
                        continue;
                    }
                }
            }
        };
        let applied = apply_payment(
            conn,
            request,
            &order,
            &k.provider_payment_id,
            true,
            Source::Reconcile,
            now,
        )
        .await?;
        if matches!(applied, Applied::Captured | Applied::NeedsReview { .. }) {
            *request = lock(
                conn,
                RequestKey {
                    tenant: &authority.tenant_id,
                    request: &authority.request_id,
                },
            )
            .await
            .ctx("re-reading the request")?
            .ok_or_else(|| ServiceError::Corrupt {
                what: format!("request {} vanished", authority.request_id),
            })?;
            booked.applied.push(applied);
            booked.orders.push(k.provider_order_id);
        }
    }
    Ok(booked)
}

/// The order the gate recorded for `authority`, if any.
async fn order_of(
    conn: &mut PgConnection,
    authority: &AuthorityRow,
) -> Result<Option<OrderRow>, ServiceError> {
    sqlx::query_as(
        "SELECT tenant_id, provider_order_id, request_id, amount_paise, currency \
         FROM provider_orders WHERE tenant_id = $1 AND authority_id = $2",
    )
    .bind(&authority.tenant_id)
    .bind(&authority.id)
    .fetch_optional(&mut *conn)
    .await
    .ctx("reading the authority's order")
}

/// Kept for the outcome-shaped callers (the bench's `reconcile` verb).
impl Reconciled {
    /// As an [`Outcome`]: always ok (reconcile refuses nothing).
    pub fn outcome(&self) -> Outcome {
        Outcome::ok(format!("reconciled:{}", self.examined))
    }
}
