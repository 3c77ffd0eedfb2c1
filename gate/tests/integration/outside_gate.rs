//! What an outside red team found at the gate's own calls, each held here
//! against Postgres: no argument names another grantor; a hop whose spend a
//! NEEDS_REVIEW capture carried past its budget is still revoked; copies of
//! one keyed proposal get one decision whatever races them; operators'
//! timestamps outside 1970..9999 are refused; `captured_paise` sums
//! payments, not orders; `spent_today_paise` sums every currency's row of
//! the day.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::*;
use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use gate::policy::{PatchInstant, PolicyPatch};
use gate::provider::{Payment, PaymentStatus};
use gate::service::webhook::EVENT_CAPTURED;
use gate::service::{HopTerms, razorpay_envelope, sign_webhook};
use gate::{Decision, Reason};
use tokio::task::JoinSet;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn hop(id: &str, to: &str, budget_paise: i64) -> HopTerms {
    HopTerms {
        id: id.into(),
        to: to.into(),
        budget_paise,
        skus: None,
        expires_at: None,
    }
}

async fn exists(w: &World, id: &str) -> Res<bool> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM delegations WHERE tenant_id = 'acme' AND id = $1)",
    )
    .bind(id)
    .fetch_one(w.pool())
    .await?)
}

/// Adds acme's `ops` (an operator who may not approve) and
/// `second-approver` (who may).
async fn more_people(w: &World) -> Res<()> {
    sqlx::query(
        "INSERT INTO people (tenant_id, id, display_name, may_approve, is_operator) VALUES \
         ('acme', 'ops', 'ops', false, true), \
         ('acme', 'second-approver', 'second approver', true, false)",
    )
    .execute(w.owner())
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_grant_is_made_by_its_caller_and_a_parent_is_only_a_live_delegation() -> TestResult {
    on_world(async |w| {
        more_people(w).await?;
        let g = &w.gate;
        for (why, caller, parent, id, reason) in [
            (
                "an operator naming an approver as the parent",
                "ops",
                Some("finance-lead"),
                "d-1",
                Reason::DelegationMissing,
            ),
            (
                "an approver naming another approver",
                "finance-lead",
                Some("second-approver"),
                "d-2",
                Reason::DelegationMissing,
            ),
            (
                "an unknown parent",
                "finance-lead",
                Some("d-ghost"),
                "d-3",
                Reason::DelegationMissing,
            ),
            (
                "a parent that is no identifier",
                "finance-lead",
                Some("d\u{0}buyer"),
                "d-4",
                Reason::DelegationMissing,
            ),
            (
                "an operator rooting a chain",
                "ops",
                None,
                "d-5",
                Reason::DelegationGrantorNotPermitted,
            ),
            (
                "a human who may neither approve nor operate, below a delegation",
                "intern",
                Some("d-buyer"),
                "d-6",
                Reason::DelegationGrantorNotPermitted,
            ),
            (
                "an agent below a delegation",
                "buyer-agent",
                Some("d-buyer"),
                "d-7",
                Reason::DelegationGrantorNotPermitted,
            ),
            (
                "an agent rooting a chain",
                "buyer-agent",
                None,
                "d-8",
                Reason::DelegationGrantorNotPermitted,
            ),
        ] {
            let o = g
                .grant("acme", caller, parent, &hop(id, "procurement-agent", 1000))
                .await?;
            assert_eq!(o.decision, deny(reason), "{why}: {o:?}");
            assert!(!exists(w, id).await?, "{why}: {id} was written");
        }
        let p = w
            .propose_as("procurement-agent", "CLOUD-STARTER", 1)
            .await?;
        assert_eq!(p.decision, deny(Reason::DelegationMissing));
        // The caller is the root's grantor; an operator may carve below a
        // live delegation.
        let root = g
            .grant(
                "acme",
                "second-approver",
                None,
                &hop("d-root", "procurement-agent", 1000),
            )
            .await?;
        assert!(root.is_ok(), "{root:?}");
        let below = g
            .grant(
                "acme",
                "ops",
                Some("d-buyer"),
                &hop("d-below", "renewals-agent", 1000),
            )
            .await?;
        assert!(below.is_ok(), "{below:?}");
        let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT id, parent_id, grantor_id FROM delegations \
             WHERE tenant_id = 'acme' AND id IN ('d-root', 'd-below') ORDER BY id",
        )
        .fetch_all(w.pool())
        .await?;
        assert_eq!(
            rows,
            [
                ("d-below".into(), Some("d-buyer".into()), None),
                ("d-root".into(), None, Some("second-approver".into())),
            ]
        );
        Ok(())
    })
    .await
}

/// A signed capture of `order` under payment id `payment`, sent as the
/// provider sends it.
async fn second_payment(w: &World, order: &str, payment: &str, event_id: &str) -> TestResult {
    let p = Payment {
        id: payment.into(),
        order_id: order.into(),
        amount_paise: 60000,
        currency: "INR".into(),
        status: PaymentStatus::Captured,
        created_at: w.gate.now().timestamp(),
    };
    let body = razorpay_envelope(EVENT_CAPTURED, w.gate.now(), Some(&p), None);
    let sent = w
        .gate
        .webhook(&body, Some(&sign_webhook(SECRET, &body)), Some(event_id))
        .await?;
    assert!(sent.is_ok(), "{payment}: {sent:?}");
    Ok(())
}

/// Proposes, checks out, pays and captures CLOUD-STARTER x1 for `agent`;
/// returns the request and the order.
async fn captured(w: &World, agent: &str) -> Res<(String, String)> {
    let p = w.propose_as(agent, "CLOUD-STARTER", 1).await?;
    assert_eq!(p.decision, Decision::Allow, "{p:?}");
    let request = request_id(&p);
    let c = w.gate.checkout("acme", &request, "finance-lead").await?;
    let paid = w.gate.pay("acme", &id(&c), "finance-lead").await?;
    assert!(paid.is_ok(), "{paid:?}");
    let order = id(&paid);
    let (body, sig) = event(w, &format!("evt_{request}"), EVENT_CAPTURED, &order, 60000);
    let sent = w
        .gate
        .webhook(&body, Some(&sig), Some(&format!("evt_{request}")))
        .await?;
    assert!(sent.is_ok(), "{sent:?}");
    Ok((request, order))
}

#[tokio::test]
async fn a_hop_whose_review_spend_passed_its_budget_is_revoked_and_returns_nothing() -> TestResult {
    on_world(async |w| {
        let sub = w
            .gate
            .grant(
                "acme",
                "finance-lead",
                Some("d-buyer"),
                &hop("d-sub", "procurement-agent", 100_000),
            )
            .await?;
        assert!(sub.is_ok(), "{sub:?}");
        let (request, order) = captured(w, "procurement-agent").await?;
        second_payment(w, &order, "pay_REVIEW00000002", "evt_review_2").await?;
        assert_eq!(
            w.gate.request_state("acme", &request).await?.as_deref(),
            Some("NEEDS_REVIEW")
        );
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-sub").await?,
            Some(120_000),
            "the capture carried the hop past its 100000"
        );
        let revoked = w.gate.revoke("acme", "d-sub", "finance-lead").await?;
        assert!(revoked.is_ok(), "{revoked:?}");
        let (claim, parent_allocated): (i64, i64) = sqlx::query_as(
            "SELECT s.claim_paise, b.allocated_paise FROM delegations s, delegations b \
             WHERE s.tenant_id = 'acme' AND s.id = 'd-sub' AND b.tenant_id = 'acme' AND b.id = 'd-buyer'",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(
            (claim, parent_allocated),
            (100_000, 100_000),
            "nothing went back"
        );
        // The root, overspent by its own agent, is revoked too.
        let (_, order) = captured(w, "buyer-agent").await?;
        for n in 2..=4 {
            second_payment(
                w,
                &order,
                &format!("pay_ROOTREVIEW0000{n}"),
                &format!("evt_root_{n}"),
            )
            .await?;
        }
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(240_000)
        );
        let revoked = w.gate.revoke("acme", "d-buyer", "finance-lead").await?;
        assert!(revoked.is_ok(), "{revoked:?}");
        assert!(w.gate.verify_ledger().await?.intact());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn captured_paise_is_the_sum_of_captured_payments_not_orders() -> TestResult {
    on_world(async |w| {
        let (_, order) = captured(w, "buyer-agent").await?;
        second_payment(w, &order, "pay_SECOND00000002", "evt_second").await?;
        assert_eq!(w.gate.captured_paise("acme").await?, 120_000);
        assert_eq!(w.gate.spent_today_paise("acme").await?, 120_000);
        assert_eq!(
            w.gate.delegation_spent_paise("acme", "d-buyer").await?,
            Some(120_000)
        );
        let inv = w.gate.invariants("acme").await?;
        assert_eq!(inv.captured_paise, 120_000);
        assert_eq!(w.gate.books(Some("acme")).await?.captured_paise, 120_000);
        Ok(())
    })
    .await
}

/// A day holding reservations in two currencies: the tenant's spend today
/// is every reservation of the day, each currency's row counted.
#[tokio::test]
async fn spent_today_counts_every_currency_row_of_the_day() -> TestResult {
    on_world(async |w| {
        let g = &w.gate;
        let inr = g
            .propose("acme", "buyer-agent", &body("SNACK-BOX", 3), None)
            .await?;
        assert_eq!(inr.decision, Decision::Allow, "{inr:?}");
        let usd = PolicyPatch {
            currency: Some("USD".into()),
            ..Default::default()
        };
        assert!(g.set_policy("acme", &usd).await?.is_ok());
        let cents = g
            .propose("acme", "buyer-agent", &body("CLOUD-USD", 1), None)
            .await?;
        assert_eq!(cents.decision, Decision::Allow, "{cents:?}");
        let rows: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM daily_spend WHERE tenant_id = 'acme' AND reserved_paise > 0",
        )
        .fetch_one(w.pool())
        .await?;
        assert_eq!(rows, 2, "one row per currency of the day");
        assert_eq!(g.spent_today_paise("acme").await?, 75_000 + 2_000);
        assert_eq!(g.invariants("acme").await?.spent_today_paise, 77_000);
        Ok(())
    })
    .await
}

fn at(year: i32, month: u32, day: u32, h: u32, m: u32, s: u32) -> DateTime<Utc> {
    let date = NaiveDate::from_ymd_opt(year, month, day).unwrap_or_else(|| panic!("{year}"));
    Utc.from_utc_datetime(&date.and_hms_opt(h, m, s).unwrap_or_else(|| panic!("{h}")))
}

#[tokio::test]
async fn operators_timestamps_outside_1970_to_9999_are_refused_as_invalid() -> TestResult {
    on_world(async |w| {
        let outside = [
            at(-5000, 1, 1, 0, 0, 0),
            at(1969, 12, 31, 23, 59, 59),
            at(10000, 1, 1, 0, 0, 0),
        ];
        for (i, when) in outside.iter().enumerate() {
            let mut terms = hop(&format!("d-far-{i}"), "procurement-agent", 1000);
            terms.expires_at = Some(*when);
            let o = w.gate.grant("acme", "finance-lead", None, &terms).await?;
            assert_eq!(o.decision, deny(Reason::DelegationInvalid), "{when}: {o:?}");
            for patch in [
                PolicyPatch {
                    valid_from: Some(PatchInstant::At(*when)),
                    ..Default::default()
                },
                PolicyPatch {
                    valid_until: Some(PatchInstant::At(*when)),
                    ..Default::default()
                },
            ] {
                let o = w.gate.set_policy("acme", &patch).await?;
                assert_eq!(o.decision, deny(Reason::PolicyInvalid), "{patch:?}: {o:?}");
            }
        }
        // The first and last instants of the range are taken.
        let mut terms = hop("d-last", "procurement-agent", 100_000);
        terms.expires_at = Some(at(9999, 12, 31, 23, 59, 59));
        let o = w.gate.grant("acme", "finance-lead", None, &terms).await?;
        assert!(o.is_ok(), "{o:?}");
        let patch = PolicyPatch {
            valid_from: Some(PatchInstant::At(at(1970, 1, 1, 0, 0, 0))),
            valid_until: Some(PatchInstant::At(at(9999, 12, 31, 23, 59, 59))),
            ..Default::default()
        };
        let o = w.gate.set_policy("acme", &patch).await?;
        assert!(o.is_ok(), "{o:?}");
        let p = w
            .propose_as("procurement-agent", "CLOUD-STARTER", 1)
            .await?;
        assert_eq!(p.decision, Decision::Allow, "{p:?}");
        Ok(())
    })
    .await
}

/// How many keys are raced, and how many copies of each are sent at once.
const RACED_KEYS: usize = 640;
const COPIES: usize = 4;

/// Sends `COPIES` copies of each of `RACED_KEYS` keyed proposals, eight
/// keys at a time, with `disturb` run while each wave is in flight; returns
/// every engine error, and asserts that every key got exactly one decision
/// of its own (the other copies replays of it).
async fn race_keyed_copies(
    w: &World,
    disturb: impl AsyncFn(&World, bool) -> TestResult,
) -> Res<Vec<String>> {
    let mut errors = Vec::new();
    for wave in 0..RACED_KEYS / 8 {
        let mut set = JoinSet::new();
        for k in 0..8 {
            let key = format!("race-{wave}-{k}");
            // Three agents, so that velocity refusals come late.
            let agent = ["buyer-agent", "procurement-agent", "renewals-agent"][k % 3];
            for _ in 0..COPIES {
                let gate = Arc::clone(&w.gate);
                let key = key.clone();
                set.spawn(async move {
                    let o = gate
                        .propose("acme", agent, &body("SNACK-BOX", 1), Some(&key))
                        .await;
                    (key, o)
                });
            }
        }
        disturb(w, wave % 2 == 0).await?;
        let mut firsts: BTreeMap<String, usize> = BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let (key, o) = joined?;
            match o {
                Ok(o) => *firsts.entry(key).or_default() += usize::from(!o.replayed),
                Err(e) => errors.push(format!("{key}: {e}")),
            }
        }
        if errors.is_empty() {
            for (key, n) in firsts {
                assert_eq!(n, 1, "{key}: {n} decisions of its own");
            }
        }
    }
    Ok(errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_copies_raced_against_a_currency_change_get_one_decision() -> TestResult {
    on_world_with_pool(24, async |w| {
        let errors = race_keyed_copies(w, async |w, flip| {
            let currency = if flip { "INR" } else { "USD" };
            let patch = PolicyPatch {
                currency: Some(currency.into()),
                ..Default::default()
            };
            let o = w.gate.set_policy("acme", &patch).await?;
            assert!(o.is_ok(), "{o:?}");
            Ok(())
        })
        .await?;
        assert!(
            errors.is_empty(),
            "{} engine errors: {errors:?}",
            errors.len()
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_copies_raced_across_midnight_get_one_decision() -> TestResult {
    on_world_with_pool(24, async |w| {
        let midnight = at(2026, 9, 4, 0, 0, 0);
        let errors = race_keyed_copies(w, async |w, flip| {
            let side = if flip {
                Duration::microseconds(1)
            } else {
                Duration::microseconds(-1)
            };
            w.clock.set(midnight + side);
            Ok(())
        })
        .await?;
        assert!(
            errors.is_empty(),
            "{} engine errors: {errors:?}",
            errors.len()
        );
        Ok(())
    })
    .await
}
