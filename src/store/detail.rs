//! A run as one value, and the one place where a run is added up:
//! [`RunDetail::apply`] folds the engine's [`Record`]s into it, in the
//! order the engine sent them. `orch run` follows its run this way (its
//! summary, `--format json`, JUnit, the step summary and the job output all
//! read the result), a resumed run starts from the detail the store kept,
//! and the store's writer keeps the same rows (`writer.rs`), which
//! `orch runs show` reads back as the same value ([`Reader::run`]).
//!
//! [`Reader::run`]: super::Reader::run

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::query::RunInfo;
use super::record::{AttemptKey, Record};
use super::status::{Outcome, RunStatus, Status};
use crate::events::{TAIL_LINES, for_each_readable_line};

/// A run with its phases, their attempts and the artifacts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunDetail {
    #[serde(flatten)]
    pub(crate) run: RunInfo,
    /// SHA-256 over the pipeline file and every prompt and profile it uses.
    pub(crate) digest: String,
    /// File path -> SHA-256 of that file.
    pub(crate) digests: serde_json::Value,
    /// In the order they were first recorded.
    pub(crate) phases: Vec<PhaseDetail>,
    pub(crate) artifacts: Vec<ArtifactRow>,
    /// What the agents reported through orch's MCP server (tasks,
    /// decisions, blockers, milestones, claims, verdicts, findings,
    /// comments, follow-ups, test health), oldest first.
    pub(crate) reports: Vec<super::ReportRow>,
    /// The learnings the run's agents added.
    pub(crate) learnings: Vec<super::LearningRow>,
    /// Where each attempt is in `phases`, so that an output line finds its
    /// attempt without a search: a cache, rebuilt as needed.
    #[serde(skip)]
    index: Index,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PhaseDetail {
    pub(crate) name: String,
    pub(crate) status: Status,
    /// A required phase's failure fails the run.
    pub(crate) required: bool,
    /// Why it did not succeed.
    pub(crate) reason: Option<String>,
    pub(crate) attempts: u32,
    pub(crate) started_ms: Option<u64>,
    pub(crate) ended_ms: Option<u64>,
    /// Every attempt of every agent, in the order they started.
    pub(crate) agents: Vec<AttemptDetail>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AttemptDetail {
    pub(crate) agent: String,
    /// From 1.
    pub(crate) attempt: u32,
    pub(crate) status: Status,
    pub(crate) exit_code: Option<i32>,
    pub(crate) reason: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) turns: u32,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) started_ms: Option<u64>,
    pub(crate) ended_ms: Option<u64>,
    /// The command line as recorded (no secrets).
    pub(crate) argv: serde_json::Value,
    /// The environment as recorded (secrets redacted).
    pub(crate) env: serde_json::Value,
    /// The size of the prompts it was sent, in tokens (`system`, `user`,
    /// and each system layer).
    pub(crate) prompt: serde_json::Value,
    /// Events recorded for the attempt.
    pub(crate) events: u64,
    /// The last lines of what it said and did (`events::readable_lines`),
    /// at most `events::TAIL_LINES`.
    pub(crate) output: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ArtifactRow {
    pub(crate) phase: String,
    pub(crate) path: String,
    pub(crate) sha256: String,
}

/// An attempt's place in [`RunDetail::phases`] (phase, then attempt).
/// Never part of what a detail is: two details with the same runs are equal
/// whatever either has looked up.
#[derive(Clone, Default)]
struct Index(
    HashMap<AttemptKey, (usize, usize)>,
    /// The attempt whose event came last, by its shared key: an attempt's
    /// events come one after another, and hashing its key for each cost
    /// more than the rest of following it.
    Option<(Arc<AttemptKey>, (usize, usize))>,
);

impl PartialEq for Index {
    fn eq(&self, _: &Index) -> bool {
        true
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Index")
    }
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

impl RunDetail {
    /// A run with nothing in it yet.
    pub(crate) fn new(run: RunInfo, digest: String, digests: serde_json::Value) -> RunDetail {
        RunDetail {
            run,
            digest,
            digests,
            phases: Vec::new(),
            artifacts: Vec::new(),
            reports: Vec::new(),
            learnings: Vec::new(),
            index: Index::default(),
        }
    }

    /// The run a `RunStarted` record begins (`None` for any other record).
    pub(crate) fn started(record: &Record) -> Option<RunDetail> {
        let Record::RunStarted { run_id, .. } = record else {
            return None;
        };
        let mut d = RunDetail::new(
            RunInfo {
                run_id: run_id.clone(),
                pipeline_name: String::new(),
                pipeline_path: String::new(),
                status: RunStatus::Running,
                selection: String::new(),
                pid: 0,
                started_ms: 0,
                ended_ms: None,
            },
            String::new(),
            serde_json::Value::Null,
        );
        d.apply(record);
        Some(d)
    }

    /// Fold in what the engine recorded next, as the store keeps it: a run
    /// started again (resumed) keeps its phases, its first start time and
    /// its attempts; a phase started again is running again; an artifact
    /// recorded again has its new hash. Records of another run, and of an
    /// attempt never started, change nothing.
    pub(crate) fn apply(&mut self, record: &Record) {
        match record {
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
                if self.run.run_id != *run_id {
                    return;
                }
                let first = self.phases.is_empty() && self.run.started_ms == 0;
                self.run.pipeline_name = pipeline_name.clone();
                self.run.pipeline_path = pipeline_path.clone();
                self.run.selection = selection.clone();
                self.run.pid = *pid;
                self.run.status = RunStatus::Running;
                self.run.ended_ms = None;
                if first {
                    self.run.started_ms = *started_ms;
                }
                self.digest = digest.clone();
                self.digests = json(digests_json);
            }
            Record::RunFinished {
                run_id,
                status,
                ended_ms,
            } => {
                if self.run.run_id == *run_id {
                    self.run.status = *status;
                    self.run.ended_ms = Some(*ended_ms);
                }
            }
            Record::PhaseStarted {
                run_id,
                phase,
                started_ms,
            } => {
                if let Some(p) = self.phase(run_id, phase) {
                    p.status = Status::Running;
                    p.started_ms = Some(*started_ms);
                    p.ended_ms = None;
                }
            }
            Record::PhaseFinished {
                run_id,
                phase,
                outcome,
                required,
                reason,
                attempts,
                started_ms,
                ended_ms,
            } => {
                // A phase can end without starting (skipped after a
                // failure): its start is the record's only when it is new.
                let new = !self.phases.iter().any(|p| p.name == *phase);
                if let Some(p) = self.phase(run_id, phase) {
                    p.status = (*outcome).into();
                    p.required = *required;
                    p.reason = reason.clone();
                    p.attempts = *attempts;
                    if new {
                        p.started_ms = *started_ms;
                    }
                    p.ended_ms = Some(*ended_ms);
                    // An attempt this run of the phase left without an
                    // end (its task lost to an orch bug) ended with it;
                    // not one from before the phase started again (a
                    // resumed run's, which an import may yet end).
                    let (status, why) = left_open(*outcome, reason.as_deref());
                    let since = p.started_ms;
                    let open = |a: &&mut AttemptDetail| {
                        a.status == Status::Running
                            && since.is_some_and(|s| a.started_ms.is_some_and(|t| t >= s))
                    };
                    for a in p.agents.iter_mut().filter(open) {
                        a.status = status.into();
                        a.reason = Some(why.clone());
                        a.ended_ms = Some(*ended_ms);
                    }
                }
            }
            Record::AttemptStarted {
                run_id,
                phase,
                agent,
                attempt,
                argv_json,
                env_json,
                prompt_json,
                started_ms,
            } => {
                let key = AttemptKey {
                    run_id: run_id.clone(),
                    phase: phase.clone(),
                    agent: agent.clone(),
                    attempt: *attempt,
                };
                if let Some(a) = self.add_attempt(key) {
                    a.started_ms = Some(*started_ms);
                    a.argv = json(argv_json);
                    a.env = json(env_json);
                    a.prompt = json(prompt_json);
                }
            }
            Record::Event {
                key,
                kind,
                data_json,
                raw,
                ..
            } => {
                let at = match &self.index.1 {
                    Some((k, at)) if Arc::ptr_eq(k, key) => Some(*at),
                    _ => {
                        let at = self.place(key);
                        self.index.1 = at.map(|at| (Arc::clone(key), at));
                        at
                    }
                };
                let Some(a) = at.and_then(|(k, a)| self.phases.get_mut(k)?.agents.get_mut(a))
                else {
                    return;
                };
                a.events += 1;
                for_each_readable_line(kind, data_json, raw, |line| {
                    if a.output.len() == TAIL_LINES {
                        a.output.remove(0);
                    }
                    a.output.push(line);
                });
            }
            Record::AttemptFinished {
                run_id,
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
                let key = AttemptKey {
                    run_id: run_id.clone(),
                    phase: phase.clone(),
                    agent: agent.clone(),
                    attempt: *attempt,
                };
                // An attempt can end without a recorded start (it could
                // not be spawned).
                if self.attempt(&key).is_none() {
                    self.add_attempt(key.clone());
                }
                let Some(a) = self.attempt(&key) else {
                    return;
                };
                a.status = (*outcome).into();
                a.exit_code = *exit_code;
                a.reason = reason.clone();
                a.session_id = session_id.clone();
                a.turns = *turns;
                a.tokens_in = *tokens_in;
                a.tokens_out = *tokens_out;
                a.cost_usd = *cost_usd;
                a.ended_ms = Some(*ended_ms);
            }
            Record::Artifact {
                run_id,
                phase,
                path,
                sha256,
            } => {
                if self.run.run_id != *run_id {
                    return;
                }
                match self
                    .artifacts
                    .iter_mut()
                    .find(|a| a.phase == *phase && a.path == *path)
                {
                    Some(a) => a.sha256 = sha256.clone(),
                    None => self.artifacts.push(ArtifactRow {
                        phase: phase.clone(),
                        path: path.clone(),
                        sha256: sha256.clone(),
                    }),
                }
            }
        }
    }

    /// The phase named `name`, added (running) when first seen.
    fn phase(&mut self, run_id: &str, name: &str) -> Option<&mut PhaseDetail> {
        if self.run.run_id != run_id {
            return None;
        }
        let k = match self.phases.iter().rposition(|p| p.name == name) {
            Some(k) => k,
            None => {
                self.phases.push(PhaseDetail {
                    name: name.to_string(),
                    status: Status::Running,
                    required: true,
                    reason: None,
                    attempts: 0,
                    started_ms: None,
                    ended_ms: None,
                    agents: Vec::new(),
                });
                self.phases.len() - 1
            }
        };
        self.phases.get_mut(k)
    }

    /// A new attempt (running, nothing recorded of it yet) at the end of
    /// its phase's.
    fn add_attempt(&mut self, key: AttemptKey) -> Option<&mut AttemptDetail> {
        self.phase(&key.run_id, &key.phase)?;
        let k = self.phases.iter().rposition(|p| p.name == key.phase)?;
        let p = &mut self.phases[k];
        p.agents.push(AttemptDetail {
            agent: key.agent.clone(),
            attempt: key.attempt,
            status: Status::Running,
            exit_code: None,
            reason: None,
            session_id: None,
            turns: 0,
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: None,
            started_ms: None,
            ended_ms: None,
            argv: serde_json::json!([]),
            env: serde_json::json!({}),
            prompt: serde_json::json!({}),
            events: 0,
            output: Vec::new(),
        });
        let at = (k, p.agents.len() - 1);
        self.index.0.insert(key, at);
        self.phases[at.0].agents.get_mut(at.1)
    }

    /// The attempt `key` names, found through the index (filled from the
    /// phases when the detail was read from the store).
    fn attempt(&mut self, key: &AttemptKey) -> Option<&mut AttemptDetail> {
        let at = self.place(key)?;
        self.phases.get_mut(at.0)?.agents.get_mut(at.1)
    }

    /// Where the attempt `key` names is in `phases` (phase, then attempt).
    fn place(&mut self, key: &AttemptKey) -> Option<(usize, usize)> {
        if key.run_id != self.run.run_id {
            return None;
        }
        Some(match self.index.0.get(key) {
            Some(&at) => at,
            None => {
                let k = self.phases.iter().position(|p| p.name == key.phase)?;
                let a = self.phases[k]
                    .agents
                    .iter()
                    .position(|a| a.agent == key.agent && a.attempt == key.attempt)?;
                self.index.0.insert(key.clone(), (k, a));
                (k, a)
            }
        })
    }

    /// The same run with only the phases named (in the order recorded),
    /// and their artifacts: what one invocation of `orch run` dealt with.
    pub(crate) fn only(&self, phases: &[String]) -> RunDetail {
        let keep = |name: &String| phases.contains(name);
        let mut d = RunDetail::new(self.run.clone(), self.digest.clone(), self.digests.clone());
        d.phases = self
            .phases
            .iter()
            .filter(|p| keep(&p.name))
            .cloned()
            .collect();
        d.artifacts = self
            .artifacts
            .iter()
            .filter(|a| keep(&a.phase))
            .cloned()
            .collect();
        d.reports = self.reports.clone();
        d.learnings = self.learnings.clone();
        d
    }
}

/// One agent of a phase over all its attempts: what the reports show on
/// an agent's line.
#[derive(Debug, Clone)]
pub(crate) struct AgentTotal<'a> {
    pub(crate) agent: &'a str,
    /// In the order they started.
    pub(crate) attempts: Vec<&'a AttemptDetail>,
    /// Over every attempt.
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    /// Over the attempts that reported one; `None` when none did.
    pub(crate) cost_usd: Option<f64>,
}

impl<'a> AgentTotal<'a> {
    /// The attempt it ended with: its status, exit code, reason and turns
    /// are the agent's.
    pub(crate) fn last(&self) -> &'a AttemptDetail {
        self.attempts.last().expect("an agent total has an attempt")
    }

    /// When its first attempt started.
    pub(crate) fn started_ms(&self) -> Option<u64> {
        self.attempts.first().and_then(|a| a.started_ms)
    }

    /// The last session id a CLI named.
    pub(crate) fn session_id(&self) -> Option<&'a str> {
        self.attempts
            .iter()
            .rev()
            .find_map(|a| a.session_id.as_deref())
    }
}

impl PhaseDetail {
    /// The phase's attempts by agent, each agent in the order it first
    /// started, with its sums.
    pub(crate) fn by_agent(&self) -> Vec<AgentTotal<'_>> {
        let mut out: Vec<AgentTotal<'_>> = Vec::new();
        for a in &self.agents {
            let k = match out.iter().position(|t| t.agent == a.agent) {
                Some(k) => k,
                None => {
                    out.push(AgentTotal {
                        agent: &a.agent,
                        attempts: Vec::new(),
                        tokens_in: 0,
                        tokens_out: 0,
                        cost_usd: None,
                    });
                    out.len() - 1
                }
            };
            let t = &mut out[k];
            t.attempts.push(a);
            t.tokens_in += a.tokens_in;
            t.tokens_out += a.tokens_out;
            if let Some(c) = a.cost_usd {
                t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
            }
        }
        out
    }
}

/// How an attempt still open when its phase ended is recorded: it did
/// not succeed (it never said so), cancelled with a cancelled phase, and
/// why.
pub(crate) fn left_open(phase: Outcome, reason: Option<&str>) -> (Outcome, String) {
    let status = if phase == Outcome::Cancelled {
        Outcome::Cancelled
    } else {
        Outcome::Failed
    };
    let why = match reason {
        Some(r) => format!("it never ended; its phase ended: {r}"),
        None => "it never ended; its phase ended".to_string(),
    };
    (status, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixture::*;
    use crate::store::status::Outcome;

    /// Fold `records` into `d`, or from nothing as `orch run` follows a
    /// new run.
    fn fold(mut d: Option<RunDetail>, records: &[Record]) -> RunDetail {
        for r in records {
            match d.as_mut() {
                Some(d) => d.apply(r),
                None => d = RunDetail::started(r),
            }
        }
        d.expect("a run's first record starts it")
    }

    /// A run with what the fold must get right: a skipped phase, a failed
    /// one, more output than the tail holds, an artifact recorded twice,
    /// an attempt that ended without a recorded start, and records of
    /// another run in between.
    fn first_part(id: &str) -> Vec<Record> {
        // orch processes that are gone (the writer refuses a run while
        // another one's orch lives).
        let gone = dead_pid();
        let mut v = whole_run(
            id,
            gone,
            1_000,
            &[
                ("plan", Outcome::Succeeded),
                ("build", Outcome::Failed),
                ("ship", Outcome::Skipped),
            ],
            (TAIL_LINES + 7) as u64,
            None,
        );
        v.push(artifact(id, "plan", "plan.md", "aa"));
        v.push(artifact(id, "plan", "plan.md", "bb"));
        v.extend(whole_run(
            "other",
            gone,
            5,
            &[("plan", Outcome::Succeeded)],
            3,
            Some(RunStatus::Succeeded),
        ));
        v.push(phase_started(id, "lint", 2_000));
        v.push(attempt(id, "lint", "l", 1).finish(Outcome::Failed, 2_001));
        v.push(phase_finished(id, "lint", Outcome::Failed, 1, 2_002));
        // An attempt whose task was lost (an orch bug): no end of its own.
        // One from before the phase started again (imported from a run
        // cut off elsewhere) is not this run's to end.
        v.push(phase_started(id, "lost", 2_003));
        v.push(attempt(id, "lost", "y", 1).start(2_003));
        v.push(phase_started(id, "lost", 2_004));
        v.push(attempt(id, "lost", "x", 1).start(2_004));
        v.push(phase_finished(id, "lost", Outcome::Failed, 1, 2_005));
        v.push(run_finished(id, RunStatus::Failed, 2_006));
        v
    }

    /// `--resume`: the run starts again and its failed phase runs again,
    /// as attempt 2, with output of several lines per event.
    fn second_part(id: &str) -> Vec<Record> {
        let a = attempt(id, "build", "a", 2);
        let mut v = vec![
            run_started(id, std::process::id(), 9_000),
            phase_started(id, "build", 9_001),
            a.start(9_001),
        ];
        for seq in 0..8 {
            v.push(a.event_of(
                seq,
                9_002 + seq,
                "assistant_text",
                &format!(r#"{{"kind":"assistant_text","text":"a {seq}\nb {seq}\nc {seq}"}}"#),
                "{}",
            ));
        }
        v.push(a.finish(Outcome::Succeeded, 9_100));
        v.push(phase_finished(id, "build", Outcome::Succeeded, 1, 9_101));
        v.push(run_finished(id, RunStatus::Succeeded, 9_102));
        v
    }

    /// What the reducer folds is what the store's writer keeps and
    /// `orch runs show` reads back, for a new run and for a resumed one
    /// that starts from the stored detail.
    #[test]
    fn the_fold_is_what_the_store_keeps() {
        let id = "r1";
        let (first, second) = (first_part(id), second_part(id));
        let (_dir, store) = store_with(first.clone());
        let stored = store.reader().run(id).unwrap().unwrap();
        let live = fold(None, &first);
        assert_eq!(live, stored);
        let build = &live.phases[1].agents[0];
        assert_eq!(build.events, (TAIL_LINES + 7) as u64);
        assert_eq!(build.output.len(), TAIL_LINES);
        assert_eq!(live.artifacts.len(), 1);
        assert_eq!(live.artifacts[0].sha256, "bb");
        assert_eq!(live.phases[3].agents[0].started_ms, None);
        let lost = &live.phases.last().unwrap().agents;
        assert_eq!(
            (lost[0].agent.as_str(), lost[0].status),
            ("y", Status::Running)
        );
        assert_eq!(
            (lost[1].agent.as_str(), lost[1].status),
            ("x", Status::Failed)
        );
        assert_eq!(lost[1].ended_ms, Some(2_005));
        assert_eq!(
            lost[1].reason.as_deref(),
            Some("it never ended; its phase ended: it failed")
        );

        let w = store.writer();
        send_all(&w, second.clone());
        w.flush().unwrap();
        let stored = store.reader().run(id).unwrap().unwrap();
        let resumed = fold(Some(live), &second);
        assert_eq!(resumed, stored);
        assert_eq!(
            resumed.run.started_ms, 1_000,
            "a resumed run keeps its start"
        );
        assert_eq!(resumed.run.pid, std::process::id());
        assert_eq!(resumed.phases[1].agents.len(), 2);
        assert_eq!(resumed.phases[1].agents[1].output.len(), TAIL_LINES);
        assert_eq!(resumed.phases[1].agents[1].output.last().unwrap(), "c 7");
        // Folding both parts in one go gives the same.
        let all: Vec<Record> = first.into_iter().chain(second).collect();
        assert_eq!(fold(None, &all), stored);
        store.close().unwrap();
    }

    /// An agent over its attempts: the last says how it ended, tokens and
    /// cost add up, the session is the last one named.
    #[test]
    fn an_agent_adds_up_over_its_attempts() {
        let id = "r2";
        let a1 = attempt(id, "p", "a", 1);
        let a2 = attempt(id, "p", "a", 2);
        let j = attempt(id, "p", "judge", 3);
        let d = fold(
            None,
            &[
                run_started(id, 1, 0),
                phase_started(id, "p", 0),
                a1.start(1),
                a1.finish(Outcome::Failed, 2),
                a2.start(3),
                j.start(4),
                j.finish(Outcome::Succeeded, 5),
                a2.finish(Outcome::Succeeded, 6),
            ],
        );
        let totals = d.phases[0].by_agent();
        assert_eq!(totals.len(), 2);
        let a = &totals[0];
        assert_eq!((a.agent, a.attempts.len()), ("a", 2));
        assert_eq!(a.last().status, Status::Succeeded);
        assert_eq!((a.tokens_in, a.tokens_out), (2_400, 600));
        assert_eq!(a.cost_usd, Some(0.025));
        assert_eq!(a.started_ms(), Some(1));
        assert_eq!(a.session_id(), Some("sess-1"));
        assert_eq!(totals[1].agent, "judge");
    }
}
