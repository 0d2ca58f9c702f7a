//! What a person watching `orch run` sees: plain timestamped lines on
//! stderr when it is not a terminal (or `CI` is set); on a terminal, a live
//! view with one line per running agent above which finished work scrolls.
//! Both follow the run's event stream.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{date_time, duration, now_ms, time_of_day};
use crate::engine::{Listener, RunEvent};
use crate::report::{github, text};
use crate::store::{Outcome, Record};

/// The phase an event is about and the line printed for it (`None`:
/// nothing to print). Reasons, verdicts and warnings quote agents, so the
/// line is shown through [`text::line`]: one line, nothing a terminal acts
/// on.
fn progress_line(p: &RunEvent) -> Option<(&str, String)> {
    let line = match p {
        RunEvent::Recorded(Record::PhaseStarted { phase, .. }) => {
            (phase, format!("phase {phase}: started"))
        }
        RunEvent::Recorded(Record::PhaseFinished {
            phase,
            outcome,
            reason,
            started_ms,
            ended_ms,
            ..
        }) => (
            phase,
            match reason {
                Some(r) if *outcome != Outcome::Succeeded => {
                    format!("phase {phase}: {} ({r})", outcome.as_str())
                }
                _ => format!(
                    "phase {phase}: {} in {}",
                    outcome.as_str(),
                    duration(ended_ms.saturating_sub(started_ms.unwrap_or(*ended_ms)))
                ),
            },
        ),
        RunEvent::Recorded(Record::AttemptStarted {
            phase,
            agent,
            attempt,
            ..
        }) => (
            phase,
            format!("  {phase}/{agent}: attempt {attempt} started"),
        ),
        RunEvent::Recorded(Record::AttemptFinished {
            phase,
            agent,
            attempt,
            outcome,
            reason,
            turns,
            started_ms,
            ended_ms,
            ..
        }) => {
            let took = duration(ended_ms.saturating_sub(*started_ms));
            let line = match reason {
                Some(r) if *outcome != Outcome::Succeeded => {
                    format!("  {phase}/{agent}: attempt {attempt} {outcome} after {took}: {r}")
                }
                _ => format!(
                    "  {phase}/{agent}: attempt {attempt} {outcome} in {took} ({turns} turns)"
                ),
            };
            (phase, line)
        }
        RunEvent::Recorded(_) | RunEvent::Activity { .. } => return None,
        RunEvent::Judged {
            phase,
            judge,
            round,
            rejected,
        } => (
            phase,
            match rejected {
                None => format!("  {phase}: judge {judge} approved round {round}"),
                Some(why) => format!("  {phase}: judge {judge} rejected round {round}: {why}"),
            },
        ),
        RunEvent::ContractWarning { phase, message } => (
            phase,
            format!("  {phase}: warning (validation = \"trust\"): {message}"),
        ),
        RunEvent::Retrying {
            phase,
            agent,
            wait,
            rate_limited,
        } => {
            let shown = humantime::format_duration(Duration::from_millis(wait.as_millis() as u64));
            let line = match rate_limited {
                Some(Some(lifts)) if *lifts > now_ms() + wait.as_millis() as u64 + 1000 => format!(
                    "  {phase}/{agent}: rate limited until {} (more than orch waits); retrying in {shown}",
                    date_time(*lifts)
                ),
                Some(Some(lifts)) => format!(
                    "  {phase}/{agent}: rate limited until {}; retrying in {shown}",
                    time_of_day(*lifts)
                ),
                Some(None) => format!("  {phase}/{agent}: rate limited; retrying in {shown}"),
                None => format!("  {phase}/{agent}: retrying in {shown}"),
            };
            (phase, line)
        }
    };
    Some((line.0.as_str(), text::line(&line.1).into_owned()))
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// A live view with one line per running agent (phase, agent, elapsed,
    /// turns, last tool) above which finished work scrolls.
    Terminal,
    /// Timestamped lines on stderr (not a terminal, or `CI` set).
    Plain,
    /// Timestamped lines, each phase's in a `::group::` of the GitHub
    /// Actions log. Groups do not nest and phases run side by side, so a
    /// phase's lines are held until it ends and printed as one group; its
    /// start is printed at once, outside any group. Inside the group the
    /// runner reads no workflow command ([`github::text_only`]).
    GitHub,
}

pub(super) fn progress_view(view: View) -> (Arc<dyn Listener>, Option<indicatif::MultiProgress>) {
    if view == View::GitHub {
        let held: std::sync::Mutex<HashMap<String, Vec<String>>> = Default::default();
        let f: Arc<dyn Listener> = Arc::new(move |p: &RunEvent| {
            let Some((phase, line)) = progress_line(p) else {
                return;
            };
            let line = format!("[{}] {line}", time_of_day(now_ms()));
            let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
            // Buffered, written when the listener returns: a phase's group
            // goes out in one write, not a system call per piece.
            let mut err = std::io::BufWriter::new(std::io::stderr().lock());
            match p {
                RunEvent::Recorded(Record::PhaseStarted { .. }) => {
                    let _ = writeln!(err, "{line}");
                }
                RunEvent::Recorded(Record::PhaseFinished { .. }) => {
                    let lines = held.remove(phase).unwrap_or_default();
                    let _ = writeln!(err, "{}", github::group(&line));
                    // Reasons and verdicts quote agents: the runner reads
                    // no command in them.
                    let _ = github::text_only(&mut err, !lines.is_empty(), |err| {
                        lines.iter().try_for_each(|l| writeln!(err, "{l}"))
                    });
                    let _ = writeln!(err, "{}", github::END_GROUP);
                }
                _ => held.entry(phase.to_string()).or_default().push(line),
            }
        });
        return (f, None);
    }
    if view == View::Plain {
        let f: Arc<dyn Listener> = Arc::new(|p: &RunEvent| {
            if let Some((_, line)) = progress_line(p) {
                // One write per line: stderr is unbuffered, and a formatted
                // write is a system call per piece.
                let line = format!("[{}] {line}\n", time_of_day(now_ms()));
                let _ = std::io::stderr().write_all(line.as_bytes());
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
    let f: Arc<dyn Listener> = Arc::new(move |p: &RunEvent| {
        let mut bars = bars.lock().unwrap_or_else(|e| e.into_inner());
        match p {
            RunEvent::Recorded(Record::AttemptStarted {
                phase,
                agent,
                attempt,
                ..
            }) => {
                let bar = m.add(ProgressBar::new_spinner());
                bar.set_style(style.clone());
                bar.set_prefix(text::line(&format!("{phase}/{agent}")).into_owned());
                bar.set_message(if *attempt > 1 {
                    format!("attempt {attempt}")
                } else {
                    String::new()
                });
                bar.enable_steady_tick(Duration::from_millis(120));
                bars.insert((phase.clone(), agent.clone()), bar);
                return;
            }
            RunEvent::Activity {
                phase,
                agent,
                turns,
                last_tool,
            } => {
                if let Some(bar) = bars.get(&(phase.clone(), agent.clone())) {
                    let tool = last_tool
                        .as_deref()
                        .map(|t| format!(", last tool {}", text::line(t)))
                        .unwrap_or_default();
                    bar.set_message(format!("{turns} turns{tool}"));
                }
                return;
            }
            RunEvent::Recorded(Record::AttemptFinished { phase, agent, .. }) => {
                if let Some(bar) = bars.remove(&(phase.clone(), agent.clone())) {
                    bar.finish_and_clear();
                    m.remove(&bar);
                }
            }
            _ => {}
        }
        if let Some((_, line)) = progress_line(p) {
            let _ = m.println(line);
        }
    });
    (f, Some(multi))
}
