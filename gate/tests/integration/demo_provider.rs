//! The demo provider over a real database: what it creates it answers
//! again, by id and by receipt, with no payments; what it never created it
//! does not answer; a second create for one receipt is the first order; and
//! its order ids are Razorpay's shape, drawn from the whole alphabet.

use std::collections::BTreeSet;

use crate::support::*;
use gate::provider::{DemoProvider, OrderStatus, PaymentProvider};

#[tokio::test]
async fn the_demo_provider_answers_what_it_created_by_id_and_by_receipt() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let demo = DemoProvider::new(db.pool().clone());
    let order = demo.create_order(&order_request("auth_demo_1")).await?;
    assert_eq!(
        (
            order.receipt.as_str(),
            order.merchant.as_str(),
            order.amount_paise,
            order.currency.as_str(),
            order.status,
            order.amount_paid_paise
        ),
        (
            "auth_demo_1",
            "cloudco",
            60_000,
            "INR",
            OrderStatus::Created,
            0
        )
    );
    let by_id = demo.fetch_order(&order.id).await?.ok_or("no order by id")?;
    assert_eq!(by_id.order, order);
    assert!(by_id.payments.is_empty(), "{by_id:?}");
    let by_receipt = demo
        .find_by_receipt("auth_demo_1")
        .await?
        .ok_or("no order by receipt")?;
    assert_eq!(by_receipt.order, order);
    assert!(by_receipt.payments.is_empty(), "{by_receipt:?}");
    // A second create for the receipt is the first order again.
    assert_eq!(
        demo.create_order(&order_request("auth_demo_1")).await?,
        order
    );
    // What it never created, it does not answer.
    assert_eq!(demo.fetch_order("order_NeverCreated01").await?, None);
    assert_eq!(demo.find_by_receipt("auth_demo_never").await?, None);
    db.drop().await?;
    Ok(())
}

#[tokio::test]
async fn demo_order_ids_are_razorpays_shape_over_the_whole_alphabet() -> TestResult {
    let Some(db) = fresh().await? else {
        return Ok(());
    };
    let demo = DemoProvider::new(db.pool().clone());
    let mut ids = BTreeSet::new();
    for n in 0..24 {
        ids.insert(
            demo.create_order(&order_request(&format!("auth_ids_{n}")))
                .await?
                .id,
        );
    }
    assert_eq!(ids.len(), 24, "ids repeat: {ids:?}");
    let mut seen = BTreeSet::new();
    for id in &ids {
        let tail = id.strip_prefix("order_").ok_or("no order_ prefix")?;
        assert_eq!(tail.len(), 14, "{id}");
        assert!(tail.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
        seen.extend(tail.chars());
    }
    // 336 characters drawn uniformly from 62: fewer than 40 distinct ones
    // would mean most of the alphabet is never drawn (a chance below 1e-12).
    assert!(
        seen.len() >= 40,
        "only {} characters drawn: {seen:?}",
        seen.len()
    );
    db.drop().await?;
    Ok(())
}
