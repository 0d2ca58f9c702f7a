//! `orch doctor`: which agent CLIs are installed, their versions, and
//! whether each is a version the adapters were verified against.
//! `orch doctor --probe FILE`: run each invocation's offline argument probe
//! and report, per (phase, agent), accepted or rejected with the CLI's own
//! message.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::GlobalArgs;
use super::error::CliError;
use super::load::load_pipeline;
use super::output::{Exit, Format, stdout, write_json};
use crate::agents::probe::{self, Installed, ProbeResult};
use crate::engine::assemble;
use crate::model::AgentKind;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Run the offline argument probe of every invocation in this pipeline
    #[arg(long, value_name = "FILE", conflicts_with = "capabilities")]
    pub(crate) probe: Option<PathBuf>,
    /// Print the enforcement capability table (Markdown) and exit
    #[arg(long)]
    pub(crate) capabilities: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Serialize)]
struct DoctorJson<'a> {
    /// Whether orch can confine agents here (and the Landlock ABI).
    confinement: &'a crate::confine::Availability,
    clis: &'a [Installed],
}

#[derive(Serialize)]
struct ProbeRow {
    phase: String,
    agent: String,
    kind: AgentKind,
    #[serde(flatten)]
    result: ProbeResult,
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    if args.capabilities {
        let mut out = stdout();
        out.write_all(crate::agents::capability::markdown().as_bytes())?;
        out.flush()?;
        return Ok(Exit::Success);
    }
    match &args.probe {
        None => installed(args, &super::config::context(global)?),
        Some(file) => {
            let (ctx, pipeline) = load_pipeline(global, Some(file), color)?;
            probes(args, &pipeline, &ctx)
        }
    }
}

fn installed(args: &Args, ctx: &assemble::Context) -> Result<Exit, CliError> {
    let rows: Vec<Installed> = AgentKind::ALL
        .iter()
        .copied()
        .filter(|k| k.is_llm())
        .map(|k| probe::installed(k, &assemble::kind_program(k, &ctx.settings)))
        .collect();
    match args.format {
        Format::Json => write_json(&DoctorJson {
            confinement: &ctx.confinement,
            clis: &rows,
        })?,
        Format::Text => {
            let mut out = stdout();
            let consequence = if ctx.confinement.is_available() {
                "every agent's permission is held by the OS"
            } else {
                "a permission only the OS could hold is refused under strict enforcement"
            };
            writeln!(
                out,
                "{:<12} {}: {consequence}",
                "confinement",
                ctx.confinement.describe()
            )?;
            for r in &rows {
                let status = match (&r.version, &r.problem) {
                    (Some(v), _) if r.verified => format!("{v} (verified)"),
                    (Some(v), _) => format!(
                        "{v} (not verified; orch was verified against {})",
                        r.verified_version.unwrap_or("?")
                    ),
                    (None, Some(p)) => format!("missing: {p}"),
                    (None, None) => "unknown".into(),
                };
                let at = r
                    .path
                    .as_ref()
                    .map_or(String::new(), |p| format!("  {}", p.display()));
                writeln!(out, "{:<12} {status}{at}", r.kind.as_str())?;
            }
            out.flush()?;
        }
    }
    Ok(Exit::Success)
}

fn probes(
    args: &Args,
    p: &crate::pipeline::Pipeline,
    ctx: &assemble::Context,
) -> Result<Exit, CliError> {
    let mut rows = Vec::new();
    for (phase, agent) in p.invocations() {
        if !agent.kind.is_llm() {
            continue;
        }
        // Probed as it would run: in a fresh directory of its own, confined.
        let dir = ctx.attempt_dir(&phase.name, &agent.name);
        let inv = assemble::invocation(p, phase, agent, ctx, &assemble::Slot::preview(dir.path()));
        let result = probe::probe(agent.kind, &inv);
        rows.push(ProbeRow {
            phase: phase.name.clone(),
            agent: agent.name.clone(),
            kind: agent.kind,
            result,
        });
    }
    let all = rows.iter().all(|r| r.result.accepted);
    match args.format {
        Format::Json => write_json(&rows)?,
        Format::Text => {
            let mut out = stdout();
            for r in &rows {
                let verdict = if r.result.accepted {
                    "accepted".to_string()
                } else {
                    format!(
                        "REJECTED: {}",
                        r.result.message.as_deref().unwrap_or("no reason given")
                    )
                };
                writeln!(
                    out,
                    "{} / {} ({}): {verdict}  [{} ms]",
                    r.phase, r.agent, r.kind, r.result.elapsed_ms
                )?;
            }
            out.flush()?;
        }
    }
    Ok(if all { Exit::Success } else { Exit::Failed })
}
