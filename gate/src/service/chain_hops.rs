//! Delegation hops as the database's chain reads return them (one JSON
//! object per hop, tagged with the leaf it is above), and their grouping
//! into one [`DelegationChain`] per leaf.
//!
//! Guarantees: a hop's instants are read as microseconds since 1970, so any
//! instant Postgres stores that chrono holds comes back unchanged; hops are
//! grouped in the order they arrive (leaf by leaf, root first), never
//! re-sorted.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::rows::DelegationRow;
use crate::delegation::{DelegationChain, DelegationHop};

/// One hop as the function returns it: the hop and the leaf it is above.
/// Its instants come as microseconds since 1970 (any year Postgres stores
/// that chrono holds, where JSON's timestamp text stops at 9999).
#[derive(Deserialize)]
pub(crate) struct ChainHop {
    pub(crate) leaf_id: String,
    #[serde(flatten)]
    pub(crate) row: DelegationRow,
    #[serde(default, with = "chrono::serde::ts_microseconds_option")]
    pub(crate) expires_at_us: Option<DateTime<Utc>>,
    #[serde(default, with = "chrono::serde::ts_microseconds_option")]
    pub(crate) revoked_at_us: Option<DateTime<Utc>>,
}

impl ChainHop {
    /// The hop as the engine sees it.
    pub(crate) fn to_hop(&self) -> DelegationHop {
        DelegationRow {
            expires_at: self.expires_at_us,
            revoked_at: self.revoked_at_us,
            ..self.row.clone()
        }
        .to_hop()
    }
}

/// Hops in the function's order (leaf by leaf, root first) grouped into one
/// chain per leaf, the leaves in the same order.
pub(crate) fn chains_of(hops: Vec<ChainHop>) -> Vec<(String, DelegationChain)> {
    let mut chains: Vec<(String, Vec<DelegationHop>)> = Vec::new();
    for hop in hops {
        match chains.last_mut() {
            Some((leaf, hops)) if *leaf == hop.leaf_id => hops.push(hop.to_hop()),
            _ => {
                let first = hop.to_hop();
                chains.push((hop.leaf_id, vec![first]));
            }
        }
    }
    chains
        .into_iter()
        .map(|(leaf, hops)| (leaf, DelegationChain::new(hops)))
        .collect()
}
