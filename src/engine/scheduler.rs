//! The scheduler: a phase starts as soon as every selected dependency has
//! finished; independent phases run at the same time; `max_parallel` caps
//! agent processes pipeline-wide; ready phases start in declaration order.
//! A failed required phase fails the run and skips its dependents; a failed
//! optional phase does not. Declared artifacts must exist after success,
//! and what agents claimed of their artifacts must hold (`claims`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::assemble::{self, Context};
use super::claims;
use super::contract::{self, Verdict};
use super::events::{Events, RunEvent};
use super::retry;
use super::supervisor::{AttemptResult, Cancel};
use crate::clock::now_ms;
use crate::mcp::Ledger;
use crate::pipeline::graph::PhaseGraph;
use crate::pipeline::model::Validation;
use crate::pipeline::{Agent, Phase, Pipeline};
use crate::store::{Outcome, Record, RunStatus};

/// How a run is carried out.
#[derive(Clone)]
pub(crate) struct RunOptions {
    pub(crate) run_id: String,
    /// Phases to run (indices into `pipeline.phases`). Dependencies outside
    /// the selection are taken as satisfied (the CI-job mode).
    pub(crate) selected: Vec<usize>,
    /// Phases that succeeded in the run being resumed: not run again.
    pub(crate) done: Vec<usize>,
    pub(crate) max_parallel: usize,
    pub(crate) retry_base: Duration,
    pub(crate) retry_max: Duration,
    /// Attempts already recorded per (phase, agent) in a resumed run: new
    /// attempts are numbered after them, so nothing recorded is replaced.
    pub(crate) attempt_base: std::collections::HashMap<(String, String), u32>,
    /// What agents claim and judges decide, as it reached orch's tools.
    pub(crate) ledger: Arc<Ledger>,
}

/// One try of one agent: what the scheduler asks of the world for each
/// attempt. [`Live`](super::attempt::Live) assembles the invocation, opens
/// the attempt's endpoints, records its start and supervises its process;
/// the scheduler's unit tests give a fake. The scheduler itself decides
/// what runs when (the DAG, `max_parallel`, retries, judge rounds) and
/// records how each attempt and phase ended.
pub(crate) trait Attempts: Send + Sync + 'static {
    fn run(
        &self,
        order: Order<'_>,
        cancel: watch::Receiver<Cancel>,
    ) -> impl Future<Output = AttemptResult> + Send;
}

/// The attempt to run.
#[derive(Clone, Copy)]
pub(crate) struct Order<'a> {
    /// The phase it runs in (for a judge, the phase it runs as).
    pub(crate) phase: &'a Phase,
    pub(crate) agent: &'a Agent,
    /// Its number among the agent's attempts in this phase (from 1).
    pub(crate) attempt: u32,
    /// A judge's feedback from the round before.
    pub(crate) feedback: Option<&'a str>,
    /// Set when the attempt judges a phase's artifact.
    pub(crate) judging: Option<&'a crate::mcp::Judging>,
}

/// How an agent ended in a phase, over its attempts in every round: what
/// the phase is settled on. (What people see of a run is its
/// `RunDetail`, folded from the records.)
#[derive(Debug, Clone)]
struct AgentEnd {
    agent: String,
    status: Outcome,
    attempts: u32,
    exit_code: Option<i32>,
    reason: Option<String>,
    /// The number of the attempt it ended with (0: none ran).
    last_attempt: u32,
}

impl AgentEnd {
    /// An agent that has not run (yet).
    fn new(agent: &str, status: Outcome) -> Self {
        AgentEnd {
            agent: agent.to_string(),
            status,
            attempts: 0,
            exit_code: None,
            reason: None,
            last_attempt: 0,
        }
    }

    /// Attempt `n` (numbered `attempt`) ended so: the last one says how the
    /// agent ended.
    fn add_attempt(&mut self, n: u32, attempt: u32, result: &AttemptResult) {
        self.attempts = n;
        self.last_attempt = attempt;
        self.status = result.outcome;
        self.exit_code = result.exit_code;
        self.reason = result.reason.clone();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotSelected,
    Pending,
    Running,
    Done(Outcome),
}

struct Shared<A> {
    attempts: A,
    pipeline: Arc<Pipeline>,
    ctx: Arc<Context>,
    opts: RunOptions,
    events: Events,
    permits: Arc<Semaphore>,
    /// Accepted artifacts already reported as changed since (phase, hash
    /// now): each change is said once.
    changed: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

/// Run the selected phases to the end (or until cancelled).
pub(crate) async fn run<A: Attempts>(
    attempts: A,
    pipeline: Arc<Pipeline>,
    graph: &PhaseGraph,
    ctx: Arc<Context>,
    opts: RunOptions,
    events: Events,
    cancel: watch::Receiver<Cancel>,
) -> RunStatus {
    let n = pipeline.phases.len();
    let mut state = vec![State::NotSelected; n];
    for &i in &opts.selected {
        state[i] = State::Pending;
    }
    for &i in &opts.done {
        if state[i] == State::Pending {
            state[i] = State::Done(Outcome::Succeeded);
        }
    }
    let deps: Vec<Vec<usize>> = (0..n).map(|i| graph.dependencies(i)).collect();
    let shared = Arc::new(Shared {
        attempts,
        permits: Arc::new(Semaphore::new(opts.max_parallel.max(1))),
        pipeline: Arc::clone(&pipeline),
        ctx,
        opts,
        events,
        changed: Default::default(),
    });
    let mut set: JoinSet<(usize, Outcome)> = JoinSet::new();
    // Which phase each task runs, to know a panicked one.
    let mut tasks = HashMap::new();
    loop {
        let cancelled = *cancel.borrow() != Cancel::No;
        // Settle what can be settled, start what is ready, in declaration
        // order; repeat until nothing changes (skips cascade).
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..n {
                if state[i] != State::Pending {
                    continue;
                }
                let mut ready = true;
                let mut blocked_by: Option<usize> = None;
                for &d in &deps[i] {
                    match state[d] {
                        State::NotSelected | State::Done(Outcome::Succeeded) => {}
                        State::Done(Outcome::Skipped) => blocked_by = Some(d),
                        State::Done(_) if pipeline.phases[d].required => blocked_by = Some(d),
                        State::Done(_) => {}
                        State::Pending | State::Running => ready = false,
                    }
                }
                if let Some(d) = blocked_by.filter(|_| ready) {
                    state[i] = State::Done(Outcome::Skipped);
                    ended_without_agents(
                        &shared,
                        i,
                        Outcome::Skipped,
                        format!("`{}` did not succeed", pipeline.phases[d].name),
                        false,
                    );
                    changed = true;
                } else if ready && cancelled {
                    state[i] = State::Done(Outcome::Cancelled);
                    ended_without_agents(
                        &shared,
                        i,
                        Outcome::Cancelled,
                        "the run was interrupted".into(),
                        false,
                    );
                    changed = true;
                } else if ready {
                    state[i] = State::Running;
                    // Announced here, in declaration order, not from the task.
                    let phase = &pipeline.phases[i];
                    shared.events.record(Record::PhaseStarted {
                        run_id: shared.opts.run_id.clone(),
                        phase: phase.name.clone(),
                        started_ms: now_ms(),
                    });
                    let shared = Arc::clone(&shared);
                    let cancel = cancel.clone();
                    let task = set.spawn(async move { (i, run_phase(i, shared, cancel).await) });
                    tasks.insert(task.id(), i);
                    changed = true;
                }
            }
        }
        match set.join_next().await {
            Some(Ok((i, status))) => state[i] = State::Done(status),
            Some(Err(e)) => {
                // A phase task panicked: that is orch's bug. The phase failed
                // (its dependents are skipped and the run fails), and says why.
                let i = tasks[&e.id()];
                state[i] = State::Done(Outcome::Failed);
                ended_without_agents(
                    &shared,
                    i,
                    Outcome::Failed,
                    format!("orch internal error: {e}"),
                    true,
                );
            }
            None => break,
        }
    }
    report_changed_artifacts(&shared);
    let interrupted = *cancel.borrow() != Cancel::No;
    // A required phase that ran (or was skipped) and did not succeed fails
    // the run.
    let failed = (0..n).any(|i| {
        matches!(state[i], State::Done(o) if o != Outcome::Succeeded) && pipeline.phases[i].required
    });
    if interrupted {
        RunStatus::Interrupted
    } else if failed {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    }
}

/// A phase that ends with no agent report: skipped, cancelled before it
/// started, or (`started`) lost to an internal error.
fn ended_without_agents<A>(
    shared: &Shared<A>,
    i: usize,
    outcome: Outcome,
    reason: String,
    started: bool,
) {
    let p = &shared.pipeline.phases[i];
    let now = now_ms();
    shared.events.record(Record::PhaseFinished {
        run_id: shared.opts.run_id.clone(),
        phase: p.name.clone(),
        outcome,
        required: p.required,
        reason: Some(reason),
        attempts: 0,
        started_ms: started.then_some(now),
        ended_ms: now,
    });
}

async fn run_phase<A: Attempts>(
    i: usize,
    shared: Arc<Shared<A>>,
    cancel: watch::Receiver<Cancel>,
) -> Outcome {
    let phase = &shared.pipeline.phases[i];
    let started = now_ms();
    // What this phase is given of earlier phases is what was accepted; say
    // so when the file has changed since.
    report_changed_artifacts(&shared);
    let rounds = phase.contract.as_ref().map_or(1, |c| c.max_attempts);
    // Attempts each agent made in earlier rounds: numbering goes on.
    let mut prior: HashMap<String, u32> = HashMap::new();
    let mut feedback: Option<String> = None;
    let mut agents: Vec<AgentEnd> = Vec::new();
    let mut judges: Vec<AgentEnd> = Vec::new();
    let mut status = Outcome::Failed;
    let mut reason = None;
    for round in 1..=rounds {
        let this = run_agents(phase, &shared, &cancel, &prior, feedback.as_deref()).await;
        for a in &this {
            *prior.entry(a.agent.clone()).or_default() += a.attempts;
        }
        agents = merge(agents, this);
        (status, reason) = settle(phase, &shared, &agents);
        if status != Outcome::Succeeded {
            break;
        }
        let Some(c) = &phase.contract else {
            break;
        };
        let workdir = &shared.ctx.workdir;
        let artifact = match contract::structural(c, workdir, &shared.opts.run_id, &phase.name) {
            Ok(a) => a,
            Err(why) if c.validation == Validation::Trust => {
                shared.events.emit(RunEvent::ContractWarning {
                    phase: phase.name.clone(),
                    message: why,
                });
                break;
            }
            Err(why) => {
                status = Outcome::Failed;
                reason = Some(why);
                break;
            }
        };
        // The contract's artifact is one of the phase's (the last round's).
        shared.events.record(Record::Artifact {
            run_id: shared.opts.run_id.clone(),
            phase: phase.name.clone(),
            path: artifact.path.clone(),
            sha256: artifact.sha256.clone(),
        });
        let snapshot = assemble::Snapshot {
            path: artifact.path.clone(),
            sha256: artifact.sha256.clone(),
            text: artifact.text.clone(),
        };
        if c.validation != Validation::Judge {
            shared.ctx.accept(&phase.name, snapshot);
            break;
        }
        // Validation made sure the judge exists; if it does not, the gate
        // fails rather than letting the work through unjudged.
        let Some(judge) = c.judge.as_ref().and_then(|j| shared.pipeline.agent(j)) else {
            status = Outcome::Failed;
            reason = Some("the phase's judge is not an agent of the pipeline".into());
            break;
        };
        // A judge is shown at most MAX_JUDGED_CHARS: a longer artifact
        // fails the gate rather than pass with its end unseen.
        if let Err(why) = contract::judgeable(&artifact) {
            status = Outcome::Failed;
            reason = Some(why);
            break;
        }
        let verdict = judge_round(
            phase,
            judge,
            &artifact,
            &shared,
            &cancel,
            &mut prior,
            &mut judges,
        )
        .await;
        let rejected = match &verdict {
            Verdict::Approved => None,
            Verdict::Rejected { reason, .. } => Some(reason.clone()),
            Verdict::Missing(why) => Some(why.clone()),
        };
        shared.events.emit(RunEvent::Judged {
            phase: phase.name.clone(),
            judge: judge.name.clone(),
            round,
            rejected,
        });
        match verdict {
            Verdict::Approved => {
                // The bytes the judge was shown, and whose hash is recorded.
                shared.ctx.accept(&phase.name, snapshot);
                break;
            }
            Verdict::Missing(why) => {
                status = if *cancel.borrow() != Cancel::No {
                    Outcome::Cancelled
                } else {
                    Outcome::Failed
                };
                reason = Some(why);
                break;
            }
            Verdict::Rejected { reason: why, fix } => {
                if round == rounds {
                    status = Outcome::Failed;
                    reason = Some(format!(
                        "judge `{}` rejected the artifact in every one of {rounds} round{}; last: {why}",
                        judge.name,
                        if rounds == 1 { "" } else { "s" }
                    ));
                    break;
                }
                feedback = Some(contract::feedback(&judge.name, &why, &fix));
            }
        }
    }
    agents.extend(judges);
    let attempts = agents.iter().map(|a| a.attempts).sum();
    let ended = now_ms();
    shared.events.record(Record::PhaseFinished {
        run_id: shared.opts.run_id.clone(),
        phase: phase.name.clone(),
        outcome: status,
        required: phase.required,
        reason: reason.clone(),
        attempts,
        started_ms: Some(started),
        ended_ms: ended,
    });
    status
}

/// Say, once each, which accepted contract artifacts have changed in the
/// workspace since they were accepted (a later phase, or anything else,
/// rewrote them): later phases are given the accepted text.
fn report_changed_artifacts<A>(shared: &Shared<A>) {
    for (phase, accepted) in shared.ctx.all_approved() {
        let now = super::identity::sha256_beneath(&shared.ctx.workdir, &accepted.path)
            .unwrap_or_else(|| "gone".into());
        if now == accepted.sha256 {
            continue;
        }
        let first = shared
            .changed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((phase.clone(), now.clone()));
        if first {
            shared.events.emit(RunEvent::ContractWarning {
                phase: phase.clone(),
                message: format!(
                    "`{}` changed after it was accepted (SHA-256 {} then, {} now); later phases are given the accepted text",
                    accepted.path, accepted.sha256, now
                ),
            });
        }
    }
}

/// One round of the phase's agents: at once when the phase is parallel,
/// else in order until one does not succeed.
async fn run_agents<A: Attempts>(
    phase: &Phase,
    shared: &Arc<Shared<A>>,
    cancel: &watch::Receiver<Cancel>,
    prior: &HashMap<String, u32>,
    feedback: Option<&str>,
) -> Vec<AgentEnd> {
    let prior_of = |name: &str| prior.get(name).copied().unwrap_or(0);
    if phase.parallel {
        let mut set = JoinSet::new();
        let mut tasks = HashMap::new();
        for (k, name) in phase.agents.iter().enumerate() {
            let shared = Arc::clone(shared);
            let cancel = cancel.clone();
            let name = name.clone();
            let phase = phase.clone();
            let feedback = feedback.map(str::to_string);
            let before = prior_of(&name);
            let task = set.spawn(async move {
                let r = run_agent(
                    &phase,
                    &name,
                    &shared,
                    cancel,
                    before,
                    feedback.as_deref(),
                    None,
                )
                .await;
                (k, r)
            });
            tasks.insert(task.id(), k);
        }
        let mut out: Vec<(usize, AgentEnd)> = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(r) => out.push(r),
                // An agent task panicked (orch's bug): the agent failed.
                Err(e) => {
                    let k = tasks[&e.id()];
                    let mut failed = AgentEnd::new(&phase.agents[k], Outcome::Failed);
                    failed.reason = Some(format!("orch internal error: {e}"));
                    out.push((k, failed));
                }
            }
        }
        out.sort_by_key(|(k, _)| *k);
        return out.into_iter().map(|(_, r)| r).collect();
    }
    let mut agents = Vec::new();
    let mut stopped = false;
    for name in &phase.agents {
        if stopped {
            let mut skipped = AgentEnd::new(name, Outcome::Skipped);
            skipped.reason = Some("an earlier agent of the phase did not succeed".into());
            agents.push(skipped);
            continue;
        }
        let r = run_agent(
            phase,
            name,
            shared,
            cancel.clone(),
            prior_of(name),
            feedback,
            None,
        )
        .await;
        stopped = r.status != Outcome::Succeeded;
        agents.push(r);
    }
    agents
}

/// The agents over rounds: the last round says how each ended; attempts
/// add up.
fn merge(before: Vec<AgentEnd>, now: Vec<AgentEnd>) -> Vec<AgentEnd> {
    if before.is_empty() {
        return now;
    }
    now.into_iter()
        .map(|mut a| {
            if let Some(b) = before.iter().find(|b| b.agent == a.agent) {
                a.attempts += b.attempts;
            }
            a
        })
        .collect()
}

/// How a round of the phase's agents ended: their outcomes, then the
/// declared artifacts and the agents' completion claims.
fn settle<A>(phase: &Phase, shared: &Shared<A>, agents: &[AgentEnd]) -> (Outcome, Option<String>) {
    let mut status = if agents.iter().all(|a| a.status == Outcome::Succeeded) {
        Outcome::Succeeded
    } else if agents.iter().any(|a| a.status == Outcome::Cancelled) {
        Outcome::Cancelled
    } else if agents.iter().any(|a| a.status == Outcome::TimedOut) {
        Outcome::TimedOut
    } else {
        Outcome::Failed
    };
    let mut reason = agents
        .iter()
        .find(|a| a.status != Outcome::Succeeded)
        .and_then(|a| a.reason.clone().map(|r| format!("{}: {r}", a.agent)));
    if status == Outcome::Succeeded {
        for path in &phase.artifacts {
            // Beneath the workspace, no link followed.
            match super::identity::sha256_beneath(&shared.ctx.workdir, path) {
                Some(sha256) => shared.events.record(Record::Artifact {
                    run_id: shared.opts.run_id.clone(),
                    phase: phase.name.clone(),
                    path: path.clone(),
                    sha256,
                }),
                None => {
                    status = Outcome::Failed;
                    reason = Some(format!(
                        "artifact `{path}` is missing, or is not a regular file of the workspace (orch follows no link there)"
                    ));
                    break;
                }
            }
        }
    }
    if status == Outcome::Succeeded {
        let finals: Vec<(String, u32)> = agents
            .iter()
            .filter(|a| a.last_attempt > 0)
            .map(|a| (a.agent.clone(), a.last_attempt))
            .collect();
        if let Err(why) = claims::check(
            &shared.opts.ledger,
            &phase.name,
            &finals,
            &shared.ctx.workdir,
        ) {
            status = Outcome::Failed;
            reason = Some(why);
        }
    }
    (status, reason)
}

/// The judge's attempt on this round's artifact, and its verdict.
#[allow(clippy::too_many_arguments)]
async fn judge_round<A: Attempts>(
    phase: &Phase,
    judge: &Agent,
    artifact: &contract::Artifact,
    shared: &Arc<Shared<A>>,
    cancel: &watch::Receiver<Cancel>,
    prior: &mut HashMap<String, u32>,
    judges: &mut Vec<AgentEnd>,
) -> Verdict {
    let state_dir = shared.ctx.state_dir();
    let judging = crate::mcp::Judging {
        phase: phase.name.clone(),
        artifact_path: artifact.path.clone(),
        artifact_hash: artifact.sha256.clone(),
    };
    let jphase = phase.for_judge(&judge.name, contract::judge_prompt(phase, judge, artifact));
    let before = prior.get(&judge.name).copied().unwrap_or(0);
    let r = run_agent(
        &jphase,
        &judge.name,
        shared,
        cancel.clone(),
        before,
        None,
        Some(&judging),
    )
    .await;
    *prior.entry(judge.name.clone()).or_default() += r.attempts;
    let verdict = if judge.kind.is_llm() {
        if r.status == Outcome::Succeeded {
            contract::llm_verdict(
                &shared.opts.ledger,
                &phase.name,
                &judge.name,
                r.last_attempt,
                &artifact.sha256,
            )
        } else {
            Verdict::Missing(format!(
                "judge `{}` did not finish: {}",
                judge.name,
                r.reason.clone().unwrap_or_else(|| r.status.to_string())
            ))
        }
    } else if matches!(r.status, Outcome::Cancelled) {
        Verdict::Missing("the run was interrupted".into())
    } else {
        contract::command_verdict(
            r.status == Outcome::Succeeded,
            r.exit_code,
            &log_dir(&state_dir, &shared.opts.run_id, &phase.name, &judge.name),
            r.last_attempt,
        )
    };
    let judge_report = judges.iter().position(|j| j.agent == r.agent);
    match judge_report {
        Some(k) => {
            let merged = merge(vec![judges[k].clone()], vec![r]);
            judges[k] = merged.into_iter().next().expect("one");
        }
        None => judges.push(r),
    }
    verdict
}

async fn run_agent<A: Attempts>(
    phase: &Phase,
    name: &str,
    shared: &Shared<A>,
    mut cancel: watch::Receiver<Cancel>,
    prior: u32,
    feedback: Option<&str>,
    judging: Option<&crate::mcp::Judging>,
) -> AgentEnd {
    let agent = shared
        .pipeline
        .agent(name)
        .expect("validated: every phase agent exists");
    let mut report = AgentEnd::new(name, Outcome::Failed);
    let max_attempts = 1 + phase.retries;
    let base = shared
        .opts
        .attempt_base
        .get(&(phase.name.clone(), name.to_string()))
        .copied()
        .unwrap_or(0)
        + prior;
    for n in 1..=max_attempts {
        let attempt = base + n;
        if *cancel.borrow() != Cancel::No {
            report.status = Outcome::Cancelled;
            report.reason = Some("the run was interrupted".into());
            break;
        }
        let permit = tokio::select! {
            p = Arc::clone(&shared.permits).acquire_owned() => p.ok(),
            _ = cancel.changed() => None,
        };
        let Some(permit) = permit else {
            report.status = Outcome::Cancelled;
            report.reason = Some("the run was interrupted".into());
            break;
        };
        let order = Order {
            phase,
            agent,
            attempt,
            feedback,
            judging,
        };
        let result = shared.attempts.run(order, cancel.clone()).await;
        drop(permit);
        report.add_attempt(n, attempt, &result);
        shared.events.record(Record::AttemptFinished {
            run_id: shared.opts.run_id.clone(),
            phase: phase.name.clone(),
            agent: name.to_string(),
            attempt,
            outcome: result.outcome,
            exit_code: result.exit_code,
            reason: result.reason.clone(),
            session_id: result.session_id.clone(),
            turns: result.turns,
            tokens_in: result.tokens_in,
            tokens_out: result.tokens_out,
            cost_usd: result.cost_usd,
            started_ms: result.started_ms,
            ended_ms: result.ended_ms,
        });
        if result.outcome == Outcome::Succeeded || n == max_attempts {
            break;
        }
        let now = now_ms();
        let Some(wait) = retry::next_wait(
            &result,
            n,
            shared.opts.retry_base,
            shared.opts.retry_max,
            now,
        ) else {
            break;
        };
        shared.events.emit(RunEvent::Retrying {
            phase: phase.name.clone(),
            agent: name.to_string(),
            wait,
            rate_limited: result.rate_limited,
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.changed() => {}
        }
    }
    report
}

/// `<state_dir>/runs/<run>/<phase>/<agent>/`: the raw logs of every attempt.
pub(crate) fn log_dir(
    state_dir: &Path,
    run_id: &str,
    phase: &str,
    agent: &str,
) -> std::path::PathBuf {
    state_dir.join("runs").join(run_id).join(phase).join(agent)
}

#[cfg(test)]
mod tests {
    //! The scheduler driven by a fake [`Attempts`]: each agent's attempts
    //! end as a script says, instantly, and a fake judge files its verdict
    //! in the ledger as orch's endpoint would.

    use std::collections::VecDeque;
    use std::path::PathBuf;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::agents::checks::Checks;
    use crate::confine::Availability;
    use crate::mcp::ledger;
    use crate::settings::Settings;

    /// How a scripted attempt ends.
    #[derive(Clone, Debug)]
    enum Then {
        Succeed,
        Fail,
        /// A judge: approve (or reject) the artifact it was given.
        Approve,
        Reject(&'static str),
        /// A worker: write the phase's artifact, then succeed.
        Write(&'static str, &'static str),
    }

    /// An attempt as the fake saw it start: phase, agent, its number, the
    /// feedback it was given.
    type Seen = (String, String, u32, Option<String>);

    /// How each phase ended, and why.
    type Ended = HashMap<String, (Outcome, Option<String>)>;

    #[derive(Default)]
    struct Fake {
        /// Per agent, how its attempts end, in order (then: succeed).
        script: Mutex<HashMap<String, VecDeque<Then>>>,
        /// Every attempt, in the order it started: (phase, agent, number,
        /// feedback).
        log: Mutex<Vec<Seen>>,
        running: AtomicUsize,
        most_at_once: AtomicUsize,
        ledger: Arc<Ledger>,
        workdir: PathBuf,
    }

    impl Attempts for Arc<Fake> {
        async fn run(&self, o: Order<'_>, _cancel: watch::Receiver<Cancel>) -> AttemptResult {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            self.log.lock().unwrap().push((
                o.phase.name.clone(),
                o.agent.name.clone(),
                o.attempt,
                o.feedback.map(str::to_string),
            ));
            let then = self
                .script
                .lock()
                .unwrap()
                .get_mut(&o.agent.name)
                .and_then(VecDeque::pop_front)
                .unwrap_or(Then::Succeed);
            // On the test's one-thread runtime every attempt started in
            // this turn runs up to here before any goes on: they overlap
            // whatever the machine's load (a timed sleep would not).
            tokio::task::yield_now().await;
            let mut r = AttemptResult::new(now_ms());
            r.outcome = Outcome::Succeeded;
            match then {
                Then::Succeed => {}
                Then::Fail => {
                    r.outcome = Outcome::Failed;
                    r.exit_code = Some(1);
                    r.reason = Some("scripted failure".into());
                }
                Then::Write(path, text) => {
                    let file = self.workdir.join(path);
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(file, text).unwrap();
                }
                Then::Approve | Then::Reject(_) => {
                    let judging = o.judging.expect("a verdict comes from a judge");
                    let reason = match then {
                        Then::Reject(why) => why,
                        _ => "fine",
                    };
                    self.ledger.verdict(ledger::Verdict {
                        phase: judging.phase.clone(),
                        judge: o.agent.name.clone(),
                        attempt: o.attempt,
                        artifact_hash: judging.artifact_hash.clone(),
                        approved: matches!(then, Then::Approve),
                        reason: reason.into(),
                        fix: format!("fix: {reason}"),
                    });
                }
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            r
        }
    }

    struct Run {
        status: RunStatus,
        fake: Arc<Fake>,
        phases: Ended,
    }

    impl Run {
        fn attempts(&self) -> Vec<Seen> {
            self.fake.log.lock().unwrap().clone()
        }

        fn outcome(&self, phase: &str) -> Outcome {
            self.phases[phase].0
        }
    }

    /// Run `toml` (only `phases` listed are selected; `done` were done in
    /// the run resumed) with agents ending as `script` says.
    fn run_with(toml: &str, script: &[(&str, &[Then])], done: &[&str], max_parallel: usize) -> Run {
        let workdir = tempfile::tempdir().unwrap();
        let loaded = crate::pipeline::load_str(
            "p.toml",
            toml.into(),
            workdir.path(),
            &Checks::new(&Availability::Available { abi: 7 }),
        )
        .unwrap_or_else(|e| panic!("{:?}", e.diagnostics));
        let pipeline = Arc::new(loaded.pipeline);
        let graph = PhaseGraph::build(&pipeline).unwrap();
        let index = |name: &str| pipeline.phases.iter().position(|p| p.name == name).unwrap();
        let ledger = Arc::new(Ledger::new());
        let fake = Arc::new(Fake {
            script: Mutex::new(
                script
                    .iter()
                    .map(|(a, s)| (a.to_string(), s.iter().cloned().collect()))
                    .collect(),
            ),
            ledger: Arc::clone(&ledger),
            workdir: workdir.path().to_path_buf(),
            ..Fake::default()
        });
        let settings = Settings {
            state_dir: Some(workdir.path().join("state")),
            ..Settings::default()
        };
        let ctx = Arc::new(Context::new(settings, workdir.path().to_path_buf()));
        let finished: Arc<Mutex<Ended>> = Default::default();
        let seen = Arc::clone(&finished);
        let listener = move |e: &RunEvent| {
            if let RunEvent::Recorded(Record::PhaseFinished {
                phase,
                outcome,
                reason,
                ..
            }) = e
            {
                seen.lock()
                    .unwrap()
                    .insert(phase.clone(), (*outcome, reason.clone()));
            }
        };
        let opts = RunOptions {
            run_id: "r1".into(),
            selected: (0..pipeline.phases.len()).collect(),
            done: done.iter().map(|d| index(d)).collect(),
            max_parallel,
            retry_base: Duration::from_millis(1),
            retry_max: Duration::from_millis(2),
            attempt_base: HashMap::new(),
            ledger,
        };
        let (_tx, cancel) = watch::channel(Cancel::No);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let status = runtime.block_on(run(
            Arc::clone(&fake),
            Arc::clone(&pipeline),
            &graph,
            ctx,
            opts,
            Events::new(None, vec![Arc::new(listener)]),
            cancel,
        ));
        let phases = finished.lock().unwrap().clone();
        Run {
            status,
            fake,
            phases,
        }
    }

    const CHAIN: &str = r#"
version = 1
name = "chain"
[agents.a]
kind = "command"
command = ["true"]
[agents.b]
kind = "command"
command = ["true"]
[agents.c]
kind = "command"
command = ["true"]
[agents.d]
kind = "command"
command = ["true"]
[[phases]]
name = "first"
agents = ["a"]
[[phases]]
name = "second"
agents = ["b"]
depends_on = ["first"]
[[phases]]
name = "third"
agents = ["c"]
depends_on = ["second"]
[[phases]]
name = "aside"
agents = ["d"]
"#;

    #[test]
    fn a_failed_required_phase_skips_its_dependents_and_theirs() {
        let r = run_with(CHAIN, &[("a", &[Then::Fail])], &[], 4);
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(r.outcome("first"), Outcome::Failed);
        assert_eq!(r.outcome("second"), Outcome::Skipped);
        assert_eq!(r.outcome("third"), Outcome::Skipped);
        assert_eq!(
            r.phases["third"].1.as_deref(),
            Some("`second` did not succeed")
        );
        // The phase that depends on nothing that failed still runs.
        assert_eq!(r.outcome("aside"), Outcome::Succeeded);
        let ran: Vec<String> = r.attempts().into_iter().map(|a| a.1).collect();
        assert!(!ran.contains(&"b".to_string()) && !ran.contains(&"c".to_string()));
    }

    #[test]
    fn an_optional_phase_that_fails_skips_nothing_and_fails_nothing() {
        let toml = CHAIN.replacen(
            "name = \"first\"\nagents = [\"a\"]",
            "name = \"first\"\nagents = [\"a\"]\nrequired = false",
            1,
        );
        let r = run_with(&toml, &[("a", &[Then::Fail])], &[], 4);
        assert_eq!(r.outcome("first"), Outcome::Failed);
        assert_eq!(r.outcome("second"), Outcome::Succeeded);
        assert_eq!(r.outcome("third"), Outcome::Succeeded);
        assert_eq!(r.status, RunStatus::Succeeded);
    }

    #[test]
    fn a_resumed_run_does_not_run_what_succeeded_before() {
        let r = run_with(CHAIN, &[], &["first", "aside"], 4);
        assert_eq!(r.status, RunStatus::Succeeded);
        let ran: Vec<String> = r.attempts().into_iter().map(|a| a.0).collect();
        assert_eq!(ran, ["second", "third"]);
    }

    #[test]
    fn a_failed_attempt_is_retried_up_to_the_phases_retries() {
        let toml = CHAIN.replacen(
            "name = \"first\"\nagents = [\"a\"]",
            "name = \"first\"\nagents = [\"a\"]\nretries = 2",
            1,
        );
        let r = run_with(&toml, &[("a", &[Then::Fail, Then::Fail])], &[], 4);
        assert_eq!(r.outcome("first"), Outcome::Succeeded);
        let tries: Vec<u32> = r
            .attempts()
            .into_iter()
            .filter(|a| a.1 == "a")
            .map(|a| a.2)
            .collect();
        assert_eq!(tries, [1, 2, 3]);
        // One retry fewer, and the third failure stands.
        let r = run_with(
            &toml,
            &[("a", &[Then::Fail, Then::Fail, Then::Fail])],
            &[],
            4,
        );
        assert_eq!(r.outcome("first"), Outcome::Failed);
        assert_eq!(r.status, RunStatus::Failed);
    }

    #[test]
    fn max_parallel_caps_the_attempts_running_at_once() {
        let mut toml = String::from("version = 1\nname = \"wide\"\n");
        for i in 0..6 {
            toml.push_str(&format!(
                "[agents.w{i}]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"p{i}\"\nagents = [\"w{i}\"]\n"
            ));
        }
        let r = run_with(&toml, &[], &[], 2);
        assert_eq!(r.status, RunStatus::Succeeded);
        assert_eq!(r.attempts().len(), 6);
        assert_eq!(r.fake.most_at_once.load(Ordering::SeqCst), 2);
        let r = run_with(&toml, &[], &[], 6);
        assert_eq!(r.fake.most_at_once.load(Ordering::SeqCst), 6);
    }

    const JUDGED: &str = r#"
version = 1
name = "judged"
[agents.worker]
kind = "command"
command = ["true"]
[[phases]]
name = "work"
agents = ["worker"]
artifact = "out/{run}-{phase}.md"
judge = "claude"
max_attempts = 2
"#;

    #[test]
    fn a_rejected_round_runs_again_with_the_judges_feedback() {
        let r = run_with(
            JUDGED,
            &[
                (
                    "worker",
                    &[
                        Then::Write("out/r1-work.md", "first try"),
                        Then::Write("out/r1-work.md", "second try"),
                    ],
                ),
                ("claude", &[Then::Reject("too short"), Then::Approve]),
            ],
            &[],
            4,
        );
        assert_eq!(r.outcome("work"), Outcome::Succeeded, "{:?}", r.phases);
        let attempts = r.attempts();
        let who: Vec<(&str, u32)> = attempts.iter().map(|a| (a.1.as_str(), a.2)).collect();
        assert_eq!(
            who,
            [("worker", 1), ("claude", 1), ("worker", 2), ("claude", 2)]
        );
        // The second round of work is told why the first was rejected.
        let feedback = attempts[2].3.as_deref().unwrap_or("");
        assert!(feedback.contains("too short"), "{feedback}");
        assert_eq!(attempts[0].3, None);
    }

    #[test]
    fn a_judge_that_rejects_every_round_fails_the_phase() {
        let r = run_with(
            JUDGED,
            &[
                (
                    "worker",
                    &[
                        Then::Write("out/r1-work.md", "one"),
                        Then::Write("out/r1-work.md", "two"),
                    ],
                ),
                ("claude", &[Then::Reject("no"), Then::Reject("still no")]),
            ],
            &[],
            4,
        );
        assert_eq!(r.outcome("work"), Outcome::Failed);
        let reason = r.phases["work"].1.clone().unwrap_or_default();
        assert!(reason.contains("every one of 2 rounds"), "{reason}");
        assert_eq!(r.status, RunStatus::Failed);
    }

    #[test]
    fn a_judge_that_ends_without_a_verdict_fails_the_gate() {
        let r = run_with(
            JUDGED,
            &[
                ("worker", &[Then::Write("out/r1-work.md", "done")]),
                ("claude", &[Then::Succeed]),
            ],
            &[],
            4,
        );
        assert_eq!(r.outcome("work"), Outcome::Failed);
        let reason = r.phases["work"].1.clone().unwrap_or_default();
        assert!(
            reason.contains("without approving or rejecting"),
            "{reason}"
        );
    }

    #[test]
    fn work_without_its_artifact_is_never_judged() {
        let r = run_with(JUDGED, &[("worker", &[Then::Succeed])], &[], 4);
        assert_eq!(r.outcome("work"), Outcome::Failed);
        assert!(r.attempts().iter().all(|a| a.1 == "worker"));
    }
}
