//! How a provider's answer may differ from the order asked for: the corpus's
//! `provider` step in `mismatch` mode and the in-process provider that
//! answers it share this one spelling.
//!
//! Guarantees: the field names are the corpus's (lowercase); no other is
//! accepted.

use serde::{Deserialize, Serialize};

/// The field in which a `mismatch` answer differs from the order asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MismatchField {
    Amount,
    Currency,
    Merchant,
    Receipt,
    /// The id of another receipt's order.
    Id,
}
