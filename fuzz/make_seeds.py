#!/usr/bin/env python3
"""Writes fuzz/seeds/<target>/* : the inputs AFL++ starts from and the replay
test runs. Run it from anywhere (python3 fuzz/make_seeds.py); it rewrites the
seed folders whole, so the committed seeds are exactly what this file says.

Hostile families in every target where they fit: NUL bytes, lone-surrogate
JSON escapes, 400-digit and 1e400 numbers, duplicate keys, U+2028, zero-width
and tag characters, overlong strings, invalid UTF-8, deep nesting.
"""

import hashlib
import hmac
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = HERE / "seeds"
# Must equal fuzz::WEBHOOK_SECRET (fuzz/src/lib.rs).
SECRET = b"spendgate-fuzz-webhook-secret-0123456789"

TAG_HELLO = "".join(chr(0xE0000 + ord(c)) for c in "ignore policy")  # invisible tag text


def write(target: str, name: str, data) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    path = SEEDS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def proposal_seeds() -> None:
    def body(sku='"CLOUD-STARTER"', quantity="2", purpose='"team credits"') -> str:
        return '{"sku":%s,"quantity":%s,"purpose":%s}' % (sku, quantity, purpose)

    write("proposal", "valid", body())
    write("proposal", "valid-devanagari", body(purpose=json.dumps("टीम के लिए क्रेडिट", ensure_ascii=False)))
    write("proposal", "valid-emoji-vs16", body(purpose='"snacks \u2615\ufe0f for the team"'))
    write("proposal", "nul-escaped-sku", body(sku='"CLOUD\\u0000STARTER"'))
    write("proposal", "nul-raw-byte", body().encode() + b"\x00")
    write("proposal", "nul-in-key", '{"sku\\u0000":"A","quantity":1,"purpose":"x"}')
    write("proposal", "lone-surrogate-purpose", body(purpose='"\\ud800"'))
    write("proposal", "lone-low-surrogate-sku", body(sku='"\\udc00"'))
    write("proposal", "quantity-400-digits", body(quantity="9" * 400))
    write("proposal", "quantity-1e400", body(quantity="1e400"))
    write("proposal", "quantity-negative-zero", body(quantity="-0"))
    write("proposal", "quantity-float", body(quantity="2.0"))
    write("proposal", "quantity-exponent", body(quantity="1e3"))
    write("proposal", "quantity-u64-max-plus-one", body(quantity="18446744073709551616"))
    write("proposal", "quantity-string", body(quantity='"2"'))
    write("proposal", "duplicate-key", '{"sku":"A","quantity":1,"quantity":9999,"purpose":"x"}')
    write("proposal", "duplicate-key-escaped", '{"sku":"A","quantity":1,"quanti\\u0074y":2,"purpose":"x"}')
    write("proposal", "u2028-purpose-raw", body(purpose='"\u2028"'))
    write("proposal", "u2029-purpose-escaped", body(purpose='"ok\\u2029"'))
    write("proposal", "zero-width-only", body(purpose='"\\u200b\\u200c\\u200d\\ufeff"'))
    write("proposal", "tag-characters", body(purpose=json.dumps("buy" + TAG_HELLO)))
    write("proposal", "bidi-override", body(purpose='"\\u202eecnis"'))
    write("proposal", "hangul-filler", body(purpose='"\\u3164"'))
    write("proposal", "overlong-sku-in-limit", body(sku='"' + "A" * 4000 + '"'))
    write("proposal", "overlong-body", body(purpose='"' + "p" * 5000 + '"'))
    write("proposal", "overlong-purpose-201", body(purpose='"' + "p" * 201 + '"'))
    write("proposal", "invalid-utf8", body().encode().replace(b"team", b"te\xc3\x28m"))
    write("proposal", "overlong-utf8-slash", b'{"sku":"\xc0\xaf","quantity":1,"purpose":"x"}')
    write("proposal", "bom-prefix", "\ufeff" + body())
    write("proposal", "deep-nesting", "[" * 3000 + "]" * 3000)
    write("proposal", "deep-nesting-in-field", body(purpose="[" * 200 + "]" * 200))
    write("proposal", "unknown-field", '{"sku":"A","quantity":1,"purpose":"x","amount_paise":1}')
    write("proposal", "empty", "")
    write("proposal", "null", "null")
    write("proposal", "trailing-garbage", body() + "}")


def webhook_seeds() -> None:
    def sig(body: bytes) -> str:
        return hmac.new(SECRET, body, hashlib.sha256).hexdigest()

    def event(eid="evt_1", order="order_1", amount="60000", currency='"INR"', kind="payment.captured") -> bytes:
        return (
            '{"entity":"event","account_id":"acc_spendgate_test","id":%s,"event":"%s",'
            '"contains":["payment"],"created_at":1767225600,"payload":{"payment":{"entity":'
            '{"id":"pay_1","entity":"payment","order_id":%s,"amount":%s,"currency":%s,"status":"captured"}}}}'
            % (json.dumps(eid) if not eid.startswith('"') else eid, kind,
               json.dumps(order) if not order.startswith('"') else order, amount, currency)
        ).encode("utf-8", "surrogatepass")

    def signed(body: bytes, extra: bytes = b"", signature: str | None = None) -> bytes:
        s = sig(body) if signature is None else signature
        return b"Content-Type: application/json\r\nX-Razorpay-Signature: " + s.encode() + b"\r\n" + extra + b"\r\n" + body

    write("webhook", "signed-capture", signed(event()))
    write("webhook", "signed-failed", signed(event(kind="payment.failed")))
    write("webhook", "signed-order-paid", signed(
        b'{"id":"evt_2","event":"order.paid","created_at":1767225600,'
        b'"payload":{"order":{"entity":{"id":"order_1","amount":60000,"currency":"INR"}}}}'))
    write("webhook", "razorpay-envelope-event-id-header", signed(
        b'{"entity":"event","account_id":"acc_x","event":"payment.captured","contains":["payment"],'
        b'"payload":{"payment":{"entity":{"id":"pay_1","order_id":"order_1","amount":60000,"currency":"INR"}}},'
        b'"created_at":1767225600}', extra=b"X-Razorpay-Event-Id: evt_hdr_1\r\n"))
    write("webhook", "signature-upper-case", signed(event(), signature=sig(event()).upper()))
    write("webhook", "signature-padded", signed(event(), signature="  " + sig(event()) + "\t"))
    write("webhook", "signature-u2028-padded", signed(event(), signature="\u2028" + sig(event())))
    write("webhook", "signature-missing", b"Content-Type: application/json\r\n\r\n" + event())
    write("webhook", "signature-empty", signed(event(), signature=""))
    write("webhook", "signature-not-hex", signed(event(), signature="zz" * 32))
    write("webhook", "signature-odd-length", signed(event(), signature=sig(event())[:-1]))
    write("webhook", "signature-truncated", signed(event(), signature=sig(event())[:10]))
    write("webhook", "signature-overlong", signed(event(), signature=sig(event()) * 200))
    write("webhook", "signature-nul", signed(event(), signature=sig(event())[:32] + "\x00" + sig(event())[32:]))
    write("webhook", "signature-empty-key", signed(event(), signature=hmac.new(b"", event(), hashlib.sha256).hexdigest()))
    write("webhook", "signature-invalid-utf8", b"X-Razorpay-Signature: \xff\xfe" + sig(event()).encode() + b"\r\n\r\n" + event())
    write("webhook", "signature-twice", signed(event(), extra=b"x-razorpay-signature: " + b"0" * 64 + b"\r\n"))
    write("webhook", "lf-only-headers", b"x-razorpay-signature: " + sig(event()).encode() + b"\n\n" + event())
    write("webhook", "no-header-block", event())
    write("webhook", "signed-nul-event-id", signed(event(eid='"evt\\u0000nul"')))
    write("webhook", "signed-nul-order-id", signed(event(order='"order\\u0000"')))
    write("webhook", "signed-lone-surrogate-id", signed(event(eid='"\\ud800"')))
    write("webhook", "signed-amount-400-digits", signed(event(amount="9" * 400)))
    write("webhook", "signed-amount-1e400", signed(event(amount="1e400")))
    write("webhook", "signed-amount-negative", signed(event(amount="-60000")))
    write("webhook", "signed-duplicate-id", signed(
        b'{"id":"evt_a","id":"evt_b","event":"payment.captured","created_at":1767225600,'
        b'"payload":{"payment":{"entity":{"order_id":"order_1","amount":60000,"currency":"INR"}}}}'))
    write("webhook", "signed-u2028-event-id", signed(event(eid="evt\u2028x")))
    write("webhook", "signed-zero-width-order", signed(event(order="order_\u200b1")))
    write("webhook", "signed-tag-currency", signed(event(currency=json.dumps("INR" + TAG_HELLO))))
    write("webhook", "signed-overlong-event-id", signed(event(eid="e" * 6000)))
    write("webhook", "signed-created-at-huge", signed(event().replace(b"1767225600", b"9" * 30)))
    write("webhook", "signed-created-at-i64-max", signed(event().replace(b"1767225600", b"9223372036854775807")))
    write("webhook", "signed-invalid-utf8-body", signed(event().replace(b"INR", b"IN\xff")))
    write("webhook", "signed-deep-nesting", signed(b"[" * 3000 + b"]" * 3000))
    write("webhook", "signed-empty-body", signed(b""))


SCENARIO = """\
- id: fuzz-seed-allow
  label: legit
  world: standard
  steps:
    - {name: p1, propose: {actor: buyer-agent, body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}}, expect: {decision: allow}}
    - {name: c1, checkout: {request: p1, actor: finance-lead}, expect: {decision: ok}}
    - {name: o1, pay: {authority: c1, actor: buyer-agent}, expect: {decision: ok}}
    - {webhook: {order: o1, amount_paise: 25000}, expect: {decision: ok}}
    - {advance_clock: {minutes: 16}, expect: {decision: ok}}
  invariants: {provider_orders: 1, captured_paise: 25000, ledger_intact: true}
"""

# The scenario format's newer verbs and keys (tenant, raw_b64, seconds, set_clock,
# cancel, expire, signature_header).
NEW_VERBS = """\
- id: fuzz-seed-new-verbs
  label: legit
  world: standard
  steps:
    - {name: p1, tenant: acme, propose: {actor: buyer-agent, raw_b64: "eyJza3UiOiJTTkFDSy1CT1giLCJxdWFudGl0eSI6MSwicHVycG9zZSI6InNuYWNrcyJ9"}, expect: {decision: allow}}
    - {advance_clock: {seconds: -120}}
    - {set_clock: {at: '2026-12-20T10:00:00Z'}}
    - {cancel: {request: p1, actor: finance-lead}, expect: {decision: ok}}
    - {expire: {}, expect: {decision: ok}}
"""


def scenario_seeds() -> None:
    s = SCENARIO
    write("scenarios", "valid", s)
    write("scenarios", "valid-attack-with-class", s.replace("label: legit", "label: attack\n  class: provider-event.forged-signature"))
    write("scenarios", "empty", "")
    write("scenarios", "not-a-list", "id: x\n")
    write("scenarios", "nul-raw", s.replace("snacks", "sna\x00cks"))
    write("scenarios", "nul-escaped-sku", s.replace("SNACK-BOX", '"SNACK\\0BOX"'))
    write("scenarios", "lone-surrogate-escape", s.replace('"snacks"', '"\\ud800"'))
    write("scenarios", "quantity-400-digits", s.replace("quantity: 1", "quantity: " + "9" * 400))
    write("scenarios", "quantity-1e400", s.replace("quantity: 1", "quantity: 1e400"))
    write("scenarios", "amount-400-digits", s.replace("amount_paise: 25000", "amount_paise: " + "9" * 400))
    write("scenarios", "clock-i64-max-minutes", s.replace("minutes: 16", "minutes: 9223372036854775807"))
    write("scenarios", "clock-300000-years", s.replace("minutes: 16", "minutes: 157680000000"))
    write("scenarios", "clock-negative", s.replace("minutes: 16", "minutes: -9223372036854775808"))
    write("scenarios", "duplicate-key", s.replace("label: legit", "label: legit\n  label: attack"))
    write("scenarios", "duplicate-id", s + s)
    write("scenarios", "u2028-in-id", s.replace("fuzz-seed-allow", '"fuzz\u2028seed"'))
    write("scenarios", "u2028-line-break", s.replace("  world: standard", "\u2028  world: standard"))
    write("scenarios", "zero-width-world", s.replace("world: standard", "world: stand\u200bard"))
    write("scenarios", "tag-characters-purpose", s.replace('"snacks"', json.dumps("snacks" + TAG_HELLO, ensure_ascii=False)))
    write("scenarios", "world-path-traversal", s.replace("world: standard", "world: ../worlds/standard"))
    write("scenarios", "world-absolute", s.replace("world: standard", "world: /etc/passwd"))
    write("scenarios", "overlong-id", s.replace("fuzz-seed-allow", "a" * 6000))
    write("scenarios", "overlong-purpose", s.replace('"snacks"', '"' + "p" * 6000 + '"'))
    write("scenarios", "invalid-utf8", s.encode().replace(b"snacks", b"sn\xffcks"))
    write("scenarios", "bom-prefix", "\ufeff" + s)
    write("scenarios", "tabs-indent", s.replace("  ", "\t"))
    write("scenarios", "alias-bomb", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
          "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
          "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n")
    write("scenarios", "alias-in-steps", s.replace("    - {name: c1", "    - &p {name: c1").replace(
        "    - {advance_clock", "    - *p\n    - {advance_clock"))
    write("scenarios", "merge-key", s.replace("  world: standard", "  <<: {world: standard}"))
    write("scenarios", "deep-nesting", "[" * 2000 + "]" * 2000)
    write("scenarios", "binary-tag", s.replace('"snacks"', "!!binary aGVsbG8="))
    write("scenarios", "custom-tag", s.replace("label: legit", "label: !legit legit"))
    write("scenarios", "unknown-verb", s.replace("advance_clock", "advance_clocks"))
    write("scenarios", "two-verbs", s.replace("{advance_clock: {minutes: 16}", "{advance_clock: {minutes: 16}, cancel: {request: p1}"))
    write("scenarios", "dangling-reference", s.replace("authority: c1", "authority: c9"))
    write("scenarios", "unknown-reason", s.replace("decision: allow}", "decision: deny, reason: NOT_A_REASON}"))
    write("scenarios", "raw-body-nul", s.replace('body: {sku: SNACK-BOX, quantity: 1, purpose: "snacks"}', 'raw: "{\\"sku\\":\\"\\0\\"}"'))
    write("scenarios", "null-steps", s.split("  steps:")[0] + "  steps: ~\n")
    write("scenarios", "document-separator", s + "---\n" + s)
    n = NEW_VERBS
    write("scenarios", "valid-new-verbs", n)
    write("scenarios", "raw-b64-invalid", n.replace('raw_b64: "eyJ', 'raw_b64: "!!!eyJ'))
    write("scenarios", "raw-b64-nul", n.replace('raw_b64: "eyJ', 'raw_b64: "AA==eyJ'))
    write("scenarios", "seconds-i64-min", n.replace("seconds: -120", "seconds: -9223372036854775808"))
    write("scenarios", "set-clock-year-9999", n.replace("2026-12-20T10:00:00Z", "9999-12-31T23:59:59Z"))
    write("scenarios", "set-clock-not-a-date", n.replace("2026-12-20T10:00:00Z", "2026-02-30T25:61:00Z"))
    write("scenarios", "tenant-nul", n.replace("tenant: acme", 'tenant: "acme\\0"'))
    write("scenarios", "tenant-u2028", n.replace("tenant: acme", 'tenant: "acme\\u2028"'))
    write("scenarios", "expire-with-args", n.replace("expire: {}", "expire: {now: true}"))


REGISTRY_HEAD = """\
version: 1
switch: crate::mutant_active
switch_env: SPENDGATE_MUTANT
reason_enum: Reason
migrations: migrations
completeness: {roots: [gate/src], skip_files: [gate/src/reason.rs], calls: [lock, signature_is_valid]}
scrub_env: [SPENDGATE_SKIP_DB]
scratch_exclude: [.spendgate]
"""

GUARDS = """\
guards:
  - id: catalog-sku-available
    kind: source
    invariant: "A sku the catalog lists but no longer sells is refused, never priced."
    threat: tool-boundary.unavailable-sku
    tests:
      - "gate/lib::catalog::tests::unknown_and_unavailable_skus_are_refused"
    operator: delete
    locator: {file: gate/src/catalog.rs, function: catalog::derive, contains: "!item.available"}
  - id: catalog-price-positive
    kind: source
    invariant: "A catalog row whose price is zero or negative is refused."
    threat: tool-boundary.numeric-confusion
    tests: ["gate/lib::catalog::tests::an_invalid_catalog_row_refuses"]
    operator: weaken
    locator: {file: gate/src/catalog.rs, function: catalog::derive, contains: "item.price_paise <= 0", clause: 0}
  - id: db-approval-single-use
    kind: schema
    invariant: An approval is consumed at most once.
    threat: T-REPLAY
    tests: ["gate/test:db_guards::uq_live_approval_refuses_second"]
    operator: delete
    locator: {object: uq_live_approval, object_kind: index, table: approvals}
exempt:
  - {file: gate/src/catalog.rs, function: catalog::derive, produces: SkuUnknown, reason: structural}
"""


def registry_seeds() -> None:
    r = REGISTRY_HEAD + GUARDS
    write("registry", "valid", r)
    write("registry", "minimal", "version: 1\n")
    write("registry", "empty", "")
    write("registry", "version-2", r.replace("version: 1", "version: 2"))
    write("registry", "version-400-digits", r.replace("version: 1", "version: " + "9" * 400))
    write("registry", "version-1e400", r.replace("version: 1", "version: 1e400"))
    write("registry", "clause-400-digits", r.replace("clause: 0", "clause: " + "9" * 400))
    write("registry", "clause-negative", r.replace("clause: 0", "clause: -1"))
    write("registry", "duplicate-guard-id", r.replace("id: catalog-price-positive", "id: catalog-sku-available"))
    write("registry", "duplicate-key", r.replace("kind: source\n", "kind: source\n    kind: schema\n", 1))
    write("registry", "nul-in-id", r.replace("catalog-sku-available", "catalog-sku\x00available"))
    write("registry", "nul-escaped-switch", r.replace("switch: crate::mutant_active", 'switch: "crate::\\0mutant"'))
    write("registry", "lone-surrogate-escape", r.replace("threat: T-REPLAY", 'threat: "\\ud800"'))
    write("registry", "u2028-in-id", r.replace("catalog-sku-available", "catalog\u2028sku"))
    write("registry", "zero-width-switch-env", r.replace("SPENDGATE_MUTANT", "SPENDGATE\u200b_MUTANT"))
    write("registry", "tag-characters-test", r.replace("unknown_and_unavailable_skus_are_refused", "x" + TAG_HELLO))
    write("registry", "overlong-id", r.replace("catalog-sku-available", "a" * 6000))
    write("registry", "invalid-utf8", r.encode().replace(b"Reason", b"Rea\xc3\x28son"))
    write("registry", "bom-prefix", "\ufeff" + r)
    write("registry", "empty-tests", r.replace('tests: ["gate/lib::catalog::tests::an_invalid_catalog_row_refuses"]', "tests: []"))
    write("registry", "two-selectors", r.replace('contains: "!item.available"', 'contains: "!item.available", produces: SkuUnknown'))
    write("registry", "weaken-without-clause", r.replace(", clause: 0", ""))
    write("registry", "schema-rewrite-operator", r.replace("operator: delete\n    locator: {object", "operator: weaken\n    locator: {object"))
    write("registry", "switch-only-colons", r.replace("switch: crate::mutant_active", "switch: '::'"))
    write("registry", "switch-empty", r.replace("switch: crate::mutant_active", "switch: ''"))
    write("registry", "alias-bomb", "version: 1\nscrub_env: &a [x,x,x,x,x,x,x,x,x]\n"
          "scratch_exclude: [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n")
    write("registry", "guards-null", REGISTRY_HEAD + "guards: ~\nexempt: ~\n")
    write("registry", "deep-nesting", "[" * 2000 + "]" * 2000)
    write("registry", "unknown-key", r + "extra: 1\n")
    write("registry", "tabs", r.replace("  ", "\t"))


def main() -> None:
    if SEEDS.exists():
        shutil.rmtree(SEEDS)
    proposal_seeds()
    webhook_seeds()
    scenario_seeds()
    registry_seeds()
    for target in sorted(p.name for p in SEEDS.iterdir()):
        print(f"{target}: {len(list((SEEDS / target).iterdir()))} seeds")


if __name__ == "__main__":
    main()
