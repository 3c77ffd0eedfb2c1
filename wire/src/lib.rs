//! spendgate on the wire: an axum service over [`gate::service::Gate`].
//!
//! Guarantees:
//! - No gate logic lives here. Every decision about money is the gate's; this
//!   crate authenticates the caller, scopes the object the path names to the
//!   caller's tenant, hands the raw request to the gate and turns its answer
//!   into a status and a JSON body ([`answer`], documented in `docs/http.md`).
//! - Who is calling comes from the bearer key alone ([`auth`]): the tenant and
//!   the actor are the key's, never a header's or the body's. An unknown,
//!   revoked or malformed credential is 401 and never reaches the gate (the
//!   only statement it causes is the read of the key row). An agent key on a
//!   human route, or a human key on an agent route, is 403. An object of
//!   another tenant is 404, byte for byte the answer for a missing one.
//! - The agent's proposal is read raw and at most 4 KiB of it is ever
//!   buffered (a declared or streamed body past that is 413); bodies must be
//!   JSON (415 otherwise); an engine error is 503 with a request id, and its
//!   text goes to `tracing` only.
//! - A body is read whole, under [`WireConfig::body_deadline`], before the
//!   request takes a permit: a client that sends slowly holds none, and is
//!   answered 408 `BODY_TIMEOUT` when the deadline passes. Authenticated
//!   routes share [`WireConfig::concurrency_limit`]; the provider's webhook,
//!   the one route open without a key, has its own smaller limit; `/healthz`
//!   takes no permit. So no number of unauthenticated or slow clients can
//!   keep `/healthz` or a tenant's proposal waiting.
//! - Timeouts and the concurrency limits are tower layers; [`serve`] stops on
//!   the shutdown future and lets requests in flight finish; it sets
//!   TCP_NODELAY on every connection it accepts.
//!
//! Two calls into the gate are kept in one place each so that a change to
//! their signatures is a one-line change: the webhook in `routes::deliver_webhook`,
//! and the gate's construction, which is the caller's (`harness serve`).
#![forbid(unsafe_code)]

pub mod answer;
pub mod auth;
pub mod mcp;
pub mod pages;
mod routes;
mod state;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use gate::provider::PaymentProvider;
use gate::service::Gate;
use tokio::net::TcpListener;

pub use answer::{WireCode, status_of};
pub use auth::{Caller, Role};
pub use routes::{EVENT_ID, IDEMPOTENCY_KEY, MAX_HEADER_CHARS, REPLAYED, SIGNATURE, is_json};

/// The most the agent-facing propose ever buffers.
pub const PROPOSE_LIMIT_BYTES: usize = 4 * 1024;
/// The most any other route buffers (human routes, provider events).
pub const BODY_LIMIT_BYTES: usize = 64 * 1024;

/// How the service is run.
#[derive(Debug, Clone)]
pub struct WireConfig {
    /// What `/healthz` says about the provider (`in-process`, `razorpay-test`).
    pub provider_mode: &'static str,
    /// How long one request may take before it is answered 503 `TIMEOUT`.
    pub request_timeout: Duration,
    /// How many authenticated requests are served at once; the rest wait
    /// their turn. `/healthz` takes none of these permits, nor does the
    /// provider's webhook (it has [`WireConfig::webhook_concurrency_limit`]).
    pub concurrency_limit: usize,
    /// How many provider events (the one route open without a key) are
    /// served at once, apart from the authenticated routes' permits.
    pub webhook_concurrency_limit: usize,
    /// How long a client has to send its whole body. Bodies are read under
    /// this deadline before a permit is taken, so a slow client holds no
    /// permit; one that misses it is answered 408 `BODY_TIMEOUT`.
    pub body_deadline: Duration,
    /// The secret the tenants' log keys derive from: the receipt page shows
    /// the tenant's public log key (never the secret) so that its verify
    /// button can check the checkpoint's signature. `None`: no key shown.
    pub log_key: Option<gate::service::tlog::LogKey>,
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            provider_mode: "in-process",
            request_timeout: Duration::from_secs(30),
            concurrency_limit: 64,
            webhook_concurrency_limit: 8,
            body_deadline: Duration::from_secs(10),
            log_key: None,
        }
    }
}

/// The service: every route of `docs/http.md`, with its tower layers.
pub fn router<P: PaymentProvider + 'static>(gate: Arc<Gate<P>>, config: WireConfig) -> Router {
    routes::router(gate, config)
}

/// Serves `router(gate, config)` on `listener` until `shutdown` completes,
/// then waits for the requests in flight to finish.
pub async fn serve<P: PaymentProvider + 'static>(
    listener: TcpListener,
    gate: Arc<Gate<P>>,
    config: WireConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // Answers go out as soon as they are written (no Nagle delay on a kept-alive connection).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, router(gate, config))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("interrupted: finishing requests in flight"),
        () = terminate => tracing::info!("SIGTERM: finishing requests in flight"),
    }
}
