//! What checking a pipeline must ask of the agent CLIs and of the machine
//! it will run on. This layer knows neither: the loader takes a [`CliChecks`]
//! from its caller (`agents::Checks`), asks it about each agent's flags,
//! env and model while it reads the file, and hands it the validated
//! pipeline for the enforcement pass.

use std::ops::Range;
use std::sync::Arc;

use super::diagnostic::{Diagnostic, SourceFile};
use super::model::Pipeline;
use crate::model::{AgentKind, Location};

pub trait CliChecks {
    /// If a raw flag in a mode's `flags` touches what orch's translation of
    /// the ToolSet controls, the field it belongs to (`next` is the word
    /// after it, which the CLI may read as its value).
    fn controlled_flag(
        &self,
        kind: AgentKind,
        flag: &str,
        next: Option<&str>,
    ) -> Option<&'static str>;

    /// Why an agent's `env` may not set `name` to `value`, if it may not.
    fn check_env(&self, kind: AgentKind, name: &str, value: &str) -> Result<(), String>;

    /// Why the CLI would not take `model`, if it would not.
    fn check_model(&self, kind: AgentKind, model: &str) -> Result<(), String>;

    /// The enforcement pass over a pipeline the file's own checks passed:
    /// what each (phase, agent) asks that its CLI or this machine cannot
    /// enforce, and tools a CLI does not have.
    fn enforcement(&self, pipeline: &Pipeline, spans: &Spans<'_>) -> Vec<Diagnostic>;
}

/// Where the enforcement pass may point: the pipeline's file, the profiles
/// loading read, and where each phase names each of its agents.
pub struct Spans<'a> {
    pub(crate) source: &'a Arc<SourceFile>,
    pub(crate) profiles: &'a [Arc<SourceFile>],
    /// `agents.of(phase)[i]`: where phase `phase` names its `i`-th agent.
    pub(crate) agents: &'a PhaseRanges,
}

/// Spans in the file, a list for each phase in order, kept in one vector
/// (a list of its own for each of 100,000 phases cost an allocation each).
#[derive(Debug, Default)]
pub(crate) struct PhaseRanges {
    ranges: Vec<Range<usize>>,
    /// Where each phase's list ends in `ranges`.
    ends: Vec<usize>,
}

impl PhaseRanges {
    /// Add the next phase's list.
    pub(crate) fn push(&mut self, list: impl IntoIterator<Item = Range<usize>>) {
        self.ranges.extend(list);
        self.ends.push(self.ranges.len());
    }

    /// Phase `phase`'s list (empty past the last phase).
    pub(crate) fn of(&self, phase: usize) -> &[Range<usize>] {
        let Some(&end) = self.ends.get(phase) else {
            return &[];
        };
        let start = phase.checked_sub(1).map_or(0, |p| self.ends[p]);
        &self.ranges[start..end]
    }
}

impl Spans<'_> {
    /// The file a location points into: a profile's, else the pipeline's.
    pub(crate) fn source_for(&self, at: &Location) -> Arc<SourceFile> {
        self.profiles
            .iter()
            .find(|s| s.name == at.path)
            .cloned()
            .unwrap_or_else(|| Arc::clone(self.source))
    }

    /// Where the `i`-th agent of phase `phase` is named, if it is.
    pub(crate) fn agent(&self, phase: usize, i: usize) -> Option<Range<usize>> {
        self.agents.of(phase).get(i).cloned()
    }
}
