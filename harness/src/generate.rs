//! `harness generate`: writes a seeded, generated corpus.
//!
//! Guarantees: the same seed and count give the same bytes (the generator
//! uses rand_chacha and a deterministic serializer); each scenario's
//! expectation comes from the spec-derived oracle in `scenarios::oracle`,
//! never from the gate, so running the output through `harness bench` is a
//! differential test of the gate.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

/// Generate scenarios from parameterised families into DIR/generated.yaml.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The seed; the same seed and count always give the same file.
    #[arg(long)]
    pub seed: u64,
    /// How many scenarios.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// The folder to write generated.yaml into (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: GenerateArgs) -> Result<ExitCode> {
    let scenarios = scenarios::generate::generate(args.seed, args.count);
    let yaml = scenarios::generate::to_yaml(&scenarios);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let path = args.out.join("generated.yaml");
    std::fs::write(&path, &yaml).with_context(|| format!("writing {}", path.display()))?;
    println!(
        "wrote {} scenarios (seed {}) to {}; run them with: harness bench --corpus {}",
        scenarios.len(),
        args.seed,
        path.display(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
