//! The run history: SQLite (`<state_dir>/state.db`), written by one thread.

mod error;
#[cfg(test)]
mod fixture;
mod liveness;
mod query;
pub mod record;
mod schema;
mod writer;

pub use error::StoreError;
pub use liveness::pid_alive;
pub use query::{ArtifactRow, AttemptDetail, EventRow, PhaseDetail, Reader, RunDetail, RunSummary};
pub use record::{Outcome, Record, RunStatus};
pub use schema::{DB_FILE, MIGRATIONS, latest_version};
pub use writer::{BATCH, CHANNEL_CAPACITY, Store, Writer, WriterStats};
