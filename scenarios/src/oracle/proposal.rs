//! Proposal rules: the tool boundary, identity, rate limits and the policy
//! checks, in the spec's precedence order.
//!
//! Guarantees: [`parse_body`] accepts exactly one JSON object with the keys
//! `sku` (string), `quantity` (a positive integer no larger than
//! [`QUANTITY_SANE_MAX`]) and `purpose` (1..=[`PURPOSE_MAX_CHARS`] characters,
//! no control characters), in a body of at most [`BODY_LIMIT_BYTES`] bytes;
//! duplicate keys are malformed. [`purchase_checks`] applies precedence steps
//! 5 to 8 to a purchase re-derived from the current catalog.

use gate::Reason;
use serde::Deserialize;
use serde_json::Value as Json;

use super::state::{Purchase, State};

/// The oracle's raw-body limit. The corpus's oversized bodies are over
/// 20 000 bytes; honest ones are under 1 KiB.
pub const BODY_LIMIT_BYTES: usize = 8192;
/// The longest purpose, in characters.
pub const PURPOSE_MAX_CHARS: usize = 1000;
/// Larger quantities are "absurd" (`QUANTITY_INVALID`), whatever the catalog.
pub const QUANTITY_SANE_MAX: i64 = 1_000_000;

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
        if e.to_string().starts_with("unknown field") {
            Reason::ProposalUnknownField
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
    let chars = purpose.chars().count();
    if chars == 0 || chars > PURPOSE_MAX_CHARS || purpose.chars().any(char::is_control) {
        return Err(Reason::PurposeInvalid);
    }
    Ok(Parsed { sku, quantity })
}

/// Precedence step 2: who may call `propose` in which tenant.
pub fn identity(state: &State, tenant: &str, actor: &str) -> Result<(), Reason> {
    if state.tenant(tenant).is_none() {
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
    if state.spent_today(tenant) + amount > policy.daily_cap_paise {
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
