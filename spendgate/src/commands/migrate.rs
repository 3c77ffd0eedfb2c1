//! `spendgate migrate`: the schema, applied as the owner role.

use std::process::ExitCode;

use crate::config::Config;
use crate::connect;
use crate::error::Failure;

pub async fn run(config: &Config) -> Result<ExitCode, Failure> {
    let applied = connect::migrate(config).await?;
    match applied.as_slice() {
        [] => println!("the schema is current: nothing to apply"),
        [one] => println!("applied 1 migration ({one})"),
        many => println!(
            "applied {} migrations ({} to {})",
            many.len(),
            many[0],
            many[many.len() - 1]
        ),
    }
    Ok(ExitCode::SUCCESS)
}
