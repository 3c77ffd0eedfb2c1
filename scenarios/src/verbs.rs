//! The payload of each verb of the spec's step table.
//!
//! Guarantees: one struct per verb with exactly the spec's field names
//! (plus nothing), each refusing unknown keys; defaults that the spec states
//! (`webhook.event` = `payment.captured`, `signature` = `valid`,
//! `created_at_offset_minutes` = 0, `provider.mode` = `ok`) are exposed
//! through accessors, and the raw optional fields are kept so a corpus
//! round-trips unchanged. The caller's `tenant` is not a verb field: it
//! belongs to the step ([`crate::Step::tenant`]), wherever the file wrote it.
//! Bytes given as base64 (`raw_b64`) are decoded with the standard alphabet,
//! padding required; [`decode_b64`] is the one decoder the loader and the
//! runners share. Durations are built with checked arithmetic only: a value
//! chrono cannot represent is `None`, never a panic.

use base64::Engine as _;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// Decodes `raw_b64` text (standard alphabet, padded; surrounding whitespace
/// ignored), or says why it is not base64.
pub fn decode_b64(text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not valid base64: {e}"))
}

/// `propose`: the agent-facing call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Propose {
    pub actor: String,
    /// A mapping sent as JSON. Exactly one of `body` and `raw` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// A string sent as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Bytes sent as is, written as base64 (for bytes that are not UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_b64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl Propose {
    /// The bytes the agent sends: `raw` as is, `raw_b64` decoded, or `body`
    /// as compact JSON. (The loader refuses a `raw_b64` that does not decode;
    /// a hand-built one that does not is sent as no bytes at all.)
    pub fn wire_bytes(&self) -> Vec<u8> {
        match (&self.raw, &self.raw_b64, &self.body) {
            (Some(raw), _, _) => raw.clone().into_bytes(),
            (None, Some(b64), _) => decode_b64(b64).unwrap_or_default(),
            (None, None, Some(body)) => body.to_string().into_bytes(),
            (None, None, None) => Vec::new(),
        }
    }

    /// The bytes as text, with any invalid UTF-8 replaced (U+FFFD): for
    /// readers that work on text, such as the oracle's JSON parser.
    pub fn wire_body(&self) -> String {
        String::from_utf8_lossy(&self.wire_bytes()).into_owned()
    }

    /// How many of `body`, `raw` and `raw_b64` are given (the loader wants 1).
    pub fn payload_count(&self) -> usize {
        usize::from(self.body.is_some())
            + usize::from(self.raw.is_some())
            + usize::from(self.raw_b64.is_some())
    }
}

/// `approve`: a human approves a step-up request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// The name of an earlier `propose` step.
    pub request: String,
    pub approver: String,
}

/// `checkout`: issue the single-use checkout authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkout {
    /// The name of an earlier `propose` step.
    pub request: String,
    pub actor: String,
}

/// `pay`: consume an authority, creating one provider order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pay {
    /// The name of an earlier `checkout` step.
    pub authority: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// How a webhook is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Signature {
    #[default]
    Valid,
    Invalid,
    Missing,
}

impl Signature {
    /// Every mode, as the corpus spells them.
    pub const ALL: [Signature; 3] = [Signature::Valid, Signature::Invalid, Signature::Missing];

    /// The corpus spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Signature::Valid => "valid",
            Signature::Invalid => "invalid",
            Signature::Missing => "missing",
        }
    }
}

/// `webhook`: a provider event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// The name of an earlier `pay` step.
    pub order: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_paise: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// A raw string sent as the signature header, overriding `signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    /// Sent as the provider sends it, in the event-id header; default fresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_offset_minutes: Option<i64>,
    /// A body override, signed as given when `signature: valid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// The same as base64, for bytes that are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_b64: Option<String>,
    /// The name of an earlier `checkout` step: the id of the authority it
    /// issued replaces every [`RECEIPT_PLACEHOLDER`] in the body override
    /// before it is signed (a corpus file cannot know the gate's authority
    /// ids, which are keyed with its secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// In a `webhook` step's body override, replaced by the id of the authority
/// its `receipt` step issued.
pub const RECEIPT_PLACEHOLDER: &str = "$receipt";

impl Webhook {
    /// The event type, `payment.captured` by default.
    pub fn event(&self) -> &str {
        self.event.as_deref().unwrap_or("payment.captured")
    }

    /// The signature mode, `valid` by default.
    pub fn signature(&self) -> Signature {
        self.signature.unwrap_or_default()
    }

    /// The event's timestamp offset from the gate's clock, 0 by default.
    pub fn offset_minutes(&self) -> i64 {
        self.created_at_offset_minutes.unwrap_or(0)
    }

    /// The body override's bytes (`raw`, or `raw_b64` decoded), if any, as
    /// written (any [`RECEIPT_PLACEHOLDER`] left in place).
    pub fn raw_bytes(&self) -> Option<Vec<u8>> {
        match (&self.raw, &self.raw_b64) {
            (Some(raw), _) => Some(raw.clone().into_bytes()),
            (None, Some(b64)) => Some(decode_b64(b64).unwrap_or_default()),
            (None, None) => None,
        }
    }

    /// The body override's bytes as sent: with a `receipt` step, every
    /// [`RECEIPT_PLACEHOLDER`] replaced by `authority`, the id that step's
    /// authority has on the engine that runs it.
    pub fn raw_bytes_for(&self, authority: Option<&str>) -> Option<Vec<u8>> {
        let raw = self.raw_bytes()?;
        Some(match (&self.receipt, authority) {
            (Some(_), Some(id)) => replace_all(&raw, RECEIPT_PLACEHOLDER.as_bytes(), id.as_bytes()),
            _ => raw,
        })
    }
}

/// `bytes` with every `from` replaced by `to`, left to right.
fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if !from.is_empty() && bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// `grant`: a delegation hop made by the tenant's operator.
pub use gate_core::Grant;

/// `revoke`: revoke one hop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoke {
    pub delegation: String,
    pub actor: String,
}

/// `set_price`: the merchant changes the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPrice {
    pub sku: String,
    pub price_paise: i64,
}

/// How a `set_policy` step's mandate is signed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MandateSignature {
    /// With the signer's own world key.
    #[default]
    Valid,
    /// A signature with one bit flipped.
    Invalid,
    /// None.
    Missing,
    /// With another human's key (the world's first other person).
    OtherKey,
}

/// `set_policy`: a human publishes a new mandate, the current policy with
/// `patch`'s keys changed, signed with `signed_by`'s world key (default: the
/// tenant's first human who may approve) as `signature` says, as `version`
/// (default: the version in force plus one).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SetPolicy {
    #[serde(flatten)]
    pub patch: gate_core::PolicyPatch,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<MandateSignature>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

/// The keys of a `set_policy` step that are not policy keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPolicySigning {
    #[serde(default)]
    pub signed_by: Option<String>,
    #[serde(default)]
    pub signature: Option<MandateSignature>,
    #[serde(default)]
    pub version: Option<i64>,
}

/// `advance_clock`: move the gate's clock by `minutes` or `seconds` (exactly
/// one; negative steps it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvanceClock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<i64>,
}

impl AdvanceClock {
    /// A move of whole minutes.
    pub fn minutes(minutes: i64) -> AdvanceClock {
        AdvanceClock {
            minutes: Some(minutes),
            seconds: None,
        }
    }

    /// The move, or `None` when chrono cannot represent it (or neither or
    /// both fields are given).
    pub fn duration(&self) -> Option<TimeDelta> {
        match (self.minutes, self.seconds) {
            (Some(m), None) => TimeDelta::try_minutes(m),
            (None, Some(s)) => TimeDelta::try_seconds(s),
            _ => None,
        }
    }

    /// The field that carries the move, for error messages.
    pub fn field(&self) -> &'static str {
        if self.seconds.is_some() && self.minutes.is_none() {
            "seconds"
        } else {
            "minutes"
        }
    }
}

/// `set_clock`: put the gate's clock at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetClock {
    pub at: DateTime<Utc>,
}

/// `cancel`: the requesting agent or an approving human cancels a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    /// The name of an earlier `propose` step.
    pub request: String,
    pub actor: String,
}

/// How the simulated provider answers the next `pay` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderMode {
    /// The order is created and the answer comes in time.
    #[default]
    Ok,
    /// No order, no answer.
    Timeout,
    /// The order is created; the answer comes after the gate's timeout.
    Late,
    /// A 4xx: the provider refuses to create the order.
    Reject,
    /// A 5xx.
    Unavailable,
    /// An answer that differs from the order asked for in `field`: the gate
    /// records nothing as the order and answers `PROVIDER_REJECTED`.
    Mismatch,
}

impl ProviderMode {
    /// Every mode, as the corpus spells them.
    pub const ALL: [ProviderMode; 6] = [
        ProviderMode::Ok,
        ProviderMode::Timeout,
        ProviderMode::Late,
        ProviderMode::Reject,
        ProviderMode::Unavailable,
        ProviderMode::Mismatch,
    ];

    /// The corpus spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderMode::Ok => "ok",
            ProviderMode::Timeout => "timeout",
            ProviderMode::Late => "late",
            ProviderMode::Reject => "reject",
            ProviderMode::Unavailable => "unavailable",
            ProviderMode::Mismatch => "mismatch",
        }
    }
}

/// The field in which a `mismatch` answer differs from the order asked
/// for: the gate's own (its in-process provider answers so).
pub use gate_core::mismatch::MismatchField;

/// Every mismatch field, as the corpus spells them.
pub const MISMATCH_FIELDS: [(MismatchField, &str); 5] = [
    (MismatchField::Amount, "amount"),
    (MismatchField::Currency, "currency"),
    (MismatchField::Merchant, "merchant"),
    (MismatchField::Receipt, "receipt"),
    (MismatchField::Id, "id"),
];

/// `provider`: how the simulated provider answers the next `pay` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ProviderMode>,
    /// With `mode: mismatch` (and only then): the field the answer differs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<MismatchField>,
    /// How many later `pay` calls; default every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

impl Provider {
    /// The mode, `ok` by default.
    pub fn mode(&self) -> ProviderMode {
        self.mode.unwrap_or_default()
    }
}

/// `provider_capture`: the simulated provider captures an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderCapture {
    /// The name of an earlier `pay` step.
    pub order: String,
}

/// `replay`: send an earlier step's request again, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    pub of: String,
}

/// A timestamp helper for callers that build grants.
pub fn rfc3339(ts: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `login`: one SQL statement sent as the gate's runtime database role, the
/// login `serve` holds (what a thief of that login can send). A placeholder
/// `$<step name>` is replaced by what that earlier step produced (a request,
/// authority, order or delegation id), quoted as a SQL literal; a `$`
/// inside a quoted literal, a quoted identifier or a comment is text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub sql: String,
}

/// One piece of a `login` statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SqlPiece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// A character that may follow the first of a placeholder's name.
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Login {
    /// The statement cut into text and placeholders, or why it is not one
    /// statement the loader accepts: empty, more than one statement, an
    /// unterminated literal or comment, dollar quoting, or a positional
    /// parameter (`$1`: nothing is bound).
    fn pieces(&self) -> Result<Vec<SqlPiece<'_>>, String> {
        let sql = self.sql.as_str();
        let bytes = sql.as_bytes();
        let mut out = Vec::new();
        let mut start = 0;
        let mut i = 0;
        let mut statement_ended = false;
        let mut content = false;
        while i < bytes.len() {
            let c = bytes[i];
            let rest = &sql[i..];
            if rest.starts_with("--") {
                i = rest.find('\n').map_or(bytes.len(), |n| i + n + 1);
                continue;
            }
            if let Some(comment) = rest.strip_prefix("/*") {
                let Some(end) = comment.find("*/") else {
                    return Err("a `/*` comment is not closed".into());
                };
                i += end + 4;
                continue;
            }
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if statement_ended {
                return Err("give one statement: text follows its `;`".into());
            }
            match c {
                b';' => {
                    statement_ended = true;
                    i += 1;
                }
                b'\'' | b'"' => {
                    content = true;
                    let mut j = i + 1;
                    loop {
                        match bytes.get(j) {
                            None => {
                                return Err(format!(
                                    "a literal opened with {} is not closed",
                                    c as char
                                ));
                            }
                            Some(&q) if q == c && bytes.get(j + 1) == Some(&c) => j += 2,
                            Some(&q) if q == c => break,
                            Some(_) => j += 1,
                        }
                    }
                    i = j + 1;
                }
                b'$' => {
                    content = true;
                    let name_len = rest[1..]
                        .char_indices()
                        .find(|(_, ch)| !name_char(*ch))
                        .map_or(rest.len() - 1, |(n, _)| n);
                    let name = &rest[1..1 + name_len];
                    if rest[1 + name_len..].starts_with('$') {
                        return Err("dollar quoting is not accepted: write a quoted literal".into());
                    }
                    match name.chars().next() {
                        Some(first) if first.is_ascii_alphabetic() || first == '_' => {}
                        Some(_) => {
                            return Err(format!(
                                "`${name}` is a positional parameter and nothing is bound: name a step (`$p1`)"
                            ));
                        }
                        None => return Err("a `$` names no step".into()),
                    }
                    out.push(SqlPiece::Text(&sql[start..i]));
                    out.push(SqlPiece::Placeholder(name));
                    i += 1 + name_len;
                    start = i;
                }
                _ => {
                    content = true;
                    i += rest.chars().next().map_or(1, char::len_utf8);
                }
            }
        }
        if !content {
            return Err("the statement is empty".into());
        }
        out.push(SqlPiece::Text(&sql[start..]));
        Ok(out)
    }

    /// Why the loader refuses the statement, if it does.
    pub fn problem(&self) -> Option<String> {
        self.pieces().err()
    }

    /// The step names the placeholders refer to, in order (repeats kept).
    pub fn placeholders(&self) -> Vec<&str> {
        self.pieces()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| match p {
                SqlPiece::Placeholder(name) => Some(name),
                SqlPiece::Text(_) => None,
            })
            .collect()
    }

    /// The statement with every placeholder replaced by `value(name)`,
    /// quoted as a SQL literal (a `'` doubled). A statement the loader would
    /// refuse is returned as written (the database then refuses it).
    pub fn statement(&self, value: impl Fn(&str) -> String) -> String {
        let Ok(pieces) = self.pieces() else {
            return self.sql.clone();
        };
        pieces
            .into_iter()
            .map(|p| match p {
                SqlPiece::Text(t) => t.to_string(),
                SqlPiece::Placeholder(name) => {
                    format!("'{}'", value(name).replace('\'', "''"))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod login_tests {
    use super::Login;

    fn login(sql: &str) -> Login {
        Login { sql: sql.into() }
    }

    #[test]
    fn placeholders_are_replaced_by_quoted_literals_outside_quotes_and_comments() {
        let l = login(
            "UPDATE t SET a = '$c1', \"$x\" = 1 WHERE id = $c1 AND r = $p_1; -- $o1\n/* $o2 */",
        );
        assert_eq!(l.problem(), None);
        assert_eq!(l.placeholders(), vec!["c1", "p_1"]);
        let sql = l.statement(|n| format!("{n}'id"));
        assert_eq!(
            sql,
            "UPDATE t SET a = '$c1', \"$x\" = 1 WHERE id = 'c1''id' AND r = 'p_1''id'; -- $o1\n/* $o2 */"
        );
    }

    #[test]
    fn empty_multi_statement_and_unbound_sql_is_refused() {
        for (sql, says) in [
            ("", "empty"),
            ("  ; -- nothing\n", "empty"),
            ("/* only */", "empty"),
            ("DELETE FROM a; DELETE FROM b", "one statement"),
            ("SELECT 1;;", "one statement"),
            ("SELECT 'a", "not closed"),
            ("SELECT 1 /* x", "not closed"),
            ("SELECT $1", "positional"),
            ("SELECT $$x$$", "dollar"),
            ("SELECT $t$x$t$", "dollar"),
            ("SELECT $ ", "names no step"),
        ] {
            let problem = login(sql).problem();
            assert!(
                problem.as_deref().is_some_and(|p| p.contains(says)),
                "{sql:?}: {problem:?}"
            );
        }
        assert_eq!(login("SELECT ';' ; ").problem(), None);
        assert_eq!(login("SELECT 'é' || é").problem(), None);
    }
}
