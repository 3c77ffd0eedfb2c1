//! Invariants of the pure engine that must hold for every input, not just the
//! examples in the unit tests.

use chrono::{DateTime, Duration, TimeZone, Utc};
use gate::policy::{DenialRate, Velocity};
use gate::{
    Catalog, CatalogItem, Decision, DelegationChain, DelegationHop, Inputs, Policy,
    PurchaseProposal, SpendState, evaluate,
};
use proptest::prelude::*;

const MERCHANTS: &[&str] = &["cloudco", "snackshop", "gadgetmart"];
const CATEGORIES: &[&str] = &["cloud-credits", "food", "electronics"];
const CURRENCIES: &[&str] = &["INR", "USD"];
const SKUS: &[&str] = &["A", "B", "C", "D"];

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 9, 3, 10, 0, 0).unwrap()
}

/// A subset of `all`: most often all of it, sometimes empty.
fn subset(all: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        1 => Just(Vec::new()),
        10 => Just(all.to_vec()),
        4 => proptest::sample::subsequence(all, 0..=all.len()),
    ]
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn currency() -> impl Strategy<Value = &'static str> {
    prop_oneof![9 => Just("INR"), 1 => proptest::sample::select(CURRENCIES)]
}

fn item() -> impl Strategy<Value = CatalogItem> {
    (
        proptest::sample::select(SKUS),
        proptest::sample::select(MERCHANTS),
        1i64..150_000,
        currency(),
        proptest::sample::select(CATEGORIES),
        1u32..6,
        proptest::bool::weighted(0.95),
    )
        .prop_map(
            |(sku, merchant, price, currency, category, max, available)| CatalogItem {
                sku: sku.into(),
                merchant: merchant.into(),
                price_paise: price,
                currency: currency.into(),
                category: category.into(),
                max_quantity: max,
                available,
                description: String::new(),
            },
        )
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        currency(),
        0i64..800_000,
        0i64..1_500_000,
        0i64..200_000,
        subset(MERCHANTS),
        subset(CATEGORIES),
        (5u32..30, 1u32..120, 2u32..10, 1u32..120),
    )
        .prop_map(
            |(currency, per_tx, daily, threshold, merchants, categories, (vp, vw, dp, dw))| {
                Policy {
                    currency: currency.into(),
                    per_transaction_cap_paise: per_tx,
                    daily_cap_paise: daily,
                    approval_threshold_paise: threshold,
                    allowed_merchants: merchants,
                    allowed_categories: categories,
                    valid_from: "2026-01-01T00:00:00Z".parse().unwrap(),
                    valid_until: "2026-12-31T23:59:59Z".parse().unwrap(),
                    velocity: Velocity {
                        max_proposals: vp,
                        window_minutes: vw,
                    },
                    denial_rate: DenialRate {
                        max_denials: dp,
                        window_minutes: dw,
                    },
                }
            },
        )
}

fn chain() -> impl Strategy<Value = DelegationChain> {
    (
        1usize..4,
        0i64..1_000_000,
        proptest::option::of(subset(SKUS)),
        proptest::bool::weighted(0.05),
        proptest::option::weighted(0.2, -120i64..120),
        0i64..400_000,
    )
        .prop_map(|(depth, budget, skus, revoked, expiry, spent)| {
            let mut hops = Vec::new();
            let mut parent: Option<String> = None;
            for i in 0..depth {
                let id = format!("d{i}");
                let b = budget / (i as i64 + 1);
                let grantee = if i + 1 == depth {
                    "agent".to_string()
                } else {
                    format!("mid{i}")
                };
                hops.push(DelegationHop {
                    id: id.clone(),
                    parent: parent.clone(),
                    grantee,
                    budget_paise: b,
                    allocated_paise: if i + 1 == depth {
                        0
                    } else {
                        budget / (i as i64 + 2)
                    },
                    spent_paise: if i + 1 == depth { spent.min(b) } else { 0 },
                    skus: if i == 0 { skus.clone() } else { None },
                    expires_at: expiry.map(|m| now() + Duration::minutes(m)),
                    revoked: revoked && i == 0,
                });
                parent = Some(id);
            }
            DelegationChain::new(hops)
        })
}

fn spend() -> impl Strategy<Value = SpendState> {
    (0i64..500_000, 0usize..8, 0usize..3).prop_map(|(today, p, d)| SpendState {
        spent_today_paise: today,
        proposals: (0..p)
            .map(|i| now() - Duration::minutes(i as i64 * 3))
            .collect(),
        denials: (0..d)
            .map(|i| now() - Duration::minutes(i as i64 * 7))
            .collect(),
    })
}

fn case() -> impl Strategy<
    Value = (
        Vec<CatalogItem>,
        Policy,
        DelegationChain,
        SpendState,
        String,
        u32,
    ),
> {
    (
        proptest::collection::vec(item(), 1..5),
        policy(),
        chain(),
        spend(),
        proptest::sample::select(SKUS),
        any::<proptest::sample::Index>(),
        proptest::bool::weighted(0.85),
        1u32..3,
    )
        .prop_map(|(items, p, c, s, random_sku, index, from_catalog, q)| {
            // Mostly a sku the catalog has, sometimes any sku at all.
            let sku = if from_catalog {
                index.get(&items).sku.clone()
            } else {
                random_sku.to_string()
            };
            (items, p, c, s, sku, q)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn nothing_passes_that_breaks_a_cap_a_budget_or_an_allowlist(
        (items, policy, chain, spend, sku, quantity) in case()
    ) {
        let catalog = Catalog::new(items);
        let proposal = PurchaseProposal { sku, quantity, purpose: "p".into() };
        let e = evaluate(&Inputs {
            actor: "agent", proposal: &proposal, catalog: &catalog, policy: &policy,
            chain: &chain, spend: &spend, now: now(),
        });
        if matches!(e.decision, Decision::Deny(_)) {
            return Ok(());
        }
        let p = e.purchase.expect("a non-denied decision carries its purchase");
        let leaf = chain.leaf().expect("a non-denied decision has a delegation");
        prop_assert!(p.amount_paise <= policy.per_transaction_cap_paise);
        prop_assert!(spend.spent_today_paise + p.amount_paise <= policy.daily_cap_paise);
        prop_assert!(p.amount_paise <= leaf.remaining_paise());
        prop_assert!(chain.hops.iter().all(|h| !h.revoked));
        prop_assert!(chain.hops.iter().all(|h| h.expires_at.is_none_or(|e| now() <= e)));
        prop_assert!(chain.hops.iter().all(|h| h.skus.as_ref().is_none_or(|s| s.contains(&p.sku))));
        prop_assert!(policy.allowed_merchants.contains(&p.merchant));
        prop_assert!(policy.allowed_categories.contains(&p.category));
        prop_assert_eq!(&p.currency, &policy.currency);
        prop_assert_eq!(p.amount_paise, p.unit_price_paise * i64::from(p.quantity));
        let item = catalog.get(&p.sku).expect("sku from the catalog");
        prop_assert!(item.available && p.quantity <= item.max_quantity);
        // Step-up exactly above the threshold.
        let above = p.amount_paise > policy.approval_threshold_paise;
        prop_assert_eq!(matches!(e.decision, Decision::StepUp(_)), above);
    }

    #[test]
    fn the_threshold_never_turns_a_refusal_into_a_purchase(
        (items, policy, chain, spend, sku, quantity) in case(), threshold in 0i64..2_000_000
    ) {
        let catalog = Catalog::new(items);
        let proposal = PurchaseProposal { sku, quantity, purpose: "p".into() };
        let decide = |policy: &Policy| evaluate(&Inputs {
            actor: "agent", proposal: &proposal, catalog: &catalog, policy,
            chain: &chain, spend: &spend, now: now(),
        }).decision;
        let before = decide(&policy);
        let mut moved = policy.clone();
        moved.approval_threshold_paise = threshold;
        let after = decide(&moved);
        prop_assert_eq!(matches!(before, Decision::Deny(_)), matches!(after, Decision::Deny(_)));
    }

    #[test]
    fn evaluation_is_deterministic(
        (items, policy, chain, spend, sku, quantity) in case()
    ) {
        let catalog = Catalog::new(items);
        let proposal = PurchaseProposal { sku, quantity, purpose: "p".into() };
        let inputs = Inputs {
            actor: "agent", proposal: &proposal, catalog: &catalog, policy: &policy,
            chain: &chain, spend: &spend, now: now(),
        };
        prop_assert_eq!(evaluate(&inputs), evaluate(&inputs));
    }

    #[test]
    fn any_bytes_get_a_reason_and_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = gate::parse_proposal(&bytes);
    }

    #[test]
    fn any_json_object_either_parses_to_the_three_fields_or_refuses(
        sku in ".{0,20}", quantity in any::<i64>(), purpose in ".{0,250}", extra in proptest::option::of("[a-z_]{1,12}")
    ) {
        let mut obj = serde_json::json!({"sku": sku, "quantity": quantity, "purpose": purpose});
        if let Some(key) = &extra {
            obj[key.as_str()] = serde_json::json!(1);
        }
        let result = gate::parse_proposal(obj.to_string().as_bytes());
        if let Ok(p) = &result {
            prop_assert!(extra.as_deref().is_none_or(|k| ["sku", "quantity", "purpose"].contains(&k)));
            prop_assert!(p.quantity >= 1 && i64::from(p.quantity) == quantity);
            prop_assert!(!p.purpose.trim().is_empty() && p.purpose.chars().count() <= 200);
        }
    }
}

/// The generators reach every kind of decision often enough for the
/// properties above to mean something.
#[test]
fn the_generated_cases_reach_allow_step_up_and_deny() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut allow, mut step_up, mut deny) = (0, 0, 0);
    let mut reasons = std::collections::BTreeMap::new();
    for _ in 0..2000 {
        let (items, policy, chain, spend, sku, quantity) =
            case().new_tree(&mut runner).unwrap().current();
        let catalog = Catalog::new(items);
        let proposal = PurchaseProposal {
            sku,
            quantity,
            purpose: "p".into(),
        };
        match evaluate(&Inputs {
            actor: "agent",
            proposal: &proposal,
            catalog: &catalog,
            policy: &policy,
            chain: &chain,
            spend: &spend,
            now: now(),
        })
        .decision
        {
            Decision::Allow => allow += 1,
            Decision::StepUp(_) => step_up += 1,
            Decision::Deny(r) => {
                deny += 1;
                *reasons.entry(r.code()).or_insert(0) += 1;
            }
        }
    }
    eprintln!("allow {allow}, step_up {step_up}, deny {deny}: {reasons:?}");
    assert!(
        allow >= 50 && step_up >= 40 && deny >= 100,
        "allow {allow}, step_up {step_up}, deny {deny}"
    );
}
