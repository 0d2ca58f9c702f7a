//! The one stream of what happens in a run. The engine emits [`RunEvent`]s
//! in order; every listener (the live view, the report builder) sees each
//! one by reference, and the store's writer gets it last, by value, as a
//! [`Record`]. Nothing else reports a run: the summary, JUnit and the CI
//! step summary are all built from this stream (see `crate::report`).

use std::sync::Arc;
use std::time::Duration;

use super::supervisor::AttemptResult;
use crate::store::{AttemptKey, Outcome, Record, RunStatus};

/// One thing that happened in a run.
#[derive(Debug, Clone)]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        pipeline_name: String,
        pipeline_path: String,
        /// SHA-256 over the pipeline file and every prompt and profile.
        digest: String,
        /// JSON object: file path -> SHA-256.
        digests_json: String,
        /// `all`, `phase:a,b` or `from:a`.
        selection: String,
        pid: u32,
        started_ms: u64,
    },
    PhaseStarted {
        phase: String,
        started_ms: u64,
    },
    /// A phase ended: ran, or was skipped or cancelled without starting
    /// (then `started_ms` is `None`).
    PhaseFinished {
        phase: String,
        outcome: Outcome,
        required: bool,
        reason: Option<String>,
        attempts: u32,
        started_ms: Option<u64>,
        ended_ms: u64,
    },
    AttemptStarted {
        phase: String,
        agent: String,
        attempt: u32,
        /// JSON array; as shown (no secrets).
        argv_json: String,
        /// JSON object; as shown (secrets redacted).
        env_json: String,
        /// JSON object: the prompts' sizes in tokens.
        prompt_json: String,
        started_ms: u64,
    },
    /// A line an agent printed, normalized.
    Output {
        key: Arc<AttemptKey>,
        /// Order within the attempt, from 0.
        seq: u64,
        ts_ms: u64,
        /// `tool_call`, ..., or `raw` / `stderr` for a line with no event.
        kind: String,
        /// The normalized event as JSON (`null` for raw/stderr lines).
        data_json: String,
        raw: String,
    },
    /// A running agent called a tool or finished a turn.
    Activity {
        phase: String,
        agent: String,
        turns: u32,
        last_tool: Option<String>,
    },
    AttemptFinished {
        phase: String,
        agent: String,
        attempt: u32,
        result: Box<AttemptResult>,
    },
    Retrying {
        phase: String,
        agent: String,
        wait: Duration,
        /// The failed attempt hit a rate limit; inside, when it lifts.
        rate_limited: Option<Option<u64>>,
    },
    /// A file a phase produced, as it was when the phase ended.
    Artifact {
        phase: String,
        path: String,
        sha256: String,
    },
    /// A judge decided on a phase's artifact.
    Judged {
        phase: String,
        judge: String,
        round: u32,
        /// `None`: approved; else why it was rejected.
        rejected: Option<String>,
    },
    /// A contract check failed under `validation = "trust"`.
    ContractWarning {
        phase: String,
        message: String,
    },
    RunFinished {
        status: RunStatus,
        ended_ms: u64,
    },
}

/// Anything that follows a run as it happens.
pub trait Listener: Send + Sync {
    fn on(&self, event: &RunEvent);
}

impl<F: Fn(&RunEvent) + Send + Sync> Listener for F {
    fn on(&self, event: &RunEvent) {
        self(event)
    }
}

/// Where records go to be stored (the store's writer; a test's sink).
pub trait RecordSink: Send + Sync {
    fn send(&self, record: Record);
}

impl RecordSink for crate::store::Writer {
    fn send(&self, record: Record) {
        // A stopped writer has recorded its first error; `Store::close`
        // reports it when the run ends.
        let _ = crate::store::Writer::send(self, record);
    }
}

/// The run's stream: a cheap, clonable handle the engine emits into.
#[derive(Clone)]
pub struct Events(Arc<Inner>);

struct Inner {
    run_id: String,
    listeners: Vec<Arc<dyn Listener>>,
    store: Option<Arc<dyn RecordSink>>,
}

impl Events {
    /// The stream of run `run_id`, recorded into `store` (none: not kept).
    pub fn new(
        run_id: &str,
        store: Option<Arc<dyn RecordSink>>,
        listeners: Vec<Arc<dyn Listener>>,
    ) -> Events {
        Events(Arc::new(Inner {
            run_id: run_id.to_string(),
            listeners,
            store,
        }))
    }

    /// A stream nobody follows (tests).
    pub fn discard(run_id: &str) -> Events {
        Events::new(run_id, None, Vec::new())
    }

    pub fn run_id(&self) -> &str {
        &self.0.run_id
    }

    /// Tell every listener, in the order they were given, then the store.
    pub fn emit(&self, event: RunEvent) {
        for l in &self.0.listeners {
            l.on(&event);
        }
        if let Some(store) = &self.0.store
            && let Some(record) = record(&self.0.run_id, event)
        {
            store.send(record);
        }
    }
}

/// What the store keeps of an event (`None`: nothing; progress only).
fn record(run_id: &str, event: RunEvent) -> Option<Record> {
    let run_id = run_id.to_string();
    Some(match event {
        RunEvent::RunStarted {
            run_id,
            pipeline_name,
            pipeline_path,
            digest,
            digests_json,
            selection,
            pid,
            started_ms,
        } => Record::RunStarted {
            run_id,
            pipeline_name,
            pipeline_path,
            digest,
            digests_json,
            selection,
            pid,
            started_ms,
        },
        RunEvent::PhaseStarted { phase, started_ms } => Record::PhaseStarted {
            run_id,
            phase,
            started_ms,
        },
        RunEvent::PhaseFinished {
            phase,
            outcome,
            required,
            reason,
            attempts,
            ended_ms,
            ..
        } => Record::PhaseFinished {
            run_id,
            phase,
            outcome,
            required,
            reason,
            attempts,
            ended_ms,
        },
        RunEvent::AttemptStarted {
            phase,
            agent,
            attempt,
            argv_json,
            env_json,
            prompt_json,
            started_ms,
        } => Record::AttemptStarted {
            run_id,
            phase,
            agent,
            attempt,
            argv_json,
            env_json,
            prompt_json,
            started_ms,
        },
        RunEvent::Output {
            key,
            seq,
            ts_ms,
            kind,
            data_json,
            raw,
        } => Record::Event {
            key,
            seq,
            ts_ms,
            kind,
            data_json,
            raw,
        },
        RunEvent::AttemptFinished {
            phase,
            agent,
            attempt,
            result,
        } => Record::AttemptFinished {
            run_id,
            phase,
            agent,
            attempt,
            outcome: result.outcome,
            exit_code: result.exit_code,
            reason: result.reason,
            session_id: result.session_id,
            turns: result.turns,
            tokens_in: result.tokens_in,
            tokens_out: result.tokens_out,
            cost_usd: result.cost_usd,
            ended_ms: result.ended_ms,
        },
        RunEvent::Artifact {
            phase,
            path,
            sha256,
        } => Record::Artifact {
            run_id,
            phase,
            path,
            sha256,
        },
        RunEvent::RunFinished { status, ended_ms } => Record::RunFinished {
            run_id,
            status,
            ended_ms,
        },
        RunEvent::Activity { .. }
        | RunEvent::Retrying { .. }
        | RunEvent::Judged { .. }
        | RunEvent::ContractWarning { .. } => return None,
    })
}
