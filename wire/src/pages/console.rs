//! `/console`: the tenant's requests, newest first, with filters, the
//! refusal counts by reason, and pages of `gate::service::pages::PAGE_SIZE`.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use gate::provider::PaymentProvider;
use gate::service::pages::{ConsoleFilter, ConsolePage};
use maud::{Markup, html};
use serde::Deserialize;

use super::text::visible;
use super::{document, money, reader, reason_words, respond, unavailable};
use crate::auth::Caller;
use crate::state::Shared;

/// The query string; an empty value is "any".
#[derive(Debug, Default, Deserialize)]
pub struct Params {
    state: Option<String>,
    agent: Option<String>,
    reason: Option<String>,
    page: Option<String>,
}

fn given(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty() && s.chars().count() <= 128)
}

impl Params {
    fn filter(self) -> ConsoleFilter {
        ConsoleFilter {
            state: given(self.state),
            agent: given(self.agent),
            reason: given(self.reason),
            page: self
                .page
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0)
                .min(1_000_000),
        }
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The console's URL for `filter`.
pub fn href(filter: &ConsoleFilter) -> String {
    let mut parts = Vec::new();
    for (name, value) in [
        ("state", &filter.state),
        ("agent", &filter.agent),
        ("reason", &filter.reason),
    ] {
        if let Some(v) = value {
            parts.push(format!("{name}={}", encode(v)));
        }
    }
    if filter.page > 0 {
        parts.push(format!("page={}", filter.page));
    }
    if parts.is_empty() {
        "/console".to_owned()
    } else {
        format!("/console?{}", parts.join("&"))
    }
}

pub(crate) async fn page<P: PaymentProvider>(
    State(s): Shared<P>,
    headers: HeaderMap,
    query: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let c = match reader(&s, &headers).await {
        Ok(c) => c,
        Err(answer) => return answer,
    };
    let filter = query.map(|Query(p)| p.filter()).unwrap_or_default();
    let listed = match s.gate.console_page(&c.tenant, &filter).await {
        Ok(p) => p,
        Err(e) => return unavailable("listing requests", &e),
    };
    let counts = match s.gate.refusal_counts(&c.tenant).await {
        Ok(counts) => counts,
        Err(e) => return unavailable("counting refusals", &e),
    };
    respond(StatusCode::OK, render(&c, &filter, &listed, &counts))
}

/// The console page.
pub fn render(
    c: &Caller,
    filter: &ConsoleFilter,
    listed: &ConsolePage,
    counts: &[(String, i64)],
) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let main = html! {
        h1 { "Requests" }
        form.filters method="get" action="/console" {
            label { "state " input name="state" value=(value(&filter.state)) placeholder="CAPTURED"; }
            label { "agent " input name="agent" value=(value(&filter.agent)) placeholder="buyer-agent"; }
            label { "reason " input name="reason" value=(value(&filter.reason)) placeholder="SKU_UNKNOWN"; }
            button type="submit" { "Filter" }
            " "
            a href="/console" { "clear" }
        }
        div.columns {
            section.feed {
                table id="requests" {
                    thead { tr {
                        th { "request" } th { "time (UTC)" } th { "agent" } th { "state" }
                        th { "decision" } th { "reason" } th.num { "amount" }
                    } }
                    tbody {
                        @for r in &listed.rows {
                            @let reason = r.state_reason.as_ref().or(r.reason.as_ref());
                            tr class={ "decision-" (r.decision) } {
                                td { a href={ "/receipts/" (encode(&r.id)) } { (visible(&r.id)) } }
                                td { (r.created_at.format("%Y-%m-%d %H:%M:%S")) }
                                td { (visible(&r.agent_id)) }
                                td { code { (r.state) } }
                                td { (r.decision) }
                                td {
                                    @if let Some(code) = reason {
                                        (reason_words(code)) br; code.reason { (code) }
                                    } @else { "—" }
                                }
                                td.num { (money(r.amount_paise, r.currency.as_deref())) }
                            }
                        }
                    }
                }
                @if listed.rows.is_empty() { p { "No request matches." } }
                nav.pages {
                    @if filter.page > 0 {
                        a rel="prev" href=(href(&ConsoleFilter { page: filter.page - 1, ..filter.clone() })) { "← newer" }
                        " "
                    }
                    "page " (filter.page + 1)
                    @if listed.more {
                        " "
                        a rel="next" href=(href(&ConsoleFilter { page: filter.page + 1, ..filter.clone() })) { "older →" }
                    }
                }
            }
            aside.counts {
                h2 { "Refusals and step-ups by reason" }
                @if counts.is_empty() { p { "None." } }
                table id="refusal-counts" {
                    @for (code, n) in counts {
                        tr {
                            td { a href=(href(&ConsoleFilter { reason: Some(code.clone()), ..ConsoleFilter::default() })) {
                                (reason_words(code)) br; code.reason { (code) }
                            } }
                            td.num { (n) }
                        }
                    }
                }
            }
        }
    };
    document("Console", Some(c), main)
}
