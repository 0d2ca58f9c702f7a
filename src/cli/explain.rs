//! `orch explain FILE`: for every (phase, agent), the resolved ToolSet and
//! where each field came from.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use serde::Serialize;

use super::output::{CmdResult, Exit, load_valid, phase_index, stdout, usage_error, write_json};
use crate::pipeline::diagnostic::suggest;
use crate::toolset::{Origin, Resolved};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pipeline file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Only this phase
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Only this agent
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Serialize)]
struct ExplainJson<'a> {
    pipeline: &'a str,
    invocations: Vec<InvocationJson<'a>>,
}

#[derive(Serialize)]
struct InvocationJson<'a> {
    phase: &'a str,
    agent: &'a str,
    kind: &'a str,
    mode: &'a str,
    #[serde(flatten)]
    resolved: Resolved,
}

pub fn run(args: &Args, color: bool) -> CmdResult {
    let loaded = match load_valid(&args.file, color)? {
        Ok(l) => l,
        Err(exit) => return Ok(exit),
    };
    let p = &loaded.pipeline;
    if let Some(name) = &args.phase
        && let Err(m) = phase_index(p, name)
    {
        return usage_error(&m, None);
    }
    if let Some(agent) = &args.agent {
        let in_scope = |a: &String| {
            args.phase
                .as_ref()
                .is_none_or(|ph| p.phase(ph).is_some_and(|ph| ph.agents.contains(a)))
        };
        if !p
            .agents
            .iter()
            .any(|a| a.name == *agent && in_scope(&a.name))
        {
            let scope: Vec<&str> = p
                .agents
                .iter()
                .filter(|a| in_scope(&a.name))
                .map(|a| a.name.as_str())
                .collect();
            let hint = suggest(agent, scope.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .or_else(|| Some(format!("agents here: {}", scope.join(", "))));
            let place = args
                .phase
                .as_ref()
                .map_or(String::new(), |ph| format!(" in phase `{ph}`"));
            return usage_error(&format!("no agent `{agent}`{place}"), hint);
        }
    }
    let invocations: Vec<InvocationJson> = p
        .invocations()
        .filter(|(ph, a)| {
            args.phase.as_ref().is_none_or(|n| *n == ph.name)
                && args.agent.as_ref().is_none_or(|n| *n == a.name)
        })
        .map(|(ph, a)| InvocationJson {
            phase: &ph.name,
            agent: &a.name,
            kind: a.kind.as_str(),
            mode: ph.mode.as_str(),
            resolved: p.resolve(ph, a),
        })
        .collect();
    match args.format {
        Format::Json => write_json(&ExplainJson {
            pipeline: &p.name,
            invocations,
        })?,
        Format::Text => text(&invocations)?,
    }
    Ok(Exit::Success)
}

fn text(invocations: &[InvocationJson]) -> std::io::Result<()> {
    let mut out = stdout();
    for (n, inv) in invocations.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{} / {}  (kind {}, mode {})",
            inv.phase, inv.agent, inv.kind, inv.mode
        )?;
        let ts = &inv.resolved.toolset;
        let pr = &inv.resolved.provenance;
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.join(", ")
            }
        };
        let rows = [
            (
                "internal",
                list(ts.internal.iter().map(|t| t.to_string()).collect()),
                &pr.internal,
            ),
            (
                "mcp",
                list(ts.mcp.iter().map(|t| t.to_string()).collect()),
                &pr.mcp,
            ),
            ("permission", ts.permission.to_string(), &pr.permission),
            ("max_turns", ts.max_turns.to_string(), &pr.max_turns),
        ];
        let width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        for (field, value, origin) in rows {
            writeln!(
                out,
                "  {field:<10}  {value:<width$}  {}",
                origin_text(origin)
            )?;
        }
    }
    out.flush()
}

fn origin_text(o: &Origin) -> String {
    match &o.at {
        Some(at) => format!("{:<11} {at}", o.layer.as_str()),
        None => o.layer.as_str().to_string(),
    }
}
