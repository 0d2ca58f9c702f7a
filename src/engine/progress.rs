//! Progress for people: what the live view or the plain lines show.

use std::sync::Arc;
use std::time::Duration;

use super::supervisor::AttemptResult;
use crate::store::Outcome;

#[derive(Debug, Clone)]
pub enum Progress {
    PhaseStarted {
        phase: String,
    },
    PhaseFinished {
        phase: String,
        outcome: Outcome,
        reason: Option<String>,
        millis: u64,
    },
    AttemptStarted {
        phase: String,
        agent: String,
        attempt: u32,
    },
    /// A running agent did something: a tool call or a finished turn.
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
    Retrying {
        phase: String,
        agent: String,
        wait: Duration,
        /// The failed attempt hit a rate limit; inside, when it lifts
        /// (Unix milliseconds), when the CLI said.
        rate_limited: Option<Option<u64>>,
    },
}

pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;
