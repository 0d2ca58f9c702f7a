//! `orch schema`: the JSON Schema of pipeline files.

use std::io::Write;

use super::error::CliError;
use super::output::{Exit, stdout};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(super) fn run(_args: &Args) -> Result<Exit, CliError> {
    let mut out = stdout();
    out.write_all(crate::pipeline::schema::pipeline_schema().as_bytes())?;
    out.flush()?;
    Ok(Exit::Success)
}
