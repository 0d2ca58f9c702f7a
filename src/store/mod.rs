//! The run history: SQLite (`<state_dir>/state.db`), written by one thread.

mod error;
#[doc(hidden)]
pub mod fixture;
mod knowledge;
mod liveness;
mod query;
pub mod record;
mod reports;
mod schema;
mod status;
mod writer;

pub use error::StoreError;
pub use knowledge::{Document, KnowledgeHit, Section, SyncCount, sections};
pub use query::{
    ArtifactRow, AttemptDetail, EventPage, EventRow, PhaseDetail, Reader, RunDetail, RunInfo,
    RunSummary,
};
pub use record::{AttemptKey, Record};
pub use reports::{
    AttemptRecord, EventQuery, EventRecord, LearningRow, NewLearning, PhaseRecord, ReportFilter,
    ReportKind, ReportRow, Reporter, Reports, START_QUALITY,
};
pub use schema::{DB_FILE, MEMORY_DIR};
pub use status::{Outcome, RunStatus, Status, UnknownStatus};
pub use writer::{Store, Writer};
