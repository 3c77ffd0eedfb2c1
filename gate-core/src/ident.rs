//! Identifiers: the one grammar every id a caller sends must meet before it
//! reaches SQL.
//!
//! Guarantees: [`Ident::parse`] accepts exactly 1 to [`MAX_IDENT_CHARS`]
//! characters of ASCII letters, digits, `-`, `_`, `.` and `:`;
//! [`Ident::parse_key`] the same grammar up to [`MAX_KEY_CHARS`] for
//! idempotency keys. Anything else — a NUL, a space, an invisible or
//! non-ASCII character, an empty or overlong string — is refused here, so a
//! string Postgres cannot store (or an index cannot hold) never becomes a
//! database error. What a refused id means (an unknown sku, actor, tenant,
//! ...) is decided by the caller, with the spec's code for its kind.

use std::fmt;

/// The longest identifier: tenant, actor, sku, delegation, request,
/// authority and order ids.
pub const MAX_IDENT_CHARS: usize = 64;
/// The longest idempotency key.
pub const MAX_KEY_CHARS: usize = 255;

/// A string known to meet the identifier grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ident<'a>(&'a str);

impl<'a> Ident<'a> {
    /// `text` as an identifier, when it is one.
    pub fn parse(text: &'a str) -> Option<Self> {
        Self::within(text, MAX_IDENT_CHARS)
    }

    /// `text` as an idempotency key (the same grammar, up to 255 characters).
    pub fn parse_key(text: &'a str) -> Option<Self> {
        Self::within(text, MAX_KEY_CHARS)
    }

    fn within(text: &'a str, max: usize) -> Option<Self> {
        let fits = !text.is_empty() && text.len() <= max && text.bytes().all(is_ident_byte);
        fits.then_some(Ident(text))
    }

    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl fmt::Display for Ident<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// True when `text` meets the identifier grammar.
pub fn is_ident(text: &str) -> bool {
    Ident::parse(text).is_some()
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_admits_the_spec_alphabet_and_its_edges() {
        for ok in [
            "a",
            "CLOUD-STARTER",
            "d-buyer",
            "req_1.2:3",
            &"x".repeat(64),
        ] {
            assert!(is_ident(ok), "{ok:?}");
        }
        assert!(Ident::parse_key(&"k".repeat(255)).is_some());
    }

    #[test]
    fn hostile_strings_are_not_identifiers() {
        for bad in [
            "",
            "a\0b",
            "\0",
            "with space",
            "tab\t",
            "ünïcode",
            "zero\u{200B}width",
            "slash/",
            "quote'",
            "semi;",
            "percent%",
            &"x".repeat(65),
        ] {
            assert!(!is_ident(bad), "{bad:?}");
        }
        assert!(Ident::parse_key(&"k".repeat(256)).is_none());
        assert!(Ident::parse_key("k\0").is_none());
    }
}
