//! Reports of a run for the places CI users read results: JUnit XML, a
//! Markdown summary (GitHub's step summary), GitHub annotations and log
//! groups. Each is built from a [`RunDetail`](crate::store::RunDetail),
//! whether followed live from the run's event stream ([`LiveDetail`]) or
//! read back from the store, so both read the same. Agent text reaches
//! people only through [`text`].

pub mod github;
pub mod junit;
mod live;
pub mod markdown;
pub mod text;

pub use live::LiveDetail;

use crate::store::{AttemptDetail, PhaseDetail};

/// A phase's attempts by agent, each agent in the order it first started.
pub fn by_agent(p: &PhaseDetail) -> Vec<(&str, Vec<&AttemptDetail>)> {
    let mut out: Vec<(&str, Vec<&AttemptDetail>)> = Vec::new();
    for a in &p.agents {
        match out.iter_mut().find(|(n, _)| *n == a.agent) {
            Some((_, tries)) => tries.push(a),
            None => out.push((&a.agent, vec![a])),
        }
    }
    out
}
