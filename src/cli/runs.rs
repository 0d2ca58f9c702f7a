//! `orch runs`: the run history in the state directory (`list`, `show`,
//! `events`). Every subcommand first marks runs whose orch process is gone
//! as interrupted.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;

use super::GlobalArgs;
use super::error::CliError;
use super::output::{Exit, Format, stdout, write_json, write_json_to};
use crate::clock::{date_time, duration, time_of_day};
use crate::report::{github, text};
use crate::store::{EventRow, Reader, RunDetail, RunStatus, RunSummary, StoreError};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: RunsCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// The recorded runs, newest first
    List(ListArgs),
    /// A run's phases, agent attempts, artifacts, and what the agents reported
    Show(ShowArgs),
    /// A run's recorded events, in the order they arrived
    Events(EventsArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// At most this many runs
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) limit: usize,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// A run id, a unique prefix of one, or `latest`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// Also write the run as a JUnit XML report (as `orch run --junit`)
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Print the Markdown summary (as GitHub's step summary) instead, e.g.
    /// `>> "$GITHUB_STEP_SUMMARY"` in a CI job that merged the state
    #[arg(long, conflicts_with = "format")]
    pub(crate) markdown: bool,
    /// Exit 1 unless the run succeeded (after printing), for a CI job that
    /// merged the state and must fail with the run
    #[arg(long)]
    pub(crate) exit_status: bool,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EventsArgs {
    /// A run id, a unique prefix of one, or `latest`
    #[arg(value_name = "RUN")]
    pub(crate) run: String,
    /// Only this phase's events
    #[arg(long, value_name = "PHASE")]
    pub(crate) phase: Option<String>,
    /// Keep printing new events until the run ends (with `--format json`,
    /// one JSON object per line instead of one array)
    #[arg(long)]
    pub(crate) follow: bool,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

/// Events read per query.
const PAGE: usize = 20_000;

/// How often `--follow` looks for new events.
const POLL: Duration = Duration::from_millis(200);

pub(super) fn run(args: &Args, global: &GlobalArgs) -> Result<Exit, CliError> {
    let ctx = super::config::context(global)?;
    let state_dir = ctx.state_dir();
    let reader = Reader::open(&state_dir)?;
    if let Some(r) = &reader
        && let Err(e) = mark_interrupted(r, &state_dir)
    {
        // Reading still works; say why statuses may be stale.
        let _ = writeln!(io::stderr(), "warning: cannot mark interrupted runs: {e}");
    }
    match &args.command {
        RunsCommand::List(a) => list(reader.as_ref(), &state_dir, a),
        RunsCommand::Show(a) => show(reader.as_ref(), &state_dir, a),
        RunsCommand::Events(a) => events(reader.as_ref(), &state_dir, a),
    }
}

/// The run `spec` names.
fn resolve(reader: Option<&Reader>, state_dir: &Path, spec: &str) -> Result<String, StoreError> {
    let found = match reader {
        Some(r) => r.resolve_run(spec)?,
        None => None,
    };
    found.ok_or_else(|| StoreError::UnknownRun {
        spec: spec.to_string(),
        path: state_dir.join(crate::store::DB_FILE),
    })
}

fn list(reader: Option<&Reader>, state_dir: &Path, args: &ListArgs) -> Result<Exit, CliError> {
    let runs = match reader {
        Some(r) => r.list_runs(args.limit)?,
        None => Vec::new(),
    };
    match args.format {
        Format::Json => write_json(&runs)?,
        Format::Text if runs.is_empty() => {
            let _ = writeln!(
                io::stderr(),
                "no runs recorded in `{}`",
                state_dir.display()
            );
        }
        Format::Text => {
            let rows: Vec<Vec<String>> = runs.iter().map(list_row).collect();
            let mut out = stdout();
            github::text_only(&mut out, github::stdout_is_log(), |out| {
                table(
                    out,
                    &[
                        "RUN", "PIPELINE", "STATUS", "STARTED", "DURATION", "PHASES", "OK",
                        "FAILED",
                    ],
                    &rows,
                )
            })?;
            out.flush()?;
        }
    }
    Ok(Exit::Success)
}

fn list_row(summary: &RunSummary) -> Vec<String> {
    let r = &summary.run;
    vec![
        r.run_id.clone(),
        r.pipeline_name.clone(),
        r.status.to_string(),
        date_time(r.started_ms),
        span(Some(r.started_ms), r.ended_ms),
        summary.phases_total.to_string(),
        summary.phases_succeeded.to_string(),
        summary.phases_failed.to_string(),
    ]
}

fn show(reader: Option<&Reader>, state_dir: &Path, args: &ShowArgs) -> Result<Exit, CliError> {
    let run_id = resolve(reader, state_dir, &args.run)?;
    let detail = match reader.map(|r| r.run(&run_id)).transpose()?.flatten() {
        Some(d) => d,
        None => {
            return Err(StoreError::UnknownRun {
                spec: args.run.clone(),
                path: state_dir.join(crate::store::DB_FILE),
            }
            .into());
        }
    };
    if let Some(path) = &args.junit
        && let Err(e) = crate::beneath::write_report(
            path,
            &std::env::current_dir().unwrap_or_else(|_| ".".into()),
            crate::report::junit::xml(&detail).as_bytes(),
            false,
        )
    {
        return Err(CliError::usage(format!(
            "cannot write the JUnit report `{}`: {e}",
            path.display()
        )));
    }
    if args.markdown {
        let mut out = stdout();
        let md =
            crate::report::markdown::summary(&detail, crate::report::markdown::STEP_SUMMARY_LIMIT);
        // Into the step summary as it is; into the log as text only.
        github::text_only(&mut out, github::stdout_is_log(), |out| {
            out.write_all(md.as_bytes())
        })?;
        out.flush()?;
    } else {
        match args.format {
            Format::Json => write_json(&detail)?,
            Format::Text => {
                let mut out = stdout();
                github::text_only(&mut out, github::stdout_is_log(), |out| {
                    show_text(out, &detail)
                })?;
                out.flush()?;
            }
        }
    }
    Ok(
        if args.exit_status && detail.run.status != crate::store::RunStatus::Succeeded {
            Exit::Failed
        } else {
            Exit::Success
        },
    )
}

fn show_text(out: &mut impl Write, d: &RunDetail) -> io::Result<()> {
    let r = &d.run;
    let fields = [
        ("run", r.run_id.clone()),
        (
            "pipeline",
            format!("{} ({})", r.pipeline_name, r.pipeline_path),
        ),
        ("status", r.status.to_string()),
        ("started", date_time(r.started_ms)),
        ("duration", span(Some(r.started_ms), r.ended_ms)),
        ("selection", r.selection.clone()),
        ("digest", d.digest.clone()),
        ("pid", r.pid.to_string()),
    ];
    for (k, v) in fields {
        writeln!(out, "{k:<10} {}", text::line(&v))?;
    }
    if d.phases.is_empty() {
        writeln!(out, "\nno phases recorded")?;
        return Ok(());
    }
    writeln!(out)?;
    let mut rows = Vec::new();
    for p in &d.phases {
        if p.agents.is_empty() {
            let mut row = vec![p.name.clone(), p.status.to_string()];
            row.extend(["-".to_string(), "-".into(), "-".into(), "-".into()]);
            row.push(span(p.started_ms, p.ended_ms));
            row.extend([
                "-".to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                String::new(),
            ]);
            rows.push(row);
        }
        for a in &p.agents {
            rows.push(vec![
                p.name.clone(),
                p.status.to_string(),
                a.agent.clone(),
                a.attempt.to_string(),
                a.status.to_string(),
                a.exit_code.map_or("-".into(), |c| c.to_string()),
                span(a.started_ms, a.ended_ms),
                a.turns.to_string(),
                format!("{}/{}", a.tokens_in, a.tokens_out),
                a.cost_usd.map_or("-".into(), |c| format!("${c:.4}")),
                a.events.to_string(),
                a.reason.clone().unwrap_or_default(),
            ]);
        }
    }
    table(
        out,
        &[
            "PHASE", "STATUS", "AGENT", "ATTEMPT", "OUTCOME", "EXIT", "DURATION", "TURNS",
            "TOKENS", "COST", "EVENTS", "REASON",
        ],
        &rows,
    )?;
    if !d.artifacts.is_empty() {
        writeln!(out)?;
        let rows: Vec<Vec<String>> = d
            .artifacts
            .iter()
            .map(|a| vec![a.phase.clone(), a.path.clone(), a.sha256.clone()])
            .collect();
        table(out, &["PHASE", "ARTIFACT", "SHA256"], &rows)?;
    }
    super::reports::write(out, &d.reports, &d.learnings)
}

fn events(reader: Option<&Reader>, state_dir: &Path, args: &EventsArgs) -> Result<Exit, CliError> {
    let run_id = resolve(reader, state_dir, &args.run)?;
    // `resolve` found the run, so there is a database.
    let Some(reader) = reader else {
        return Ok(Exit::Invalid);
    };
    let phase = args.phase.as_deref();
    if let Some(p) = phase {
        check_phase(reader, &run_id, p)?;
    }
    let mut out = stdout();
    // As text, what agents printed: into the log as text only.
    let log = matches!(args.format, Format::Text) && github::stdout_is_log();
    let failed = github::text_only(&mut out, log, |out| {
        print_events(out, reader, state_dir, &run_id, phase, args)
    })?;
    if let Some(e) = failed {
        let _ = out.flush();
        return Err(e.into());
    }
    out.flush()?;
    Ok(Exit::Success)
}

/// The run's events as `args` asks, to the end (with `--follow`, to the
/// run's); a store error stops it and is returned.
fn print_events(
    out: &mut impl Write,
    reader: &Reader,
    state_dir: &Path,
    run_id: &str,
    phase: Option<&str>,
    args: &EventsArgs,
) -> io::Result<Option<StoreError>> {
    let mut after = 0;
    let json_lines = args.follow && matches!(args.format, Format::Json);
    let json_array = !args.follow && matches!(args.format, Format::Json);
    let mut first = true;
    if json_array {
        write!(out, "[")?;
    }
    let mut finishing = false;
    loop {
        let page = match reader.events(run_id, phase, after, PAGE) {
            Ok(p) => p,
            Err(e) => return Ok(Some(e)),
        };
        for ev in &page.events {
            if json_array {
                write!(out, "{}\n  ", if first { "" } else { "," })?;
                write_json_to(out, ev)?;
            } else if json_lines {
                write_json_to(out, ev)?;
                writeln!(out)?;
            } else {
                event_line(out, ev)?;
            }
            first = false;
        }
        // Each read starts where the last one stopped.
        after = page.next;
        if page.full {
            continue;
        }
        if !args.follow || finishing {
            break;
        }
        out.flush()?;
        // Ends when the run does, including when its orch died.
        if let Err(e) = mark_interrupted(reader, state_dir) {
            return Ok(Some(e));
        }
        match reader.run_status(run_id) {
            Ok(Some(RunStatus::Running)) => std::thread::sleep(POLL),
            // One more read for what was committed with the end.
            Ok(_) => finishing = true,
            Err(e) => return Ok(Some(e)),
        }
    }
    if json_array {
        writeln!(out, "{}]", if first { "" } else { "\n" })?;
    }
    Ok(None)
}

/// A usage error when `phase` is not in a run that has ended (a running
/// run may not have reached it yet).
fn check_phase(reader: &Reader, run_id: &str, phase: &str) -> Result<(), CliError> {
    // Cheap on purpose: `reader.run` would count every event of the run.
    let Some(status) = reader.run_status(run_id)? else {
        return Ok(());
    };
    let names = reader.phase_names(run_id)?;
    if status == RunStatus::Running || names.iter().any(|n| n == phase) {
        return Ok(());
    }
    let mut message = format!("run `{run_id}` has no phase `{phase}`");
    if !names.is_empty() {
        message.push_str(&format!(" (it has {})", names.join(", ")));
    }
    Err(CliError::usage(message))
}

/// `12:00:01.250  audit/codex#1  3  tool_call  {"name":"Read",...}`
fn event_line(out: &mut impl Write, ev: &EventRow) -> io::Result<()> {
    let detail = match &ev.data {
        serde_json::Value::Object(map) => {
            let mut map = map.clone();
            map.remove("kind");
            serde_json::Value::Object(map).to_string()
        }
        serde_json::Value::Null => ev.raw.clone(),
        other => other.to_string(),
    };
    // The line as recorded, shown on one line with whatever a terminal
    // would act on escaped (an agent's output, its CLI's, a tool name).
    let line = format!(
        "{}  {}/{}#{}  {}  {}  {}",
        time_of_day(ev.ts_ms),
        ev.phase,
        ev.agent,
        ev.attempt,
        ev.seq,
        ev.kind,
        detail
    );
    writeln!(out, "{}", text::line(&line))
}

/// Left-aligned columns two spaces apart, without trailing blanks. Every
/// cell is shown on one line through [`text::line`]: reasons quote agents,
/// and a stored run's names are what its database says.
fn table(out: &mut impl Write, headers: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|c| text::line(c).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| -> io::Result<()> {
        let mut s = String::new();
        for (cell, w) in cells.zip(&widths) {
            s.push_str(cell);
            s.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 2));
        }
        writeln!(out, "{}", s.trim_end())
    };
    line(&mut headers.iter().copied())?;
    for row in &rows {
        line(&mut row.iter().map(String::as_str))?;
    }
    Ok(())
}

/// How long from start to end, `-` when either is missing.
fn span(start: Option<u64>, end: Option<u64>) -> String {
    match (start, end) {
        (Some(s), Some(e)) => duration(e.saturating_sub(s)),
        _ => "-".into(),
    }
}

/// Mark the runs whose orch is gone as interrupted: all that say running
/// when no orch holds the state directory's run lock, else those whose
/// orch's process is gone.
fn mark_interrupted(
    reader: &Reader,
    state_dir: &Path,
) -> Result<Vec<String>, crate::store::StoreError> {
    if crate::store::RunLock::is_free(state_dir) {
        reader.mark_all_interrupted()
    } else {
        reader.mark_interrupted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_needs_both_ends() {
        assert_eq!(span(Some(1_000), Some(126_000)), "2m5s");
        assert_eq!(span(Some(1_000), None), "-");
        assert_eq!(span(None, Some(1_000)), "-");
    }

    #[test]
    fn cells_are_shown_on_one_line() {
        let mut out = Vec::new();
        table(
            &mut out,
            &["A", "REASON"],
            &[vec![
                "x".into(),
                "\u{1b}]52;c;eA==\u{7}\r\nfake\u{202e}".into(),
            ]],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "A  REASON\nx  \\x1b]52;c;eA==\\x07\\r\\nfake\\u{202e}\n"
        );
    }

    #[test]
    fn tables_align_and_trim() {
        let mut out = Vec::new();
        table(
            &mut out,
            &["A", "LONG"],
            &[vec!["xyz".into(), "1".into()], vec!["q".into(), "".into()]],
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "A    LONG\nxyz  1\nq\n");
    }
}
