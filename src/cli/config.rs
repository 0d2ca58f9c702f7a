//! `orch config`: the effective settings and where each value came from.

use std::io::Write;

use serde::Serialize;

use super::GlobalArgs;
use super::error::CliError;
use super::output::{Exit, Format, stdout, write_json};
use crate::model::AgentKind;
use crate::settings::{self, BinaryOverride, Overrides, Sources};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Serialize)]
struct Row {
    key: String,
    value: String,
    source: String,
}

/// The command-line layer of the settings.
pub(super) fn overrides(global: &GlobalArgs) -> Result<Overrides, String> {
    let mut o = Overrides {
        state_dir: global.state_dir.clone(),
        max_parallel: global.max_parallel,
        ..Default::default()
    };
    for spec in &global.agent_binaries {
        let (kind, path) = spec
            .split_once('=')
            .ok_or_else(|| format!("`--agent-binary {spec}` must be KIND=PATH"))?;
        let kind = AgentKind::parse(kind)
            .filter(|k| k.is_llm())
            .ok_or_else(|| format!("unknown agent kind `{kind}` in `--agent-binary`"))?;
        o.agents.insert(
            kind,
            BinaryOverride {
                binary: path.to_string(),
            },
        );
    }
    Ok(o)
}

/// The build context for commands that make invocations: the layered
/// settings and the working directory.
pub(super) fn context(global: &GlobalArgs) -> Result<crate::engine::assemble::Context, CliError> {
    let o = overrides(global).map_err(CliError::usage)?;
    let l = settings::load(&Sources::discover(), &o)?;
    let workdir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    Ok(crate::engine::assemble::Context::new(l.settings, workdir))
}

pub(super) fn run(args: &Args, global: &GlobalArgs) -> Result<Exit, CliError> {
    let o = overrides(global).map_err(|m| {
        CliError::usage(m).with_hint("kinds: claude, codex, gemini, opencode, copilot")
    })?;
    let layered = settings::load(&Sources::discover(), &o)?;
    let mut rows: Vec<Row> = layered
        .explain()
        .into_iter()
        .map(|(key, value, source)| Row { key, value, source })
        .collect();
    if layered.settings.state_dir.is_none() {
        // The repository's own state directory, outside it.
        let workdir = std::env::current_dir().unwrap_or_else(|_| ".".into());
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .and_then(|h| std::fs::canonicalize(h).ok());
        rows.insert(
            0,
            Row {
                key: "state_dir".into(),
                value: crate::engine::assemble::default_state_dir(&workdir, home.as_deref())
                    .display()
                    .to_string(),
                source: "default (this repository's, outside it)".into(),
            },
        );
    }
    match args.format {
        Format::Json => write_json(&rows)?,
        Format::Text => {
            let mut out = stdout();
            let kw = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
            let vw = rows.iter().map(|r| r.value.len()).max().unwrap_or(0);
            for r in &rows {
                writeln!(out, "{:<kw$}  {:<vw$}  # {}", r.key, r.value, r.source)?;
            }
            out.flush()?;
        }
    }
    Ok(Exit::Success)
}
