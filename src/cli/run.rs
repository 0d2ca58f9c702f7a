//! `orch run FILE`: run the pipeline (or `--phase P`, `--from P`), record
//! everything, print progress, and exit 0, 1 (a required phase failed),
//! 2 (invalid input) or 130 (interrupted).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use super::GlobalArgs;
use super::error::CliError;
use super::load::{load_pipeline, phase_graph};
use super::output::{Exit, Format, select_phases, stdout, write_json};
use super::view::{View, progress_view};
use crate::clock::{duration, now_ms};
use crate::engine::assemble;
use crate::engine::lifecycle;
use crate::pipeline::graph::PhaseGraph;
use crate::report::text;
use crate::store::{RunDetail, RunStatus, Status};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: `pipeline.toml` here, else the only
    /// file in `pipelines/` or `.orch/pipelines/`)
    #[arg(value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Run only this phase, taking its dependencies as satisfied (repeatable;
    /// the CI-job mode)
    #[arg(long = "phase", value_name = "PHASE", conflicts_with = "from")]
    pub(crate) phases: Vec<String>,
    /// Run this phase and everything downstream of it
    #[arg(long, value_name = "PHASE")]
    pub(crate) from: Option<String>,
    /// Print every invocation in run order; start nothing
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Continue a run (the latest of this pipeline by default), skipping the
    /// phases that succeeded in it
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "latest")]
    pub(crate) resume: Option<String>,
    /// Resume even though the pipeline or its prompts changed
    #[arg(long, requires = "resume")]
    pub(crate) force: bool,
    /// The id of the run (default: a new one). Jobs of one CI workflow
    /// pass the same id, so `orch state import` merges them into one run
    #[arg(long, value_name = "ID", conflicts_with = "resume", value_parser = parse_run_id)]
    pub(crate) run_id: Option<String>,
    /// Write a JUnit XML report here: a test suite per phase, a test case
    /// for the phase and one per agent
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Seconds between TERM and KILL when stopping an agent
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub(crate) grace: u64,
    /// A value for `{{inputs.NAME}}` in prompts (repeatable)
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_input)]
    pub(crate) inputs: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

/// A run id from outside: it names folders, so letters, digits, `-`, `_`
/// and `.` only, not starting with `.` or `-`.
fn parse_run_id(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 100
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with(['.', '-']);
    if ok {
        Ok(s.to_string())
    } else {
        Err("a run id is 1-100 of A-Z a-z 0-9 - _ . and does not start with `.` or `-`".into())
    }
}

/// `NAME=VALUE`.
pub(super) fn parse_input(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not NAME=VALUE")),
    }
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    crate::confine::keep_orch_private();
    // Processes agents leave behind come to orch, which stops them.
    crate::engine::reaper::adopt_orphans();
    let (mut ctx, mut pipeline) = load_pipeline(global, args.file.as_deref(), color)?;
    ctx.inputs = args.inputs.iter().cloned().collect();
    // Absolute, so the run is found again from any directory.
    pipeline.path = std::path::absolute(&pipeline.path).unwrap_or(pipeline.path);
    let graph = phase_graph(&pipeline)?;

    // Selection.
    let selected = select_phases(&pipeline, &graph, &args.phases, args.from.as_deref())?;
    let selection = match (&args.from, args.phases.is_empty()) {
        (Some(from), _) => format!("from:{from}"),
        (None, false) => format!("phase:{}", args.phases.join(",")),
        (None, true) => "all".to_string(),
    };

    // Every input a selected phase's prompts use must be given: a prompt
    // never goes out with a variable left empty.
    let mut unset: Vec<String> = Vec::new();
    for &i in &selected {
        for n in crate::prompt::Prompts::inputs_used(&pipeline.phases[i]) {
            if !ctx.inputs.contains_key(&n) && !unset.contains(&n) {
                unset.push(n);
            }
        }
    }
    if !unset.is_empty() && !args.dry_run {
        let flags: Vec<String> = unset.iter().map(|n| format!("--input {n}=...")).collect();
        return Err(CliError::usage(format!(
            "the prompts use {} but no value is given",
            unset
                .iter()
                .map(|n| format!("`{{{{inputs.{n}}}}}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .with_hint(format!("pass {}", flags.join(" "))));
    }

    if args.dry_run {
        return dry_run(&pipeline, &graph, &selected, &ctx);
    }

    // The run history and the judges' word must be out of every agent's
    // reach.
    if let Some(problem) = assemble::state_dir_problem(&pipeline, &ctx) {
        return Err(CliError::usage(problem).with_hint(
            "keep the default state directory (outside the repository), or set `state_dir` (or `--state-dir`) to a folder outside the workspace",
        ));
    }

    // Before anything is spawned: every program must be there.
    let mut missing = Vec::new();
    for &i in &selected {
        let phase = &pipeline.phases[i];
        for name in &phase.agents {
            let agent = pipeline.agent(name).expect("validated");
            let program = assemble::program(agent, &ctx.settings);
            if which::which(&program).is_err() && !missing.iter().any(|(p, _)| *p == program) {
                missing.push((program, format!("{}/{}", phase.name, name)));
            }
        }
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(p, at)| format!("`{p}` (for {at})"))
            .collect();
        return Err(CliError::usage(format!("not found on PATH: {}", list.join(", "))).with_hint(
            "install it, set `binary` in the agent's table, or `--agent-binary KIND=PATH`; `orch doctor` lists what is installed",
        ));
    }

    let max_parallel = global
        .max_parallel
        .or(pipeline.defaults.max_parallel)
        .unwrap_or(ctx.settings.max_parallel) as usize;
    let view = if crate::report::github::active() {
        View::GitHub
    } else if !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some() {
        View::Plain
    } else {
        View::Terminal
    };
    let (view, live) = progress_view(view);
    let started = now_ms();
    let request = lifecycle::Request {
        pipeline,
        graph,
        ctx,
        selected,
        selection,
        resume: args.resume.clone(),
        force: args.force,
        run_id: args.run_id.clone(),
        max_parallel,
        grace: Duration::from_secs(args.grace),
        listeners: vec![view],
    };
    let finished = lifecycle::run(request)?;
    if let Some(live) = live {
        let _ = live.clear();
    }
    let (status, detail, recorded) = (finished.status, finished.detail, finished.recorded);
    if let Err(e) = &recorded {
        let _ = writeln!(
            std::io::stderr(),
            "error: recording the run failed: {e}\n  = the run fails: its record is incomplete"
        );
    }

    let reported = write_reports(args, detail.as_ref());

    if let Some(detail) = &detail {
        match args.format {
            Format::Json => write_json(&RunJson::of(status, detail))?,
            Format::Text => {
                let _ = summary(status, detail, now_ms().saturating_sub(started));
            }
        }
    }
    Ok(match status {
        RunStatus::Succeeded if recorded.is_err() || reported.is_err() => Exit::Failed,
        RunStatus::Succeeded => Exit::Success,
        RunStatus::Interrupted => Exit::Interrupted,
        RunStatus::Failed | RunStatus::Running => Exit::Failed,
    })
}

/// The JUnit file (`--junit`), and GitHub's step summary when
/// `GITHUB_STEP_SUMMARY` names one. A report that cannot be written fails
/// the run (CI would read a stale one), after saying why.
fn write_reports(args: &Args, detail: Option<&crate::store::RunDetail>) -> Result<(), ()> {
    let Some(detail) = detail else {
        return Ok(());
    };
    let env_file = |name: &str| {
        std::env::var_os(name)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    // (what, where, text, appended to what is there)
    let mut writes: Vec<(&str, PathBuf, String, bool)> = Vec::new();
    if let Some(path) = &args.junit {
        writes.push((
            "the JUnit report",
            path.clone(),
            crate::report::junit::xml(detail),
            false,
        ));
    }
    // The outcome of what this run ran, for the job's `outcome` output:
    // an optional phase's failure shows here even though the job passes.
    if let Some(path) = env_file("GITHUB_OUTPUT") {
        let outcome = detail
            .phases
            .iter()
            .map(|p| p.status)
            .find(|s| *s != crate::store::Status::Succeeded)
            .map_or("succeeded", |s| s.as_str());
        writes.push((
            "the step output",
            path,
            format!("outcome={outcome}\n"),
            true,
        ));
    }
    if let Some(path) = env_file("GITHUB_STEP_SUMMARY") {
        let md =
            crate::report::markdown::summary(detail, crate::report::markdown::STEP_SUMMARY_LIMIT);
        writes.push(("the step summary", path, md, true));
    }
    let mut ok = Ok(());
    let workspace = std::env::current_dir().unwrap_or_else(|_| ".".into());
    for (what, path, text, append) in writes {
        // Never through a link an agent planted in the workspace.
        let written = crate::beneath::write_report(&path, &workspace, text.as_bytes(), append);
        if let Err(e) = written {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot write {what} `{}`: {e}",
                path.display()
            );
            ok = Err(());
        }
    }
    ok
}

/// The table of phases on stderr, then the run id on stdout. Names are
/// shown through [`text::line`] like everything else a run recorded.
fn summary(status: RunStatus, d: &RunDetail, millis: u64) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    let width = d
        .phases
        .iter()
        .map(|p| text::line(&p.name).chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(err)?;
    writeln!(
        err,
        "{:<width$}  {:<10}  {:>8}  agents",
        "phase", "status", "time"
    )?;
    for p in &d.phases {
        let took = match (p.started_ms, p.ended_ms) {
            (Some(a), Some(b)) => duration(b.saturating_sub(a)),
            _ => "-".into(),
        };
        let agents: Vec<String> = p
            .by_agent()
            .iter()
            .map(|a| format!("{} {}", text::line(a.agent), a.last().status.as_str()))
            .collect();
        writeln!(
            err,
            "{:<width$}  {:<10}  {:>8}  {}{}",
            text::line(&p.name),
            p.status.as_str(),
            took,
            agents.join(", "),
            if p.required { "" } else { " (optional)" }
        )?;
    }
    let ok = d
        .phases
        .iter()
        .filter(|p| p.status == Status::Succeeded)
        .count();
    writeln!(
        err,
        "\nrun {}: {} ({ok} of {} phases succeeded) in {}",
        text::line(&d.run.run_id),
        status.as_str(),
        d.phases.len(),
        duration(millis)
    )?;
    let mut out = stdout();
    writeln!(out, "{}", text::line(&d.run.run_id))?;
    out.flush()
}

/// `--format json`: the run's phases, each agent over its attempts (see
/// `docs/commands/run.md`); a view of the run's detail.
#[derive(serde::Serialize)]
struct RunJson<'a> {
    run_id: &'a str,
    status: RunStatus,
    phases: Vec<PhaseJson<'a>>,
}

#[derive(serde::Serialize)]
struct PhaseJson<'a> {
    name: &'a str,
    status: Status,
    required: bool,
    attempts: u32,
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    agents: Vec<AgentJson<'a>>,
}

#[derive(serde::Serialize)]
struct AgentJson<'a> {
    agent: &'a str,
    status: Status,
    attempts: usize,
    exit_code: Option<i32>,
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
    turns: u32,
    tokens_in: u64,
    tokens_out: u64,
    cost_usd: Option<f64>,
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

impl<'a> RunJson<'a> {
    fn of(status: RunStatus, d: &'a RunDetail) -> RunJson<'a> {
        let phases = d
            .phases
            .iter()
            .map(|p| PhaseJson {
                name: &p.name,
                status: p.status,
                required: p.required,
                attempts: p.attempts,
                started_ms: p.started_ms,
                ended_ms: p.ended_ms,
                reason: p.reason.as_deref(),
                agents: p
                    .by_agent()
                    .into_iter()
                    .map(|t| {
                        let last = t.last();
                        AgentJson {
                            agent: t.agent,
                            status: last.status,
                            attempts: t.attempts.len(),
                            exit_code: last.exit_code,
                            started_ms: t.started_ms(),
                            ended_ms: last.ended_ms,
                            turns: last.turns,
                            tokens_in: t.tokens_in,
                            tokens_out: t.tokens_out,
                            cost_usd: t.cost_usd,
                            session_id: t.session_id(),
                            reason: last.reason.as_deref(),
                        }
                    })
                    .collect(),
            })
            .collect();
        RunJson {
            run_id: &d.run.run_id,
            status,
            phases,
        }
    }
}

fn dry_run(
    pipeline: &crate::pipeline::Pipeline,
    graph: &PhaseGraph,
    selected: &[usize],
    ctx: &assemble::Context,
) -> Result<Exit, CliError> {
    let mut out = stdout();
    for (s, stage) in graph.stages_of(selected).iter().enumerate() {
        for &i in stage {
            let phase = &pipeline.phases[i];
            for name in &phase.agents {
                let agent = pipeline.agent(name).expect("validated");
                let inv = assemble::invocation(
                    pipeline,
                    phase,
                    agent,
                    ctx,
                    &assemble::Slot::preview(&ctx.planned_dir(&phase.name, &agent.name)),
                );
                writeln!(out, "# stage {} / {} / {}", s + 1, phase.name, name)?;
                writeln!(out, "{}", inv.shell_line())?;
            }
            // The judge runs after the workers, as the same phase in
            // `review` mode (its prompt names the artifact once written).
            if let Some(judged) = phase.judge_preview() {
                let name = &judged.agents[0];
                let agent = pipeline.agent(name).expect("validated");
                let inv = assemble::invocation(
                    pipeline,
                    &judged,
                    agent,
                    ctx,
                    &assemble::Slot::preview(&ctx.planned_dir(&judged.name, &agent.name)),
                );
                writeln!(out, "# stage {} / {} / {name} (judge)", s + 1, phase.name)?;
                writeln!(out, "{}", inv.shell_line())?;
            }
        }
    }
    out.flush()?;
    Ok(Exit::Success)
}
