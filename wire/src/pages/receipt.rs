//! `/receipts/{request}`: one purchase, from the agent's words to the
//! ledger, with a button that checks the ledger's proofs in the browser.
//!
//! The decision is above the fold; the agent's proposal follows in a box
//! marked untrusted; then what the gate derived and held it to (policy,
//! delegation), approvals, the authority, the provider's order and events;
//! then the request's ledger entries drawn as a chain (each entry's
//! `prev_hash` beside the previous entry's `hash`), each carrying its exact
//! bytes (base64) and its inclusion path in `data-` attributes, and the
//! checkpoint and the tenant's public log key. `/static/receipt.js` checks
//! the checkpoint's Ed25519 signature and every entry's RFC 6962 inclusion
//! proof with WebCrypto and names the first that fails.
//!
//! The proposal's body and each applied provider event's body and
//! signature header are shown exactly as received, boxed and marked
//! untrusted ([`as_received`]: UTF-8 as text with invisible and
//! direction-changing characters spelled out, anything else as hex), so no
//! byte (a NUL, an RLO, invalid UTF-8) can change the page.
//!
//! `/receipts/{request}/bundle` ([`bundle`]) serves the request's evidence
//! bundle (`gate::service::bundle`) as one tar file, built read-only
//! against the newest kept checkpoint covering its entries; with none it is
//! 409 and says to run `spendgate log checkpoint`, and the receipt shows
//! that message in place of the link.

use axum::extract::{Path, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use gate::provider::PaymentProvider;
use gate::service::bundle::{KeptBundle, Unproved};
use gate::service::pages::Receipt;
use maud::{Markup, html};
use serde_json::Value;

use super::text::visible;
use super::{document, money, problem, reader, reason_words, respond, unavailable};
use crate::auth::Caller;
use crate::state::{AppState, Shared};

/// 404: the tenant has no request by the id asked for (or the path names none).
fn not_found() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "No such request",
        "This tenant has no request by that id.",
    )
}

/// The reader a receipt route answers and the request id its path names,
/// or the answer that refuses them ([`reader`]'s 401 or 403; 404 for a path
/// that names no id).
async fn reader_and_id<P: PaymentProvider>(
    s: &AppState<P>,
    headers: &HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<(Caller, String), Response> {
    let c = reader(s, headers).await?;
    let Ok(Path(id)) = path else {
        return Err(not_found());
    };
    Ok((c, id))
}

pub(crate) async fn page<P: PaymentProvider>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    let (c, id) = match reader_and_id(&s, &headers, path).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let receipt = match s.gate.receipt(&c.tenant, &id).await {
        Ok(Some(r)) => r,
        Ok(None) => return not_found(),
        Err(e) => return unavailable("reading a receipt", &e),
    };
    let log_key = s
        .config
        .log_key
        .as_ref()
        .and_then(|k| k.verifier(&c.tenant).ok())
        .map(|v| v.to_text());
    respond(
        StatusCode::OK,
        render(&c, &id, &receipt, log_key.as_deref()),
    )
}

/// Why a request's bundle cannot be served yet.
pub const BUNDLE_NEEDS_CHECKPOINT: &str = "no kept checkpoint covers this request's ledger \
     entries yet (a page never signs one). `spendgate serve` signs one within its \
     `checkpoint_interval_ms`; or run `spendgate log checkpoint --tenant <tenant>` to sign one \
     now, then ask again.";

/// `GET /receipts/{id}/bundle`: the request's evidence bundle as one tar
/// file, built read-only against the newest kept checkpoint covering its
/// entries; 409 with a plain message when there is none (or no log key).
pub(crate) async fn bundle<P: PaymentProvider>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    let (c, id) = match reader_and_id(&s, &headers, path).await {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let Some(verifier) = s
        .config
        .log_key
        .as_ref()
        .and_then(|k| k.verifier(&c.tenant).ok())
        .map(|v| v.to_text())
    else {
        return conflict(
            "this server has no log key configured, so it cannot name the key a bundle is checked with.",
        );
    };
    let files = match s.gate.kept_bundle(&c.tenant, &id, &verifier).await {
        Ok(KeptBundle::Files(files)) => files,
        Ok(KeptBundle::Missing) => return not_found(),
        Ok(KeptBundle::Unproved(Unproved::NoCheckpoint { .. })) => {
            return conflict(BUNDLE_NEEDS_CHECKPOINT);
        }
        Ok(KeptBundle::Unproved(why)) => return conflict(&why.to_string()),
        Err(e) => return unavailable("building a bundle", &e),
    };
    match tar_of(&files) {
        Ok(bytes) => tar_response(&id, bytes),
        Err(e) => {
            tracing::error!("a page, writing a bundle's tar: {e}");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Unavailable",
                "The bundle could not be written; nothing was changed.",
            )
        }
    }
}

/// 409 with a plain-text reason.
fn conflict(why: &str) -> Response {
    let mut response = (StatusCode::CONFLICT, format!("No bundle: {why}\n")).into_response();
    let h = response.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The files as one ustar archive, each at its path, mode 0644, mtime 0
/// (the same bundle gives the same bytes).
pub fn tar_of(files: &[(String, Vec<u8>)]) -> std::io::Result<Vec<u8>> {
    let mut archive = tar::Builder::new(Vec::new());
    archive.mode(tar::HeaderMode::Deterministic);
    for (name, bytes) in files {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        archive.append_data(&mut header, name, bytes.as_slice())?;
    }
    archive.into_inner()
}

fn tar_response(id: &str, bytes: Vec<u8>) -> Response {
    let mut response = (StatusCode::OK, bytes).into_response();
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-tar"));
    // The id is a request the tenant holds; only its safe characters name the file.
    let safe: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"bundle-{safe}.tar\"")) {
        h.insert(CONTENT_DISPOSITION, v);
    }
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(super::CSP),
    );
    response
}

fn text_of(v: &Value) -> String {
    match v {
        Value::Null => "—".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Bytes as received, for a page: as text when they are UTF-8 (invisible
/// and direction-changing characters spelled out, as everywhere), else as
/// hex. Returns the form and the text.
pub fn as_received(bytes: &[u8]) -> (&'static str, String) {
    match std::str::from_utf8(bytes) {
        Ok(text) => ("UTF-8 text", visible(text)),
        Err(_) => (
            "not UTF-8: hex",
            bytes
                .chunks(32)
                .map(hex::encode)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

/// A box of untrusted bytes as received.
fn raw_box(id: &str, bytes: &[u8]) -> Markup {
    let (form, text) = as_received(bytes);
    html! {
        p.note { (bytes.len()) " bytes, shown as " (form) ":" }
        pre.untrusted-text.raw id=(id) { (text) }
    }
}

/// A record as JSON, untrusted strings spelled out.
fn record(v: &Value) -> Markup {
    html! { pre.record { (visible(&pretty(v)).replace("[U+000A]", "\n")) } }
}

/// The receipt page.
pub fn render(c: &Caller, id: &str, r: &Receipt, log_key: Option<&str>) -> Markup {
    let q = &r.request;
    let reason = q["state_reason"].as_str().or(q["reason"].as_str());
    let proposal = &r.proposal;
    let asked = &proposal["proposal"];
    let b64 = base64::engine::general_purpose::STANDARD;
    let main = html! {
        section.decision id="decision" {
            h1 { "Request " code { (visible(id)) } }
            dl {
                dt { "state" } dd { code id="state" { (text_of(&q["state"])) } }
                dt { "decision" } dd id="decision-value" { (text_of(&q["decision"])) }
                dt { "reason" } dd {
                    @if let Some(code) = reason { (reason_words(code)) " " code.reason { (code) } } @else { "—" }
                }
                dt { "amount" } dd { (money(q["amount_paise"].as_i64(), q["currency"].as_str())) }
                dt { "merchant" } dd { (visible(&text_of(&q["merchant_id"]))) }
                dt { "agent" } dd { (visible(&text_of(&q["agent_id"]))) }
                dt { "proposed at" } dd { (text_of(&q["created_at"])) }
            }
        }
        section.untrusted id="proposal" {
            h2 { "The proposal as received " span.badge { "UNTRUSTED: written by the agent" } }
            p.note { "Shown character for character; invisible and direction-changing characters are spelled out as [U+XXXX]. Nothing here was acted on as an instruction." }
            dl {
                dt { "sku" } dd { code.untrusted-text { (visible(&text_of(&asked["sku"]))) } }
                dt { "quantity" } dd { code.untrusted-text { (visible(&text_of(&asked["quantity"]))) } }
                dt { "purpose" } dd { div.untrusted-text id="purpose" { (visible(&text_of(&asked["purpose"]))) } }
                dt { "body" } dd { (text_of(&proposal["body_bytes"])) " bytes, SHA-256 " code { (text_of(&proposal["body_sha256"])) } }
                dt { "idempotency key" } dd { code.untrusted-text { (visible(&text_of(&proposal["idempotency_key"]))) } }
            }
            h3 { "Body, exactly as received" }
            @match &r.proposal_raw {
                Some(raw) => { (raw_box("proposal-raw", raw)) }
                None => { p id="proposal-raw-missing" { "Not kept: only its SHA-256 is (a body past the 4096-byte limit is refused and not stored)." } }
            }
        }
        section id="purchase" {
            h2 { "The purchase the gate derived" }
            p { "From the tenant's catalog, never from the agent." }
            dl {
                dt { "merchant" } dd { (visible(&text_of(&q["merchant_id"]))) }
                dt { "amount" } dd { (money(q["amount_paise"].as_i64(), q["currency"].as_str())) }
                dt { "purchase digest" } dd { code { (text_of(&q["purchase_digest"])) } }
                dt { "policy version" } dd { (text_of(&q["policy_version"])) }
                dt { "delegation" } dd { (visible(&text_of(&q["delegation_id"]))) }
            }
        }
        section id="mandate" {
            h2 { "Mandate in force" }
            p { "The policy version and the delegation the decision was made under. They are the gate's own records: no signer outside the gate signed them." }
            details { summary { "policy" } (record(&r.policy)) }
            details { summary { "delegation" } (record(&r.delegation)) }
        }
        section id="approvals" {
            h2 { "Approvals" }
            @if r.approvals.is_empty() { p { "None." } }
            @for a in &r.approvals {
                details { summary { "by " (visible(&text_of(&a["person_id"]))) " at " (text_of(&a["approved_at"])) } (record(a)) }
            }
        }
        section id="authority" {
            h2 { "Checkout authority" }
            @if r.authority.is_null() { p { "None." } } @else {
                details { summary { code { (visible(&text_of(&r.authority["id"]))) } } (record(&r.authority)) }
            }
        }
        section id="provider" {
            h2 { "Provider order and events" }
            @if r.orders.is_empty() { p { "No order." } }
            @for o in &r.orders {
                details { summary { "order " code { (visible(&text_of(&o["provider_order_id"]))) } " · " (money(o["amount_paise"].as_i64(), o["currency"].as_str())) " · " (text_of(&o["status"])) } (record(o)) }
            }
            @for e in &r.events {
                details { summary { "event " (visible(&text_of(&e["event"]))) " · " (text_of(&e["outcome"])) } (record(e)) }
            }
            @for (i, e) in r.raw_events.iter().enumerate() {
                details.untrusted {
                    summary { "event " code { (e.event_id_sha256.get(..16).unwrap_or(&e.event_id_sha256)) } " as received " span.badge { "UNTRUSTED" } }
                    p.note { "The body and the X-Razorpay-Signature header exactly as they arrived: an HMAC-SHA256 of the body under the webhook secret, which only the provider and the gate hold." }
                    h4 { "body" } (raw_box(&format!("event-body-{i}"), &e.body))
                    h4 { "signature header" } (raw_box(&format!("event-signature-{i}"), &e.signature))
                }
            }
        }
        section id="ledger" {
            h2 { "Ledger entries" }
            p { "Each entry's previous hash sits beside the hash of the entry before it; the button checks every entry's inclusion in the signed checkpoint, in this browser." }
            div.verify {
                button id="verify" type="button" { "Verify in this browser" }
                p id="verify-result" role="status" { "Not checked yet." }
            }
            ol.chain {
                @for (i, e) in r.entries.iter().enumerate() {
                    li.entry id={ "entry-" (e.seq) }
                        data-seq=(e.seq) data-kind=(e.kind)
                        data-bytes=(b64.encode(e.text.as_bytes()))
                        data-path=(e.path.as_ref().map(|p| p.join(" ")).unwrap_or_default())
                        data-proved=(if e.path.is_some() { "yes" } else { "no" }) {
                        div.head {
                            strong { "#" (e.seq) " " (e.kind) } " · " (e.at.format("%Y-%m-%d %H:%M:%S")) " "
                            span.verdict { }
                        }
                        div.links {
                            "prev_hash " code { (e.prev_hash) }
                            @if i > 0 && r.entries[i - 1].seq + 1 == e.seq {
                                @if r.entries[i - 1].hash == e.prev_hash { span.link-ok { " = hash of #" (r.entries[i - 1].seq) } }
                                @else { span.link-bad { " ≠ hash of #" (r.entries[i - 1].seq) } }
                            }
                            br;
                            "hash " code { (e.hash) }
                        }
                        details { summary { "entry" } pre.record { (visible(&e.text)) } }
                    }
                }
            }
        }
        section id="log" data-key=(log_key.unwrap_or_default())
            data-note=(r.checkpoint.as_ref().map(|c| b64.encode(c.note.as_bytes())).unwrap_or_default()) {
            h2 { "Checkpoint" }
            @if let Some(cp) = &r.checkpoint {
                p { "Size " (cp.size) ", signed " (cp.signed_at.format("%Y-%m-%d %H:%M:%S")) " UTC:" }
                pre id="checkpoint" { (cp.note) }
            }
            @if let Some(why) = &r.unproved { p.warn id="unproved" { (why) } }
            p { "Log key: " code id="log-key" { (log_key.unwrap_or("not configured on this server")) } }
            p.note { "Check it against a key you got from the operator another way: a key shown by the same server proves only that the entries are in the log it signed." }
        }
        section id="evidence" {
            h2 { "Evidence bundle" }
            @if r.checkpoint.is_some() && log_key.is_some() {
                p { a id="bundle-link" href={ "/receipts/" (text_of(&q["id"])) "/bundle" } download { "bundle-" (visible(id)) ".tar" } }
                p { "Unpack it and check it offline, with the log key you got from the operator: " code { "spendgate-verify verify-bundle --key '<log key>' <folder>" } }
            } @else {
                p.warn id="bundle-unavailable" { "No bundle to download yet: " (BUNDLE_NEEDS_CHECKPOINT) }
            }
        }
        script src="/static/receipt.js" {}
    };
    document(&format!("Receipt {}", visible(id)), Some(c), main)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;
    use gate::service::pages::ReceiptEntry;

    fn caller() -> Caller {
        Caller {
            key_id: "0123456789abcdef".into(),
            tenant: "acme".into(),
            actor: "finance-lead".into(),
            role: Role::Auditor,
        }
    }

    #[test]
    fn bytes_as_received_are_text_with_hidden_characters_spelled_out_or_hex() {
        assert_eq!(
            as_received(b"{\"purpose\":\"a\0b\"}"),
            ("UTF-8 text", "{\"purpose\":\"a[U+0000]b\"}".to_owned())
        );
        assert_eq!(
            as_received("x\u{202E}gpj.exe\n".as_bytes()),
            ("UTF-8 text", "x[U+202E]gpj.exe[U+000A]".to_owned())
        );
        assert_eq!(
            as_received(b"{\xff\xfe}"),
            ("not UTF-8: hex", "7bfffe7d".to_owned())
        );
        let long = vec![0xffu8; 40];
        let (form, text) = as_received(&long);
        assert_eq!(form, "not UTF-8: hex");
        assert_eq!(text, format!("{}\n{}", "ff".repeat(32), "ff".repeat(8)));
        // In the page: boxed, escaped, no hidden character survives.
        let html = raw_box("proposal-raw", "<script>\u{202E}\0".as_bytes()).into_string();
        assert!(html.contains("&lt;script&gt;[U+202E][U+0000]"), "{html}");
        assert!(!html.contains('\u{202E}') && !html.contains('\0'));
    }

    #[test]
    fn a_hostile_purpose_renders_as_inert_visible_text() {
        let long = "x".repeat(10 * 1024);
        let purpose = format!(
            "<script>alert(1)</script><img src=x onerror=alert(2)>\u{202E}gpj.exe \"'&{long}"
        );
        let entry = serde_json::json!({"kind": "proposal", "body": {"proposal": {"sku": "<b>", "quantity": 1, "purpose": purpose}}});
        let r = Receipt {
            request: serde_json::json!({"state": "AUTHORIZED", "decision": "allow", "purpose": purpose}),
            proposal: entry["body"].clone(),
            proposal_raw: None,
            policy: Value::Null,
            delegation: Value::Null,
            approvals: vec![],
            authority: Value::Null,
            orders: vec![],
            events: vec![],
            raw_events: vec![],
            entries: vec![ReceiptEntry {
                seq: 1,
                kind: "proposal".into(),
                at: chrono::DateTime::UNIX_EPOCH,
                text: entry.to_string(),
                prev_hash: "0".repeat(64),
                hash: "1".repeat(64),
                path: None,
            }],
            checkpoint: None,
            unproved: Some("none".into()),
        };
        let html = render(&caller(), "req_<x>", &r, None).into_string();
        // The only script element is the verifier file; no markup of the agent's survives.
        assert_eq!(html.matches("<script").count(), 1, "{}", &html[..2000]);
        assert!(html.contains(r#"<script src="/static/receipt.js"></script>"#));
        assert!(!html.contains("<img"), "an img tag rendered");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(
            !html.contains('\u{202E}'),
            "the RLO character is in the page"
        );
        assert!(html.contains("[U+202E]gpj.exe"));
        assert!(html.contains(&long), "the 10 KB purpose is cut");
        assert!(html.contains("UNTRUSTED"));
        assert!(!html.contains("req_<x>"));
    }
}
