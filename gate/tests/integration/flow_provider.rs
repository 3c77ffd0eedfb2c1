//! `pay` against every way a provider can answer: an order (the one asked
//! for, or a different one), a 4xx, a 5xx, a timeout, an answer after the
//! gate's timeout. A refusal is an outcome, never an engine error; money
//! that may exist at the provider keeps its request PROVIDER_PENDING.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use gate::provider::{
    InProcessProvider, Mode, OrderRequest, OrderSnapshot, PaymentProvider, ProviderError,
    ProviderHealth, ProviderOrder,
};
use gate::service::{Gate, ManualClock};
use gate::{Decision, Reason};

/// Wraps the in-process provider and changes one field of every order it answers.
#[derive(Debug)]
struct Answering {
    inner: InProcessProvider,
    tweak: fn(&mut ProviderOrder),
    delay: Option<Duration>,
}

impl PaymentProvider for Answering {
    fn create_order(
        &self,
        request: &OrderRequest,
    ) -> impl Future<Output = Result<ProviderOrder, ProviderError>> + Send {
        let answer = futures_ready(&self.inner, request).map(|mut o| {
            (self.tweak)(&mut o);
            o
        });
        let delay = self.delay;
        async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            answer
        }
    }

    fn fetch_order(
        &self,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.inner.fetch_order(order_id)
    }

    fn find_by_receipt(
        &self,
        receipt: &str,
    ) -> impl Future<Output = Result<Option<OrderSnapshot>, ProviderError>> + Send {
        self.inner.find_by_receipt(receipt)
    }

    fn health(&self) -> ProviderHealth {
        self.inner.health()
    }
}

/// The in-process provider answers at once; take its answer.
fn futures_ready(
    p: &InProcessProvider,
    request: &OrderRequest,
) -> Result<ProviderOrder, ProviderError> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(p.create_order(request));
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => Err(ProviderError::Timeout),
    }
}

async fn gate_with<P: PaymentProvider>(
    provider: P,
) -> Result<Option<(gate::db::FreshDatabase, Gate<P>)>, Box<dyn std::error::Error + Send + Sync>> {
    let Some(db) = fresh().await? else {
        return Ok(None);
    };
    let gate = Gate::new(
        db.pool().clone(),
        provider,
        SECRET,
        Arc::new(ManualClock::new(gate::service::standard::now())),
    )?
    .with_provider_timeout(Duration::from_millis(300));
    gate.seed(&gate::service::standard::seed()).await?;
    Ok(Some((db, gate)))
}

/// Proposes and checks out CLOUD-STARTER x1; returns (request, authority).
async fn checked_out<P: PaymentProvider>(
    gate: &Gate<P>,
) -> Result<(String, String), Box<dyn std::error::Error + Send + Sync>> {
    let request = request_id(
        &gate
            .propose("acme", "buyer-agent", &body("CLOUD-STARTER", 1), None)
            .await?,
    );
    let authority = id(&gate.checkout("acme", &request, "finance-lead").await?);
    Ok((request, authority))
}

/// Pays with a provider whose answer has one field changed, and checks the
/// answer is refused and nothing is recorded.
async fn a_changed_answer_is_refused(tweak: fn(&mut ProviderOrder)) -> TestResult {
    let provider = Answering {
        inner: InProcessProvider::new(),
        tweak,
        delay: None,
    };
    let Some((db, gate)) = gate_with(provider).await? else {
        return Ok(());
    };
    let (request, authority) = checked_out(&gate).await?;
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderRejected));
    assert_eq!(paid.id, None, "the mismatching order is never handed out");
    assert_eq!(gate.provider_order_count("acme").await?, 0);
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("FAILED")
    );
    assert_eq!(gate.spent_today_paise("acme").await?, 0);
    assert!(gate.books(Some("acme")).await?.balanced(0));
    drop(gate);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn matches_request_refuses_an_order_for_another_receipt() -> TestResult {
    a_changed_answer_is_refused(|o| o.receipt = "auth_someone_else".into()).await
}

#[tokio::test]
async fn matches_request_refuses_an_order_for_another_merchant() -> TestResult {
    a_changed_answer_is_refused(|o| o.merchant = "attacker-llc".into()).await
}

#[tokio::test]
async fn matches_request_refuses_an_order_for_another_amount() -> TestResult {
    a_changed_answer_is_refused(|o| o.amount_paise += 1).await
}

#[tokio::test]
async fn matches_request_refuses_an_order_in_another_currency() -> TestResult {
    a_changed_answer_is_refused(|o| o.currency = "USD".into()).await
}

#[tokio::test]
async fn the_order_asked_for_is_recorded_and_paid() -> TestResult {
    let provider = Answering {
        inner: InProcessProvider::new(),
        tweak: |_| {},
        delay: None,
    };
    let Some((db, gate)) = gate_with(provider).await? else {
        return Ok(());
    };
    let (request, authority) = checked_out(&gate).await?;
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert!(paid.is_ok(), "{paid:?}");
    assert_eq!(gate.provider_order_count("acme").await?, 1);
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    drop(gate);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn a_provider_rejection_fails_the_request_and_releases_its_budgets() -> TestResult {
    on_world(async |w| {
        w.gate.provider().set_mode(Mode::Reject, Some(1));
        let (request, authority) = checked_out(&w.gate).await?;
        let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(paid.decision, Decision::Deny(Reason::ProviderRejected));
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("FAILED")
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!((inv.spent_today_paise, inv.provider_orders), (0, 0));
        assert_eq!(inv.delegation_spent_paise.get("d-buyer"), Some(&0));
        assert!(inv.ledger_intact);
        let again = w.gate.pay("acme", &authority, "finance-lead").await?;
        assert_eq!(again.decision, Decision::Deny(Reason::AuthorityAlreadyUsed));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn timeout_and_unavailable_are_refusals_that_keep_the_request_pending() -> TestResult {
    on_world(async |w| {
        for mode in [Mode::Timeout, Mode::Unavailable, Mode::Late] {
            w.gate.provider().set_mode(mode, Some(1));
            let (request, authority) = checked_out(&w.gate).await?;
            let paid = w.gate.pay("acme", &authority, "finance-lead").await?;
            assert_eq!(
                paid.decision,
                Decision::Deny(Reason::ProviderUnavailable),
                "{mode:?}"
            );
            assert_eq!(
                w.gate.request_state("acme", &request).await?.as_deref(),
                Some("PROVIDER_PENDING"),
                "{mode:?}"
            );
            let again = w.gate.pay("acme", &authority, "finance-lead").await?;
            assert_eq!(again.decision, Decision::Deny(Reason::AuthorityAlreadyUsed));
        }
        let inv = w.gate.invariants("acme").await?;
        assert_eq!(
            (inv.spent_today_paise, inv.provider_orders),
            (180000, 0),
            "three reservations held, no order recorded"
        );
        assert_eq!(
            w.gate.provider().orders().len(),
            1,
            "only `late` made an order at the provider"
        );
        let kinds: Vec<String> =
            sqlx::query_scalar("SELECT kind FROM ledger_entries ORDER BY seq DESC LIMIT 2")
                .fetch_all(w.pool())
                .await?;
        assert_eq!(kinds, vec!["authority.refused", "provider.error"]);
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_provider_slower_than_the_gate_timeout_is_provider_unavailable() -> TestResult {
    let provider = Answering {
        inner: InProcessProvider::new(),
        tweak: |_| {},
        delay: Some(Duration::from_secs(30)),
    };
    let Some((db, gate)) = gate_with(provider).await? else {
        return Ok(());
    };
    let (request, authority) = checked_out(&gate).await?;
    let paid = gate.pay("acme", &authority, "finance-lead").await?;
    assert_eq!(paid.decision, Decision::Deny(Reason::ProviderUnavailable));
    assert_eq!(
        gate.request_state("acme", &request).await?.as_deref(),
        Some("PROVIDER_PENDING")
    );
    assert_eq!(gate.spent_today_paise("acme").await?, 60000);
    // The order the slow provider made is found again by reconcile.
    let r = gate.reconcile(Some("acme")).await?;
    assert_eq!((r.examined, r.orders_recorded), (1, 1));
    assert_eq!(gate.provider_order_count("acme").await?, 1);
    drop(gate);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn health_names_the_provider_and_never_a_key() -> TestResult {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgresql://postgres@%2Ftmp%2Fspendgate-no-such-server:5432/postgres")?;
    let gate = Gate::new(
        pool,
        InProcessProvider::new(),
        SECRET,
        Arc::new(ManualClock::new(gate::service::standard::now())),
    )?;
    let health = gate.provider_health();
    assert_eq!(
        health,
        ProviderHealth {
            mode: "in-process",
            has_keys: false,
            keys_refused: false
        }
    );
    let shown = format!("{gate:?}");
    assert!(
        !shown.contains("whsec_test_spendgate") && shown.contains("redacted"),
        "{shown}"
    );
    Ok(())
}
