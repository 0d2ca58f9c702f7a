//! What every command that reads a pipeline starts with: the settings and
//! the build context, the file (named, or found), and the pipeline,
//! validated for this machine with its warnings printed.

use std::path::Path;

use super::GlobalArgs;
use super::error::CliError;
use super::output::print_diagnostics;
use crate::engine::assemble::Context;
use crate::pipeline::graph::PhaseGraph;
use crate::pipeline::{Invalid, Pipeline};

/// The build context and the valid pipeline `file` names (or the one a
/// search of the current directory finds, see [`super::discover`]). A
/// pipeline with errors is a [`CliError::Pipeline`]; warnings are printed
/// here, on stderr.
pub(super) fn load_pipeline(
    global: &GlobalArgs,
    file: Option<&Path>,
    color: bool,
) -> Result<(Context, Pipeline), CliError> {
    let ctx = super::config::context(global)?;
    let file = super::discover::pipeline_file(file)?;
    let checks = crate::agents::checks::Checks::new(&ctx.confinement);
    match crate::pipeline::load(&file, &checks) {
        Ok(loaded) => {
            print_diagnostics(&loaded.warnings, color);
            Ok((ctx, loaded.pipeline))
        }
        Err(Invalid { diagnostics }) => Err(CliError::Pipeline {
            file: file.display().to_string(),
            diagnostics,
        }),
    }
}

/// The phases' DAG. Validation reports a cycle, so a valid pipeline has
/// none; this is the usage error if one slipped through.
pub(super) fn phase_graph(pipeline: &Pipeline) -> Result<PhaseGraph, CliError> {
    PhaseGraph::build(pipeline).map_err(|_| CliError::usage("the pipeline has a dependency cycle"))
}
