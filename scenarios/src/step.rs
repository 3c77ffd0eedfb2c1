//! One step of a scenario: exactly one verb, an optional name, an optional
//! caller's tenant and an optional expectation.
//!
//! Guarantees: [`Step::parse`] refuses a step with no verb, with two verbs,
//! with an unknown verb or an unknown key; a `propose` without exactly one of
//! `body`, `raw` and `raw_b64`; a `webhook` with both `raw` and `raw_b64`; a
//! `raw_b64` that is not base64; an `advance_clock` without exactly one of
//! `minutes` and `seconds`; a `provider` with `times: 0`; and a `concurrent`
//! whose inner step is itself concurrent or carries its own name or
//! expectation. Every refusal names the step's path and the key. The
//! caller's `tenant` may be written beside the verb (`{tenant: globex,
//! approve: {..}}`) or inside it (`{propose: {tenant: globex, ..}}`); both
//! mean [`Step::tenant`], and two different values are refused. A `replay`
//! resends its step as it was and takes no tenant; a `concurrent` step's
//! tenant goes on its inner step. `expire` and `reconcile` take no fields
//! (`expire: {}` or a bare `expire:`). A `concurrent` step's expectation is
//! counts, every other step's is `{decision, reason | reason_any}`. A step
//! may carry a `wire` block ([`crate::wire`]); one with a wire block and no
//! `expect` is wire-only and must give a `status`, carry no name, and is the
//! only kind that may change the credential or the body; `replay` and
//! `concurrent` (and a concurrent step's inner step) take none.
//! Serializing a step and parsing it back gives the same step.

use crate::yaml::{Mapping, Value};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{LoadErrorKind, ParseError};
use crate::expect::{Counts, DecisionKind, Expect, LoginExpect, StepExpect};
use crate::tables::{self, check_table};
use crate::verbs::{
    AdvanceClock, Approve, Cancel, Checkout, Grant, Login, Pay, Propose, Provider, ProviderCapture,
    ProviderMode, Replay, Revoke, SetClock, SetPolicy, SetPolicySigning, SetPrice, Webhook,
    decode_b64,
};
use crate::wire::WireStep;
use crate::yaml::{as_mapping, decode, join, key_text, required};

/// Every verb of the spec, in the spec's order (from [`crate::tables`]).
pub use crate::tables::VERBS;

/// `concurrent`: `times` copies of one step at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Concurrent {
    pub times: u32,
    pub step: Box<Step>,
}

/// The verb of a step and its payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Verb {
    Propose(Propose),
    Approve(Approve),
    Checkout(Checkout),
    Pay(Pay),
    Webhook(Webhook),
    Grant(Grant),
    Revoke(Revoke),
    SetPrice(SetPrice),
    SetPolicy(SetPolicy),
    AdvanceClock(AdvanceClock),
    SetClock(SetClock),
    Cancel(Cancel),
    /// The expiry sweep at the gate's clock.
    Expire,
    Provider(Provider),
    /// The reconcile job.
    Reconcile,
    ProviderCapture(ProviderCapture),
    Replay(Replay),
    Concurrent(Concurrent),
    /// One SQL statement as the gate's runtime database role.
    Login(Login),
}

impl Verb {
    /// The verb's key as the corpus spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Verb::Propose(_) => "propose",
            Verb::Approve(_) => "approve",
            Verb::Checkout(_) => "checkout",
            Verb::Pay(_) => "pay",
            Verb::Webhook(_) => "webhook",
            Verb::Grant(_) => "grant",
            Verb::Revoke(_) => "revoke",
            Verb::SetPrice(_) => "set_price",
            Verb::SetPolicy(_) => "set_policy",
            Verb::AdvanceClock(_) => "advance_clock",
            Verb::SetClock(_) => "set_clock",
            Verb::Cancel(_) => "cancel",
            Verb::Expire => "expire",
            Verb::Provider(_) => "provider",
            Verb::Reconcile => "reconcile",
            Verb::ProviderCapture(_) => "provider_capture",
            Verb::Replay(_) => "replay",
            Verb::Concurrent(_) => "concurrent",
            Verb::Login(_) => "login",
        }
    }

    /// The step names this verb refers to, as `(field, target)`.
    pub fn references(&self) -> Vec<(&'static str, &str)> {
        match self {
            Verb::Approve(a) => vec![("request", a.request.as_str())],
            Verb::Checkout(c) => vec![("request", c.request.as_str())],
            Verb::Cancel(c) => vec![("request", c.request.as_str())],
            Verb::Pay(p) => vec![("authority", p.authority.as_str())],
            Verb::Webhook(w) => std::iter::once(("order", w.order.as_str()))
                .chain(w.receipt.as_deref().map(|r| ("receipt", r)))
                .collect(),
            Verb::ProviderCapture(p) => vec![("order", p.order.as_str())],
            Verb::Replay(r) => vec![("of", r.of.as_str())],
            Verb::Concurrent(c) => c.step.verb.references(),
            Verb::Login(l) => l.placeholders().into_iter().map(|n| ("sql", n)).collect(),
            _ => Vec::new(),
        }
    }

    fn to_value(&self) -> Value {
        let v = match self {
            Verb::Propose(x) => crate::yaml::to_value(x),
            Verb::Approve(x) => crate::yaml::to_value(x),
            Verb::Checkout(x) => crate::yaml::to_value(x),
            Verb::Pay(x) => crate::yaml::to_value(x),
            Verb::Webhook(x) => crate::yaml::to_value(x),
            Verb::Grant(x) => crate::yaml::to_value(x),
            Verb::Revoke(x) => crate::yaml::to_value(x),
            Verb::SetPrice(x) => crate::yaml::to_value(x),
            Verb::SetPolicy(x) => crate::yaml::to_value(x),
            Verb::AdvanceClock(x) => crate::yaml::to_value(x),
            Verb::SetClock(x) => crate::yaml::to_value(x),
            Verb::Cancel(x) => crate::yaml::to_value(x),
            Verb::Provider(x) => crate::yaml::to_value(x),
            Verb::ProviderCapture(x) => crate::yaml::to_value(x),
            Verb::Replay(x) => crate::yaml::to_value(x),
            Verb::Login(x) => crate::yaml::to_value(x),
            Verb::Expire | Verb::Reconcile => Ok(Value::Mapping(Mapping::new())),
            Verb::Concurrent(c) => {
                let mut m = Mapping::new();
                m.insert("times".into(), c.times.into());
                m.insert("step".into(), c.step.to_value());
                Ok(Value::Mapping(m))
            }
        };
        v.expect("verb payloads are plain data and always serialize")
    }
}

/// One step: a verb, an optional name, the caller's tenant, an optional
/// expectation.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: Option<String>,
    /// The caller's tenant; `None` means the world's first tenant.
    pub tenant: Option<String>,
    pub verb: Verb,
    pub expect: Option<StepExpect>,
    /// How the HTTP engine sends the step ([`crate::wire`]); `None` for
    /// every step that does not say.
    pub wire: Option<WireStep>,
}

impl Step {
    /// A step with a verb and nothing else.
    pub fn new(verb: Verb) -> Step {
        Step {
            name: None,
            tenant: None,
            verb,
            expect: None,
            wire: None,
        }
    }

    /// True when the step exists only on the wire: it has a `wire` block and
    /// no `expect`. The service refuses it before the gate, so engines
    /// without a wire, and the oracle, skip it.
    pub fn wire_only(&self) -> bool {
        self.wire.is_some() && self.expect.is_none()
    }

    /// The decision expectation, for any step but `concurrent`.
    pub fn expect_decision(&self) -> Option<&Expect> {
        match &self.expect {
            Some(StepExpect::Decision(e)) => Some(e),
            _ => None,
        }
    }

    /// The count expectation of a `concurrent` step.
    pub fn expect_counts(&self) -> Option<&Counts> {
        match &self.expect {
            Some(StepExpect::Counts(c)) => Some(c),
            _ => None,
        }
    }

    /// Whether this step carries a check an attack's success would break:
    /// it is expected to come out `deny` or `step_up`, or (a `concurrent`
    /// step) some of its copies are. Exact counts make any more permissive
    /// outcome a breach.
    pub fn expects_refusal(&self) -> bool {
        match &self.expect {
            Some(StepExpect::Decision(e)) => {
                matches!(e.decision, DecisionKind::Deny | DecisionKind::StepUp)
            }
            Some(StepExpect::Counts(c)) => {
                c.exact(DecisionKind::Deny) > 0 || c.exact(DecisionKind::StepUp) > 0
            }
            Some(StepExpect::Login(e)) => e.is_refusal(),
            None => false,
        }
    }

    /// Parses one step at `path` (e.g. `steps[3]`).
    pub fn parse(value: &Value, path: &str) -> Result<Step, ParseError> {
        let map = as_mapping(value, path)?;
        let mut verbs = Vec::new();
        for key in map.keys() {
            let text = key_text(key);
            match text.as_str() {
                k if tables::STEP.iter().any(|s| s.name == k) => {}
                v if tables::verb(v).is_some() => verbs.push(text),
                _ => {
                    return Err(LoadErrorKind::UnknownVerb {
                        path: path.to_string(),
                        verb: text,
                    }
                    .into());
                }
            }
        }
        let verb_key = match verbs.as_slice() {
            [] => {
                return Err(LoadErrorKind::NoVerb {
                    path: path.to_string(),
                    expected: &VERBS,
                }
                .into());
            }
            [one] => one.clone(),
            _ => {
                return Err(LoadErrorKind::TwoVerbs {
                    path: path.to_string(),
                    verbs,
                }
                .into());
            }
        };
        let name = match map.get("name") {
            None => None,
            Some(v) => Some(decode::<String>(v.clone(), &join(path, "name"))?),
        };
        let outer_tenant = match map.get("tenant") {
            None => None,
            Some(v) => Some(decode::<String>(v.clone(), &join(path, "tenant"))?),
        };
        let mut body = map.get(verb_key.as_str()).cloned().unwrap_or(Value::Null);
        let verb_path = join(path, &verb_key);
        // A `tenant` written inside the verb is the step's tenant.
        let inner_tenant = match body.as_mapping_mut().and_then(|m| m.remove("tenant")) {
            None => None,
            Some(v) => Some(decode::<String>(v, &join(&verb_path, "tenant"))?),
        };
        let tenant = match (outer_tenant, inner_tenant) {
            (Some(a), Some(b)) if a != b => {
                return Err(LoadErrorKind::InvalidValue {
                    path: join(path, "tenant"),
                    message: format!(
                        "the step names two tenants, `{a}` beside the verb and `{b}` inside it"
                    ),
                }
                .into());
            }
            (a, b) => a.or(b),
        };
        if tenant.is_some() && matches!(verb_key.as_str(), "replay" | "concurrent" | "login") {
            return Err(LoadErrorKind::UnknownKey {
                path: path.to_string(),
                key: "tenant".into(),
            }
            .into());
        }
        let verb = parse_verb(&verb_key, body, &verb_path)?;
        let expect = match map.get("expect") {
            None => None,
            Some(v) => {
                let expect_path = join(path, "expect");
                Some(match &verb {
                    Verb::Concurrent(c) => {
                        let counts: Counts = decode(v.clone(), &expect_path)?;
                        // The counts are exact: they must account for every copy.
                        if counts.total() != c.times {
                            return Err(invalid(
                                &expect_path,
                                format!(
                                    "the counts are exact and add up to {}, but `times` is {}",
                                    counts.total(),
                                    c.times
                                ),
                            ));
                        }
                        StepExpect::Counts(counts)
                    }
                    Verb::Login(_) => StepExpect::Login(LoginExpect::parse(v, &expect_path)?),
                    _ => StepExpect::Decision(Expect::parse(v, &expect_path)?),
                })
            }
        };
        let wire = match map.get("wire") {
            None => None,
            Some(v) => {
                let wire_path = join(path, "wire");
                let w: WireStep = decode(v.clone(), &wire_path)?;
                if let Some(problem) = w.problem() {
                    return Err(invalid(&wire_path, problem));
                }
                if matches!(verb, Verb::Replay(_) | Verb::Concurrent(_)) {
                    return Err(invalid(
                        &wire_path,
                        "a `replay` resends its step as it was and a `concurrent` step's copies are its inner step's: neither takes a wire block",
                    ));
                }
                if matches!(verb, Verb::Login(_)) {
                    return Err(invalid(
                        &wire_path,
                        "a `login` statement goes to the database, not over the wire: it takes no wire block",
                    ));
                }
                if expect.is_some() && (w.as_actor.is_some() || w.key.is_some() || w.body.is_some())
                {
                    return Err(invalid(
                        &wire_path,
                        "`as`, `key` and `body` make a step the other engines cannot run: only a wire-only step (no `expect`) takes them",
                    ));
                }
                if expect.is_none() {
                    if w.status.is_none() {
                        return Err(invalid(
                            &wire_path,
                            "a step with a wire block and no `expect` is wire-only and must give the `status` it expects",
                        ));
                    }
                    if name.is_some() {
                        return Err(invalid(
                            &join(path, "name"),
                            "a wire-only step (a wire block and no `expect`) changes nothing and may not be named",
                        ));
                    }
                }
                Some(w)
            }
        };
        Ok(Step {
            name,
            tenant,
            verb,
            expect,
            wire,
        })
    }

    /// The step as a YAML mapping: `name`, `tenant`, the verb, `expect`, in
    /// that order.
    pub fn to_value(&self) -> Value {
        let mut m = Mapping::new();
        if let Some(name) = &self.name {
            m.insert("name".into(), name.clone().into());
        }
        if let Some(tenant) = &self.tenant {
            m.insert("tenant".into(), tenant.clone().into());
        }
        m.insert(self.verb.name().into(), self.verb.to_value());
        if let Some(expect) = &self.expect {
            let v = crate::yaml::to_value(expect).expect("expectations always serialize");
            m.insert("expect".into(), v);
        }
        if let Some(wire) = &self.wire {
            let v = crate::yaml::to_value(wire).expect("wire blocks always serialize");
            m.insert("wire".into(), v);
        }
        Value::Mapping(m)
    }
}

fn invalid(path: &str, message: impl Into<String>) -> ParseError {
    LoadErrorKind::InvalidValue {
        path: path.to_string(),
        message: message.into(),
    }
    .into()
}

fn check_b64(value: Option<&String>, path: &str) -> Result<(), ParseError> {
    match value {
        Some(text) => decode_b64(text)
            .map(|_| ())
            .map_err(|m| invalid(&join(path, "raw_b64"), m)),
        None => Ok(()),
    }
}

/// Parses a verb's payload: its keys are checked against the verb's table
/// first (a bare verb with no payload is left to the verb's own decoder).
fn parse_verb(key: &str, body: Value, path: &str) -> Result<Verb, ParseError> {
    let Some(spec) = tables::verb(key) else {
        return Err(LoadErrorKind::UnknownVerb {
            path: path.to_string(),
            verb: key.to_string(),
        }
        .into());
    };
    if let Value::Mapping(map) = &body {
        check_table(map, spec.keys, path)?;
    }
    Ok(match key {
        "propose" => {
            let p: Propose = decode(body, path)?;
            if p.payload_count() != 1 {
                return Err(invalid(
                    path,
                    "give exactly one of `body`, `raw` and `raw_b64`",
                ));
            }
            check_b64(p.raw_b64.as_ref(), path)?;
            Verb::Propose(p)
        }
        "approve" => Verb::Approve(decode(body, path)?),
        "checkout" => Verb::Checkout(decode(body, path)?),
        "pay" => Verb::Pay(decode(body, path)?),
        "webhook" => {
            let w: Webhook = decode(body, path)?;
            if w.raw.is_some() && w.raw_b64.is_some() {
                return Err(invalid(path, "give at most one of `raw` and `raw_b64`"));
            }
            if w.receipt.is_some() && w.raw.is_none() && w.raw_b64.is_none() {
                return Err(invalid(
                    path,
                    "`receipt` fills `$receipt` in a body override: give `raw` or `raw_b64`",
                ));
            }
            check_b64(w.raw_b64.as_ref(), path)?;
            Verb::Webhook(w)
        }
        "grant" => Verb::Grant(decode(body, path)?),
        "revoke" => Verb::Revoke(decode(body, path)?),
        "set_price" => Verb::SetPrice(decode(body, path)?),
        "set_policy" => {
            // The signing keys are read apart; the rest is the policy patch.
            let mut patch = as_mapping(&body, path)?.clone();
            let mut signing = Mapping::new();
            for key in ["signed_by", "signature", "version"] {
                if let Some(v) = patch.remove(key) {
                    signing.insert(key.into(), v);
                }
            }
            let signing: SetPolicySigning = decode(Value::Mapping(signing), path)?;
            Verb::SetPolicy(SetPolicy {
                patch: decode(Value::Mapping(patch), path)?,
                signed_by: signing.signed_by,
                signature: signing.signature,
                version: signing.version,
            })
        }
        "advance_clock" => {
            let a: AdvanceClock = decode(body, path)?;
            if a.minutes.is_some() == a.seconds.is_some() {
                return Err(invalid(path, "give exactly one of `minutes` and `seconds`"));
            }
            Verb::AdvanceClock(a)
        }
        "set_clock" => Verb::SetClock(decode::<SetClock>(body, path)?),
        "cancel" => Verb::Cancel(decode::<Cancel>(body, path)?),
        "expire" | "reconcile" => {
            if !body.is_null() {
                as_mapping(&body, path)?;
            }
            if key == "expire" {
                Verb::Expire
            } else {
                Verb::Reconcile
            }
        }
        "provider" => {
            let p: Provider = match body {
                Value::Null => Provider::default(),
                other => decode(other, path)?,
            };
            if p.times == Some(0) {
                return Err(invalid(&join(path, "times"), "times must be at least 1"));
            }
            match (p.mode(), p.field) {
                (ProviderMode::Mismatch, None) => {
                    return Err(LoadErrorKind::MissingKey {
                        path: path.to_string(),
                        key: "field".into(),
                    }
                    .into());
                }
                (ProviderMode::Mismatch, Some(_)) | (_, None) => {}
                (other, Some(_)) => {
                    return Err(invalid(
                        &join(path, "field"),
                        format!(
                            "`field` goes with `mode: mismatch` only, not `{}`",
                            other.as_str()
                        ),
                    ));
                }
            }
            Verb::Provider(p)
        }
        "provider_capture" => Verb::ProviderCapture(decode::<ProviderCapture>(body, path)?),
        "replay" => Verb::Replay(decode(body, path)?),
        "login" => {
            let l: Login = decode(body, path)?;
            if let Some(problem) = l.problem() {
                return Err(invalid(&join(path, "sql"), problem));
            }
            Verb::Login(l)
        }
        "concurrent" => {
            let map = as_mapping(&body, path)?;
            let times: u32 = required(map, "times", path)?;
            if times == 0 {
                return Err(LoadErrorKind::InvalidValue {
                    path: join(path, "times"),
                    message: "times must be at least 1".into(),
                }
                .into());
            }
            let inner_path = join(path, "step");
            let inner_value = map.get("step").ok_or_else(|| LoadErrorKind::MissingKey {
                path: path.to_string(),
                key: "step".into(),
            })?;
            let inner = Step::parse(inner_value, &inner_path)?;
            if matches!(inner.verb, Verb::Concurrent(_)) {
                return Err(LoadErrorKind::InvalidValue {
                    path: inner_path,
                    message: "a concurrent step cannot nest another".into(),
                }
                .into());
            }
            if matches!(inner.verb, Verb::Login(_)) {
                return Err(LoadErrorKind::InvalidValue {
                    path: inner_path,
                    message: "a `login` statement is one statement, not copies at once".into(),
                }
                .into());
            }
            for (present, key) in [
                (inner.name.is_some(), "name"),
                (inner.expect.is_some(), "expect"),
                (inner.wire.is_some(), "wire"),
            ] {
                if present {
                    return Err(LoadErrorKind::UnknownKey {
                        path: inner_path,
                        key: key.into(),
                    }
                    .into());
                }
            }
            Verb::Concurrent(Concurrent {
                times,
                step: Box::new(inner),
            })
        }
        other => {
            return Err(LoadErrorKind::UnknownVerb {
                path: path.to_string(),
                verb: other.to_string(),
            }
            .into());
        }
    })
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Mapping(m) = self.to_value() else {
            unreachable!("to_value always builds a mapping")
        };
        let mut out = serializer.serialize_map(Some(m.len()))?;
        for (k, v) in &m {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Step::parse(&value, "step").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Step, LoadErrorKind> {
        Step::parse(&crate::yaml::from_str(text).unwrap(), "steps[1]").map_err(|e| e.0)
    }

    #[test]
    fn parses_each_verb_and_round_trips() {
        let texts = [
            "{name: p1, propose: {actor: a, body: {sku: X, quantity: 1, purpose: p}}, expect: {decision: allow}}",
            "{approve: {request: p1, approver: h}, expect: {decision: deny, reason: APPROVAL_BY_REQUESTER}}",
            "{name: c1, checkout: {request: p1, actor: a}}",
            "{name: o1, pay: {authority: c1}}",
            "{webhook: {order: o1, amount_paise: 5, signature: missing, created_at_offset_minutes: -3}}",
            "{grant: {id: d, from: h, to: a, budget_paise: 5, skus: [X], expires_at: '2026-09-03T11:00:00Z'}}",
            "{revoke: {delegation: d, actor: h}}",
            "{set_price: {sku: X, price_paise: 7}}",
            "{set_policy: {daily_cap_paise: 1, velocity: {max_proposals: 1, window_minutes: 2}}}",
            "{advance_clock: {minutes: 16}}",
            "{set_clock: {at: '2026-09-04T10:00:00Z'}}",
            "{tenant: globex, cancel: {request: p1, actor: a}}",
            "{expire: {}, expect: {decision: ok}}",
            "{provider: {mode: timeout, times: 1}}",
            "{reconcile: {}}",
            "{provider_capture: {order: o1}}",
            "{replay: {of: o1}}",
            "{concurrent: {times: 3, step: {pay: {authority: c1}}}, expect: {ok: 1, deny: 2}}",
            "{login: {sql: 'UPDATE checkout_authorities SET amount_paise = 1 WHERE id = $c1'}, expect: {refused_by: ck_authority_ttl}}",
        ];
        for (text, verb) in texts.iter().zip(VERBS) {
            let step = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(step.verb.name(), verb);
            let again = Step::parse(&step.to_value(), "x").unwrap();
            assert_eq!(again, step, "{text}");
        }
    }

    #[test]
    fn refuses_zero_two_and_unknown_verbs() {
        assert_eq!(
            parse("{name: x}").unwrap_err(),
            LoadErrorKind::NoVerb {
                path: "steps[1]".into(),
                expected: &VERBS,
            }
        );
        assert!(
            matches!(parse("{propose: {actor: a, raw: x}, approve: {request: p, approver: h}}").unwrap_err(),
            LoadErrorKind::TwoVerbs { verbs, .. } if verbs == ["propose", "approve"])
        );
        assert!(matches!(parse("{purchase: {sku: X}}").unwrap_err(),
            LoadErrorKind::UnknownVerb { verb, .. } if verb == "purchase"));
    }

    #[test]
    fn names_unknown_keys_inside_a_verb() {
        let err = parse("{propose: {actor: a, raw: x, amount_paise: 1}}").unwrap_err();
        assert_eq!(
            err,
            LoadErrorKind::UnknownKey {
                path: "steps[1].propose".into(),
                key: "amount_paise".into()
            }
        );
        let err = parse("{webhook: {order: o1, signature: forged}}").unwrap_err();
        assert!(
            matches!(err, LoadErrorKind::InvalidValue { ref path, ref message }
            if path == "steps[1].webhook" && message.contains("`forged`")),
            "{err:?}"
        );
    }

    #[test]
    fn propose_needs_exactly_one_of_body_raw_and_raw_b64() {
        assert!(parse("{propose: {actor: a}}").is_err());
        assert!(parse("{propose: {actor: a, raw: x, body: {}}}").is_err());
        let both = parse("{propose: {actor: a, raw: x, raw_b64: eA==}}").unwrap_err();
        assert!(
            matches!(&both, LoadErrorKind::InvalidValue { path, message }
                if path == "steps[1].propose" && message.contains("raw_b64")),
            "{both:?}"
        );
        let step = parse("{propose: {actor: a, raw_b64: 'gP8A'}}").unwrap();
        let Verb::Propose(p) = &step.verb else {
            panic!("{step:?}")
        };
        assert_eq!(p.wire_bytes(), vec![0x80, 0xff, 0x00]);
    }

    #[test]
    fn bad_base64_is_refused_where_it_stands() {
        for text in [
            "{propose: {actor: a, raw_b64: 'not base64!'}}",
            "{propose: {actor: a, raw_b64: 'QQ'}}",
            "{webhook: {order: o1, raw_b64: '@@@@'}}",
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(&err, LoadErrorKind::InvalidValue { path, message }
                    if path.ends_with(".raw_b64") && message.contains("base64")),
                "{text}: {err:?}"
            );
        }
        assert!(parse("{webhook: {order: o1, raw: x, raw_b64: eA==}}").is_err());
    }

    #[test]
    fn a_receipt_fills_only_a_body_override() {
        let err = parse("{webhook: {order: o1, receipt: c1}}").unwrap_err();
        assert!(
            matches!(&err, LoadErrorKind::InvalidValue { path, message }
                if path == "steps[1].webhook" && message.contains("`receipt`")),
            "{err:?}"
        );
        let step = parse(
            r#"{webhook: {order: o1, receipt: c1, raw: '{"receipt":"$receipt","r":"$receipt"}'}}"#,
        )
        .unwrap();
        let Verb::Webhook(w) = &step.verb else {
            panic!("{step:?}")
        };
        assert_eq!(
            w.raw_bytes_for(Some("auth_1")).unwrap(),
            br#"{"receipt":"auth_1","r":"auth_1"}"#.to_vec()
        );
        assert_eq!(
            w.raw_bytes().unwrap(),
            br#"{"receipt":"$receipt","r":"$receipt"}"#.to_vec()
        );
        // Without a `receipt` step, the body is sent as written.
        let plain = parse(r#"{webhook: {order: o1, raw: '{"receipt":"$receipt"}'}}"#).unwrap();
        let Verb::Webhook(w) = &plain.verb else {
            panic!("{plain:?}")
        };
        assert_eq!(
            w.raw_bytes_for(Some("auth_1")).unwrap(),
            br#"{"receipt":"$receipt"}"#.to_vec()
        );
    }

    #[test]
    fn the_tenant_may_sit_beside_or_inside_the_verb() {
        let beside = parse("{tenant: globex, propose: {actor: a, raw: x}}").unwrap();
        let inside = parse("{propose: {actor: a, raw: x, tenant: globex}}").unwrap();
        assert_eq!(beside, inside);
        assert_eq!(beside.tenant.as_deref(), Some("globex"));
        let same = parse("{tenant: globex, pay: {authority: c1, tenant: globex}}").unwrap();
        assert_eq!(same.tenant.as_deref(), Some("globex"));
        let two = parse("{tenant: acme, approve: {request: p1, approver: h, tenant: globex}}")
            .unwrap_err();
        assert!(
            matches!(&two, LoadErrorKind::InvalidValue { path, .. } if path == "steps[1].tenant"),
            "{two:?}"
        );
        assert!(
            matches!(parse("{tenant: acme, replay: {of: p1}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "tenant")
        );
        let inner = parse("{concurrent: {times: 2, step: {tenant: globex, pay: {authority: c1}}}}")
            .unwrap();
        let Verb::Concurrent(c) = &inner.verb else {
            panic!()
        };
        assert_eq!(c.step.tenant.as_deref(), Some("globex"));
    }

    #[test]
    fn clock_moves_take_minutes_or_seconds_of_either_sign() {
        let back = parse("{advance_clock: {seconds: -1}}").unwrap();
        let Verb::AdvanceClock(a) = back.verb else {
            panic!()
        };
        assert_eq!(a.duration(), Some(chrono::TimeDelta::seconds(-1)));
        assert!(parse("{advance_clock: {}}").is_err());
        assert!(parse("{advance_clock: {minutes: 1, seconds: 1}}").is_err());
        assert!(parse("{advance_clock: {hours: 1}}").is_err());
        assert!(parse("{set_clock: {at: yesterday}}").is_err());
        // Representable as an i64 but not as a duration: parsed here, refused
        // by the loader's clock bound (see loader tests), never a panic.
        let huge = parse("{advance_clock: {minutes: 9223372036854775807}}").unwrap();
        let Verb::AdvanceClock(a) = huge.verb else {
            panic!()
        };
        assert_eq!(a.duration(), None);
    }

    #[test]
    fn new_verbs_refuse_what_they_do_not_take() {
        assert!(matches!(parse("{expire: {request: p1}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "request"));
        assert!(parse("{expire: }").is_ok());
        assert!(parse("{reconcile: {now: 1}}").is_err());
        let mode = parse("{provider: {mode: flaky}}").unwrap_err();
        assert!(
            matches!(&mode, LoadErrorKind::InvalidValue { path, message }
                if path == "steps[1].provider" && message.contains("flaky")),
            "{mode:?}"
        );
        assert!(parse("{provider: {times: 0}}").is_err());
        assert!(parse("{provider: {}}").is_ok());
        assert!(parse("{cancel: {request: p1}}").is_err());
        assert!(parse("{provider_capture: {order: o1, amount: 5}}").is_err());
    }

    #[test]
    fn wire_blocks_parse_round_trip_and_say_when_a_step_is_wire_only() {
        let only = parse("{approve: {request: p1, approver: finance-lead}, wire: {as: buyer-agent, status: 403, reason: ACTOR_NOT_PERMITTED}}").unwrap();
        assert!(only.wire_only());
        assert_eq!(Step::parse(&only.to_value(), "x").unwrap(), only);
        let both = parse("{name: p1, propose: {actor: a, raw: x}, expect: {decision: allow}, wire: {headers: {X-Tenant-Id: globex}}}").unwrap();
        assert!(!both.wire_only());
        assert_eq!(Step::parse(&both.to_value(), "x").unwrap(), both);
        assert!(!parse("{propose: {actor: a, raw: x}}").unwrap().wire_only());
        for (text, at) in [
            (
                "{propose: {actor: a, raw: x}, wire: {key: none}}",
                "steps[1].wire",
            ),
            (
                "{name: n, propose: {actor: a, raw: x}, wire: {key: none, status: 401}}",
                "steps[1].name",
            ),
            (
                "{propose: {actor: a, raw: x}, wire: {status: 401, reason: NOPE}}",
                "steps[1].wire",
            ),
            ("{replay: {of: p1}, wire: {status: 401}}", "steps[1].wire"),
            (
                "{propose: {actor: a, raw: x}, expect: {decision: allow}, wire: {as: b}}",
                "steps[1].wire",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(&err, LoadErrorKind::InvalidValue { path, .. } if path == at),
                "{text}: {err:?}"
            );
        }
        assert!(
            matches!(parse("{propose: {actor: a, raw: x}, wire: {status: 401, tenant: g}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "tenant")
        );
        assert!(
            matches!(parse("{concurrent: {times: 2, step: {pay: {authority: c}, wire: {status: 401}}}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "wire")
        );
    }

    #[test]
    fn login_steps_take_one_statement_and_a_refusal_or_written_expectation() {
        let step = parse(
            "{login: {sql: 'DELETE FROM x WHERE id = $c1'}, expect: {refused_by: privilege}}",
        )
        .unwrap();
        assert!(step.expects_refusal());
        assert_eq!(step.verb.references(), vec![("sql", "c1")]);
        let written = parse("{login: {sql: 'SELECT 1'}, expect: {decision: ok}}").unwrap();
        assert_eq!(
            written.expect,
            Some(StepExpect::Login(LoginExpect::Written))
        );
        assert!(!written.expects_refusal());
        assert_eq!(Step::parse(&written.to_value(), "x").unwrap(), written);
        for (text, at) in [
            ("{login: {sql: ''}}", "steps[1].login.sql"),
            ("{login: {sql: 'SELECT 1; SELECT 2'}}", "steps[1].login.sql"),
            (
                "{login: {sql: 'SELECT 1'}, expect: {decision: deny}}",
                "steps[1].expect",
            ),
            (
                "{login: {sql: 'SELECT 1'}, expect: {refused_by: 'CK X'}}",
                "steps[1].expect.refused_by",
            ),
            (
                "{login: {sql: 'SELECT 1'}, wire: {status: 200}}",
                "steps[1].wire",
            ),
            (
                "{concurrent: {times: 2, step: {login: {sql: 'SELECT 1'}}}}",
                "steps[1].concurrent.step",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(&err, LoadErrorKind::InvalidValue { path, .. } if path == at),
                "{text}: {err:?}"
            );
        }
        assert!(
            matches!(parse("{login: {sql: 'SELECT 1'}, expect: {refused_by: x, reason: SKU_UNKNOWN}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "reason")
        );
        assert!(
            matches!(parse("{tenant: acme, login: {sql: 'SELECT 1'}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "tenant")
        );
        assert!(
            matches!(parse("{login: {sql: 'SELECT 1', as: x}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "as")
        );
    }

    #[test]
    fn concurrent_rules() {
        assert!(parse("{concurrent: {times: 0, step: {pay: {authority: c}}}}").is_err());
        assert!(parse("{concurrent: {times: 2, step: {concurrent: {times: 2, step: {pay: {authority: c}}}}}}").is_err());
        assert!(
            matches!(parse("{concurrent: {times: 2, step: {pay: {authority: c}, expect: {decision: ok}}}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "expect")
        );
        assert!(
            matches!(parse("{concurrent: {times: 2, step: {pay: {authority: c}}}, expect: {decision: ok}}").unwrap_err(),
            LoadErrorKind::UnknownKey { key, .. } if key == "decision")
        );
    }
}
