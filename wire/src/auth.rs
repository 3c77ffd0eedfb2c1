//! Who is calling: the bearer key of the request, checked by the gate
//! (`gate::service::api_keys`: the key's shape, its digest, the constant-time
//! compare).
//!
//! Guarantees:
//! - [`authenticate`] accepts exactly `Authorization: Bearer <key>` (the
//!   scheme's case aside), one header, a key of the exact shape; anything
//!   else is [`AuthFailure::Unauthenticated`] without a database read. The
//!   row is found by its public id and the digests are compared with
//!   `subtle`'s constant-time equality; an unknown id is compared against a
//!   dummy digest so that both paths do the same work. A revoked key fails
//!   like an unknown one. Nothing the client sent is ever echoed.
//! - The [`Caller`]'s tenant and actor are the key row's: no header or body
//!   field can change them.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use gate::provider::PaymentProvider;
use gate::service::api_keys::key_id_of;
pub use gate::service::api_keys::{Caller, KEY_PREFIX, Role};
use gate::service::{Gate, ServiceError};

/// Why a request is not authenticated.
#[derive(Debug)]
pub enum AuthFailure {
    /// Missing, malformed, unknown or revoked: all answered the same (401).
    Unauthenticated,
    /// The key could not be checked (database down).
    Engine(ServiceError),
}

/// The bearer token of the one `Authorization` header, if it has the exact shape.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    key_id_of(token).map(|_| token)
}

/// Checks the request's bearer key with the gate.
pub async fn authenticate<P: PaymentProvider>(
    gate: &Gate<P>,
    headers: &HeaderMap,
) -> Result<Caller, AuthFailure> {
    let Some(token) = bearer_token(headers) else {
        return Err(AuthFailure::Unauthenticated);
    };
    match gate.authenticate(token).await {
        Ok(Some(caller)) => Ok(caller),
        Ok(None) => Err(AuthFailure::Unauthenticated),
        Err(e) => Err(AuthFailure::Engine(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const GOOD: &str =
        "sgk_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(AUTHORIZATION, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn the_header_must_be_one_bearer_of_the_exact_shape() {
        let good = format!("Bearer {GOOD}");
        assert_eq!(bearer_token(&headers(&[good.as_bytes()])), Some(GOOD));
        let lower = format!("bearer {GOOD}");
        assert_eq!(bearer_token(&headers(&[lower.as_bytes()])), Some(GOOD));
        for bad in [
            format!("Basic {GOOD}"),
            format!("Bearer  {GOOD}"),
            format!("Bearer {GOOD} "),
            format!("Bearer{GOOD}"),
            GOOD.to_owned(),
            "Bearer".to_owned(),
        ] {
            assert_eq!(bearer_token(&headers(&[bad.as_bytes()])), None, "{bad:?}");
        }
        assert_eq!(bearer_token(&headers(&[b"Bearer \xff\xfe"])), None);
        assert_eq!(
            bearer_token(&headers(&[good.as_bytes(), good.as_bytes()])),
            None,
            "two Authorization headers are refused, not picked from"
        );
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }
}
