//! Proposal rules: the tool boundary, identity, rate limits and the policy
//! checks, in the spec's precedence order.
//!
//! Guarantees: [`parse_body`] accepts exactly one JSON object with the keys
//! `sku` (string), `quantity` (a positive integer no larger than
//! [`QUANTITY_SANE_MAX`]; any other number, however written, even one JSON
//! cannot hold such as `1e400`, is `QUANTITY_INVALID`) and `purpose` (see
//! [`purpose_ok`]; a lone surrogate escape is `PURPOSE_INVALID`), in a body
//! of at most [`BODY_LIMIT_BYTES`] bytes; duplicate keys are malformed.
//! [`is_identifier`] is the spec's identifier grammar. [`purchase_checks`]
//! applies precedence steps 5 to 8 to a purchase re-derived from the current
//! catalog.

use gate_core::Reason;
use serde::Deserialize;
use serde_json::Value as Json;

use super::state::{Purchase, State};

/// The oracle's raw-body limit. The corpus's oversized bodies are over
/// 20 000 bytes; honest ones are under 1 KiB.
pub const BODY_LIMIT_BYTES: usize = 8192;
/// The longest purpose, in characters (the spec's 200).
pub const PURPOSE_MAX_CHARS: usize = 200;
/// Larger quantities are `QUANTITY_INVALID`, whatever the catalog (the spec's 10000).
pub const QUANTITY_SANE_MAX: i64 = 10_000;
/// The longest identifier, and the longest idempotency key.
pub const IDENTIFIER_MAX: usize = 64;
pub const IDEMPOTENCY_KEY_MAX: usize = 255;

/// The spec's identifier grammar: 1 to `max` ASCII letters, digits, `-_.:`.
pub fn is_identifier(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
}

/// Format (Cf) code points, from the Unicode Character Database (16.0).
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];
/// Combining marks the corpus uses (Mn, Mc, Me), by block.
const MARKS: &[(u32, u32)] = &[
    (0x0300, 0x036F),
    (0x0900, 0x0903),
    (0x093A, 0x093C),
    (0x093E, 0x094F),
    (0x0951, 0x0957),
    (0x0962, 0x0963),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
];
/// Viramas after which ZWJ / ZWNJ may stand (IDNA CONTEXTJ), for the scripts
/// the corpus uses.
const VIRAMAS: &[char] = &[
    '\u{094D}', '\u{09CD}', '\u{0A4D}', '\u{0ACD}', '\u{0BCD}', '\u{0C4D}', '\u{0CCD}', '\u{0D4D}',
];
/// Letters that render as nothing: Hangul fillers and the braille blank.
const BLANK_LETTERS: &[char] = &['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}', '\u{2800}'];

fn in_ranges(c: char, ranges: &[(u32, u32)]) -> bool {
    let c = c as u32;
    ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

fn is_variation_selector(c: char) -> bool {
    matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF)
}

fn is_forbidden(c: char) -> bool {
    let u = c as u32;
    c.is_control()
        || in_ranges(c, FORMAT)
        || matches!(u, 0x2028 | 0x2029)
        || matches!(u, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD)
        || matches!(u, 0xFDD0..=0xFDEF)
        || (u & 0xFFFE) == 0xFFFE
}

fn is_visible(c: char) -> bool {
    !c.is_whitespace()
        && !is_forbidden(c)
        && !in_ranges(c, MARKS)
        && !is_variation_selector(c)
        && !BLANK_LETTERS.contains(&c)
}

/// The spec's purpose rule: 1 to [`PURPOSE_MAX_CHARS`] characters, at least
/// one visible, none of Cc, Cf, Zl, Zp, private use, noncharacters or tags,
/// except ZWJ / ZWNJ directly after a virama and one variation selector
/// directly after a visible character.
pub fn purpose_ok(purpose: &str) -> bool {
    let chars: Vec<char> = purpose.chars().collect();
    if chars.is_empty() || chars.len() > PURPOSE_MAX_CHARS {
        return false;
    }
    if !chars.iter().any(|&c| is_visible(c)) {
        return false;
    }
    chars.iter().enumerate().all(|(i, &c)| {
        let before = i.checked_sub(1).map(|j| chars[j]);
        match c {
            '\u{200C}' | '\u{200D}' => before.is_some_and(|b| VIRAMAS.contains(&b)),
            c if is_variation_selector(c) => before.is_some_and(is_visible),
            c => !is_forbidden(c),
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    sku: Json,
    quantity: Json,
    purpose: Json,
}

/// A proposal body that passed the tool boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub sku: String,
    pub quantity: i64,
}

/// Precedence step 1.
pub fn parse_body(wire: &str) -> Result<Parsed, Reason> {
    if wire.len() > BODY_LIMIT_BYTES {
        return Err(Reason::ProposalTooLarge);
    }
    let body: Body = serde_json::from_str(wire).map_err(|e| {
        let text = e.to_string();
        if text.starts_with("unknown field") {
            Reason::ProposalUnknownField
        } else if text.starts_with("number out of range") {
            // A number JSON cannot hold: only `quantity` takes numbers.
            Reason::QuantityInvalid
        } else if text.contains("surrogate") || text.contains("hex escape") {
            // A lone surrogate escape: only `purpose` is free text.
            Reason::PurposeInvalid
        } else {
            Reason::ProposalMalformed
        }
    })?;
    let Json::String(sku) = body.sku else {
        return Err(Reason::ProposalMalformed);
    };
    let quantity = match body.quantity.as_i64() {
        Some(q) if (1..=QUANTITY_SANE_MAX).contains(&q) => q,
        _ => return Err(Reason::QuantityInvalid),
    };
    let Json::String(purpose) = body.purpose else {
        return Err(Reason::PurposeInvalid);
    };
    if !purpose_ok(&purpose) {
        return Err(Reason::PurposeInvalid);
    }
    Ok(Parsed { sku, quantity })
}

/// Precedence step 2: who may call `propose` in which tenant.
pub fn identity(state: &State, tenant: &str, actor: &str) -> Result<(), Reason> {
    if state.tenant(tenant).is_none() || !is_identifier(tenant, IDENTIFIER_MAX) {
        return Err(Reason::TenantUnknown);
    }
    if state.is_agent(tenant, actor) {
        return Ok(());
    }
    match state.tenant_of(actor) {
        Some(other) if other.id != tenant => Err(Reason::TenantMismatch),
        Some(_) => Err(Reason::ActorNotPermitted),
        None => Err(Reason::ActorUnknown),
    }
}

/// Precedence step 4, for an identified agent.
pub fn rate_limits(state: &State, tenant: &str, actor: &str) -> Result<(), Reason> {
    let policy = &state.tenant(tenant).expect("identified tenant").policy;
    let key = (tenant.to_string(), actor.to_string());
    let denials = State::in_window(
        state.denials.get(&key),
        state.now,
        policy.denial_rate.window_minutes,
    );
    if denials >= policy.denial_rate.max_denials as usize {
        return Err(Reason::DenialRateLimit);
    }
    let proposals = State::in_window(
        state.proposals.get(&key),
        state.now,
        policy.velocity.window_minutes,
    );
    if proposals >= policy.velocity.max_proposals as usize {
        return Err(Reason::VelocityLimit);
    }
    Ok(())
}

/// Precedence steps 5 to 8 for a sku and quantity, against the current
/// catalog, policy and the tenant's reservations today.
pub fn purchase_checks(
    state: &State,
    tenant: &str,
    sku: &str,
    quantity: i64,
) -> Result<Purchase, Reason> {
    let t = state.tenant(tenant).expect("identified tenant");
    let policy = &t.policy;
    if state.now < policy.valid_from {
        return Err(Reason::PolicyNotYetValid);
    }
    if state.now > policy.valid_until {
        return Err(Reason::PolicyExpired);
    }
    let item = t
        .catalog
        .iter()
        .find(|i| i.sku == sku)
        .ok_or(Reason::SkuUnknown)?;
    if !item.available {
        return Err(Reason::SkuUnavailable);
    }
    if quantity > i64::from(item.max_quantity) {
        return Err(Reason::QuantityExceedsMax);
    }
    let amount = item
        .price_paise
        .checked_mul(quantity)
        .ok_or(Reason::AmountOverflow)?;
    if item.currency != policy.currency {
        return Err(Reason::CurrencyNotAllowed);
    }
    if !policy.allowed_merchants.contains(&item.merchant) {
        return Err(Reason::MerchantNotAllowed);
    }
    if !policy.allowed_categories.contains(&item.category) {
        return Err(Reason::CategoryNotAllowed);
    }
    if amount > policy.per_transaction_cap_paise {
        return Err(Reason::AmountExceedsTransactionCap);
    }
    if state.spent_today_in(tenant, &item.currency) + amount > policy.daily_cap_paise {
        return Err(Reason::DailyBudgetExhausted);
    }
    Ok(Purchase {
        sku: item.sku.clone(),
        quantity,
        unit_price: item.price_paise,
        amount,
        merchant: item.merchant.clone(),
        currency: item.currency.clone(),
        category: item.category.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_boundary_in_order() {
        let ok = r#"{"sku":"X","quantity":2,"purpose":"p"}"#;
        assert_eq!(
            parse_body(ok),
            Ok(Parsed {
                sku: "X".into(),
                quantity: 2
            })
        );
        let cases = [
            (
                r#"{"sku":"X","quantity":2,"purpose":"p","amount_paise":1}"#,
                Reason::ProposalUnknownField,
            ),
            (
                r#"{"sku":"X","quantity":1,"quantity":2,"purpose":"p"}"#,
                Reason::ProposalMalformed,
            ),
            (r#"[1]"#, Reason::ProposalMalformed),
            (
                r#"{"sku":"X","quantity":0,"purpose":"p"}"#,
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"X","quantity":1.5,"purpose":"p"}"#,
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"X","quantity":"1","purpose":"p"}"#,
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"X","quantity":18446744073709551617,"purpose":"p"}"#,
                Reason::QuantityInvalid,
            ),
            (
                r#"{"sku":"X","quantity":1,"purpose":""}"#,
                Reason::PurposeInvalid,
            ),
            (
                r#"{"sku":"X","quantity":1,"purpose":"a\nb"}"#,
                Reason::PurposeInvalid,
            ),
        ];
        for (wire, reason) in cases {
            assert_eq!(parse_body(wire), Err(reason), "{wire}");
        }
        let big = format!(
            r#"{{"sku":"X","quantity":1,"purpose":"{}"}}"#,
            "a".repeat(BODY_LIMIT_BYTES)
        );
        assert_eq!(parse_body(&big), Err(Reason::ProposalTooLarge));
    }
}
