//! Reports of a run for the places CI users read results: JUnit XML, a
//! Markdown summary (GitHub's step summary), GitHub annotations and log
//! groups. Each is built from a [`RunDetail`](crate::store::RunDetail),
//! whether followed live from the run's event stream ([`LiveDetail`]) or
//! read back from the store, so both read the same.

pub mod github;
pub mod junit;
mod live;
pub mod markdown;

pub use live::LiveDetail;
