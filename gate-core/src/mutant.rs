//! The runtime switch of the mutation runner's schemata mode.
//!
//! Guarantees: `mutant_active` is false unless the environment variable
//! `SPENDGATE_MUTANT` names exactly the given guard id, alone or as one item
//! of a comma-separated list (guard ids hold no comma). Ordinary builds and
//! runs never set it; only the mutation runner's instrumented scratch copy
//! calls this function.

/// The environment variable naming the guards to switch off.
const MUTANT_ENV: &str = "SPENDGATE_MUTANT";

/// True when the mutation runner has switched off the guard `id`. Ordinary
/// builds never call it; the instrumented copy of this crate and of the gate
/// (which re-exports it as its own `crate::mutant_active`) do.
pub fn mutant_active(id: &str) -> bool {
    std::env::var(MUTANT_ENV).is_ok_and(|v| names(&v, id))
}

/// Whether the variable's value `value` names the guard `id`.
fn names(value: &str, id: &str) -> bool {
    value.split(',').any(|v| v == id)
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn one_id_or_a_list_of_ids_switches_exactly_those_guards() {
        assert!(names("policy-cap", "policy-cap"));
        assert!(names("policy-cap,db-once", "db-once"));
        assert!(!names("policy-cap,db-once", "policy"));
        assert!(!names("policy-cap-2", "policy-cap"));
        assert!(!names("", "policy-cap"));
    }
}
