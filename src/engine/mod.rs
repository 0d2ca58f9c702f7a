//! Running pipelines: the scheduler walks the phase graph, the supervisor
//! runs each agent attempt, retries decide whether to try again.

pub mod assemble;
pub mod attempt;
pub mod claims;
pub mod contract;
pub mod events;
pub mod identity;
pub mod keeper;
pub mod lifecycle;
pub mod reaper;
pub mod retry;
pub mod scheduler;
pub mod supervisor;
pub mod tally;
pub mod terminate;

pub use events::{Events, Listener, RecordSink, RunEvent};
pub use supervisor::Cancel;
