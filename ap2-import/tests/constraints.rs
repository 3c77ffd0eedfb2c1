//! AP2's constraint tests (`code/sdk/python/ap2/tests/constraints_tests.py`
//! and `agent_recurrence_tests.py`), by name, each asserting what this
//! crate maps the constraint onto, or that it refuses it. Where AP2 checks
//! a payment against the constraint, the test here pins the gate limit
//! that makes the same check (inclusive, as AP2's are).

mod common;

use ap2_import::{
    ImportError, MANDATE_CONSTRAINT_UNKNOWN, MANDATE_SIGNATURE_INVALID, POLICY_EXPIRED,
    POLICY_INVALID,
};
use common::{import, keys, standard_policy};
use serde_json::json;

fn reason(constraints: &[&str]) -> &'static str {
    match import(constraints) {
        Ok(mapping) => panic!("imported: {:?}", mapping.policy),
        Err(e) => e.reason(),
    }
}

// ── amount_range ─────────────────────────────────────────────────────────

#[test]
fn payment_empty_constraints() {
    let mapping = import(&[]).unwrap();
    assert_eq!(keys(&mapping), json!({}));
    assert_eq!(mapping.delegation_budget_paise, None);
    // Over a base policy, nothing changes.
    assert_eq!(mapping.over(&standard_policy()).unwrap(), standard_policy());
}

#[test]
fn payment_amount_below_min() {
    // A minimum above zero has no counterpart: the gate bounds amounts
    // from above only, and dropping the minimum would widen the mandate.
    let refused =
        import(&[r#"{"type":"payment.amount_range","currency":"INR","min":1000,"max":5000}"#])
            .unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN);
    assert!(
        refused.to_string().contains("payment.amount_range.min"),
        "{refused}"
    );
}

#[test]
fn payment_amount_above_max() {
    // AP2 refuses 6000 against max 5000; the gate's per-transaction cap
    // (AMOUNT_EXCEEDS_TRANSACTION_CAP above it) is that max.
    let mapping =
        import(&[r#"{"type":"payment.amount_range","currency":"INR","max":5000}"#]).unwrap();
    assert_eq!(
        keys(&mapping),
        json!({"currency": "INR", "per_transaction_cap_paise": 5000})
    );
}

#[test]
fn payment_amount_currency_mismatch() {
    // A USD range over an INR policy: the base's other amounts are INR.
    let mapping =
        import(&[r#"{"type":"payment.amount_range","currency":"USD","max":50000}"#]).unwrap();
    let refused = mapping.over(&standard_policy()).unwrap_err();
    assert!(
        matches!(refused, ImportError::CurrencyMismatch(_)),
        "{refused}"
    );
    assert_eq!(refused.reason(), POLICY_INVALID);
    // A range and a budget in two currencies.
    assert_eq!(
        reason(&[
            r#"{"type":"payment.amount_range","currency":"INR","max":50000}"#,
            r#"{"type":"payment.budget","currency":"EUR","max":10.0}"#,
        ]),
        POLICY_INVALID
    );
    // Not a currency code at all.
    assert_eq!(
        reason(&[r#"{"type":"payment.amount_range","currency":"rupees","max":50000}"#]),
        POLICY_INVALID
    );
}

#[test]
fn payment_amount_no_min() {
    for range in [
        r#"{"type":"payment.amount_range","currency":"INR","max":2000}"#,
        r#"{"type":"payment.amount_range","currency":"INR","max":2000,"min":0}"#,
    ] {
        let policy = import(&[range]).unwrap().over(&standard_policy()).unwrap();
        assert_eq!(policy["per_transaction_cap_paise"], json!(2000));
        assert_eq!(policy["daily_cap_paise"], json!(500000));
    }
}

#[test]
fn payment_amount_boundary_passes() {
    // AP2's cases with a zero minimum (the others carry a minimum above
    // zero, refused above): the cap is the max itself, inclusive as the
    // gate's caps are, never one less.
    for (max, text) in [(5000_i64, "5000"), (999_999_999, "999999999"), (0, "0")] {
        let mapping = import(&[&format!(
            r#"{{"type":"payment.amount_range","currency":"INR","min":0,"max":{text}}}"#
        )])
        .unwrap();
        assert_eq!(mapping.policy["per_transaction_cap_paise"], json!(max));
    }
    // The largest amount the gate holds, and one more.
    let max =
        import(&[r#"{"type":"payment.amount_range","currency":"INR","max":9223372036854775807}"#])
            .unwrap();
    assert_eq!(max.policy["per_transaction_cap_paise"], json!(i64::MAX));
    assert_eq!(
        reason(&[r#"{"type":"payment.amount_range","currency":"INR","max":9223372036854775808}"#]),
        POLICY_INVALID
    );
}

#[test]
fn payment_amount_max_with_a_fraction_of_a_minor_unit_is_refused() {
    // amount_range.max is in minor units: 0.295 paise, and the 100.50 of
    // AP2's own documentation example, are fractions of one.
    for max in ["0.295", "100.50", "-5", "\"5000\""] {
        let refused = import(&[&format!(
            r#"{{"type":"payment.amount_range","currency":"INR","max":{max}}}"#
        )])
        .unwrap_err();
        assert_eq!(refused.reason(), POLICY_INVALID, "{max}: {refused}");
    }
    assert!(matches!(
        import(&[r#"{"type":"payment.amount_range","currency":"INR","max":0.295}"#]),
        Err(ImportError::MoneyFraction { .. })
    ));
}

// ── allowed_payees ───────────────────────────────────────────────────────

#[test]
fn merchant_matches() {
    // by_id: the gate's allowlist names merchants by id.
    let mapping = import(&[
        r#"{"type":"payment.allowed_payees","allowed":[{"id":"cloudco","name":"A","website":"https://a.example"}]}"#,
    ])
    .unwrap();
    assert_eq!(mapping.policy["allowed_merchants"], json!(["cloudco"]));
}

#[test]
fn merchant_no_match() {
    // by_name_and_website has no counterpart: a payee without an id.
    for payee in [
        r#"{"id":"","name":"Shop","website":"https://shop.example"}"#,
        r#"{"name":"Shop","website":"https://shop.example"}"#,
    ] {
        let refused = import(&[&format!(
            r#"{{"type":"payment.allowed_payees","allowed":[{payee}]}}"#
        )])
        .unwrap_err();
        assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
    }
}

#[test]
fn payment_allowed_payee_match_by_id() {
    let mapping = import(&[
        r#"{"type":"payment.allowed_payees","allowed":[{"id":"snackshop","name":"Snacks"},{"id":"cloudco","name":"Cloud"},{"id":"snackshop","name":"Snacks again"}]}"#,
    ])
    .unwrap();
    assert_eq!(
        mapping.policy["allowed_merchants"],
        json!(["snackshop", "cloudco"])
    );
}

#[test]
fn payment_allowed_payee_not_in_list() {
    // The mandate's list replaces the base's: cloudco, allowed by the base,
    // is not in the mandate's list and so not allowed (MERCHANT_NOT_ALLOWED).
    let policy = import(&[
        r#"{"type":"payment.allowed_payees","allowed":[{"id":"snackshop","name":"Snacks"}]}"#,
    ])
    .unwrap()
    .over(&standard_policy())
    .unwrap();
    assert_eq!(policy["allowed_merchants"], json!(["snackshop"]));
}

#[test]
fn payment_allowed_payees_withheld_by_the_holder_narrow_the_list() {
    // AP2 makes payees selectively disclosable: one the token does not
    // disclose is not allowed.
    let human = common::human();
    let (cloud, cloud_digest) =
        common::disclosure("s1", None, r#"{"id":"cloudco","name":"Cloud"}"#);
    let (_, withheld_digest) =
        common::disclosure("s2", None, r#"{"id":"gadgetmart","name":"Gadgets"}"#);
    let mandate = common::open_mandate(
        &[&format!(
            r#"{{"type":"payment.allowed_payees","allowed":[{{"...":"{cloud_digest}"}},{{"...":"{withheld_digest}"}}]}}"#
        )],
        None,
    );
    let token = human.token(&mandate, &[cloud]);
    let mapping = ap2_import::import(&token, &human.issuer_key(), common::now()).unwrap();
    assert_eq!(mapping.policy["allowed_merchants"], json!(["cloudco"]));
}

#[test]
fn payment_multiple_constraints() {
    let mapping = import(&[
        r#"{"type":"payment.amount_range","currency":"INR","max":500}"#,
        r#"{"type":"payment.allowed_payees","allowed":[{"id":"cloudco","name":"Cloud"}]}"#,
        r#"{"type":"payment.execution_date","not_before":"2026-09-01","not_after":"2026-09-30"}"#,
        r#"{"type":"payment.budget","currency":"INR","max":40.00}"#,
        r#"{"type":"payment.agent_recurrence","frequency":"WEEKLY","max_occurrences":4}"#,
    ])
    .unwrap();
    assert_eq!(
        keys(&mapping),
        json!({
            "currency": "INR",
            "per_transaction_cap_paise": 500,
            "daily_cap_paise": 4000,
            "allowed_merchants": ["cloudco"],
            "valid_from": "2026-09-01T00:00:00Z",
            "valid_until": "2026-09-30T23:59:59Z",
            "velocity": {"max_proposals": 4, "window_minutes": 10080},
        })
    );
    assert_eq!(mapping.delegation_budget_paise, Some(4000));
    let policy = mapping.over(&standard_policy()).unwrap();
    assert_eq!(policy["approval_threshold_paise"], json!(100000));
    assert_eq!(
        policy["allowed_categories"],
        json!(["cloud-credits", "food"])
    );
    assert_eq!(
        policy["denial_rate"],
        json!({"max_denials": 5, "window_minutes": 60})
    );
    assert_eq!(policy.len(), 10);
}

#[test]
fn a_constraint_given_twice_is_refused() {
    assert_eq!(
        reason(&[
            r#"{"type":"payment.amount_range","currency":"INR","max":500}"#,
            r#"{"type":"payment.amount_range","currency":"INR","max":50000}"#,
        ]),
        POLICY_INVALID
    );
}

// ── reference, instruments, PISPs: no counterpart ───────────────────────

#[test]
fn payment_reference_match() {
    // However it would match, the gate cannot bind a payment to an AP2
    // checkout mandate's digest.
    let refused =
        import(&[r#"{"type":"payment.reference","conditional_transaction_id":"A4wG4B"}"#])
            .unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN);
    assert!(
        refused.to_string().contains("payment.reference"),
        "{refused}"
    );
}

#[test]
fn payment_reference_mismatch() {
    // Alongside constraints that map, the reference still refuses the whole
    // mandate: nothing is published.
    assert_eq!(
        reason(&[
            r#"{"type":"payment.amount_range","currency":"INR","max":500}"#,
            r#"{"type":"payment.reference","conditional_transaction_id":"other"}"#,
        ]),
        MANDATE_CONSTRAINT_UNKNOWN
    );
}

#[test]
fn payment_allowed_payment_instrument_match() {
    assert_eq!(
        reason(&[
            r#"{"type":"payment.allowed_payment_instruments","allowed":[{"id":"pi-1","type":"credit"}]}"#
        ]),
        MANDATE_CONSTRAINT_UNKNOWN
    );
}

#[test]
fn payment_allowed_pisp_match() {
    assert_eq!(
        reason(&[
            r#"{"type":"payment.allowed_pisps","allowed":[{"legal_name":"P","brand_name":"P","domain_name":"p.example"}]}"#
        ]),
        MANDATE_CONSTRAINT_UNKNOWN
    );
}

#[test]
fn an_unknown_constraint_type_is_refused() {
    for kind in [
        "payment.spending_limit",
        "payment.AMOUNT_RANGE",
        "checkout.line_items",
        "",
    ] {
        let refused = import(&[&format!(r#"{{"type":"{kind}","max":1}}"#)]).unwrap_err();
        assert_eq!(
            refused.reason(),
            MANDATE_CONSTRAINT_UNKNOWN,
            "{kind}: {refused}"
        );
    }
    // A member AP2 does not define, inside a type that maps.
    assert_eq!(
        reason(&[
            r#"{"type":"payment.amount_range","currency":"INR","max":500,"max_per_day":100}"#
        ]),
        MANDATE_CONSTRAINT_UNKNOWN
    );
    // A constraint without a type is no open payment mandate.
    assert_eq!(reason(&[r#"{"max":500}"#]), POLICY_INVALID);
}

// ── budget ───────────────────────────────────────────────────────────────

#[test]
fn payment_budget_within_limit() {
    // 15.0 major units is 1500 minor units: the delegation's budget, and
    // the daily cap where it is below the base's.
    let mapping = import(&[r#"{"type":"payment.budget","currency":"INR","max":15.0}"#]).unwrap();
    assert_eq!(mapping.delegation_budget_paise, Some(1500));
    assert_eq!(mapping.policy["daily_cap_paise"], json!(1500));
    assert_eq!(
        mapping.over(&standard_policy()).unwrap()["daily_cap_paise"],
        json!(1500)
    );
}

#[test]
fn payment_budget_exceeds_limit() {
    // A budget above the base's daily cap does not raise it.
    let mapping =
        import(&[r#"{"type":"payment.budget","currency":"INR","max":10000.00}"#]).unwrap();
    assert_eq!(mapping.delegation_budget_paise, Some(1_000_000));
    assert_eq!(
        mapping.over(&standard_policy()).unwrap()["daily_cap_paise"],
        json!(500000)
    );
}

#[test]
fn payment_budget_cumulative_exceeds_limit() {
    // AP2 refuses 600 spent + 1000 asked against 15.00: the cumulative total
    // is the delegation's budget, which the gate keeps atomically over the
    // delegation's life (not reset each day as the daily cap is).
    let mapping = import(&[r#"{"type":"payment.budget","currency":"INR","max":15.00}"#]).unwrap();
    assert_eq!(mapping.delegation_budget_paise, Some(1500));
}

#[test]
fn payment_budget_currency_mismatch() {
    let refused = import(&[
        r#"{"type":"payment.amount_range","currency":"INR","max":1000}"#,
        r#"{"type":"payment.budget","currency":"EUR","max":10.0}"#,
    ])
    .unwrap_err();
    assert!(
        matches!(refused, ImportError::CurrencyMismatch(_)),
        "{refused}"
    );
    // A budget alone in another currency than the base policy's.
    let mapping = import(&[r#"{"type":"payment.budget","currency":"EUR","max":10.0}"#]).unwrap();
    assert!(matches!(
        mapping.over(&standard_policy()),
        Err(ImportError::CurrencyMismatch(_))
    ));
}

#[test]
fn payment_budget_maps_exactly_where_the_reference_sdk_rounds_down() {
    // int(max * 100) on a float: 0.29 -> 28, 0.57 -> 56, 1.13 -> 112.
    for (text, minor) in [("0.29", 29), ("0.57", 57), ("1.13", 113), ("1.13e0", 113)] {
        let mapping = import(&[&format!(
            r#"{{"type":"payment.budget","currency":"INR","max":{text}}}"#
        )])
        .unwrap();
        assert_eq!(mapping.delegation_budget_paise, Some(minor), "{text}");
        assert_eq!(mapping.policy["daily_cap_paise"], json!(minor), "{text}");
    }
}

#[test]
fn payment_budget_fraction_of_a_minor_unit_is_refused() {
    for text in ["0.295", "0.2900000000000000001", "1.135"] {
        let refused = import(&[&format!(
            r#"{{"type":"payment.budget","currency":"INR","max":{text}}}"#
        )])
        .unwrap_err();
        assert!(
            matches!(&refused, ImportError::MoneyFraction { text: t, .. } if t == text),
            "{text}: {refused}"
        );
        assert_eq!(refused.reason(), POLICY_INVALID);
    }
}

#[test]
fn payment_budget_minor_units_follow_the_currency() {
    let cases = [
        ("JPY", "100", Some(100)),
        ("JPY", "100.5", None),
        ("KWD", "1.234", Some(1234)),
    ];
    for (currency, text, minor) in cases {
        let result = import(&[&format!(
            r#"{{"type":"payment.budget","currency":"{currency}","max":{text}}}"#
        )]);
        assert_eq!(
            result.as_ref().ok().and_then(|m| m.delegation_budget_paise),
            minor,
            "{currency} {text}: {result:?}"
        );
    }
}

// ── execution_date ───────────────────────────────────────────────────────

const WINDOW_2025: &str =
    r#"{"type":"payment.execution_date","not_before":"2025-01-01","not_after":"2025-12-31"}"#;

#[test]
fn payment_execution_date_within_window() {
    let mapping = import(&[WINDOW_2025]).unwrap();
    assert_eq!(
        keys(&mapping),
        json!({"valid_from": "2025-01-01T00:00:00Z", "valid_until": "2025-12-31T23:59:59Z"})
    );
}

#[test]
fn payment_execution_date_before_window() {
    // AP2 refuses 2024-12-31: the window starts at 2025-01-01's first
    // second, so the gate answers POLICY_NOT_YET_VALID before it.
    let mapping = import(&[WINDOW_2025]).unwrap();
    let from: chrono::DateTime<chrono::Utc> = mapping.policy["valid_from"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let last_second_before: chrono::DateTime<chrono::Utc> = "2024-12-31T23:59:59Z".parse().unwrap();
    assert_eq!(from - last_second_before, chrono::Duration::seconds(1));
}

#[test]
fn payment_execution_date_after_window() {
    // 2026-01-01 is after the window's last second (POLICY_EXPIRED).
    let mapping = import(&[WINDOW_2025]).unwrap();
    assert_eq!(mapping.policy["valid_until"], json!("2025-12-31T23:59:59Z"));
}

#[test]
fn payment_execution_date_missing_passes() {
    // No window in the mandate: the base policy's window stays.
    let policy = import(&[r#"{"type":"payment.amount_range","currency":"INR","max":500}"#])
        .unwrap()
        .over(&standard_policy())
        .unwrap();
    assert_eq!(policy["valid_from"], json!("2026-01-01T00:00:00Z"));
    assert_eq!(policy["valid_until"], json!("2026-12-31T23:59:59Z"));
}

#[test]
fn payment_execution_date_instants_and_exp() {
    // RFC 3339 instants in any offset, and exp ending the window earlier.
    let human = common::human();
    let mandate = common::open_mandate(
        &[
            r#"{"type":"payment.execution_date","not_before":"2026-09-01T05:30:00+05:30","not_after":"2026-12-31T23:59:59Z"}"#,
        ],
        Some(1_790_000_000), // 2026-09-21T14:13:20Z
    );
    let token = human.token(&mandate, &[]);
    let mapping = ap2_import::import(&token, &human.issuer_key(), common::now()).unwrap();
    assert_eq!(
        keys(&mapping),
        json!({"valid_from": "2026-09-01T00:00:00Z", "valid_until": "2026-09-21T14:13:20Z"})
    );
}

#[test]
fn payment_execution_date_unreadable_or_empty_is_refused() {
    for window in [
        r#"{"type":"payment.execution_date","not_before":"yesterday"}"#,
        r#"{"type":"payment.execution_date","not_before":"2026-09-01T00:00:00"}"#,
        r#"{"type":"payment.execution_date","not_before":"2026-13-01"}"#,
        r#"{"type":"payment.execution_date","not_before":"2026-10-01","not_after":"2026-09-01"}"#,
        r#"{"type":"payment.execution_date","not_before":"10000-01-01"}"#,
    ] {
        assert_eq!(reason(&[window]), POLICY_INVALID, "{window}");
    }
}

// ── pre-set claims ───────────────────────────────────────────────────────

fn with_claim(claim: &str) -> Result<ap2_import::Mapping, ImportError> {
    let human = common::human();
    let mandate = common::open_mandate(&[], None);
    let mandate = format!("{},{claim}}}", &mandate[..mandate.len() - 1]);
    let token = human.token(&mandate, &[]);
    ap2_import::import(&token, &human.issuer_key(), common::now())
}

#[test]
fn preset_payee_mismatch() {
    let refused = with_claim(r#""payee":{"id":"s-1","name":"Shop"}"#).unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
}

#[test]
fn preset_amount_mismatch() {
    let refused = with_claim(r#""payment_amount":{"amount":1000,"currency":"INR"}"#).unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
}

#[test]
fn preset_payment_instrument_mismatch() {
    let refused = with_claim(r#""payment_instrument":{"id":"pi-1","type":"credit"}"#).unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
}

#[test]
fn preset_execution_date_mismatch() {
    let refused = with_claim(r#""execution_date":"2025-01-01""#).unwrap_err();
    assert_eq!(refused.reason(), MANDATE_CONSTRAINT_UNKNOWN, "{refused}");
}

#[test]
fn preset_claims_not_set_passes() {
    assert!(with_claim(r#""risk_data":{"device":"x"}"#).is_ok());
    assert_eq!(
        with_claim(r#""spending_limit":5000000"#)
            .unwrap_err()
            .reason(),
        MANDATE_CONSTRAINT_UNKNOWN
    );
}

#[test]
fn checkout_empty_constraints() {
    // An open checkout mandate is not a payment mandate.
    let human = common::human();
    let mandate = common::open_mandate(&[], None)
        .replace("mandate.payment.open.1", "mandate.checkout.open.1");
    let token = human.token(&mandate, &[]);
    let refused = ap2_import::import(&token, &human.issuer_key(), common::now()).unwrap_err();
    assert!(
        matches!(refused, ImportError::NotOpenPaymentMandate(_)),
        "{refused}"
    );
    assert_eq!(refused.reason(), POLICY_INVALID);
}

// ── agent_recurrence (agent_recurrence_tests.py) ─────────────────────────

const RANGE: &str = r#"{"type":"payment.amount_range","currency":"INR","min":0,"max":2000}"#;
const BUDGET: &str = r#"{"type":"payment.budget","currency":"INR","max":50.00}"#;

#[test]
fn payment_agent_recurrence_under_limit() {
    let mapping = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":2}"#,
        RANGE,
        BUDGET,
    ])
    .unwrap();
    assert_eq!(
        mapping.policy["velocity"],
        json!({"max_proposals": 2, "window_minutes": 1440})
    );
}

#[test]
fn payment_agent_recurrence_over_limit() {
    // AP2 refuses the second use of max_occurrences 1: one proposal a day.
    let mapping = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":1}"#,
        RANGE,
        BUDGET,
    ])
    .unwrap();
    assert_eq!(
        mapping.policy["velocity"],
        json!({"max_proposals": 1, "window_minutes": 1440})
    );
}

#[test]
fn payment_agent_recurrence_frequencies() {
    for (frequency, minutes) in [("WEEKLY", 10080), ("BIWEEKLY", 20160), ("MONTHLY", 44640)] {
        let recurrence = format!(
            r#"{{"type":"payment.agent_recurrence","frequency":"{frequency}","max_occurrences":3}}"#
        );
        let mapping = import(&[&recurrence, RANGE, BUDGET]).unwrap();
        assert_eq!(mapping.policy["velocity"]["window_minutes"], json!(minutes));
    }
    for frequency in ["QUARTERLY", "ANNUALLY", "ON_DEMAND"] {
        let recurrence = format!(
            r#"{{"type":"payment.agent_recurrence","frequency":"{frequency}","max_occurrences":3}}"#
        );
        assert_eq!(
            reason(&[&recurrence, RANGE, BUDGET]),
            MANDATE_CONSTRAINT_UNKNOWN,
            "{frequency}"
        );
    }
    // ON_DEMAND over a window of at most 31 days counts over all of it.
    let mapping = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"ON_DEMAND","max_occurrences":3}"#,
        r#"{"type":"payment.execution_date","not_before":"2026-09-01","not_after":"2026-09-30"}"#,
        RANGE,
        BUDGET,
    ])
    .unwrap();
    assert_eq!(
        mapping.policy["velocity"],
        json!({"max_proposals": 3, "window_minutes": 30 * 1440 + 1})
    );
    assert_eq!(
        reason(&[
            r#"{"type":"payment.agent_recurrence","frequency":"HOURLY","max_occurrences":3}"#,
            RANGE,
            BUDGET
        ]),
        POLICY_INVALID
    );
}

#[test]
fn payment_agent_recurrence_absent_limit() {
    // A frequency without a count limits nothing: the base's velocity stays.
    let mapping = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"QUARTERLY"}"#,
        RANGE,
        BUDGET,
    ])
    .unwrap();
    assert!(!mapping.policy.contains_key("velocity"));
    assert_eq!(
        mapping.over(&standard_policy()).unwrap()["velocity"],
        json!({"max_proposals": 20, "window_minutes": 60})
    );
}

#[test]
fn payment_agent_recurrence_requires_amount() {
    let refused = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":1}"#,
        BUDGET,
    ])
    .unwrap_err();
    assert_eq!(refused.reason(), POLICY_INVALID);
    assert!(
        refused.to_string().contains("payment.amount_range"),
        "{refused}"
    );
}

#[test]
fn payment_agent_recurrence_requires_budget() {
    let refused = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":1}"#,
        RANGE,
    ])
    .unwrap_err();
    assert_eq!(refused.reason(), POLICY_INVALID);
    assert!(refused.to_string().contains("payment.budget"), "{refused}");
}

#[test]
fn payment_agent_recurrence_bad_count_is_refused() {
    for count in ["-1", "1.5", "\"3\"", "4294967296"] {
        let recurrence = format!(
            r#"{{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":{count}}}"#
        );
        assert_eq!(
            reason(&[&recurrence, RANGE, BUDGET]),
            POLICY_INVALID,
            "{count}"
        );
    }
}

// ── expiry ───────────────────────────────────────────────────────────────

#[test]
fn an_expired_mandate_is_refused() {
    let human = common::human();
    let exp = common::now().timestamp() - 1;
    let token = human.token(&common::open_mandate(&[], Some(exp)), &[]);
    let refused = ap2_import::import(&token, &human.issuer_key(), common::now()).unwrap_err();
    assert!(matches!(refused, ImportError::Expired(_)), "{refused}");
    assert_eq!(refused.reason(), POLICY_EXPIRED);
    // At its exp exactly it still holds, and its window ends there.
    let token = human.token(&common::open_mandate(&[], Some(exp + 1)), &[]);
    let mapping = ap2_import::import(&token, &human.issuer_key(), common::now()).unwrap();
    assert_eq!(mapping.policy["valid_until"], json!("2026-09-03T10:00:00Z"));
}

#[test]
fn reason_codes_are_the_gates() {
    assert_eq!(MANDATE_SIGNATURE_INVALID, "MANDATE_SIGNATURE_INVALID");
    assert_eq!(MANDATE_CONSTRAINT_UNKNOWN, "MANDATE_CONSTRAINT_UNKNOWN");
    assert_eq!(POLICY_INVALID, "POLICY_INVALID");
    assert_eq!(POLICY_EXPIRED, "POLICY_EXPIRED");
}

#[test]
fn a_base_policy_must_be_a_complete_policy_document() {
    let mapping = import(&[]).unwrap();
    let mut missing = standard_policy();
    missing.remove("denial_rate");
    assert_eq!(mapping.over(&missing).unwrap_err().reason(), POLICY_INVALID);
    let mut extra = standard_policy();
    extra.insert("spending_limit".into(), json!(5_000_000));
    assert_eq!(mapping.over(&extra).unwrap_err().reason(), POLICY_INVALID);
    let mut unreadable = standard_policy();
    unreadable.insert("valid_until".into(), json!("tomorrow"));
    assert_eq!(
        mapping.over(&unreadable).unwrap_err().reason(),
        POLICY_INVALID
    );
}

#[test]
fn a_window_ending_before_the_base_begins_is_refused() {
    // The mandate ends in 2025; the base policy starts in 2026.
    let mapping =
        import(&[r#"{"type":"payment.execution_date","not_after":"2025-12-31"}"#]).unwrap();
    let refused = mapping.over(&standard_policy()).unwrap_err();
    assert_eq!(refused.reason(), POLICY_INVALID, "{refused}");
}

// ── state: AP2 leaves it to the caller, the gate keeps it ───────────────

#[test]
fn payment_agent_recurrence_no_state() {
    // AP2 needs the caller's count of past uses; the mapping needs none:
    // the gate counts proposals in its own window.
    let first = import(&[
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":1}"#,
        RANGE,
        BUDGET,
    ])
    .unwrap();
    assert_eq!(
        first.policy["velocity"],
        json!({"max_proposals": 1, "window_minutes": 1440})
    );
}

#[test]
fn payment_agent_recurrence_missing_context() {
    // The same mandate maps the same way every time: nothing of a past use
    // enters the mapping.
    let constraints = [
        r#"{"type":"payment.agent_recurrence","frequency":"DAILY","max_occurrences":1}"#,
        RANGE,
        BUDGET,
    ];
    assert_eq!(import(&constraints).unwrap(), import(&constraints).unwrap());
}

#[test]
fn payment_budget_missing_context() {
    // AP2 refuses a budget without the caller's running total; here the
    // budget becomes the delegation budget the gate keeps the total of
    // (the command refuses to write the policy without it:
    // cli::import_ap2_budget_needs_delegation_out).
    let mapping = import(&[BUDGET]).unwrap();
    assert_eq!(mapping.delegation_budget_paise, Some(5000));
}
