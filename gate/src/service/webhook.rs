//! `webhook`: a provider event arriving at the gate.
//!
//! Guarantees, in order:
//! 1. the signature is HMAC-SHA256 over the RAW bytes, checked with a
//!    constant-time compare (`Mac::verify_slice`) BEFORE anything is parsed;
//!    a missing, malformed or wrong signature is `WEBHOOK_SIGNATURE_INVALID`;
//! 2. the body is parsed (Razorpay-like: `id`, `event`, `created_at` in unix
//!    seconds, and `payload.payment.entity` or `payload.order.entity` with the
//!    order id, `amount`, `currency`); a signed body that does not parse is
//!    `WEBHOOK_MALFORMED`;
//! 3. the order must be one the gate recorded (`WEBHOOK_UNKNOWN_ORDER`);
//! 4. the event id is recorded once, by the database's `uq_provider_event_id`
//!    (`WEBHOOK_DUPLICATE`); a verified event for a known order is recorded
//!    whatever its outcome, so an id is never processed twice;
//! 5. amount and currency must equal the server-derived order's
//!    (`WEBHOOK_AMOUNT_MISMATCH`, `WEBHOOK_CURRENCY_MISMATCH`); the event's
//!    own time may be at most 24 hours old (`WEBHOOK_STALE`) and at most 5
//!    minutes ahead of the gate's clock (`WEBHOOK_POST_DATED`);
//! 6. only `payment.captured` and `payment.failed` act
//!    (`WEBHOOK_EVENT_IGNORED` otherwise), and only on a PROVIDER_PENDING
//!    request (`STATE_TRANSITION_INVALID`): capture moves it to CAPTURED,
//!    failure to FAILED and releases its budgets.
//!
//! A browser callback never reaches this code: only signed provider events move state.

use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::error::{Ctx, ServiceError};
use super::ledger::{self, Entry};
use super::lock::lock;
use super::requests::{self, Hold};
use super::rows::{OrderRow, RequestRow, state};
use super::{Gate, Outcome};
use crate::provider::PaymentProvider;
use crate::reason::{Decision, Reason};

/// The event that captures a payment.
pub const EVENT_CAPTURED: &str = "payment.captured";
/// The event that fails a payment.
pub const EVENT_FAILED: &str = "payment.failed";
/// How old an event may be.
pub const MAX_EVENT_AGE_HOURS: i64 = 24;
/// How far ahead of the gate's clock an event may be stamped.
pub const MAX_EVENT_LEAD_MINUTES: i64 = 5;

/// The hex HMAC-SHA256 of `body` under `secret`: what a provider sends as the signature.
pub fn sign_webhook(secret: &[u8], body: &[u8]) -> String {
    match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(body);
            hex::encode(mac.finalize().into_bytes())
        }
        // HMAC takes a key of any length; this branch cannot be reached.
        Err(_) => String::new(),
    }
}

/// Constant-time check of a hex signature over the raw bytes.
pub fn signature_is_valid(secret: &[u8], body: &[u8], signature: Option<&str>) -> bool {
    let Some(given) = signature.and_then(|s| hex::decode(s.trim()).ok()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// A provider event, for building bodies the way the provider does.
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
    /// The Razorpay-like JSON body of this event.
    pub fn to_body(&self) -> Vec<u8> {
        json!({
            "entity": "event",
            "account_id": "acc_spendgate_test",
            "id": self.id,
            "event": self.event,
            "contains": ["payment"],
            "created_at": self.created_at.timestamp(),
            "payload": {"payment": {"entity": {
                "id": format!("pay_{}", self.id),
                "entity": "payment",
                "order_id": self.order_id,
                "amount": self.amount_paise,
                "currency": self.currency,
                "status": self.event.strip_prefix("payment.").unwrap_or("unknown"),
            }}},
        })
        .to_string()
        .into_bytes()
    }
}

#[derive(Deserialize)]
struct Body {
    id: String,
    event: String,
    created_at: i64,
    payload: Payload,
}

#[derive(Deserialize)]
struct Payload {
    payment: Option<Wrapped<PaymentEntity>>,
    order: Option<Wrapped<OrderEntity>>,
}

#[derive(Deserialize)]
struct Wrapped<T> {
    entity: T,
}

#[derive(Deserialize)]
struct PaymentEntity {
    order_id: String,
    amount: i64,
    currency: String,
}

#[derive(Deserialize)]
struct OrderEntity {
    id: String,
    amount: i64,
    currency: String,
}

/// Parses a verified body into the event it describes.
pub(crate) fn parse_event(body: &[u8]) -> Option<ProviderEvent> {
    let body: Body = serde_json::from_slice(body).ok()?;
    let (order_id, amount_paise, currency) = match (body.payload.payment, body.payload.order) {
        (Some(p), _) => (p.entity.order_id, p.entity.amount, p.entity.currency),
        (None, Some(o)) => (o.entity.id, o.entity.amount, o.entity.currency),
        (None, None) => return None,
    };
    if body.id.trim().is_empty() {
        return None;
    }
    Some(ProviderEvent {
        id: body.id,
        event: body.event,
        created_at: DateTime::from_timestamp(body.created_at, 0)?,
        order_id,
        amount_paise,
        currency,
    })
}

/// What a verified event for a known order means, before deduplication.
/// Whether an event with this id was already applied.
async fn event_seen(tx: &mut sqlx::PgConnection, id: &str) -> Result<bool, ServiceError> {
    let seen: Option<String> = sqlx::query_scalar(
        "SELECT provider_event_id FROM provider_events WHERE provider_event_id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .ctx("looking up the event id")?;
    Ok(seen.is_some())
}

/// Refusals that need only the event and the gate's clock.
fn timing(event: &ProviderEvent, now: DateTime<Utc>) -> Option<Reason> {
    if event.created_at < now - Duration::hours(MAX_EVENT_AGE_HOURS) {
        Some(Reason::WebhookStale)
    } else if event.created_at > now + Duration::minutes(MAX_EVENT_LEAD_MINUTES) {
        Some(Reason::WebhookPostDated)
    } else {
        None
    }
}

/// Refusals that compare the event with the server-derived order.
fn verdict(event: &ProviderEvent, order: &OrderRow, request: &RequestRow) -> Option<Reason> {
    if event.event != EVENT_CAPTURED && event.event != EVENT_FAILED {
        Some(Reason::WebhookEventIgnored)
    } else if event.amount_paise != order.amount_paise {
        Some(Reason::WebhookAmountMismatch)
    } else if event.currency != order.currency {
        Some(Reason::WebhookCurrencyMismatch)
    } else if request.state != state::PROVIDER_PENDING {
        Some(Reason::StateTransitionInvalid)
    } else {
        None
    }
}

impl<P: PaymentProvider> Gate<P> {
    /// A provider event: `body` exactly as received, `signature` the hex
    /// HMAC-SHA256 header. The outcome's id is the event id when it parsed.
    pub async fn webhook(
        &self,
        body: &[u8],
        signature: Option<&str>,
    ) -> Result<Outcome, ServiceError> {
        let now = self.now();
        let body_sha256 = hex::encode(Sha256::digest(body));
        let early_refusal = if !signature_is_valid(self.secret(), body, signature) {
            Some(Reason::WebhookSignatureInvalid)
        } else if parse_event(body).is_none() {
            Some(Reason::WebhookMalformed)
        } else {
            None
        };
        let mut tx = self.begin("receiving a provider event").await?;
        let refuse = |tenant: Option<&str>, reason: Reason, event: Option<&ProviderEvent>| {
            Entry::new(
                tenant,
                "provider_event.refused",
                event.map_or(body_sha256.as_str(), |e| e.id.as_str()),
                json!({"body_sha256": body_sha256, "event": event, "decision": Decision::Deny(reason)}),
            )
        };
        let event = match (early_refusal, parse_event(body)) {
            (None, Some(event)) => event,
            (reason, _) => {
                let reason = reason.unwrap_or(Reason::WebhookMalformed);
                ledger::append(
                    &mut tx,
                    self.ledger_key(),
                    now,
                    vec![refuse(None, reason, None)],
                )
                .await?;
                tx.commit()
                    .await
                    .ctx("committing a refused provider event")?;
                return Ok(Outcome::refused(reason));
            }
        };
        // Only an applied event is remembered, so a refused delivery can be
        // retried under the same id (providers retry with it).
        let seen = event_seen(&mut tx, &event.id).await?;
        let early = if seen {
            Some(Reason::WebhookDuplicate)
        } else {
            timing(&event, now)
        };
        if let Some(reason) = early {
            ledger::append(
                &mut tx,
                self.ledger_key(),
                now,
                vec![refuse(None, reason, Some(&event))],
            )
            .await?;
            tx.commit()
                .await
                .ctx("committing a refused provider event")?;
            return Ok(Outcome::refused(reason).with_id(event.id));
        }
        let order: Option<OrderRow> = sqlx::query_as(
            "SELECT tenant_id, provider_order_id, request_id, amount_paise, currency \
             FROM provider_orders WHERE provider_order_id = $1",
        )
        .bind(&event.order_id)
        .fetch_optional(&mut *tx)
        .await
        .ctx("looking up the event's order")?;
        let Some(order) = order else {
            let entry = refuse(None, Reason::WebhookUnknownOrder, Some(&event));
            ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
            tx.commit()
                .await
                .ctx("committing a refused provider event")?;
            return Ok(Outcome::refused(Reason::WebhookUnknownOrder).with_id(event.id));
        };
        let tenant = order.tenant_id.clone();
        let request: RequestRow = lock(&mut tx, &[&tenant, &order.request_id])
            .await
            .ctx("locking the order's request")?
            .ok_or_else(|| ServiceError::Corrupt {
                what: format!("the request of order {} vanished", order.provider_order_id),
            })?;
        // Looked up again under the lock: a delivery that raced past the first
        // look-up sees the winner's row now.
        let seen_now = event_seen(&mut tx, &event.id).await?;
        let refusal = match seen_now
            .then_some(Reason::WebhookDuplicate)
            .or_else(|| verdict(&event, &order, &request))
        {
            Some(reason) => Some(reason),
            None => {
                // uq_provider_event_id: of two deliveries racing past the
                // lookup above, the database lets exactly one through.
                let recorded: Option<String> = sqlx::query_scalar(
                    "INSERT INTO provider_events (tenant_id, provider_event_id, provider_order_id, \
                     request_id, event, amount_paise, currency, event_created_at, received_at, outcome, \
                     body_sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'applied', $10) \
                     ON CONFLICT (provider_event_id) DO NOTHING RETURNING provider_event_id",
                )
                .bind(&tenant)
                .bind(&event.id)
                .bind(&order.provider_order_id)
                .bind(&order.request_id)
                .bind(&event.event)
                .bind(event.amount_paise)
                .bind(&event.currency)
                .bind(event.created_at)
                .bind(now)
                .bind(&body_sha256)
                .fetch_optional(&mut *tx)
                .await
                .ctx("recording the provider event")?;
                recorded.is_none().then_some(Reason::WebhookDuplicate)
            }
        };
        if let Some(reason) = refusal {
            let entry = refuse(Some(&tenant), reason, Some(&event));
            ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
            tx.commit()
                .await
                .ctx("committing a refused provider event")?;
            return Ok(Outcome::refused(reason).with_id(event.id));
        }

        let (order_status, to) = if event.event == EVENT_CAPTURED {
            ("CAPTURED", state::CAPTURED)
        } else {
            ("FAILED", state::FAILED)
        };
        sqlx::query("UPDATE provider_orders SET status = $3 WHERE tenant_id = $1 AND provider_order_id = $2")
            .bind(&tenant)
            .bind(&order.provider_order_id)
            .bind(order_status)
            .execute(&mut *tx)
            .await
            .ctx("updating the provider order")?;
        requests::transition(&mut tx, &request, to, None, Hold::Keep, None, now).await?;
        let entry = Entry::new(
            Some(&tenant),
            "provider_event",
            &event.id,
            json!({
                "event": event,
                "request": request.id,
                "state": to,
                "released_paise": if to == state::FAILED { request.reserved_paise } else { 0 },
            }),
        );
        ledger::append(&mut tx, self.ledger_key(), now, vec![entry]).await?;
        tx.commit().await.ctx("committing a provider event")?;
        Ok(Outcome::ok(event.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_over_the_raw_bytes_verifies_and_anything_else_does_not() {
        let body = br#"{"id":"evt_1"}"#;
        let sig = sign_webhook(b"secret", body);
        assert!(signature_is_valid(b"secret", body, Some(&sig)));
        assert!(!signature_is_valid(b"other", body, Some(&sig)));
        assert!(!signature_is_valid(
            b"secret",
            br#"{"id":"evt_2"}"#,
            Some(&sig)
        ));
        assert!(!signature_is_valid(b"secret", body, None));
        assert!(!signature_is_valid(b"secret", body, Some("not hex")));
        assert!(!signature_is_valid(b"secret", body, Some(&sig[..10])));
    }

    #[test]
    fn a_rendered_event_parses_back() {
        let event = ProviderEvent {
            id: "evt_1".into(),
            event: EVENT_CAPTURED.into(),
            created_at: "2026-09-03T10:00:00Z".parse().unwrap(),
            order_id: "order_test_000001".into(),
            amount_paise: 60000,
            currency: "INR".into(),
        };
        assert_eq!(parse_event(&event.to_body()), Some(event));
        assert_eq!(parse_event(b"{}"), None);
        assert_eq!(parse_event(b"not json"), None);
    }
}
