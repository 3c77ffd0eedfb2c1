//! The schemata switch contract: how an instrumented crate asks whether one
//! of its guards is switched off.
//!
//! Guarantees (of the contract, which the crate under test implements):
//! schemata mode calls the registry's `switch` path, a
//! `fn(&str) -> bool`, with a guard id; it must return `true` exactly when the
//! registry's `switch_env` variable (default `SPENDGATE_MUTANT`) is set and
//! equal to that id, or is a comma-separated list of ids one of which is that
//! id (guard ids hold no comma), and `false` otherwise, including when the
//! variable is unset or not UTF-8. The runner sets the variable only on the test process
//! of that one mutant and removes it everywhere else (builds, baseline);
//! `harness mutate --corpus` names two ids at once to switch a pair off.
//! The function must be reachable from every file that has registered guards
//! under the path written in `switch` (for the gate: `crate::mutant_active`).
//!
//! The reference implementation, which the gate keeps out of its API as
//! `pub(crate) fn mutant_active(id: &str) -> bool` (re-exported at the crate
//! root for the instrumented copy's `crate::mutant_active`):
//!
//! ```
//! pub fn mutant_active(id: &str) -> bool {
//!     std::env::var("SPENDGATE_MUTANT").is_ok_and(|v| v.split(',').any(|v| v == id))
//! }
//! assert!(!mutant_active("policy-merchant-allowlist"));
//! ```
//!
//! It costs one environment lookup per guard evaluation and is only ever
//! *called* by instrumented scratch copies; the committed code never calls it.

/// The decision the switch must make, for a value of the variable.
pub fn selects(value: Option<&std::ffi::OsStr>, id: &str) -> bool {
    value
        .and_then(|v| v.to_str())
        .is_some_and(|v| v.split(',').any(|v| v == id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn only_the_exact_id_is_switched_off() {
        assert!(selects(Some(OsStr::new("cap")), "cap"));
        assert!(!selects(Some(OsStr::new("cap")), "cap-2"));
        assert!(!selects(Some(OsStr::new("")), "cap"));
        assert!(!selects(None, "cap"));
    }

    #[test]
    fn a_list_switches_off_each_id_it_names() {
        assert!(selects(Some(OsStr::new("cap,once")), "cap"));
        assert!(selects(Some(OsStr::new("cap,once")), "once"));
        assert!(!selects(Some(OsStr::new("cap,once")), "cap,once"));
        assert!(!selects(Some(OsStr::new("cap,once")), "on"));
    }
}
