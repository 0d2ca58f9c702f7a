//! `orch state`: move runs between state directories. A CI job exports
//! its run (`export`); the jobs after it and the final job import what
//! came before (`import`), so `orch runs show` tells the whole run.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::GlobalArgs;
use super::error::CliError;
use super::load::load_pipeline;
use super::output::{Exit, Format, write_json};
use crate::pipeline::graph::PhaseGraph;
use crate::store::transfer::{self, Unrecorded};
use crate::store::{Reader, Status, StoreError};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum StateCommand {
    /// Write one run (phases, attempts, events, artifacts, reports,
    /// learnings) to a single consistent database file
    Export(ExportArgs),
    /// Merge exported runs into this state directory (importing a file
    /// twice changes nothing)
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// A run id, a unique prefix of one, or `latest`
    #[arg(long, value_name = "RUN", default_value = "latest")]
    pub(crate) run: String,
    /// The file to write (replaced if present)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// Files written by `orch state export`
    #[arg(value_name = "FILE", required = true)]
    pub(crate) files: Vec<PathBuf>,
    /// The pipeline the runs were made from: phases no job recorded are
    /// added (skipped after a failed dependency), and each run's status is
    /// settled as one `orch run` of the whole pipeline would
    #[arg(long, value_name = "FILE")]
    pub(crate) pipeline: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    match &args.command {
        StateCommand::Export(a) => export(a, &super::config::context(global)?),
        StateCommand::Import(a) => {
            // The pipeline is read first: a bad one imports nothing.
            let (ctx, pipeline) = match &a.pipeline {
                None => (super::config::context(global)?, None),
                Some(p) => {
                    let (ctx, mut p) = load_pipeline(global, Some(p), color)?;
                    // As `orch run` records it.
                    p.path = std::path::absolute(&p.path).unwrap_or(p.path);
                    (ctx, Some(p))
                }
            };
            import(a, &ctx.state_dir(), pipeline.as_ref())
        }
    }
}

fn export(a: &ExportArgs, ctx: &crate::engine::assemble::Context) -> Result<Exit, CliError> {
    let state_dir = ctx.state_dir();
    let run_id = Reader::open(&state_dir)?
        .map(|r| r.resolve_run(&a.run))
        .transpose()?
        .flatten()
        .ok_or_else(|| StoreError::UnknownRun {
            spec: a.run.clone(),
            path: state_dir.join(crate::store::DB_FILE),
        })?;
    let moved = transfer::export(&state_dir, &run_id, &a.output)?;
    match a.format {
        Format::Json => write_json(&serde_json::json!({
            "run_id": run_id, "file": a.output, "moved": moved,
        }))?,
        Format::Text => {
            let _ = writeln!(
                std::io::stderr(),
                "exported run {run_id} to {}: {} phases, {} attempts, {} events, {} reports",
                a.output.display(),
                moved.phases,
                moved.attempts,
                moved.events,
                moved.reports
            );
        }
    }
    Ok(Exit::Success)
}

fn import(
    a: &ImportArgs,
    state_dir: &std::path::Path,
    pipeline: Option<&crate::pipeline::Pipeline>,
) -> Result<Exit, CliError> {
    let mut report = Vec::new();
    let mut runs: Vec<String> = Vec::new();
    for f in &a.files {
        let (moved, in_file) = transfer::import(state_dir, f)?;
        for r in in_file {
            if !runs.contains(&r) {
                runs.push(r);
            }
        }
        report.push(serde_json::json!({ "file": f, "moved": moved }));
        if a.format == Format::Text {
            let _ = writeln!(
                std::io::stderr(),
                "imported {}: {} new or changed runs, {} phases, {} attempts, {} events, {} reports",
                f.display(),
                moved.runs,
                moved.phases,
                moved.attempts,
                moved.events,
                moved.reports
            );
        }
    }
    let mut settled = Vec::new();
    if let Some(pipeline) = pipeline {
        let digest = crate::engine::identity::digests(pipeline).digest;
        let Some(reader) = Reader::open(state_dir)? else {
            return Err(CliError::usage("nothing was imported"));
        };
        for run_id in &runs {
            match reader.run_digests(run_id) {
                Ok(Some((d, _))) if d == digest => {}
                _ => {
                    return Err(CliError::usage(format!(
                        "run `{run_id}` was not made from `{}` as it is now",
                        pipeline.path.display()
                    ))
                    .with_hint("pass the pipeline file the run was made from"));
                }
            }
            let recorded: Vec<(String, Status)> = match reader.run(run_id)? {
                Some(d) => d.phases.into_iter().map(|p| (p.name, p.status)).collect(),
                None => Vec::new(),
            };
            let unrecorded = unrecorded(pipeline, &recorded);
            let status = transfer::complete(state_dir, run_id, &unrecorded)?;
            settled.push(serde_json::json!({ "run_id": run_id, "status": status }));
            if a.format == Format::Text {
                let _ = writeln!(
                    std::io::stderr(),
                    "run {run_id}: {status} ({} phase{} no job recorded)",
                    unrecorded.len(),
                    if unrecorded.len() == 1 { "" } else { "s" }
                );
            }
        }
    }
    if a.format == Format::Json {
        write_json(&serde_json::json!({ "files": report, "runs": runs, "settled": settled }))?;
    }
    Ok(Exit::Success)
}

/// The phases of `pipeline` a run did not record, and why, as the
/// scheduler would have said: skipped when a dependency did not succeed
/// (a required one, or one skipped itself); cancelled when nothing
/// explains it (its job never reported).
fn unrecorded(
    pipeline: &crate::pipeline::Pipeline,
    recorded: &[(String, Status)],
) -> Vec<Unrecorded> {
    let Ok(graph) = PhaseGraph::build(pipeline) else {
        return Vec::new();
    };
    let mut status: Vec<Option<Status>> = pipeline
        .phases
        .iter()
        .map(|p| recorded.iter().find(|(n, _)| *n == p.name).map(|(_, s)| *s))
        .collect();
    let mut out = Vec::new();
    for stage in graph.stages_of(&(0..pipeline.phases.len()).collect::<Vec<_>>()) {
        for i in stage {
            if status[i].is_some() {
                continue;
            }
            let p = &pipeline.phases[i];
            let blocked = graph
                .dependencies(i)
                .into_iter()
                .find(|&d| match status[d] {
                    Some(Status::Skipped) => true,
                    Some(Status::Succeeded) => false,
                    Some(_) => pipeline.phases[d].required,
                    None => false,
                });
            let (s, reason) = match blocked {
                Some(d) => (
                    Status::Skipped,
                    format!("`{}` did not succeed", pipeline.phases[d].name),
                ),
                None => (Status::Cancelled, "no job recorded this phase".to_string()),
            };
            status[i] = Some(s);
            out.push(Unrecorded {
                phase: p.name.clone(),
                required: p.required,
                status: s,
                reason,
            });
        }
    }
    out
}
