//! The read-only pages: `/console`, `/receipts/{request}`, `/reports` and
//! their two static files, rendered on the server with `maud`.
//!
//! Guarantees:
//! - Nothing here can change anything. Every page route is a GET (any other
//!   method is 405 `METHOD_NOT_ALLOWED`, like every route of the service);
//!   the pages hold no form that posts (the console's filter form is a
//!   GET); the handlers call only the gate's reads
//!   (`gate::service::pages`), which are `SELECT`s.
//! - Every page is answered with `Content-Security-Policy: default-src
//!   'self'` (and no inline script anywhere: the receipt's verifier is
//!   `/static/receipt.js`, a file of this crate), `X-Content-Type-Options:
//!   nosniff`, `Referrer-Policy: no-referrer`, `Cache-Control: no-store` and
//!   `X-Frame-Options: DENY`. Every value from the database is written
//!   through maud's escaping; untrusted text (the agent's purpose, sku) is
//!   also shown with its invisible and bidirectional characters spelled out
//!   (`[U+202E]`), so it renders as inert, visible text ([`text::visible`]).
//! - Who may read: a human's or an auditor's key of the tenant (the tenant
//!   is the key's), presented as `Authorization: Basic` with the key as the
//!   password (a browser's own login prompt; the user name is ignored) or as
//!   `Authorization: Bearer`. No key, or a bad one, is 401 with a Basic
//!   challenge; an agent's key is 403 on every page. A request of another
//!   tenant is 404, like a missing one. The key is never put in a URL, a
//!   cookie or a page.
//! - `/receipts/{request}/bundle` is a GET like the pages, under the same
//!   keys, and answers a tar file (or 409 in plain text); it reads only.
//! - The static files (`/static/receipt.js`, `/static/pages.css`) hold no
//!   data and are served to anyone.

mod console;
pub mod receipt;
pub mod reports;
pub mod text;

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, WWW_AUTHENTICATE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use gate::provider::PaymentProvider;
use gate::service::api_keys::key_id_of;
use maud::{DOCTYPE, Markup, html};
use std::sync::Arc;

use crate::auth::{Caller, Role};
use crate::state::AppState;

/// The policy every page is served under.
pub const CSP: &str =
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const RECEIPT_JS: &str = include_str!("../../static/receipt.js");
const PAGES_CSS: &str = include_str!("../../static/pages.css");

/// The page routes (authenticated; under the service's shared limit).
pub(crate) fn router<P: PaymentProvider + 'static>() -> Router<Arc<AppState<P>>> {
    Router::new()
        .route("/console", get(console::page::<P>))
        .route("/receipts/{id}", get(receipt::page::<P>))
        .route("/receipts/{id}/bundle", get(receipt::bundle::<P>))
        .route("/reports", get(reports::index::<P>))
        .route("/reports/{name}", get(reports::report::<P>))
}

/// The static files of the pages (no data; open to anyone).
pub(crate) fn assets<P: PaymentProvider + 'static>() -> Router<Arc<AppState<P>>> {
    Router::new()
        .route(
            "/static/receipt.js",
            get(|| async { asset("text/javascript; charset=utf-8", RECEIPT_JS) }),
        )
        .route(
            "/static/pages.css",
            get(|| async { asset("text/css; charset=utf-8", PAGES_CSS) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

/// A page's answer: the status, the body and the page headers.
fn respond(status: StatusCode, body: Markup) -> Response {
    let mut response = (status, body.into_string()).into_response();
    let h = response.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The whole document around a page's `main`.
fn document(title: &str, caller: Option<&Caller>, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · spendgate" }
                link rel="stylesheet" href="/static/pages.css";
            }
            body {
                header {
                    nav {
                        strong { "spendgate" }
                        " · "
                        a href="/console" { "console" }
                        " · "
                        a href="/reports" { "reports" }
                    }
                    @if let Some(c) = caller {
                        p.who {
                            "read-only · " (c.role.as_str()) " " (text::visible(&c.actor))
                            " of tenant " (text::visible(&c.tenant))
                        }
                    }
                }
                main { (main) }
            }
        }
    }
}

/// A short page that says why (401, 403, 404, 503).
fn problem(status: StatusCode, title: &str, why: &str) -> Response {
    let mut response = respond(
        status,
        document(title, None, html! { h1 { (title) } p { (why) } }),
    );
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"spendgate console\", charset=\"UTF-8\""),
        );
    }
    response
}

/// The key a page request presents: `Basic` (the key as the password) or `Bearer`.
pub fn presented_key(headers: &HeaderMap) -> Option<String> {
    if let Some(token) = crate::auth::bearer_token(headers) {
        return Some(token.to_owned());
    }
    let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (scheme, encoded) = value.to_str().ok()?.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (_user, key) = text.split_once(':')?;
    key_id_of(key).map(|_| key.to_owned())
}

/// The caller of a page: a human's or an auditor's key, or the answer.
async fn reader<P: PaymentProvider>(
    s: &AppState<P>,
    headers: &HeaderMap,
) -> Result<Caller, Response> {
    let unauthenticated = || {
        problem(
            StatusCode::UNAUTHORIZED,
            "Sign in",
            "These pages need a human's or an auditor's key of the tenant, given as the \
             password of your browser's sign-in prompt.",
        )
    };
    let Some(key) = presented_key(headers) else {
        return Err(unauthenticated());
    };
    match s.gate.authenticate(&key).await {
        Ok(Some(c)) if matches!(c.role, Role::Human | Role::Auditor) => Ok(c),
        Ok(Some(c)) => {
            tracing::info!(key = %c.key_id, tenant = %c.tenant, "an agent's key on a page");
            Err(problem(
                StatusCode::FORBIDDEN,
                "Not for agents",
                "An agent's key reads no page: these pages are for the tenant's humans and auditors.",
            ))
        }
        Ok(None) => Err(unauthenticated()),
        Err(e) => Err(unavailable("authenticating", &e)),
    }
}

fn unavailable(action: &'static str, e: &gate::service::ServiceError) -> Response {
    tracing::error!("a page, {action}: {e}");
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "The gate could not read its database; nothing was changed. Try again.",
    )
}

/// An amount in minor units as `1,234.56 INR`.
pub fn money(paise: Option<i64>, currency: Option<&str>) -> String {
    let Some(paise) = paise else {
        return "—".to_owned();
    };
    let sign = if paise < 0 { "-" } else { "" };
    let abs = paise.unsigned_abs();
    let whole = (abs / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!(
        "{sign}{grouped}.{:02} {}",
        abs % 100,
        currency.unwrap_or("")
    )
    .trim_end()
    .to_owned()
}

/// A reason code in words: `AMOUNT_EXCEEDS_TRANSACTION_CAP` → "amount exceeds transaction cap".
pub fn reason_words(code: &str) -> String {
    code.to_ascii_lowercase().replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_grouped_with_two_decimals() {
        assert_eq!(money(Some(180_000), Some("INR")), "1,800.00 INR");
        assert_eq!(money(Some(5), Some("INR")), "0.05 INR");
        assert_eq!(money(Some(123_456_789), None), "1,234,567.89");
        assert_eq!(money(None, Some("INR")), "—");
    }

    #[test]
    fn a_page_key_is_basic_with_the_key_as_password_or_bearer() {
        let key =
            "sgk_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let mut h = HeaderMap::new();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("auditor:{key}"));
        h.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {basic}")).unwrap(),
        );
        assert_eq!(presented_key(&h).as_deref(), Some(key));
        let mut h = HeaderMap::new();
        let bad = base64::engine::general_purpose::STANDARD.encode("auditor:not-a-key");
        h.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {bad}")).unwrap(),
        );
        assert_eq!(presented_key(&h), None);
        assert_eq!(presented_key(&HeaderMap::new()), None);
    }
}
