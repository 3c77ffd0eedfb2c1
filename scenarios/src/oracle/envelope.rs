//! The oracle's reading of a signed body written into a corpus file
//! (`webhook.raw` / `raw_b64`): Razorpay's event envelope, as the spec
//! describes it.
//!
//! Guarantees: the checks come in the spec's order and each gives its own
//! reason: not JSON, a key written twice in any object (compared after
//! unescaping), or not an envelope (`entity: "event"`, `event`,
//! `contains`, `created_at`) is `WEBHOOK_MALFORMED`; an event type the gate
//! does not act on is `WEBHOOK_EVENT_IGNORED`; a payment entity that is
//! missing or ill-typed, an entity missing from `contains`, an `order.paid`
//! without its order entity, a payment status that contradicts the event, or
//! payment and order entities that disagree on order, amount or currency, or
//! an order entity whose receipt is neither text nor null, is
//! `WEBHOOK_MALFORMED`; an order id outside the identifier grammar is
//! `WEBHOOK_UNKNOWN_ORDER`. Written independently of the gate's parser.

use gate_core::Reason;
use serde_json::Value as Json;

/// The events the gate acts on.
const ACTED_ON: [&str; 4] = [
    "payment.captured",
    "payment.failed",
    "order.paid",
    "payment.authorized",
];

/// What a well-formed envelope says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub event: String,
    /// Unix seconds.
    pub created_at: i64,
    pub order_id: String,
    /// The payment entity's id, amount and currency.
    pub payment_id: String,
    pub amount: i64,
    pub currency: String,
    /// The order entity's receipt, when it carries one in the identifier
    /// grammar.
    pub receipt: Option<String>,
}

/// Reads `raw` as the provider's event envelope.
pub fn read(raw: &[u8]) -> Result<Envelope, Reason> {
    let malformed = Reason::WebhookMalformed;
    if !keys_distinct(raw) {
        return Err(malformed);
    }
    let v: Json = std::str::from_utf8(raw)
        .ok()
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or(malformed)?;
    let text = |v: &Json, key: &str| v.get(key).and_then(Json::as_str).map(str::to_owned);
    let (Some(kind), Some(event), Some(contains), Some(created_at)) = (
        text(&v, "entity"),
        text(&v, "event"),
        v.get("contains").and_then(Json::as_array),
        v.get("created_at").and_then(Json::as_i64),
    ) else {
        return Err(malformed);
    };
    let contains: Option<Vec<&str>> = contains.iter().map(Json::as_str).collect();
    let contains = contains.ok_or(malformed)?;
    if kind != "event" || chrono::DateTime::from_timestamp(created_at, 0).is_none() {
        return Err(malformed);
    }
    if !ACTED_ON.contains(&event.as_str()) {
        return Err(Reason::WebhookEventIgnored);
    }
    let entity = |name: &str| -> Result<Option<&Json>, Reason> {
        match v.pointer(&format!("/payload/{name}")) {
            None | Some(Json::Null) => Ok(None),
            Some(w) => w.get("entity").map(Some).ok_or(malformed),
        }
    };
    let payment = entity("payment")?.ok_or(malformed)?;
    let order = entity("order")?;
    let (Some(pay_id), Some(pay_kind), Some(amount), Some(currency), Some(status)) = (
        text(payment, "id"),
        text(payment, "entity"),
        payment.get("amount").and_then(Json::as_i64),
        text(payment, "currency"),
        text(payment, "status"),
    ) else {
        return Err(malformed);
    };
    let pay_order = match payment.get("order_id") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed),
    };
    let order = match order {
        None => None,
        Some(o) => match (
            text(o, "id"),
            text(o, "entity"),
            o.get("amount").and_then(Json::as_i64),
            text(o, "currency"),
        ) {
            (Some(id), Some(kind), Some(amount), Some(currency)) => {
                Some((id, kind, amount, currency))
            }
            _ => return Err(malformed),
        },
    };
    let receipt = match v.pointer("/payload/order/entity/receipt") {
        None | Some(Json::Null) => None,
        Some(Json::String(r)) => Some(r.clone()).filter(|r| identifier(r)),
        Some(_) => return Err(malformed),
    };
    let listed = |name: &str| contains.contains(&name);
    let currency_ok = currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase());
    if pay_kind != "payment"
        || !listed("payment")
        || order
            .as_ref()
            .is_some_and(|(_, kind, ..)| kind != "order" || !listed("order"))
        || (event == "order.paid" && order.is_none())
        || amount <= 0
        || !currency_ok
        || !identifier(&pay_id)
    {
        return Err(malformed);
    }
    let wanted_status = match event.as_str() {
        "payment.failed" => "failed",
        "payment.authorized" => "authorized",
        _ => "captured",
    };
    if status != wanted_status {
        return Err(malformed);
    }
    let order_id = match (pay_order, &order) {
        (Some(p), Some((o, ..))) if p != *o => return Err(malformed),
        (Some(p), _) => p,
        (None, Some((o, ..))) => o.clone(),
        (None, None) => return Err(malformed),
    };
    if let Some((_, _, order_amount, order_currency)) = &order
        && (*order_amount != amount || *order_currency != currency)
    {
        return Err(malformed);
    }
    if !identifier(&order_id) {
        return Err(Reason::WebhookUnknownOrder);
    }
    Ok(Envelope {
        event,
        created_at,
        order_id,
        payment_id: pay_id,
        amount,
        currency,
        receipt,
    })
}

/// The spec's identifier grammar: 1–64 ASCII letters, digits, `-_.:`.
fn identifier(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Whether every object in `raw`, at any depth, names each key once.
fn keys_distinct(raw: &[u8]) -> bool {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

    struct Distinct;
    struct Walk;
    impl<'de> Visitor<'de> for Walk {
        type Value = Distinct;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_str<E>(self, _: &str) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_unit<E>(self) -> Result<Distinct, E> {
            Ok(Distinct)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Distinct, A::Error> {
            while a.next_element::<Distinct>()?.is_some() {}
            Ok(Distinct)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Distinct, A::Error> {
            let mut keys = std::collections::HashSet::new();
            while let Some(k) = m.next_key::<String>()? {
                if !keys.insert(k) {
                    return Err(serde::de::Error::custom("a key written twice"));
                }
                m.next_value::<Distinct>()?;
            }
            Ok(Distinct)
        }
    }
    impl<'de> Deserialize<'de> for Distinct {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Walk)
        }
    }
    serde_json::from_slice::<Distinct>(raw).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"entity":"event","event":"order.paid","contains":["payment","order"],"created_at":1700000000,"payload":{"payment":{"entity":{"id":"pay_1","entity":"payment","amount":100,"currency":"INR","status":"captured","order_id":"order_1"}},"order":{"entity":{"id":"order_1","entity":"order","amount":100,"currency":"INR"}}}}"#;

    #[test]
    fn a_documented_envelope_reads() {
        let e = read(GOOD.as_bytes()).unwrap();
        assert_eq!(e.order_id, "order_1");
        assert_eq!(e.event, "order.paid");
    }

    #[test]
    fn each_flaw_gets_its_reason() {
        let cases = [
            (
                "\"amount\":100,\"currency\":\"INR\"}}}}",
                "\"amount\":200,\"currency\":\"INR\"}}}}",
                Reason::WebhookMalformed,
            ),
            (
                "\"id\":\"order_1\",\"entity\":\"order\"",
                "\"id\":\"order_2\",\"entity\":\"order\"",
                Reason::WebhookMalformed,
            ),
            (
                "\"event\":\"order.paid\"",
                "\"event\":\"refund.created\"",
                Reason::WebhookEventIgnored,
            ),
            (
                "\"status\":\"captured\"",
                "\"status\":\"failed\"",
                Reason::WebhookMalformed,
            ),
            (
                "\"entity\":\"event\"",
                "\"entity\":\"evt\"",
                Reason::WebhookMalformed,
            ),
            (
                "[\"payment\",\"order\"]",
                "[\"payment\"]",
                Reason::WebhookMalformed,
            ),
        ];
        for (from, to, reason) in cases {
            assert!(GOOD.contains(from), "{from}");
            let body = GOOD.replacen(from, to, 1);
            assert_eq!(read(body.as_bytes()), Err(reason), "{to}");
        }
        assert_eq!(read(b"not json"), Err(Reason::WebhookMalformed));
    }

    #[test]
    fn an_order_id_outside_the_grammar_is_an_unknown_order() {
        let body = GOOD.replace("order_1", "order 1");
        assert_eq!(read(body.as_bytes()), Err(Reason::WebhookUnknownOrder));
    }
}
