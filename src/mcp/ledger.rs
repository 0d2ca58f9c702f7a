//! What agents tell orch through their endpoints that the engine decides
//! gates on: completion claims and judges' verdicts. They reach the engine
//! here, in orch's memory, in the order they came, from the endpoint that
//! took them (so a verdict is a judge's because it came through that
//! judge's endpoint); the run database only logs them.

use std::sync::{Mutex, MutexGuard};

/// An agent's claim that its phase is complete with an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    /// Relative to the workspace.
    pub(crate) artifact_path: String,
    pub(crate) artifact_hash: String,
    /// Why orch refused it (`None`: accepted).
    pub(crate) refused: Option<String>,
}

/// A judge's verdict on a phase's artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) phase: String,
    pub(crate) judge: String,
    pub(crate) attempt: u32,
    pub(crate) artifact_hash: String,
    pub(crate) approved: bool,
    pub(crate) reason: String,
    pub(crate) fix: String,
}

/// Every claim and verdict of a run so far.
#[derive(Debug, Default)]
pub struct Ledger {
    claims: Mutex<Vec<Claim>>,
    verdicts: Mutex<Vec<Verdict>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger::default()
    }

    pub(crate) fn claim(&self, c: Claim) {
        locked(&self.claims).push(c);
    }

    pub(crate) fn verdict(&self, v: Verdict) {
        locked(&self.verdicts).push(v);
    }

    /// The claims made in `phase`, oldest first.
    pub(crate) fn claims(&self, phase: &str) -> Vec<Claim> {
        locked(&self.claims)
            .iter()
            .filter(|c| c.phase == phase)
            .cloned()
            .collect()
    }

    /// The verdict attempt `attempt` of `judge` gave on `phase`'s artifact
    /// `hash`: its first rejection, if it rejected it at all, else its
    /// first approval. A rejection is never overruled: whatever else in
    /// the judge's process tree calls the tool too (a program the judged
    /// work planted) can make an approved phase fail, never a rejected one
    /// pass.
    pub(crate) fn verdict_of(
        &self,
        phase: &str,
        judge: &str,
        attempt: u32,
        hash: &str,
    ) -> Option<Verdict> {
        let verdicts = locked(&self.verdicts);
        let mut given = verdicts.iter().filter(|v| {
            v.phase == phase && v.judge == judge && v.attempt == attempt && v.artifact_hash == hash
        });
        let first = given.clone().next()?;
        Some(given.find(|v| !v.approved).unwrap_or(first).clone())
    }
}
