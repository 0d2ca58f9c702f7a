//! Reports of a run for the places CI users read results: JUnit XML, a
//! Markdown summary (GitHub's step summary), GitHub annotations and log
//! groups. Each is built from a [`RunDetail`](crate::store::RunDetail),
//! whether `orch run` followed it live (`RunDetail::apply`) or read it back
//! from the store, so both read the same. Agent text reaches people only
//! through [`text`].

pub(crate) mod github;
pub(crate) mod junit;
pub(crate) mod markdown;
pub(crate) mod text;
