//! Running pipelines: the scheduler walks the phase graph, the supervisor
//! runs each agent attempt, retries decide whether to try again.

pub mod claims;
pub mod contract;
pub mod identity;
pub mod keeper;
pub mod progress;
pub mod reaper;
pub mod retry;
pub mod scheduler;
pub mod sink;
pub mod supervisor;

pub use sink::{RecordSink, Sink};
pub use supervisor::Cancel;
