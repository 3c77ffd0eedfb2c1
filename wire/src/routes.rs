//! The routes of `docs/http.md` and the layers around them.
//!
//! Outside the router, every body is read whole under the body deadline
//! (at most one byte past its route's limit), before the request takes a
//! turn; then the route's concurrency limit (the authenticated routes'
//! shared one, or the webhook's own; none for `/healthz`) gives it one.
//! Each handler does the same few things in the same order: authenticate
//! (401) and check the route's role (403) before anything else, check the
//! content type (415), read the body up to the route's limit (413), scope the
//! path's object to the caller's tenant (404), call the gate once, and turn
//! its answer into a response ([`crate::answer`]).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use gate::provider::PaymentProvider;
use gate::reason::{Decision, Reason};
use gate::service::{Gate, HopTerms, Outcome, ProposeOutcome, ServiceError};
use http_body::Body as _;
use mandate::SignedMandate;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::answer::{WireCode, decision_status, engine_error, outcome, status_of};
use crate::auth::{self, AuthFailure, Caller, Role};
use crate::state::{AppState, Shared};
use crate::{BODY_LIMIT_BYTES, PROPOSE_LIMIT_BYTES, WireConfig};
use gate::service::views::{Noted, Object, is_plausible_id};

/// The header carrying an agent's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The provider's signature over the raw body.
pub const SIGNATURE: &str = "x-razorpay-signature";
/// The provider's event id.
pub const EVENT_ID: &str = "x-razorpay-event-id";
/// Set on a propose answered from an earlier request with the same key and bytes.
pub const REPLAYED: &str = "idempotent-replayed";
/// The longest idempotency key or event id the service accepts.
pub const MAX_HEADER_CHARS: usize = 255;

/// The value of a `Result<T, Response>`, or return its answer.
macro_rules! try_or_answer {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(response) => return response,
        }
    };
}

pub(crate) fn router<P: PaymentProvider + 'static>(
    gate: Arc<Gate<P>>,
    config: WireConfig,
) -> Router {
    // Outside the router, so before any route's permit: axum's router is
    // always ready and takes a route's permit only once it calls the route.
    let outer = ServiceBuilder::new()
        .layer(TraceLayer::new_for_http())
        .layer(axum::middleware::map_response(timeout_answer))
        .layer(TimeoutLayer::with_status_code(
            TIMED_OUT,
            config.request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            config.body_deadline,
            prefetch,
        ));
    // One semaphore for every authenticated route, another for the webhook.
    let authenticated = GlobalConcurrencyLimitLayer::new(config.concurrency_limit.max(1));
    let unauthenticated = GlobalConcurrencyLimitLayer::new(config.webhook_concurrency_limit.max(1));
    let keyed = Router::new()
        .route("/v1/requests", post(propose::<P>))
        .route("/v1/requests/{id}", get(status::<P>))
        .route("/v1/requests/{id}/approval-note", post(approval_note::<P>))
        .route("/v1/orders/{id}", get(order::<P>))
        .route("/v1/catalog", get(catalog::<P>))
        .route("/v1/whoami", get(whoami::<P>))
        .route("/v1/requests/{id}/approve", post(approve::<P>))
        .route("/v1/requests/{id}/checkout", post(checkout::<P>))
        .route("/v1/requests/{id}/cancel", post(cancel::<P>))
        .route("/v1/authorities/{id}/pay", post(pay::<P>))
        .route("/v1/delegations", post(grant::<P>))
        .route("/v1/delegations/{id}/revoke", post(revoke::<P>))
        .route("/v1/catalog/{sku}/price", put(set_price::<P>))
        .route("/v1/policy", put(set_policy::<P>))
        .merge(crate::pages::router::<P>())
        .route_layer(authenticated);
    let provider = Router::new()
        .route("/webhooks/razorpay", post(webhook::<P>))
        .route_layer(unauthenticated);
    let state = Arc::new(AppState { gate, config });
    Router::new()
        .route("/healthz", get(healthz::<P>))
        .merge(crate::pages::assets::<P>())
        .merge(keyed)
        .merge(provider)
        .fallback(|| async { WireCode::NotFound.response() })
        .method_not_allowed_fallback(|| async { WireCode::MethodNotAllowed.response() })
        .with_state(state)
        .layer(outer)
}

/// The declared `Content-Length`, if it is one number.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// The most a route's body may hold: the agent's proposal has its own limit.
fn body_limit(path: &str) -> usize {
    if path == "/v1/requests" {
        PROPOSE_LIMIT_BYTES
    } else {
        BODY_LIMIT_BYTES
    }
}

/// Reads the request's whole body under `deadline`, before the request
/// takes a permit, and hands the handler the bytes. A body declared past its
/// route's limit is not read at all (the handler refuses it on its declared
/// length); a streamed one stops one byte past it (the handler refuses it as
/// too large). A body not received by the deadline is answered 408
/// `BODY_TIMEOUT` and its connection closed.
async fn prefetch(
    State(deadline): State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let limit = body_limit(request.uri().path());
    let (parts, body) = request.into_parts();
    if declared_length(&parts.headers).is_some_and(|n| n > limit as u64) {
        return next
            .run(axum::extract::Request::from_parts(parts, body))
            .await;
    }
    match tokio::time::timeout(deadline, read_at_most(body, limit.saturating_add(1))).await {
        Ok(Ok(bytes)) => {
            next.run(axum::extract::Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(BodyError::Broken | BodyError::TooLarge)) => WireCode::BodyInvalid.response(),
        Err(_) => {
            tracing::info!(?deadline, "a body not received by its deadline");
            let mut response = WireCode::BodyTimeout.response();
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                HeaderValue::from_static("close"),
            );
            response
        }
    }
}

/// At most `most` bytes of `body`: reading stops as soon as it has them.
async fn read_at_most(body: Body, most: usize) -> Result<Vec<u8>, BodyError> {
    let mut body = body;
    let mut buf = Vec::new();
    while buf.len() < most {
        let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await else {
            break;
        };
        let frame = frame.map_err(|_| BodyError::Broken)?;
        if let Ok(data) = frame.into_data() {
            let room = most - buf.len();
            buf.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    Ok(buf)
}

/// The status the timeout layer answers with, bodiless: no handler answers it,
/// so [`timeout_answer`] knows it for the timeout's.
const TIMED_OUT: StatusCode = StatusCode::GATEWAY_TIMEOUT;

/// Gives the timeout layer's bodiless answer the service's JSON.
async fn timeout_answer(response: Response) -> Response {
    if response.status() == TIMED_OUT {
        WireCode::Timeout.response()
    } else {
        response
    }
}

/// A gate refusal answered before (or instead of) the gate: the agent's view of it.
fn refusal(reason: Reason) -> Response {
    (
        status_of(reason),
        Json(gate::redact::AgentView::of(Decision::Deny(reason))),
    )
        .into_response()
}

/// The authenticated caller, if it holds `role` (any of an agent's or a
/// human's when `None`). An auditor's key holds neither: it reads the pages
/// (`crate::pages`) and is refused on every route here.
async fn caller<P: PaymentProvider>(
    s: &AppState<P>,
    headers: &HeaderMap,
    role: Option<Role>,
) -> Result<Caller, Response> {
    match auth::authenticate(&s.gate, headers).await {
        Ok(c) if c.role != Role::Auditor && role.is_none_or(|r| r == c.role) => Ok(c),
        Ok(c) => {
            tracing::info!(key = %c.key_id, tenant = %c.tenant, role = c.role.as_str(), "a key used on a route of another role");
            Err(refusal(Reason::ActorNotPermitted))
        }
        Err(AuthFailure::Unauthenticated) => Err(WireCode::Unauthenticated.response()),
        Err(AuthFailure::Engine(e)) => Err(engine_error("authenticating", &e)),
    }
}

/// A human who may administer the tenant (prices, policy, delegations).
async fn administrator<P: PaymentProvider>(
    s: &AppState<P>,
    headers: &HeaderMap,
) -> Result<Caller, Response> {
    let c = caller(s, headers, Some(Role::Human)).await?;
    match s.gate.may_administer(&c.tenant, &c.actor).await {
        Ok(true) => Ok(c),
        Ok(false) => Err(refusal(Reason::ActorNotPermitted)),
        Err(e) => Err(engine_error("checking the caller's permissions", &e)),
    }
}

/// The path's id if it is an object of `what` in the caller's tenant; 404 otherwise.
async fn scoped<P: PaymentProvider>(
    s: &AppState<P>,
    caller: &Caller,
    what: Object,
    path: Result<Path<String>, PathRejection>,
) -> Result<String, Response> {
    let Ok(Path(id)) = path else {
        return Err(WireCode::NotFound.response());
    };
    match s.gate.object_exists(&caller.tenant, what, &id).await {
        Ok(true) => Ok(id),
        Ok(false) => {
            // Probes for other tenants' ids end here, before the gate: the log keeps them.
            tracing::info!(key = %caller.key_id, tenant = %caller.tenant, object = ?what, "an id not of the caller's tenant");
            Err(WireCode::NotFound.response())
        }
        Err(e) => Err(engine_error("scoping an object", &e)),
    }
}

/// True when the one Content-Type header is `application/json` (charset utf-8 at most).
pub fn is_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(text) = value.to_str() else {
        return false;
    };
    let mut parts = text.split(';');
    let essence = parts.next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        && parts.all(|param| match param.split_once('=') {
            Some((k, v)) => {
                k.trim().eq_ignore_ascii_case("charset")
                    && v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
            }
            None => false,
        })
}

enum BodyError {
    TooLarge,
    Broken,
}

/// Reads at most `limit` bytes: a declared length past it is refused before
/// a byte is read, and the stream is abandoned as soon as it passes it.
async fn read_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, BodyError> {
    if declared_length(headers).is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = body;
    let mut buf = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf)
}

/// A JSON body of at most `limit` bytes, or the answer refusing it.
async fn json_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    too_large: fn() -> Response,
) -> Result<Vec<u8>, Response> {
    if !is_json(headers) {
        return Err(WireCode::ContentTypeUnsupported.response());
    }
    match read_limited(headers, body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge) => Err(too_large()),
        Err(BodyError::Broken) => Err(WireCode::BodyInvalid.response()),
    }
}

/// A human route's body parsed into `T`; serde's text goes to the log only.
async fn parsed<T: DeserializeOwned>(headers: &HeaderMap, body: Body) -> Result<T, Response> {
    let raw = json_body(headers, body, BODY_LIMIT_BYTES, || {
        WireCode::BodyTooLarge.response()
    })
    .await?;
    serde_json::from_slice(&raw).map_err(|e| {
        tracing::debug!(error = %e, "a body that does not parse");
        WireCode::BodyInvalid.response()
    })
}

/// The value of a header that may appear at most once and must be 1 to 255
/// visible ASCII characters; `Err` is [`WireCode::HeaderInvalid`] (400).
fn single_header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, WireCode> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let ok = values.next().is_none()
        && !value.is_empty()
        && value.len() <= MAX_HEADER_CHARS
        && value.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
    match (ok, value.to_str()) {
        (true, Ok(text)) => Ok(Some(text)),
        _ => Err(WireCode::HeaderInvalid),
    }
}

// ---- agent routes ------------------------------------------------------------

async fn propose<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let c = match caller(&s, &headers, Some(Role::Agent)).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let key = match single_header(&headers, IDEMPOTENCY_KEY) {
        Ok(k) => k,
        Err(code) => return code.response(),
    };
    let raw = match json_body(&headers, body, PROPOSE_LIMIT_BYTES, || {
        refusal(Reason::ProposalTooLarge)
    })
    .await
    {
        Ok(raw) => raw,
        Err(r) => return r,
    };
    match s.gate.propose(&c.tenant, &c.actor, &raw, key).await {
        Ok(o) => propose_answer(&o, s.gate.now()),
        Err(e) => engine_error("proposing", &e),
    }
}

/// Whole seconds from `now` until `at`, at least one.
fn seconds_until(at: DateTime<Utc>, now: DateTime<Utc>) -> i64 {
    let millis = (at - now).num_milliseconds();
    (millis.saturating_add(999) / 1000).max(1)
}

fn propose_answer(o: &ProposeOutcome, now: DateTime<Utc>) -> Response {
    let mut body = json!({
        "request_id": o.request_id,
        "decision": o.view.decision,
        "message": o.view.message,
        "replayed": o.replayed,
    });
    if let Some(reason) = o.view.reason {
        body["reason"] = json!(reason.code());
    }
    let mut response =
        (decision_status(o.decision, StatusCode::CREATED), Json(body)).into_response();
    if o.replayed {
        response
            .headers_mut()
            .insert(REPLAYED, HeaderValue::from_static("true"));
    }
    // A rate refusal says when the window lets the next proposal through.
    if let Some(at) = o.retry_at {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds_until(at, now)));
    }
    response
}

/// The redacted status of a request: an agent sees only its own, a human its tenant's.
async fn status<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = match caller(&s, &headers, None).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Ok(Path(id)) = path else {
        return WireCode::NotFound.response();
    };
    match s.gate.request_view(&c.tenant, &id).await {
        Ok(Some(view)) if c.role == Role::Human || view.agent_id == c.actor => {
            (StatusCode::OK, Json(view)).into_response()
        }
        Ok(_) => WireCode::NotFound.response(),
        Err(e) => engine_error("reading a request's status", &e),
    }
}

/// An agent's note that its request waits for a human: decides nothing.
async fn approval_note<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Agent)).await);
    let Ok(Path(id)) = path else {
        return WireCode::NotFound.response();
    };
    let noted = s.gate.note_approval(&c.tenant, &c.actor, &id).await;
    let (status, message) = match noted {
        Ok(Noted::Noted) => (
            StatusCode::CREATED,
            "Noted: the humans who may approve will see the request.",
        ),
        Ok(Noted::AlreadyNoted) => (StatusCode::OK, "Already noted: the humans have been told."),
        Ok(Noted::NotPending) => return refusal(Reason::ApprovalNotPending),
        Ok(Noted::NotFound) => return WireCode::NotFound.response(),
        Err(e) => return engine_error("leaving an approval note", &e),
    };
    (
        status,
        Json(json!({"request_id": id, "noted": status == StatusCode::CREATED, "message": message})),
    )
        .into_response()
}

/// The tenant's catalog as an agent sees it: no price, no merchant.
async fn catalog<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, None).await);
    match s.gate.agent_catalog(&c.tenant).await {
        Ok(items) => (StatusCode::OK, Json(json!({ "items": items }))).into_response(),
        Err(e) => engine_error("reading the catalog", &e),
    }
}

/// Who the key is: its id, tenant, actor and role.
async fn whoami<P: PaymentProvider + 'static>(State(s): Shared<P>, headers: HeaderMap) -> Response {
    let c = try_or_answer!(caller(&s, &headers, None).await);
    (
        StatusCode::OK,
        Json(json!({
            "key_id": c.key_id,
            "tenant": c.tenant,
            "actor": c.actor,
            "role": c.role.as_str(),
        })),
    )
        .into_response()
}

/// A provider order's amount and currency: an agent sees its own requests'
/// orders, a human its tenant's.
async fn order<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, None).await);
    let Ok(Path(id)) = path else {
        return WireCode::NotFound.response();
    };
    match s.gate.order_view(&c.tenant, &id).await {
        Ok(Some(view)) if c.role == Role::Human || view.agent_id == c.actor => {
            (StatusCode::OK, Json(view)).into_response()
        }
        Ok(_) => WireCode::NotFound.response(),
        Err(e) => engine_error("reading a provider order", &e),
    }
}

// ---- human routes ------------------------------------------------------------

/// Answers a gate call's result; `done` says what the call did when it did it.
fn answered(
    action: &'static str,
    done: &'static str,
    result: Result<Outcome, ServiceError>,
) -> Response {
    match result {
        Ok(o) => outcome(&o, done),
        Err(e) => engine_error(action, &e),
    }
}

async fn approve<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Human)).await);
    let id = try_or_answer!(scoped(&s, &c, Object::Request, path).await);
    answered(
        "approving",
        "Approved: the request is authorized; issue its checkout next.",
        s.gate.approve(&c.tenant, &id, &c.actor).await,
    )
}

async fn checkout<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Human)).await);
    let id = try_or_answer!(scoped(&s, &c, Object::Request, path).await);
    answered(
        "issuing a checkout authority",
        "A checkout authority is issued (its id is `id`): pay it before it expires.",
        s.gate.checkout(&c.tenant, &id, &c.actor).await,
    )
}

async fn cancel<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Human)).await);
    let id = try_or_answer!(scoped(&s, &c, Object::Request, path).await);
    answered(
        "cancelling",
        "The request is cancelled; its reservation is released.",
        s.gate.cancel(&c.tenant, &id, &c.actor).await,
    )
}

async fn pay<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Human)).await);
    let id = try_or_answer!(scoped(&s, &c, Object::Authority, path).await);
    answered(
        "paying",
        "A provider order is created (its id is `id`); the purchase is captured when the provider's signed event arrives.",
        s.gate.pay(&c.tenant, &id, &c.actor).await,
    )
}

/// A grant as a human sends it: the grantor of a root hop is the caller;
/// `parent`, when given, is the id of the live delegation the hop is carved
/// from (anything else is `DELEGATION_MISSING`). No field names who grants.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    id: String,
    to: String,
    budget_paise: i64,
    #[serde(default)]
    skus: Option<Vec<String>>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    parent: Option<String>,
}

/// The most skus a grant may list.
const MAX_GRANT_SKUS: usize = 64;

impl GrantBody {
    /// The parent the body names and the hop's terms, when every id in it
    /// can name a row.
    fn terms(self) -> Option<(Option<String>, HopTerms)> {
        let skus_ok = self.skus.as_ref().is_none_or(|skus| {
            skus.len() <= MAX_GRANT_SKUS && skus.iter().all(|s| is_plausible_id(s))
        });
        let ids_ok = is_plausible_id(&self.id)
            && is_plausible_id(&self.to)
            && self.parent.as_deref().is_none_or(is_plausible_id);
        (skus_ok && ids_ok).then_some((
            self.parent,
            HopTerms {
                id: self.id,
                to: self.to,
                budget_paise: self.budget_paise,
                skus: self.skus,
                expires_at: self.expires_at,
            },
        ))
    }
}

async fn grant<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let c = try_or_answer!(administrator(&s, &headers).await);
    let grant: GrantBody = try_or_answer!(parsed(&headers, body).await);
    let Some((parent, terms)) = grant.terms() else {
        return WireCode::BodyInvalid.response();
    };
    answered(
        "granting",
        "The delegation is granted.",
        s.gate
            .grant(&c.tenant, &c.actor, parent.as_deref(), &terms)
            .await,
    )
}

async fn revoke<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let c = try_or_answer!(caller(&s, &headers, Some(Role::Human)).await);
    let id = try_or_answer!(scoped(&s, &c, Object::Delegation, path).await);
    answered(
        "revoking",
        "The delegation is revoked, with every hop below it; what the branch did not spend is given back.",
        s.gate.revoke(&c.tenant, &id, &c.actor).await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceBody {
    price_paise: i64,
}

async fn set_price<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Body,
) -> Response {
    let c = try_or_answer!(administrator(&s, &headers).await);
    let Ok(Path(sku)) = path else {
        return WireCode::NotFound.response();
    };
    if !is_plausible_id(&sku) {
        return WireCode::NotFound.response();
    }
    let price: PriceBody = try_or_answer!(parsed(&headers, body).await);
    answered(
        "changing a price",
        "The price is changed; proposals from now on are priced at it.",
        s.gate.set_price(&c.tenant, &sku, price.price_paise).await,
    )
}

async fn set_policy<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let c = try_or_answer!(administrator(&s, &headers).await);
    let signed: SignedMandate = try_or_answer!(parsed(&headers, body).await);
    answered(
        "publishing a mandate",
        "The signed mandate is published as the new policy version (its number is `id`); decisions from now on follow it.",
        s.gate.publish_mandate(&c.tenant, &signed).await,
    )
}

// ---- the provider and the operator -------------------------------------------

async fn webhook<P: PaymentProvider + 'static>(
    State(s): Shared<P>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // A repeated signature header is not picked from: it is no signature.
    let mut signatures = headers.get_all(SIGNATURE).iter();
    let signature = match (signatures.next(), signatures.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    };
    let event_id = try_or_answer!(single_header(&headers, EVENT_ID).map_err(WireCode::response));
    let raw = try_or_answer!(
        json_body(&headers, body, BODY_LIMIT_BYTES, || WireCode::BodyTooLarge
            .response())
        .await
    );
    answered(
        "receiving a provider event",
        "The provider event is applied.",
        deliver_webhook(&s.gate, &raw, signature, event_id).await,
    )
}

/// The one call of `Gate::webhook`: the raw body, the signature header and
/// the event id header.
async fn deliver_webhook<P: PaymentProvider>(
    gate: &Gate<P>,
    body: &[u8],
    signature: Option<&str>,
    event_id: Option<&str>,
) -> Result<Outcome, ServiceError> {
    gate.webhook(body, signature, event_id).await
}

/// How long `/healthz` waits for the database.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

async fn healthz<P: PaymentProvider + 'static>(State(s): Shared<P>) -> Response {
    let reachable = matches!(
        tokio::time::timeout(HEALTH_TIMEOUT, s.gate.ping()).await,
        Ok(Ok(()))
    );
    let status = if reachable {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            // Refused provider keys: a configuration error an operator must mend.
            "status": if reachable && !s.gate.provider_health().keys_refused { "ok" } else { "degraded" },
            "database": if reachable { "reachable" } else { "unreachable" },
            "provider": s.config.provider_mode,
            "untenanted_refusals": s.gate.untenanted_refusals(),
            "version": env!("CARGO_PKG_VERSION"),
        })),
    )
        .into_response()
}
