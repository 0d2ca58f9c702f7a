//! The run history: SQLite (`<state_dir>/state.db`) in WAL mode. Who
//! writes what: the engine's writer thread (`writer.rs`, one per `orch
//! run`) the runs, phases, attempts, events and artifacts; each agent's
//! `orch mcp serve` process (`reports.rs`, `knowledge.rs`) its reports,
//! learnings and the document index, one IMMEDIATE transaction per call,
//! committed before it replies. Readers (`query.rs`) never write, except
//! to mark runs whose orch is gone as interrupted.

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
pub mod transfer;
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
    ReportKind, ReportRow, Reporter, Reports, START_QUALITY, normalize,
};
pub use schema::{DB_FILE, MEMORY_DIR};
pub use status::{Outcome, RunStatus, Status, UnknownStatus};
pub use writer::{Store, Writer};
