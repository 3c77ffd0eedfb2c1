//! Each kind of bad input is refused with the file, the scenario id and the
//! offending key or value, and costs nothing else.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use scenarios::{Corpus, LoadError, LoadErrorKind};

/// A fresh, empty folder under the system temp dir (removed on drop).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("scenarios-bad-input-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const GOOD: &str = r#"
- id: good-one
  label: legit
  world: standard
  steps:
    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}
      expect: {decision: allow}
  invariants: {spent_today_paise: 25000}
"#;

/// Loads a folder holding GOOD in `good.yaml` and `bad` in `bad.yaml`,
/// checks the good scenario survived, and returns the single error.
fn only_error(bad: &str) -> (LoadError, PathBuf) {
    let dir = TempDir::new();
    dir.write("a-good.yaml", GOOD);
    let bad_path = dir.write("b-bad.yaml", bad);
    let corpus = Corpus::load(&dir.0);
    assert!(
        corpus.get("good-one").is_some(),
        "the good file lost its scenario: {:?}",
        corpus.errors
    );
    assert_eq!(corpus.errors.len(), 1, "{:#?}", corpus.errors);
    (corpus.errors[0].clone(), bad_path)
}

fn assert_names(err: &LoadError, file: &Path, id: &str, subject: &str) {
    assert_eq!(err.file, file, "{err}");
    assert_eq!(err.scenario.as_deref(), Some(id), "{err}");
    assert_eq!(err.kind.subject(), Some(subject), "{err}");
    let text = err.to_string();
    for part in [
        file.display().to_string(),
        id.to_string(),
        subject.to_string(),
    ] {
        assert!(text.contains(&part), "`{text}` does not mention `{part}`");
    }
}

fn scenario(id: &str, extra: &str, steps: &str) -> String {
    format!(
        "- id: {id}\n  label: attack\n  class: tool-boundary.extra-field\n  refs: [x]\n  world: standard\n{extra}  steps:\n{steps}"
    )
}

const STEP: &str =
    "    - propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: p}}\n";

#[test]
fn unknown_scenario_key() {
    let (err, file) = only_error(&scenario("bad-a", "  severity: high\n", STEP));
    assert_names(&err, &file, "bad-a", "severity");
    assert_eq!(err.line, Some(6));
}

#[test]
fn unknown_key_inside_a_verb() {
    let steps = "    - propose: {actor: buyer-agent, amount: 5, body: {sku: SNACK-BOX, quantity: 1, purpose: p}}\n";
    let (err, file) = only_error(&scenario("bad-b", "", steps));
    assert_names(&err, &file, "bad-b", "amount");
    assert!(
        matches!(&err.kind, LoadErrorKind::UnknownKey { path, .. } if path == "steps[0].propose"),
        "{err}"
    );
    assert_eq!(err.line, Some(7));
}

#[test]
fn unknown_key_in_expect_and_invariants() {
    let steps = format!("{STEP}      expect: {{decision: deny, because: SKU_UNKNOWN}}\n");
    let (err, file) = only_error(&scenario("bad-c", "", &steps));
    assert_names(&err, &file, "bad-c", "because");
    let (err, file) = only_error(&format!(
        "{}  invariants: {{orders: 0}}\n",
        scenario("bad-d", "", STEP)
    ));
    assert_names(&err, &file, "bad-d", "orders");
}

#[test]
fn unknown_verb() {
    let (err, file) = only_error(&scenario("bad-e", "", "    - purchase: {sku: SNACK-BOX}\n"));
    assert_names(&err, &file, "bad-e", "purchase");
    assert!(matches!(err.kind, LoadErrorKind::UnknownVerb { .. }));
}

#[test]
fn step_with_zero_or_two_verbs() {
    let (err, file) = only_error(&scenario("bad-f", "", "    - name: lonely\n"));
    assert_eq!(err.file, file);
    assert_eq!(err.scenario.as_deref(), Some("bad-f"));
    assert!(
        matches!(&err.kind, LoadErrorKind::NoVerb { path, .. } if path == "steps[0]"),
        "{err}"
    );
    let two = "    - propose: {actor: buyer-agent, raw: x}\n      revoke: {delegation: d-buyer, actor: finance-lead}\n";
    let (err, _) = only_error(&scenario("bad-g", "", two));
    assert!(
        matches!(&err.kind, LoadErrorKind::TwoVerbs { verbs, .. } if verbs == &["propose", "revoke"]),
        "{err}"
    );
    assert!(err.to_string().contains("propose, revoke"));
}

#[test]
fn dangling_references() {
    let later = "    - approve: {request: p1, approver: finance-lead}\n    - name: p1\n      propose: {actor: buyer-agent, raw: x}\n";
    let (err, file) = only_error(&scenario("bad-h", "", later));
    assert_names(&err, &file, "bad-h", "p1");
    assert!(
        err.to_string().contains("steps[0].approve.request"),
        "{err}"
    );
    let missing = format!("{STEP}    - replay: {{of: nowhere}}\n");
    let (err, file) = only_error(&scenario("bad-i", "", &missing));
    assert_names(&err, &file, "bad-i", "nowhere");
    let wrong_kind =
        "    - {name: p1, propose: {actor: buyer-agent, raw: x}}\n    - webhook: {order: p1}\n";
    let (err, _) = only_error(&scenario("bad-j", "", wrong_kind));
    assert!(err.to_string().contains("`propose` step"), "{err}");
}

#[test]
fn unknown_taxonomy_class() {
    let text =
        scenario("bad-k", "", STEP).replace("tool-boundary.extra-field", "tool-boundary.made-up");
    let (err, file) = only_error(&text);
    assert_names(&err, &file, "bad-k", "tool-boundary.made-up");
    assert_eq!(err.line, Some(3));
}

#[test]
fn unknown_reason_code() {
    let steps = format!("{STEP}      expect: {{decision: deny, reason: TOO_EXPENSIVE}}\n");
    let (err, file) = only_error(&scenario("bad-l", "", &steps));
    assert_names(&err, &file, "bad-l", "TOO_EXPENSIVE");
    assert_eq!(err.line, Some(8));
    let steps =
        format!("{STEP}      expect: {{decision: deny, reason_any: [SKU_UNKNOWN, NOT_A_CODE]}}\n");
    let (err, _) = only_error(&scenario("bad-m", "", &steps));
    assert_eq!(err.kind.subject(), Some("NOT_A_CODE"));
}

#[test]
fn duplicate_ids_keep_the_first() {
    let dup = GOOD.replace("purpose: \"snacks\"", "purpose: \"second\"");
    let (err, file) = only_error(&dup);
    assert_names(&err, &file, "good-one", "good-one");
    assert!(
        matches!(&err.kind, LoadErrorKind::DuplicateId { first_file, .. } if first_file.ends_with("a-good.yaml"))
    );
}

#[test]
fn unknown_world() {
    let text = scenario("bad-n", "", STEP).replace("world: standard", "world: narnia");
    let (err, file) = only_error(&text);
    assert_names(&err, &file, "bad-n", "narnia");
    let text = scenario("bad-o", "", STEP).replace("world: standard", "world: ../standard");
    let (err, _) = only_error(&text);
    assert!(
        matches!(err.kind, LoadErrorKind::UnknownWorld { .. }),
        "{err}"
    );
}

#[test]
fn non_kebab_ids() {
    for id in ["Bad_Id", "bad--id", "\"bad id\""] {
        let (err, file) = only_error(&scenario(id, "", STEP));
        assert_eq!(err.file, file);
        assert!(matches!(err.kind, LoadErrorKind::BadId { .. }), "{err}");
        assert!(err.to_string().contains(id.trim_matches('"')), "{err}");
    }
}

#[test]
fn a_syntax_error_costs_only_its_file() {
    let (err, file) = only_error("- id: broken\n  steps: [\n");
    assert_eq!(err.file, file);
    assert!(matches!(err.kind, LoadErrorKind::Syntax { .. }));
    assert!(err.line.is_some());
}

#[test]
fn a_bad_scenario_costs_nothing_of_its_neighbours() {
    let dir = TempDir::new();
    let checked = |id: &str| {
        format!(
            "{}  invariants: {{provider_orders: 0}}\n",
            scenario(id, "", STEP)
        )
    };
    let text = format!(
        "{}{}{}",
        checked("first-good"),
        scenario("middle-bad", "  oops: 1\n", STEP),
        checked("last-good")
    );
    dir.write("mixed.yaml", &text);
    let corpus = Corpus::load(&dir.0);
    let ids: Vec<&str> = corpus.scenarios.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["first-good", "last-good"]);
    assert_eq!(corpus.errors.len(), 1);
    assert_eq!(corpus.errors[0].scenario.as_deref(), Some("middle-bad"));
    assert!(scenarios::load_corpus(&dir.0).is_err());
}

#[test]
fn corpus_folder_worlds_come_first() {
    let dir = TempDir::new();
    let standard =
        fs::read_to_string(scenarios::project_dir().join("worlds/standard.yaml")).unwrap();
    dir.write(
        "worlds/standard.yaml",
        &standard.replace("daily_cap_paise: 500000", "daily_cap_paise: 7"),
    );
    dir.write("good.yaml", GOOD);
    let corpus = scenarios::load_corpus(&dir.0).unwrap();
    assert_eq!(
        corpus.worlds["standard"].tenants[0].policy.daily_cap_paise,
        7
    );
    let single = scenarios::load_corpus(dir.0.join("good.yaml")).unwrap();
    assert_eq!(
        single.worlds["standard"].tenants[0].policy.daily_cap_paise,
        7
    );
}

#[test]
fn a_broken_world_is_named_and_its_scenarios_refused() {
    let dir = TempDir::new();
    dir.write(
        "worlds/odd.yaml",
        "now: 2026-09-03T10:00:00Z\ntenants: []\nweather: sunny\n",
    );
    let world_file = dir.0.join("worlds/odd.yaml");
    dir.write("good.yaml", GOOD);
    dir.write(
        "odd.yaml",
        &GOOD
            .replace("good-one", "odd-one")
            .replace("world: standard", "world: odd"),
    );
    let corpus = Corpus::load(&dir.0);
    assert!(corpus.get("good-one").is_some());
    assert!(corpus.get("odd-one").is_none());
    assert!(
        corpus
            .errors
            .iter()
            .any(|e| e.file == world_file && e.kind.subject() == Some("weather")),
        "{:#?}",
        corpus.errors
    );
    assert!(
        corpus
            .errors
            .iter()
            .any(|e| e.scenario.as_deref() == Some("odd-one"))
    );
}

#[test]
fn a_missing_path_is_an_error_not_a_panic() {
    let errors = scenarios::load_corpus("/definitely/not/here").unwrap_err();
    assert!(matches!(errors[0].kind, LoadErrorKind::Io { .. }));
}

fn step_scenario(id: &str, steps: &str) -> String {
    format!("- id: {id}\n  label: legit\n  world: standard\n  steps:\n{steps}")
}

#[test]
fn a_clock_beyond_ten_years_names_file_scenario_step_and_field() {
    let huge = "    - advance_clock: {minutes: 9223372036854775807}\n";
    let (err, file) = only_error(&step_scenario("clock-huge", huge));
    assert_eq!(err.file, file);
    assert_eq!(err.scenario.as_deref(), Some("clock-huge"));
    assert!(
        matches!(&err.kind, LoadErrorKind::InvalidValue { path, .. } if path == "steps[0].advance_clock.minutes"),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("10 years") && text.contains("clock-huge"),
        "{text}"
    );
    // About 300,000 years in minutes: representable, far outside the bound.
    let years = "    - advance_clock: {minutes: 157680000000}\n";
    let (err, _) = only_error(&step_scenario("clock-years", years));
    assert!(
        err.to_string().contains("steps[0].advance_clock.minutes"),
        "{err}"
    );
    let back =
        "    - propose: {actor: buyer-agent, raw: x}\n    - advance_clock: {seconds: -315619201}\n";
    let (err, _) = only_error(&step_scenario("clock-back", back));
    assert!(
        err.to_string().contains("steps[1].advance_clock.seconds"),
        "{err}"
    );
    let at = "    - set_clock: {at: '2037-01-01T00:00:00Z'}\n";
    let (err, _) = only_error(&step_scenario("clock-at", at));
    assert!(err.to_string().contains("steps[0].set_clock.at"), "{err}");
}

#[test]
fn bad_base64_and_two_raw_bodies_are_refused() {
    let bad = "    - propose: {actor: buyer-agent, raw_b64: '%%%'}\n";
    let (err, _) = only_error(&step_scenario("b64-bad", bad));
    assert!(
        matches!(&err.kind, LoadErrorKind::InvalidValue { path, message }
            if path == "steps[0].propose.raw_b64" && message.contains("base64")),
        "{err}"
    );
    let both = "    - propose: {actor: buyer-agent, raw: x, raw_b64: eA==}\n";
    let (err, _) = only_error(&step_scenario("b64-both", both));
    assert!(err.to_string().contains("raw_b64"), "{err}");
}

#[test]
fn an_unknown_provider_mode_is_refused() {
    let steps = "    - provider: {mode: sometimes}\n";
    let (err, _) = only_error(&step_scenario("provider-mode", steps));
    assert!(
        matches!(&err.kind, LoadErrorKind::InvalidValue { path, message }
            if path == "steps[0].provider" && message.contains("sometimes")),
        "{err}"
    );
}

#[test]
fn request_states_must_name_a_proposing_step() {
    let text = format!(
        "{}  invariants: {{request_states: {{p9: AUTHORIZED}}}}\n",
        step_scenario("states-unknown", STEP)
    );
    let (err, _) = only_error(&text);
    assert_eq!(err.kind.subject(), Some("p9"), "{err}");
    assert!(err.to_string().contains("request_states"), "{err}");
    let clock = "    - {name: t, advance_clock: {minutes: 1}}\n";
    let text = format!(
        "{}  invariants: {{request_states: {{t: AUTHORIZED}}}}\n",
        step_scenario("states-clock", clock)
    );
    let (err, _) = only_error(&text);
    assert!(err.to_string().contains("`advance_clock` step"), "{err}");
    let state = "    - {name: p1, propose: {actor: buyer-agent, raw: x}}\n";
    let text = format!(
        "{}  invariants: {{request_states: {{p1: SHIPPED}}}}\n",
        step_scenario("states-bad-state", state)
    );
    let (err, _) = only_error(&text);
    assert!(err.to_string().contains("SHIPPED"), "{err}");
}

#[test]
fn every_new_field_loads_and_round_trips() {
    let dir = TempDir::new();
    let text = r#"
- id: new-fields
  label: legit
  world: standard
  steps:
    - {name: p1, tenant: acme, propose: {actor: buyer-agent, raw_b64: "eyJza3UiOiJTTkFDSy1CT1giLCJxdWFudGl0eSI6MSwicHVycG9zZSI6InAifQ=="}}
    - {name: c1, checkout: {request: p1, actor: finance-lead, tenant: acme}}
    - {name: o1, pay: {authority: c1}}
    - {webhook: {order: o1, signature_header: "sha256=00", event_id: "evt x", raw_b64: "e30="}}
    - {advance_clock: {seconds: -30}}
    - {set_clock: {at: '2026-09-04T10:00:00Z'}}
    - {cancel: {request: p1, actor: buyer-agent}}
    - {expire: {}}
    - {provider: {mode: late, times: 2}}
    - {reconcile: }
    - {provider_capture: {order: o1}}
  invariants: {provider_captured_paise: 0, books_balanced: true, request_states: {p1: CANCELLED}}
"#;
    dir.write("new.yaml", text);
    let corpus = scenarios::load_corpus(&dir.0).unwrap_or_else(|e| panic!("{e:#?}"));
    let s = corpus.get("new-fields").unwrap();
    assert_eq!(s.steps[0].tenant.as_deref(), Some("acme"));
    assert_eq!(s.steps[1].tenant.as_deref(), Some("acme"));
    let again: Vec<scenarios::Scenario> = scenarios::yaml::from_str(&s.to_yaml()).unwrap();
    assert_eq!(&again[0], s);
    let names: Vec<&str> = s.steps.iter().map(|st| st.verb.name()).collect();
    assert_eq!(
        names,
        [
            "propose",
            "checkout",
            "pay",
            "webhook",
            "advance_clock",
            "set_clock",
            "cancel",
            "expire",
            "provider",
            "reconcile",
            "provider_capture"
        ]
    );
}

/// An attack whose success nothing would notice: every step expected to be
/// allowed or accepted, and no money invariant.
const UNCHECKED: &str = r#"
- id: money-moves-unchecked
  label: attack
  class: policy.mixed-currency-cap
  refs: [x]
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}, expect: {decision: allow}}
    - {name: c1, checkout: {request: p1, actor: finance-lead}, expect: {decision: ok}}
    - {name: o1, pay: {authority: c1}, expect: {decision: ok}}
    - {webhook: {order: o1, amount_paise: 25000}, expect: {decision: ok}}
  invariants: {ledger_intact: true}
"#;

#[test]
fn an_attack_with_no_check_is_refused_naming_what_is_missing() {
    let (err, file) = only_error(UNCHECKED);
    assert_eq!(err.file, file, "{err}");
    assert_eq!(err.scenario.as_deref(), Some("money-moves-unchecked"));
    assert!(
        matches!(err.kind, LoadErrorKind::AttackWithoutCheck { .. }),
        "{err}"
    );
    let text = err.to_string();
    for part in [
        "money-moves-unchecked",
        "`deny` or `step_up`",
        "provider_orders",
        "request_states",
        "`ledger_intact` alone is not one",
    ] {
        assert!(text.contains(part), "`{text}` does not mention `{part}`");
    }
    assert!(scenarios::load_corpus(&file).is_err());
    // Any one check makes it an attack the loader takes: a money invariant,
    // a step expected refused, or a race with refused copies.
    for fix in [
        UNCHECKED.replace("{ledger_intact: true}", "{ledger_intact: true, captured_paise: 0}"),
        UNCHECKED.replace(
            "{webhook: {order: o1, amount_paise: 25000}, expect: {decision: ok}}",
            "{webhook: {order: o1, amount_paise: 25000, signature: invalid}, expect: {decision: deny}}",
        ),
        UNCHECKED.replace(
            "{webhook: {order: o1, amount_paise: 25000}, expect: {decision: ok}}",
            "{concurrent: {times: 2, step: {webhook: {order: o1, amount_paise: 25000, event_id: e1}}}, expect: {ok: 1, deny: 1}}",
        ),
    ] {
        let dir = TempDir::new();
        let path = dir.write("fixed.yaml", &fix);
        let corpus = Corpus::load(&path);
        assert!(corpus.errors.is_empty(), "{:#?}", corpus.errors);
        assert_eq!(corpus.scenarios.len(), 1);
    }
    // An empty map checks nothing.
    let empty = UNCHECKED.replace("{ledger_intact: true}", "{delegation_spent_paise: {}}");
    let (err, _) = only_error(&empty);
    assert!(
        matches!(err.kind, LoadErrorKind::AttackWithoutCheck { .. }),
        "{err}"
    );
    // A legitimate scenario needs no such check.
    let legit = UNCHECKED
        .replace("label: attack", "label: legit")
        .replace("  class: policy.mixed-currency-cap\n", "");
    let dir = TempDir::new();
    let corpus = Corpus::load(dir.write("legit.yaml", &legit));
    assert!(corpus.errors.is_empty(), "{:#?}", corpus.errors);
}

#[test]
fn a_provider_mismatch_names_its_field_and_only_a_mismatch_has_one() {
    let steps = |provider: &str| {
        format!(
            "    - {{provider: {provider}, expect: {{decision: ok}}}}\n    - propose: {{actor: buyer-agent, body: {{sku: SNACK-BOX, quantity: 1, purpose: p}}}}\n      expect: {{decision: deny}}\n"
        )
    };
    let (err, file) = only_error(&scenario(
        "mismatch-no-field",
        "",
        &steps("{mode: mismatch}"),
    ));
    assert_names(&err, &file, "mismatch-no-field", "field");
    assert!(
        matches!(err.kind, LoadErrorKind::MissingKey { .. }),
        "{err}"
    );
    let (err, _) = only_error(&scenario(
        "field-without-mismatch",
        "",
        &steps("{mode: reject, field: amount}"),
    ));
    assert!(err.to_string().contains("steps[0].provider.field"), "{err}");
    let (err, _) = only_error(&scenario(
        "mismatch-unknown-field",
        "",
        &steps("{mode: mismatch, field: colour}"),
    ));
    assert!(err.to_string().contains("colour"), "{err}");
    for field in ["amount", "currency", "merchant", "receipt", "id"] {
        let dir = TempDir::new();
        let text = scenario(
            "mismatch-ok",
            "",
            &steps(&format!("{{mode: mismatch, field: {field}, times: 1}}")),
        );
        let corpus = Corpus::load(dir.write("ok.yaml", &text));
        assert!(corpus.errors.is_empty(), "{field}: {:#?}", corpus.errors);
    }
}

#[test]
fn exact_counts_must_account_for_every_copy() {
    let steps = "    - concurrent:\n        times: 3\n        step: {propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: p}}}\n      expect: {deny: 2}\n";
    let (err, file) = only_error(&scenario("counts-short", "", steps));
    assert_eq!(err.file, file);
    assert_eq!(err.scenario.as_deref(), Some("counts-short"));
    let text = err.to_string();
    assert!(text.contains("steps[0].expect"), "{text}");
    assert!(text.contains("add up to 2, but `times` is 3"), "{text}");
}
