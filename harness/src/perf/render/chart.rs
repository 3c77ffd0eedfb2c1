//! `performance.svg`: the load phase's throughput against clients, with the
//! throughput goals the report states.
//!
//! Guarantees: a pure function of the [`Load`] struct. The chart is drawn by
//! `plotters` with its SVG backend only: text is written as SVG `<text>` and
//! sized by plotters' built-in estimate, so no system font (and no
//! fontconfig) is needed. The x axis is labelled at the measured client
//! counts and nowhere else, each once; each goal stated as a ratio to
//! pgbench at [`GOAL_CLIENTS`] clients is a dashed line in its series'
//! colour at that ratio of pgbench's figure there; the legend stands in a
//! panel of its own beside the plot, so it covers no line.

use plotters::prelude::*;

use super::load::{
    FLOW_TENANT_PER_CLIENT_GOAL, GOAL_CLIENTS, PROPOSE_ONE_TENANT_GOAL,
    PROPOSE_TENANT_PER_CLIENT_GOAL, per_sec,
};
use crate::perf::load::{Load, LoadRow};
use crate::perf::stats::thousands;

/// A line of the chart: its name, its figure in a row, its colour, and its
/// goal as a ratio to pgbench at [`GOAL_CLIENTS`] clients, if it has one.
type Series = (
    &'static str,
    fn(&LoadRow) -> Option<f64>,
    RGBColor,
    Option<f64>,
);

const SERIES: [Series; 5] = [
    ("pgbench TPS", |r| r.pgbench_tps, BLACK, None),
    (
        "propose, one tenant",
        |r| per_sec(&r.propose_one_tenant),
        RGBColor(214, 39, 40),
        Some(PROPOSE_ONE_TENANT_GOAL),
    ),
    (
        "propose, tenant per client",
        |r| per_sec(&r.propose_tenant_per_client),
        RGBColor(31, 119, 180),
        Some(PROPOSE_TENANT_PER_CLIENT_GOAL),
    ),
    (
        "flow, one tenant",
        |r| per_sec(&r.flow_one_tenant),
        RGBColor(255, 127, 14),
        None,
    ),
    (
        "flow, tenant per client",
        |r| per_sec(&r.flow_tenant_per_client),
        RGBColor(44, 160, 44),
        Some(FLOW_TENANT_PER_CLIENT_GOAL),
    ),
];

/// Width of the whole picture and of the legend's panel, in pixels.
const WIDTH: u32 = 960;
const LEGEND_WIDTH: u32 = 290;
const HEIGHT: u32 = 520;

/// The goals that can be drawn: (series name, ratio, colour, operations per
/// second), pgbench's figure at [`GOAL_CLIENTS`] times the ratio.
fn goals(load: &Load) -> Vec<(&'static str, f64, RGBColor, f64)> {
    let Some(pgbench) = load
        .rows
        .iter()
        .find(|r| r.clients == GOAL_CLIENTS)
        .and_then(|r| r.pgbench_tps)
        .filter(|t| *t > 0.0)
    else {
        return Vec::new();
    };
    SERIES
        .iter()
        .filter_map(|&(name, _, color, goal)| goal.map(|g| (name, g, color, g * pgbench)))
        .collect()
}

/// `performance.svg`: throughput against clients (both axes logarithmic)
/// for pgbench and the gate's four cells, and the goals.
pub fn svg(load: &Load) -> Result<String, String> {
    let goals = goals(load);
    let values: Vec<f64> = load
        .rows
        .iter()
        .flat_map(|r| SERIES.iter().filter_map(move |(_, f, _, _)| f(r)))
        .chain(goals.iter().map(|g| g.3))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let mut counts: Vec<f64> = load.rows.iter().map(|r| r.clients.max(1) as f64).collect();
    counts.sort_by(f64::total_cmp);
    counts.dedup();
    let first = counts.first().copied().unwrap_or(1.0);
    let last = counts.last().copied().unwrap_or(2.0).max(first * 2.0);
    // A little room beyond the first and the last count, so that their
    // points and labels stand inside the frame.
    let x_range = (first / 1.15..last * 1.15)
        .log_scale()
        .with_key_points(counts.clone());
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let root = root
            .titled(
                "spendgate through Postgres vs pgbench (per second, log scales)",
                ("sans-serif", 20),
            )
            .map_err(e)?;
        let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_range, (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("clients")
            .y_desc("operations per second")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for &(_, f, color, _) in &SERIES {
            let points: Vec<(f64, f64)> = load
                .rows
                .iter()
                .filter_map(|r| f(r).filter(|v| *v > 0.0).map(|v| (r.clients as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )
                .map_err(|e| e.to_string())?;
        }
        let (x_lo, x_hi) = (first / 1.15, last * 1.15);
        for &(_, _, color, value) in &goals {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_lo, value), (x_hi, value)],
                    8,
                    5,
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(std::iter::once(TriangleMarker::new(
                    (GOAL_CLIENTS as f64, value),
                    6,
                    color.filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        draw_legend(&legend, &goals).map_err(e)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The legend, in its own panel: one entry per series, then one per goal.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    goals: &[(&'static str, f64, RGBColor, f64)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let text = ("sans-serif", 14).into_font().color(&BLACK);
    let small = ("sans-serif", 12).into_font().color(&BLACK);
    let (x, mut y) = (10, 40);
    for &(name, _, color, _) in &SERIES {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 28, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&Circle::new((x + 14, y), 3, color.filled()))?;
        area.draw(&Text::new(name, (x + 36, y - 8), text.clone()))?;
        y += 24;
    }
    if goals.is_empty() {
        return Ok(());
    }
    y += 12;
    area.draw(&Text::new(
        format!("goals, at {GOAL_CLIENTS} clients (dashed, ▲):"),
        (x, y - 8),
        text.clone(),
    ))?;
    y += 24;
    for &(name, ratio, color, value) in goals {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 8, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&PathElement::new(
            vec![(x + 13, y), (x + 21, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&Text::new(name, (x + 36, y - 8), text.clone()))?;
        area.draw(&Text::new(
            format!("≥ {ratio}× pgbench = {}/s", thousands(value.round() as u64)),
            (x + 36, y + 8),
            small.clone(),
        ))?;
        y += 40;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::render::load::tests::fixed;

    /// Every `<text>` of the SVG: (x, y, anchor, content).
    fn texts(svg: &str) -> Vec<(f64, f64, String, String)> {
        let attr = |tag: &str, name: &str| -> Option<String> {
            let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = tag[start..].find('"')? + start;
            Some(tag[start..end].to_string())
        };
        svg.split("<text")
            .skip(1)
            .filter_map(|rest| {
                let (tag, body) = rest.split_once('>')?;
                let content = body.split("</text>").next()?.trim().to_string();
                let x = attr(tag, "x")?.parse().ok()?;
                let y = attr(tag, "y")?.parse().ok()?;
                Some((x, y, attr(tag, "text-anchor").unwrap_or_default(), content))
            })
            .collect()
    }

    /// The `cx` of every `<circle>` (the measured points and the legend's).
    fn circle_xs(svg: &str) -> Vec<f64> {
        svg.split("<circle")
            .skip(1)
            .filter_map(|rest| {
                let start = rest.find(" cx=\"")? + 5;
                let end = rest[start..].find('"')? + start;
                rest[start..end].parse().ok()
            })
            .collect()
    }

    #[test]
    fn the_chart_is_svg_with_every_series_named() -> Result<(), String> {
        let svg = svg(&fixed())?;
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        for name in [
            "pgbench TPS",
            "propose, one tenant",
            "flow, tenant per client",
        ] {
            assert!(svg.contains(name), "{name} missing");
        }
        Ok(())
    }

    #[test]
    fn the_x_axis_labels_each_client_count_once_and_nothing_else() -> Result<(), String> {
        let mut load = fixed();
        let template = load.rows[0].clone();
        load.rows = [1, 2, 4, 8, 16]
            .into_iter()
            .map(|clients| LoadRow {
                clients,
                ..template.clone()
            })
            .collect();
        let svg = svg(&load)?;
        let all = texts(&svg);
        // The x axis's labels: centred numbers on the lowest line of numbers.
        let numbers: Vec<&(f64, f64, String, String)> = all
            .iter()
            .filter(|(_, _, anchor, c)| anchor == "middle" && c.parse::<f64>().is_ok())
            .collect();
        let axis_y = numbers.iter().map(|t| t.1).fold(f64::MIN, f64::max);
        let labels: Vec<&str> = numbers
            .iter()
            .filter(|t| t.1 == axis_y)
            .map(|t| t.3.as_str())
            .collect();
        assert_eq!(labels, ["1", "2", "4", "8", "16"], "{all:?}");
        Ok(())
    }

    #[test]
    fn the_goals_are_drawn_and_the_legend_stands_right_of_every_point() -> Result<(), String> {
        let load = fixed();
        let svg = svg(&load)?;
        let all = texts(&svg);
        // pgbench does 4,000/s at 8 clients in the fixture.
        for goal in [
            "≥ 0.1× pgbench = 400/s",
            "≥ 0.5× pgbench = 2,000/s",
            "≥ 0.15× pgbench = 600/s",
        ] {
            assert!(all.iter().any(|t| t.3 == goal), "{goal} missing: {all:?}");
        }
        // A dashed line is drawn as short segments in its series' colour:
        // the blue of `propose, tenant per client`.
        let dashes = svg
            .split("<polyline")
            .skip(1)
            .filter(|p| p.contains("stroke=\"#1F77B4\""))
            .count();
        assert!(dashes > 10, "{dashes} blue segments: no dashed goal line");
        let rightmost_point = circle_xs(&svg)
            .into_iter()
            .filter(|x| *x < f64::from(WIDTH - LEGEND_WIDTH))
            .fold(f64::MIN, f64::max);
        let legend_left = all
            .iter()
            .filter(|t| t.3 == "pgbench TPS" || t.3.starts_with('≥'))
            .map(|t| t.0)
            .fold(f64::MAX, f64::min);
        assert!(
            legend_left > rightmost_point + 10.0,
            "the legend starts at x = {legend_left}, a point stands at x = {rightmost_point}"
        );
        Ok(())
    }
}
