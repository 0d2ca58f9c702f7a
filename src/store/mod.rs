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
pub use query::{ArtifactRow, AttemptDetail, EventRow, PhaseDetail, Reader, RunDetail, RunSummary};
pub use record::{Outcome, Record, RunStatus};
pub use schema::DB_FILE;
pub use writer::{Store, Writer};
