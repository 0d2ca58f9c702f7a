//! The run history: SQLite (`<state_dir>/state.db`) in WAL mode, written
//! by `orch run` alone: the engine's writer thread (`writer.rs`) the runs,
//! phases, attempts, events and artifacts; the endpoints that serve orch's
//! tools to agents (`reports.rs`, `knowledge.rs`, one connection of the
//! same process) their reports, learnings and the document index, one
//! IMMEDIATE transaction per call. No agent can reach the state directory.
//! Readers (`query.rs`) never write, except to mark runs whose orch is
//! gone as interrupted; one orch runs per state directory (`lock.rs`).

mod detail;
mod error;
#[cfg(any(test, feature = "test-fixtures"))]
#[doc(hidden)]
pub mod fixture;
mod knowledge;
mod liveness;
mod lock;
mod query;
pub mod record;
mod reports;
mod schema;
mod status;
pub mod transfer;
mod writer;

pub use detail::{AgentTotal, ArtifactRow, AttemptDetail, PhaseDetail, RunDetail};
pub use error::StoreError;
pub use knowledge::{Document, KnowledgeHit, Section, SyncCount, sections};
pub use lock::{LOCK_FILE, LockError, RunLock};
pub use query::{EventPage, EventRow, Reader, RunInfo, RunSummary};
pub use record::{AttemptKey, Record};
pub use reports::{
    AttemptRecord, EventQuery, EventRecord, LearningRow, NewLearning, PhaseRecord, ReportFilter,
    ReportKind, ReportRow, Reporter, Reports, START_QUALITY, normalize,
};
pub use schema::{DB_FILE, MEMORY_DIR};
pub use status::{Outcome, RunStatus, Status, UnknownStatus};
pub use writer::{Store, Writer};
