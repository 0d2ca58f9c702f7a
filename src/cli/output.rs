//! Shared output plumbing for subcommands: exit codes, diagnostics on
//! stderr, results on stdout, quiet handling of a closed pipe.

use crate::pipeline::Diagnostic;
use std::io::{self, IsTerminal, Write};

use super::Color;
use super::error::CliError;

/// How a command ended.
#[derive(Debug)]
pub(crate) enum Exit {
    Success,
    /// A required phase failed.
    Failed,
    /// Invalid input or usage.
    Invalid,
    Interrupted,
}

impl Exit {
    pub(crate) fn code(&self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Invalid => 2,
            Exit::Interrupted => 130,
        }
    }
}

pub(super) fn use_color(c: Color) -> bool {
    match c {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

/// Most diagnostics printed for one file; the rest are counted.
const MAX_SHOWN: usize = 200;

/// Render diagnostics to stderr (best effort: a closed stderr never
/// changes the exit code a command decided).
pub(super) fn print_diagnostics(diags: &[Diagnostic], color: bool) {
    let _ = write_diagnostics(diags, color);
    if crate::report::github::active() && !diags.is_empty() {
        let workspace = std::env::var_os("GITHUB_WORKSPACE").map(std::path::PathBuf::from);
        let mut err = io::stderr().lock();
        for line in crate::report::github::annotations(diags, workspace.as_deref()) {
            let _ = writeln!(err, "{line}");
        }
    }
}

fn write_diagnostics(diags: &[Diagnostic], color: bool) -> io::Result<()> {
    let stderr = io::stderr();
    let mut err = io::BufWriter::new(stderr.lock());
    let width = terminal_width();
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme)
        .with_width(width)
        .with_links(false);
    for d in diags.iter().take(MAX_SHOWN) {
        let mut s = String::new();
        let _ = handler.render_report(&mut s, d);
        writeln!(err, "{s}")?;
    }
    if diags.len() > MAX_SHOWN {
        writeln!(err, "... and {} more", diags.len() - MAX_SHOWN)?;
    }
    err.flush()
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
}

pub(super) fn summary(file: &str, diags: &[Diagnostic]) -> String {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let mut parts = Vec::new();
    if errors > 0 {
        parts.push(format!(
            "{errors} error{}",
            if errors == 1 { "" } else { "s" }
        ));
    }
    if warnings > 0 {
        parts.push(format!(
            "{warnings} warning{}",
            if warnings == 1 { "" } else { "s" }
        ));
    }
    format!("`{file}`: {}", parts.join(", "))
}

pub(super) fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

pub(super) fn write_json(value: &impl serde::Serialize) -> io::Result<()> {
    let mut out = stdout();
    if crate::report::github::active() {
        // No `##[` the runner would read as a command (the same JSON).
        let json = serde_json::to_vec_pretty(value)?;
        out.write_all(&crate::report::github::inert_json(json))?;
    } else {
        serde_json::to_writer_pretty(&mut out, value)?;
    }
    writeln!(out)?;
    out.flush()
}

/// `value` as compact JSON on `out` (as [`write_json`] for GitHub).
pub(super) fn write_json_to(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    if crate::report::github::active() {
        let json = serde_json::to_vec(value)?;
        out.write_all(&crate::report::github::inert_json(json))
    } else {
        serde_json::to_writer(out, value).map_err(io::Error::from)
    }
}

/// The index of a phase named on the command line, or a usage error with a
/// suggestion.
pub(super) fn phase_index(
    pipeline: &crate::pipeline::Pipeline,
    name: &str,
) -> Result<usize, CliError> {
    pipeline
        .phases
        .iter()
        .position(|p| p.name == name)
        .ok_or_else(|| {
            let hint = crate::model::suggest(name, pipeline.phases.iter().map(|p| p.name.as_str()));
            CliError::usage(match hint {
                Some(h) => format!(
                    "no phase named `{name}` in `{}`; did you mean `{h}`?",
                    pipeline.path.display()
                ),
                None => format!("no phase named `{name}` in `{}`", pipeline.path.display()),
            })
        })
}

/// The phases `--phase P...` or `--from P` select (all when neither is
/// given), in declaration order; an unknown name is a usage error.
pub(super) fn select_phases(
    pipeline: &crate::pipeline::Pipeline,
    graph: &crate::pipeline::graph::PhaseGraph,
    phases: &[String],
    from: Option<&str>,
) -> Result<Vec<usize>, CliError> {
    if let Some(from) = from {
        return Ok(graph.downstream(&[phase_index(pipeline, from)?]));
    }
    if phases.is_empty() {
        return Ok((0..pipeline.phases.len()).collect());
    }
    let mut v = phases
        .iter()
        .map(|name| phase_index(pipeline, name))
        .collect::<Result<Vec<_>, _>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// `--format` of the commands that print text or JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    #[default]
    Text,
    Json,
}
