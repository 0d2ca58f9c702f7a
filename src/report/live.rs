//! A run's detail built as it happens, from its event stream: the same
//! [`RunDetail`] `orch runs show` reads from the store, so every report
//! reads the same from a live run and from a stored (or imported) one.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::engine::{Listener, RunEvent};
use crate::events::{TAIL_LINES, readable_lines};
use crate::store::{
    ArtifactRow, AttemptDetail, PhaseDetail, RunDetail, RunInfo, RunStatus, Status,
};

/// Follows a run and keeps its detail.
#[derive(Default)]
pub struct LiveDetail(Mutex<State>);

#[derive(Default)]
struct State {
    detail: Option<RunDetail>,
    /// The output tail of the attempt being built, per (phase, agent,
    /// attempt), while it runs.
    tails: Vec<((String, String, u32), VecDeque<String>)>,
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
    fn phase(&mut self, name: &str) -> Option<&mut PhaseDetail> {
        let d = self.detail.as_mut()?;
        if let Some(k) = d.phases.iter().position(|p| p.name == name) {
            return d.phases.get_mut(k);
        }
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
        d.phases.last_mut()
    }

    fn attempt(&mut self, phase: &str, agent: &str, attempt: u32) -> Option<&mut AttemptDetail> {
        self.phase(phase)?
            .agents
            .iter_mut()
            .find(|a| a.agent == agent && a.attempt == attempt)
    }

    fn tail(&mut self, phase: &str, agent: &str, attempt: u32) -> &mut VecDeque<String> {
        let key = (phase.to_string(), agent.to_string(), attempt);
        let k = match self.tails.iter().position(|(k, _)| *k == key) {
            Some(k) => k,
            None => {
                self.tails.push((key, VecDeque::new()));
                self.tails.len() - 1
            }
        };
        &mut self.tails[k].1
    }
}

impl Listener for LiveDetail {
    fn on(&self, event: &RunEvent) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            RunEvent::RunStarted {
                run_id,
                pipeline_name,
                pipeline_path,
                digest,
                digests_json,
                selection,
                pid,
                started_ms,
            } => {
                s.detail = Some(RunDetail {
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
            RunEvent::PhaseStarted { phase, started_ms } => {
                if let Some(p) = s.phase(phase) {
                    p.status = Status::Running;
                    p.started_ms = Some(*started_ms);
                    p.ended_ms = None;
                }
            }
            RunEvent::PhaseFinished {
                phase,
                outcome,
                required,
                reason,
                attempts,
                ended_ms,
                ..
            } => {
                if let Some(p) = s.phase(phase) {
                    p.status = (*outcome).into();
                    p.required = *required;
                    p.reason = reason.clone();
                    p.attempts = *attempts;
                    p.ended_ms = Some(*ended_ms);
                }
            }
            RunEvent::AttemptStarted {
                phase,
                agent,
                attempt,
                argv_json,
                env_json,
                prompt_json,
                started_ms,
            } => {
                if let Some(p) = s.phase(phase) {
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
                }
            }
            RunEvent::Output {
                key,
                kind,
                data_json,
                raw,
                ..
            } => {
                if let Some(a) = s.attempt(&key.phase, &key.agent, key.attempt) {
                    a.events += 1;
                }
                let lines = readable_lines(kind, data_json, raw);
                if !lines.is_empty() {
                    let tail = s.tail(&key.phase, &key.agent, key.attempt);
                    for l in lines {
                        if tail.len() == TAIL_LINES {
                            tail.pop_front();
                        }
                        tail.push_back(l);
                    }
                }
            }
            RunEvent::AttemptFinished {
                phase,
                agent,
                attempt,
                result,
            } => {
                let key = (phase.clone(), agent.clone(), *attempt);
                let tail = s
                    .tails
                    .iter()
                    .position(|(k, _)| *k == key)
                    .map(|k| s.tails.swap_remove(k).1)
                    .unwrap_or_default();
                if let Some(a) = s.attempt(phase, agent, *attempt) {
                    a.status = result.outcome.into();
                    a.exit_code = result.exit_code;
                    a.reason = result.reason.clone();
                    a.session_id = result.session_id.clone();
                    a.turns = result.turns;
                    a.tokens_in = result.tokens_in;
                    a.tokens_out = result.tokens_out;
                    a.cost_usd = result.cost_usd;
                    a.ended_ms = Some(result.ended_ms);
                    a.output = tail.into();
                }
            }
            RunEvent::Artifact {
                phase,
                path,
                sha256,
            } => {
                if let Some(d) = s.detail.as_mut() {
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
            RunEvent::RunFinished { status, ended_ms } => {
                if let Some(d) = s.detail.as_mut() {
                    d.run.status = *status;
                    d.run.ended_ms = Some(*ended_ms);
                }
            }
            RunEvent::Activity { .. }
            | RunEvent::Retrying { .. }
            | RunEvent::Judged { .. }
            | RunEvent::ContractWarning { .. } => {}
        }
    }
}
