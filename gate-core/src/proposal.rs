//! The agent-facing boundary: raw request bytes to a [`PurchaseProposal`].
//!
//! Guarantees: the agent can name only `sku`, `quantity` and `purpose`. Any
//! other field, a duplicate key, malformed JSON, a wrong type, a body over
//! [`MAX_BODY_BYTES`], a quantity that is not a whole number in
//! `1..=MAX_QUANTITY` (however it is written), or a purpose that breaks
//! [`crate::text::check_purpose`] (empty, over [`MAX_PURPOSE_CHARS`]
//! characters, nothing visible, or a control, format, separator, private-use,
//! unassigned or default-ignorable code point) is refused with the spec's
//! reason code. Serde's own error text
//! never leaves this module: the only thing a caller learns is a [`Reason`].
//! A body is never read past `MAX_BODY_BYTES + 1` bytes.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::reason::Reason;
pub use crate::text::MAX_PURPOSE_CHARS;
use crate::text::check_purpose;

/// The largest request body the gate reads, in bytes.
pub const MAX_BODY_BYTES: usize = 4096;
/// The largest quantity the boundary accepts before the catalog is consulted.
pub const MAX_QUANTITY: u64 = 10_000;

/// The only thing an agent may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurchaseProposal {
    pub sku: String,
    pub quantity: u32,
    pub purpose: String,
}

const FIELDS: [&str; 3] = ["sku", "quantity", "purpose"];

/// Reads at most `MAX_BODY_BYTES + 1` bytes from `reader`: a longer body is
/// refused `PROPOSAL_TOO_LARGE` without being read whole.
pub fn read_body<R: Read>(reader: R) -> Result<Vec<u8>, Reason> {
    let mut buf = Vec::with_capacity(1024);
    let limit = (MAX_BODY_BYTES + 1) as u64;
    let read = reader.take(limit).read_to_end(&mut buf);
    if read.is_err() {
        return Err(Reason::ProposalMalformed);
    }
    if buf.len() > MAX_BODY_BYTES {
        return Err(Reason::ProposalTooLarge);
    }
    Ok(buf)
}

/// Parses raw request bytes into a proposal, or refuses with a reason.
///
/// The object is split into its fields as raw JSON text first, so that a
/// field's own problem is named by that field's code: a quantity written as a
/// 400-digit number or `1e400` is `QUANTITY_INVALID` (not a malformed body),
/// and a purpose holding a lone surrogate escape is `PURPOSE_INVALID`.
pub fn parse_proposal(raw: &[u8]) -> Result<PurchaseProposal, Reason> {
    if raw.len() > MAX_BODY_BYTES {
        return Err(Reason::ProposalTooLarge);
    }
    let text = std::str::from_utf8(raw).map_err(|_| Reason::ProposalMalformed)?;
    let fields: UniqueObject = serde_json::from_str(text).map_err(|_| Reason::ProposalMalformed)?;
    let mut fields = fields.0;
    if fields.keys().any(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Reason::ProposalUnknownField);
    }
    let (Some(sku), Some(quantity), Some(purpose)) = (
        fields.remove("sku"),
        fields.remove("quantity"),
        fields.remove("purpose"),
    ) else {
        return Err(Reason::ProposalMalformed);
    };
    let sku: String = serde_json::from_str(sku.get()).map_err(|_| Reason::ProposalMalformed)?;
    let quantity = parse_quantity(quantity.get())?;
    let purpose = parse_purpose(purpose.get())?;
    Ok(PurchaseProposal {
        sku,
        quantity,
        purpose,
    })
}

/// A whole number in `1..=MAX_QUANTITY`, however it is written; anything
/// else (a fraction, an exponent, a sign, a string, a number too large for
/// any machine type) is `QUANTITY_INVALID`.
fn parse_quantity(raw: &str) -> Result<u32, Reason> {
    let digits = raw.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reason::QuantityInvalid);
    }
    let q = digits.parse::<u64>().map_err(|_| Reason::QuantityInvalid)?;
    if q == 0 || q > MAX_QUANTITY {
        return Err(Reason::QuantityInvalid);
    }
    u32::try_from(q).map_err(|_| Reason::QuantityInvalid)
}

/// A JSON string that meets [`crate::text::check_purpose`]; a lone surrogate
/// escape, a non-string or a refused character is `PURPOSE_INVALID`.
fn parse_purpose(raw: &str) -> Result<String, Reason> {
    let purpose: String = serde_json::from_str(raw).map_err(|_| Reason::PurposeInvalid)?;
    check_purpose(&purpose).map_err(|_| Reason::PurposeInvalid)?;
    Ok(purpose)
}

/// A JSON object whose keys are all distinct: a duplicate key is ambiguous
/// (which value wins depends on the parser) and so is refused.
struct UniqueObject(BTreeMap<String, Box<RawValue>>);

impl<'de> Deserialize<'de> for UniqueObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = UniqueObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object with distinct keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueObject, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    if out.insert(key, value).is_some() {
                        return Err(de::Error::custom("duplicate key"));
                    }
                }
                Ok(UniqueObject(out))
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// Whether `bytes` are one JSON value whose objects, at every depth, each
/// have distinct keys (keys compared after unescaping, so `"a"` and
/// `"\u0061"` are one key). The same rule as [`UniqueObject`], for bodies
/// read whole by another parser: a duplicate key anywhere is ambiguous.
pub fn has_distinct_keys(bytes: &[u8]) -> bool {
    serde_json::from_slice::<DistinctKeys>(bytes).is_ok()
}

/// Any JSON value, refused when one of its objects repeats a key.
struct DistinctKeys;

impl<'de> Deserialize<'de> for DistinctKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AnyVisitor;
        impl<'de> Visitor<'de> for AnyVisitor {
            type Value = DistinctKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value whose objects have distinct keys")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_unit<E: de::Error>(self) -> Result<DistinctKeys, E> {
                Ok(DistinctKeys)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<DistinctKeys, A::Error> {
                while seq.next_element::<DistinctKeys>()?.is_some() {}
                Ok(DistinctKeys)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DistinctKeys, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key) {
                        return Err(de::Error::custom("duplicate key"));
                    }
                    map.next_value::<DistinctKeys>()?;
                }
                Ok(DistinctKeys)
            }
        }
        deserializer.deserialize_any(AnyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<PurchaseProposal, Reason> {
        parse_proposal(s.as_bytes())
    }

    #[test]
    fn a_well_formed_proposal_parses() {
        let p = parse(r#"{"sku":"CLOUD-STARTER","quantity":2,"purpose":"team credits"}"#);
        assert_eq!(
            p,
            Ok(PurchaseProposal {
                sku: "CLOUD-STARTER".into(),
                quantity: 2,
                purpose: "team credits".into()
            })
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        for extra in [
            r#""amount_paise":100"#,
            r#""merchant":"attacker-llc""#,
            r#""currency":"USD""#,
            r#""price":1"#,
            r#""approved":true"#,
        ] {
            let body = format!(r#"{{"sku":"CLOUD-STARTER","quantity":1,"purpose":"x",{extra}}}"#);
            assert_eq!(parse(&body), Err(Reason::ProposalUnknownField), "{body}");
        }
    }

    #[test]
    fn unknown_field_wins_over_missing_field() {
        assert_eq!(
            parse(r#"{"sku":"A","amount":5}"#),
            Err(Reason::ProposalUnknownField)
        );
    }

    #[test]
    fn malformed_json_is_refused() {
        for body in [
            "",
            "{",
            "null",
            "[]",
            r#""sku""#,
            "{sku: 'x'}",
            r#"{"sku":"A","quantity":1,"purpose":"x"} trailing"#,
        ] {
            assert_eq!(parse(body), Err(Reason::ProposalMalformed), "{body:?}");
        }
    }

    #[test]
    fn invalid_utf8_is_malformed() {
        assert_eq!(
            parse_proposal(b"{\"sku\":\"\xff\",\"quantity\":1,\"purpose\":\"x\"}"),
            Err(Reason::ProposalMalformed)
        );
    }

    #[test]
    fn missing_fields_are_malformed() {
        for body in [
            r#"{"quantity":1,"purpose":"x"}"#,
            r#"{"sku":"A","purpose":"x"}"#,
            r#"{"sku":"A","quantity":1}"#,
            "{}",
        ] {
            assert_eq!(parse(body), Err(Reason::ProposalMalformed), "{body}");
        }
    }

    #[test]
    fn a_duplicate_key_at_any_depth_is_found() {
        assert!(has_distinct_keys(
            br#"{"a":{"b":[{"c":1,"d":2}]},"e":null}"#
        ));
        assert!(has_distinct_keys(br#"[1,"x",true,null,1.5,{}]"#));
        for body in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":[{"c":1},{"c":1,"c":2}]}"#,
            r#"{"amount":1,"\u0061mount":2}"#,
        ] {
            assert!(!has_distinct_keys(body.as_bytes()), "{body}");
        }
        assert!(!has_distinct_keys(b"not json"));
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert_eq!(
            parse(r#"{"sku":"A","quantity":1,"quantity":50,"purpose":"x"}"#),
            Err(Reason::ProposalMalformed)
        );
    }

    #[test]
    fn a_non_string_sku_is_malformed() {
        assert_eq!(
            parse(r#"{"sku":7,"quantity":1,"purpose":"x"}"#),
            Err(Reason::ProposalMalformed)
        );
    }

    #[test]
    fn bad_quantities_are_refused() {
        for q in [
            "0",
            "-1",
            "1.5",
            "1.0",
            "1e3",
            "\"2\"",
            "null",
            "true",
            "[1]",
            "10001",
            "4294967297",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            let body = format!(r#"{{"sku":"A","quantity":{q},"purpose":"x"}}"#);
            assert_eq!(parse(&body), Err(Reason::QuantityInvalid), "{q}");
        }
    }

    /// The grammar is plain digits by itself, not by courtesy of the JSON
    /// layer or of `u64::from_str` (which would read `+5` as 5).
    #[test]
    fn the_quantity_grammar_itself_is_plain_digits() {
        for q in ["+5", "+0", "-5", "5.0", "5e0", "", " ", "٥"] {
            assert_eq!(parse_quantity(q), Err(Reason::QuantityInvalid), "{q:?}");
        }
        assert_eq!(parse_quantity("5"), Ok(5));
    }

    #[test]
    fn the_largest_boundary_quantity_is_accepted() {
        let body = format!(r#"{{"sku":"A","quantity":{MAX_QUANTITY},"purpose":"x"}}"#);
        assert_eq!(parse(&body).map(|p| p.quantity), Ok(10_000));
    }

    #[test]
    fn bad_purposes_are_refused() {
        let long = "a".repeat(MAX_PURPOSE_CHARS + 1);
        for purpose in [
            "".to_string(),
            "   ".to_string(),
            long,
            "line\nbreak".to_string(),
            "nul\u{0}".to_string(),
            "bell\u{7}".to_string(),
            "bidi \u{202E}evil".to_string(),
            "isolate \u{2066}x".to_string(),
        ] {
            let body = serde_json::json!({"sku":"A","quantity":1,"purpose":purpose}).to_string();
            assert_eq!(parse(&body), Err(Reason::PurposeInvalid), "{purpose:?}");
        }
        assert_eq!(
            parse(r#"{"sku":"A","quantity":1,"purpose":5}"#),
            Err(Reason::PurposeInvalid)
        );
    }

    #[test]
    fn a_purpose_of_exactly_the_limit_in_multibyte_characters_is_accepted() {
        let purpose = "क".repeat(MAX_PURPOSE_CHARS);
        let body = serde_json::json!({"sku":"A","quantity":1,"purpose":purpose}).to_string();
        assert_eq!(parse(&body).map(|p| p.purpose), Ok(purpose));
    }

    #[test]
    fn unicode_purposes_are_accepted() {
        let body =
            serde_json::json!({"sku":"A","quantity":1,"purpose":"टीम के लिए 🍪 café"}).to_string();
        assert!(parse(&body).is_ok());
    }

    #[test]
    fn a_body_over_the_limit_is_refused() {
        let pad = "x".repeat(MAX_BODY_BYTES);
        let body = format!(r#"{{"sku":"A","quantity":1,"purpose":"{pad}"}}"#);
        assert_eq!(parse(&body), Err(Reason::ProposalTooLarge));
    }

    /// A reader that would yield 10 MB and counts what was pulled from it.
    struct Huge {
        left: usize,
        pulled: usize,
    }
    impl Read for Huge {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.left);
            buf[..n].fill(b' ');
            self.left -= n;
            self.pulled += n;
            Ok(n)
        }
    }

    #[test]
    fn a_ten_megabyte_body_is_refused_without_being_read_whole() {
        let mut huge = Huge {
            left: 10 * 1024 * 1024,
            pulled: 0,
        };
        assert_eq!(read_body(&mut huge), Err(Reason::ProposalTooLarge));
        assert!(huge.pulled <= MAX_BODY_BYTES + 1, "pulled {}", huge.pulled);
    }

    #[test]
    fn a_body_within_the_limit_is_read_whole() {
        let body = br#"{"sku":"A","quantity":1,"purpose":"x"}"#;
        assert_eq!(read_body(&body[..]).as_deref(), Ok(&body[..]));
    }

    // The outside audit: a body of exactly the limit.

    /// A well-formed body padded with JSON whitespace to exactly `len` bytes.
    fn body_of(len: usize) -> Vec<u8> {
        let mut body = br#"{"sku":"A","quantity":1,"purpose":"x"}"#.to_vec();
        body.resize(len, b' ');
        body
    }

    #[test]
    fn a_body_of_exactly_the_limit_is_read_and_parsed_and_one_byte_more_is_not() {
        let exact = body_of(MAX_BODY_BYTES);
        assert_eq!(exact.len(), 4096);
        assert_eq!(read_body(&exact[..]).as_deref(), Ok(&exact[..]));
        assert_eq!(parse_proposal(&exact).map(|p| p.sku), Ok("A".to_owned()));
        let over = body_of(MAX_BODY_BYTES + 1);
        assert_eq!(read_body(&over[..]), Err(Reason::ProposalTooLarge));
        assert_eq!(parse_proposal(&over), Err(Reason::ProposalTooLarge));
    }
}
