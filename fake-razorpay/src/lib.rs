//! A local fake of Razorpay's Orders and Payments API on loopback.
//!
//! Guarantees:
//! - It keeps its orders and payments in the same [`gate::provider::Book`]
//!   model the in-process provider uses and serves the documented response
//!   shapes (written here by hand from Razorpay's docs, not from the
//!   adapter's types). It answers only [`KEY_ID`] and [`KEY_SECRET`] (Basic
//!   auth); any other key is Razorpay's 401.
//! - [`Strictness::Contract`] (the adapter's contract tests) ASSERTS what
//!   the adapter sends: method, path, `Content-Type`, the JSON fields of a
//!   new order (exactly `amount`, `currency`, `receipt`, `notes`; a receipt
//!   of at most 40 characters), a receipt filter on a list. Every broken
//!   expectation is kept in `violations` and answered 400, so a test that
//!   ends with none proves the adapter spoke the contract.
//! - [`Strictness::Documented`] (`harness fake-razorpay`) accepts what
//!   Razorpay documents: an order without `notes`, with `partial_payment`
//!   or other documented fields, a list without a receipt filter.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gate::provider::{Book, OrderRequest, OrderSnapshot, Payment, ProviderOrder};
use serde_json::{Value, json};

pub const KEY_ID: &str = "rzp_test_PLACEHOLDER0001";
pub const KEY_SECRET: &str = "placeholder_secret_0001";

/// How the fake answers the next order creations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FakeMode {
    #[default]
    Ok,
    /// Answers after 30 seconds (the adapter's bound is far shorter).
    Slow,
    /// 503 with Razorpay's error body.
    ServerError,
    /// 400 with Razorpay's error body.
    ClientError,
    /// Creates the order, then answers after 30 seconds.
    CreateThenTimeout,
    /// Creates orders as `Ok` does; every read (GET) answers 503.
    ReadsServerError,
    /// Creates orders as `Ok` does; every read (GET) answers 400 with a
    /// description other than "does not exist".
    ReadsClientError,
    /// 429 on order creation, with `Retry-After: 1`; no order is made.
    RateLimited,
    /// The next read answers 429 with `Retry-After: 1`, later ones as `Ok`.
    ReadsRetryAfterOnce,
    /// Every read answers 429 with `Retry-After: 3600` (longer than any
    /// adapter waits).
    ReadsRetryAfterHour,
    /// Every read answers 503 with `Retry-After: 1` (short enough to wait
    /// for, every time).
    ReadsUnavailableRetryAfterSecond,
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub body: Option<Value>,
}

/// How much of Razorpay's documented API the fake accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// Exactly what the gate's adapter sends; anything else is a violation.
    #[default]
    Contract,
    /// What Razorpay documents, for clients nobody here wrote.
    Documented,
}

/// The fields Razorpay documents for a new order.
const DOCUMENTED_ORDER_FIELDS: [&str; 7] = [
    "amount",
    "currency",
    "receipt",
    "notes",
    "partial_payment",
    "first_payment_min_amount",
    "customer_id",
];

#[derive(Debug, Default)]
pub struct Inner {
    pub strictness: Strictness,
    pub book: Book,
    pub mode: FakeMode,
    pub seen: Vec<Seen>,
    pub violations: Vec<String>,
    pub now: i64,
}

/// A running fake; dropped with the test's runtime.
#[derive(Clone)]
pub struct Fake {
    pub base_url: String,
    pub state: Arc<Mutex<Inner>>,
}

impl Fake {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut guard)
    }

    pub fn set_mode(&self, mode: FakeMode) {
        self.with(|s| s.mode = mode);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.with(|s| s.seen.clone())
    }

    pub fn violations(&self) -> Vec<String> {
        self.with(|s| s.violations.clone())
    }

    pub fn orders(&self) -> Vec<ProviderOrder> {
        self.with(|s| s.book.orders().to_vec())
    }

    /// The customer pays `order_id` at the fake provider.
    pub fn capture(&self, order_id: &str) -> Payment {
        self.with(|s| {
            let now = s.now;
            s.book.capture(order_id, now)
        })
        .unwrap_or_else(|e| panic!("the fake could not capture {order_id}: {e}"))
    }

    /// The customer's bank authorises a payment of `order_id` (manual
    /// capture: nothing is captured until the merchant captures it).
    pub fn authorize(&self, order_id: &str) -> Payment {
        self.with(|s| {
            let now = s.now;
            s.book.authorize(order_id, now)
        })
        .unwrap_or_else(|e| panic!("the fake could not authorise {order_id}: {e}"))
    }

    /// The merchant refunds a captured payment in full.
    pub fn refund(&self, payment_id: &str) -> Payment {
        self.with(|s| s.book.refund(payment_id))
            .unwrap_or_else(|e| panic!("the fake could not refund {payment_id}: {e}"))
    }

    pub fn fail_attempt(&self, order_id: &str) -> Payment {
        self.with(|s| {
            let now = s.now;
            s.book.fail_attempt(order_id, now)
        })
        .unwrap_or_else(|e| panic!("the fake could not fail {order_id}: {e}"))
    }

    pub fn captured_paise(&self) -> i64 {
        self.with(|s| s.book.captured_paise())
    }

    pub fn snapshot(&self, order_id: &str) -> Option<OrderSnapshot> {
        self.with(|s| s.book.snapshot(order_id))
    }
}

/// Starts the fake in contract mode on an ephemeral loopback port.
///
/// # Panics
/// When no loopback port can be bound (a test's setup failing).
pub async fn start() -> Fake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("binding 127.0.0.1:0 for the fake Razorpay: {e}"));
    serve(listener, Strictness::Contract)
        .unwrap_or_else(|e| panic!("reading the fake Razorpay's address: {e}"))
}

/// Serves the fake on `listener` (in a task of the current runtime) until
/// the runtime ends.
pub fn serve(listener: tokio::net::TcpListener, strictness: Strictness) -> std::io::Result<Fake> {
    let state = Arc::new(Mutex::new(Inner {
        strictness,
        now: 1_788_429_600,
        ..Inner::default()
    }));
    let app = Router::new()
        .route("/v1/orders", get(list_orders).post(create_order))
        .route("/v1/orders/{id}", get(fetch_order))
        .route("/v1/orders/{id}/payments", get(order_payments))
        .route(
            "/v1/payments/{id}/capture",
            axum::routing::post(capture_payment),
        )
        .fallback(unknown)
        .with_state(state.clone());
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Fake {
        base_url: format!("http://{addr}"),
        state,
    })
}

type Shared = State<Arc<Mutex<Inner>>>;

fn lock(state: &Arc<Mutex<Inner>>) -> std::sync::MutexGuard<'_, Inner> {
    match state.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn error(status: StatusCode, code: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": {
            "code": code,
            "description": description,
            "source": "business",
            "step": "payment_initiation",
            "reason": "input_validation_failed",
            "metadata": {},
        }})),
    )
        .into_response()
}

/// Records the request and checks the common contract; `Err` is the answer.
#[allow(clippy::result_large_err)]
fn check(
    s: &mut Inner,
    headers: &HeaderMap,
    method: &str,
    path: &str,
    query: Option<String>,
    body: Option<Value>,
) -> Result<(), Response> {
    s.seen.push(Seen {
        method: method.into(),
        path: path.into(),
        query,
        body,
    });
    let expected = format!(
        "Basic {}",
        base64(format!("{KEY_ID}:{KEY_SECRET}").as_bytes())
    );
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(given) if given == expected => match (method, s.mode) {
            ("GET", FakeMode::ReadsServerError) => Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVER_ERROR",
                "We are facing some trouble completing your request at the moment",
            )),
            ("GET", FakeMode::ReadsClientError) => Err(error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST_ERROR",
                "The merchant account is suspended (placeholder)",
            )),
            ("GET", FakeMode::ReadsRetryAfterOnce) => {
                s.mode = FakeMode::Ok;
                Err(too_many("1"))
            }
            ("GET", FakeMode::ReadsRetryAfterHour) => Err(too_many("3600")),
            ("GET", FakeMode::ReadsUnavailableRetryAfterSecond) => {
                let mut r = error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "SERVER_ERROR",
                    "We are facing some trouble completing your request at the moment",
                );
                r.headers_mut()
                    .insert("retry-after", axum::http::HeaderValue::from_static("1"));
                Err(r)
            }
            _ => Ok(()),
        },
        Some(_) => Err(error(
            StatusCode::UNAUTHORIZED,
            "BAD_REQUEST_ERROR",
            "The api key/secret provided is invalid",
        )),
        None => {
            s.violations
                .push(format!("{method} {path} without an Authorization header"));
            Err(error(
                StatusCode::UNAUTHORIZED,
                "BAD_REQUEST_ERROR",
                "The api key provided is invalid",
            ))
        }
    }
}

/// Razorpay's 429, with a `Retry-After` of `seconds`.
fn too_many(seconds: &str) -> Response {
    let mut r = error(
        StatusCode::TOO_MANY_REQUESTS,
        "BAD_REQUEST_ERROR",
        "Too many requests",
    );
    if let Ok(v) = axum::http::HeaderValue::from_str(seconds) {
        r.headers_mut().insert("retry-after", v);
    }
    r
}

fn order_entity(o: &ProviderOrder) -> Value {
    json!({
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
    })
}

fn payment_entity(p: &Payment) -> Value {
    let refunded = p.status == gate::provider::PaymentStatus::Refunded;
    json!({
        "id": p.id,
        "entity": "payment",
        "amount": p.amount_paise,
        "currency": p.currency,
        "status": p.status.as_str(),
        "order_id": p.order_id,
        "invoice_id": null,
        "international": false,
        "method": "upi",
        "amount_refunded": if refunded { p.amount_paise } else { 0 },
        "refund_status": if refunded { json!("full") } else { Value::Null },
        "captured": p.status.was_captured(),
        "description": null,
        "email": "buyer@example.com",
        "contact": "+919000090000",
        "notes": [],
        "fee": 0,
        "tax": 0,
        "error_code": null,
        "error_description": null,
        "created_at": p.created_at,
    })
}

async fn create_order(
    State(state): Shared,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let (mode, answer) = {
        let mut s = lock(&state);
        if let Err(r) = check(&mut s, &headers, "POST", "/v1/orders", None, parsed.clone()) {
            return r;
        }
        let json_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let Some(Value::Object(fields)) = parsed else {
            s.violations
                .push("POST /v1/orders: the body is not a JSON object".into());
            return error(StatusCode::BAD_REQUEST, "BAD_REQUEST_ERROR", "invalid body");
        };
        let mut problems = Vec::new();
        if !json_type {
            problems.push("Content-Type is not application/json".to_owned());
        }
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let documented = s.strictness == Strictness::Documented;
        if documented {
            if let Some(unknown) = keys.iter().find(|k| !DOCUMENTED_ORDER_FIELDS.contains(k)) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BAD_REQUEST_ERROR",
                    &format!("{unknown} is/are not required and should not be sent"),
                );
            }
        } else if keys != ["amount", "currency", "notes", "receipt"] {
            problems.push(format!(
                "fields {keys:?}, expected amount, currency, notes, receipt"
            ));
        }
        let amount = fields
            .get("amount")
            .and_then(Value::as_i64)
            .filter(|a| *a >= 100);
        let currency = fields
            .get("currency")
            .and_then(Value::as_str)
            .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()));
        let receipt = fields
            .get("receipt")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty() && r.chars().count() <= 40);
        let merchant = fields
            .get("notes")
            .and_then(|n| n.get("merchant"))
            .and_then(Value::as_str);
        if amount.is_none() {
            problems.push("amount is not an integer of at least 100".into());
        }
        if currency.is_none() {
            problems.push("currency is not a 3-letter code".into());
        }
        if receipt.is_none() && !documented {
            problems.push("receipt is missing, empty or longer than 40 characters".into());
        }
        if merchant.is_none() && !documented {
            problems.push("notes.merchant is missing".into());
        }
        if !problems.is_empty() {
            s.violations
                .extend(problems.iter().map(|p| format!("POST /v1/orders: {p}")));
            return error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST_ERROR",
                &problems.join("; "),
            );
        }
        let request = OrderRequest {
            receipt: receipt.unwrap_or_default().to_owned(),
            merchant: merchant.unwrap_or_default().to_owned(),
            amount_paise: amount.unwrap_or_default(),
            currency: currency.unwrap_or_default().to_owned(),
        };
        let mode = s.mode;
        let answer = match mode {
            FakeMode::Ok
            | FakeMode::Slow
            | FakeMode::CreateThenTimeout
            | FakeMode::ReadsServerError
            | FakeMode::ReadsClientError => {
                let now = s.now;
                Some(s.book.create(&request, now))
            }
            FakeMode::ReadsRetryAfterOnce
            | FakeMode::ReadsRetryAfterHour
            | FakeMode::ReadsUnavailableRetryAfterSecond => {
                let now = s.now;
                Some(s.book.create(&request, now))
            }
            FakeMode::ServerError | FakeMode::ClientError | FakeMode::RateLimited => None,
        };
        (mode, answer)
    };
    match (mode, answer) {
        (FakeMode::ServerError, _) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "SERVER_ERROR",
            "We are facing some trouble completing your request at the moment",
        ),
        (FakeMode::RateLimited, _) => too_many("1"),
        (FakeMode::ClientError, _) => error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST_ERROR",
            "The merchant account is suspended (placeholder)",
        ),
        (FakeMode::Slow | FakeMode::CreateThenTimeout, Some(order)) => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Json(order_entity(&order)).into_response()
        }
        (_, Some(order)) => Json(order_entity(&order)).into_response(),
        (_, None) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "SERVER_ERROR",
            "no order",
        ),
    }
}

#[derive(serde::Deserialize)]
struct ListQuery {
    receipt: Option<String>,
}

async fn list_orders(
    State(state): Shared,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let mut s = lock(&state);
    if let Err(r) = check(
        &mut s,
        &headers,
        "GET",
        "/v1/orders",
        q.receipt.clone(),
        None,
    ) {
        return r;
    }
    if q.receipt.is_none() && s.strictness == Strictness::Contract {
        s.violations
            .push("GET /v1/orders without a receipt filter".into());
        return error(StatusCode::BAD_REQUEST, "BAD_REQUEST_ERROR", "receipt");
    }
    // Newest first, as Razorpay lists.
    let items: Vec<Value> = s
        .book
        .orders()
        .iter()
        .rev()
        .filter(|o| q.receipt.as_ref().is_none_or(|r| &o.receipt == r))
        .map(order_entity)
        .collect();
    Json(json!({"entity": "collection", "count": items.len(), "items": items})).into_response()
}

async fn fetch_order(State(state): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let mut s = lock(&state);
    if let Err(r) = check(
        &mut s,
        &headers,
        "GET",
        &format!("/v1/orders/{id}"),
        None,
        None,
    ) {
        return r;
    }
    match s.book.snapshot(&id) {
        Some(snap) => Json(order_entity(&snap.order)).into_response(),
        None => error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST_ERROR",
            "The id provided does not exist",
        ),
    }
}

async fn order_payments(
    State(state): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let mut s = lock(&state);
    let path = format!("/v1/orders/{id}/payments");
    if let Err(r) = check(&mut s, &headers, "GET", &path, None, None) {
        return r;
    }
    match s.book.snapshot(&id) {
        Some(snap) => {
            let items: Vec<Value> = snap.payments.iter().map(payment_entity).collect();
            Json(json!({"entity": "collection", "count": items.len(), "items": items}))
                .into_response()
        }
        None => error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST_ERROR",
            "The id provided does not exist",
        ),
    }
}

async fn unknown(
    State(state): Shared,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Response {
    lock(&state)
        .violations
        .push(format!("{method} {uri}: not a documented Orders API route"));
    error(
        StatusCode::NOT_FOUND,
        "BAD_REQUEST_ERROR",
        "The requested URL was not found on the server.",
    )
}

/// `POST /v1/payments/{id}/capture`: exactly `amount` (an integer) and
/// `currency`, as documented; the payment must be authorised and the amount
/// and currency its own, else Razorpay's 400.
async fn capture_payment(
    State(state): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let mut s = lock(&state);
    let path = format!("/v1/payments/{id}/capture");
    if let Err(r) = check(&mut s, &headers, "POST", &path, None, parsed.clone()) {
        return r;
    }
    let Some(Value::Object(fields)) = parsed else {
        s.violations
            .push(format!("POST {path}: the body is not a JSON object"));
        return error(StatusCode::BAD_REQUEST, "BAD_REQUEST_ERROR", "invalid body");
    };
    let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let amount = fields.get("amount").and_then(Value::as_i64);
    let currency = fields.get("currency").and_then(Value::as_str);
    if keys != ["amount", "currency"] || amount.is_none() || currency.is_none() {
        s.violations.push(format!(
            "POST {path}: fields {keys:?}, expected an integer amount and a currency"
        ));
        return error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST_ERROR",
            "The amount must be an integer.",
        );
    }
    match s.book.capture_authorized(
        &id,
        amount.unwrap_or_default(),
        currency.unwrap_or_default(),
    ) {
        Ok(p) => Json(payment_entity(&p)).into_response(),
        Err(_) => error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST_ERROR",
            "Only payments which have been authorized and not yet captured can be captured",
        ),
    }
}
