//! One agent attempt, supervised: its own process group, the adapter's files
//! written first and removed after, stdin as the adapter says, stdout and
//! stderr read at the same time with a line-length cap, every line parsed and
//! recorded, and the limits enforced from outside: wall-clock timeout, stall
//! timeout (no output), the turn budget for CLIs without one, and
//! cancellation. Stopping is TERM to the group, a grace period, then KILL;
//! once the agent's process has exited, the whole group is killed, and the
//! attempt's cgroup (or the orphans orch adopted), so no grandchild
//! outlives it, not even one that left the group; orch reads the output a
//! short grace longer ([`PIPES_GRACE`]), so a process out of its reach that
//! holds the pipes open cannot keep the attempt waiting.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe::Receiver;
use tokio::sync::{mpsc, watch};

use crate::agents::invocation::{Invocation, Stdin};
use crate::agents::{adapter, probe};
use crate::clock::now_ms;
use crate::confine::{Io, Launch};
use crate::events::{Event, rate_limit};
use crate::model::AgentKind;
use crate::store::{AttemptKey, Outcome, Record};

use super::events::{Events, RunEvent};
use super::reaper;
use super::tally::{Ending, Tally, classify};
use super::terminate::Termination;

/// Longest line kept from an agent's output; the rest of a longer line is
/// dropped (and the line marked), so one runaway line cannot eat memory.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// How much of the last stderr line a failure's reason quotes.
const LAST_ERR_CHARS: usize = 300;

/// How often, at most, a busy attempt asks whether its process has exited.
const REAP_CHECK: Duration = Duration::from_millis(5);

/// How long orch goes on reading an attempt's output once its process has
/// exited and the rest of its tree was killed. A process that escaped the
/// kill (where orch has no cgroup for the attempt) and holds the output
/// pipes open cannot keep the attempt, and the run, alive past it.
const PIPES_GRACE: Duration = Duration::from_secs(2);

/// How running work is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancel {
    No,
    /// TERM, grace period, KILL (first Ctrl-C, or a failed required phase).
    Graceful,
    /// KILL now (second Ctrl-C).
    Immediate,
}

/// Everything one attempt needs.
#[derive(Clone)]
pub(crate) struct AttemptSpec {
    pub(crate) run_id: String,
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    pub(crate) kind: AgentKind,
    pub(crate) invocation: Invocation,
    pub(crate) timeout: Option<Duration>,
    pub(crate) stall_timeout: Option<Duration>,
    /// Set when orch enforces the turn limit (the CLI has none).
    pub(crate) max_turns: Option<u32>,
    pub(crate) grace: Duration,
    /// Kills the attempt's process group if orch dies.
    pub(crate) keeper: Option<std::sync::Arc<super::keeper::Keeper>>,
    /// Where the raw stdout/stderr of the attempt are kept.
    pub(crate) log_dir: PathBuf,
    /// The attempt's process tree, known once its process starts.
    pub(crate) tree: std::sync::Arc<crate::confine::ProcessTree>,
    /// orch's endpoints for the attempt (its own MCP tools, the pipeline's
    /// stdio servers), opened once the attempt's directory exists and
    /// before its process starts.
    pub(crate) endpoints: Vec<std::sync::Arc<crate::mcp::Endpoint>>,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub(crate) struct AttemptResult {
    pub(crate) outcome: Outcome,
    pub(crate) exit_code: Option<i32>,
    pub(crate) reason: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) turns: u32,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) cost_usd: Option<f64>,
    /// A rate limit was seen; inside, when it lifts (Unix milliseconds),
    /// when the CLI said.
    pub(crate) rate_limited: Option<Option<u64>>,
    /// Retrying cannot help (a missing binary, weakened rules).
    pub(crate) permanent: bool,
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
}

impl AttemptResult {
    /// An attempt started at `started_ms` that has not succeeded (yet).
    pub(crate) fn new(started_ms: u64) -> Self {
        AttemptResult {
            outcome: Outcome::Failed,
            exit_code: None,
            reason: None,
            session_id: None,
            turns: 0,
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: None,
            rate_limited: None,
            permanent: false,
            started_ms,
            ended_ms: started_ms,
        }
    }
}

/// Tool results that say the OS refused an access, for a confined agent:
/// each is recorded as a `permission_denied` event naming the tool (the
/// agent itself sees its tool's normal error, "Permission denied").
#[derive(Default)]
struct OsRefusals {
    /// The tool of each call whose result has not come yet.
    calls: std::collections::HashMap<String, String>,
}

impl OsRefusals {
    /// What the kernel says when Landlock refuses an access.
    const SIGNS: [&'static str; 3] = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ];

    /// Add a refusal after each result of `events` that shows one (unless
    /// the CLI already reported it as refused).
    fn note(&mut self, events: &mut Vec<Event>) {
        let mut extra = Vec::new();
        let reported = events
            .iter()
            .any(|e| matches!(e, Event::PermissionDenied { .. }));
        for e in events.iter() {
            match e {
                Event::ToolCall {
                    id: Some(id), name, ..
                } => {
                    self.calls.insert(id.clone(), name.clone());
                }
                Event::ToolResult { id, output, .. } => {
                    let tool = id
                        .as_ref()
                        .and_then(|id| self.calls.remove(id))
                        .unwrap_or_else(|| "unknown".into());
                    let line = output
                        .lines()
                        .find(|l| Self::SIGNS.iter().any(|s| l.contains(s)));
                    if let Some(line) = line.filter(|_| !reported) {
                        let line: String = line.trim().chars().take(300).collect();
                        extra.push(Event::PermissionDenied {
                            tool,
                            reason: Some(format!("refused by the operating system: {line}")),
                        });
                    }
                }
                _ => {}
            }
        }
        events.extend(extra);
    }
}

enum Line {
    Out(String, bool),
    Err(String, bool),
}

/// Most lines handled in one turn of an attempt's loop, and most bytes:
/// a stop (timeout, cancel, the KILL after the grace) waits for the batch
/// in hand, so its work stays about a millisecond however long the lines
/// (round z6: 256 lines of 1 MiB held a timeout back 3.6 s).
const LINE_BATCH: usize = 256;
const LINE_BATCH_BYTES: usize = 64 * 1024;

/// Read lines with a cap; a longer line is cut (the flag says so) and the
/// rest of it skipped. Ends at EOF or when the receiver is gone.
async fn read_lines<R: AsyncRead + Unpin>(r: R, tx: mpsc::Sender<Line>, stdout: bool) {
    let mut reader = BufReader::with_capacity(64 * 1024, r);
    let mut buf: Vec<u8> = Vec::new();
    while let Ok((n, cut)) = crate::lines::read_capped(&mut reader, &mut buf, MAX_LINE).await {
        if n == 0 {
            break;
        }
        // The bytes become the line (no copy) when they are UTF-8.
        let line = match String::from_utf8(std::mem::take(&mut buf)) {
            Ok(line) => line,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        let sent = tx
            .send(if stdout {
                Line::Out(line, cut)
            } else {
                Line::Err(line, cut)
            })
            .await;
        if sent.is_err() {
            break;
        }
    }
}

/// orch's end of an output stream of the agent's process ([`Io::Pipe`] or
/// [`Io::Socket`]), to read.
fn reading(fd: std::os::fd::OwnedFd, io: Io) -> std::io::Result<Box<dyn AsyncRead + Unpin + Send>> {
    Ok(if io == Io::Socket {
        Box::new(socket(fd)?)
    } else {
        Box::new(Receiver::from_owned_fd(fd)?)
    })
}

/// orch's end of the agent's standard input, to write.
fn writing(
    fd: std::os::fd::OwnedFd,
    io: Io,
) -> std::io::Result<Box<dyn AsyncWrite + Unpin + Send>> {
    Ok(if io == Io::Socket {
        Box::new(socket(fd)?)
    } else {
        Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)
    })
}

fn socket(fd: std::os::fd::OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(socket)
}

/// One line into a raw log (buffered): two copies, not the formatting
/// machinery a `writeln!` runs per line.
fn log_line(f: &mut std::io::BufWriter<std::fs::File>, text: &str) {
    use std::io::Write;
    let _ = f.write_all(text.as_bytes());
    let _ = f.write_all(b"\n");
}

/// Write out what the raw logs hold so far.
fn flush_logs(
    out: &mut Option<std::io::BufWriter<std::fs::File>>,
    err: &mut Option<std::io::BufWriter<std::fs::File>>,
) {
    use std::io::Write;
    for f in [out, err].into_iter().flatten() {
        let _ = f.flush();
    }
}

/// Kill what is left of the agent's process group, its leader ended and
/// not reaped yet (the group's number names no other process until then),
/// and tell the keeper the group is gone: once, whichever way the end was
/// seen first.
fn end_group(ending: &mut Termination, keeper: Option<&std::sync::Arc<super::keeper::Keeper>>) {
    if let (Some(pg), Some(k)) = (ending.kill(), keeper) {
        k.release(pg.as_raw());
    }
}

/// Kill every process of the attempt's tree: its cgroup (`cgroup.kill`,
/// waiting until it is empty), then the orphans orch adopted. Both block
/// (a few seconds at most), so on a thread of the blocking pool.
async fn end_tree(tree: &std::sync::Arc<crate::confine::ProcessTree>) {
    let tree = std::sync::Arc::clone(tree);
    let _ = tokio::task::spawn_blocking(move || {
        tree.kill_all();
        reaper::sweep();
    })
    .await;
}

/// Why an attempt ended before its CLI started, and whether a later
/// attempt could fare better.
struct NotStarted {
    outcome: Outcome,
    reason: String,
    permanent: bool,
}

/// Make the undumpable copy of the CLI's program the attempt starts from,
/// if it has one (`probe::make_program`: a few seconds the first time, and
/// a wait for another orch's copy): on the blocking pool, raced with the
/// run's cancel and the attempt's timeout, which end the attempt's wait
/// (the copy goes on to its end on its own, under its lock; if orch exits
/// first, the next copy removes what it left). `None` when the CLI may
/// start.
async fn copy_program(
    inv: &crate::agents::invocation::Invocation,
    timeout: Option<Duration>,
    begun: Instant,
    cancel: &mut watch::Receiver<Cancel>,
) -> Option<NotStarted> {
    let copy = std::sync::Arc::clone(inv.undumpable.as_ref()?);
    let making = tokio::task::spawn_blocking(move || probe::make_copy(&copy));
    let timed_out = async {
        match timeout {
            // Whatever is left of it (a timeout of years cannot overflow).
            Some(t) => tokio::time::sleep(t.saturating_sub(begun.elapsed())).await,
            None => std::future::pending().await,
        }
    };
    let cancelled = cancel.wait_for(|c| *c != Cancel::No);
    let failed = |reason: String, permanent: bool| NotStarted {
        outcome: Outcome::Failed,
        reason,
        permanent,
    };
    tokio::select! {
        made = making => match made {
            Ok(Ok(())) => None,
            // Another process held the copies' lock too long: a later
            // attempt may find it free.
            Ok(Err(e)) => Some(failed(e.to_string(), e.kind() != std::io::ErrorKind::TimedOut)),
            Err(e) => Some(failed(format!("the copying thread failed: {e}"), true)),
        },
        // (A sender gone is no cancel.)
        Ok(_) = cancelled => Some(NotStarted {
            outcome: Outcome::Cancelled,
            reason: "cancelled".into(),
            permanent: false,
        }),
        () = timed_out => Some(NotStarted {
            outcome: Outcome::TimedOut,
            reason: format!(
                "timed out after {} while its program was copied",
                humantime::format_duration(timeout.unwrap_or_default())
            ),
            permanent: false,
        }),
    }
}

/// Run one attempt to its end. Never panics on the agent's behaviour.
pub(crate) async fn run_attempt(
    spec: AttemptSpec,
    stream: Events,
    mut cancel: watch::Receiver<Cancel>,
) -> AttemptResult {
    let started_ms = now_ms();
    // The attempt's wall clock: its timeout counts from here, the copy of
    // its program included.
    let begun = Instant::now();
    let inv = &spec.invocation;
    let mut result = AttemptResult::new(started_ms);
    let finish = |mut r: AttemptResult| {
        r.ended_ms = now_ms();
        r
    };

    // orch's shells could not be given to it (see `assemble::shells`): it
    // does not start, and the reason is the attempt's, not its folder's.
    if let Some(Err(why)) = inv.shells.as_ref().map(|s| &s.program) {
        result.reason = Some(format!("`{}` cannot start: {why}", inv.program));
        result.permanent = true;
        return finish(result);
    }
    if let Err(e) = probe::write_files(inv) {
        result.reason = Some(format!("cannot prepare the attempt's own directory: {e}"));
        result.permanent = true;
        return finish(result);
    }
    if let Some(not) = copy_program(inv, spec.timeout, begun, &mut cancel).await {
        probe::remove_files(inv);
        result.outcome = not.outcome;
        result.reason = Some(not.reason);
        result.permanent = not.permanent;
        return finish(result);
    }
    for endpoint in &spec.endpoints {
        if let Err(e) = endpoint.open() {
            probe::remove_files(inv);
            result.reason = Some(format!(
                "cannot open orch's endpoint `{}` for the attempt: {e}",
                endpoint.socket().display()
            ));
            result.permanent = true;
            return finish(result);
        }
    }
    let _ = std::fs::create_dir_all(&spec.log_dir);

    // A CLI's output is its event stream: sockets, which a process the CLI
    // starts cannot open again through `/proc/<cli>/fd` to write lines
    // that pass for the CLI's (docs/confinement.md, "Lines that pass for
    // the CLI's"). A plain command's output is plain text its own
    // processes write anyway, and its scripts may open `/dev/stderr`,
    // which a socket refuses: pipes.
    let streams = if spec.kind == AgentKind::Command {
        Io::Pipe
    } else {
        Io::Socket
    };
    let Some(command) = inv.start_command(|n| std::env::var(n).ok()) else {
        probe::remove_files(inv);
        result.reason = Some(format!(
            "`{}` was not found on PATH past the folders an agent may write or that lead \
             into one (is it installed? give its path as `agents.<name>.binary` to run one \
             from such a folder)",
            inv.program
        ));
        result.permanent = true;
        return finish(result);
    };
    let launch = Launch::from_command(&command, inv.inherit_env)
        .stdin(match inv.stdin {
            Stdin::Null => Io::Null,
            Stdin::Text(_) => streams,
        })
        .stdout(streams)
        .stderr(streams)
        .own_group();
    // Confined, it is started by a thread its level's starter made. The
    // process is born in the tree's cgroup and enters the confinement
    // before it executes (see `crate::confine::start`); orch keeps a pidfd
    // of it.
    let start = {
        let confinement = inv.confinement.clone();
        let tree = std::sync::Arc::clone(&spec.tree);
        let undumpable = inv
            .undumpable
            .as_ref()
            .and_then(|c| c.path().file_name())
            .map(std::ffi::OsStr::to_os_string);
        move || {
            let mut spawned = reaper::start_own(|| {
                let spawned =
                    crate::agents::invocation::start(confinement.as_ref(), Some(&tree), &launch);
                let pid = match &spawned {
                    Ok(Ok(child)) => Some(child.id()),
                    _ => None,
                };
                (spawned, pid)
            });
            if let Ok(Ok(child)) = &spawned {
                tree.started(child.id());
            }
            // Started from an undumpable copy of its program: it must be
            // undumpable, or it does not run (see `confine::undumpable`).
            if let (Some(name), Ok(Ok(child))) = (&undumpable, &mut spawned)
                && let Err(why) = crate::confine::undumpable::held(child.id(), name)
            {
                child.kill();
                return Err(crate::confine::ConfineError(why));
            }
            spawned
        }
    };
    // The spawn returns once the child executed (or could not): on a
    // thread of the blocking pool, not one of the runtime's few workers,
    // which go on running the other attempts.
    let spawned = match tokio::task::spawn_blocking(start).await {
        Ok(spawned) => spawned,
        Err(e) => Err(crate::confine::ConfineError(format!(
            "the starting thread failed: {e}"
        ))),
    };
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) => {
            // Confinement was expected: the CLI never runs without it.
            probe::remove_files(inv);
            result.reason = Some(format!("`{}` was not started: {e}", inv.program));
            result.permanent = true;
            return finish(result);
        }
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            probe::remove_files(inv);
            result.reason = Some(if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "`{}` was not found (is it installed and on PATH?)",
                    inv.program
                )
            } else {
                format!("cannot start `{}`: {e}", inv.program)
            });
            result.permanent = true;
            return finish(result);
        }
    };
    let (out, err) = match (
        child.stdout.take().map(|fd| reading(fd, streams)),
        child.stderr.take().map(|fd| reading(fd, streams)),
    ) {
        (Some(Ok(out)), Some(Ok(err))) => (out, err),
        _ => {
            drop(child);
            probe::remove_files(inv);
            result.reason = Some(format!("cannot read the output of `{}`", inv.program));
            result.permanent = true;
            return finish(result);
        }
    };
    // orch's own child, reaped (and forgotten by the registry of orch's
    // children) by `child`.
    let leader = Some(child.id());
    let pgid = leader.map(|p| Pid::from_raw(p as i32));
    if let (Some(k), Some(pg)) = (&spec.keeper, pgid) {
        k.watch(pg.as_raw());
    }
    if let (Stdin::Text(text), Some(Ok(mut pipe))) = (
        &inv.stdin,
        child.stdin.take().map(|fd| writing(fd, streams)),
    ) {
        let text = text.clone();
        tokio::spawn(async move {
            let _ = pipe.write_all(text.as_bytes()).await;
            let _ = pipe.shutdown().await;
        });
    }
    let (tx, mut rx) = mpsc::channel::<Line>(1024);
    let out = tokio::spawn(read_lines(out, tx.clone(), true));
    let err = tokio::spawn(read_lines(err, tx, false));

    let adapter = adapter(spec.kind);
    // Buffered, and flushed whenever no further line is waiting (see the
    // loop), so a fast agent costs one write per batch of lines, not one
    // per line, while a slow one's log stays current.
    // Private, like the run database: agents print secrets too.
    let log = |stream: &str| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(
                spec.log_dir
                    .join(format!("attempt-{}.{stream}", spec.attempt)),
            )
            .ok()
            .map(|f| std::io::BufWriter::with_capacity(64 * 1024, f))
    };
    let mut raw_out = log("stdout");
    let mut raw_err = log("stderr");
    let mut seq: u64 = 0;
    // The ids once per attempt; each event shares them.
    let key = AttemptKey::new(&spec.run_id, &spec.phase, &spec.agent, spec.attempt);
    let mut record = |kind: Cow<'static, str>, data_json: Cow<'static, str>, raw: String| {
        stream.record(Record::Event {
            key: std::sync::Arc::clone(&key),
            seq,
            ts_ms: now_ms(),
            kind,
            data_json,
            raw,
        });
        seq += 1;
    };

    let mut last_output = Instant::now();
    let mut stop: Option<(Outcome, String)> = None;
    let mut tally = Tally::default();
    let mut refusals = OsRefusals::default();
    let mut ending = Termination::new(pgid, spec.grace);
    let mut weakened: Option<String> = None;
    // The last thing the process said on stderr: a failure's reason names
    // it, so "exited with status 41" comes with the CLI's own why.
    let mut last_err: Option<String> = None;
    let mut streams_open = true;
    // When the agent's own process was seen to have exited (its tree was
    // ended then).
    let mut leader_gone: Option<Instant> = None;
    // The readers were stopped: a process outside orch's reach held the
    // pipes open past the grace.
    let mut pipes_dropped = false;
    let tick = Duration::from_millis(100);
    // One timer for the whole attempt, re-armed when it fires: a fresh
    // `sleep` per loop turn would register and cancel a timer per line.
    let ticker = tokio::time::sleep(tick);
    tokio::pin!(ticker);
    // `try_wait` is a `wait4` system call: at most once per `REAP_CHECK`
    // while lines stream in (and on every tick when they do not).
    let mut next_reap_check = Instant::now();

    let status = loop {
        // Decide whether to stop, and escalate TERM to KILL after the grace.
        if stop.is_none() {
            let c = *cancel.borrow();
            if c != Cancel::No {
                stop = Some((Outcome::Cancelled, "cancelled".into()));
            } else if spec.timeout.is_some_and(|t| begun.elapsed() > t) {
                stop = Some((
                    Outcome::TimedOut,
                    format!(
                        "timed out after {}",
                        humantime::format_duration(spec.timeout.unwrap_or_default())
                    ),
                ));
            } else if spec
                .stall_timeout
                .is_some_and(|t| last_output.elapsed() > t)
            {
                stop = Some((
                    Outcome::TimedOut,
                    format!(
                        "no output for {}",
                        humantime::format_duration(spec.stall_timeout.unwrap_or_default())
                    ),
                ));
            } else if let Some(max) = spec.max_turns.filter(|_| tally.over_budget) {
                stop = Some((
                    Outcome::Failed,
                    format!("turn limit {max} reached (enforced by orch)"),
                ));
            }
            if stop.is_some() {
                ending.ask(Instant::now());
            }
        }
        // When the agent's own process has exited (by itself, or killed
        // after a timeout or cancel), the attempt is over: children it left
        // behind (even ones that ignore TERM) go with the group, and those
        // that left the group (`setsid`, a double fork) with the attempt's
        // cgroup, or as orphans orch adopted. That also closes the pipes
        // they held open.
        if leader_gone.is_none() && Instant::now() >= next_reap_check {
            next_reap_check = Instant::now() + REAP_CHECK;
            if matches!(child.has_ended(), Ok(true)) {
                leader_gone = Some(Instant::now());
                // Before the reap: until then the group's number is the
                // leader's and names no other process.
                end_group(&mut ending, spec.keeper.as_ref());
                let _ = child.try_wait();
                end_tree(&spec.tree).await;
            }
        }
        // Whatever still holds the pipes is out of orch's reach: stop
        // reading after the grace (what was read is kept), so it cannot
        // keep the attempt waiting.
        if streams_open
            && !pipes_dropped
            && leader_gone.is_some_and(|at| at.elapsed() >= PIPES_GRACE)
        {
            out.abort();
            err.abort();
            pipes_dropped = true;
        }
        ending.escalate(Instant::now(), *cancel.borrow() == Cancel::Immediate);

        tokio::select! {
            // Lines first: the checks above run on every turn, so a busy
            // agent needs no other branch polled.
            biased;
            line = rx.recv(), if streams_open => {
                let Some(line) = line else {
                    streams_open = false;
                    flush_logs(&mut raw_out, &mut raw_err);
                    continue;
                };
                last_output = Instant::now();
                // The lines already waiting, up to LINE_BATCH lines or
                // LINE_BATCH_BYTES, in this one turn: the checks above
                // (clocks, the cancel) run once per batch, not once per
                // line. A turn limit reached or weaker rules seen end the
                // batch at once, so the stop they call for is not held back.
                let mut line = line;
                let mut taken = 0;
                let mut bytes = 0;
                loop {
                    bytes += match &line {
                        Line::Out(text, _) | Line::Err(text, _) => text.len(),
                    };
                    match line {
                        Line::Out(text, cut) => {
                            let text = if cut { format!("{text} [line cut at {MAX_LINE} bytes]") } else { text };
                            if let Some(f) = raw_out.as_mut() {
                                log_line(f, &text);
                            }
                            let mut events = if cut { Vec::new() } else { adapter.parse_line(&text) };
                            if inv.confinement.is_some() {
                                refusals.note(&mut events);
                            }
                            let unparsed = events.is_empty();
                            for ev in events {
                                if matches!(ev, Event::ToolCall { .. } | Event::TurnEnd) {
                                    let last_tool = match &ev {
                                        Event::ToolCall { name, .. } => Some(name.clone()),
                                        _ => None,
                                    };
                                    stream.emit(RunEvent::Activity {
                                        phase: spec.phase.clone(),
                                        agent: spec.agent.clone(),
                                        turns: tally.turns + u32::from(matches!(ev, Event::TurnEnd)),
                                        last_tool,
                                    });
                                }
                                // A process the CLI started can write lines into
                                // its stdout (docs/confinement.md, "Lines that
                                // pass for the CLI's"): no line lowers a figure
                                // or changes the session once the CLI named it.
                                tally.apply(&ev, stop.is_some(), spec.max_turns);
                                let data = serde_json::to_string(&ev).unwrap_or_else(|_| "null".into());
                                record(ev.kind().into(), data.into(), text.clone());
                            }
                            if unparsed {
                                record("raw".into(), "null".into(), text);
                            }
                        }
                        Line::Err(text, cut) => {
                            let text = if cut { format!("{text} [line cut at {MAX_LINE} bytes]") } else { text };
                            if let Some(f) = raw_err.as_mut() {
                                log_line(f, &text);
                            }
                            let said = text.trim();
                            if !said.is_empty() {
                                last_err = Some(said.chars().take(LAST_ERR_CHARS).collect());
                            }
                            if weakened.is_none()
                                && let Some(why) = adapter.weakened(&text)
                            {
                                // The CLI runs with weaker rules than asked: stop
                                // it now, before the model acts under them.
                                weakened = Some(format!("{why}: {}", text.trim()));
                                if stop.is_none() {
                                    ending.ask(Instant::now());
                                }
                            }
                            if let Some(limit) = rate_limit::read(&text) {
                                tally.rate_limit(limit);
                            }
                            // A stderr line is stored once: as what it means, or
                            // as plain stderr.
                            let events = adapter.parse_stderr_line(&text);
                            if events.is_empty() {
                                record("stderr".into(), "null".into(), text);
                            } else {
                                for ev in events {
                                    let data = serde_json::to_string(&ev).unwrap_or_else(|_| "null".into());
                                    record(ev.kind().into(), data.into(), text.clone());
                                }
                            }
                        }
                    }
                    taken += 1;
                    if taken == LINE_BATCH
                        || bytes >= LINE_BATCH_BYTES
                        || tally.over_budget
                        || weakened.is_some()
                    {
                        break;
                    }
                    match rx.try_recv() {
                        Ok(next) => line = next,
                        Err(_) => break,
                    }
                }
                if rx.is_empty() {
                    flush_logs(&mut raw_out, &mut raw_err);
                }
            }
            ended = child.ended(), if !streams_open => {
                // The group goes before the leader is reaped (see above).
                end_group(&mut ending, spec.keeper.as_ref());
                break ended.and_then(|()| {
                    child.try_wait()?.ok_or_else(|| std::io::Error::other("it ended but was not reaped"))
                });
            }
            _ = cancel.changed() => {}
            _ = &mut ticker => {
                ticker.as_mut().reset(tokio::time::Instant::now() + tick);
            }
        }
    };
    // The leader is gone; the rest of its group went with it (just before
    // the reap), now every process that left the group.
    // Everything in the attempt's cgroup, however deep or re-parented,
    // then what escaped it (or all orphans, without a cgroup). With a
    // cgroup once is enough: its kill waits until the cgroup is empty, so
    // nothing of it is left once it was done as the leader was seen gone.
    // Without one, again: a process that left the group becomes orch's
    // orphan only once its parent, killed with the group, has finished
    // exiting, which the first sweep may not have seen yet.
    if leader_gone.is_none() || !spec.tree.has_cgroup() {
        end_tree(&spec.tree).await;
    }
    let _ = out.await;
    let _ = err.await;
    probe::remove_files(inv);

    let ended = classify(
        &Ending {
            kind: spec.kind,
            status: &status,
            stop,
            weakened: weakened.as_deref(),
            last_err: last_err.as_deref(),
        },
        &tally,
    );
    result.exit_code = status.as_ref().ok().and_then(|s| s.code());
    result.outcome = ended.outcome;
    result.reason = ended.reason;
    result.permanent = ended.permanent;
    result.turns = tally.turns;
    result.session_id = tally.session_id;
    result.tokens_in = tally.tokens_in;
    result.tokens_out = tally.tokens_out;
    result.cost_usd = tally.cost_usd;
    result.rate_limited = tally.rate_limited;
    // The tree goes with the attempt: its cgroup is killed again and
    // removed, each a cgroup change that may wait for others (see where it
    // started), on the blocking pool. The endpoints hold the tree too:
    // they go first.
    let AttemptSpec {
        tree, endpoints, ..
    } = spec;
    drop(endpoints);
    if tree.has_cgroup() {
        let _ = tokio::task::spawn_blocking(move || drop(tree)).await;
    }
    finish(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt of `sh -c script` in `dir`, confined as `confinement` says.
    fn spec(
        dir: &std::path::Path,
        script: &str,
        confinement: Option<crate::confine::Confinement>,
    ) -> AttemptSpec {
        use crate::agents::invocation::{Enforced, Enforcement};
        let na = || Enforced::none("test");
        AttemptSpec {
            run_id: "r".into(),
            phase: "p".into(),
            agent: "a".into(),
            attempt: 1,
            kind: AgentKind::Command,
            invocation: Invocation {
                program: "sh".into(),
                args: vec!["-c".into(), script.into()],
                env: Vec::new(),
                stdin: Stdin::Null,
                cwd: dir.to_path_buf(),
                dir: dir.join("own"),
                files: Vec::new(),
                enforcement: Enforcement {
                    internal: na(),
                    mcp: na(),
                    permission: na(),
                    max_turns: na(),
                },
                inherit_env: true,
                prompt_tokens: Default::default(),
                confinement,
                shown: None,
                git: None,
                shells: None,
                undumpable: None,
            },
            timeout: Some(Duration::from_secs(30)),
            stall_timeout: None,
            max_turns: None,
            grace: Duration::from_secs(1),
            keeper: None,
            log_dir: dir.join("logs"),
            tree: Default::default(),
            endpoints: Vec::new(),
        }
    }

    /// The undumpable copy of a program `prog` (a copy of the system's
    /// `of`) planned in a cache in `dir`, and the copies' folder.
    fn planned_copy(
        dir: &std::path::Path,
        of: &str,
    ) -> (
        std::sync::Arc<crate::confine::undumpable::ExecOnlyCopy>,
        std::path::PathBuf,
    ) {
        let program = dir.join("bin").join("prog");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::copy(which::which(of).unwrap(), &program).unwrap();
        let root = dir.join("cache").join("orch").join("programs");
        let copy = crate::confine::undumpable::ExecOnlyCopy::plan(&program, None, &root).unwrap();
        (std::sync::Arc::new(copy), root)
    }

    /// The copy of a CLI's program (and the wait for another orch's) is
    /// part of the attempt: its timeout counts it and a cancel ends it,
    /// where it had held the attempt up to the lock's two minutes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wait_for_a_program_copy_counts_in_the_timeout_and_ends_on_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let (copy, root) = planned_copy(dir.path(), "true");
        let with_copy = |timeout: Duration| {
            let mut s = spec(dir.path(), "", None);
            s.invocation.program = copy.path().display().to_string();
            s.invocation.args.clear();
            s.invocation.undumpable = Some(std::sync::Arc::clone(&copy));
            s.timeout = Some(timeout);
            s
        };
        // Another orch holds the copies' lock.
        std::fs::create_dir_all(&root).unwrap();
        let lock = std::fs::File::create(root.join(".lock")).unwrap();
        let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();

        let t = Instant::now();
        let (_tx, rx) = watch::channel(Cancel::No);
        let r = run_attempt(with_copy(Duration::from_millis(300)), Events::discard(), rx).await;
        assert_eq!(r.outcome, Outcome::TimedOut, "{:?}", r.reason);
        assert!(!r.permanent, "a later attempt may find the lock free");
        let reason = r.reason.unwrap_or_default();
        assert!(reason.contains("while its program was copied"), "{reason}");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

        let t = Instant::now();
        let (tx, rx) = watch::channel(Cancel::No);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = tx.send(Cancel::Graceful);
        });
        // (A timeout that never comes: adding it to the start overflowed.)
        let r = run_attempt(with_copy(Duration::MAX), Events::discard(), rx).await;
        assert_eq!(r.outcome, Outcome::Cancelled, "{:?}", r.reason);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

        // Released: the copy is made and the program runs from it (where
        // the kernel makes such a start undumpable).
        drop(held);
        if crate::confine::undumpable::machine().is_some() {
            return;
        }
        let (_tx, rx) = watch::channel(Cancel::No);
        let r = run_attempt(with_copy(Duration::from_secs(60)), Events::discard(), rx).await;
        assert_eq!(r.outcome, Outcome::Succeeded, "{:?}", r.reason);
    }

    /// The attempt's timeout counts from before the copy: time spent
    /// waiting for another orch's copy is not given again once the CLI
    /// runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_timeout_counts_the_wait_for_the_copy_once_the_cli_runs() {
        if crate::confine::undumpable::machine().is_some() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (copy, root) = planned_copy(dir.path(), "sleep");
        let mut s = spec(dir.path(), "", None);
        s.invocation.program = copy.path().display().to_string();
        s.invocation.args = vec!["30".into()];
        s.invocation.undumpable = Some(std::sync::Arc::clone(&copy));
        s.timeout = Some(Duration::from_secs(3));
        // Another orch holds the copies' lock for 2 s of the 3.
        std::fs::create_dir_all(&root).unwrap();
        let lock = std::fs::File::create(root.join(".lock")).unwrap();
        let held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            drop(held);
        });
        let t = Instant::now();
        let (_tx, rx) = watch::channel(Cancel::No);
        let r = run_attempt(s, Events::discard(), rx).await;
        release.join().unwrap();
        assert_eq!(r.outcome, Outcome::TimedOut, "{:?}", r.reason);
        let reason = r.reason.unwrap_or_default();
        assert!(!reason.contains("copied"), "it ran: {reason}");
        // Stopped at 3 s (and its grace), not 3 s after it started at 2.
        assert!(
            t.elapsed() < Duration::from_millis(4_500),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn an_agent_that_cannot_be_confined_never_starts() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let places = crate::confine::Places {
            workspace: dir.path().to_path_buf(),
            own_dir: dir.path().join("own"),
            own_writable: vec![dir.path().join("own")],
            home: None,
            home_readable: Vec::new(),
            also_writable: Vec::new(),
            also_hidden: Vec::new(),
            state_dir: None,
        };
        let policy = crate::confine::Policy::for_permission(
            crate::model::Permission::WorkspaceWrite,
            &places,
            &[],
        )
        .unwrap();
        // An ABI the kernel does not speak: the ruleset cannot be built.
        let broken = crate::confine::Confinement { policy, abi: 999 };
        let (_tx, rx) = watch::channel(Cancel::No);
        let script = format!("touch {}", marker.display());
        let r = run_attempt(
            spec(dir.path(), &script, Some(broken)),
            Events::discard(),
            rx,
        )
        .await;
        assert_eq!(r.outcome, Outcome::Failed);
        assert!(r.permanent, "retrying cannot help");
        let reason = r.reason.unwrap_or_default();
        assert!(
            reason.contains("was not started: cannot confine"),
            "{reason}"
        );
        assert!(!marker.exists(), "it ran unconfined");
        // The same attempt unconfined runs (the test can fail).
        let (_tx, rx) = watch::channel(Cancel::No);
        let r = run_attempt(spec(dir.path(), &script, None), Events::discard(), rx).await;
        assert_eq!(r.outcome, Outcome::Succeeded, "{:?}", r.reason);
        assert!(marker.exists());
    }

    /// A process that left the agent's group and session holds its stdout
    /// open, and orch can neither kill it by a cgroup (the tree has none)
    /// nor adopt it (this test process is no subreaper): the attempt still
    /// ends soon after the agent's own process exits, with what it said.
    #[tokio::test]
    async fn a_process_out_of_reach_holding_the_output_does_not_keep_the_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let script = "setsid sh -c 'echo $$ > held.pid; exec sleep 600' & \
                      while [ ! -s held.pid ]; do sleep 0.02; done; echo done; exit 0";
        let (_tx, rx) = watch::channel(Cancel::No);
        let started = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(20),
            run_attempt(spec(dir.path(), script, None), Events::discard(), rx),
        )
        .await;
        let took = started.elapsed();
        let held: i32 = std::fs::read_to_string(dir.path().join("held.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The test's own leftover, which orch could not reach.
        let alive = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(held),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok();
        let r = r.expect("the attempt ended");
        assert!(alive, "the holder was out of reach, as the test means");
        assert_eq!(r.outcome, Outcome::Succeeded, "{:?}", r.reason);
        assert!(took >= PIPES_GRACE, "{took:?}");
        assert!(took < PIPES_GRACE + Duration::from_secs(5), "{took:?}");
        let log = std::fs::read_to_string(dir.path().join("logs/attempt-1.stdout")).unwrap();
        assert_eq!(log, "done\n");
    }

    #[test]
    fn an_os_refusal_in_a_tool_result_is_recorded_with_its_tool() {
        let mut r = OsRefusals::default();
        let mut events = vec![Event::ToolCall {
            id: Some("c1".into()),
            name: "Bash".into(),
            input: serde_json::Value::Null,
        }];
        r.note(&mut events);
        assert_eq!(events.len(), 1);
        let mut events = vec![Event::ToolResult {
            id: Some("c1".into()),
            is_error: true,
            output: "x\n/bin/sh: 1: cannot create /w/out.txt: Permission denied\n".into(),
        }];
        r.note(&mut events);
        assert_eq!(
            events[1],
            Event::PermissionDenied {
                tool: "Bash".into(),
                reason: Some(
                    "refused by the operating system: /bin/sh: 1: cannot create /w/out.txt: Permission denied"
                        .into()
                )
            }
        );
        // Nothing refused, or already reported by the CLI: nothing added.
        let mut events = vec![Event::ToolResult {
            id: None,
            is_error: false,
            output: "fine".into(),
        }];
        r.note(&mut events);
        assert_eq!(events.len(), 1);
        let mut events = vec![
            Event::ToolResult {
                id: None,
                is_error: true,
                output: "Permission denied".into(),
            },
            Event::PermissionDenied {
                tool: "bash".into(),
                reason: None,
            },
        ];
        r.note(&mut events);
        assert_eq!(events.len(), 2);
    }
}
