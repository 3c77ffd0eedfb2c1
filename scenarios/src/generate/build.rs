//! Small constructors for the steps the generator writes.
//!
//! Guarantees: bodies are JSON objects whose keys are inserted in sorted
//! order, so their serialization is the same whether or not serde_json keeps
//! insertion order.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::step::{Step, Verb};
use crate::verbs::{
    AdvanceClock, Approve, Checkout, Grant, Pay, Propose, Revoke, SetPrice, Signature, Webhook,
};

/// A JSON object from key/value pairs, keys sorted.
pub fn object(pairs: Vec<(String, Json)>) -> Json {
    let sorted: BTreeMap<String, Json> = pairs.into_iter().collect();
    Json::Object(sorted.into_iter().collect())
}

/// `{sku, quantity, purpose}` plus any extra pairs.
pub fn body(sku: &str, quantity: Json, purpose: &str, extra: Vec<(String, Json)>) -> Json {
    let mut pairs = vec![
        ("sku".to_string(), Json::from(sku)),
        ("quantity".to_string(), quantity),
        ("purpose".to_string(), Json::from(purpose)),
    ];
    pairs.extend(extra);
    object(pairs)
}

pub fn named(name: &str, mut step: Step) -> Step {
    step.name = Some(name.to_string());
    step
}

pub fn propose(actor: &str, body: Json) -> Step {
    Step::new(Verb::Propose(Propose {
        actor: actor.into(),
        body: Some(body),
        raw: None,
        raw_b64: None,
        idempotency_key: None,
    }))
}

pub fn propose_raw(actor: &str, raw: String) -> Step {
    Step::new(Verb::Propose(Propose {
        actor: actor.into(),
        body: None,
        raw: Some(raw),
        raw_b64: None,
        idempotency_key: None,
    }))
}

pub fn approve(request: &str, approver: &str) -> Step {
    Step::new(Verb::Approve(Approve {
        request: request.into(),
        approver: approver.into(),
    }))
}

pub fn checkout(request: &str, actor: &str) -> Step {
    Step::new(Verb::Checkout(Checkout {
        request: request.into(),
        actor: actor.into(),
    }))
}

pub fn pay(authority: &str) -> Step {
    Step::new(Verb::Pay(Pay {
        authority: authority.into(),
        actor: None,
    }))
}

pub fn webhook(
    order: &str,
    amount: i64,
    currency: Option<&str>,
    signature: Signature,
    offset: i64,
) -> Step {
    Step::new(Verb::Webhook(Webhook {
        order: order.into(),
        event: None,
        amount_paise: Some(amount),
        currency: currency.map(str::to_string),
        signature: (signature != Signature::Valid).then_some(signature),
        signature_header: None,
        event_id: None,
        created_at_offset_minutes: (offset != 0).then_some(offset),
        raw: None,
        raw_b64: None,
        receipt: None,
    }))
}

pub fn grant(id: &str, from: &str, to: &str, budget: i64, skus: Option<Vec<String>>) -> Step {
    Step::new(Verb::Grant(Grant {
        id: id.into(),
        from: from.into(),
        to: to.into(),
        budget_paise: budget,
        skus,
        expires_at: None,
    }))
}

pub fn revoke(delegation: &str, actor: &str) -> Step {
    Step::new(Verb::Revoke(Revoke {
        delegation: delegation.into(),
        actor: actor.into(),
    }))
}

pub fn set_price(sku: &str, price: i64) -> Step {
    Step::new(Verb::SetPrice(SetPrice {
        sku: sku.into(),
        price_paise: price,
    }))
}

pub fn advance(minutes: u64) -> Step {
    let minutes = i64::try_from(minutes).unwrap_or(i64::MAX);
    Step::new(Verb::AdvanceClock(AdvanceClock::minutes(minutes)))
}
