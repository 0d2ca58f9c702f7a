//! `orch schema`: the JSON Schema of pipeline files.

use std::io::Write;

use super::output::{CmdResult, Exit, stdout};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> CmdResult {
    let mut out = stdout();
    out.write_all(crate::pipeline::schema::pipeline_schema().as_bytes())?;
    out.flush()?;
    Ok(Exit::Success)
}
