//! The load phase's section of `performance.md`: throughput against
//! pgbench, the goals, latency percentiles and where the server's time went.
//!
//! Guarantees: a pure function of the [`Load`] struct; a figure that was not
//! measured prints `n/a`.

use std::fmt::Write as _;

use crate::perf::checkpoint_delay::CheckpointDelay;
use crate::perf::cpu::PerOp;
use crate::perf::load::{
    Cell, CounterTriggers, LatencyRow, Load, LoadRow, Pairs, RowSecurity, Shape, Unguarded,
};
use crate::perf::statements::Breakdown;
use crate::perf::stats::{format_rate, ratio, thousands};

/// The load goals, as ratios to pgbench at 8 clients.
pub const PROPOSE_ONE_TENANT_GOAL: f64 = 0.1;
pub const PROPOSE_TENANT_PER_CLIENT_GOAL: f64 = 0.5;
pub const FLOW_TENANT_PER_CLIENT_GOAL: f64 = 0.15;
/// Propose p95 at 8 clients, milliseconds.
pub const PROPOSE_P95_GOAL_MS: f64 = 5.0;
/// The client count the goals are stated at.
pub const GOAL_CLIENTS: usize = 8;

pub fn per_sec(c: &Option<Cell>) -> Option<f64> {
    c.as_ref().and_then(|c| c.per_sec)
}

fn vs(c: &Option<Cell>, row: &LoadRow) -> Option<f64> {
    per_sec(c)
        .zip(row.pgbench_tps)
        .and_then(|(g, p)| ratio(g, p))
}

fn rate_and_ratio(c: &Option<Cell>, row: &LoadRow) -> String {
    match per_sec(c) {
        Some(r) => match vs(c, row) {
            Some(x) => format!("{} ({x:.3}× pgbench)", format_rate(Some(r))),
            None => format_rate(Some(r)),
        },
        None => "n/a".into(),
    }
}

fn yes_no(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "n/a",
    }
}

/// Whether throughput never falls as clients are added (within 5%).
pub fn never_slower(rows: &[LoadRow], pick: fn(&LoadRow) -> &Option<Cell>) -> Option<bool> {
    let rates: Vec<f64> = rows
        .iter()
        .map(|r| per_sec(pick(r)))
        .collect::<Option<_>>()?;
    Some(rates.windows(2).all(|w| w[1] >= w[0] * 0.95))
}

fn p95(load: &Load, op: &str, shape: Shape, clients: usize) -> Option<f64> {
    load.latency
        .iter()
        .find(|l| l.operation == op && l.shape == shape && l.clients == clients)
        .map(|l| l.p95_ms)
}

/// The goal rows for the report's summary table.
pub fn goal_rows(load: &Load) -> String {
    let mut s = String::new();
    let at = load.rows.iter().find(|r| r.clients == GOAL_CLIENTS);
    let mut goal = |what: &str, figure: String, goal: String, met: Option<bool>| {
        let _ = writeln!(s, "| {what} | {figure} | {goal} | {} |", yes_no(met));
    };
    for (what, pick, target) in [
        (
            "propose through Postgres, one tenant, 8 clients (§5's throughput cell)",
            (|r: &LoadRow| &r.propose_one_tenant) as fn(&LoadRow) -> &Option<Cell>,
            PROPOSE_ONE_TENANT_GOAL,
        ),
        (
            "propose through Postgres, tenant per client, 8 clients (§5's throughput cell)",
            |r: &LoadRow| &r.propose_tenant_per_client,
            PROPOSE_TENANT_PER_CLIENT_GOAL,
        ),
        (
            "full purchase flow, tenant per client, 8 clients (§5's throughput cell)",
            |r: &LoadRow| &r.flow_tenant_per_client,
            FLOW_TENANT_PER_CLIENT_GOAL,
        ),
    ] {
        let r = at.and_then(|row| vs(pick(row), row));
        goal(
            what,
            at.map_or("n/a".into(), |row| rate_and_ratio(pick(row), row)),
            format!("≥ {target} × pgbench TPS"),
            r.map(|r| r >= target),
        );
    }
    goal(
        "propose, one tenant: more clients never slower than fewer",
        match never_slower(&load.rows, |r| &r.propose_one_tenant) {
            Some(true) => "never slower".into(),
            Some(false) => "slower with more clients".into(),
            None => "n/a".into(),
        },
        "never slower (within 5%)".into(),
        never_slower(&load.rows, |r| &r.propose_one_tenant),
    );
    for shape in [Shape::OneTenant, Shape::TenantPerClient] {
        let p = p95(load, "propose", shape, GOAL_CLIENTS);
        goal(
            &format!("propose p95 at 8 clients, {}", shape.label()),
            p.map_or("n/a".into(), |p| format!("{p:.2} ms")),
            format!("≤ {PROPOSE_P95_GOAL_MS} ms"),
            p.map(|p| p <= PROPOSE_P95_GOAL_MS),
        );
    }
    s
}

/// The checkpoint delay goal: every operation covered, none later than
/// this many signer intervals after its commit.
pub const CHECKPOINT_DELAY_INTERVALS: f64 = 2.0;

fn ms_or_na(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{x:.0} ms"))
}

/// The checkpoint delay's figure, goal and verdict.
fn delay_row(d: Option<&CheckpointDelay>) -> (String, String, Option<bool>) {
    let Some(d) = d else {
        return ("n/a".into(), "bounded (not measured)".into(), None);
    };
    let bound = d.interval_ms as f64 * CHECKPOINT_DELAY_INTERVALS;
    let figure = format!(
        "p50 {}, p95 {} (max {}; {} of {} operations covered)",
        ms_or_na(d.p50_ms),
        ms_or_na(d.p95_ms),
        ms_or_na(d.max_ms),
        thousands(d.covered),
        thousands(d.operations)
    );
    let goal = format!(
        "every operation covered within {CHECKPOINT_DELAY_INTERVALS:.0} × the interval ({} ms)",
        thousands(bound as u64)
    );
    let met = d
        .max_ms
        .map(|max| d.covered == d.operations && d.operations > 0 && max <= bound);
    (figure, goal, met)
}

/// Issue 42's three performance goals in one table: the flow at 8 clients
/// tenant per client against pgbench, the one-tenant proposal p95 at 8
/// clients, and the delay from a commit to a signed checkpoint.
pub fn issue42_goal_rows(load: &Load) -> String {
    let mut s = String::new();
    let at = load.rows.iter().find(|r| r.clients == GOAL_CLIENTS);
    let flow = at.and_then(|row| vs(&row.flow_tenant_per_client, row));
    let _ = writeln!(
        s,
        "| full purchase flow, tenant per client, {GOAL_CLIENTS} clients | {} \
         | ≥ {FLOW_TENANT_PER_CLIENT_GOAL} × pgbench TPS | {} |",
        at.map_or("n/a".into(), |row| rate_and_ratio(
            &row.flow_tenant_per_client,
            row
        )),
        yes_no(flow.map(|r| r >= FLOW_TENANT_PER_CLIENT_GOAL))
    );
    let p = p95(load, "propose", Shape::OneTenant, GOAL_CLIENTS);
    let _ = writeln!(
        s,
        "| propose p95, one tenant, {GOAL_CLIENTS} clients | {} | ≤ {PROPOSE_P95_GOAL_MS} ms | {} |",
        p.map_or("n/a".into(), |p| format!("{p:.2} ms")),
        yes_no(p.map(|p| p <= PROPOSE_P95_GOAL_MS))
    );
    let d = load.checkpoint_delay.as_ref();
    let (figure, goal, met) = delay_row(d);
    let _ = writeln!(
        s,
        "| commit → signed checkpoint, {} clients, tenant per client, signer every {} \
         | {figure} | {goal} | {} |",
        d.map_or(GOAL_CLIENTS, |d| d.clients),
        d.map_or("n/a".into(), |d| format!("{} ms", thousands(d.interval_ms))),
        yes_no(met)
    );
    s
}

/// Issue 42's goals, with how the delay was measured.
fn issue42_section(load: &Load) -> String {
    let mut s = String::from(
        "### Evidence log goals, from this run\n\n| measure | figure | goal | met |\n\
         |---|---|---|---|\n",
    );
    s.push_str(&issue42_goal_rows(load));
    s.push('\n');
    match &load.checkpoint_delay {
        Some(d) => {
            let _ = writeln!(
                s,
                "The delay: the signer `spendgate serve` runs (`gate::service::checkpointer`, \
                 every {} ms, its default `checkpoint_interval_ms`) on this phase's gate, while \
                 {} clients, each in a tenant of its own, propose for {:.1} s (a denied \
                 proposal: one committed operation that appends to the ledger); an operation's \
                 delay runs from its call's return to the end of the first tick that kept a \
                 checkpoint covering its last entry. {} ticks kept {} checkpoints; the longest \
                 tick took {} (a signer's first tick and every sixtieth read each grown tenant's \
                 whole log; the others only its new entries).\n",
                thousands(d.interval_ms),
                d.clients,
                d.seconds,
                thousands(d.ticks),
                thousands(d.checkpoints),
                ms_or_na(d.longest_tick_ms)
            );
            if let (Some(i), Some(g), Some(n)) =
                (d.mean_integrate_ms, d.mean_sign_ms, d.mean_entries_per_tick)
            {
                let _ = writeln!(
                    s,
                    "The ticks after the first spent on average {} integrating the queue \
                     ({} entries a tick) and {} checking and signing.\n",
                    ms_or_na(Some(i)),
                    thousands(n.round() as u64),
                    ms_or_na(Some(g))
                );
            }
        }
        None => s.push_str("The delay was not measured in this run (see the notes).\n\n"),
    }
    s
}

/// The load section of performance.md.
pub fn section(load: Option<&Load>, skipped: Option<&str>) -> String {
    let mut s = String::from("## 5. The database-backed gate under load, beside pgbench\n\n");
    let Some(load) = load else {
        let _ = writeln!(
            s,
            "Not measured: {} (`harness perf --db` measures it).\n",
            skipped.unwrap_or("skipped")
        );
        return s;
    };
    let _ = writeln!(
        s,
        "![throughput against clients](performance.svg)\n\n\
         For each client count, one pass runs pgbench (`{}`, its built-in TPC-B-like \
         script in a database of its own) and then the gate's four cells, {:.0} s each, \
         one after another on one migrated database, the gate on a pool of {} connections \
         (a cell with more clients queues them for one in the process) in a runtime of {} \
         worker thread(s). \
         **propose**: a proposal the merchant allowlist denies (the whole decision path, \
         recorded and appended to the ledger). **flow**: propose (allowed) → checkout → pay \
         (in-process provider) → signed capture webhook; one flow is one unit. \
         **one tenant**: every client is `buyer-agent` of `acme`; **tenant per client**: \
         client *i* works in tenant `t0i`, a copy of `acme`. The world's rate limits are \
         raised out of reach, its caps and budgets far above a run's spend, and its clock \
         runs {}× real time (one-minute rate windows). The whole phase took {:.0} s.\n",
        load.pgbench, load.cell_seconds, load.pool, load.workers, load.clock_speed, load.seconds
    );
    s.push_str(
        "| clients | pgbench TPS | propose, one tenant | propose, tenant per client | \
         flow, one tenant | flow, tenant per client |\n|---|---|---|---|---|---|\n",
    );
    for row in &load.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            row.clients,
            row.pgbench_tps
                .map_or_else(|| "n/a".to_string(), |t| format_rate(Some(t))),
            rate_and_ratio(&row.propose_one_tenant, row),
            rate_and_ratio(&row.propose_tenant_per_client, row),
            rate_and_ratio(&row.flow_one_tenant, row),
            rate_and_ratio(&row.flow_tenant_per_client, row),
        );
    }
    s.push('\n');
    for row in &load.rows {
        if let Some(e) = &row.pgbench_error {
            let _ = writeln!(s, "- pgbench at {} clients failed: {e}", row.clients);
        }
    }
    s.push_str(&cpu_section(&load.rows));
    s.push_str("### Load goals, ratios from this run\n\n| measure | figure | goal | met |\n|---|---|---|---|\n");
    s.push_str(&goal_rows(load));
    s.push('\n');
    s.push_str(&issue42_section(load));
    s.push_str(&unguarded_section(load.unguarded.as_ref(), &load.rows));
    s.push_str(&row_security_section(load.row_security.as_ref()));
    s.push_str(&counter_triggers_section(load.counter_triggers.as_ref()));
    s.push_str(
        "### Latency per operation (HDR histogram)\n\n\
         `approve` comes from cells of its own (propose a step-up, then approve; only the \
         approval is timed); `propose` from the propose cells, the others from the flow \
         cells.\n\n\
         | operation | shape | clients | count | p50 | p95 | p99 | max |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut latency: Vec<&LatencyRow> = load.latency.iter().collect();
    latency.sort_by(|a, b| {
        (&a.operation, a.clients, a.shape).cmp(&(&b.operation, b.clients, b.shape))
    });
    for l in latency {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            l.operation,
            l.shape.label(),
            l.clients,
            l.count,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.max_ms
        );
    }
    s.push('\n');
    s.push_str(&statements_section(load.statements.as_ref()));
    s.push_str(
        "The changes made for speed, each measured before and after side by side, are in \
         [performance-history.md](performance-history.md).\n\n",
    );
    s
}

/// One window's CPU per operation: total (server + client), and beside a
/// gate cell the ratio pgbench's transaction ÷ this operation.
fn cpu_cell(op: Option<PerOp>, pgbench: Option<PerOp>) -> String {
    let Some(op) = op else {
        return "n/a".into();
    };
    let figure = format!(
        "{} µs ({} + {})",
        thousands(op.total_us().round() as u64),
        thousands(op.server_us.round() as u64),
        thousands(op.client_us.round() as u64)
    );
    match pgbench.and_then(|p| ratio(p.total_us(), op.total_us())) {
        Some(r) => format!("{figure}, {r:.3}×"),
        None => figure,
    }
}

/// The gate's cells the CPU table shows, in its column order.
const CPU_COLUMNS: [fn(&LoadRow) -> &Option<Cell>; 3] = [
    |r| &r.propose_one_tenant,
    |r| &r.propose_tenant_per_client,
    |r| &r.flow_tenant_per_client,
];

/// CPU per operation beside the throughput table; nothing when no window
/// could be read (a server on another machine).
fn cpu_section(rows: &[LoadRow]) -> String {
    let cpu =
        |r: &LoadRow, pick: fn(&LoadRow) -> &Option<Cell>| pick(r).as_ref().and_then(|c| c.cpu);
    let measured = rows
        .iter()
        .any(|r| r.pgbench_cpu.is_some() || CPU_COLUMNS.iter().any(|&pick| cpu(r, pick).is_some()));
    if !measured {
        return String::new();
    }
    let mut s = String::from(
        "### CPU per operation (the kernel's accounting, same cells)\n\n\
         Each pgbench run and each cell above also read the kernel's CPU counters before and \
         after (`harness/src/perf/cpu.rs`): the CPU time the machine spent per transaction or \
         operation, in Postgres' processes (server) and in the load's own process (client: the \
         gate and the load driver; pgbench's client for pgbench). Server is every process of \
         the one Postgres server the load talks to, background work included (autovacuum, checkpoints), which weighs most where \
         there are fewest operations to share it (1 and 2 clients); pgbench's figure includes \
         starting its connections. It splits each operation's \
         cost between the server and the gate, and gives the ratio the throughput ratio tends \
         to once the machine is the bottleneck: pgbench's CPU per transaction ÷ the gate's per \
         operation (the × figure). On a disturbed shared host it moves as much as throughput \
         does (up to 2× between rounds, one evening): compare the figures of one run.\n\n\
         | clients | pgbench, per transaction | propose, one tenant | propose, tenant per client \
         | flow, tenant per client |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        let _ = write!(
            s,
            "| {} | {} |",
            row.clients,
            cpu_cell(row.pgbench_cpu, None)
        );
        for pick in CPU_COLUMNS {
            let _ = write!(s, " {} |", cpu_cell(cpu(row, pick), row.pgbench_cpu));
        }
        s.push('\n');
    }
    s.push_str("\nEach figure: total µs (server + client).\n\n");
    s
}

/// The most of the flow's throughput row-level security may cost and be
/// on by default (issue 40, item 6).
pub const ROW_SECURITY_MAX_COST: f64 = 0.10;

/// The cells' completed flows over their seconds.
fn pooled_rate(cells: &[Cell]) -> Option<f64> {
    let completed: u64 = cells.iter().map(|c| c.completed).sum();
    let seconds: f64 = cells.iter().map(|c| c.seconds).sum();
    crate::perf::stats::rate(completed, seconds)
}

/// The flow with row-level security off and on, pair by pair, and what it
/// costs; nothing when that part did not run.
fn row_security_section(r: Option<&RowSecurity>) -> String {
    let Some(r) = r else {
        return String::new();
    };
    let mut s = String::from(
        "### What row-level security costs

",
    );
    let _ = writeln!(
        s,
        "The purchase flow (propose, checkout, pay, webhook), tenant per client at {} clients, \
         on two fresh databases seeded alike, in alternated cells: off (row-level security \
         disabled on the tenant tables, the gate setting no tenant token) then on \
         (`spendgate_row_security(true)`, each transaction inside a tenant begun by setting \
         that tenant's token, every statement filtered by the `tenant_rows` policies). Its \
         cost is 1 − on ÷ off over all the pairs.\n",
        r.clients
    );
    s.push_str("| pair | flow, off | flow, on | on ÷ off |\n|---|---|---|---|\n");
    let rate = |c: &Cell| format_rate(c.per_sec);
    for (i, (off, on)) in r.off.iter().zip(&r.on).enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            i + 1,
            rate(off),
            rate(on),
            on.per_sec
                .zip(off.per_sec)
                .and_then(|(a, b)| ratio(a, b))
                .map_or("n/a".into(), |x| format!("{x:.3}"))
        );
    }
    let (off, on, both) = pooled_pairs(r);
    let _ = writeln!(
        s,
        "| all | {} | {} | {} |\n",
        format_rate(off),
        format_rate(on),
        both.map_or("n/a".into(), |x| format!("{x:.3}"))
    );
    if let Some(x) = both {
        let cost = 1.0 - x;
        let verdict = match cost <= ROW_SECURITY_MAX_COST {
            true => "within the 10% allowed: on by default",
            false => "more than the 10% allowed: off by default, `row_security = true` turns it on",
        };
        let _ = writeln!(
            s,
            "Row-level security cost {:.1}% of the flow's throughput in this run: {verdict}.\n",
            cost * 100.0
        );
    }
    s
}

/// The pooled rates of a pair's "off" and "on" cells, and on ÷ off.
fn pooled_pairs(p: &Pairs) -> (Option<f64>, Option<f64>, Option<f64>) {
    let (off, on) = (pooled_rate(&p.off), pooled_rate(&p.on));
    (off, on, on.zip(off).and_then(|(a, b)| ratio(a, b)))
}

/// The share of its throughput the flow may lose to a counter trigger that
/// is enforced (enabled by its migration).
pub const COUNTER_TRIGGER_MAX_COST: f64 = 0.10;

/// The flow with the counter triggers disabled and enabled, each alone, the
/// set the migrations enable and all together, and what each costs (the
/// verdict is each trigger's alone); nothing when that part did not run.
fn counter_triggers_section(t: Option<&CounterTriggers>) -> String {
    let Some(t) = t else {
        return String::new();
    };
    let mut s = String::from("### What the counter triggers cost\n\n");
    let clients = t.rows.first().map_or(0, |r| r.pairs.clients);
    let pairs = t.rows.first().map_or(0, |r| r.pairs.off.len());
    let _ = writeln!(
        s,
        "The purchase flow (propose, checkout, pay, webhook), tenant per client at {clients} \
         clients, for each set of counter triggers on two fresh databases seeded alike, in \
         {pairs} alternated pairs of cells: off (every counter trigger disabled by the \
         migrations' owner) then on (the set enabled, the others disabled): each trigger \
         alone, the set the migrations enable, and all of them. A trigger that \
         keeps at least {:.0}% of the flow's throughput (on ÷ off over its pairs) is enforced; \
         one that costs more is shipped disabled and checked by `spendgate ledger verify` \
         alone.\n",
        (1.0 - COUNTER_TRIGGER_MAX_COST) * 100.0
    );
    s.push_str(
        "| enabled | flow, off | flow, on | on ÷ off | pairs' on ÷ off, lowest to highest | verdict |\n\
         |---|---|---|---|---|---|\n",
    );
    for row in &t.rows {
        let (off, on, both) = pooled_pairs(&row.pairs);
        let verdict = match both {
            _ if row.enabled.len() > 1 => "a set: what these cost together",
            Some(x) if 1.0 - x <= COUNTER_TRIGGER_MAX_COST => "within 10%: enforce",
            Some(_) => "more than 10%: ship disabled",
            None => "n/a",
        };
        let names: Vec<String> = row.enabled.iter().map(|n| format!("`{n}`")).collect();
        let each: Vec<f64> = row
            .pairs
            .off
            .iter()
            .zip(&row.pairs.on)
            .filter_map(|(off, on)| on.per_sec.zip(off.per_sec).and_then(|(a, b)| ratio(a, b)))
            .collect();
        let spread = match (
            each.iter().copied().reduce(f64::min),
            each.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => format!("{lo:.3} to {hi:.3}"),
            _ => "n/a".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {spread} | {verdict} |",
            names.join(", "),
            format_rate(off),
            format_rate(on),
            both.map_or("n/a".into(), |x| format!("{x:.3}"))
        );
    }
    s.push('\n');
    s
}

/// The share of a guarded rate's time the guards took: 1 − guarded/unguarded.
fn guards_share(guarded: Option<f64>, bare: Option<f64>) -> String {
    match guarded.zip(bare).and_then(|(g, b)| ratio(g, b)) {
        Some(r) => format!("{:.0}%", (1.0 - r) * 100.0),
        None => "n/a".into(),
    }
}

/// The tenant-per-client cells again on a copy without guards, beside the
/// same pass's guarded cells; nothing when that part did not run.
fn unguarded_section(u: Option<&Unguarded>, rows: &[LoadRow]) -> String {
    let Some(u) = u else {
        return String::new();
    };
    let mut s = String::from("### What the database's guards cost\n\n");
    let _ = writeln!(
        s,
        "At {} clients, in the same pass as that count's row above and seconds after it, the \
         tenant-per-client cells ran again on a second fresh database with the schema's {} \
         CHECK constraints and {} foreign keys dropped and its {} guarding triggers disabled \
         (keys, unique indexes and NOT NULL kept, and the triggers that compute columns and \
         rows the gate does not write: `perf::unguarded::COMPUTING_TRIGGERS`). Nothing serves \
         from such a database; it says what share of the gate's time the guards take, and how \
         far the same statements go without them. The guards' share is 1 − guarded ÷ \
         unguarded.\n",
        u.rows
            .iter()
            .map(|r| r.clients.to_string())
            .collect::<Vec<_>>()
            .join(" and "),
        u.removed.checks,
        u.removed.foreign_keys,
        u.removed.triggers.len()
    );
    s.push_str(
        "| clients | propose, tenant per client | without guards | guards' share | \
         flow, tenant per client | without guards | guards' share |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for bare in &u.rows {
        let Some(row) = rows.iter().find(|r| r.clients == bare.clients) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            bare.clients,
            rate_and_ratio(&row.propose_tenant_per_client, row),
            rate_and_ratio(&bare.propose_tenant_per_client, row),
            guards_share(
                per_sec(&row.propose_tenant_per_client),
                per_sec(&bare.propose_tenant_per_client)
            ),
            rate_and_ratio(&row.flow_tenant_per_client, row),
            rate_and_ratio(&bare.flow_tenant_per_client, row),
            guards_share(
                per_sec(&row.flow_tenant_per_client),
                per_sec(&bare.flow_tenant_per_client)
            ),
        );
    }
    s.push('\n');
    let at_goal = u
        .rows
        .iter()
        .find(|r| r.clients == GOAL_CLIENTS)
        .and_then(|bare| {
            let row = rows.iter().find(|r| r.clients == GOAL_CLIENTS)?;
            Some((
                vs(&bare.propose_tenant_per_client, row)?,
                vs(&bare.flow_tenant_per_client, row)?,
            ))
        });
    if let Some((propose, flow)) = at_goal {
        let verdict = |x: f64, goal: f64| match x >= goal {
            true => "the goal is within reach of the statements alone",
            false => "short of the goal even with no guard at all",
        };
        let _ = writeln!(
            s,
            "Without any guard, at {GOAL_CLIENTS} clients a proposal would run at {propose:.3}× \
             pgbench (goal {PROPOSE_TENANT_PER_CLIENT_GOAL}×: {}) and a flow at {flow:.3}× \
             (goal {FLOW_TENANT_PER_CLIENT_GOAL}×: {}).\n",
            verdict(propose, PROPOSE_TENANT_PER_CLIENT_GOAL),
            verdict(flow, FLOW_TENANT_PER_CLIENT_GOAL)
        );
    }
    s
}

/// Where the server's time went (pg_stat_statements), or why it is not known.
fn statements_section(b: Option<&Breakdown>) -> String {
    let mut s = String::from("### Where the server's time goes (pg_stat_statements)\n\n");
    let Some(b) = b else {
        s.push_str(
            "Not measured in this run: the server did not load pg_stat_statements (see the \
             notes).\n\n",
        );
        return s;
    };
    let _ = writeln!(
        s,
        "Postgres' own execution time of the gate's statements over {}: {} statements, \
         {:.1} s in all. These times include waiting for row locks and for a CPU, so they show \
         where the gate waits as well as where it works. The {} with the most time:\n",
        b.window,
        thousands(u64::try_from(b.calls).unwrap_or(0)),
        b.total_ms / 1000.0,
        b.top.len()
    );
    s.push_str("| statement | calls | mean | total | share |\n|---|---:|---:|---:|---:|\n");
    for c in &b.top {
        let mut query: String = c.query.chars().take(110).collect();
        if query.len() < c.query.len() {
            query.push('…');
        }
        let _ = writeln!(
            s,
            "| `{}` | {} | {:.3} ms | {:.2} s | {:.1}% |",
            query.replace('`', "'").replace('|', "\\|"),
            thousands(u64::try_from(c.calls).unwrap_or(0)),
            c.mean_ms,
            c.total_ms / 1000.0,
            c.share * 100.0
        );
    }
    s.push('\n');
    s
}

#[cfg(test)]
pub(in crate::perf::render) mod tests {
    use super::*;
    use crate::perf::load::{CounterTriggerRow, UnguardedRow};
    use crate::perf::statements::StatementCost;
    use crate::perf::unguarded::Guards;

    fn cell(per_sec: f64) -> Option<Cell> {
        Some(Cell {
            completed: (per_sec * 3.0) as u64,
            seconds: 3.0,
            per_sec: Some(per_sec),
            unexpected: 0,
            first_unexpected: None,
            // A fifth of a core per operation per second: 2,000 µs at 100/s.
            cpu: Some(PerOp {
                client_us: 40_000.0 / per_sec,
                server_us: 160_000.0 / per_sec,
            }),
        })
    }

    /// A load phase with fixed figures (the chart's tests draw it too).
    pub(in crate::perf::render) fn fixed() -> Load {
        let row = |clients, tps: f64, k: f64| LoadRow {
            clients,
            pgbench_tps: Some(tps),
            pgbench_error: None,
            pgbench_cpu: Some(PerOp {
                client_us: 100.0,
                server_us: 300.0,
            }),
            propose_one_tenant: cell(100.0 * k),
            propose_tenant_per_client: cell(200.0 * k),
            flow_one_tenant: cell(40.0 * k),
            flow_tenant_per_client: cell(50.0 * k),
        };
        Load {
            cell_seconds: 3.0,
            pool: 8,
            workers: 1,
            pgbench: "pgbench".into(),
            pgbench_scale: 1,
            clock_speed: 600,
            rows: vec![row(1, 1000.0, 1.0), row(8, 4000.0, 0.5)],
            latency: vec![LatencyRow {
                operation: "propose".into(),
                shape: Shape::OneTenant,
                clients: 8,
                count: 10,
                p50_ms: 2.0,
                p95_ms: 7.5,
                p99_ms: 9.0,
                max_ms: 12.0,
            }],
            statements: Some(Breakdown {
                window: "the four cells at 8 clients".into(),
                total_ms: 2000.0,
                calls: 1000,
                top: vec![StatementCost {
                    query: "SELECT a | b FROM t".into(),
                    calls: 500,
                    total_ms: 1500.0,
                    mean_ms: 3.0,
                    share: 0.75,
                }],
            }),
            unguarded: Some(Unguarded {
                removed: Guards {
                    checks: 40,
                    foreign_keys: 30,
                    triggers: vec!["payment_requests.request_state_transition".into()],
                },
                rows: vec![UnguardedRow {
                    clients: 8,
                    propose_tenant_per_client: cell(125.0),
                    flow_tenant_per_client: cell(100.0),
                }],
            }),
            checkpoint_delay: Some(CheckpointDelay {
                interval_ms: 1000,
                clients: 8,
                seconds: 5.0,
                operations: 4000,
                covered: 4000,
                ticks: 7,
                checkpoints: 48,
                p50_ms: Some(512.0),
                p95_ms: Some(968.0),
                max_ms: Some(1041.0),
                longest_tick_ms: Some(41.0),
                mean_integrate_ms: Some(12.0),
                mean_sign_ms: Some(20.0),
                mean_entries_per_tick: Some(900.0),
            }),
            row_security: Some(RowSecurity {
                clients: 8,
                off: cell(100.0).into_iter().collect(),
                on: cell(95.0).into_iter().collect(),
            }),
            counter_triggers: Some(CounterTriggers {
                rows: vec![
                    CounterTriggerRow {
                        enabled: vec!["daily_spend_counts_requests".into()],
                        pairs: Pairs {
                            clients: 8,
                            off: cell(100.0).into_iter().collect(),
                            on: cell(96.0).into_iter().collect(),
                        },
                    },
                    CounterTriggerRow {
                        enabled: vec!["delegation_spend_counts_requests".into()],
                        pairs: Pairs {
                            clients: 8,
                            off: cell(100.0).into_iter().collect(),
                            on: cell(85.0).into_iter().collect(),
                        },
                    },
                ],
            }),
            seconds: 40.0,
        }
    }

    #[test]
    fn each_counter_trigger_is_judged_by_its_share_of_the_flow() {
        let md = section(Some(&fixed()), None);
        assert!(
            md.contains(
                "| `daily_spend_counts_requests` | 100/s | 96.0/s | 0.960 | 0.960 to 0.960 | \
                 within 10%: enforce |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| `delegation_spend_counts_requests` | 100/s | 85.0/s | 0.850 | 0.850 to 0.850 | \
                 more than 10%: ship disabled |"
            ),
            "{md}"
        );
        let mut none = fixed();
        none.counter_triggers = None;
        assert!(!section(Some(&none), None).contains("counter triggers cost"));
    }

    #[test]
    fn row_security_is_judged_by_its_share_of_the_flow() {
        let md = section(Some(&fixed()), None);
        assert!(md.contains("| 1 | 100/s | 95.0/s | 0.950 |"), "{md}");
        assert!(
            md.contains("cost 5.0% of the flow's throughput in this run: within the 10%"),
            "{md}"
        );
        let mut dearer = fixed();
        if let Some(r) = dearer.row_security.as_mut() {
            r.on = cell(80.0).into_iter().collect();
        }
        assert!(
            section(Some(&dearer), None)
                .contains("cost 20.0% of the flow's throughput in this run: more than"),
        );
        let mut none = fixed();
        none.row_security = None;
        assert!(!section(Some(&none), None).contains("row-level security costs"));
    }

    #[test]
    fn the_guards_cost_is_the_share_of_the_guarded_time_and_judged_against_the_goals() {
        let md = section(Some(&fixed()), None);
        // 8 clients: guarded propose 100/s, without guards 125/s: the guards
        // take 20% of a proposal's time; flow 25/s against 100/s: 75%.
        assert!(
            md.contains(
                "| 8 | 100/s (0.025× pgbench) | 125/s (0.031× pgbench) | 20% | \
                 25.0/s (0.006× pgbench) | 100/s (0.025× pgbench) | 75% |"
            ),
            "{md}"
        );
        assert!(
            md.contains("40 CHECK constraints and 30 foreign keys"),
            "{md}"
        );
        assert!(md.contains("its 1 guarding triggers"), "{md}");
        assert!(
            md.contains("a proposal would run at 0.031× pgbench (goal 0.5×: short of the goal"),
            "{md}"
        );
        let mut none = fixed();
        none.unguarded = None;
        assert!(!section(Some(&none), None).contains("guards cost"));
    }

    #[test]
    fn the_section_gives_ratios_to_pgbench_and_judges_the_goals() {
        let md = section(Some(&fixed()), None);
        // 8 clients: propose one tenant 50/s against 4,000 TPS = 0.0125×, below 0.1.
        assert!(md.contains("| 8 | 4,000/s |"), "{md}");
        assert!(md.contains("100/s (0.025× pgbench)"), "{md}");
        assert!(md.contains(
            "| propose through Postgres, one tenant, 8 clients (§5's throughput cell) |"
        ));
        assert!(md.contains("slower with more clients"), "{md}");
        assert!(
            md.contains("| propose p95 at 8 clients, one tenant | 7.50 ms | ≤ 5 ms | **no** |"),
            "{md}"
        );
        assert!(md.contains("performance.svg"));
        assert!(
            md.contains("[performance-history.md](performance-history.md)"),
            "{md}"
        );
    }

    #[test]
    fn issue_42s_three_goals_are_one_table_and_an_unmeasured_delay_is_not_met() {
        let md = section(Some(&fixed()), None);
        assert!(md.contains("### Evidence log goals, from this run"), "{md}");
        // 8 clients: flow tenant per client 25/s against 4,000 TPS = 0.006×.
        assert!(
            md.contains(
                "| full purchase flow, tenant per client, 8 clients | 25.0/s (0.006× pgbench) \
                 | ≥ 0.15 × pgbench TPS | **no** |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| propose p95, one tenant, 8 clients | 7.50 ms | ≤ 5 ms | **no** |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| commit → signed checkpoint, 8 clients, tenant per client, signer every \
                 1,000 ms | p50 512 ms, p95 968 ms (max 1041 ms; 4,000 of 4,000 operations \
                 covered) | every operation covered within 2 × the interval (2,000 ms) | yes |"
            ),
            "{md}"
        );
        assert!(md.contains("7 ticks kept 48 checkpoints"), "{md}");
        let mut late = fixed();
        if let Some(d) = late.checkpoint_delay.as_mut() {
            d.covered = 3999;
        }
        assert!(
            issue42_goal_rows(&late).contains("operations covered) | every operation covered within 2 × the interval (2,000 ms) | **no** |"),
            "{}",
            issue42_goal_rows(&late)
        );
        let mut none = fixed();
        none.checkpoint_delay = None;
        let md = section(Some(&none), None);
        assert!(
            md.contains("| n/a | bounded (not measured) | n/a |"),
            "{md}"
        );
        assert!(md.contains("The delay was not measured"), "{md}");
    }

    #[test]
    fn the_statement_breakdown_is_a_table_and_its_absence_is_said() {
        let md = section(Some(&fixed()), None);
        assert!(
            md.contains("| `SELECT a \\| b FROM t` | 500 | 3.000 ms | 1.50 s | 75.0% |"),
            "{md}"
        );
        assert!(md.contains("over the four cells at 8 clients: 1,000 statements, 2.0 s"));
        let mut none = fixed();
        none.statements = None;
        let md = section(Some(&none), None);
        assert!(md.contains("Not measured in this run"), "{md}");
    }

    #[test]
    fn cpu_per_operation_is_a_table_beside_pgbench_and_its_absence_prints_nothing() {
        let md = section(Some(&fixed()), None);
        // 1 client: propose one tenant at 100/s costs 1,600 + 400 µs; pgbench
        // 300 + 100 µs a transaction: 400 / 2,000 = 0.2×.
        assert!(
            md.contains("| 1 | 400 µs (300 + 100) | 2,000 µs (1,600 + 400), 0.200× |"),
            "{md}"
        );
        assert!(md.contains("### CPU per operation"), "{md}");
        let mut none = fixed();
        for row in &mut none.rows {
            row.pgbench_cpu = None;
            for c in [
                &mut row.propose_one_tenant,
                &mut row.propose_tenant_per_client,
                &mut row.flow_one_tenant,
                &mut row.flow_tenant_per_client,
            ]
            .into_iter()
            .flatten()
            {
                c.cpu = None;
            }
        }
        let md = section(Some(&none), None);
        assert!(!md.contains("### CPU per operation"), "{md}");
    }

    #[test]
    fn a_skipped_load_phase_says_why() {
        let md = section(None, Some("--db was not given"));
        assert!(md.contains("Not measured: --db was not given"));
    }
}
