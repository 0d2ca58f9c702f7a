//! `orch plan FILE`: the stages and dependency edges of a pipeline.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use serde::Serialize;

use super::GlobalArgs;
use super::error::CliError;
use super::load::{load_pipeline, phase_graph};
use super::output::{Exit, select_phases, stdout, write_json};
use crate::pipeline::Pipeline;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
    Mermaid,
    Dot,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: `pipeline.toml` here, else the only
    /// file in `pipelines/` or `.orch/pipelines/`)
    #[arg(value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Only these phases (repeatable)
    #[arg(long = "phase", value_name = "PHASE", conflicts_with = "from")]
    pub(crate) phases: Vec<String>,
    /// This phase and everything downstream of it
    #[arg(long, value_name = "PHASE")]
    pub(crate) from: Option<String>,
}

#[derive(Serialize)]
struct PlanJson<'a> {
    pipeline: &'a str,
    stages: Vec<Vec<&'a str>>,
    phases: Vec<PhaseJson<'a>>,
    edges: Vec<EdgeJson<'a>>,
}

#[derive(Serialize)]
struct PhaseJson<'a> {
    name: &'a str,
    stage: usize,
    mode: &'a str,
    agents: &'a [String],
    parallel: bool,
    required: bool,
    depends_on: &'a [String],
}

#[derive(Serialize)]
struct EdgeJson<'a> {
    from: &'a str,
    to: &'a str,
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let (_, p) = load_pipeline(global, args.file.as_deref(), color)?;
    let graph = phase_graph(&p)?;
    let selected = select_phases(&p, &graph, &args.phases, args.from.as_deref())?;
    let stages = graph.stages_of(&selected);
    let mut keep = vec![false; p.phases.len()];
    selected.iter().for_each(|&i| keep[i] = true);
    let edges: Vec<(usize, usize)> = graph
        .edges()
        .into_iter()
        .filter(|&(a, b)| keep[a] && keep[b])
        .collect();
    match args.format {
        Format::Json => write_json(&json(&p, &stages, &edges))?,
        Format::Text => text(&p, &stages)?,
        Format::Mermaid => mermaid(&p, &stages, &edges)?,
        Format::Dot => dot(&p, &stages, &edges)?,
    }
    Ok(Exit::Success)
}

fn json<'a>(p: &'a Pipeline, stages: &[Vec<usize>], edges: &[(usize, usize)]) -> PlanJson<'a> {
    let mut phases = Vec::new();
    for (s, stage) in stages.iter().enumerate() {
        for &i in stage {
            let ph = &p.phases[i];
            phases.push(PhaseJson {
                name: &ph.name,
                stage: s + 1,
                mode: ph.mode.as_str(),
                agents: &ph.agents,
                parallel: ph.parallel,
                required: ph.required,
                depends_on: &ph.depends_on,
            });
        }
    }
    PlanJson {
        pipeline: &p.name,
        stages: stages
            .iter()
            .map(|s| s.iter().map(|&i| p.phases[i].name.as_str()).collect())
            .collect(),
        phases,
        edges: edges
            .iter()
            .map(|&(a, b)| EdgeJson {
                from: &p.phases[a].name,
                to: &p.phases[b].name,
            })
            .collect(),
    }
}

fn text(p: &Pipeline, stages: &[Vec<usize>]) -> std::io::Result<()> {
    let mut out = stdout();
    let count: usize = stages.iter().map(Vec::len).sum();
    writeln!(
        out,
        "pipeline `{}`: {count} phase{} in {} stage{}",
        p.name,
        if count == 1 { "" } else { "s" },
        stages.len(),
        if stages.len() == 1 { "" } else { "s" }
    )?;
    let width = stages
        .iter()
        .flatten()
        .map(|&i| p.phases[i].name.len())
        .max()
        .unwrap_or(0);
    for (s, stage) in stages.iter().enumerate() {
        writeln!(out, "\nstage {}", s + 1)?;
        for &i in stage {
            let ph = &p.phases[i];
            let mut notes = vec![ph.mode.to_string()];
            if ph.parallel && ph.agents.len() > 1 {
                notes.push("parallel".into());
            }
            if !ph.required {
                notes.push("optional".into());
            }
            write!(
                out,
                "  {:width$}  {} ({})",
                ph.name,
                ph.agents.join(", "),
                notes.join(", ")
            )?;
            if !ph.depends_on.is_empty() {
                write!(out, "  after {}", ph.depends_on.join(", "))?;
            }
            writeln!(out)?;
        }
    }
    out.flush()
}

fn mermaid(p: &Pipeline, stages: &[Vec<usize>], edges: &[(usize, usize)]) -> std::io::Result<()> {
    let mut out = stdout();
    writeln!(out, "flowchart TD")?;
    for (s, stage) in stages.iter().enumerate() {
        writeln!(out, "  subgraph stage{}[\"stage {}\"]", s + 1, s + 1)?;
        for &i in stage {
            let ph = &p.phases[i];
            writeln!(
                out,
                "    p{i}[\"{}<br/>{} ({})\"]",
                escape_mermaid(&ph.name),
                escape_mermaid(&ph.agents.join(", ")),
                ph.mode
            )?;
        }
        writeln!(out, "  end")?;
    }
    for &(a, b) in edges {
        writeln!(out, "  p{a} --> p{b}")?;
    }
    out.flush()
}

fn escape_mermaid(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn dot(p: &Pipeline, stages: &[Vec<usize>], edges: &[(usize, usize)]) -> std::io::Result<()> {
    let mut out = stdout();
    writeln!(out, "digraph {} {{", quote_dot(&p.name))?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [shape=box];")?;
    for (s, stage) in stages.iter().enumerate() {
        writeln!(out, "  subgraph cluster_stage{} {{", s + 1)?;
        writeln!(out, "    label={};", quote_dot(&format!("stage {}", s + 1)))?;
        for &i in stage {
            let ph = &p.phases[i];
            let label = format!("{}\\n{} ({})", ph.name, ph.agents.join(", "), ph.mode);
            let style = if ph.required { "" } else { ", style=dashed" };
            writeln!(
                out,
                "    {} [label=\"{}\"{style}];",
                quote_dot(&ph.name),
                label.replace('"', "\\\"")
            )?;
        }
        writeln!(out, "  }}")?;
    }
    for &(a, b) in edges {
        writeln!(
            out,
            "  {} -> {};",
            quote_dot(&p.phases[a].name),
            quote_dot(&p.phases[b].name)
        )?;
    }
    writeln!(out, "}}")?;
    out.flush()
}

fn quote_dot(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
