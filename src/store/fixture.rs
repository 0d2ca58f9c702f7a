//! Record builders for tests: the store's unit tests,
//! `tests/integration/runs.rs` and `benches/store.rs` write their histories
//! with these. Not part of orch's interface, and not in its binary: compiled
//! for unit tests and under the `test-fixtures` feature, which only the
//! dev-dependency on orch itself (tests, benches) turns on.

use std::sync::Arc;

use super::record::{AttemptKey, Outcome, Record, RunStatus};
#[cfg(test)]
use super::writer::{Store, Writer};

/// A run of the pipeline `demo` (`pipelines/demo.toml`), all phases
/// selected; its digest is [`digest_of`] the run id.
pub fn run_started(run_id: &str, pid: u32, started_ms: u64) -> Record {
    Record::RunStarted {
        run_id: run_id.into(),
        pipeline_name: "demo".into(),
        pipeline_path: "pipelines/demo.toml".into(),
        digest: digest_of(run_id),
        digests_json: r#"{"pipelines/demo.toml":"abc"}"#.into(),
        selection: "all".into(),
        pid,
        started_ms,
    }
}

/// The digest [`run_started`] records: 64 hex digits, one per run id.
pub fn digest_of(run_id: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(run_id.as_bytes()))
}

pub fn run_finished(run_id: &str, status: RunStatus, ended_ms: u64) -> Record {
    Record::RunFinished {
        run_id: run_id.into(),
        status,
        ended_ms,
    }
}

pub fn phase_started(run_id: &str, phase: &str, started_ms: u64) -> Record {
    Record::PhaseStarted {
        run_id: run_id.into(),
        phase: phase.into(),
        started_ms,
    }
}

pub fn phase_finished(
    run_id: &str,
    phase: &str,
    outcome: Outcome,
    attempts: u32,
    ended_ms: u64,
) -> Record {
    Record::PhaseFinished {
        run_id: run_id.into(),
        phase: phase.into(),
        outcome,
        required: true,
        reason: (outcome != Outcome::Succeeded).then(|| format!("it {outcome}")),
        attempts,
        started_ms: None,
        ended_ms,
    }
}

pub fn artifact(run_id: &str, phase: &str, path: &str, sha256: &str) -> Record {
    Record::Artifact {
        run_id: run_id.into(),
        phase: phase.into(),
        path: path.into(),
        sha256: sha256.into(),
    }
}

/// One agent attempt's records; its events share one key, as the engine's
/// do.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub(crate) key: Arc<AttemptKey>,
}

pub fn attempt(run_id: &str, phase: &str, agent: &str, attempt: u32) -> Attempt {
    Attempt {
        key: AttemptKey::new(run_id, phase, agent, attempt),
    }
}

impl Attempt {
    /// Started as `sh -c true`, with a redacted secret in its environment.
    pub fn start(&self, started_ms: u64) -> Record {
        let k = &self.key;
        Record::AttemptStarted {
            run_id: k.run_id.clone(),
            phase: k.phase.clone(),
            agent: k.agent.clone(),
            attempt: k.attempt,
            argv_json: r#"["sh","-c","true"]"#.into(),
            env_json: r#"{"TOKEN":"<redacted>"}"#.into(),
            prompt_json: r#"{"system":2,"user":3,"layers":[["boundary",2]]}"#.into(),
            started_ms,
        }
    }

    #[cfg(test)]
    /// An `assistant_text` event saying `line {seq}`.
    pub(crate) fn event(&self, seq: u64, ts_ms: u64) -> Record {
        self.event_of(
            seq,
            ts_ms,
            "assistant_text",
            &format!(r#"{{"kind":"assistant_text","text":"line {seq}"}}"#),
            &format!(r#"{{"type":"text","text":"line {seq}"}}"#),
        )
    }

    /// An event of any kind.
    pub fn event_of(&self, seq: u64, ts_ms: u64, kind: &str, data_json: &str, raw: &str) -> Record {
        Record::Event {
            key: Arc::clone(&self.key),
            seq,
            ts_ms,
            kind: kind.to_string().into(),
            data_json: data_json.to_string().into(),
            raw: raw.into(),
        }
    }

    /// Ended with `outcome`: exit status 0 when it succeeded, else 1 with
    /// the reason `exit status 1`.
    pub fn finish(&self, outcome: Outcome, ended_ms: u64) -> Record {
        let ok = outcome == Outcome::Succeeded;
        self.finish_with(
            outcome,
            Some(if ok { 0 } else { 1 }),
            (!ok).then_some("exit status 1"),
            ended_ms,
        )
    }

    /// Ended with this exit code and reason; 2 turns, 1200 tokens in, 300
    /// out, $0.0125, session `sess-1`.
    pub fn finish_with(
        &self,
        outcome: Outcome,
        exit_code: Option<i32>,
        reason: Option<&str>,
        ended_ms: u64,
    ) -> Record {
        let k = &self.key;
        Record::AttemptFinished {
            run_id: k.run_id.clone(),
            phase: k.phase.clone(),
            agent: k.agent.clone(),
            attempt: k.attempt,
            outcome,
            exit_code,
            reason: reason.map(str::to_string),
            session_id: Some("sess-1".into()),
            turns: 2,
            tokens_in: 1200,
            tokens_out: 300,
            cost_usd: Some(0.0125),
            // The store keeps the start `start` recorded.
            started_ms: ended_ms,
            ended_ms,
        }
    }
}

/// A pid that was alive and is not any more (for a run whose orch died).
pub fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[cfg(test)]
/// A whole run: each phase with one agent `a` whose single attempt ends
/// with the phase's outcome and has `events` events (a skipped phase has
/// none); the run ends with `status` unless `None` (still running).
pub(crate) fn whole_run(
    run_id: &str,
    pid: u32,
    t0: u64,
    phases: &[(&str, Outcome)],
    events: u64,
    status: Option<RunStatus>,
) -> Vec<Record> {
    let mut v = vec![run_started(run_id, pid, t0)];
    let mut t = t0;
    for (phase, outcome) in phases {
        if *outcome == Outcome::Skipped {
            v.push(phase_finished(run_id, phase, *outcome, 0, t));
            continue;
        }
        let a = attempt(run_id, phase, "a", 1);
        v.push(phase_started(run_id, phase, t));
        v.push(a.start(t));
        for seq in 0..events {
            t += 1;
            v.push(a.event(seq, t));
        }
        t += 10;
        v.push(a.finish(*outcome, t));
        v.push(phase_finished(run_id, phase, *outcome, 1, t));
    }
    if let Some(s) = status {
        v.push(run_finished(run_id, s, t + 1));
    }
    v
}

/// Queue every record, in order (nothing waits for the commit).
#[cfg(test)]
pub(crate) fn send_all(w: &Writer, records: impl IntoIterator<Item = Record>) {
    for r in records {
        w.send(r).unwrap();
    }
}

/// A store in a fresh directory with these records committed.
#[cfg(test)]
pub(crate) fn store_with(records: impl IntoIterator<Item = Record>) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let w = store.writer();
    send_all(&w, records);
    w.flush().unwrap();
    (dir, store)
}
