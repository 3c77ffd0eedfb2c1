//! A fully qualified test name: which package, which test target, which test.
//!
//! Guarantees: a [`TestRef`] always names one cargo package, one test target
//! of it (`lib`, `test:NAME` or `bin:NAME`) and one libtest name, and prints
//! back exactly as it parses: `gate/lib::policy::tests::cap_is_inclusive`,
//! `gate/test:db_guards::uq_live_approval_refuses_second`. The registry may
//! also spell it as a map `{package, target, name}`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The cargo test target a test lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TestTarget {
    /// The library's unit tests: `cargo test -p PKG --lib`.
    Lib,
    /// An integration test file `tests/NAME.rs`: `cargo test -p PKG --test NAME`.
    Test(String),
    /// A binary's unit tests: `cargo test -p PKG --bin NAME`.
    Bin(String),
}

impl TestTarget {
    /// The cargo arguments that select this target.
    pub fn cargo_args(&self) -> Vec<String> {
        match self {
            TestTarget::Lib => vec!["--lib".into()],
            TestTarget::Test(name) => vec!["--test".into(), name.clone()],
            TestTarget::Bin(name) => vec!["--bin".into(), name.clone()],
        }
    }
}

impl fmt::Display for TestTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestTarget::Lib => f.write_str("lib"),
            TestTarget::Test(name) => write!(f, "test:{name}"),
            TestTarget::Bin(name) => write!(f, "bin:{name}"),
        }
    }
}

impl FromStr for TestTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        match s.split_once(':') {
            None if s == "lib" => Ok(TestTarget::Lib),
            Some(("test", name)) if valid(name) => Ok(TestTarget::Test(name.to_string())),
            Some(("bin", name)) if valid(name) => Ok(TestTarget::Bin(name.to_string())),
            _ => Err(format!(
                "test target `{s}` is not `lib`, `test:NAME` or `bin:NAME`"
            )),
        }
    }
}

/// One named test.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TestRef {
    /// The cargo package (`-p`).
    pub package: String,
    /// The test target within the package.
    pub target: TestTarget,
    /// The libtest name, as `--list` prints it (`policy::tests::x`).
    pub name: String,
}

impl TestRef {
    /// The command a person can paste to run this test alone.
    pub fn cargo_command(&self) -> String {
        format!(
            "cargo test -p {} {} -- --exact {}",
            self.package,
            self.target.cargo_args().join(" "),
            self.name
        )
    }
}

impl fmt::Display for TestRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}::{}", self.package, self.target, self.name)
    }
}

impl FromStr for TestRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let form = "expected `PACKAGE/TARGET::TEST`, e.g. `gate/lib::policy::tests::cap_is_inclusive` or `gate/test:db_guards::name`";
        let (package, rest) = s
            .split_once('/')
            .ok_or_else(|| format!("test `{s}`: {form}"))?;
        let (target, name) = rest
            .split_once("::")
            .ok_or_else(|| format!("test `{s}`: {form}"))?;
        TestRef::new(package, target, name).map_err(|e| format!("test `{s}`: {e}"))
    }
}

impl TestRef {
    /// Builds and checks a reference from its three parts.
    pub fn new(package: &str, target: &str, name: &str) -> Result<Self, String> {
        if package.is_empty()
            || !package
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("`{package}` is not a cargo package name"));
        }
        let target: TestTarget = target.parse()?;
        let name_ok = !name.is_empty()
            && name
                .split("::")
                .all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if !name_ok {
            return Err(format!(
                "`{name}` is not a test path like `module::test_fn`"
            ));
        }
        Ok(TestRef {
            package: package.to_string(),
            target,
            name: name.to_string(),
        })
    }
}

impl Serialize for TestRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TestRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelled {
            Text(String),
            Parts {
                package: String,
                target: String,
                name: String,
            },
        }
        match Spelled::deserialize(deserializer)? {
            Spelled::Text(s) => s.parse().map_err(serde::de::Error::custom),
            Spelled::Parts {
                package,
                target,
                name,
            } => TestRef::new(&package, &target, &name).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_forms_round_trip() {
        for s in [
            "gate/lib::policy::tests::cap_is_inclusive",
            "gate/test:db_guards::uq_live_approval_refuses_second",
            "harness/bin:harness::cli::tests::parses",
        ] {
            let t: TestRef = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        let t: TestRef = "gate/test:db_guards::x".parse().unwrap();
        assert_eq!(t.target, TestTarget::Test("db_guards".into()));
        assert_eq!(t.name, "x");
        assert_eq!(
            t.cargo_command(),
            "cargo test -p gate --test db_guards -- --exact x"
        );
    }

    #[test]
    fn malformed_names_are_refused() {
        for s in [
            "policy::tests::x",
            "gate/policy::tests::x",
            "gate/lib",
            "gate/lib::",
            "gate/test:::x",
            "/lib::x",
            "gate/lib::a::::b",
        ] {
            assert!(s.parse::<TestRef>().is_err(), "{s} parsed");
        }
    }

    #[test]
    fn map_form_deserializes() {
        let t: TestRef =
            crate::yaml::from_str("{package: gate, target: \"test:db_guards\", name: a::b}")
                .unwrap();
        assert_eq!(t.to_string(), "gate/test:db_guards::a::b");
        let t: TestRef = crate::yaml::from_str("gate/lib::x").unwrap();
        assert_eq!(t.target, TestTarget::Lib);
    }
}
