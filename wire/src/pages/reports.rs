//! `/reports` and `/reports/{name}`: the project's committed reports
//! (`reports/*.md`, as this binary was built with them), rendered.
//!
//! Guarantees: only the reports named in [`REPORTS`] are served (any other
//! name is 404); their Markdown is rendered by pulldown-cmark with every
//! raw HTML block or inline tag turned into text, so a report can add no
//! markup of its own, let alone a script.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use gate::provider::PaymentProvider;
use maud::{Markup, PreEscaped, html};
use pulldown_cmark::{Event, Options, Parser};

use super::{document, problem, reader, respond};
use crate::state::Shared;

/// The reports served: name, title, Markdown.
pub const REPORTS: &[(&str, &str, &str)] = &[
    (
        "benchmark",
        "The corpus through the gate",
        include_str!("../../../reports/benchmark.md"),
    ),
    (
        "attack-matrix",
        "Attack matrix",
        include_str!("../../../reports/attack-matrix.md"),
    ),
    (
        "mutations",
        "Guards deleted, tests that fail",
        include_str!("../../../reports/mutations.md"),
    ),
    (
        "outside-mutants",
        "The outside mutation audit",
        include_str!("../../../reports/outside-mutants.md"),
    ),
    (
        "performance",
        "Performance",
        include_str!("../../../reports/performance.md"),
    ),
    (
        "performance-history",
        "Performance history",
        include_str!("../../../reports/performance-history.md"),
    ),
    (
        "generated",
        "The generated corpus",
        include_str!("../../../reports/generated.md"),
    ),
];

/// The Markdown as HTML, raw HTML shown as text.
pub fn render_markdown(markdown: &str) -> String {
    let parser = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|event| match event {
        Event::Html(text) | Event::InlineHtml(text) => Event::Text(text),
        other => other,
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, parser);
    out
}

pub(crate) async fn index<P: PaymentProvider>(State(s): Shared<P>, headers: HeaderMap) -> Response {
    let c = match reader(&s, &headers).await {
        Ok(c) => c,
        Err(answer) => return answer,
    };
    let main = html! {
        h1 { "Reports" }
        p { "The project's committed reports, as this server was built with them." }
        ul {
            @for (name, title, _) in REPORTS {
                li { a href={ "/reports/" (name) } { (title) } " " code { "reports/" (name) ".md" } }
            }
        }
    };
    respond(StatusCode::OK, document("Reports", Some(&c), main))
}

pub(crate) async fn report<P: PaymentProvider>(
    State(s): Shared<P>,
    headers: HeaderMap,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    let c = match reader(&s, &headers).await {
        Ok(c) => c,
        Err(answer) => return answer,
    };
    let found = path
        .ok()
        .and_then(|Path(name)| REPORTS.iter().find(|(n, _, _)| *n == name));
    let Some((_, title, markdown)) = found else {
        return problem(StatusCode::NOT_FOUND, "No such report", "See /reports.");
    };
    let body: Markup = html! {
        article.report { (PreEscaped(render_markdown(markdown))) }
    };
    respond(StatusCode::OK, document(title, Some(&c), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_in_a_report_is_text() {
        let html = render_markdown(
            "# T\n\n<script>alert(1)</script>\n\nx <img src=x onerror=y> y\n\n| a |\n|---|\n| 1 |\n",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("<table>"), "{html}");
    }

    #[test]
    fn every_committed_report_renders() {
        for (name, _, md) in REPORTS {
            let html = render_markdown(md);
            assert!(!html.contains("<script"), "{name}");
            assert!(html.len() > 100, "{name}");
        }
    }
}
