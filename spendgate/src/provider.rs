//! The provider a served gate talks to, chosen by the configuration.
//!
//! Guarantees: `provider = "razorpay"` builds the Razorpay adapter at
//! `razorpay_base_url` with `razorpay_key_id` (a `rzp_live_` key is refused
//! by the configuration before anything is built); `provider = "demo"` builds
//! the demo provider over the gate's own database, so a restart loses no
//! order. Nothing else is accepted.

use std::future::Future;

use gate::provider::{
    DemoProvider, OrderRequest, OrderSnapshot, PaymentProvider, ProviderError, ProviderHealth,
    ProviderOrder, RazorpayConfig, RazorpayKeys, RazorpayProvider,
};
use sqlx::PgPool;

use crate::config::{Config, ProviderKind};
use crate::error::Failure;

/// One of the two providers an operator may run.
#[derive(Debug)]
pub enum Provider {
    Razorpay(RazorpayProvider),
    Demo(DemoProvider),
}

impl Provider {
    /// The provider `config` names, over `pool` for the demo.
    pub fn from_config(config: &Config, pool: &PgPool) -> Result<Provider, Failure> {
        Ok(match config.provider()? {
            ProviderKind::Demo => Provider::Demo(DemoProvider::new(pool.clone())),
            ProviderKind::Razorpay => Provider::Razorpay(razorpay(config)?),
        })
    }

    /// What `/healthz` says the provider is.
    pub fn mode(&self) -> &'static str {
        match self {
            Provider::Razorpay(_) => "razorpay-test",
            Provider::Demo(_) => "demo",
        }
    }
}

/// The Razorpay adapter from the configuration (checked first, so a bad key
/// stops the command before any connection).
pub fn razorpay(config: &Config) -> Result<RazorpayProvider, Failure> {
    let settings = config.razorpay()?;
    let keys = RazorpayKeys::new(&settings.key_id, &settings.key_secret)
        .map_err(|e| Failure::Other(format!("razorpay_key_id: {e}")))?;
    RazorpayProvider::with_config(
        keys,
        RazorpayConfig {
            base_url: settings.base_url,
            ..RazorpayConfig::default()
        },
    )
    .map_err(|e| Failure::Other(format!("razorpay_base_url: {e}")))
}

impl Provider {
    async fn create(&self, request: &OrderRequest) -> Result<ProviderOrder, ProviderError> {
        match self {
            Provider::Razorpay(p) => p.create_order(request).await,
            Provider::Demo(p) => p.create_order(request).await,
        }
    }

    async fn fetch(&self, order_id: &str) -> Result<Option<OrderSnapshot>, ProviderError> {
        match self {
            Provider::Razorpay(p) => p.fetch_order(order_id).await,
            Provider::Demo(p) => p.fetch_order(order_id).await,
        }
    }

    async fn find(&self, receipt: &str) -> Result<Option<OrderSnapshot>, ProviderError> {
        match self {
            Provider::Razorpay(p) => p.find_by_receipt(receipt).await,
            Provider::Demo(p) => p.find_by_receipt(receipt).await,
        }
    }
}

impl PaymentProvider for Provider {
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
        self.find(receipt)
    }

    fn health(&self) -> ProviderHealth {
        match self {
            Provider::Razorpay(p) => p.health(),
            Provider::Demo(p) => p.health(),
        }
    }
}
