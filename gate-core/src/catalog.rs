//! Derivation: from what the agent asked for to what the purchase is.
//!
//! Guarantees: merchant, unit price, currency, category and the amount come
//! from the server's catalog and nowhere else. The amount is `price ×
//! quantity` in checked arithmetic: overflow is a refusal, never a wrap. An
//! unknown sku, an unavailable one, a quantity above the catalog's maximum or
//! a catalog row that is itself invalid (price not positive, currency not
//! three upper-case letters) is refused. The canonical purchase has one byte
//! form and one SHA-256, which the checkout authority binds to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::proposal::PurchaseProposal;
use crate::reason::Reason;

/// One catalog row, as the merchant publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogItem {
    pub sku: String,
    pub merchant: String,
    pub price_paise: i64,
    pub currency: String,
    pub category: String,
    pub max_quantity: u32,
    #[serde(default = "available_by_default")]
    pub available: bool,
    /// Supplier-written text. Data, never instructions: nothing reads it to decide.
    #[serde(default)]
    pub description: String,
}

fn available_by_default() -> bool {
    true
}

/// A tenant's catalog, keyed by sku.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    items: BTreeMap<String, CatalogItem>,
}

impl Catalog {
    /// Builds a catalog; a later row with the same sku replaces an earlier one.
    pub fn new(items: impl IntoIterator<Item = CatalogItem>) -> Self {
        Catalog {
            items: items.into_iter().map(|i| (i.sku.clone(), i)).collect(),
        }
    }

    pub fn get(&self, sku: &str) -> Option<&CatalogItem> {
        self.items.get(sku)
    }

    pub fn items(&self) -> impl Iterator<Item = &CatalogItem> {
        self.items.values()
    }

    /// Sets a sku's price (the merchant changed the catalog). Unknown skus are ignored.
    pub fn set_price(&mut self, sku: &str, price_paise: i64) -> bool {
        match self.items.get_mut(sku) {
            Some(item) => {
                item.price_paise = price_paise;
                true
            }
            None => false,
        }
    }
}

/// A purchase as the server derived it. The agent supplied only `sku`,
/// `quantity` and `purpose`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purchase {
    pub sku: String,
    pub merchant: String,
    pub category: String,
    pub currency: String,
    pub unit_price_paise: i64,
    pub quantity: u32,
    pub amount_paise: i64,
    pub purpose: String,
}

impl Purchase {
    /// The canonical bytes: compact JSON with the fields in declaration
    /// order, integers as integers. The same purchase always gives the same bytes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Lower-case hex SHA-256 of [`Purchase::canonical_bytes`].
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_bytes()))
    }
}

/// True when `c` is three upper-case ASCII letters.
pub fn is_currency_code(c: &str) -> bool {
    c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase())
}

/// Derives the purchase from the proposal and the catalog.
pub fn derive(proposal: &PurchaseProposal, catalog: &Catalog) -> Result<Purchase, Reason> {
    let Some(item) = catalog.get(&proposal.sku) else {
        return Err(Reason::SkuUnknown);
    };
    if !item.available {
        return Err(Reason::SkuUnavailable);
    }
    if item.price_paise <= 0 || !is_currency_code(&item.currency) {
        return Err(Reason::SkuUnavailable);
    }
    if proposal.quantity == 0 {
        return Err(Reason::QuantityInvalid);
    }
    if proposal.quantity > item.max_quantity {
        return Err(Reason::QuantityExceedsMax);
    }
    let quantity = i64::from(proposal.quantity);
    if item.price_paise.checked_mul(quantity).is_none() {
        return Err(Reason::AmountOverflow);
    }
    // Cannot wrap: the product was checked just above.
    let amount_paise = item.price_paise.wrapping_mul(quantity);
    Ok(Purchase {
        sku: item.sku.clone(),
        merchant: item.merchant.clone(),
        category: item.category.clone(),
        currency: item.currency.clone(),
        unit_price_paise: item.price_paise,
        quantity: proposal.quantity,
        amount_paise,
        purpose: proposal.purpose.clone(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A catalog row with the given terms, available, with no description.
    fn item(
        sku: &str,
        merchant: &str,
        price: i64,
        currency: &str,
        category: &str,
        max: u32,
    ) -> CatalogItem {
        CatalogItem {
            sku: sku.into(),
            merchant: merchant.into(),
            price_paise: price,
            currency: currency.into(),
            category: category.into(),
            max_quantity: max,
            available: true,
            description: String::new(),
        }
    }

    /// The spec's `standard` catalog.
    pub(crate) fn standard() -> Catalog {
        Catalog::new(crate::standard_world::catalog())
    }

    fn proposal(sku: &str, quantity: u32) -> PurchaseProposal {
        PurchaseProposal {
            sku: sku.into(),
            quantity,
            purpose: "p".into(),
        }
    }

    #[test]
    fn derivation_takes_everything_from_the_catalog() {
        let p = derive(&proposal("SNACK-BOX", 4), &standard()).unwrap();
        assert_eq!(p.merchant, "snackshop");
        assert_eq!(p.currency, "INR");
        assert_eq!(p.category, "food");
        assert_eq!(p.unit_price_paise, 25000);
        assert_eq!(p.amount_paise, 100000);
    }

    #[test]
    fn unknown_and_unavailable_skus_are_refused() {
        let c = standard();
        assert_eq!(derive(&proposal("NOPE", 1), &c), Err(Reason::SkuUnknown));
        assert_eq!(
            derive(&proposal("cloud-starter", 1), &c),
            Err(Reason::SkuUnknown)
        );
        assert_eq!(
            derive(&proposal("LEGACY-PLAN", 1), &c),
            Err(Reason::SkuUnavailable)
        );
    }

    #[test]
    fn quantity_above_the_catalog_maximum_is_refused_and_the_maximum_is_not() {
        let c = standard();
        assert_eq!(
            derive(&proposal("RUNNER-PRO", 50), &c),
            Err(Reason::QuantityExceedsMax)
        );
        assert_eq!(
            derive(&proposal("RUNNER-PRO", 3), &c),
            Err(Reason::QuantityExceedsMax)
        );
        assert_eq!(
            derive(&proposal("RUNNER-PRO", 2), &c).map(|p| p.amount_paise),
            Ok(100000)
        );
    }

    #[test]
    fn overflow_is_a_refusal_not_a_wrap() {
        let c = Catalog::new([item("BIG", "cloudco", i64::MAX / 2 + 1, "INR", "x", 10)]);
        assert_eq!(derive(&proposal("BIG", 2), &c), Err(Reason::AmountOverflow));
        assert!(derive(&proposal("BIG", 1), &c).is_ok());
    }

    #[test]
    fn an_invalid_catalog_row_refuses() {
        let c = Catalog::new([
            item("FREE", "cloudco", 0, "INR", "x", 1),
            item("NEG", "cloudco", -5, "INR", "x", 1),
            item("CUR", "cloudco", 5, "inr", "x", 1),
        ]);
        for sku in ["FREE", "NEG", "CUR"] {
            assert_eq!(
                derive(&proposal(sku, 1), &c),
                Err(Reason::SkuUnavailable),
                "{sku}"
            );
        }
    }

    #[test]
    fn the_digest_is_stable_and_moves_with_the_price() {
        let mut c = standard();
        let a = derive(&proposal("CLOUD-STARTER", 1), &c).unwrap();
        let b = derive(&proposal("CLOUD-STARTER", 1), &c).unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 64);
        c.set_price("CLOUD-STARTER", 60001);
        let moved = derive(&proposal("CLOUD-STARTER", 1), &c).unwrap();
        assert_ne!(a.digest(), moved.digest());
    }

    // The outside audit: a row that does not say `available`.

    #[test]
    fn a_catalog_row_without_available_is_available() {
        let row: CatalogItem = serde_json::from_value(serde_json::json!({
            "sku": "PLAIN",
            "merchant": "cloudco",
            "price_paise": 100,
            "currency": "INR",
            "category": "software",
            "max_quantity": 5,
        }))
        .unwrap();
        assert!(row.available);
        let c = Catalog::new([row]);
        assert_eq!(
            derive(&proposal("PLAIN", 2), &c).map(|p| p.amount_paise),
            Ok(200)
        );
    }
}
