//! Running pipelines: the scheduler walks the phase graph, the supervisor
//! runs each agent attempt, retries decide whether to try again.

pub mod assemble;
pub(crate) mod attempt;
pub(crate) mod claims;
pub(crate) mod contract;
pub(crate) mod events;
pub(crate) mod identity;
pub(crate) mod keeper;
pub(crate) mod lifecycle;
pub(crate) mod reaper;
pub(crate) mod retry;
pub(crate) mod scheduler;
pub(crate) mod supervisor;
pub(crate) mod tally;
pub(crate) mod terminate;

pub(crate) use events::{Listener, RunEvent};
