//! `harness scenario-format`: writes `docs/scenario-format.md` from the
//! loader's own tables, or checks that the committed file is current.
//!
//! Guarantees: the text is `scenarios::format_doc::render` over the
//! workspace's `scenarios/taxonomy.yaml`, byte for byte; `--check` writes
//! nothing and exits 1 naming the file when it differs (or is missing).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::workspace;

/// Write docs/scenario-format.md from the loader's tables (or check it).
#[derive(Debug, Args)]
pub struct ScenarioFormatArgs {
    /// Check that the file equals what would be written; write nothing.
    #[arg(long)]
    pub check: bool,
    /// The file to write or check (default: docs/scenario-format.md in the workspace).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: ScenarioFormatArgs) -> Result<ExitCode> {
    let root = workspace::root()?;
    let taxonomy_path = root.join("scenarios/taxonomy.yaml");
    let text = std::fs::read_to_string(&taxonomy_path)
        .with_context(|| format!("reading {}", taxonomy_path.display()))?;
    let taxonomy = scenarios::Taxonomy::from_yaml(&text).map_err(|problems| {
        anyhow!(
            "{} does not load: {}",
            taxonomy_path.display(),
            problems.join("; ")
        )
    })?;
    let rendered = scenarios::format_doc::render(&taxonomy);
    let out = args
        .out
        .unwrap_or_else(|| root.join(scenarios::format_doc::PATH));
    if args.check {
        let committed = std::fs::read_to_string(&out).unwrap_or_default();
        if committed == rendered {
            println!("{} is current", out.display());
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "{} differs from the loader's tables; regenerate it with: cargo run -p harness -- scenario-format",
            out.display()
        );
        return Ok(ExitCode::from(1));
    }
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, &rendered).with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(ExitCode::SUCCESS)
}
