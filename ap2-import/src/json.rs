//! JSON read without losing a number's text.
//!
//! Guarantees: a number is kept exactly as written (`0.2900000000000000001`
//! stays that text, never the nearest binary float), so money is judged on
//! its decimal digits; an object that names a key twice is refused (the
//! signer and this reader could otherwise see different values), and so
//! is nesting deeper than [`MAX_DEPTH`] (an answer, never a stack
//! overflow). The parsing itself is serde_json's (`RawValue`).

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The deepest nesting of arrays and objects read.
pub(crate) const MAX_DEPTH: usize = 64;

/// A JSON value whose numbers keep their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// The number as written (serde_json has checked its grammar).
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Members in the order written, no key twice.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses `text` as one JSON value.
    pub(crate) fn parse(text: &str) -> Result<Json, String> {
        let raw: Box<RawValue> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Json::from_raw(&raw, 0)
    }

    /// The value `raw` holds, `depth` levels inside the outermost one.
    fn from_raw(raw: &RawValue, depth: usize) -> Result<Json, String> {
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'{') | Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(format!("nested deeper than {MAX_DEPTH} levels"));
                }
                let mut de = serde_json::Deserializer::from_str(text);
                let value = Level(depth + 1)
                    .deserialize(&mut de)
                    .map_err(|e| e.to_string())?;
                de.end().map_err(|e| e.to_string())?;
                Ok(value)
            }
            Some(b'"') => serde_json::from_str::<String>(text)
                .map(Json::String)
                .map_err(|e| e.to_string()),
            Some(b't') => Ok(Json::Bool(true)),
            Some(b'f') => Ok(Json::Bool(false)),
            Some(b'n') => Ok(Json::Null),
            Some(_) => Ok(Json::Number(text.to_owned())),
            None => Err("empty JSON value".to_owned()),
        }
    }

    /// The member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// What kind of value this is, for a refusal's text.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The value as text, for a refusal's text.
    pub(crate) fn shown(&self) -> String {
        match self {
            Json::Number(n) => n.clone(),
            Json::String(s) => format!("{s:?}"),
            other => other.kind().to_owned(),
        }
    }
}

/// An object or an array at a nesting level: reads its members as raw
/// text, then each member one level deeper.
struct Level(usize);

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object or array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members: Vec<(String, Json)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let raw: Box<RawValue> = map.next_value()?;
            if members.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!("the key {key:?} appears twice")));
            }
            let value = Json::from_raw(&raw, self.0).map_err(de::Error::custom)?;
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            items.push(Json::from_raw(&raw, self.0).map_err(de::Error::custom)?);
        }
        Ok(Json::Array(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_text() {
        let v = Json::parse(r#"{"a": 0.2900000000000000001, "b": [1.13e0, -0, 12]}"#).unwrap();
        assert_eq!(
            v.get("a"),
            Some(&Json::Number("0.2900000000000000001".into()))
        );
        assert_eq!(
            v.get("b"),
            Some(&Json::Array(vec![
                Json::Number("1.13e0".into()),
                Json::Number("-0".into()),
                Json::Number("12".into()),
            ]))
        );
    }

    #[test]
    fn a_key_written_twice_is_refused() {
        assert!(Json::parse(r#"{"max": 1, "max": 2}"#).is_err());
        assert!(Json::parse(r#"[{"x": {"max": 1, "max": 2}}]"#).is_err());
    }

    #[test]
    fn scalars_and_nesting() {
        let v = Json::parse(r#"{"s": "a\"b", "t": true, "f": false, "n": null, "o": {"k": []}}"#)
            .unwrap();
        assert_eq!(v.get("s"), Some(&Json::String("a\"b".into())));
        assert_eq!(v.get("t"), Some(&Json::Bool(true)));
        assert_eq!(v.get("f"), Some(&Json::Bool(false)));
        assert_eq!(v.get("n"), Some(&Json::Null));
        assert_eq!(
            v.get("o"),
            Some(&Json::Object(vec![("k".into(), Json::Array(vec![]))]))
        );
        assert!(Json::parse("{").is_err());
        assert!(Json::parse("[1,]").is_err());
        assert!(Json::parse(&"[".repeat(1000)).is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(Json::parse(&deep(MAX_DEPTH)).is_ok());
        assert!(Json::parse(&deep(MAX_DEPTH + 1)).is_err());
        assert!(Json::parse(&deep(30_000)).is_err());
        let objects = format!("{}1{}", r#"{"a":"#.repeat(30_000), "}".repeat(30_000));
        assert!(Json::parse(&objects).is_err());
    }
}
