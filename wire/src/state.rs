//! What every route and page of the service shares: the gate and the
//! service's configuration, behind one `Arc` the router hands each handler.
//!
//! Guarantees: the state is read-only once the router is built; a handler
//! holds the gate through it and nothing else.

use std::sync::Arc;

use axum::extract::State;
use gate::service::Gate;

use crate::WireConfig;

/// The gate a service serves and how it serves it.
pub(crate) struct AppState<P> {
    pub(crate) gate: Arc<Gate<P>>,
    pub(crate) config: WireConfig,
}

/// The state as a handler extracts it.
pub(crate) type Shared<P> = State<Arc<AppState<P>>>;
