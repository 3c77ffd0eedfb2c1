//! `performance.svg`: the load phase's throughput against clients.
//!
//! Guarantees: a pure function of the [`Load`] struct. The chart is drawn by
//! `plotters` with its SVG backend only: text is written as SVG `<text>` and
//! sized by plotters' built-in estimate, so no system font (and no
//! fontconfig) is needed.

use plotters::prelude::*;

use super::load::per_sec;
use crate::perf::load::{Load, LoadRow};

/// A line of the chart: its name, its figure in a row, its colour.
type Series = (&'static str, fn(&LoadRow) -> Option<f64>, RGBColor);

/// `performance.svg`: throughput against clients (both axes logarithmic)
/// for pgbench and the gate's four cells.
pub fn svg(load: &Load) -> Result<String, String> {
    let series: [Series; 5] = [
        ("pgbench TPS", |r| r.pgbench_tps, BLACK),
        (
            "propose, one tenant",
            |r| per_sec(&r.propose_one_tenant),
            RGBColor(214, 39, 40),
        ),
        (
            "propose, tenant per client",
            |r| per_sec(&r.propose_tenant_per_client),
            RGBColor(31, 119, 180),
        ),
        (
            "flow, one tenant",
            |r| per_sec(&r.flow_one_tenant),
            RGBColor(255, 127, 14),
        ),
        (
            "flow, tenant per client",
            |r| per_sec(&r.flow_tenant_per_client),
            RGBColor(44, 160, 44),
        ),
    ];
    let values: Vec<f64> = load
        .rows
        .iter()
        .flat_map(|r| series.iter().filter_map(move |(_, f, _)| f(r)))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let max_clients = load
        .rows
        .iter()
        .map(|r| r.clients)
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (800, 500)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "spendgate through Postgres vs pgbench (per second, log scales)",
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((1f64..max_clients).log_scale(), (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("clients")
            .y_desc("operations per second")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (name, f, color) in series {
            let points: Vec<(f64, f64)> = load
                .rows
                .iter()
                .filter_map(|r| f(r).filter(|v| *v > 0.0).map(|v| (r.clients as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::render::load::tests::fixed;

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
}
