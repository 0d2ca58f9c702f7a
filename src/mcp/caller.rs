//! Who calls orch's tools through one endpoint, and what they may do: set
//! by the engine when it opens the endpoint for an attempt, never taken
//! from the agent (its arguments, environment or files).

use std::path::PathBuf;

/// The attempt an endpoint serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The run every record belongs to.
    pub(crate) run: String,
    /// The phase the agent works in.
    pub(crate) phase: String,
    /// The agent (its name in the pipeline).
    pub(crate) agent: String,
    /// The agent's attempt in the phase, from 1.
    pub(crate) attempt: u32,
    /// The workspace the agent works in (artifacts, git), as given.
    pub(crate) workspace: PathBuf,
    /// The tools it may list and call; all when `None` (the ToolSet's
    /// `mcp__orch__*`). A verdict tool is never among them unless
    /// `judging` says so.
    pub(crate) tools: Option<Vec<String>>,
    /// Set for a judge's attempt: the one claim it may give a verdict on.
    pub(crate) judging: Option<Judging>,
    /// The phase's prompt, for `get_phase`.
    pub(crate) prompt: Option<String>,
    /// The project documents `search_knowledge` searches: globs relative
    /// to the workspace (the `knowledge` setting).
    pub(crate) knowledge: Vec<String>,
    /// The workspace marker orch wrote for this attempt, which
    /// `verify_workspace` checks.
    pub(crate) marker: Option<PathBuf>,
    /// The state directory: `update_memory` writes in its `memory/`,
    /// beneath it without following any link.
    pub(crate) state_dir: PathBuf,
}

/// What a judge's attempt judges: a phase's artifact, by its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Judging {
    pub(crate) phase: String,
    pub(crate) artifact_path: String,
    pub(crate) artifact_hash: String,
}

/// The tools only a judge's endpoint has.
pub(crate) const VERDICT_TOOLS: [&str; 2] = ["approve_phase", "reject_phase"];
