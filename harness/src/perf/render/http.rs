//! The wire phase's section of `performance.md`, its goal rows and its
//! headline: the wire's cost as a ratio to the in-process gate.
//!
//! Guarantees: pure functions of the [`HttpLoad`] struct; a figure that was
//! not measured prints `n/a`, a phase that was not run says why.

use std::collections::BTreeMap;

use crate::perf::http::{HttpCell, HttpLoad, Path};
use crate::progress::pct_change;

/// The in-process rows of the wire's table: the baseline each HTTP row is
/// held against, not the gate's throughput (the load phase measures that).
pub const IN_PROCESS_LABEL: &str = "in process, the wire's baseline";

fn ms(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:.2}"))
}

/// The section of `performance.md`; `aside` (Markdown, or nothing) stands
/// right after the table of cells.
pub fn section(h: Option<&HttpLoad>, skipped: Option<&str>, aside: &str) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("## 5b. The service on the wire, beside the in-process gate\n\n");
    let Some(h) = h else {
        let _ = writeln!(
            s,
            "Not measured: {} (`harness perf --http` measures it).\n",
            skipped.unwrap_or("skipped")
        );
        return s;
    };
    let _ = writeln!(
        s,
        "`wire::serve` on a loopback port over the same gate and database as the in-process \
         cells, one `reqwest` client (one kept-alive connection) per client task; client *i* \
         works in tenant `t0i` with its own `buyer-agent` and `finance-lead` keys. For each \
         client count and kind of work, a pair of cells of {:.0} s each, run in halves in the \
         order in process, HTTP, HTTP, in process (a drift weighs on both alike): **propose** \
         (a proposal the merchant allowlist denies: the whole decision path) and **flow** \
         (propose → checkout → pay → signed capture webhook, one unit). A latency over HTTP runs from sending the request to having read the \
         whole answer (client, loopback, server, gate). The whole phase took {:.0} s.\n",
        h.cell_seconds, h.seconds
    );
    s.push_str(
        "| clients | work | path | per second | p50 ms | p95 ms | p99 ms | unexpected |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for c in &h.cells {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.clients,
            c.work,
            match c.path {
                Path::InProcess => IN_PROCESS_LABEL,
                Path::Http => "HTTP",
            },
            crate::perf::stats::format_rate(c.per_sec),
            ms(c.p50_ms),
            ms(c.p95_ms),
            ms(c.p99_ms),
            c.unexpected
        );
    }
    s.push('\n');
    s.push_str(aside);
    s.push_str(
        "### What the wire costs (HTTP against in process, side by side)\n\n\
         | clients | work | p50 added by the wire | throughput, HTTP / in process | goal | met |\n\
         |---|---|---|---|---|---|\n",
    );
    for c in &h.cost {
        let at_goal = c.clients == h.goal_clients;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            c.clients,
            c.work,
            pct_change(c.p50_ratio),
            c.throughput_ratio
                .map_or("n/a".into(), |r| format!("{r:.2}×")),
            if at_goal {
                format!("≤ +{:.0}%", h.p50_overhead_goal * 100.0)
            } else {
                "—".into()
            },
            match (at_goal, c.p50_ratio) {
                (true, Some(r)) if r <= 1.0 + h.p50_overhead_goal => "yes",
                (true, Some(_)) => "no",
                (true, None) => "n/a",
                (false, _) => "",
            }
        );
    }
    s.push('\n');
    s
}

/// The summary table's rows: the goal at [`GOAL_CLIENTS`] clients.
pub fn goal_rows(h: &HttpLoad) -> String {
    let mut s = String::new();
    for c in h.at_goal() {
        s.push_str(&format!(
            "| p50 added by the wire, {}, {} clients | {} | ≤ +{:.0}% | {} |\n",
            c.work,
            c.clients,
            pct_change(c.p50_ratio),
            h.p50_overhead_goal * 100.0,
            match c.p50_ratio {
                Some(r) if r <= 1.0 + h.p50_overhead_goal => "yes",
                Some(_) => "no",
                None => "n/a",
            }
        ));
    }
    s
}

/// The headline lines for stdout.
pub fn headline(h: &HttpLoad) -> Vec<String> {
    let by: BTreeMap<(usize, &str, Path), &HttpCell> = h
        .cells
        .iter()
        .map(|c| ((c.clients, c.work.as_str(), c.path), c))
        .collect();
    h.cost
        .iter()
        .map(|c| {
            let get = |p| by.get(&(c.clients, c.work.as_str(), p)).copied();
            let (a, b) = (get(Path::InProcess), get(Path::Http));
            format!(
                "wire, {} clients, {}: p50 {} ms in process, {} ms over HTTP ({}); {} vs {} per second",
                c.clients,
                c.work,
                ms(a.and_then(|x| x.p50_ms)),
                ms(b.and_then(|x| x.p50_ms)),
                pct_change(c.p50_ratio),
                crate::perf::stats::format_rate(a.and_then(|x| x.per_sec)),
                crate::perf::stats::format_rate(b.and_then(|x| x.per_sec)),
            )
        })
        .collect()
}

#[cfg(test)]
pub(in crate::perf::render) mod tests {
    use super::*;
    use crate::perf::http::{GOAL_CLIENTS, P50_OVERHEAD_GOAL, WireCost, ratio};

    fn cell(work: &'static str, path: Path, p50: f64, per_sec: f64) -> HttpCell {
        HttpCell {
            clients: 8,
            work: work.to_string(),
            path,
            completed: 10,
            seconds: 1.0,
            per_sec: Some(per_sec),
            p50_ms: Some(p50),
            p95_ms: Some(p50 * 2.0),
            p99_ms: Some(p50 * 3.0),
            unexpected: 0,
            first_unexpected: None,
        }
    }

    /// A wire phase with fixed figures (the report's tests draw it too).
    pub(in crate::perf::render) fn fixed() -> HttpLoad {
        HttpLoad {
            cell_seconds: 1.0,
            clock_speed: 600,
            cells: vec![
                cell("propose", Path::InProcess, 2.0, 100.0),
                cell("propose", Path::Http, 2.4, 90.0),
                cell("flow", Path::InProcess, 10.0, 20.0),
                cell("flow", Path::Http, 13.0, 15.0),
            ],
            cost: vec![
                WireCost {
                    clients: 8,
                    work: "propose".into(),
                    p50_ratio: ratio(Some(2.4), Some(2.0)),
                    throughput_ratio: ratio(Some(90.0), Some(100.0)),
                },
                WireCost {
                    clients: 8,
                    work: "flow".into(),
                    p50_ratio: ratio(Some(13.0), Some(10.0)),
                    throughput_ratio: ratio(Some(15.0), Some(20.0)),
                },
            ],
            p50_overhead_goal: P50_OVERHEAD_GOAL,
            goal_clients: GOAL_CLIENTS,
            seconds: 4.0,
            workers: Some(2),
            pool: Some(8),
        }
    }

    #[test]
    fn the_section_states_the_cost_as_a_ratio_and_judges_the_goal_at_eight_clients() {
        let h = fixed();
        let s = section(Some(&h), None, "");
        assert!(
            s.contains("| 8 | propose | +20% | 0.90× | ≤ +25% | yes |"),
            "{s}"
        );
        assert!(
            s.contains("| 8 | flow | +30% | 0.75× | ≤ +25% | no |"),
            "{s}"
        );
        assert!(section(None, Some("--http was not given"), "").contains("Not measured: --http"));
        assert_eq!(headline(&h).len(), 2);
        let goals = goal_rows(&h);
        assert!(
            goals.contains("| p50 added by the wire, propose, 8 clients | +20% | ≤ +25% | yes |"),
            "{goals}"
        );
        assert!(
            goals.contains("| p50 added by the wire, flow, 8 clients | +30% | ≤ +25% | no |"),
            "{goals}"
        );
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }
}
