//! The in-process provider (`gate::provider::InProcessProvider`), the
//! provider every engine but the live one runs against, as the gate sees
//! it: its clock stamps what it makes, it lists the payments it holds, each
//! mismatched answer has an id of its own.

use gate::provider::{InProcessProvider, MismatchField, Mode, PaymentProvider, PaymentStatus};

use crate::support::*;

#[tokio::test]
async fn what_it_makes_carries_its_clock_and_its_payments_are_listed() -> TestResult {
    let provider = InProcessProvider::new();
    provider.set_now(1_789_000_000);
    let order = provider.create_order(&order_request("rcpt_clock")).await?;
    assert_eq!(order.created_at, 1_789_000_000);
    provider.set_now(1_789_000_060);
    let paid = provider.capture_payment(&order.id)?;
    assert_eq!(paid.created_at, 1_789_000_060);

    let payments = provider.payments();
    assert_eq!(payments.len(), 1, "{payments:?}");
    assert_eq!(payments[0].order_id, order.id);
    assert_eq!(payments[0].status, PaymentStatus::Captured);
    assert_eq!(payments[0].amount_paise, 60_000);
    Ok(())
}

#[tokio::test]
async fn each_mismatched_answer_has_an_id_of_its_own() -> TestResult {
    let provider = InProcessProvider::new();
    provider.set_mode(Mode::Mismatch(MismatchField::Amount), None);
    let first = provider.create_order(&order_request("rcpt_a")).await?;
    let second = provider.create_order(&order_request("rcpt_b")).await?;
    assert_eq!(
        first.amount_paise, 60_001,
        "the amount is the field that differs"
    );
    assert_ne!(first.id, second.id);
    assert!(
        provider.orders().is_empty(),
        "a mismatched answer creates nothing"
    );
    Ok(())
}
