//! Refusals of the pure core that hold for callers past the tool boundary:
//! derivation and body reading defend themselves rather than trusting that
//! `parse_proposal` ran first. (The mutation runner deletes each guard and
//! requires these tests to fail; see `mutations/registry.yaml`.)

use std::io::Read;

use gate::catalog::{Catalog, CatalogItem, derive};
use gate::proposal::read_body;
use gate::{PurchaseProposal, Reason};

fn catalog() -> Catalog {
    Catalog::new([CatalogItem {
        sku: "SNACK-BOX".into(),
        merchant: "snackshop".into(),
        price_paise: 25000,
        currency: "INR".into(),
        category: "food".into(),
        max_quantity: 10,
        available: true,
        description: String::new(),
    }])
}

#[test]
fn derivation_refuses_a_zero_quantity_itself() {
    let zero = PurchaseProposal {
        sku: "SNACK-BOX".into(),
        quantity: 0,
        purpose: "team snacks".into(),
    };
    // A stored request whose quantity does not fit u32 is re-derived as 0
    // (approval and checkout do so); it must refuse, never price a free purchase.
    assert_eq!(derive(&zero, &catalog()), Err(Reason::QuantityInvalid));
    let one = PurchaseProposal {
        quantity: 1,
        ..zero
    };
    assert_eq!(derive(&one, &catalog()).map(|p| p.amount_paise), Ok(25000));
}

/// Yields `first`, then fails.
struct FailsAfter {
    first: Vec<u8>,
}

impl Read for FailsAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.first.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "the agent hung up",
            ));
        }
        let n = buf.len().min(self.first.len());
        buf[..n].copy_from_slice(&self.first[..n]);
        self.first.drain(..n);
        Ok(n)
    }
}

#[test]
fn a_body_whose_reading_fails_part_way_is_refused_not_truncated() {
    // The bytes read before the failure are a well-formed proposal on their
    // own: a reader that ignored the error would hand them on as the body.
    let partial = br#"{"sku":"SNACK-BOX","quantity":1,"purpose":"team snacks"}"#.to_vec();
    assert_eq!(
        read_body(FailsAfter { first: partial }),
        Err(Reason::ProposalMalformed)
    );
}
