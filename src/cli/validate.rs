//! `orch validate FILE...`: every problem in every file, with positions.

use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use super::error::CliError;
use super::output::{Exit, Format, print_diagnostics, summary, write_json};
use crate::pipeline::diagnostic::DiagnosticJson;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Pipeline files to check (default: `pipeline.toml` here, else the
    /// only file in `pipelines/` or `.orch/pipelines/`)
    #[arg(value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Serialize)]
struct Report {
    valid: bool,
    files: Vec<FileReport>,
    diagnostics: Vec<DiagnosticJson>,
    /// Why the state directory is within an agent's reach, for each file
    /// it is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    state_dir: Vec<String>,
}

#[derive(Serialize)]
struct FileReport {
    file: String,
    valid: bool,
    errors: usize,
    warnings: usize,
}

pub(super) fn run(args: &Args, global: &super::GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let ctx = super::config::context(global)?;
    let mut report = Report {
        valid: true,
        files: Vec::new(),
        diagnostics: Vec::new(),
        state_dir: Vec::new(),
    };
    let mut state_dir_errors: Vec<String> = Vec::new();
    let files = if args.files.is_empty() {
        vec![super::discover::pipeline_file(None)?]
    } else {
        args.files.clone()
    };
    for file in &files {
        let name = file.display().to_string();
        let (valid, diags, detail) = match crate::pipeline::load(
            file,
            &crate::agents::checks::Checks::new(&ctx.confinement),
        ) {
            Ok(l) if crate::engine::assemble::state_dir_problem(&l.pipeline, &ctx).is_some() => {
                let problem = crate::engine::assemble::state_dir_problem(&l.pipeline, &ctx)
                    .unwrap_or_default();
                state_dir_errors.push(problem.clone());
                if let Format::Text = args.format {
                    let _ = writeln!(
                        io::stderr(),
                        "error: {problem}\n  = help: keep the default state directory (outside the repository), or set `state_dir` (or `--state-dir`) to a folder outside the workspace"
                    );
                }
                (false, l.warnings, String::new())
            }
            Ok(l) => {
                let invocations = l.pipeline.invocations().count();
                let detail = format!(
                    "{} phase{}, {} invocation{}",
                    l.pipeline.phases.len(),
                    if l.pipeline.phases.len() == 1 {
                        ""
                    } else {
                        "s"
                    },
                    invocations,
                    if invocations == 1 { "" } else { "s" }
                );
                let warnings = l.warnings;
                // The process ends soon; freeing a large model costs more
                // than it gives back (about 7% of `validate` at 1,000 phases).
                std::mem::forget(l.pipeline);
                (true, warnings, detail)
            }
            Err(e) => (false, e.diagnostics, String::new()),
        };
        report.valid &= valid;
        let errors = diags.iter().filter(|d| d.is_error()).count() + state_dir_errors.len();
        match args.format {
            Format::Text => {
                print_diagnostics(&diags, color);
                if valid {
                    let warn = if diags.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", {}",
                            summary(&name, &diags).split(": ").nth(1).unwrap_or("")
                        )
                    };
                    writeln!(io::stdout(), "ok: `{name}` ({detail}{warn})")?;
                } else if diags.iter().any(|d| d.is_error()) {
                    let _ = writeln!(io::stderr(), "error: {}", summary(&name, &diags));
                } else {
                    let _ = writeln!(
                        io::stderr(),
                        "error: `{name}`: the state directory is within an agent's reach"
                    );
                }
            }
            Format::Json => report.diagnostics.extend(diags.iter().map(|d| d.to_json())),
        }
        let warnings = diags.iter().filter(|d| !d.is_error()).count();
        report.files.push(FileReport {
            file: name,
            valid,
            errors,
            warnings,
        });
        report.state_dir.append(&mut state_dir_errors);
    }
    if let Format::Json = args.format {
        write_json(&report)?;
    }
    Ok(if report.valid {
        Exit::Success
    } else {
        Exit::Invalid
    })
}
