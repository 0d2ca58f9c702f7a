//! Records for the store's unit tests.

use super::record::{Outcome, Record, RunStatus};

pub fn run_started(run_id: &str, pid: u32, started_ms: u64) -> Record {
    Record::RunStarted {
        run_id: run_id.into(),
        pipeline_name: "demo".into(),
        pipeline_path: "pipelines/demo.toml".into(),
        digest: format!("digest-of-{run_id}"),
        digests_json: r#"{"pipelines/demo.toml":"abc"}"#.into(),
        selection: "all".into(),
        pid,
        started_ms,
    }
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

pub fn phase_finished(run_id: &str, phase: &str, outcome: Outcome, ended_ms: u64) -> Record {
    Record::PhaseFinished {
        run_id: run_id.into(),
        phase: phase.into(),
        outcome,
        attempts: 1,
        ended_ms,
    }
}

pub fn attempt_started(run_id: &str, phase: &str, agent: &str, attempt: u32, at: u64) -> Record {
    Record::AttemptStarted {
        run_id: run_id.into(),
        phase: phase.into(),
        agent: agent.into(),
        attempt,
        argv_json: r#"["sh","-c","true"]"#.into(),
        env_json: r#"{"TOKEN":"<redacted>"}"#.into(),
        started_ms: at,
    }
}

pub fn attempt_finished(
    run_id: &str,
    phase: &str,
    agent: &str,
    attempt: u32,
    outcome: Outcome,
    ended_ms: u64,
) -> Record {
    Record::AttemptFinished {
        run_id: run_id.into(),
        phase: phase.into(),
        agent: agent.into(),
        attempt,
        outcome,
        exit_code: Some(if outcome == Outcome::Succeeded { 0 } else { 1 }),
        reason: (outcome != Outcome::Succeeded).then(|| "exit status 1".into()),
        session_id: Some("sess-1".into()),
        turns: 3,
        tokens_in: 100,
        tokens_out: 20,
        cost_usd: Some(0.01),
        ended_ms,
    }
}

pub fn event(run_id: &str, phase: &str, agent: &str, attempt: u32, seq: u64, ts_ms: u64) -> Record {
    Record::Event {
        run_id: run_id.into(),
        phase: phase.into(),
        agent: agent.into(),
        attempt,
        seq,
        ts_ms,
        kind: "assistant_text".into(),
        data_json: format!(r#"{{"kind":"assistant_text","text":"line {seq}"}}"#),
        raw: format!(r#"{{"type":"text","text":"line {seq}"}}"#),
    }
}

/// A whole run: each phase with one agent `a` whose single attempt ends
/// with the phase's outcome and has `events` events; the run ends with
/// `status` unless `None` (still running).
pub fn whole_run(
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
            v.push(phase_finished(run_id, phase, *outcome, t));
            continue;
        }
        v.push(phase_started(run_id, phase, t));
        v.push(attempt_started(run_id, phase, "a", 1, t));
        for seq in 0..events {
            t += 1;
            v.push(event(run_id, phase, "a", 1, seq, t));
        }
        t += 10;
        v.push(attempt_finished(run_id, phase, "a", 1, *outcome, t));
        v.push(phase_finished(run_id, phase, *outcome, t));
    }
    if let Some(s) = status {
        v.push(run_finished(run_id, s, t + 1));
    }
    v
}
