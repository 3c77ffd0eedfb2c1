//! An open payment mandate's constraints as the gate's policy keys.
//!
//! Guarantees: every constraint is mapped onto a limit the gate enforces
//! that is at least as strict, or the import is refused
//! `MANDATE_CONSTRAINT_UNKNOWN`; nothing is dropped. The mapping table is
//! in the crate documentation and `docs/ap2-import.md`.

use chrono::{DateTime, NaiveDate, NaiveTime, TimeZone, Utc};
use serde_json::{Map, Value, json};

use crate::error::ImportError;
use crate::json::Json;
use crate::money::{is_currency_code, minor_unit_exponent, to_minor_units};

/// The gate's policy document keys (`gate::policy::Policy`), every one of
/// which a complete policy document has, and no other.
pub const POLICY_KEYS: [&str; 10] = [
    "currency",
    "per_transaction_cap_paise",
    "daily_cap_paise",
    "approval_threshold_paise",
    "allowed_merchants",
    "allowed_categories",
    "valid_from",
    "valid_until",
    "velocity",
    "denial_rate",
];

/// The longest velocity window the gate accepts, in minutes (31 days;
/// `gate::policy::MAX_RATE_WINDOW_MINUTES`).
pub const MAX_WINDOW_MINUTES: u32 = 31 * 24 * 60;

/// The `vct` of an AP2 v0.2 open payment mandate.
pub const OPEN_PAYMENT_MANDATE_VCT: &str = "mandate.payment.open.1";

/// What an imported mandate sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The policy keys the mandate determines, with the gate's names and
    /// types (a subset of [`POLICY_KEYS`]).
    pub policy: Map<String, Value>,
    /// `payment.budget` in minor units: the cumulative total the agent may
    /// spend under this mandate. The gate keeps a cumulative total
    /// atomically per delegation (its budget), so the caller grants the
    /// agent a delegation of at most this; the policy's daily cap is this
    /// too (see [`Mapping::over`]).
    pub delegation_budget_paise: Option<i64>,
    /// The mandate's `exp`, when it has one.
    pub expires_at: Option<DateTime<Utc>>,
}

impl Mapping {
    /// The complete policy document: `base` (a complete policy document,
    /// the tenant's policy in force) with every key the mandate determines
    /// replaced, except the daily cap, which becomes the lower of the
    /// base's and the budget (a cumulative budget bounds every day's spend
    /// too; it does not raise the base's daily cap). The mandate's currency
    /// must be the base's: the base's other amounts are in it.
    pub fn over(&self, base: &Map<String, Value>) -> Result<Map<String, Value>, ImportError> {
        for key in base.keys() {
            if !POLICY_KEYS.contains(&key.as_str()) {
                return Err(ImportError::Invalid(format!(
                    "the base policy has the key {key:?}, which is not one of the gate's policy keys"
                )));
            }
        }
        if let Some(missing) = POLICY_KEYS.iter().find(|k| !base.contains_key(**k)) {
            return Err(ImportError::Invalid(format!(
                "the base policy has no {missing:?}: give a complete policy document"
            )));
        }
        if let (Some(ours), Some(theirs)) = (self.policy.get("currency"), base.get("currency"))
            && ours != theirs
        {
            return Err(ImportError::CurrencyMismatch(format!(
                "the mandate is in {ours}, the base policy's amounts in {theirs}"
            )));
        }
        let mut out = base.clone();
        for (key, value) in &self.policy {
            let value = match (key.as_str(), value.as_i64(), base[key].as_i64()) {
                ("daily_cap_paise", Some(budget), Some(daily)) => json!(budget.min(daily)),
                ("daily_cap_paise", _, None) => {
                    return Err(ImportError::Invalid(
                        "the base policy's daily_cap_paise is not a whole number".into(),
                    ));
                }
                _ => value.clone(),
            };
            out.insert(key.clone(), value);
        }
        let instant = |key: &str| {
            out.get(key)
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
        };
        match (instant("valid_from"), instant("valid_until")) {
            (Some(from), Some(until)) if from < until => Ok(out),
            (Some(from), Some(until)) => Err(ImportError::Invalid(format!(
                "the policy's window would be empty: from {} until {}",
                rfc3339(from),
                rfc3339(until)
            ))),
            _ => Err(ImportError::Invalid(
                "the base policy's valid_from and valid_until must be RFC 3339 instants".into(),
            )),
        }
    }
}

/// The constraint types this import maps.
const AMOUNT_RANGE: &str = "payment.amount_range";
const BUDGET: &str = "payment.budget";
const ALLOWED_PAYEES: &str = "payment.allowed_payees";
const EXECUTION_DATE: &str = "payment.execution_date";
const AGENT_RECURRENCE: &str = "payment.agent_recurrence";

/// Maps the verified, disclosure-resolved payload of an AP2 SD-JWT. `now`
/// judges `exp`.
pub(crate) fn map_payload(payload: &Json, now: DateTime<Utc>) -> Result<Mapping, ImportError> {
    let mandate = open_payment_mandate(payload)?;
    let expires_at = match mandate.get("exp") {
        None => None,
        Some(exp) => Some(epoch(exp, "exp")?),
    };
    if let Some(exp) = expires_at
        && now > exp
    {
        return Err(ImportError::Expired(exp));
    }
    let Some(Json::Array(constraints)) = mandate.get("constraints") else {
        return Err(ImportError::NotOpenPaymentMandate(
            "constraints is missing or not an array".into(),
        ));
    };
    let mut by_type: Vec<(&str, &[(String, Json)])> = Vec::new();
    for constraint in constraints {
        let Json::Object(members) = constraint else {
            return Err(ImportError::NotOpenPaymentMandate(format!(
                "a constraint is {}, not an object",
                constraint.kind()
            )));
        };
        let Some(kind) = constraint.get("type").and_then(Json::as_str) else {
            return Err(ImportError::NotOpenPaymentMandate(
                "a constraint has no type".into(),
            ));
        };
        if ![
            AMOUNT_RANGE,
            BUDGET,
            ALLOWED_PAYEES,
            EXECUTION_DATE,
            AGENT_RECURRENCE,
        ]
        .contains(&kind)
        {
            return Err(unknown_constraint(kind));
        }
        if by_type.iter().any(|(k, _)| *k == kind) {
            return Err(ImportError::Invalid(format!(
                "{kind} appears twice; a mandate states each limit once"
            )));
        }
        by_type.push((kind, members));
    }
    let find = |kind: &str| by_type.iter().find(|(k, _)| *k == kind).map(|(_, m)| *m);

    let mut policy = Map::new();
    let mut currency: Option<String> = None;
    let mut delegation_budget_paise = None;

    if let Some(range) = find(AMOUNT_RANGE) {
        let c = fields(AMOUNT_RANGE, range, &["currency", "max"], &["min"])?;
        let code = currency_of(AMOUNT_RANGE, c["currency"])?;
        let max = to_minor_units(c["max"], 0, "payment.amount_range.max", &code)?;
        if let Some(min) = c.get("min") {
            let min = to_minor_units(min, 0, "payment.amount_range.min", &code)?;
            if min > 0 {
                return Err(ImportError::unknown(
                    "payment.amount_range.min",
                    format!(
                        "a minimum of {min} minor units: the gate has no lower bound on an amount"
                    ),
                ));
            }
        }
        policy.insert("currency".into(), json!(code));
        policy.insert("per_transaction_cap_paise".into(), json!(max));
        currency = Some(code);
    }

    if let Some(budget) = find(BUDGET) {
        let c = fields(BUDGET, budget, &["currency", "max"], &[])?;
        let code = currency_of(BUDGET, c["currency"])?;
        if let Some(range_currency) = &currency
            && *range_currency != code
        {
            return Err(ImportError::CurrencyMismatch(format!(
                "payment.budget is in {code}, payment.amount_range in {range_currency}"
            )));
        }
        let max = to_minor_units(
            c["max"],
            minor_unit_exponent(&code),
            "payment.budget.max",
            &code,
        )?;
        policy.insert("currency".into(), json!(code));
        policy.insert("daily_cap_paise".into(), json!(max));
        delegation_budget_paise = Some(max);
    }

    if let Some(payees) = find(ALLOWED_PAYEES) {
        let c = fields(ALLOWED_PAYEES, payees, &["allowed"], &[])?;
        let Json::Array(allowed) = c["allowed"] else {
            return Err(ImportError::NotOpenPaymentMandate(
                "payment.allowed_payees.allowed is not an array".into(),
            ));
        };
        let mut ids: Vec<String> = Vec::new();
        for merchant in allowed {
            let id = merchant_id(merchant)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        policy.insert("allowed_merchants".into(), json!(ids));
    }

    let mut valid_from = None;
    let mut valid_until = expires_at;
    if let Some(window) = find(EXECUTION_DATE) {
        let c = fields(EXECUTION_DATE, window, &[], &["not_before", "not_after"])?;
        if let Some(from) = c.get("not_before") {
            valid_from = Some(instant(
                from,
                "payment.execution_date.not_before",
                Edge::Start,
            )?);
        }
        if let Some(until) = c.get("not_after") {
            let until = instant(until, "payment.execution_date.not_after", Edge::End)?;
            valid_until = Some(valid_until.map_or(until, |exp: DateTime<Utc>| exp.min(until)));
        }
    }
    if let (Some(from), Some(until)) = (valid_from, valid_until)
        && from >= until
    {
        return Err(ImportError::Invalid(format!(
            "the mandate's window is empty: from {} until {}",
            from.to_rfc3339(),
            until.to_rfc3339()
        )));
    }
    if let Some(from) = valid_from {
        policy.insert("valid_from".into(), json!(rfc3339(from)));
    }
    if let Some(until) = valid_until {
        policy.insert("valid_until".into(), json!(rfc3339(until)));
    }

    if let Some(recurrence) = find(AGENT_RECURRENCE) {
        // AP2: a recurring mandate must bound each payment and the total.
        for needed in [AMOUNT_RANGE, BUDGET] {
            if find(needed).is_none() {
                return Err(ImportError::Invalid(format!(
                    "payment.agent_recurrence requires a {needed} constraint"
                )));
            }
        }
        let c = fields(
            AGENT_RECURRENCE,
            recurrence,
            &["frequency"],
            &["max_occurrences"],
        )?;
        if let Some(max) = c.get("max_occurrences") {
            let max = occurrences(max)?;
            let window = recurrence_window(c["frequency"], valid_from, valid_until)?;
            policy.insert(
                "velocity".into(),
                json!({"max_proposals": max, "window_minutes": window}),
            );
        } else {
            // A frequency without a count limits nothing; it must still be
            // one AP2 defines.
            recurrence_window(c["frequency"], valid_from, valid_until).or_else(|e| match e {
                ImportError::ConstraintUnknown { .. } => Ok(0),
                other => Err(other),
            })?;
        }
    }

    Ok(Mapping {
        policy,
        delegation_budget_paise,
        expires_at,
    })
}

/// The mandate object of an AP2 SD-JWT payload: the one element of
/// `delegate_payload`, an open payment mandate whose every claim this
/// import understands.
fn open_payment_mandate(payload: &Json) -> Result<&Json, ImportError> {
    let not = |why: &str| ImportError::NotOpenPaymentMandate(why.to_owned());
    let mandate = match payload.get("delegate_payload") {
        Some(Json::Array(items)) => match &items[..] {
            [one @ Json::Object(_)] => one,
            _ => {
                return Err(not(
                    "delegate_payload must hold exactly one disclosed mandate",
                ));
            }
        },
        _ => return Err(not("no delegate_payload array")),
    };
    match mandate.get("vct").and_then(Json::as_str) {
        Some(OPEN_PAYMENT_MANDATE_VCT) => {}
        Some(other) => {
            return Err(not(&format!(
                "vct is {other:?}, not {OPEN_PAYMENT_MANDATE_VCT:?}"
            )));
        }
        None => return Err(not("no vct")),
    }
    if !matches!(mandate.get("cnf"), Some(Json::Object(_))) {
        return Err(not("no cnf (the agent's key the mandate binds)"));
    }
    let Json::Object(members) = mandate else {
        return Err(not("the mandate is not an object"));
    };
    for (key, _) in members {
        match key.as_str() {
            "vct" | "constraints" | "cnf" | "iat" | "exp" | "risk_data" => {}
            "payee" | "payment_amount" | "payment_instrument" | "pisp" | "execution_date" => {
                return Err(ImportError::unknown(
                    format!("the pre-set claim {key}"),
                    "it fixes one payment's value; the gate's policy bounds payments, it does not fix one",
                ));
            }
            other => {
                return Err(ImportError::unknown(
                    format!("the claim {other}"),
                    "AP2 v0.2 defines no such claim of an open payment mandate",
                ));
            }
        }
    }
    Ok(mandate)
}

fn unknown_constraint(kind: &str) -> ImportError {
    let why = match kind {
        "payment.reference" => {
            "it binds payments to one checkout mandate's digest; the gate binds an authority to a purchase it derives itself, never to an AP2 checkout"
        }
        "payment.allowed_payment_instruments" => {
            "the gate does not choose or restrict the payment instrument"
        }
        "payment.allowed_pisps" => "the gate does not restrict the payment initiation provider",
        _ => "not a constraint this import maps",
    };
    ImportError::unknown(kind, why)
}

/// The members of a constraint by name: `required` ones present, none but
/// `required`, `optional` and `type`.
fn fields<'a>(
    kind: &str,
    members: &'a [(String, Json)],
    required: &[&str],
    optional: &[&str],
) -> Result<std::collections::BTreeMap<&'a str, &'a Json>, ImportError> {
    let mut out = std::collections::BTreeMap::new();
    for (key, value) in members {
        if key == "type" {
            continue;
        }
        if !required.contains(&key.as_str()) && !optional.contains(&key.as_str()) {
            return Err(ImportError::unknown(
                format!("{kind}.{key}"),
                "AP2 v0.2 defines no such member of this constraint",
            ));
        }
        out.insert(key.as_str(), value);
    }
    if let Some(missing) = required.iter().find(|r| !out.contains_key(**r)) {
        return Err(ImportError::NotOpenPaymentMandate(format!(
            "{kind} has no {missing}"
        )));
    }
    Ok(out)
}

fn currency_of(kind: &str, value: &Json) -> Result<String, ImportError> {
    match value.as_str() {
        Some(code) if is_currency_code(code) => Ok(code.to_owned()),
        _ => Err(ImportError::Invalid(format!(
            "{kind}.currency is {}, not an ISO 4217 code",
            value.shown()
        ))),
    }
}

fn merchant_id(merchant: &Json) -> Result<String, ImportError> {
    if !matches!(merchant, Json::Object(_)) {
        return Err(ImportError::NotOpenPaymentMandate(format!(
            "an allowed payee is {}, not a merchant object",
            merchant.kind()
        )));
    }
    match merchant.get("id").and_then(Json::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(ImportError::unknown(
            "payment.allowed_payees (a payee without an id)",
            "the gate names a merchant by its id; matching by name and website has no counterpart",
        )),
    }
}

/// A Unix time in whole seconds.
fn epoch(value: &Json, field: &str) -> Result<DateTime<Utc>, ImportError> {
    let bad = || ImportError::Invalid(format!("{field} is {}, not a Unix time", value.shown()));
    let Json::Number(text) = value else {
        return Err(bad());
    };
    let seconds: i64 = text.parse().map_err(|_| bad())?;
    Utc.timestamp_opt(seconds, 0).single().ok_or_else(bad)
}

#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

/// An RFC 3339 instant, or a calendar date: its first second for a window's
/// start, its last (23:59:59, the gate's windows being inclusive) for its
/// end. A date and time without an offset is refused (which zone it means
/// is not written).
fn instant(value: &Json, field: &str, edge: Edge) -> Result<DateTime<Utc>, ImportError> {
    let bad = || {
        ImportError::Invalid(format!(
            "{field} is {}, neither an RFC 3339 instant nor a date (YYYY-MM-DD)",
            value.shown()
        ))
    };
    let text = value.as_str().ok_or_else(bad)?;
    let at = if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        at.with_timezone(&Utc)
    } else if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let time = match edge {
            Edge::Start => NaiveTime::MIN,
            Edge::End => NaiveTime::from_hms_opt(23, 59, 59).ok_or_else(bad)?,
        };
        Utc.from_utc_datetime(&date.and_time(time))
    } else {
        return Err(bad());
    };
    let year = chrono::Datelike::year(&at);
    if !(1970..=9999).contains(&year) {
        return Err(bad());
    }
    Ok(at)
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

fn occurrences(value: &Json) -> Result<u32, ImportError> {
    match value {
        Json::Number(text) => text.parse::<u32>().map_err(|_| {
            ImportError::Invalid(format!(
                "payment.agent_recurrence.max_occurrences is {text}, not a count"
            ))
        }),
        other => Err(ImportError::Invalid(format!(
            "payment.agent_recurrence.max_occurrences is {}, not a count",
            other.kind()
        ))),
    }
}

/// The velocity window for a recurrence frequency: a sliding window as
/// long as the longest period of that frequency, which counts at least
/// what AP2's calendar period counts. `ON_DEMAND` counts over the
/// mandate's whole life, which a window can hold only when the mandate's
/// own window is at most 31 days.
fn recurrence_window(
    frequency: &Json,
    from: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
) -> Result<u32, ImportError> {
    const DAY: u32 = 24 * 60;
    let kind = "payment.agent_recurrence";
    match frequency.as_str() {
        Some("DAILY") => Ok(DAY),
        Some("WEEKLY") => Ok(7 * DAY),
        Some("BIWEEKLY") => Ok(14 * DAY),
        Some("MONTHLY") => Ok(31 * DAY),
        Some(f @ ("QUARTERLY" | "ANNUALLY")) => Err(ImportError::unknown(
            format!("{kind} {f}"),
            "the gate's longest velocity window is 31 days",
        )),
        Some("ON_DEMAND") => {
            let (Some(from), Some(until)) = (from, until) else {
                return Err(ImportError::unknown(
                    format!("{kind} ON_DEMAND"),
                    "a count over the mandate's whole life needs the mandate to have a start and an end",
                ));
            };
            // Whole minutes covering the window, its last instant included.
            let minutes = ((until - from).num_seconds() + 59) / 60 + 1;
            u32::try_from(minutes)
                .ok()
                .filter(|m| *m <= MAX_WINDOW_MINUTES)
                .ok_or_else(|| {
                    ImportError::unknown(
                        format!("{kind} ON_DEMAND"),
                        "the mandate lives longer than the gate's longest velocity window (31 days)",
                    )
                })
        }
        _ => Err(ImportError::NotOpenPaymentMandate(format!(
            "{kind}.frequency is {}, not one AP2 defines",
            frequency.shown()
        ))),
    }
}
