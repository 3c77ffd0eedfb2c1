//! The schema-guard contract between the runner and the test-database
//! facility of the crate under test (for spendgate: `gate/src/db/drop_guards.rs`).
//!
//! Guarantees: the codec is the `drop-guards` crate, the one both sides use
//! (see its docs for the contract: `SPENDGATE_DROP_GUARDS`,
//! `SPENDGATE_DROP_GUARDS_LOG`, the DDL and the log lines); this module only
//! adds the view of a registry's [`SchemaLocator`] as a [`DropSpec`]. A
//! locator's table and object are plain SQL identifiers (the registry
//! refuses others), so the conversion cannot fail for a loaded registry.

pub use drop_guards::{
    ContractError, DROP_GUARDS_ENV, DROP_GUARDS_LOG_ENV, DropSpec, LogLine, ObjectKind, decode,
    encode, is_sql_name, read_log,
};

use crate::registry::SchemaLocator;

/// The object a schema locator names, or why it is not a plain identifier.
pub fn spec_of(l: &SchemaLocator) -> Result<DropSpec, ContractError> {
    DropSpec::new(l.object_kind, &l.table, &l.object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_locator_is_its_drop_spec() {
        let loc = SchemaLocator {
            object: "ck_amount_positive".into(),
            object_kind: ObjectKind::Constraint,
            table: "ledger".into(),
        };
        let spec = spec_of(&loc).unwrap();
        assert_eq!(spec.to_string(), "constraint:ledger:ck_amount_positive");
        let bad = SchemaLocator {
            table: "a;b".into(),
            ..loc
        };
        assert!(spec_of(&bad).is_err());
    }
}
