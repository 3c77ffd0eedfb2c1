//! Identifier rules of the corpus.
//!
//! Guarantees: `is_kebab` accepts exactly lowercase ASCII letters and digits
//! in non-empty runs joined by single hyphens; `is_dotted_kebab` accepts two
//! or more kebab segments joined by dots (taxonomy class ids).

/// `abc-12-x`: lowercase ASCII alphanumerics in runs joined by single hyphens.
pub fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// `layer.name`: at least two kebab segments joined by dots.
pub fn is_dotted_kebab(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 2 && parts.iter().all(|p| is_kebab(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_accepts_and_refuses() {
        for ok in ["a", "tool-boundary-amount-field", "d-buyer", "k1", "x-2-y"] {
            assert!(is_kebab(ok), "{ok}");
        }
        for bad in ["", "A", "a_b", "a--b", "-a", "a-", "a b", "ä", "a.b"] {
            assert!(!is_kebab(bad), "{bad}");
        }
    }

    #[test]
    fn dotted_kebab() {
        assert!(is_dotted_kebab("tool-boundary.extra-field"));
        assert!(!is_dotted_kebab("tool-boundary"));
        assert!(!is_dotted_kebab("tool-boundary.Extra"));
        assert!(!is_dotted_kebab("a..b"));
    }
}
