//! What the engine tells the store. The engine sends these over a bounded
//! channel to the store's single writer thread, which batches them into
//! SQLite transactions. That thread alone writes the engine's tables (runs,
//! phases, attempts, events, artifacts); the agents' MCP servers, one
//! process each, append to their own (`reports.rs`, `knowledge.rs`).
//!
//! Records name rows naturally: a run by `run_id`; a phase by (run, phase);
//! an attempt by (run, phase, agent, attempt); an event by its attempt and
//! `seq`. In the database an attempt also has an integer `id`, which its
//! events carry instead of the four texts (the writer looks it up once per
//! attempt). Times are Unix milliseconds.

use std::borrow::Cow;
use std::sync::Arc;

pub(crate) use super::status::{Outcome, RunStatus};

/// Whose events these are: one attempt of an agent in a phase of a run.
/// Built once per attempt and shared by its events (`Arc`), so sending an
/// event allocates no id strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttemptKey {
    pub(crate) run_id: String,
    pub(crate) phase: String,
    pub(crate) agent: String,
    /// From 1.
    pub(crate) attempt: u32,
}

impl AttemptKey {
    pub fn new(run_id: &str, phase: &str, agent: &str, attempt: u32) -> Arc<AttemptKey> {
        Arc::new(AttemptKey {
            run_id: run_id.to_string(),
            phase: phase.to_string(),
            agent: agent.to_string(),
            attempt,
        })
    }
}

/// One message to the writer thread.
#[derive(Debug, Clone)]
pub enum Record {
    RunStarted {
        run_id: String,
        pipeline_name: String,
        /// The pipeline file as given.
        pipeline_path: String,
        /// SHA-256 (hex) over the pipeline file and every prompt and profile
        /// it uses.
        digest: String,
        /// JSON object: file path -> SHA-256 of that file.
        digests_json: String,
        /// What was selected: `all`, `phase:a,b` or `from:a`.
        selection: String,
        /// The orch process running it (to find interrupted runs).
        pid: u32,
        started_ms: u64,
    },
    RunFinished {
        run_id: String,
        status: RunStatus,
        ended_ms: u64,
    },
    PhaseStarted {
        run_id: String,
        phase: String,
        started_ms: u64,
    },
    PhaseFinished {
        run_id: String,
        phase: String,
        outcome: Outcome,
        /// A required phase's failure fails the run.
        required: bool,
        /// Why it did not succeed, in one line.
        reason: Option<String>,
        attempts: u32,
        /// `None`: it ended without starting (skipped, cancelled first).
        started_ms: Option<u64>,
        ended_ms: u64,
    },
    AttemptStarted {
        run_id: String,
        phase: String,
        agent: String,
        attempt: u32,
        /// JSON array of strings; as shown (no secrets).
        argv_json: String,
        /// JSON object; as shown (secrets redacted).
        env_json: String,
        /// JSON object: the prompts' sizes in tokens (system, user, layers).
        prompt_json: String,
        started_ms: u64,
    },
    AttemptFinished {
        run_id: String,
        phase: String,
        agent: String,
        attempt: u32,
        outcome: Outcome,
        exit_code: Option<i32>,
        /// Why it failed, in one line (timeout, stall, weakened rules, ...).
        reason: Option<String>,
        session_id: Option<String>,
        turns: u32,
        tokens_in: u64,
        tokens_out: u64,
        cost_usd: Option<f64>,
        started_ms: u64,
        ended_ms: u64,
    },
    Event {
        /// The attempt it belongs to (shared, not copied, per event).
        key: Arc<AttemptKey>,
        /// Order within the attempt, from 0.
        seq: u64,
        ts_ms: u64,
        /// The normalized kind (`tool_call`, ...), or `raw` for a line that
        /// gave no normalized event, `stderr` for a stderr line. Borrowed
        /// when it is one of the names orch knows (nearly always), as is
        /// the `null` of a raw line: an event is freed on the writer's
        /// thread, and each allocation it carries cost a free there.
        kind: Cow<'static, str>,
        /// The normalized event as JSON (`null` for raw/stderr lines).
        data_json: Cow<'static, str>,
        /// The line as the CLI printed it (capped).
        raw: String,
    },
    Artifact {
        run_id: String,
        phase: String,
        path: String,
        sha256: String,
    },
}
