//! The run history: SQLite (`<state_dir>/state.db`), written by one thread.

mod error;
#[doc(hidden)]
pub mod fixture;
mod liveness;
mod query;
pub mod record;
mod schema;
mod writer;

pub use error::StoreError;
pub use query::{
    ArtifactRow, AttemptDetail, EventPage, EventRow, PhaseDetail, Reader, RunDetail, RunInfo,
    RunSummary,
};
pub use record::{AttemptKey, Outcome, Record, RunStatus};
pub use schema::DB_FILE;
pub use writer::{Store, Writer};
