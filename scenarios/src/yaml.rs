//! The crate's one door to YAML, and small helpers for reading YAML
//! values by hand with precise errors.
//!
//! Guarantees: this is the only file of the `scenarios` crate (its tests
//! included) that names the YAML implementation: every other file decodes
//! and encodes YAML through the re-exports below, so replacing `serde_yaml`
//! (unmaintained upstream, RUSTSEC-2024-0320; see DESIGN.md, "Dependencies
//! worth a note") with a maintained fork is a change to the `pub use` line.
//! Every helper names the path it was given and the key or value at fault; a
//! serde message about an unknown or missing field is turned into
//! [`LoadErrorKind::UnknownKey`] / [`LoadErrorKind::MissingKey`] with the key
//! pulled out of the message.

use serde::de::DeserializeOwned;

pub use serde_yaml::{Error, Mapping, Value, from_str, from_value, to_string, to_value};

use crate::error::{LoadErrorKind, ParseError};

/// The text of a mapping key, or its YAML rendering when it is not a string.
pub(crate) fn key_text(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        other => to_string(other).unwrap_or_default().trim().to_string(),
    }
}

/// `value` as a mapping, or a shape error at `path`.
pub(crate) fn as_mapping<'a>(value: &'a Value, path: &str) -> Result<&'a Mapping, ParseError> {
    value.as_mapping().ok_or_else(|| {
        LoadErrorKind::Shape {
            path: path.to_string(),
            expected: format!("a mapping at {}", display_path(path)),
        }
        .into()
    })
}

/// Deserializes an optional field of `map`.
pub(crate) fn optional<T: DeserializeOwned>(
    map: &Mapping,
    key: &str,
    path: &str,
) -> Result<Option<T>, ParseError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => decode(v.clone(), &join(path, key)).map(Some),
    }
}

/// Deserializes a required field of `map`.
pub(crate) fn required<T: DeserializeOwned>(
    map: &Mapping,
    key: &str,
    path: &str,
) -> Result<T, ParseError> {
    optional(map, key, path)?.ok_or_else(|| {
        LoadErrorKind::MissingKey {
            path: path.to_string(),
            key: key.to_string(),
        }
        .into()
    })
}

/// Deserializes `value` into `T`, classifying serde's message.
pub(crate) fn decode<T: DeserializeOwned>(value: Value, path: &str) -> Result<T, ParseError> {
    from_value(value).map_err(|e| classify(&e.to_string(), path).into())
}

/// Turns a serde message into a typed error kind.
pub(crate) fn classify(message: &str, path: &str) -> LoadErrorKind {
    let (inner_path, rest) = split_serde_path(message);
    let path = match inner_path {
        Some(p) => join(path, p),
        None => path.to_string(),
    };
    if let Some(key) = rest
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    {
        return LoadErrorKind::UnknownKey {
            path,
            key: key.to_string(),
        };
    }
    if let Some(key) = rest
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
    {
        return LoadErrorKind::MissingKey {
            path,
            key: key.to_string(),
        };
    }
    LoadErrorKind::InvalidValue {
        path,
        message: rest.to_string(),
    }
}

/// serde_yaml prefixes nested errors with `a.b[1]: `; split that off.
fn split_serde_path(message: &str) -> (Option<&str>, &str) {
    if let Some((head, tail)) = message.split_once(": ") {
        let looks_like_path = !head.is_empty()
            && !head.contains(' ')
            && head
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c));
        if looks_like_path {
            return (Some(head.trim_start_matches('.')), tail);
        }
    }
    (None, message)
}

/// `a` + `b` -> `a.b`; an empty side is dropped.
pub(crate) fn join(path: &str, key: &str) -> String {
    match (path.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => path.to_string(),
        _ => format!("{path}.{key}"),
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "the top" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_pulls_the_key_out() {
        assert_eq!(
            classify("unknown field `amount`, expected `sku`", "steps[0].propose"),
            LoadErrorKind::UnknownKey {
                path: "steps[0].propose".into(),
                key: "amount".into()
            }
        );
        assert_eq!(
            classify("velocity: missing field `window_minutes`", "policy"),
            LoadErrorKind::MissingKey {
                path: "policy.velocity".into(),
                key: "window_minutes".into()
            }
        );
        assert!(matches!(
            classify("invalid type: string \"x\", expected u32", "p"),
            LoadErrorKind::InvalidValue { .. }
        ));
    }
}
