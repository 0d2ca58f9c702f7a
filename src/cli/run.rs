//! `orch run FILE`: run the pipeline (or `--phase P`, `--from P`), record
//! everything, print progress, and exit 0, 1 (a required phase failed),
//! 2 (invalid input) or 130 (interrupted).

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::GlobalArgs;
use super::output::{
    CmdResult, Exit, Format, clock, date_time, load_valid, select_phases, stdout, usage_error,
    write_json,
};
use crate::agents::build;
use crate::engine::identity::{self, changes};
use crate::engine::scheduler::{self, Progress, ProgressFn, RunOptions, RunReport};
use crate::engine::supervisor::now_ms;
use crate::engine::{Cancel, Sink};
use crate::graph::PhaseGraph;
use crate::store::{Outcome, Record, RunStatus, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pipeline file
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Run only this phase, taking its dependencies as satisfied (repeatable;
    /// the CI-job mode)
    #[arg(long = "phase", value_name = "PHASE", conflicts_with = "from")]
    pub phases: Vec<String>,
    /// Run this phase and everything downstream of it
    #[arg(long, value_name = "PHASE")]
    pub from: Option<String>,
    /// Print every invocation in run order; start nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Continue a run (the latest of this pipeline by default), skipping the
    /// phases that succeeded in it
    #[arg(long, value_name = "RUN", num_args = 0..=1, default_missing_value = "latest")]
    pub resume: Option<String>,
    /// Resume even though the pipeline or its prompts changed
    #[arg(long, requires = "resume")]
    pub force: bool,
    /// Seconds between TERM and KILL when stopping an agent
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub grace: u64,
    /// A value for `{{inputs.NAME}}` in prompts (repeatable)
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_input)]
    pub inputs: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `NAME=VALUE`.
pub(super) fn parse_input(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not NAME=VALUE")),
    }
}

pub fn run(args: &Args, global: &GlobalArgs, color: bool) -> CmdResult {
    crate::confine::keep_orch_private();
    // Processes agents leave behind come to orch, which stops them.
    crate::engine::reaper::adopt_orphans();
    let mut ctx = match super::config::context(global) {
        Ok(c) => c,
        Err(exit) => return Ok(exit),
    };
    ctx.inputs = args.inputs.iter().cloned().collect();
    let loaded = match load_valid(&args.file, &ctx.confinement, color)? {
        Ok(l) => l,
        Err(exit) => return Ok(exit),
    };
    let mut pipeline = loaded.pipeline;
    // Absolute, so the run is found again from any directory.
    pipeline.path = std::path::absolute(&pipeline.path).unwrap_or(pipeline.path);
    let graph = match PhaseGraph::build(&pipeline) {
        Ok(g) => g,
        Err(_) => return usage_error("the pipeline has a dependency cycle", None),
    };

    // Selection.
    let selected = match select_phases(&pipeline, &graph, &args.phases, args.from.as_deref()) {
        Ok(v) => v,
        Err(m) => return usage_error(&m, None),
    };
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
        return usage_error(
            &format!(
                "the prompts use {} but no value is given",
                unset
                    .iter()
                    .map(|n| format!("`{{{{inputs.{n}}}}}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(format!("pass {}", flags.join(" "))),
        );
    }

    if args.dry_run {
        return dry_run(&pipeline, &graph, &selected, &ctx);
    }

    // Before anything is spawned: every program must be there.
    let mut missing = Vec::new();
    for &i in &selected {
        let phase = &pipeline.phases[i];
        for name in &phase.agents {
            let agent = pipeline.agent(name).expect("validated");
            let program = build::program(agent, &ctx.settings);
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
        return usage_error(
            &format!("not found on PATH: {}", list.join(", ")),
            Some("install it, set `binary` in the agent's table, or `--agent-binary KIND=PATH`; `orch doctor` lists what is installed".into()),
        );
    }

    let state_dir = ctx.state_dir();
    let store = match Store::open(&state_dir) {
        Ok(s) => s,
        Err(e) => {
            return usage_error(
                &format!(
                    "cannot open the run store in `{}`: {e}",
                    state_dir.display()
                ),
                None,
            );
        }
    };
    let _ = store.reader().mark_interrupted();
    if let Ok(Some((run_id, pid))) = store.reader().active_run() {
        return usage_error(
            &format!(
                "run `{run_id}` (orch process {pid}) is still running in `{}`",
                state_dir.display()
            ),
            Some("wait for it to finish, or use another `--state-dir`".into()),
        );
    }

    let digests = identity::digests(&pipeline);
    let mut done = Vec::new();
    let mut attempt_base = HashMap::new();
    let run_id = match &args.resume {
        None => identity::new_run_id(),
        Some(which) => {
            let id = if which == "latest" {
                match store
                    .reader()
                    .latest_run(&pipeline.path.display().to_string())
                {
                    Ok(Some(id)) => id,
                    _ => {
                        return usage_error(
                            &format!("no earlier run of `{}` to resume", args.file.display()),
                            Some("run it without --resume first".into()),
                        );
                    }
                }
            } else {
                match store.reader().resolve_run(which) {
                    Ok(Some(id)) => id,
                    _ => {
                        return usage_error(
                            &format!("no run `{which}`"),
                            Some("`orch runs list` shows the runs".into()),
                        );
                    }
                }
            };
            if let Ok(Some((old_digest, old_files))) = store.reader().run_digests(&id)
                && old_digest != digests.digest
                && !args.force
            {
                let old: BTreeMap<String, String> =
                    serde_json::from_str(&old_files).unwrap_or_default();
                let what = changes(&old, &digests.files);
                return usage_error(
                    &format!(
                        "run `{id}` was made from different files: {}",
                        what.join("; ")
                    ),
                    Some("resume anyway with --force, or start a new run".into()),
                );
            }
            let succeeded = store.reader().succeeded_phases(&id).unwrap_or_default();
            done = selected
                .iter()
                .copied()
                .filter(|&i| succeeded.contains(&pipeline.phases[i].name))
                .collect();
            attempt_base = store.reader().attempt_counts(&id).unwrap_or_default();
            id
        }
    };

    let writer = store.writer();
    let sink = Sink::new(writer.clone());
    sink.send(Record::RunStarted {
        run_id: run_id.clone(),
        pipeline_name: pipeline.name.clone(),
        pipeline_path: pipeline.path.display().to_string(),
        digest: digests.digest.clone(),
        digests_json: serde_json::to_string(&digests.files).unwrap_or_default(),
        selection,
        pid: std::process::id(),
        started_ms: now_ms(),
    });

    let max_parallel = global
        .max_parallel
        .or(pipeline.defaults.max_parallel)
        .unwrap_or(ctx.settings.max_parallel) as usize;
    // The keeper kills the agents' process groups if this process dies.
    let keeper = std::env::current_exe()
        .and_then(|exe| crate::engine::keeper::Keeper::start(&exe))
        .map(Arc::new)
        .map_err(|e| {
            let _ = writeln!(
                std::io::stderr(),
                "warning: no keeper process ({e}); agents may outlive a killed orch"
            );
        })
        .ok();
    let opts = RunOptions {
        keeper,
        run_id: run_id.clone(),
        selected,
        done,
        max_parallel,
        grace: Duration::from_secs(args.grace),
        retry_base: Duration::from_secs(2),
        retry_max: Duration::from_secs(60),
        attempt_base,
    };
    let plain = !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some();
    let (progress, live) = progress_view(plain);
    let started = now_ms();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return usage_error(&format!("cannot start the async runtime: {e}"), None),
    };
    let pipeline = Arc::new(pipeline);
    let ctx = Arc::new(ctx);
    let report = runtime.block_on(async {
        let (cancel_tx, cancel_rx) = watch::channel(Cancel::No);
        tokio::spawn(watch_signals(cancel_tx));
        scheduler::run(
            Arc::clone(&pipeline),
            &graph,
            ctx,
            opts,
            sink.clone(),
            cancel_rx,
            progress,
        )
        .await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    crate::engine::reaper::sweep();
    if let Some(live) = live {
        let _ = live.clear();
    }
    sink.send(Record::RunFinished {
        run_id: run_id.clone(),
        status: report.status,
        ended_ms: now_ms(),
    });
    drop(sink);
    drop(writer);
    // A run whose record is incomplete (a write refused, a lock another
    // process held) does not pass: what it did cannot be shown.
    let recorded = store.close();
    if let Err(e) = &recorded {
        let _ = writeln!(
            std::io::stderr(),
            "error: recording the run failed: {e}\n  = the run fails: its record is incomplete"
        );
    }

    match args.format {
        Format::Json => write_json(&report)?,
        Format::Text => {
            let _ = summary(&report, now_ms().saturating_sub(started));
        }
    }
    Ok(match report.status {
        RunStatus::Succeeded if recorded.is_err() => Exit::Failed,
        RunStatus::Succeeded => Exit::Success,
        RunStatus::Interrupted => Exit::Interrupted,
        RunStatus::Failed | RunStatus::Running => Exit::Failed,
    })
}

/// First Ctrl-C (or SIGTERM): stop gracefully; second: kill at once.
async fn watch_signals(tx: watch::Sender<Cancel>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        count += 1;
        let level = if count == 1 {
            Cancel::Graceful
        } else {
            Cancel::Immediate
        };
        let _ = writeln!(
            std::io::stderr(),
            "orch: {}",
            if count == 1 {
                "interrupted; stopping agents (press Ctrl-C again to kill them now)"
            } else {
                "killing agents now"
            }
        );
        let _ = tx.send(level);
    }
}

fn secs(ms: u64) -> String {
    format!("{:.2}s", ms as f64 / 1000.0)
}

/// The line printed for a progress event (`None`: nothing to print).
fn progress_line(p: &Progress) -> Option<String> {
    Some(match p {
        Progress::PhaseStarted { phase } => format!("phase {phase}: started"),
        Progress::PhaseFinished {
            phase,
            outcome,
            reason,
            millis,
        } => match reason {
            Some(r) if *outcome != Outcome::Succeeded => {
                format!("phase {phase}: {} ({r})", outcome.as_str())
            }
            _ => format!("phase {phase}: {} in {}", outcome.as_str(), secs(*millis)),
        },
        Progress::AttemptStarted {
            phase,
            agent,
            attempt,
        } => format!("  {phase}/{agent}: attempt {attempt} started"),
        Progress::Activity { .. } => return None,
        Progress::AttemptFinished {
            phase,
            agent,
            attempt,
            result,
        } => {
            let took = secs(result.ended_ms.saturating_sub(result.started_ms));
            match &result.reason {
                Some(r) if result.outcome != Outcome::Succeeded => format!(
                    "  {phase}/{agent}: attempt {attempt} {} after {took}: {r}",
                    result.outcome.as_str()
                ),
                _ => format!(
                    "  {phase}/{agent}: attempt {attempt} {} in {took} ({} turns)",
                    result.outcome.as_str(),
                    result.turns
                ),
            }
        }
        Progress::Judged {
            phase,
            judge,
            round,
            rejected,
        } => match rejected {
            None => format!("  {phase}: judge {judge} approved round {round}"),
            Some(why) => format!("  {phase}: judge {judge} rejected round {round}: {why}"),
        },
        Progress::ContractWarning { phase, message } => {
            format!("  {phase}: warning (validation = \"trust\"): {message}")
        }
        Progress::Retrying {
            phase,
            agent,
            wait,
            rate_limited,
        } => {
            let shown = humantime::format_duration(Duration::from_millis(wait.as_millis() as u64));
            match rate_limited {
                Some(Some(lifts)) if *lifts > now_ms() + wait.as_millis() as u64 + 1000 => format!(
                    "  {phase}/{agent}: rate limited until {} (more than orch waits); retrying in {shown}",
                    date_time(*lifts)
                ),
                Some(Some(lifts)) => format!(
                    "  {phase}/{agent}: rate limited until {}; retrying in {shown}",
                    clock(*lifts)
                ),
                Some(None) => format!("  {phase}/{agent}: rate limited; retrying in {shown}"),
                None => format!("  {phase}/{agent}: retrying in {shown}"),
            }
        }
    })
}

/// Plain timestamped lines on stderr when it is not a terminal or `CI` is
/// set; on a terminal, a live view with one line per running agent (phase,
/// agent, elapsed, turns, last tool) above which finished work scrolls.
fn progress_view(plain: bool) -> (ProgressFn, Option<indicatif::MultiProgress>) {
    if plain {
        let f: ProgressFn = Arc::new(|p: Progress| {
            if let Some(line) = progress_line(&p) {
                let _ = writeln!(std::io::stderr(), "[{}] {line}", clock(now_ms()));
            }
        });
        return (f, None);
    }
    use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let bars: Arc<std::sync::Mutex<HashMap<(String, String), ProgressBar>>> = Arc::default();
    let style = ProgressStyle::with_template("{spinner} {prefix:<28} {elapsed:>4} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let m = multi.clone();
    let f: ProgressFn = Arc::new(move |p: Progress| {
        let mut bars = bars.lock().unwrap_or_else(|e| e.into_inner());
        match &p {
            Progress::AttemptStarted {
                phase,
                agent,
                attempt,
            } => {
                let bar = m.add(ProgressBar::new_spinner());
                bar.set_style(style.clone());
                bar.set_prefix(format!("{phase}/{agent}"));
                bar.set_message(if *attempt > 1 {
                    format!("attempt {attempt}")
                } else {
                    String::new()
                });
                bar.enable_steady_tick(Duration::from_millis(120));
                bars.insert((phase.clone(), agent.clone()), bar);
                return;
            }
            Progress::Activity {
                phase,
                agent,
                turns,
                last_tool,
            } => {
                if let Some(bar) = bars.get(&(phase.clone(), agent.clone())) {
                    let tool = last_tool
                        .as_deref()
                        .map(|t| format!(", last tool {t}"))
                        .unwrap_or_default();
                    bar.set_message(format!("{turns} turns{tool}"));
                }
                return;
            }
            Progress::AttemptFinished { phase, agent, .. } => {
                if let Some(bar) = bars.remove(&(phase.clone(), agent.clone())) {
                    bar.finish_and_clear();
                    m.remove(&bar);
                }
            }
            _ => {}
        }
        if let Some(line) = progress_line(&p) {
            let _ = m.println(line);
        }
    });
    (f, Some(multi))
}

fn summary(report: &RunReport, millis: u64) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    let width = report
        .phases
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(err)?;
    writeln!(
        err,
        "{:<width$}  {:<10}  {:>8}  agents",
        "phase", "status", "time"
    )?;
    for p in &report.phases {
        let took = match (p.started_ms, p.ended_ms) {
            (Some(a), Some(b)) => secs(b.saturating_sub(a)),
            _ => "-".into(),
        };
        let agents: Vec<String> = p
            .agents
            .iter()
            .map(|a| format!("{} {}", a.agent, a.status.as_str()))
            .collect();
        writeln!(
            err,
            "{:<width$}  {:<10}  {:>8}  {}{}",
            p.name,
            p.status.as_str(),
            took,
            agents.join(", "),
            if p.required { "" } else { " (optional)" }
        )?;
    }
    let ok = report
        .phases
        .iter()
        .filter(|p| p.status == Outcome::Succeeded)
        .count();
    writeln!(
        err,
        "\nrun {}: {} ({ok} of {} phases succeeded) in {}",
        report.run_id,
        report.status.as_str(),
        report.phases.len(),
        secs(millis)
    )?;
    let mut out = stdout();
    writeln!(out, "{}", report.run_id)?;
    out.flush()
}

fn dry_run(
    pipeline: &crate::pipeline::Pipeline,
    graph: &PhaseGraph,
    selected: &[usize],
    ctx: &build::Context,
) -> CmdResult {
    let mut out = stdout();
    for (s, stage) in graph.stages_of(selected).iter().enumerate() {
        for &i in stage {
            let phase = &pipeline.phases[i];
            for name in &phase.agents {
                let agent = pipeline.agent(name).expect("validated");
                let inv = build::invocation(
                    pipeline,
                    phase,
                    agent,
                    ctx,
                    &build::Slot::preview(&ctx.planned_dir(&phase.name, &agent.name)),
                );
                writeln!(out, "# stage {} / {} / {}", s + 1, phase.name, name)?;
                writeln!(out, "{}", inv.shell_line())?;
            }
        }
    }
    out.flush()?;
    Ok(Exit::Success)
}
