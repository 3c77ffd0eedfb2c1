//! Razorpay Test Mode, on reqwest, against the documented Orders API.
//!
//! Guarantees:
//! - Test Mode only: [`RazorpayKeys::new`] refuses a `rzp_live_` key (and
//!   anything that is not a `rzp_test_` key) when the adapter is built,
//!   before any request is made.
//! - Keys never leave this module except in the `Authorization` header:
//!   [`RazorpayKeys`] and [`RazorpayProvider`] have hand-written `Debug`
//!   impls that redact them, and no log line carries them.
//! - Every call has a bounded total timeout and connect timeout. A 5xx or a
//!   429 (too many requests) is [`ProviderError::Unavailable`]: the order may
//!   exist, so `pay` leaves the request PROVIDER_PENDING for reconcile and
//!   never sends a second create (Razorpay does not deduplicate receipts). A
//!   401 is [`ProviderError::KeysRefused`]: logged at `error`, and
//!   [`ProviderHealth::keys_refused`] stays true until a call is answered
//!   again. Any other 4xx is [`ProviderError::Rejected`], a timeout
//!   [`ProviderError::Timeout`], any other failure [`ProviderError::Transport`];
//!   Razorpay's error body (`error.code`, `error.description`) goes to the
//!   tracing log and nowhere else.
//! - Only reads are retried: a GET answered 429 or 503 with a `Retry-After`
//!   of at most [`MAX_RETRY_AFTER`] is sent again after that many seconds,
//!   at most [`READ_RETRIES`] times; a longer or missing `Retry-After` is
//!   not waited for. Writes (an order, a capture) are sent once.
//! - Requests go only to `https://`, or to plain `http://` on a loopback
//!   host (the contract tests' local fake server).
//! - The calls: `POST /v1/orders` (`amount`, `currency`, `receipt` of at most
//!   40 characters, `notes` with the merchant), `GET /v1/orders/{id}`,
//!   `GET /v1/orders?receipt=...`, `GET /v1/orders/{id}/payments` and
//!   `POST /v1/payments/{id}/capture` (exactly `amount` and `currency`, the
//!   order's own). A payment is read as captured, failed, authorized or
//!   refunded; a captured payment with any amount refunded is refunded.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::in_process::pick;
use super::model::{OrderSnapshot, OrderStatus, Payment, PaymentStatus, ProviderOrder};
use super::{MAX_RECEIPT_CHARS, OrderRequest, PaymentProvider, ProviderError, ProviderHealth};

/// Razorpay's API root.
pub const RAZORPAY_API: &str = "https://api.razorpay.com";
/// The environment variable holding the key id (`rzp_test_...`).
pub const ENV_KEY_ID: &str = "RAZORPAY_KEY_ID";
/// The environment variable holding the key secret.
pub const ENV_KEY_SECRET: &str = "RAZORPAY_KEY_SECRET";
/// The environment variable holding the webhook secret.
pub const ENV_WEBHOOK_SECRET: &str = "RAZORPAY_WEBHOOK_SECRET";

/// The longest `Retry-After` a read waits for before asking again.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);
/// How many times a read is asked again after a `Retry-After`.
pub const READ_RETRIES: u32 = 2;

const TEST_PREFIX: &str = "rzp_test_";
const LIVE_PREFIX: &str = "rzp_live_";

/// A Test Mode key pair. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct RazorpayKeys {
    key_id: String,
    key_secret: String,
}

impl fmt::Debug for RazorpayKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RazorpayKeys")
            .field("key_id", &"rzp_test_[redacted]")
            .field("key_secret", &"[redacted]")
            .finish()
    }
}

impl RazorpayKeys {
    /// A key pair; refuses a live key and anything that is not a test key.
    pub fn new(key_id: &str, key_secret: &str) -> Result<Self, ProviderError> {
        let key_id = key_id.trim();
        if key_id.starts_with(LIVE_PREFIX) {
            return Err(ProviderError::LiveKeyRefused);
        }
        if !key_id.starts_with(TEST_PREFIX) || key_id.len() == TEST_PREFIX.len() {
            return Err(ProviderError::NotConfigured(format!(
                "{ENV_KEY_ID} is not a Razorpay test key (rzp_test_...)"
            )));
        }
        if !key_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(ProviderError::NotConfigured(format!(
                "{ENV_KEY_ID} holds characters a Razorpay key never has"
            )));
        }
        if key_secret.trim().is_empty() {
            return Err(ProviderError::NotConfigured(format!(
                "{ENV_KEY_SECRET} is empty"
            )));
        }
        Ok(RazorpayKeys {
            key_id: key_id.to_owned(),
            key_secret: key_secret.trim().to_owned(),
        })
    }

    /// The keys from `RAZORPAY_KEY_ID` and `RAZORPAY_KEY_SECRET`; `Ok(None)`
    /// when neither is set, an error when only one is or a key is refused.
    pub fn from_env() -> Result<Option<Self>, ProviderError> {
        let id = std::env::var(ENV_KEY_ID).ok().filter(|v| !v.is_empty());
        let secret = std::env::var(ENV_KEY_SECRET).ok().filter(|v| !v.is_empty());
        match (id, secret) {
            (None, None) => Ok(None),
            (Some(id), Some(secret)) => Self::new(&id, &secret).map(Some),
            _ => Err(ProviderError::NotConfigured(format!(
                "set both {ENV_KEY_ID} and {ENV_KEY_SECRET}, or neither"
            ))),
        }
    }
}

/// Where and how patiently the adapter talks to Razorpay.
#[derive(Debug, Clone)]
pub struct RazorpayConfig {
    /// `https://api.razorpay.com`, or a loopback `http://` URL in tests.
    pub base_url: String,
    /// The whole request, answer included.
    pub timeout: Duration,
    pub connect_timeout: Duration,
}

impl Default for RazorpayConfig {
    fn default() -> Self {
        RazorpayConfig {
            base_url: RAZORPAY_API.to_owned(),
            timeout: Duration::from_secs(8),
            connect_timeout: Duration::from_secs(3),
        }
    }
}

/// The Razorpay Test Mode adapter.
pub struct RazorpayProvider {
    client: reqwest::Client,
    base: String,
    keys: RazorpayKeys,
    /// Set by a 401, cleared by any answer that is not one.
    keys_refused: AtomicBool,
}

impl fmt::Debug for RazorpayProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RazorpayProvider")
            .field("base", &self.base)
            .field("keys", &self.keys)
            .finish()
    }
}

fn base_is_allowed(base: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base) else {
        return false;
    };
    match url.scheme() {
        "https" => url.host_str().is_some(),
        "http" => matches!(
            url.host_str(),
            Some("127.0.0.1") | Some("localhost") | Some("[::1]")
        ),
        _ => false,
    }
}

/// An id the adapter will put in a path: the gate's identifier grammar.
fn is_plain_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

impl RazorpayProvider {
    /// The adapter against Razorpay itself.
    pub fn new(keys: RazorpayKeys) -> Result<Self, ProviderError> {
        Self::with_config(keys, RazorpayConfig::default())
    }

    /// The adapter from the environment's keys; `Ok(None)` when none are set.
    pub fn from_env() -> Result<Option<Self>, ProviderError> {
        RazorpayKeys::from_env()?.map(Self::new).transpose()
    }

    /// The adapter with an explicit base URL and timeouts.
    pub fn with_config(keys: RazorpayKeys, config: RazorpayConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if !base_is_allowed(&base) {
            return Err(ProviderError::NotConfigured(format!(
                "the API base {base} is neither https nor a loopback http URL"
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProviderError::Transport(e.without_url().to_string()))?;
        Ok(RazorpayProvider {
            client,
            base,
            keys,
            keys_refused: AtomicBool::new(false),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends one request and returns the 2xx body as JSON, or `None` for a
    /// "no such order" answer when `absent_is_none`. A GET is asked again
    /// after a short `Retry-After` ([`READ_RETRIES`], [`MAX_RETRY_AFTER`]).
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        what: &'static str,
        absent_is_none: bool,
    ) -> Result<Option<Value>, ProviderError> {
        let request = request
            .basic_auth(&self.keys.key_id, Some(&self.keys.key_secret))
            .header("Accept", "application/json");
        let is_read = request
            .try_clone()
            .and_then(|r| r.build().ok())
            .is_some_and(|r| r.method() == reqwest::Method::GET);
        let mut retries = 0;
        let mut next = Some(request);
        loop {
            let Some(request) = next.take() else {
                return Err(ProviderError::Transport(format!("{what}: no request")));
            };
            let again = if is_read && retries < READ_RETRIES {
                request.try_clone()
            } else {
                None
            };
            let response = request.send().await.map_err(|e| transport(what, e))?;
            let status = response.status();
            let wait = retry_after(response.headers());
            let bytes = response.bytes().await.map_err(|e| transport(what, e))?;
            if status == reqwest::StatusCode::UNAUTHORIZED {
                self.keys_refused.store(true, Ordering::Relaxed);
                tracing::error!(
                    status = status.as_u16(),
                    "Razorpay refused the API keys while {what}: a configuration error; \
                     set RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET to a valid test key pair. \
                     Requests wait PROVIDER_PENDING until then"
                );
                return Err(ProviderError::KeysRefused);
            }
            self.keys_refused.store(false, Ordering::Relaxed);
            if status.is_success() {
                return serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| ProviderError::Malformed(format!("{what}: {e}")));
            }
            let busy = status == reqwest::StatusCode::TOO_MANY_REQUESTS
                || status == reqwest::StatusCode::SERVICE_UNAVAILABLE;
            if let (true, Some(wait), Some(again)) = (busy, wait, again) {
                tracing::info!(
                    status = status.as_u16(),
                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "Razorpay asked to retry {what} later"
                );
                tokio::time::sleep(wait).await;
                retries += 1;
                next = Some(again);
                continue;
            }
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let code = body["error"]["code"].as_str().unwrap_or("");
            let description = body["error"]["description"].as_str().unwrap_or("");
            tracing::warn!(
                status = status.as_u16(),
                code,
                description,
                "Razorpay refused {what}"
            );
            let absent = status == reqwest::StatusCode::NOT_FOUND
                || (status == reqwest::StatusCode::BAD_REQUEST
                    && description.to_ascii_lowercase().contains("does not exist"));
            if absent_is_none && absent {
                return Ok(None);
            }
            return if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                Err(ProviderError::Unavailable {
                    status: status.as_u16(),
                })
            } else {
                Err(ProviderError::Rejected {
                    status: status.as_u16(),
                })
            };
        }
    }

    async fn capture(
        &self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> Result<Payment, ProviderError> {
        if !is_plain_id(payment_id) {
            return Err(ProviderError::Rejected { status: 400 });
        }
        let body = json!({"amount": amount_paise, "currency": currency});
        let answer = self
            .call(
                self.client
                    .post(self.url(&format!("/v1/payments/{payment_id}/capture")))
                    .json(&body),
                "capturing a payment",
                false,
            )
            .await?
            .ok_or_else(|| ProviderError::Malformed("capturing a payment: no body".into()))?;
        let payment: RzpPayment = serde_json::from_value(answer)
            .map_err(|e| ProviderError::Malformed(format!("a captured payment: {e}")))?;
        payment
            .into_model()
            .ok_or_else(|| ProviderError::Malformed("a captured payment's status".into()))
    }

    async fn create(&self, request: &OrderRequest) -> Result<ProviderOrder, ProviderError> {
        if request.receipt.chars().count() > MAX_RECEIPT_CHARS {
            return Err(ProviderError::NotConfigured(format!(
                "a receipt is at most {MAX_RECEIPT_CHARS} characters"
            )));
        }
        let body = json!({
            "amount": request.amount_paise,
            "currency": request.currency,
            "receipt": request.receipt,
            "notes": {"merchant": request.merchant, "authority": request.receipt},
        });
        let answer = self
            .call(
                self.client.post(self.url("/v1/orders")).json(&body),
                "creating an order",
                false,
            )
            .await?
            .ok_or_else(|| ProviderError::Malformed("creating an order: no body".into()))?;
        parse_order(answer)
    }

    async fn payments(&self, order_id: &str) -> Result<Vec<Payment>, ProviderError> {
        let answer = self
            .call(
                self.client
                    .get(self.url(&format!("/v1/orders/{order_id}/payments"))),
                "listing an order's payments",
                false,
            )
            .await?
            .unwrap_or(Value::Null);
        let list: Collection<RzpPayment> = serde_json::from_value(answer)
            .map_err(|e| ProviderError::Malformed(format!("an order's payments: {e}")))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(RzpPayment::into_model)
            .collect())
    }

    async fn fetch(&self, order_id: &str) -> Result<Option<OrderSnapshot>, ProviderError> {
        if !is_plain_id(order_id) {
            return Ok(None);
        }
        let Some(answer) = self
            .call(
                self.client.get(self.url(&format!("/v1/orders/{order_id}"))),
                "fetching an order",
                true,
            )
            .await?
        else {
            return Ok(None);
        };
        let order = parse_order(answer)?;
        let payments = self.payments(&order.id).await?;
        Ok(Some(OrderSnapshot { order, payments }))
    }

    async fn by_receipt(&self, receipt: &str) -> Result<Option<OrderSnapshot>, ProviderError> {
        if !is_plain_id(receipt) {
            return Ok(None);
        }
        let answer = self
            .call(
                self.client
                    .get(self.url("/v1/orders"))
                    .query(&[("receipt", receipt)]),
                "listing orders by receipt",
                false,
            )
            .await?
            .unwrap_or(Value::Null);
        let list: Collection<Value> = serde_json::from_value(answer)
            .map_err(|e| ProviderError::Malformed(format!("orders by receipt: {e}")))?;
        let mut found = Vec::new();
        for item in list.items {
            let order = parse_order(item)?;
            // Only an order for exactly this receipt counts.
            if order.receipt != receipt {
                continue;
            }
            let payments = if order.attempts > 0 || order.status != OrderStatus::Created {
                self.payments(&order.id).await?
            } else {
                Vec::new()
            };
            found.push(OrderSnapshot { order, payments });
        }
        // Razorpay lists newest first; the model's `pick` wants creation order.
        found.reverse();
        Ok(pick(found))
    }
}

/// A `Retry-After` in whole seconds of at most [`MAX_RETRY_AFTER`]; `None`
/// for none, an HTTP date, or a longer wait (not waited for).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds)).filter(|d| *d <= MAX_RETRY_AFTER)
}

fn transport(what: &'static str, e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout
    } else {
        ProviderError::Transport(format!("{what}: {}", e.without_url()))
    }
}

#[derive(Deserialize)]
struct Collection<T> {
    items: Vec<T>,
}

/// Razorpay's order entity, as documented.
#[derive(Deserialize)]
struct RzpOrder {
    id: String,
    entity: String,
    amount: i64,
    amount_paid: i64,
    #[serde(default)]
    amount_due: Option<i64>,
    currency: String,
    receipt: Option<String>,
    status: String,
    attempts: u32,
    created_at: i64,
    /// An object, or `[]` when the order has no notes.
    #[serde(default)]
    notes: Value,
}

fn parse_order(value: Value) -> Result<ProviderOrder, ProviderError> {
    let o: RzpOrder = serde_json::from_value(value)
        .map_err(|e| ProviderError::Malformed(format!("an order entity: {e}")))?;
    if o.entity != "order" {
        return Err(ProviderError::Malformed(format!(
            "expected an order entity, got {}",
            o.entity
        )));
    }
    let status = match o.status.as_str() {
        "created" => OrderStatus::Created,
        "attempted" => OrderStatus::Attempted,
        "paid" => OrderStatus::Paid,
        other => {
            return Err(ProviderError::Malformed(format!("an order status {other}")));
        }
    };
    if o.amount_due
        .is_some_and(|due| due != o.amount - o.amount_paid)
    {
        return Err(ProviderError::Malformed(
            "amount_due is not amount - amount_paid".into(),
        ));
    }
    Ok(ProviderOrder {
        merchant: o.notes["merchant"].as_str().unwrap_or("").to_owned(),
        id: o.id,
        receipt: o.receipt.unwrap_or_default(),
        amount_paise: o.amount,
        amount_paid_paise: o.amount_paid,
        currency: o.currency,
        status,
        attempts: o.attempts,
        created_at: o.created_at,
    })
}

/// Razorpay's payment entity (the fields the gate reads).
#[derive(Deserialize)]
struct RzpPayment {
    id: String,
    amount: i64,
    currency: String,
    status: String,
    order_id: Option<String>,
    created_at: i64,
    #[serde(default)]
    amount_refunded: Option<i64>,
}

impl RzpPayment {
    /// Captured, failed, authorized and refunded payments (a captured one
    /// with any amount refunded is refunded: Razorpay keeps a partly refunded
    /// payment `captured`); a created one has done nothing yet.
    fn into_model(self) -> Option<Payment> {
        let refunded = self.amount_refunded.is_some_and(|r| r > 0);
        let status = match self.status.as_str() {
            "captured" if refunded => PaymentStatus::Refunded,
            "captured" => PaymentStatus::Captured,
            "failed" => PaymentStatus::Failed,
            "authorized" => PaymentStatus::Authorized,
            "refunded" => PaymentStatus::Refunded,
            _ => return None,
        };
        Some(Payment {
            id: self.id,
            order_id: self.order_id.unwrap_or_default(),
            amount_paise: self.amount,
            currency: self.currency,
            status,
            created_at: self.created_at,
        })
    }
}

impl PaymentProvider for RazorpayProvider {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        self.create(request)
    }

    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.fetch(order_id)
    }

    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.by_receipt(receipt)
    }

    fn capture_authorized(
        &self,
        payment_id: &str,
        amount_paise: i64,
        currency: &str,
    ) -> impl Future<Output = Result<Payment, ProviderError>> + Send {
        self.capture(payment_id, amount_paise, currency)
    }

    fn health(&self) -> ProviderHealth {
        ProviderHealth {
            mode: "test",
            has_keys: true,
            keys_refused: self.keys_refused.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_key_is_refused_before_anything_else() {
        assert_eq!(
            RazorpayKeys::new("rzp_live_ABCDEFGHIJKLMN", "s3cret").err(),
            Some(ProviderError::LiveKeyRefused)
        );
        assert!(matches!(
            RazorpayKeys::new("pk_test_123", "s3cret"),
            Err(ProviderError::NotConfigured(_))
        ));
        assert!(matches!(
            RazorpayKeys::new("rzp_test_", "s3cret"),
            Err(ProviderError::NotConfigured(_))
        ));
        assert!(matches!(
            RazorpayKeys::new("rzp_test_ABC", "  "),
            Err(ProviderError::NotConfigured(_))
        ));
        assert!(RazorpayKeys::new("rzp_test_ABC", "s3cret").is_ok());
    }

    #[test]
    fn only_a_short_retry_after_in_seconds_is_waited_for() {
        let with = |v: &str| {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(
                reqwest::header::RETRY_AFTER,
                reqwest::header::HeaderValue::from_str(v).unwrap(),
            );
            retry_after(&h)
        };
        assert_eq!(with("1"), Some(Duration::from_secs(1)));
        assert_eq!(with(" 5 "), Some(MAX_RETRY_AFTER));
        assert_eq!(with("6"), None);
        assert_eq!(with("3600"), None);
        assert_eq!(with("Wed, 21 Oct 2026 07:28:00 GMT"), None);
        assert_eq!(with("-1"), None);
        assert_eq!(retry_after(&reqwest::header::HeaderMap::new()), None);
    }

    #[test]
    fn refunded_and_authorized_payments_are_read_and_a_partial_refund_is_a_refund() {
        let payment = |status: &str, refunded: i64| {
            serde_json::from_value::<RzpPayment>(json!({
                "id": "pay_29QQoUBi66xm2f", "entity": "payment", "amount": 1000,
                "currency": "INR", "status": status, "order_id": "order_X",
                "amount_refunded": refunded, "created_at": 1
            }))
            .unwrap()
            .into_model()
            .map(|p| p.status)
        };
        assert_eq!(payment("captured", 0), Some(PaymentStatus::Captured));
        assert_eq!(payment("captured", 100), Some(PaymentStatus::Refunded));
        assert_eq!(payment("refunded", 1000), Some(PaymentStatus::Refunded));
        assert_eq!(payment("authorized", 0), Some(PaymentStatus::Authorized));
        assert_eq!(payment("failed", 0), Some(PaymentStatus::Failed));
        assert_eq!(payment("created", 0), None);
    }

    #[test]
    fn debug_never_shows_a_key() {
        let keys = RazorpayKeys::new("rzp_test_KEYIDVALUE1", "SECRETVALUE2").unwrap();
        let provider = RazorpayProvider::new(keys.clone()).unwrap();
        for shown in [
            format!("{keys:?}"),
            format!("{provider:?}"),
            format!("{provider:#?}"),
        ] {
            assert!(!shown.contains("KEYIDVALUE1"), "{shown}");
            assert!(!shown.contains("SECRETVALUE2"), "{shown}");
            assert!(shown.contains("redacted"), "{shown}");
        }
    }

    #[test]
    fn only_https_or_a_loopback_http_base_is_accepted() {
        let keys = RazorpayKeys::new("rzp_test_ABC", "s").unwrap();
        let with = |base: &str| {
            RazorpayProvider::with_config(
                keys.clone(),
                RazorpayConfig {
                    base_url: base.into(),
                    ..RazorpayConfig::default()
                },
            )
        };
        assert!(with("https://api.razorpay.com").is_ok());
        assert!(with("http://127.0.0.1:9999").is_ok());
        assert!(with("http://localhost:9999/").is_ok());
        assert!(with("http://api.razorpay.com").is_err());
        assert!(with("ftp://127.0.0.1").is_err());
        assert!(with("not a url").is_err());
    }

    #[test]
    fn the_documented_order_entity_parses_and_a_lying_amount_due_does_not() {
        let doc = json!({
            "id": "order_IluGWxBm9U8zJ8", "entity": "order", "amount": 5000,
            "amount_paid": 0, "amount_due": 5000, "currency": "INR",
            "receipt": "rcptid_11", "offer_id": null, "status": "created",
            "attempts": 0, "notes": [], "created_at": 1642662092
        });
        let order = parse_order(doc.clone()).unwrap();
        assert_eq!(
            (
                order.id.as_str(),
                order.amount_paise,
                order.status,
                order.merchant.as_str()
            ),
            ("order_IluGWxBm9U8zJ8", 5000, OrderStatus::Created, "")
        );
        let mut lying = doc.clone();
        lying["amount_due"] = json!(1);
        assert!(matches!(
            parse_order(lying),
            Err(ProviderError::Malformed(_))
        ));
        let mut payment = doc;
        payment["entity"] = json!("payment");
        assert!(matches!(
            parse_order(payment),
            Err(ProviderError::Malformed(_))
        ));
    }
}
