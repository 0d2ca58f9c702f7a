//! The convention learnings a phase's system prompt carries: those of every
//! run that match the phase's words best (the same ranking as
//! `search_learnings`: BM25 weighted by quality), conventions only.

use std::path::Path;

use crate::pipeline::Phase;
use crate::store::Reader;

/// How many candidates are ranked before the character budget applies.
const CANDIDATES: usize = 20;

/// The patterns of the convention learnings most relevant to `phase`,
/// best first (none when there is no history yet).
pub fn conventions(state_dir: &Path, phase: &Phase) -> Vec<String> {
    let Ok(Some(reader)) = Reader::open(state_dir) else {
        return Vec::new();
    };
    let query = format!(
        "{} {}",
        phase.name.replace(['-', '_'], " "),
        phase.prompt.as_ref().map(|p| p.text()).unwrap_or("")
    );
    reader
        .search_learnings(&query, CANDIDATES, 0)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.learning_type == "convention")
        .map(|l| l.pattern)
        .collect()
}
