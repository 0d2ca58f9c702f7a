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
pub(crate) mod record;
mod reports;
mod schema;
mod spans;
mod status;
pub(crate) mod transfer;
mod writer;

pub(crate) use detail::{AgentTotal, PhaseDetail, RunDetail};
pub(crate) use error::StoreError;
pub(crate) use knowledge::{Document, sections};
pub(crate) use lock::LockError;
pub use lock::RunLock;
pub(crate) use query::{EventRow, Reader, RunSummary};
pub use record::{AttemptKey, Record};
pub(crate) use reports::{
    EventQuery, LearningRow, NewLearning, ReportFilter, ReportKind, ReportRow, START_QUALITY,
    normalize,
};
pub use reports::{Reporter, Reports};
pub(crate) use schema::{DB_FILE, MEMORY_DIR};
pub use status::{Outcome, RunStatus};
pub(crate) use status::{Status, UnknownStatus};
pub use writer::Store;
pub(crate) use writer::Writer;
#[cfg(test)]
pub(crate) use {detail::AttemptDetail, query::RunInfo};
