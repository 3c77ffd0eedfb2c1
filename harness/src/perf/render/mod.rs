//! The report of one `harness perf` run, rendered and written:
//! `performance.md` ([`markdown`], with the sections of [`load`] and
//! [`http`]), `performance.json` (the model, serialized), `performance.svg`
//! ([`chart`]), `performance-history.md` ([`history`]) and the headline on
//! stdout ([`headline`]).
//!
//! Guarantees: the renderers are pure functions of the model; only the
//! `write_*` functions here touch files, and each names the file it could
//! not write.

pub mod chart;
pub mod headline;
pub mod history;
pub mod http;
pub mod load;
pub mod markdown;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::history::History;
use super::load::Load;
use super::model::Report;

/// Writes `performance.md` into `out`; returns its path.
pub fn write_markdown(report: &Report, out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let md = out.join("performance.md");
    std::fs::write(&md, markdown::render_markdown(report))
        .with_context(|| format!("could not write {}", md.display()))?;
    Ok(md)
}

/// Writes `performance.md` and `performance.json` into `out`; returns their paths.
pub fn write_report(report: &Report, out: &Path) -> Result<(PathBuf, PathBuf)> {
    let md = write_markdown(report, out)?;
    let json = out.join("performance.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("could not write {}", json.display()))?;
    Ok((md, json))
}

/// Writes one phase's files of its own, `STEM.md` (its section, then the
/// notes as a list) and `STEM.json`; returns their paths.
pub fn write_phase(
    out: &Path,
    stem: &str,
    section: String,
    notes: &[String],
    figures: &impl Serialize,
) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let mut md = section;
    for n in notes {
        md.push_str(&format!("- {n}\n"));
    }
    let path = out.join(format!("{stem}.md"));
    std::fs::write(&path, md).with_context(|| format!("could not write {}", path.display()))?;
    let json = out.join(format!("{stem}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(figures)? + "\n")
        .with_context(|| format!("could not write {}", json.display()))?;
    Ok((path, json))
}

/// Writes `performance-history.md` into `out`; returns its path.
pub fn write_history(history: &History, out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let page = out.join("performance-history.md");
    std::fs::write(&page, history::markdown(history))
        .with_context(|| format!("could not write {}", page.display()))?;
    Ok(page)
}

/// Draws and writes `performance.svg` into `out`.
pub fn write_chart(load: &Load, out: &Path) -> Result<()> {
    let svg = out.join("performance.svg");
    let drawn = chart::svg(load).map_err(|e| anyhow::anyhow!("drawing the chart: {e}"))?;
    std::fs::write(&svg, drawn).with_context(|| format!("could not write {}", svg.display()))?;
    println!("chart: {}", svg.display());
    Ok(())
}
