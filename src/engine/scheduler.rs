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

use super::claims;
use super::contract::{self, Verdict};
use super::events::{Events, RunEvent};
use super::retry;
use super::supervisor::{AttemptResult, AttemptSpec, Cancel, now_ms, run_attempt};
use crate::agents::build::{self, Context};
use crate::agents::invocation::By;
use crate::graph::PhaseGraph;
use crate::pipeline::model::Validation;
use crate::pipeline::{Agent, Phase, Pipeline};
use crate::store::{Outcome, Record, RunStatus};

/// How a run is carried out.
#[derive(Clone)]
pub struct RunOptions {
    pub run_id: String,
    /// Phases to run (indices into `pipeline.phases`). Dependencies outside
    /// the selection are taken as satisfied (the CI-job mode).
    pub selected: Vec<usize>,
    /// Phases that succeeded in the run being resumed: not run again.
    pub done: Vec<usize>,
    pub max_parallel: usize,
    /// TERM to KILL.
    pub grace: Duration,
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Kills every agent's process group if orch dies (SIGKILL included).
    pub keeper: Option<Arc<super::keeper::Keeper>>,
    /// Attempts already recorded per (phase, agent) in a resumed run: new
    /// attempts are numbered after them, so nothing recorded is replaced.
    pub attempt_base: std::collections::HashMap<(String, String), u32>,
    /// Serves orch's tools to each attempt; what agents claim and judges
    /// decide reaches the engine through it.
    pub host: Arc<crate::mcp::Host>,
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

struct Shared {
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
pub async fn run(
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
fn ended_without_agents(
    shared: &Shared,
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

async fn run_phase(i: usize, shared: Arc<Shared>, cancel: watch::Receiver<Cancel>) -> Outcome {
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
        let snapshot = build::Snapshot {
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
fn report_changed_artifacts(shared: &Shared) {
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
async fn run_agents(
    phase: &Phase,
    shared: &Arc<Shared>,
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
fn settle(phase: &Phase, shared: &Shared, agents: &[AgentEnd]) -> (Outcome, Option<String>) {
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
            shared.opts.host.ledger(),
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
async fn judge_round(
    phase: &Phase,
    judge: &Agent,
    artifact: &contract::Artifact,
    shared: &Arc<Shared>,
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
                shared.opts.host.ledger(),
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

async fn run_agent(
    phase: &Phase,
    name: &str,
    shared: &Shared,
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
        let started = now_ms();
        // Each attempt starts in a fresh directory of its own, outside the
        // workspace, that orch alone fills (and removes after).
        let dir = shared.ctx.attempt_dir(&phase.name, name);
        let slot = build::Slot {
            dir: dir.path(),
            run_id: &shared.opts.run_id,
            attempt,
            feedback,
            judging: judging.is_some(),
        };
        let inv = build::invocation(&shared.pipeline, phase, agent, &shared.ctx, &slot);
        let tree = {
            let name = format!("{}-{name}", phase.name);
            if crate::confine::tree::cgroups_used() {
                // Making a cgroup waits for every other cgroup change of
                // the machine (a move into one waits milliseconds): on a
                // thread of the blocking pool, not one of the runtime's.
                match tokio::task::spawn_blocking(move || {
                    crate::confine::ProcessTree::tracked(&name)
                })
                .await
                {
                    Ok(tree) => Arc::new(tree),
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            } else {
                Arc::new(crate::confine::ProcessTree::tracked(&name))
            }
        };
        let mut endpoints: Vec<Arc<crate::mcp::Endpoint>> =
            orch_endpoint(shared, phase, agent, &slot, judging, &tree)
                .into_iter()
                .collect();
        if agent.kind.is_llm() {
            let resolved = shared.pipeline.resolve(phase, agent);
            for (socket, spawn) in build::server_spawns(
                &shared.pipeline,
                &resolved.toolset,
                &shared.ctx,
                &inv,
                dir.path(),
            ) {
                endpoints.push(Arc::new(shared.opts.host.server_endpoint(
                    spawn,
                    socket,
                    Arc::clone(&tree),
                )));
            }
        }
        // As shown: a secret the pipeline wrote in an argv is not stored.
        let argv_json = serde_json::to_string(&inv.shown_argv()).unwrap_or_default();
        let env_json = serde_json::to_string(
            &inv.shown_env()
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .unwrap_or_default();
        shared.events.record(Record::AttemptStarted {
            run_id: shared.opts.run_id.clone(),
            phase: phase.name.clone(),
            agent: name.to_string(),
            attempt,
            argv_json,
            env_json,
            prompt_json: serde_json::to_string(&inv.prompt_tokens).unwrap_or_default(),
            started_ms: started,
        });
        let max_turns = (agent.kind.is_llm() && inv.enforcement.max_turns.by == By::Orch)
            .then(|| shared.pipeline.resolve(phase, agent).toolset.max_turns);
        let spec = AttemptSpec {
            run_id: shared.opts.run_id.clone(),
            phase: phase.name.clone(),
            agent: name.to_string(),
            attempt,
            kind: agent.kind,
            invocation: inv,
            timeout: phase.timeout,
            stall_timeout: phase.stall_timeout,
            max_turns,
            grace: shared.opts.grace,
            keeper: shared.opts.keeper.clone(),
            log_dir: log_dir(
                &shared.ctx.state_dir(),
                &shared.opts.run_id,
                &phase.name,
                name,
            ),
            tree,
            endpoints,
        };
        let result = run_attempt(spec, shared.events.clone(), cancel.clone()).await;
        // The attempt's own directory goes with it (its endpoint too).
        drop(dir);
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

/// orch's endpoint for an attempt of `agent` in `phase`, when its ToolSet
/// grants orch's tools: who calls (set here, never by the agent), what it
/// may call, and for a judge the claim it judges.
fn orch_endpoint(
    shared: &Shared,
    phase: &Phase,
    agent: &Agent,
    slot: &build::Slot<'_>,
    judging: Option<&crate::mcp::Judging>,
    tree: &Arc<crate::confine::ProcessTree>,
) -> Option<Arc<crate::mcp::Endpoint>> {
    let resolved = shared.pipeline.resolve(phase, agent);
    let tools = build::orch_tools(agent, &resolved.toolset)?;
    let ctx = &shared.ctx;
    let prompt = crate::prompt::Prompts::of(
        &shared.pipeline,
        phase,
        crate::prompt::Vars {
            run_id: slot.run_id,
            inputs: &ctx.inputs,
            feedback: slot.feedback,
        },
    )
    .user;
    let caller = crate::mcp::Caller {
        run: slot.run_id.to_string(),
        phase: phase.name.clone(),
        agent: agent.name.clone(),
        attempt: slot.attempt,
        workspace: ctx.workdir.clone(),
        tools,
        judging: judging.cloned(),
        prompt: Some(prompt),
        knowledge: ctx.settings.knowledge.clone(),
        marker: Some(build::marker_path(slot.dir)),
        state_dir: ctx.state_dir(),
    };
    Some(Arc::new(shared.opts.host.endpoint(
        caller,
        build::endpoint_path(slot.dir),
        Arc::clone(tree),
    )))
}

/// `<state_dir>/runs/<run>/<phase>/<agent>/`: the raw logs of every attempt.
pub fn log_dir(state_dir: &Path, run_id: &str, phase: &str, agent: &str) -> std::path::PathBuf {
    state_dir.join("runs").join(run_id).join(phase).join(agent)
}
