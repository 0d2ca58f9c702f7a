//! `orch state`: move runs between state directories. A CI job exports
//! its run (`export`); the jobs after it and the final job import what
//! came before (`import`), so `orch runs show` tells the whole run.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::GlobalArgs;
use super::output::{CmdResult, Exit, Format, load_valid, usage_error, write_json};
use crate::pipeline::graph::PhaseGraph;
use crate::store::transfer::{self, Unrecorded};
use crate::store::{Reader, Status, StoreError};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Write one run (phases, attempts, events, artifacts, reports,
    /// learnings) to a single consistent database file
    Export(ExportArgs),
    /// Merge exported runs into this state directory (importing a file
    /// twice changes nothing)
    Import(ImportArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A run id, a unique prefix of one, or `latest`
    #[arg(long, value_name = "RUN", default_value = "latest")]
    pub run: String,
    /// The file to write (replaced if present)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files written by `orch state export`
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The pipeline the runs were made from: phases no job recorded are
    /// added (skipped after a failed dependency), and each run's status is
    /// settled as one `orch run` of the whole pipeline would
    #[arg(long, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(args: &Args, global: &GlobalArgs, color: bool) -> CmdResult {
    let ctx = match super::config::context(global) {
        Ok(c) => c,
        Err(exit) => return Ok(exit),
    };
    let state_dir = ctx.state_dir();
    match &args.command {
        StateCommand::Export(a) => {
            let run_id = match Reader::open(&state_dir)
                .and_then(|r| r.map(|r| r.resolve_run(&a.run)).transpose())
            {
                Ok(Some(Some(id))) => id,
                Ok(_) => {
                    return store_error(StoreError::UnknownRun {
                        spec: a.run.clone(),
                        path: state_dir.join(crate::store::DB_FILE),
                    });
                }
                Err(e) => return store_error(e),
            };
            let moved = match transfer::export(&state_dir, &run_id, &a.output) {
                Ok(m) => m,
                Err(e) => return store_error(e),
            };
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
        StateCommand::Import(a) => import(a, &ctx, &state_dir, color),
    }
}

fn import(
    a: &ImportArgs,
    ctx: &crate::engine::assemble::Context,
    state_dir: &std::path::Path,
    color: bool,
) -> CmdResult {
    // The pipeline is read first: a bad one imports nothing.
    let pipeline = match &a.pipeline {
        None => None,
        Some(p) => match load_valid(p, &ctx.confinement, color)? {
            Ok(l) => {
                let mut p = l.pipeline;
                // As `orch run` records it.
                p.path = std::path::absolute(&p.path).unwrap_or(p.path);
                Some(p)
            }
            Err(exit) => return Ok(exit),
        },
    };
    let mut report = Vec::new();
    let mut runs: Vec<String> = Vec::new();
    for f in &a.files {
        let (moved, in_file) = match transfer::import(state_dir, f) {
            Ok(m) => m,
            Err(e) => return store_error(e),
        };
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
    if let Some(pipeline) = &pipeline {
        let digest = crate::engine::identity::digests(pipeline).digest;
        let reader = match Reader::open(state_dir) {
            Ok(Some(r)) => r,
            Ok(None) => return usage_error("nothing was imported", None),
            Err(e) => return store_error(e),
        };
        for run_id in &runs {
            match reader.run_digests(run_id) {
                Ok(Some((d, _))) if d == digest => {}
                _ => {
                    return usage_error(
                        &format!(
                            "run `{run_id}` was not made from `{}` as it is now",
                            pipeline.path.display()
                        ),
                        Some("pass the pipeline file the run was made from".into()),
                    );
                }
            }
            let recorded: Vec<(String, Status)> = match reader.run(run_id) {
                Ok(Some(d)) => d.phases.into_iter().map(|p| (p.name, p.status)).collect(),
                Ok(None) => Vec::new(),
                Err(e) => return store_error(e),
            };
            let unrecorded = unrecorded(pipeline, &recorded);
            let status = match transfer::complete(state_dir, run_id, &unrecorded) {
                Ok(s) => s,
                Err(e) => return store_error(e),
            };
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

fn store_error(e: StoreError) -> CmdResult {
    let _ = writeln!(std::io::stderr(), "{:?}", miette::Report::new(e));
    Ok(Exit::Invalid)
}
