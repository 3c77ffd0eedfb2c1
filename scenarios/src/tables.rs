//! The loader's own tables: which keys a scenario, a step, each verb, an
//! expectation and the invariants may carry, which of them are required,
//! and what each means.
//!
//! Guarantees: the loader checks every mapping it reads against these
//! tables ([`check_table`]) before decoding it, so a key the table does not
//! list is refused and a key it marks required must be present; the serde
//! structs behind them accept exactly the same keys (a test in this module
//! compares each table with the struct's own field list). A key that names
//! an earlier step says which verbs that step may have (`refers_to`), and
//! the reference check ([`crate::references`]) reads it from here. The
//! reference `docs/scenario-format.md` is rendered from these tables
//! ([`crate::format_doc`]), so the document cannot say what the loader does
//! not do.

use crate::yaml::Mapping;

use crate::error::{LoadErrorKind, ParseError};
use crate::yaml::key_text;

/// One key of a mapping the loader reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    pub required: bool,
    /// One sentence for the reference.
    pub about: &'static str,
    /// For a key that names an earlier step: the verbs that step may have
    /// (seen through replays); [`crate::references`] checks it. Empty for
    /// any other key.
    pub refers_to: &'static [&'static str],
}

const fn req(name: &'static str, about: &'static str) -> Key {
    Key {
        name,
        required: true,
        about,
        refers_to: &[],
    }
}

const fn opt(name: &'static str, about: &'static str) -> Key {
    Key {
        name,
        required: false,
        about,
        refers_to: &[],
    }
}

/// A required key that names an earlier step of one of these verbs.
const fn step_ref(
    name: &'static str,
    refers_to: &'static [&'static str],
    about: &'static str,
) -> Key {
    Key {
        name,
        required: true,
        about,
        refers_to,
    }
}

/// An optional key that names an earlier step of one of these verbs.
const fn opt_step_ref(
    name: &'static str,
    refers_to: &'static [&'static str],
    about: &'static str,
) -> Key {
    Key {
        name,
        required: false,
        about,
        refers_to,
    }
}

/// The verbs whose step sends a request that `replay` can send again.
pub const SENDERS: &[&str] = &[
    "propose", "approve", "checkout", "pay", "webhook", "grant", "revoke", "cancel",
];

/// One verb of the step table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbSpec {
    pub name: &'static str,
    /// What the step does.
    pub about: &'static str,
    /// The keys of its payload (the caller's `tenant` is a step key).
    pub keys: &'static [Key],
    /// Extra rules the loader enforces beyond the keys.
    pub rules: &'static [&'static str],
}

/// The keys of one scenario.
pub const SCENARIO: &[Key] = &[
    req("id", "kebab-case, unique across the corpus"),
    req(
        "label",
        "`attack` or `legit`; an attack must carry a check its success would break: a step expected `deny` or `step_up` (a `concurrent` step: some `deny` or `step_up` copies; a `login` step: `refused_by`), or a money invariant (`provider_orders`, `captured_paise`, `provider_captured_paise`, `spent_today_paise`, `delegation_spent_paise`, `books_balanced`, `request_states`); `ledger_intact` alone is not one, and the loader refuses an attack without one",
    ),
    opt(
        "class",
        "a class id from taxonomy.yaml (attacks of the project's corpus always have one)",
    ),
    opt("refs", "where the idea comes from, free text (a list)"),
    opt("description", "free text"),
    req(
        "world",
        "a world name: `<corpus>/worlds/<name>.yaml`, else the project's `scenarios/worlds/<name>.yaml`",
    ),
    req("steps", "a non-empty list of steps, run in order"),
    opt("invariants", "checked after the last step"),
];

/// The keys of one step beside its single verb key.
pub const STEP: &[Key] = &[
    opt(
        "name",
        "later steps refer to the step by this name (unique)",
    ),
    opt(
        "tenant",
        "the caller's tenant, default the world's first; may also be written inside the verb",
    ),
    opt(
        "expect",
        "`{decision, reason}` or `{decision, reason_any}`; for `concurrent`, counts; for `login`, `{refused_by}` or `{decision: ok}`",
    ),
    opt(
        "wire",
        "how the HTTP engine sends the step and what the service answers: `{as, key, headers, body, status, reason}`; a step with `wire` and no `expect` is wire-only (only the HTTP engine runs it)",
    ),
];

/// The keys of a step's decision expectation.
pub const EXPECT: &[Key] = &[
    req("decision", "`allow`, `step_up`, `deny` or `ok`"),
    opt("reason", "one reason code"),
    opt(
        "reason_any",
        "a non-empty list of acceptable reason codes (instead of `reason`)",
    ),
];

/// The keys of a `login` step's refusal expectation (its other shape is
/// `{decision: ok}`: written).
pub const LOGIN_EXPECT: &[Key] = &[req(
    "refused_by",
    "the constraint or trigger whose name the database's refusal carries, or `privilege` (SQLSTATE 42501)",
)];

/// The invariants checked after the last step.
pub const INVARIANTS: &[Key] = &[
    opt("provider_orders", "how many provider orders exist"),
    opt("captured_paise", "what the gate's books show captured"),
    opt(
        "spent_today_paise",
        "the default tenant's reservations for the current UTC day",
    ),
    opt(
        "delegation_spent_paise",
        "`{<delegation id>: N}`: what each hop has spent",
    ),
    opt(
        "ledger_intact",
        "`true`: every tenant's hash chain verifies",
    ),
    opt(
        "evidence_verifies",
        "`true`: for every request, its entries each verify with a tlog proof against a checkpoint signed by the tenant's log key, with the public key alone",
    ),
    opt(
        "log_consistent",
        "`true`: every checkpoint kept for a tenant, then its tree as it is now, is proved consistent with the one before",
    ),
    opt(
        "provider_captured_paise",
        "what the simulated provider has captured, all tenants",
    ),
    opt(
        "books_balanced",
        "`true`: every paisa the provider captured is captured in the gate's books, and every reservation belongs to a request that still holds it",
    ),
    opt(
        "request_states",
        "`{<propose step name>: STATE}`: the state of the request that step created",
    ),
];

/// The keys of a `set_policy` step: any subset of a world policy's keys,
/// and how the mandate is signed.
pub const POLICY: &[Key] = &[
    opt("currency", "the only currency the tenant may pay in"),
    opt(
        "per_transaction_cap_paise",
        "a proposal above it is refused",
    ),
    opt("daily_cap_paise", "reservations per UTC day"),
    opt(
        "approval_threshold_paise",
        "above it a proposal needs a human (step-up)",
    ),
    opt("allowed_merchants", "merchants that may be paid"),
    opt(
        "allowed_categories",
        "catalog categories that may be bought",
    ),
    opt("valid_from", "RFC 3339; earlier proposals are refused"),
    opt("valid_until", "RFC 3339; later proposals are refused"),
    opt("velocity", "`{max_proposals, window_minutes}` per agent"),
    opt("denial_rate", "`{max_denials, window_minutes}` per agent"),
    opt(
        "signed_by",
        "the human who signs the mandate (default: the tenant's first human who may approve)",
    ),
    opt(
        "signature",
        "`valid` (default), `invalid` (one bit flipped), `missing`, `other_key` (another human's key)",
    ),
    opt(
        "version",
        "the version the mandate names (default: the version in force plus one)",
    ),
];

/// Every verb, in the spec's order.
pub const VERB_SPECS: [VerbSpec; 19] = [
    VerbSpec {
        name: "propose",
        about: "the agent-facing call, exactly as an agent would send it",
        keys: &[
            req("actor", "the agent"),
            opt("body", "a mapping sent as JSON"),
            opt("raw", "a string sent as is"),
            opt("raw_b64", "bytes sent as is, written as base64 (padded)"),
            opt("idempotency_key", "the agent's idempotency key"),
        ],
        rules: &["exactly one of `body`, `raw` and `raw_b64`"],
    },
    VerbSpec {
        name: "approve",
        about: "a human approves a step-up request",
        keys: &[
            step_ref("request", &["propose"], "the request"),
            req("approver", "the human"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "checkout",
        about: "issues the single-use checkout authority for an authorized request",
        keys: &[
            step_ref("request", &["propose"], "the request"),
            req("actor", "who asks"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "pay",
        about: "consumes the authority: creates exactly one provider order",
        keys: &[
            step_ref("authority", &["checkout"], "the authority"),
            opt("actor", "who pays"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "webhook",
        about: "a provider event arriving at the webhook endpoint",
        keys: &[
            step_ref("order", &["pay"], "the provider order"),
            opt("event", "the event type, default `payment.captured`"),
            opt("amount_paise", "default the order's amount"),
            opt("currency", "default the order's currency"),
            opt("signature", "`valid` (default), `invalid` or `missing`"),
            opt(
                "signature_header",
                "a raw string sent as the signature header, overriding `signature`",
            ),
            opt(
                "event_id",
                "sent in the event-id header as the provider sends it; default fresh",
            ),
            opt(
                "created_at_offset_minutes",
                "the event's timestamp relative to the gate's clock, default 0",
            ),
            opt(
                "raw",
                "a body override, signed as given when `signature: valid`",
            ),
            opt(
                "raw_b64",
                "the same as base64, for bytes that are not UTF-8",
            ),
            opt_step_ref(
                "receipt",
                &["checkout"],
                "every `$receipt` in the body override is replaced by the id of the authority this step issued, before the body is signed",
            ),
        ],
        rules: &[
            "at most one of `raw` and `raw_b64`",
            "`receipt` only with `raw` or `raw_b64`",
        ],
    },
    VerbSpec {
        name: "grant",
        about: "a delegation hop, made by the tenant's operator",
        keys: &[
            req("id", "the hop's id"),
            req(
                "from",
                "a human who may approve (a root hop) or the id of a live delegation",
            ),
            req("to", "the agent that may spend under it"),
            req("budget_paise", "the hop's budget"),
            opt("skus", "a list; default every sku the parent allows"),
            opt("expires_at", "RFC 3339"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "revoke",
        about: "revokes one hop",
        keys: &[
            req("delegation", "the hop's id"),
            req("actor", "who revokes"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "set_price",
        about: "the merchant changes the catalog",
        keys: &[
            req("sku", "the catalog item"),
            req("price_paise", "the new price"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "set_policy",
        about: "a human publishes a new mandate: the current policy with these keys changed, signed (see Signed mandates)",
        keys: POLICY,
        rules: &[],
    },
    VerbSpec {
        name: "advance_clock",
        about: "moves the gate's clock (negative steps it back)",
        keys: &[opt("minutes", "whole minutes"), opt("seconds", "seconds")],
        rules: &[
            "exactly one of `minutes` and `seconds`",
            "the clock stays within ±10 years of the world's `now`",
        ],
    },
    VerbSpec {
        name: "set_clock",
        about: "puts the gate's clock at an instant",
        keys: &[req("at", "RFC 3339")],
        rules: &["the instant is within ±10 years of the world's `now`"],
    },
    VerbSpec {
        name: "cancel",
        about: "the requesting agent or a human who may approve cancels a request",
        keys: &[
            step_ref("request", &["propose"], "the request"),
            req("actor", "who cancels"),
        ],
        rules: &[],
    },
    VerbSpec {
        name: "expire",
        about: "runs the expiry sweep at the gate's clock",
        keys: &[],
        rules: &["written `expire: {}` or a bare `expire:`"],
    },
    VerbSpec {
        name: "provider",
        about: "how the simulated provider answers the next `pay` calls",
        keys: &[
            opt(
                "mode",
                "`ok` (default), `timeout`, `late`, `reject`, `unavailable` or `mismatch`",
            ),
            opt(
                "field",
                "with `mode: mismatch` (required then, refused otherwise): `amount`, `currency`, `merchant`, `receipt` or `id`",
            ),
            opt("times", "how many later `pay` calls, default every one"),
        ],
        rules: &[
            "`times` is at least 1",
            "`mismatch`: the provider answers an order that differs from the one asked for in `field` (`id`: the id another authority's order already has) and creates nothing; the gate records nothing as the order and answers `PROVIDER_REJECTED`, the request failing and its budgets coming back",
        ],
    },
    VerbSpec {
        name: "reconcile",
        about: "runs the reconcile job: every PROVIDER_PENDING request is settled against the provider",
        keys: &[],
        rules: &["written `reconcile: {}` or a bare `reconcile:`"],
    },
    VerbSpec {
        name: "provider_capture",
        about: "the simulated provider captures an order (moves no state in the gate by itself)",
        keys: &[step_ref("order", &["pay"], "the provider order")],
        rules: &[],
    },
    VerbSpec {
        name: "replay",
        about: "sends an earlier step's request again, byte for byte",
        keys: &[step_ref(
            "of",
            SENDERS,
            "the step whose request is sent again",
        )],
        rules: &["takes no `tenant`"],
    },
    VerbSpec {
        name: "concurrent",
        about: "runs `times` copies of one step at once against the database-backed gate",
        keys: &[
            req("times", "at least 1"),
            req(
                "step",
                "one step, with no `name`, no `expect` and not itself `concurrent`",
            ),
        ],
        rules: &[
            "its `expect` is counts: `{allow, deny, step_up, ok}`, exact, an omitted key meaning 0, adding up to `times`; more `allow`, `ok` or `step_up` copies than expected is an attack not blocked",
            "takes no `tenant`; the inner step may name one",
        ],
    },
    VerbSpec {
        name: "login",
        about: "one SQL statement sent as the gate's runtime database role (the login `serve` holds): what a thief of that login can send",
        keys: &[step_ref(
            "sql",
            &["propose", "checkout", "pay", "grant"],
            "one statement; `$<step name>` is replaced by the id that step produced (request, authority, order, delegation), quoted as a SQL literal",
        )],
        rules: &[
            "exactly one statement: not empty, nothing after its `;`, no dollar quoting, no positional parameter (`$1`); a `$` inside a literal, a quoted identifier or a comment is text",
            "its `expect` is `{refused_by: <constraint or trigger>}` (the database refused it naming that guard), `{refused_by: privilege}` (SQLSTATE 42501) or `{decision: ok}` (written); a refusal expected and the statement written is an attack not blocked; any other database error is the outcome `error`, which meets no expectation",
            "takes no `tenant` and no `wire` block, and cannot be the step of a `concurrent`; the database and HTTP engines send it on the gate's own login (the HTTP engine's is the served gate's), the pure engine cannot send it (such a scenario is not run there); the oracle models no write of it, its state staying as it was (exact for a refused statement, which changes nothing)",
            "in the spec's step table: | `login` | `sql` (one statement; `$<step name>` is that step's id, quoted) | sends one SQL statement as the gate's runtime database role, the login `serve` holds; its `expect` is `{refused_by: <constraint or trigger>}`, `{refused_by: privilege}` (42501) or `{decision: ok}` (written), and a statement expected refused that was written is an attack not blocked |",
        ],
    },
];

/// Every verb's key, in the spec's order.
pub const VERBS: [&str; 19] = {
    let mut out = [""; 19];
    let mut i = 0;
    while i < out.len() {
        out[i] = VERB_SPECS[i].name;
        i += 1;
    }
    out
};

/// The table of one verb.
pub fn verb(name: &str) -> Option<&'static VerbSpec> {
    VERB_SPECS.iter().find(|v| v.name == name)
}

/// The verbs a step named by `field` of `verb` may have; empty when the
/// field names no step.
pub fn refers_to(verb: &str, field: &str) -> &'static [&'static str] {
    self::verb(verb)
        .and_then(|v| v.keys.iter().find(|k| k.name == field))
        .map_or(&[], |k| k.refers_to)
}

/// The names of a table's keys.
pub fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// Refuses the first key of `map` the table does not list, then the first
/// required key that is missing, naming `path`.
pub fn check_table(map: &Mapping, keys: &[Key], path: &str) -> Result<(), ParseError> {
    for key in map.keys() {
        let text = key_text(key);
        if !keys.iter().any(|k| k.name == text) {
            return Err(LoadErrorKind::UnknownKey {
                path: path.to_string(),
                key: text,
            }
            .into());
        }
    }
    if let Some(missing) = keys
        .iter()
        .find(|k| k.required && !map.contains_key(k.name))
    {
        return Err(LoadErrorKind::MissingKey {
            path: path.to_string(),
            key: missing.name.to_string(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;

    use crate::verbs::*;

    /// The field list a `deny_unknown_fields` struct gives in its refusal of
    /// an unknown key.
    fn serde_fields<T: DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
        let err = crate::yaml::from_str::<T>("zz-not-a-field: 1").unwrap_err();
        let text = err.to_string();
        let tail = text
            .split_once("expected ")
            .map(|(_, t)| t)
            .unwrap_or_else(|| panic!("no field list in {text}"));
        let mut fields: Vec<String> = tail
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        if tail.starts_with("there are no fields") {
            fields.clear();
        }
        fields.sort();
        fields
    }

    fn table(name: &str) -> Vec<String> {
        let mut keys: Vec<String> = verb(name)
            .unwrap()
            .keys
            .iter()
            .map(|k| k.name.to_string())
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn each_verb_table_lists_exactly_its_structs_fields() {
        let pairs: Vec<(&str, Vec<String>)> = vec![
            ("propose", serde_fields::<Propose>()),
            ("approve", serde_fields::<Approve>()),
            ("checkout", serde_fields::<Checkout>()),
            ("pay", serde_fields::<Pay>()),
            ("webhook", serde_fields::<Webhook>()),
            ("grant", serde_fields::<Grant>()),
            ("revoke", serde_fields::<Revoke>()),
            ("set_price", serde_fields::<SetPrice>()),
            ("set_policy", {
                let mut keys = serde_fields::<crate::PolicyPatch>();
                keys.extend(serde_fields::<crate::verbs::SetPolicySigning>());
                keys.sort();
                keys
            }),
            ("advance_clock", serde_fields::<AdvanceClock>()),
            ("set_clock", serde_fields::<SetClock>()),
            ("cancel", serde_fields::<Cancel>()),
            ("provider", serde_fields::<Provider>()),
            ("provider_capture", serde_fields::<ProviderCapture>()),
            ("replay", serde_fields::<Replay>()),
            ("login", serde_fields::<Login>()),
        ];
        for (name, fields) in pairs {
            assert!(!fields.is_empty(), "{name}");
            assert_eq!(table(name), fields, "the `{name}` table and its struct");
        }
        assert!(table("expire").is_empty() && table("reconcile").is_empty());
        let mut invariants = names(INVARIANTS);
        invariants.sort_unstable();
        assert_eq!(invariants, serde_fields::<crate::Invariants>());
        // The counts of a `concurrent` expectation are the decision kinds.
        let mut kinds: Vec<String> = crate::DecisionKind::ALL
            .iter()
            .map(|k| k.as_str().to_string())
            .collect();
        kinds.sort();
        assert_eq!(kinds, serde_fields::<crate::Counts>());
    }

    #[test]
    fn a_step_with_only_the_required_keys_parses_for_every_verb() {
        // The struct requires no key the table calls optional.
        let samples = [
            ("propose", "{actor: a, raw: x}"),
            ("approve", "{request: p, approver: h}"),
            ("checkout", "{request: p, actor: a}"),
            ("pay", "{authority: c}"),
            ("webhook", "{order: o}"),
            ("grant", "{id: d, from: h, to: a, budget_paise: 1}"),
            ("revoke", "{delegation: d, actor: h}"),
            ("set_price", "{sku: X, price_paise: 1}"),
            ("set_policy", "{}"),
            ("advance_clock", "{minutes: 1}"),
            ("set_clock", "{at: '2026-01-01T00:00:00Z'}"),
            ("cancel", "{request: p, actor: a}"),
            ("expire", "{}"),
            ("provider", "{}"),
            ("reconcile", "{}"),
            ("provider_capture", "{order: o}"),
            ("replay", "{of: p}"),
            ("concurrent", "{times: 1, step: {pay: {authority: c}}}"),
            ("login", "{sql: 'SELECT 1'}"),
        ];
        assert_eq!(samples.map(|(v, _)| v), VERBS);
        for (name, body) in samples {
            let value: crate::yaml::Value = crate::yaml::from_str(body).unwrap();
            let mut given: Vec<String> = value
                .as_mapping()
                .unwrap()
                .keys()
                .map(key_text)
                .filter(|k| k != "raw" && k != "minutes")
                .collect();
            given.sort();
            let mut required: Vec<String> = verb(name)
                .unwrap()
                .keys
                .iter()
                .filter(|k| k.required)
                .map(|k| k.name.to_string())
                .collect();
            required.sort();
            assert_eq!(given, required, "{name}");
            let step: crate::yaml::Value =
                crate::yaml::from_str(&format!("{{{name}: {body}}}")).unwrap();
            crate::Step::parse(&step, "s").unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
    }

    #[test]
    fn every_reference_a_verb_makes_is_a_table_key_that_names_verbs() {
        // The fields Verb::references() yields, verb by verb, are exactly the
        // table keys with a non-empty `refers_to`.
        let samples = [
            "{approve: {request: p, approver: h}}",
            "{checkout: {request: p, actor: a}}",
            "{cancel: {request: p, actor: a}}",
            "{pay: {authority: c}}",
            "{webhook: {order: o, receipt: c, raw: x}}",
            "{provider_capture: {order: o}}",
            "{replay: {of: p}}",
            "{login: {sql: 'SELECT $p'}}",
        ];
        for text in samples {
            let value: crate::yaml::Value = crate::yaml::from_str(text).unwrap();
            let step = crate::Step::parse(&value, "s").unwrap();
            let fields: Vec<&str> = step.verb.references().iter().map(|(f, _)| *f).collect();
            let spec = verb(step.verb.name()).unwrap();
            let table: Vec<&str> = spec
                .keys
                .iter()
                .filter(|k| !k.refers_to.is_empty())
                .map(|k| k.name)
                .collect();
            assert_eq!(fields, table, "{text}");
            for v in table.iter().flat_map(|f| refers_to(spec.name, f)) {
                assert!(VERBS.contains(v), "{text}: {v}");
            }
        }
        let with_refs = VERB_SPECS
            .iter()
            .filter(|v| v.keys.iter().any(|k| !k.refers_to.is_empty()))
            .count();
        assert_eq!(with_refs, samples.len());
    }

    #[test]
    fn check_table_refuses_unknown_then_missing_keys() {
        let map: crate::yaml::Value = crate::yaml::from_str("{request: p, by: h}").unwrap();
        let spec = verb("approve").unwrap();
        let err = check_table(map.as_mapping().unwrap(), spec.keys, "steps[0].approve");
        assert_eq!(
            err.unwrap_err().0,
            LoadErrorKind::UnknownKey {
                path: "steps[0].approve".into(),
                key: "by".into()
            }
        );
        let map: crate::yaml::Value = crate::yaml::from_str("{request: p}").unwrap();
        let err = check_table(map.as_mapping().unwrap(), spec.keys, "steps[0].approve");
        assert_eq!(
            err.unwrap_err().0,
            LoadErrorKind::MissingKey {
                path: "steps[0].approve".into(),
                key: "approver".into()
            }
        );
    }
}
