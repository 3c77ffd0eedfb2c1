//! The simulated provider's book (`gate::provider::Book`, behind the
//! in-process and demo providers): an order holds one authorised payment at
//! a time while other orders hold their own, and a capture takes exactly the
//! authorised payment it names, never another order's.

use gate::provider::{Book, PaymentStatus, ProviderError};

use crate::support::{TestResult, order_request};

/// Two orders, each with its payment authorised (the first first).
fn two_held() -> Result<(Book, [gate::provider::Payment; 2]), ProviderError> {
    let mut book = Book::new();
    let a = book.create(&order_request("auth_a"), 1).id;
    let b = book.create(&order_request("auth_b"), 1).id;
    let held_a = book.authorize(&a, 2)?;
    let held_b = book.authorize(&b, 3)?;
    Ok((book, [held_a, held_b]))
}

#[test]
fn an_order_holds_one_authorisation_at_a_time_and_other_orders_their_own() -> TestResult {
    let (mut book, [held_a, held_b]) = two_held()?;
    for (held, order) in [(&held_a, "auth_a"), (&held_b, "auth_b")] {
        assert_eq!(held.status, PaymentStatus::Authorized);
        assert_eq!(
            book.by_receipt(order).first().map(|s| s.order.id.clone()),
            Some(held.order_id.clone())
        );
    }
    assert_eq!(
        book.authorize(&held_a.order_id, 4),
        Err(ProviderError::AlreadyPaid(held_a.order_id.clone()))
    );
    // A failed attempt leaves a third order free to be authorised.
    let c = book.create(&order_request("auth_c"), 5).id;
    book.fail_attempt(&c, 6)?;
    assert_eq!(book.authorize(&c, 7)?.order_id, c);
    Ok(())
}

#[test]
fn a_capture_takes_exactly_the_authorised_payment_it_names() -> TestResult {
    let (mut book, [held_a, held_b]) = two_held()?;
    let captured = book.capture_authorized(&held_b.id, 60_000, "INR")?;
    assert_eq!(
        (
            captured.id.as_str(),
            captured.order_id.as_str(),
            captured.status
        ),
        (
            held_b.id.as_str(),
            held_b.order_id.as_str(),
            PaymentStatus::Captured
        )
    );
    let status_of = |book: &Book, id: &str| {
        book.payments()
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.status)
    };
    assert_eq!(
        status_of(&book, &held_a.id),
        Some(PaymentStatus::Authorized)
    );
    assert_eq!(book.captured_paise(), 60_000);
    // Nothing is authorised under that id any more: refused, and the other
    // order's authorisation is not taken in its place.
    assert_eq!(
        book.capture_authorized(&held_b.id, 60_000, "INR"),
        Err(ProviderError::Rejected { status: 400 })
    );
    assert_eq!(
        status_of(&book, &held_a.id),
        Some(PaymentStatus::Authorized)
    );
    Ok(())
}

#[test]
fn a_capture_for_other_terms_is_refused_and_leaves_the_payment_authorised() -> TestResult {
    let (mut book, [held_a, _]) = two_held()?;
    for (amount, currency) in [(59_999, "INR"), (60_000, "USD"), (60_001, "USD")] {
        assert_eq!(
            book.capture_authorized(&held_a.id, amount, currency),
            Err(ProviderError::Rejected { status: 400 }),
            "{amount} {currency}"
        );
    }
    assert_eq!(book.captured_paise(), 0);
    assert_eq!(
        book.capture_authorized(&held_a.id, 60_000, "INR")?.id,
        held_a.id
    );
    Ok(())
}

#[test]
fn a_refund_returns_exactly_the_captured_payment_it_names() -> TestResult {
    let mut book = Book::new();
    let a = book.create(&order_request("auth_a"), 1).id;
    let b = book.create(&order_request("auth_b"), 1).id;
    let c = book.create(&order_request("auth_c"), 1).id;
    let paid_a = book.capture(&a, 2)?;
    let paid_b = book.capture(&b, 3)?;
    let held_c = book.authorize(&c, 4)?;
    let refunded = book.refund(&paid_b.id)?;
    assert_eq!(
        (refunded.id.as_str(), refunded.status),
        (paid_b.id.as_str(), PaymentStatus::Refunded)
    );
    let statuses: Vec<PaymentStatus> = book.payments().iter().map(|p| p.status).collect();
    assert_eq!(
        statuses,
        vec![
            PaymentStatus::Captured,
            PaymentStatus::Refunded,
            PaymentStatus::Authorized
        ]
    );
    assert_eq!(book.payments()[0].id, paid_a.id);
    // Neither a refunded nor a merely authorised payment is refunded.
    for id in [&paid_b.id, &held_c.id] {
        assert_eq!(
            book.refund(id),
            Err(ProviderError::Rejected { status: 400 }),
            "{id}"
        );
    }
    assert_eq!(book.payments()[0].status, PaymentStatus::Captured);
    Ok(())
}
