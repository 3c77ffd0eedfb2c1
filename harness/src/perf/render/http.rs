//! The wire phase's section of `performance.md`, its goal rows and its
//! headline: the wire's cost as a ratio to the in-process gate.
//!
//! Guarantees: pure functions of the [`HttpLoad`] struct; a figure that was
//! not measured prints `n/a`, a phase that was not run says why.

use std::collections::BTreeMap;

use crate::perf::http::{HttpCell, HttpLoad, Path};
use crate::perf::slow_body::{Latency, Probe};
use crate::perf::stats::thousands;
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
    s.push_str(&slow_body_section(h));
    s
}

fn latency_cells(l: &Latency) -> String {
    format!(
        "{} | {} | {} | {} | {}",
        l.count,
        ms(l.p50_ms),
        ms(l.p99_ms),
        ms(l.max_ms),
        l.timed_out
    )
}

fn met(p: &Probe, goal: f64) -> &'static str {
    match p.met(goal) {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "n/a",
    }
}

/// The slow-body attack's subsection: each probe quiet and under the attack.
fn slow_body_section(h: &HttpLoad) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("### A slow-body attack, beside the same probes without it\n\n");
    let Some(a) = &h.slow_body else {
        match &h.slow_body_skipped {
            Some(why) => {
                let _ = writeln!(s, "Not measured: {why}.\n");
            }
            None => s.push_str("Not measured in this run.\n\n"),
        }
        return s;
    };
    let _ = writeln!(
        s,
        "`wire::serve` with its default configuration on a loopback port of its own, over the \
         same gate. **Attack**: {} connections, no key, each `POST {}` declaring \
         `Content-Length: {}` and sending one byte a second, opened again whenever the server \
         ends one, for {:.0} s; they opened {} connections in all, the server answered or \
         closed {} of them before the end, and they sent {} body bytes. **Probes**, one \
         request every {:.0} ms each, through the attack and through two quiet windows of \
         {:.0} s in all (half before the attack, half after): {} and {}. A latency runs from \
         sending the request to having read the whole answer; one not answered in time is \
         counted under \"timed out\" at what it waited. Goal: under the attack, each probe's \
         p99 at most {}× its quiet p99.\n",
        a.connections,
        a.route,
        thousands(a.declared_length as u64),
        a.attack_seconds,
        thousands(a.opened),
        thousands(a.ended_by_server),
        thousands(a.bytes_sent),
        a.probe_every_ms,
        a.quiet_seconds,
        a.proposal.what,
        a.healthz.what,
        a.goal_ratio
    );
    s.push_str(
        "| probe | window | count | p50 ms | p99 ms | max ms | timed out |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for p in [&a.proposal, &a.healthz] {
        let _ = writeln!(s, "| {} | quiet | {} |", p.what, latency_cells(&p.quiet));
        let _ = writeln!(
            s,
            "| {} | under the attack | {} |",
            p.what,
            latency_cells(&p.attack)
        );
    }
    s.push_str(
        "\n| probe | p99 quiet | p99 under the attack | attack / quiet | goal | met |\n\
         |---|---|---|---|---|---|\n",
    );
    for p in [&a.proposal, &a.healthz] {
        let _ = writeln!(
            s,
            "| {} | {} ms | {} ms | {} | ≤ {}× | {} |",
            p.what,
            ms(p.quiet.p99_ms),
            ms(p.attack.p99_ms),
            p.p99_ratio.map_or("n/a".into(), |r| format!("{r:.2}×")),
            a.goal_ratio,
            met(p, a.goal_ratio)
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
    if let Some(a) = &h.slow_body {
        for (name, p) in [
            ("a tenant's proposal", &a.proposal),
            ("`/healthz`", &a.healthz),
        ] {
            s.push_str(&format!(
                "| p99 of {name} under a slow-body attack ({} connections), against quiet | \
                 {} ms against {} ms ({}) | ≤ {}× quiet | {} |\n",
                a.connections,
                ms(p.attack.p99_ms),
                ms(p.quiet.p99_ms),
                p.p99_ratio.map_or("n/a".into(), |r| format!("{r:.2}×")),
                a.goal_ratio,
                met(p, a.goal_ratio)
            ));
        }
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
        .chain(h.slow_body.iter().flat_map(|a| {
            [("proposal", &a.proposal), ("healthz", &a.healthz)].map(|(name, p)| {
                format!(
                    "slow-body attack, {} connections: {name} p99 {} ms under it, {} ms quiet ({}; goal ≤ {}×)",
                    a.connections,
                    ms(p.attack.p99_ms),
                    ms(p.quiet.p99_ms),
                    p.p99_ratio.map_or("n/a".into(), |r| format!("{r:.2}×")),
                    a.goal_ratio
                )
            })
        }))
        .collect()
}

#[cfg(test)]
pub(in crate::perf::render) mod tests {
    use super::*;
    use crate::perf::http::{GOAL_CLIENTS, P50_OVERHEAD_GOAL, WireCost, ratio};
    use crate::perf::slow_body::SlowBody;

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
            slow_body: None,
            slow_body_skipped: Some("`--slow-body-connections 0`".into()),
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

    fn latency(count: u64, p99: f64) -> Latency {
        Latency {
            count,
            p50_ms: Some(p99 / 2.0),
            p99_ms: Some(p99),
            max_ms: Some(p99 * 1.5),
            timed_out: 0,
            unexpected: 0,
            first_unexpected: None,
        }
    }

    #[test]
    fn the_slow_body_attack_stands_beside_the_quiet_probes_and_is_judged_against_twice_quiet() {
        let mut h = fixed();
        let section_of = |h: &HttpLoad| section(Some(h), None, "");
        assert!(
            section_of(&h).contains("Not measured: `--slow-body-connections 0`."),
            "{}",
            section_of(&h)
        );
        h.slow_body = Some(SlowBody {
            connections: 70,
            declared_length: 60_000,
            route: "/webhooks/razorpay".into(),
            attack_seconds: 20.0,
            quiet_seconds: 20.0,
            probe_every_ms: 20.0,
            opened: 70,
            ended_by_server: 0,
            bytes_sent: 1_400,
            proposal: Probe {
                what: "a tenant's proposal".into(),
                quiet: latency(900, 4.0),
                attack: latency(1, 28_000.0),
                p99_ratio: Some(7_000.0),
            },
            healthz: Probe {
                what: "`GET /healthz`".into(),
                quiet: latency(950, 2.0),
                attack: latency(940, 3.0),
                p99_ratio: Some(1.5),
            },
            goal_ratio: 2.0,
            seconds: 42.0,
        });
        let s = section_of(&h);
        for row in [
            "| a tenant's proposal | quiet | 900 | 2.00 | 4.00 | 6.00 | 0 |",
            "| a tenant's proposal | under the attack | 1 | 14000.00 | 28000.00 | 42000.00 | 0 |",
            "| a tenant's proposal | 4.00 ms | 28000.00 ms | 7000.00× | ≤ 2× | **no** |",
            "| `GET /healthz` | 2.00 ms | 3.00 ms | 1.50× | ≤ 2× | yes |",
            "70 connections, no key, each `POST /webhooks/razorpay` declaring `Content-Length: 60,000`",
        ] {
            assert!(s.contains(row), "{row} missing:\n{s}");
        }
        let goals = goal_rows(&h);
        assert!(
            goals.contains(
                "| p99 of a tenant's proposal under a slow-body attack (70 connections), against \
                 quiet | 28000.00 ms against 4.00 ms (7000.00×) | ≤ 2× quiet | **no** |"
            ),
            "{goals}"
        );
        assert!(
            goals.contains("| p99 of `/healthz` under a slow-body attack (70 connections), against quiet | 3.00 ms against 2.00 ms (1.50×) | ≤ 2× quiet | yes |"),
            "{goals}"
        );
    }
}
