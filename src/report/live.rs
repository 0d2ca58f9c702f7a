//! A run's detail built as it happens, from its event stream: the same
//! [`RunDetail`] `orch runs show` reads from the store, so every report
//! reads the same from a live run and from a stored (or imported) one.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::engine::{Listener, RunEvent};
use crate::events::{TAIL_LINES, readable_lines};
use crate::store::{
    ArtifactRow, AttemptDetail, AttemptKey, PhaseDetail, Record, RunDetail, RunInfo, RunStatus,
    Status,
};

/// Follows a run and keeps its detail.
#[derive(Default)]
pub struct LiveDetail(Mutex<State>);

/// An attempt (the run is the one followed).
type Key = AttemptKey;

#[derive(Default)]
struct State {
    detail: Option<RunDetail>,
    /// Where each attempt is in `detail` (phase index, attempt index), so
    /// an output line finds its attempt without a search.
    attempts: HashMap<Key, (usize, usize)>,
    /// The output tail of each running attempt.
    tails: HashMap<Key, VecDeque<String>>,
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

impl LiveDetail {
    /// The run as far as it went (`None` before it started).
    pub fn detail(&self) -> Option<RunDetail> {
        let state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        state.detail.clone()
    }
}

impl State {
    /// The phase named `name`, added (running) when first seen.
    fn phase(&mut self, name: &str) -> Option<(usize, &mut PhaseDetail)> {
        let d = self.detail.as_mut()?;
        let k = match d.phases.iter().position(|p| p.name == name) {
            Some(k) => k,
            None => {
                d.phases.push(PhaseDetail {
                    name: name.to_string(),
                    status: Status::Running,
                    required: true,
                    reason: None,
                    attempts: 0,
                    started_ms: None,
                    ended_ms: None,
                    agents: Vec::new(),
                });
                d.phases.len() - 1
            }
        };
        Some((k, &mut d.phases[k]))
    }

    fn key(&self, phase: &str, agent: &str, attempt: u32) -> Key {
        AttemptKey {
            run_id: self
                .detail
                .as_ref()
                .map(|d| d.run.run_id.clone())
                .unwrap_or_default(),
            phase: phase.to_string(),
            agent: agent.to_string(),
            attempt,
        }
    }

    fn attempt(&mut self, key: &Key) -> Option<&mut AttemptDetail> {
        let &(p, a) = self.attempts.get(key)?;
        self.detail.as_mut()?.phases.get_mut(p)?.agents.get_mut(a)
    }

    fn record(&mut self, r: &Record) {
        match r {
            Record::RunStarted {
                run_id,
                pipeline_name,
                pipeline_path,
                digest,
                digests_json,
                selection,
                pid,
                started_ms,
            } => {
                self.detail = Some(RunDetail {
                    run: RunInfo {
                        run_id: run_id.clone(),
                        pipeline_name: pipeline_name.clone(),
                        pipeline_path: pipeline_path.clone(),
                        status: RunStatus::Running,
                        selection: selection.clone(),
                        pid: *pid,
                        started_ms: *started_ms,
                        ended_ms: None,
                    },
                    digest: digest.clone(),
                    digests: json(digests_json),
                    phases: Vec::new(),
                    artifacts: Vec::new(),
                    reports: Vec::new(),
                    learnings: Vec::new(),
                });
            }
            Record::PhaseStarted {
                phase, started_ms, ..
            } => {
                if let Some((_, p)) = self.phase(phase) {
                    p.status = Status::Running;
                    p.started_ms = Some(*started_ms);
                    p.ended_ms = None;
                }
            }
            Record::PhaseFinished {
                phase,
                outcome,
                required,
                reason,
                attempts,
                ended_ms,
                ..
            } => {
                if let Some((_, p)) = self.phase(phase) {
                    p.status = (*outcome).into();
                    p.required = *required;
                    p.reason = reason.clone();
                    p.attempts = *attempts;
                    p.ended_ms = Some(*ended_ms);
                }
            }
            Record::AttemptStarted {
                phase,
                agent,
                attempt,
                argv_json,
                env_json,
                prompt_json,
                started_ms,
                ..
            } => {
                let Some((k, p)) = self.phase(phase) else {
                    return;
                };
                p.agents.push(AttemptDetail {
                    agent: agent.clone(),
                    attempt: *attempt,
                    status: Status::Running,
                    exit_code: None,
                    reason: None,
                    session_id: None,
                    turns: 0,
                    tokens_in: 0,
                    tokens_out: 0,
                    cost_usd: None,
                    started_ms: Some(*started_ms),
                    ended_ms: None,
                    argv: json(argv_json),
                    env: json(env_json),
                    prompt: json(prompt_json),
                    events: 0,
                    output: Vec::new(),
                });
                let at = (k, p.agents.len() - 1);
                let key = self.key(phase, agent, *attempt);
                self.attempts.insert(key, at);
            }
            Record::Event {
                key,
                kind,
                data_json,
                raw,
                ..
            } => {
                if let Some(a) = self.attempt(key) {
                    a.events += 1;
                }
                let lines = readable_lines(kind, data_json, raw);
                if !lines.is_empty() {
                    if !self.tails.contains_key(&**key) {
                        self.tails.insert(Key::clone(key), VecDeque::new());
                    }
                    let tail = self.tails.get_mut(&**key).expect("just added");
                    for l in lines {
                        if tail.len() == TAIL_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(l);
                    }
                }
            }
            Record::AttemptFinished {
                phase,
                agent,
                attempt,
                outcome,
                exit_code,
                reason,
                session_id,
                turns,
                tokens_in,
                tokens_out,
                cost_usd,
                ended_ms,
                ..
            } => {
                let k = self.key(phase, agent, *attempt);
                let tail = self.tails.remove(&k).unwrap_or_default();
                if let Some(a) = self.attempt(&k) {
                    a.status = (*outcome).into();
                    a.exit_code = *exit_code;
                    a.reason = reason.clone();
                    a.session_id = session_id.clone();
                    a.turns = *turns;
                    a.tokens_in = *tokens_in;
                    a.tokens_out = *tokens_out;
                    a.cost_usd = *cost_usd;
                    a.ended_ms = Some(*ended_ms);
                    a.output = tail.into();
                }
            }
            Record::Artifact {
                phase,
                path,
                sha256,
                ..
            } => {
                if let Some(d) = self.detail.as_mut() {
                    match d
                        .artifacts
                        .iter_mut()
                        .find(|a| a.phase == *phase && a.path == *path)
                    {
                        Some(a) => a.sha256 = sha256.clone(),
                        None => d.artifacts.push(ArtifactRow {
                            phase: phase.clone(),
                            path: path.clone(),
                            sha256: sha256.clone(),
                        }),
                    }
                }
            }
            Record::RunFinished {
                status, ended_ms, ..
            } => {
                if let Some(d) = self.detail.as_mut() {
                    d.run.status = *status;
                    d.run.ended_ms = Some(*ended_ms);
                }
            }
        }
    }
}

impl Listener for LiveDetail {
    fn on(&self, event: &RunEvent) {
        if let RunEvent::Recorded(r) = event {
            let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
            s.record(r);
        }
    }
}
