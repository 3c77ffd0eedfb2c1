//! `webhook`: a provider event arriving at the gate, in Razorpay's shape.
//!
//! Guarantees, in order:
//! 1. the signature (`X-Razorpay-Signature`) is hex HMAC-SHA256 over the RAW
//!    bytes, checked with a constant-time compare (`Mac::verify_slice`)
//!    BEFORE anything is parsed, against the current webhook secret or the
//!    previous one while it is configured (rotation: the provider retries
//!    older events for 24 hours); otherwise `WEBHOOK_SIGNATURE_INVALID`;
//! 2. the event id is the `X-Razorpay-Event-Id` header, taken as sent, of any
//!    length: it is deduplicated exactly by its SHA-256 (the database derives
//!    it from the id's bytes under `uq_provider_event_id`) and never reaches
//!    SQL as text. A missing or empty one is `WEBHOOK_MALFORMED`;
//! 3. the body is Razorpay's event envelope (`entity: "event"`, `event`,
//!    `contains`, `created_at`, `payload.payment.entity` and, for
//!    `order.paid`, `payload.order.entity`). Only `payment.captured`,
//!    `payment.failed` and `order.paid` act; any other signed event is
//!    `WEBHOOK_EVENT_IGNORED`. A signed body that is not such an envelope,
//!    that writes a key twice in any object (whichever copy a parser kept,
//!    the body is ambiguous), whose payment and order entities disagree on
//!    order, amount or currency, or whose payment status contradicts its
//!    event, is `WEBHOOK_MALFORMED`; an order id outside the identifier grammar is
//!    `WEBHOOK_UNKNOWN_ORDER` (it never reaches SQL);
//! 4. the event's own time may be at most 24 hours old (`WEBHOOK_STALE`) and
//!    at most 5 minutes ahead of the gate's clock (`WEBHOOK_POST_DATED`); a
//!    redelivered id is `WEBHOOK_DUPLICATE`;
//! 5. amount and currency must equal the server-derived order's
//!    (`WEBHOOK_AMOUNT_MISMATCH`, `WEBHOOK_CURRENCY_MISMATCH`);
//! 6. money that moved is always on the books: a payment is recorded once by
//!    its provider id (`uq_provider_payment_id`), so `payment.captured` and
//!    `order.paid` for one payment count once. A failed payment is one
//!    attempt: the request stays PROVIDER_PENDING with its reservations. A
//!    capture moves a PROVIDER_PENDING request to CAPTURED; for a request
//!    that had already left PROVIDER_PENDING it is recorded all the same and
//!    the request moves to NEEDS_REVIEW with the payment counted in the day's
//!    and the hop's spend, even past a cap. A payment id the books already
//!    hold for another order names no payment of this one: the event is
//!    `WEBHOOK_MALFORMED` and moves nothing;
//! 7. a capture for an order the gate has not recorded (the provider answered
//!    after the gate's timeout) whose order entity's receipt names one of the
//!    gate's consumed authorities, for that authority's amount and currency,
//!    is kept in `kept_captures` for reconcile (which books it on the
//!    authority's request), not dropped; any other unknown order is
//!    `WEBHOOK_UNKNOWN_ORDER`;
//! 8. every refusal ends through [`Gate::close_refused`]: on the ledger of
//!    the tenant the event's order (or its receipt's authority) belongs to,
//!    or, when it names nothing the gate knows (an unsigned or unreadable
//!    body), counted in [`Gate::untenanted_refusals`] and logged;
//! 9. an applied event is recorded with its body and its signature header
//!    exactly as received (`provider_event_bodies`, in the statement that
//!    records the event, when within [`MAX_RAW_EVENT_BYTES`] and
//!    [`MAX_RAW_SIGNATURE_BYTES`]), and its `provider_event` ledger entry
//!    carries the SHA-256 of both, so a bundle's copies can be checked
//!    against the log. A refused or kept-for-reconcile event keeps only its
//!    body's digest.
//!
//! A browser callback never reaches this code: only signed provider events move state.

use chrono::{DateTime, Duration, Utc};
pub use gate_core::webhook_signature::{sign_webhook, signature_is_valid};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgConnection;

use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry, LedgerKey};
use super::lock::{RequestKey, lock};
use super::requests::{self, Transition};
use super::rows::{AUTHORITY_COLUMNS, AuthorityRow, OrderRow, RequestRow};
use super::{Gate, Outcome};
use crate::ident::is_ident;
use crate::provider::{OrderStatus, Payment, PaymentProvider, PaymentStatus, ProviderOrder};
use crate::reason::{Decision, Reason};
use crate::request_state::RequestState;

/// The event that captures a payment.
pub const EVENT_CAPTURED: &str = "payment.captured";
/// The event that reports a failed payment attempt.
pub const EVENT_FAILED: &str = "payment.failed";
/// The event that reports an order paid in full (with its payment).
pub const EVENT_ORDER_PAID: &str = "order.paid";
/// The event that reports a payment the customer's bank authorised and the
/// merchant must capture (manual capture).
pub const EVENT_AUTHORIZED: &str = "payment.authorized";
/// How old an event may be.
pub const MAX_EVENT_AGE_HOURS: i64 = 24;
/// How far ahead of the gate's clock an event may be stamped.
pub const MAX_EVENT_LEAD_MINUTES: i64 = 5;
/// The shortest webhook secret a gate accepts.
pub const MIN_WEBHOOK_SECRET_BYTES: usize = 32;
/// The state of a request that money reached after it had left PROVIDER_PENDING.
pub const NEEDS_REVIEW: &str = RequestState::NeedsReview.as_str();

/// A webhook secret the gate refuses to be built with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookSecretError {
    #[error(
        "the {which} webhook secret is {len} bytes; at least {MIN_WEBHOOK_SECRET_BYTES} are required \
         (anyone could forge events signed with a short key)"
    )]
    TooShort { which: &'static str, len: usize },
}

/// Checks a secret's length.
pub fn check_secret(which: &'static str, secret: &[u8]) -> Result<(), WebhookSecretError> {
    if secret.len() < MIN_WEBHOOK_SECRET_BYTES {
        return Err(WebhookSecretError::TooShort {
            which,
            len: secret.len(),
        });
    }
    Ok(())
}

/// The hex SHA-256 of an event id's bytes: how it is deduplicated.
pub fn event_id_digest(event_id: &str) -> String {
    hex::encode(Sha256::digest(event_id.as_bytes()))
}

/// Builds Razorpay's documented event envelope: `payment` as
/// `payload.payment.entity` and `order` as `payload.order.entity`, each when
/// given. The event id is not in the body: the provider sends it in the
/// `X-Razorpay-Event-Id` header.
pub fn razorpay_envelope(
    event: &str,
    created_at: DateTime<Utc>,
    payment: Option<&Payment>,
    order: Option<&ProviderOrder>,
) -> Vec<u8> {
    let mut contains = Vec::new();
    let mut payload = serde_json::Map::new();
    if let Some(p) = payment {
        contains.push("payment");
        let captured = p.status == PaymentStatus::Captured;
        payload.insert(
            "payment".into(),
            json!({"entity": {
                "id": p.id,
                "entity": "payment",
                "amount": p.amount_paise,
                "currency": p.currency,
                "base_amount": p.amount_paise,
                "status": p.status.as_str(),
                "order_id": p.order_id,
                "invoice_id": null,
                "international": false,
                "method": "upi",
                "amount_refunded": 0,
                "refund_status": null,
                "captured": captured,
                "description": null,
                "email": "buyer@example.com",
                "contact": "+919000090000",
                "notes": [],
                "fee": if captured { 2 } else { 0 },
                "tax": 0,
                "error_code": if captured { Value::Null } else { json!("BAD_REQUEST_ERROR") },
                "error_description": if captured { Value::Null } else { json!("Payment failed") },
                "created_at": p.created_at,
            }}),
        );
    }
    if let Some(o) = order {
        contains.push("order");
        payload.insert(
            "order".into(),
            json!({"entity": {
                "id": o.id,
                "entity": "order",
                "amount": o.amount_paise,
                "amount_paid": o.amount_paid_paise,
                "amount_due": o.amount_due_paise(),
                "currency": o.currency,
                "receipt": o.receipt,
                "offer_id": null,
                "status": o.status.as_str(),
                "attempts": o.attempts,
                "notes": {"merchant": o.merchant, "authority": o.receipt},
                "created_at": o.created_at,
            }}),
        );
    }
    json!({
        "entity": "event",
        "account_id": "acc_SpendgateTest01",
        "event": event,
        "contains": contains,
        "payload": payload,
        "created_at": created_at.timestamp(),
    })
    .to_string()
    .into_bytes()
}

/// A provider event as a test or the bench describes it; [`Self::to_body`]
/// renders Razorpay's envelope and `id` is sent as the event-id header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderEvent {
    pub id: String,
    pub event: String,
    pub created_at: DateTime<Utc>,
    pub order_id: String,
    pub amount_paise: i64,
    pub currency: String,
}

impl ProviderEvent {
    /// The payment this event reports, named as the provider's model names
    /// it, so `payment.captured`, `order.paid` and reconcile of one order's
    /// capture name one payment.
    pub fn payment_id(&self) -> String {
        crate::provider::model::payment_id(&self.order_id, self.status(), 1)
    }

    /// The status of the payment this event reports.
    fn status(&self) -> PaymentStatus {
        match self.event.as_str() {
            EVENT_FAILED => PaymentStatus::Failed,
            EVENT_AUTHORIZED => PaymentStatus::Authorized,
            _ => PaymentStatus::Captured,
        }
    }

    /// The payment entity of this event.
    pub fn payment(&self) -> Payment {
        Payment {
            id: self.payment_id(),
            order_id: self.order_id.clone(),
            amount_paise: self.amount_paise,
            currency: self.currency.clone(),
            status: self.status(),
            created_at: self.created_at.timestamp(),
        }
    }

    /// Razorpay's envelope of this event (with the order entity for `order.paid`).
    pub fn to_body(&self) -> Vec<u8> {
        let order = (self.event == EVENT_ORDER_PAID).then(|| ProviderOrder {
            id: self.order_id.clone(),
            receipt: String::new(),
            merchant: String::new(),
            amount_paise: self.amount_paise,
            amount_paid_paise: self.amount_paise,
            currency: self.currency.clone(),
            status: OrderStatus::Paid,
            attempts: 1,
            created_at: self.created_at.timestamp(),
        });
        razorpay_envelope(
            &self.event,
            self.created_at,
            Some(&self.payment()),
            order.as_ref(),
        )
    }
}

/// A verified, well-formed event the gate acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Parsed {
    pub event: String,
    pub created_at: DateTime<Utc>,
    pub payment_id: String,
    pub order_id: String,
    pub amount_paise: i64,
    pub currency: String,
    pub captured: bool,
    /// A payment authorised and not yet captured (`payment.authorized`).
    pub authorized: bool,
    /// The order entity's receipt, when the body carries one.
    pub receipt: Option<String>,
}

#[derive(Deserialize)]
struct EnvelopeHead {
    entity: String,
    event: String,
    contains: Vec<String>,
    created_at: i64,
}

#[derive(Deserialize)]
struct PaymentEntity {
    id: String,
    entity: String,
    order_id: Option<String>,
    amount: i64,
    currency: String,
    status: String,
}

#[derive(Deserialize)]
struct OrderEntity {
    id: String,
    entity: String,
    amount: i64,
    currency: String,
    receipt: Option<String>,
}

fn is_currency(c: &str) -> bool {
    c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase())
}

/// Parses a verified body. `Err(WEBHOOK_EVENT_IGNORED)` for a well-formed
/// envelope of an event the gate does not act on; `Err(WEBHOOK_MALFORMED)`
/// for anything that is not the documented shape; `Err(WEBHOOK_UNKNOWN_ORDER)`
/// for an order id outside the identifier grammar.
pub(crate) fn parse_event(body: &[u8]) -> Result<Parsed, Reason> {
    // A key written twice anywhere is ambiguous (parsers disagree on which
    // value wins): the body is not one well-formed event.
    if !crate::proposal::has_distinct_keys(body) {
        return Err(Reason::WebhookMalformed);
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| Reason::WebhookMalformed)?;
    let head: EnvelopeHead =
        serde_json::from_value(value.clone()).map_err(|_| Reason::WebhookMalformed)?;
    if head.entity != "event" {
        return Err(Reason::WebhookMalformed);
    }
    let created_at =
        DateTime::from_timestamp(head.created_at, 0).ok_or(Reason::WebhookMalformed)?;
    let wanted = [
        EVENT_CAPTURED,
        EVENT_FAILED,
        EVENT_ORDER_PAID,
        EVENT_AUTHORIZED,
    ];
    if !wanted.contains(&head.event.as_str()) {
        return Err(Reason::WebhookEventIgnored);
    }
    let entity = |name: &str| -> Result<Option<Value>, Reason> {
        match value.pointer(&format!("/payload/{name}")) {
            None | Some(Value::Null) => Ok(None),
            Some(wrapped) => wrapped
                .get("entity")
                .cloned()
                .map(Some)
                .ok_or(Reason::WebhookMalformed),
        }
    };
    let payment: PaymentEntity = match entity("payment")? {
        Some(v) => serde_json::from_value(v).map_err(|_| Reason::WebhookMalformed)?,
        None => return Err(Reason::WebhookMalformed),
    };
    let order: Option<OrderEntity> = entity("order")?
        .map(|v| serde_json::from_value(v).map_err(|_| Reason::WebhookMalformed))
        .transpose()?;
    let listed = |name: &str| head.contains.iter().any(|c| c == name);
    if payment.entity != "payment"
        || !listed("payment")
        || order
            .as_ref()
            .is_some_and(|o| o.entity != "order" || !listed("order"))
        || (head.event == EVENT_ORDER_PAID && order.is_none())
        || payment.amount <= 0
        || !is_currency(&payment.currency)
        || !is_ident(&payment.id)
    {
        return Err(Reason::WebhookMalformed);
    }
    let expected_status = match head.event.as_str() {
        EVENT_FAILED => "failed",
        EVENT_AUTHORIZED => "authorized",
        _ => "captured",
    };
    if payment.status != expected_status {
        return Err(Reason::WebhookMalformed);
    }
    let captured = expected_status == "captured";
    let authorized = expected_status == "authorized";
    let order_id = match (&payment.order_id, &order) {
        (Some(id), Some(o)) if *id != o.id => return Err(Reason::WebhookMalformed),
        (Some(id), _) => id.clone(),
        (None, Some(o)) => o.id.clone(),
        (None, None) => return Err(Reason::WebhookMalformed),
    };
    if order.as_ref().is_some_and(|o| o.amount != payment.amount) {
        return Err(Reason::WebhookMalformed);
    }
    if order
        .as_ref()
        .is_some_and(|o| o.currency != payment.currency)
    {
        return Err(Reason::WebhookMalformed);
    }
    if !is_ident(&order_id) {
        return Err(Reason::WebhookUnknownOrder);
    }
    Ok(Parsed {
        event: head.event,
        created_at,
        payment_id: payment.id,
        order_id,
        amount_paise: payment.amount,
        currency: payment.currency,
        captured,
        authorized,
        receipt: order.and_then(|o| o.receipt).filter(|r| is_ident(r)),
    })
}

/// Whether an event with this id digest was already applied or kept.
async fn event_seen(conn: &mut PgConnection, digest: &str) -> Result<bool, ServiceError> {
    let seen: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM provider_events WHERE event_id_sha256 = $1) \
             OR EXISTS (SELECT 1 FROM kept_captures WHERE event_id_sha256 = $1)",
    )
    .bind(digest)
    .fetch_one(&mut *conn)
    .await
    .ctx("looking up the event id")?;
    Ok(seen)
}

/// Refusals that need only the event and the gate's clock.
fn timing(event: &Parsed, now: DateTime<Utc>) -> Option<Reason> {
    if event.created_at < now - Duration::hours(MAX_EVENT_AGE_HOURS) {
        Some(Reason::WebhookStale)
    } else if event.created_at > now + Duration::minutes(MAX_EVENT_LEAD_MINUTES) {
        Some(Reason::WebhookPostDated)
    } else {
        None
    }
}

/// Refusals that compare the event with the server-derived order.
fn verdict(event: &Parsed, amount_paise: i64, currency: &str) -> Option<Reason> {
    if event.amount_paise != amount_paise {
        Some(Reason::WebhookAmountMismatch)
    } else if event.currency != currency {
        Some(Reason::WebhookCurrencyMismatch)
    } else {
        None
    }
}

/// What recording one payment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The payment was already on the books: nothing changed.
    AlreadyRecorded,
    /// A failed attempt: the request keeps its state and reservations.
    Attempt,
    /// PROVIDER_PENDING → CAPTURED.
    Captured,
    /// Money reached a request that had already ended: NEEDS_REVIEW, with
    /// this many paise counted past any cap.
    NeedsReview { counted_paise: i64 },
    /// The payment id is on the books for another order: nothing recorded,
    /// nothing moved, no ledger entry written.
    OtherOrder,
}

/// Who reports a payment to [`apply_payment`], and so what it records.
pub(crate) enum Source<'a> {
    /// A signed event: the payment's ledger entry (`entry` of what was
    /// applied) is written by [`apply_payment`], last; for a capture, in the
    /// statement that moves the request ([`Transition::apply_recording`]).
    Webhook {
        key: &'a LedgerKey,
        entry: &'a (dyn Fn(Applied) -> Entry + Sync),
    },
    /// A reconcile run, which writes one entry for all it settled.
    Reconcile,
}

impl Source<'_> {
    /// The `source` column of the payment's row.
    fn column(&self) -> &'static str {
        match self {
            Source::Webhook { .. } => "webhook",
            Source::Reconcile => "reconcile",
        }
    }

    /// Writes the webhook's entry for `applied` (a reconcile writes its own).
    async fn record(
        &self,
        conn: &mut PgConnection,
        now: DateTime<Utc>,
        applied: Applied,
    ) -> Result<Applied, ServiceError> {
        if let Source::Webhook { key, entry } = self {
            ledger::append(conn, key, now, vec![entry(applied)]).await?;
        }
        Ok(applied)
    }
}

/// Records one payment of `order` for the LOCKED `request` and moves the
/// request as the payment demands; for a webhook, also its ledger entry
/// ([`Source`]). The one place money that moved reaches the books, for the
/// webhook and reconcile alike.
pub(crate) async fn apply_payment(
    conn: &mut PgConnection,
    request: &RequestRow,
    order: &OrderRow,
    payment_id: &str,
    captured: bool,
    source: Source<'_>,
    now: DateTime<Utc>,
) -> Result<Applied, ServiceError> {
    let status = if captured { "captured" } else { "failed" };
    // uq_provider_payment_id: a payment is recorded once; a failed one that
    // the provider later reports captured is upgraded, never counted twice.
    // A captured payment marks its order CAPTURED in the same statement
    // (`captured` below), only when the payment went in.
    let recorded: Option<String> = sqlx::query_scalar(
        "WITH recorded AS ( \
             INSERT INTO provider_payments AS p (tenant_id, provider_payment_id, provider_order_id, \
             request_id, amount_paise, currency, status, source, recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT ON CONSTRAINT uq_provider_payment_id DO UPDATE SET status = EXCLUDED.status \
             WHERE p.status = 'failed' AND EXCLUDED.status = 'captured' \
               AND p.provider_order_id = EXCLUDED.provider_order_id AND p.tenant_id = EXCLUDED.tenant_id \
             RETURNING status), \
         captured AS ( \
             UPDATE provider_orders SET status = 'CAPTURED' \
              WHERE tenant_id = $1 AND provider_order_id = $3 \
                AND EXISTS (SELECT 1 FROM recorded WHERE status = 'captured')) \
         SELECT status FROM recorded",
    )
    .bind(&order.tenant_id)
    .bind(payment_id)
    .bind(&order.provider_order_id)
    .bind(&order.request_id)
    .bind(order.amount_paise)
    .bind(&order.currency)
    .bind(status)
    .bind(source.column())
    .bind(now)
    .fetch_optional(&mut *conn)
    .await
    .ctx("recording a provider payment")?;
    if recorded.is_none() {
        // Recorded already: this order's own payment, or another order's
        // under the same id (which records and moves nothing).
        let owner = payment_on_the_books(conn, payment_id).await?;
        if owner.as_deref() != Some(order.provider_order_id.as_str()) {
            return Ok(Applied::OtherOrder);
        }
        return source.record(conn, now, Applied::AlreadyRecorded).await;
    }
    if !captured {
        return source.record(conn, now, Applied::Attempt).await;
    }
    if request.state == RequestState::ProviderPending {
        let captured = Transition::new(request, RequestState::Captured);
        match &source {
            Source::Webhook { key, entry } => {
                captured
                    .apply_recording(conn, now, key, vec![entry(Applied::Captured)])
                    .await?;
            }
            Source::Reconcile => captured.apply(conn, now).await?,
        }
        return Ok(Applied::Captured);
    }
    // The request had ended (or was captured already): the money moved all
    // the same. It is counted where the request's reservation was, past any
    // cap (review_paise), and the request waits for a human.
    let counted = order.amount_paise;
    let (Some(day), Some(hop)) = (request.reserved_day, request.delegation_id.as_deref()) else {
        return Err(ServiceError::Corrupt {
            what: format!(
                "request {} reached the provider without a reservation day or hop",
                request.id
            ),
        });
    };
    sqlx::query(
        "INSERT INTO daily_spend AS d \
            (tenant_id, day, currency, reserved_paise, cap_paise, review_paise) \
         VALUES ($1, $2, $4, $3, 0, $3) \
         ON CONFLICT (tenant_id, day, currency) DO UPDATE \
            SET reserved_paise = d.reserved_paise + EXCLUDED.reserved_paise, \
                review_paise = d.review_paise + EXCLUDED.review_paise",
    )
    .bind(&request.tenant_id)
    .bind(day)
    .bind(counted)
    .bind(&order.currency)
    .execute(&mut *conn)
    .await
    .ctx("counting a captured payment in the day's spend")?;
    let hop_rows = sqlx::query(
        "UPDATE delegations SET spent_paise = spent_paise + $3, review_paise = review_paise + $3 \
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(&request.tenant_id)
    .bind(hop)
    .bind(counted)
    .execute(&mut *conn)
    .await
    .ctx("counting a captured payment in the hop's spend")?;
    if hop_rows.rows_affected() != 1 {
        return Err(ServiceError::Corrupt {
            what: format!("the hop {hop} of request {} vanished", request.id),
        });
    }
    Transition::needs_review(request, counted)
        .apply(conn, now)
        .await?;
    source
        .record(
            conn,
            now,
            Applied::NeedsReview {
                counted_paise: counted,
            },
        )
        .await
}

/// The order row the gate recorded under this provider id.
pub(crate) async fn find_order(
    conn: &mut PgConnection,
    order_id: &str,
) -> Result<Option<OrderRow>, ServiceError> {
    sqlx::query_as(
        "SELECT tenant_id, provider_order_id, request_id, amount_paise, currency \
         FROM provider_orders WHERE provider_order_id = $1",
    )
    .bind(order_id)
    .fetch_optional(&mut *conn)
    .await
    .ctx("looking up the event's order")
}

/// The authority a receipt names, in any tenant (authority ids are unique).
pub(crate) async fn authority_by_receipt(
    conn: &mut PgConnection,
    receipt: &str,
) -> Result<Option<AuthorityRow>, ServiceError> {
    let sql = format!("SELECT {AUTHORITY_COLUMNS} FROM checkout_authorities WHERE id = $1");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(receipt)
        .fetch_optional(&mut *conn)
        .await
        .ctx("looking up the receipt's authority")
}

/// The tenant a refused event belongs to, when it names something the gate
/// knows: its order, else the authority its receipt names.
async fn event_tenant(
    conn: &mut PgConnection,
    event: &Parsed,
) -> Result<Option<String>, ServiceError> {
    if let Some(order) = find_order(conn, &event.order_id).await? {
        return Ok(Some(order.tenant_id));
    }
    Ok(match event.receipt.as_deref() {
        Some(receipt) => authority_by_receipt(conn, receipt)
            .await?
            .map(|a| a.tenant_id),
        None => None,
    })
}

/// The order the books already hold a payment id for, if any.
async fn payment_on_the_books(
    conn: &mut PgConnection,
    payment_id: &str,
) -> Result<Option<String>, ServiceError> {
    sqlx::query_scalar(
        "SELECT provider_order_id FROM provider_payments WHERE provider_payment_id = $1",
    )
    .bind(payment_id)
    .fetch_optional(&mut *conn)
    .await
    .ctx("looking up the event's payment id")
}

/// `WEBHOOK_MALFORMED` when the books hold `payment_id` for an order other
/// than `order`: a provider's payment id names one payment, of one order.
async fn payment_of_another_order(
    conn: &mut PgConnection,
    payment_id: &str,
    order: &OrderRow,
) -> Result<Option<Reason>, ServiceError> {
    let owner = payment_on_the_books(conn, payment_id).await?;
    if owner.is_some_and(|o| o != order.provider_order_id) {
        return Ok(Some(Reason::WebhookMalformed));
    }
    Ok(None)
}

/// The longest event body kept as received (`ck_provider_event_body_bounded`:
/// the HTTP service's body limit); a longer one is recorded by its digest only.
pub const MAX_RAW_EVENT_BYTES: usize = 64 * 1024;
/// The longest signature header kept as received (`ck_provider_event_body_bounded`).
pub const MAX_RAW_SIGNATURE_BYTES: usize = 1024;

/// What the ledger may carry of an event id: the id itself when it is a
/// plain identifier, else only its digest.
fn ledger_subject(event_id: &str, digest: &str) -> String {
    if is_ident(event_id) {
        event_id.to_owned()
    } else {
        format!("sha256:{digest}")
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// A provider event: `body` exactly as received, `signature` the
    /// `X-Razorpay-Signature` header (hex HMAC-SHA256 of the body),
    /// `event_id` the `X-Razorpay-Event-Id` header. The outcome's id is the
    /// event id when the event was verified.
    pub async fn webhook(
        &self,
        body: &[u8],
        signature: Option<&str>,
        event_id: Option<&str>,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let body_sha256 = hex::encode(Sha256::digest(body));
        let signature_sha256 = signature.map(|s| hex::encode(Sha256::digest(s.as_bytes())));
        // What is kept of a recorded event as received: its body and its
        // signature header, within the limits of `provider_event_bodies`.
        let raw = signature
            .map(|s| (body, s.as_bytes()))
            .filter(|(b, s)| b.len() <= MAX_RAW_EVENT_BYTES && s.len() <= MAX_RAW_SIGNATURE_BYTES);
        let event_id = event_id.filter(|id| !id.is_empty());
        let digest = event_id.map(event_id_digest);
        let subject = match (event_id, &digest) {
            (Some(id), Some(d)) => ledger_subject(id, d),
            _ => format!("body:{body_sha256}"),
        };
        let early = if !(signature_is_valid(self.secret(), body, signature)
            || self
                .previous_secret()
                .is_some_and(|previous| signature_is_valid(previous, body, signature)))
        {
            Err(Reason::WebhookSignatureInvalid)
        } else if event_id.is_none() {
            Err(Reason::WebhookMalformed)
        } else {
            parse_event(body)
        };
        let verified = early != Err(Reason::WebhookSignatureInvalid);
        let mut tx = self.begin("receiving a provider event").await?;
        let refuse = |tenant: Option<&str>, reason: Reason, event: Option<&Parsed>| {
            Entry::new(
                tenant,
                "provider_event.refused",
                &subject,
                json!({
                    "body_sha256": body_sha256,
                    "event_id_sha256": digest,
                    "event": event,
                    "decision": Decision::Deny(reason),
                }),
            )
        };
        let (event, event_id, digest) = match (early, event_id, &digest) {
            (Ok(event), Some(id), Some(d)) => (event, id, d.clone()),
            (early, ..) => {
                // Unsigned or unreadable: nothing names a tenant.
                let reason = early.err().unwrap_or(Reason::WebhookMalformed);
                self.close_refused(tx, now, refuse(None, reason, None))
                    .await?;
                let outcome = Outcome::refused(reason);
                return Ok(match (verified, event_id) {
                    (true, Some(id)) => outcome.with_id(id.to_owned()),
                    _ => outcome,
                });
            }
        };
        // Only an applied or kept event is remembered, so a refused delivery
        // can be retried under the same id (providers retry with it).
        let seen = event_seen(&mut tx, &digest).await?;
        let early = if seen {
            Some(Reason::WebhookDuplicate)
        } else {
            timing(&event, now)
        };
        if let Some(reason) = early {
            let tenant = event_tenant(&mut tx, &event).await?;
            self.close_refused(tx, now, refuse(tenant.as_deref(), reason, Some(&event)))
                .await?;
            return Ok(Outcome::refused(reason).with_id(event_id.to_owned()));
        }
        // Manual capture: an authorised payment is captured through the
        // provider first (no transaction is held across the call), then
        // booked as the capture it now is.
        let event = if event.authorized {
            tx.rollback()
                .await
                .ctx("ending the look-ups of an authorisation")?;
            let captured = self.capture_authorization(&event).await?;
            tx = self.begin("receiving a captured authorisation").await?;
            match captured {
                Ok(event) => event,
                Err((tenant, reason)) => {
                    self.close_refused(tx, now, refuse(tenant.as_deref(), reason, Some(&event)))
                        .await?;
                    return Ok(Outcome::refused(reason).with_id(event_id.to_owned()));
                }
            }
        } else {
            event
        };
        let Some(order) = find_order(&mut tx, &event.order_id).await? else {
            let kept = if event.captured {
                self.keep_capture(&mut tx, &event, event_id, now).await?
            } else {
                Err(Reason::WebhookUnknownOrder)
            };
            let authority = match kept {
                Ok(authority) => authority,
                Err(reason) => {
                    let tenant = event_tenant(&mut tx, &event).await?;
                    self.close_refused(tx, now, refuse(tenant.as_deref(), reason, Some(&event)))
                        .await?;
                    return Ok(Outcome::refused(reason).with_id(event_id.to_owned()));
                }
            };
            let entry = Entry::new(
                Some(&authority.tenant_id),
                "provider_event.kept",
                &subject,
                json!({
                    "event_id_sha256": digest,
                    "event": event,
                    "authority": authority.id,
                    "request": authority.request_id,
                    "kept_for": "reconcile",
                }),
            );
            ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
            tx.commit().await.ctx("committing a provider event")?;
            return Ok(Outcome::ok(event_id.to_owned()));
        };
        let tenant = order.tenant_id.clone();
        let request: RequestRow = lock(
            &mut tx,
            RequestKey {
                tenant: &tenant,
                request: &order.request_id,
            },
        )
        .await
        .ctx("locking the order's request")?
        .ok_or_else(|| ServiceError::Corrupt {
            what: format!("the request of order {} vanished", order.provider_order_id),
        })?;
        // What the event itself gets wrong against the books: amount,
        // currency, or a payment id the books hold for another order.
        let problem = match verdict(&event, order.amount_paise, &order.currency) {
            Some(reason) => Some(reason),
            None => payment_of_another_order(&mut tx, &event.payment_id, &order).await?,
        };
        // Looked up again under the lock: a delivery that raced past the first
        // look-up sees the winner's row now. A duplicate outranks any other
        // refusal; when the event is otherwise good, the look-up rides on its
        // INSERT (one statement).
        let refusal = match problem {
            Some(_) if event_seen(&mut tx, &digest).await? => Some(Reason::WebhookDuplicate),
            Some(reason) => Some(reason),
            None => {
                // uq_provider_event_id: of two deliveries racing past the
                // look-ups, the database lets exactly one through; an event
                // kept for reconcile is never recorded twice either.
                // The body and the signature header as received ride on the
                // same statement (provider_event_body_matches_digest checks
                // the body against the event at the statement's end).
                let recorded: Option<String> = sqlx::query_scalar(
                    "WITH recorded AS (INSERT INTO provider_events (tenant_id, provider_event_id, \
                     provider_order_id, request_id, event, amount_paise, currency, event_created_at, \
                     received_at, outcome, body_sha256) \
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, 'applied', $10 \
                     WHERE NOT EXISTS (SELECT 1 FROM kept_captures WHERE event_id_sha256 = $11) \
                     ON CONFLICT ON CONSTRAINT uq_provider_event_id DO NOTHING \
                     RETURNING tenant_id, event_id_sha256), \
                     kept AS (INSERT INTO provider_event_bodies (tenant_id, event_id_sha256, body, \
                     signature) SELECT tenant_id, event_id_sha256, $12::bytea, $13::bytea \
                     FROM recorded WHERE $12::bytea IS NOT NULL AND $13::bytea IS NOT NULL) \
                     SELECT event_id_sha256 FROM recorded",
                )
                .bind(&tenant)
                .bind(event_id.as_bytes())
                .bind(&order.provider_order_id)
                .bind(&order.request_id)
                .bind(&event.event)
                .bind(event.amount_paise)
                .bind(&event.currency)
                .bind(event.created_at)
                .bind(now)
                .bind(&body_sha256)
                .bind(&digest)
                .bind(raw.map(|(body, _)| body))
                .bind(raw.map(|(_, signature)| signature))
                .fetch_optional(&mut *tx)
                .await
                .ctx("recording the provider event")?;
                recorded.is_none().then_some(Reason::WebhookDuplicate)
            }
        };
        if let Some(reason) = refusal {
            self.close_refused(tx, now, refuse(Some(&tenant), reason, Some(&event)))
                .await?;
            return Ok(Outcome::refused(reason).with_id(event_id.to_owned()));
        }
        let entry = |applied| {
            let mut body = applied_body(&event, &digest, &request, applied);
            body["body_sha256"] = json!(body_sha256);
            body["signature_sha256"] = json!(signature_sha256);
            Entry::new(Some(&tenant), "provider_event", &subject, body)
        };
        let source = Source::Webhook {
            key: self.ledger_key(),
            entry: &entry,
        };
        let applied = apply_payment(
            &mut tx,
            &request,
            &order,
            &event.payment_id,
            event.captured,
            source,
            now,
        )
        .await?;
        if applied == Applied::OtherOrder {
            // A concurrent delivery recorded this payment id for another
            // order after the look-up above: nothing of this event is kept.
            tx.rollback()
                .await
                .ctx("undoing a payment of another order")?;
            let reason = Reason::WebhookMalformed;
            let tx = self.begin("refusing a provider event").await?;
            self.close_refused(tx, now, refuse(Some(&tenant), reason, Some(&event)))
                .await?;
            return Ok(Outcome::refused(reason).with_id(event_id.to_owned()));
        }
        tx.commit().await.ctx("committing a provider event")?;
        Ok(Outcome::ok(event_id.to_owned()))
    }

    /// Captures the payment a `payment.authorized` event reports, through
    /// the provider's Payments API, for the order's own amount and currency:
    /// only for an order the gate recorded whose request still waits on the
    /// provider (PROVIDER_PENDING). Returns the event as the capture it now
    /// is, or the tenant (when known) and why nothing was captured.
    async fn capture_authorization(
        &self,
        event: &Parsed,
    ) -> Result<Result<Parsed, (Option<String>, Reason)>, ServiceError> {
        let mut tx = self.begin("looking up an authorisation's order").await?;
        let Some(order) = find_order(&mut tx, &event.order_id).await? else {
            let tenant = event_tenant(&mut tx, event).await?;
            return Ok(Err((tenant, Reason::WebhookUnknownOrder)));
        };
        let tenant = Some(order.tenant_id.clone());
        let problem = match verdict(event, order.amount_paise, &order.currency) {
            Some(reason) => Some(reason),
            None => payment_of_another_order(&mut tx, &event.payment_id, &order).await?,
        };
        if let Some(reason) = problem {
            return Ok(Err((tenant, reason)));
        }
        let state = requests::state_of(&mut tx, &order.tenant_id, &order.request_id).await?;
        tx.rollback()
            .await
            .ctx("ending an authorisation's look-ups")?;
        // A request no longer waiting for money is not paid again: the
        // provider refunds an authorisation nobody captures.
        if state != Some(RequestState::ProviderPending) {
            return Ok(Err((tenant, Reason::WebhookEventIgnored)));
        }
        let answered = tokio::time::timeout(
            self.provider_timeout(),
            self.provider().capture_authorized(
                &event.payment_id,
                order.amount_paise,
                &order.currency,
            ),
        )
        .await
        .unwrap_or(Err(crate::provider::ProviderError::Timeout));
        match answered {
            Ok(p)
                if p.id == event.payment_id
                    && p.status == PaymentStatus::Captured
                    && p.amount_paise == order.amount_paise
                    && p.currency == order.currency =>
            {
                Ok(Ok(Parsed {
                    captured: true,
                    authorized: false,
                    ..event.clone()
                }))
            }
            Ok(p) => {
                tracing::warn!(payment = %event.payment_id, answered = %p.id,
                    "the provider's capture answered another payment or amount");
                Ok(Err((tenant, Reason::ProviderRejected)))
            }
            Err(e) => {
                tracing::warn!(payment = %event.payment_id, "capturing an authorised payment failed: {e}");
                Ok(Err((tenant, Reason::ProviderUnavailable)))
            }
        }
    }

    /// Keeps a signed capture for an order the gate has not recorded when its
    /// receipt names one of the gate's authorities, for that authority's
    /// amount and currency. Returns the authority, or why it was not kept.
    async fn keep_capture(
        &self,
        tx: &mut PgConnection,
        event: &Parsed,
        event_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<AuthorityRow, Reason>, ServiceError> {
        let Some(receipt) = event.receipt.as_deref() else {
            return Ok(Err(Reason::WebhookUnknownOrder));
        };
        let Some(authority) = authority_by_receipt(tx, receipt).await? else {
            return Ok(Err(Reason::WebhookUnknownOrder));
        };
        // An authority never consumed never asked the provider for an order:
        // no order of the gate's can carry its receipt.
        if authority.consumptions == 0 {
            return Ok(Err(Reason::WebhookUnknownOrder));
        }
        if let Some(reason) = verdict(event, authority.amount_paise, &authority.currency) {
            return Ok(Err(reason));
        }
        // Booked for this very order: reconcile recorded the order and its
        // capture between this event's order lookup and now, so the event
        // repeats what the books hold. Booked for another order: malformed.
        let booked = payment_on_the_books(tx, &event.payment_id).await?;
        if booked.as_deref() == Some(event.order_id.as_str()) {
            return Ok(Err(Reason::WebhookDuplicate));
        }
        if booked.is_some() {
            return Ok(Err(Reason::WebhookMalformed));
        }
        let kept: Option<String> = sqlx::query_scalar(
            "INSERT INTO kept_captures (tenant_id, provider_event_id, authority_id, provider_order_id, \
             provider_payment_id, amount_paise, currency, event_created_at, received_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT DO NOTHING RETURNING event_id_sha256",
        )
        .bind(&authority.tenant_id)
        .bind(event_id.as_bytes())
        .bind(&authority.id)
        .bind(&event.order_id)
        .bind(&event.payment_id)
        .bind(event.amount_paise)
        .bind(&event.currency)
        .bind(event.created_at)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await
        .ctx("keeping a capture for reconcile")?;
        Ok(match kept {
            Some(_) => Ok(authority),
            None => Err(Reason::WebhookDuplicate),
        })
    }
}

/// The ledger body of an applied event.
fn applied_body(event: &Parsed, digest: &str, request: &RequestRow, applied: Applied) -> Value {
    let (to, counted) = match applied {
        Applied::AlreadyRecorded | Applied::Attempt | Applied::OtherOrder => (request.state, 0),
        Applied::Captured => (RequestState::Captured, 0),
        Applied::NeedsReview { counted_paise } => (RequestState::NeedsReview, counted_paise),
    };
    json!({
        "event": event,
        "event_id_sha256": digest,
        "request": request.id,
        "from": request.state,
        "state": to,
        "payment": event.payment_id,
        "already_recorded": applied == Applied::AlreadyRecorded,
        "counted_past_cap_paise": counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured() -> ProviderEvent {
        ProviderEvent {
            id: "evt_1".into(),
            event: EVENT_CAPTURED.into(),
            created_at: "2026-09-03T10:00:00Z".parse().unwrap(),
            order_id: "order_test_000001".into(),
            amount_paise: 60000,
            currency: "INR".into(),
        }
    }

    #[test]
    fn a_rendered_event_parses_back() {
        let event = captured();
        let parsed = parse_event(&event.to_body()).unwrap();
        assert_eq!(
            (
                parsed.order_id.as_str(),
                parsed.amount_paise,
                parsed.currency.as_str(),
                parsed.captured,
                parsed.created_at
            ),
            ("order_test_000001", 60000, "INR", true, event.created_at)
        );
        assert_eq!(parsed.payment_id, event.payment_id());
        let paid = ProviderEvent {
            event: EVENT_ORDER_PAID.into(),
            ..event.clone()
        };
        let parsed_paid = parse_event(&paid.to_body()).unwrap();
        assert_eq!(
            parsed_paid.payment_id, parsed.payment_id,
            "order.paid and payment.captured of one order name one payment"
        );
        let failed = ProviderEvent {
            event: EVENT_FAILED.into(),
            ..event
        };
        let parsed_failed = parse_event(&failed.to_body()).unwrap();
        assert!(!parsed_failed.captured);
        assert_ne!(parsed_failed.payment_id, parsed.payment_id);
        assert_eq!(parse_event(b"{}"), Err(Reason::WebhookMalformed));
        assert_eq!(parse_event(b"not json"), Err(Reason::WebhookMalformed));
    }

    #[test]
    fn other_events_are_ignored_and_contradictions_are_malformed() {
        let body = |f: &dyn Fn(&mut Value)| {
            let mut v: Value = serde_json::from_slice(&captured().to_body()).unwrap();
            f(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        assert_eq!(
            parse_event(&body(&|v| v["event"] = json!("refund.created"))),
            Err(Reason::WebhookEventIgnored)
        );
        assert_eq!(
            parse_event(&body(&|v| v["entity"] = json!("collection"))),
            Err(Reason::WebhookMalformed)
        );
        assert_eq!(
            parse_event(&body(
                &|v| v["payload"]["payment"]["entity"]["status"] = json!("failed")
            )),
            Err(Reason::WebhookMalformed)
        );
        assert_eq!(
            parse_event(&body(
                &|v| v["payload"]["payment"]["entity"]["amount"] = json!(-5)
            )),
            Err(Reason::WebhookMalformed)
        );
        assert_eq!(
            parse_event(&body(
                &|v| v["payload"]["payment"]["entity"]["currency"] = json!("IN\u{0}")
            )),
            Err(Reason::WebhookMalformed)
        );
        assert_eq!(
            parse_event(&body(
                &|v| v["payload"]["payment"]["entity"]["order_id"] = json!("order\u{0}x")
            )),
            Err(Reason::WebhookUnknownOrder)
        );
        assert_eq!(
            parse_event(&body(
                &|v| v["payload"]["payment"]["entity"]["order_id"] = json!("o".repeat(65))
            )),
            Err(Reason::WebhookUnknownOrder)
        );
        assert_eq!(
            parse_event(&body(&|v| v["created_at"] = json!(i64::MAX))),
            Err(Reason::WebhookMalformed)
        );
    }

    #[test]
    fn a_key_written_twice_anywhere_is_malformed() {
        let good = String::from_utf8(captured().to_body()).unwrap();
        assert!(parse_event(good.as_bytes()).is_ok());
        for (from, to) in [
            ("\"amount\":60000", "\"amount\":1,\"amount\":60000"),
            (
                "\"event\":\"payment.captured\"",
                "\"event\":\"x\",\"event\":\"payment.captured\"",
            ),
            ("\"contains\":[", "\"contains\":[],\"contains\":["),
        ] {
            let twice = good.replacen(from, to, 1);
            assert_ne!(twice, good, "{from}");
            assert_eq!(
                parse_event(twice.as_bytes()),
                Err(Reason::WebhookMalformed),
                "{twice}"
            );
        }
    }

    #[test]
    fn short_secrets_are_refused_with_their_length() {
        assert_eq!(
            check_secret("current", b""),
            Err(WebhookSecretError::TooShort {
                which: "current",
                len: 0
            })
        );
        assert!(check_secret("current", &[7u8; 31]).is_err());
        assert!(check_secret("current", &[7u8; 32]).is_ok());
        let message = check_secret("previous", b"short").unwrap_err().to_string();
        assert!(
            message.contains("previous") && message.contains("5 bytes") && message.contains("32"),
            "{message}"
        );
    }

    #[test]
    fn an_event_id_of_any_length_has_a_fixed_size_digest_and_only_plain_ids_reach_the_ledger() {
        let long = "e".repeat(6000);
        assert_eq!(event_id_digest(&long).len(), 64);
        assert_ne!(event_id_digest(&long), event_id_digest(&"e".repeat(5999)));
        assert_eq!(ledger_subject("evt_1", "ab"), "evt_1");
        assert_eq!(ledger_subject("evt\u{0}1", "ab"), "sha256:ab");
        assert_eq!(ledger_subject(&long, "ab"), "sha256:ab");
    }
}
