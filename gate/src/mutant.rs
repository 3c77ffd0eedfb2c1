//! The runtime switch of the mutation runner's schemata mode.
//!
//! Guarantees: `mutant_active` is false unless the environment variable
//! `SPENDGATE_MUTANT` names exactly the given guard id. Ordinary builds and
//! runs never set it; only the mutation runner's instrumented scratch copy
//! calls this function.

/// The environment variable naming the one guard to switch off.
const MUTANT_ENV: &str = "SPENDGATE_MUTANT";

/// True when the mutation runner has switched off the guard `id`. Ordinary
/// builds never call it (hence `dead_code` allowed); the instrumented copy does.
#[allow(dead_code)]
pub(crate) fn mutant_active(id: &str) -> bool {
    std::env::var(MUTANT_ENV).is_ok_and(|v| v == id)
}
