//! Generator of realistic pipeline files for benchmarks and whole-process
//! measurements. Standard library only: it is compiled into `benches/load.rs`
//! (as a module) and into `scripts/gen-pipeline.rs` (by `rustc`, from
//! `scripts/measure-validate.sh`), so both measure the very same files.
//!
//! The output is deterministic: same arguments, same bytes.
//!
//! Shape of a generated pipeline of `n` phases:
//! - agents: built-in kinds `claude`, `codex` and `gemini`, a declared
//!   `[agents.claude]` table with a per-mode layer (`modes.audit`), and a
//!   declared command agent `[agents.tests]`; phases use 1 to 3 of them,
//!   two on average (see [`AGENT_SETS`]);
//! - an MCP server `tavily` that plan phases name in `[phases.tools]`;
//! - modes cycle through plan, fix, audit, review;
//! - [`Topology::Layered`]: phases come in layers of [`LAYER_WIDTH`] (fewer
//!   for pipelines under 100 phases); each phase after the first layer
//!   depends on one or two phases of the layer before. [`Topology::Chain`]: each phase depends on the one before;
//! - `[phases.tools]` on every other phase, `[phases.agent_tools.<agent>]`
//!   on every third, inline prompts everywhere, artifacts on the fix phases.
//!
//! Every generated file validates: the read-only phases never get a write
//! tool, and every LLM agent has a prompt.

use std::fmt::Write as _;

/// Phases per layer in [`Topology::Layered`] (smaller pipelines get
/// narrower layers, see [`layer_width`]).
pub(crate) const LAYER_WIDTH: usize = 10;

/// The agents of phase `i` are `AGENT_SETS[i % 4]`: 8 invocations per 4
/// phases, so two per phase on average.
pub(crate) const AGENT_SETS: [&[&str]; 4] = [
    &["claude", "codex"],
    &["gemini"],
    &["codex", "gemini", "tests"],
    &["claude", "tests"],
];

const MODES: [&str; 4] = ["plan", "fix", "audit", "review"];

/// How phases depend on each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// Layers of [`layer_width`] phases; a phase depends on one or two
    /// phases of the previous layer.
    Layered,
    /// Phase `i` depends on phase `i - 1`.
    Chain,
}

/// A generated pipeline and the figures a correct load must reproduce.
#[derive(Debug, Clone)]
pub(crate) struct Generated {
    pub text: String,
    pub phases: usize,
    /// (phase, agent) pairs.
    pub invocations: usize,
    /// Dependency edges (after de-duplication).
    pub edges: usize,
    /// Number of stages of the phase DAG.
    pub stages: usize,
}

fn name(i: usize) -> String {
    format!("p{i}")
}

fn quoted<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items
        .map(|x| format!("\"{x}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Phases per layer for a layered pipeline of `n` phases: [`LAYER_WIDTH`],
/// or about `sqrt(n)` when that is smaller, so that small pipelines have
/// dependencies too.
pub(crate) fn layer_width(n: usize) -> usize {
    let mut w = 1;
    while w < LAYER_WIDTH && w * w < n {
        w += 1;
    }
    w
}

/// The dependencies of phase `i` of `n` (indices, no duplicates, all `< i`).
pub(crate) fn dependencies(i: usize, n: usize, topology: Topology) -> Vec<usize> {
    match topology {
        Topology::Chain => {
            if i == 0 {
                vec![]
            } else {
                vec![i - 1]
            }
        }
        Topology::Layered => {
            let width = layer_width(n);
            let layer = i / width;
            if layer == 0 {
                return vec![];
            }
            // The previous layer is always complete.
            let prev = (layer - 1) * width;
            let slot = i % width;
            let first = prev + (slot * 7 + layer) % width;
            let mut deps = vec![first];
            // Two dependencies for about half of the phases.
            if (i + layer).is_multiple_of(2) {
                let second = prev + (slot * 3 + 1 + layer) % width;
                if second != first {
                    deps.push(second);
                }
            }
            deps
        }
    }
}

const HEADER: &str = r#"#:schema ../schemas/pipeline.schema.json
version = 1
name = "generated"
description = "A generated pipeline for benchmarks."

[defaults]
mode = "fix"
timeout = "30m"
stall_timeout = "5m"
retries = 0
max_parallel = 4
enforcement = "strict"

[agents.claude]
kind = "claude"
binary = "claude"
model = "sonnet"
env = { CLAUDE_CODE_MAX_OUTPUT_TOKENS = "64000" }

[agents.claude.modes.fix]
internal = ["Read", "Write", "Edit", "Glob", "Grep", "Bash(cargo test *)"]

[agents.gemini.modes.fix]
internal = ["Read", "Write", "Edit", "Glob", "Grep", "Bash(cargo test *)"]

[agents.codex.modes.fix]
internal = ["Read", "Write", "Edit", "Glob", "Grep", "Bash"]

[agents.claude.modes.audit]
internal = ["Read", "Glob", "Grep"]
permission = "read-only"
flags = ["--effort", "high"]

[agents.tests]
kind = "command"
command = ["cargo", "test", "--quiet"]

[mcp_servers.tavily]
command = ["npx", "-y", "tavily-mcp"]
env = { TAVILY_API_KEY = "${TAVILY_API_KEY}" }
"#;

/// Generate a pipeline of `n` phases (`n >= 1`).
pub(crate) fn generate(n: usize, topology: Topology) -> Generated {
    assert!(n >= 1, "a pipeline needs at least one phase");
    // About 340 bytes per phase.
    let mut out = String::with_capacity(HEADER.len() + n * 400);
    out.push_str(HEADER);
    let mut invocations = 0;
    let mut edges = 0;
    let mut stage = vec![0usize; n];
    for i in 0..n {
        let agents = AGENT_SETS[i % AGENT_SETS.len()];
        let mode = MODES[(i / 2 + i / LAYER_WIDTH) % MODES.len()];
        let deps = dependencies(i, n, topology);
        invocations += agents.len();
        edges += deps.len();
        stage[i] = deps.iter().map(|&d| stage[d] + 1).max().unwrap_or(0);

        let this = name(i);
        out.push_str("\n[[phases]]\n");
        let _ = writeln!(out, "name = \"{this}\"");
        let _ = writeln!(out, "agents = [{}]", quoted(agents.iter().copied()));
        let _ = writeln!(out, "mode = \"{mode}\"");
        if agents.len() > 1 && i % 5 != 0 {
            out.push_str("parallel = true\n");
        }
        if i % 7 == 3 {
            out.push_str("required = false\n");
        }
        if !deps.is_empty() {
            let names: Vec<String> = deps.iter().map(|&d| name(d)).collect();
            let _ = writeln!(
                out,
                "depends_on = [{}]",
                quoted(names.iter().map(String::as_str))
            );
        }
        let inputs = if deps.is_empty() {
            "the repository".to_string()
        } else {
            deps.iter()
                .map(|&d| format!("docs/{}.md", name(d)))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let _ = writeln!(
            out,
            "prompt = \"Phase {this} ({mode}): read {inputs}, then do the {mode} work \
             for component {} and record the outcome in docs/{this}.md.\"",
            i % 37
        );
        if i % 4 == 1 {
            out.push_str("timeout = \"45m\"\n");
        }
        // Only a phase that may write leaves a file (a read-only one that
        // must is a validation warning).
        if mode == "fix" {
            let _ = writeln!(out, "artifacts = [\"docs/{this}.md\"]");
        }
        // Layer 2: `[phases.tools]` on every other phase.
        if i % 2 == 0 {
            out.push_str("[phases.tools]\n");
            match mode {
                "plan" => out.push_str(
                    "internal = [\"Read\", \"Glob\", \"Grep\", \"WebSearch\"]\n\
                     mcp = [\"mcp__tavily__tavily_search\", \"mcp__orch__*\"]\n\
                     permission = \"read-only\"\n\
                     max_turns = 40\n",
                ),
                // Each agent's own `modes.fix` (layer 4) gives the tools its
                // CLI can enforce under workspace-write.
                "fix" => out.push_str(
                    "permission = \"workspace-write\"\n\
                     max_turns = 60\n",
                ),
                "audit" => out.push_str(
                    "internal = [\"Read\", \"Glob\", \"Grep\", \"Agent\"]\n\
                     permission = \"read-only\"\n\
                     max_turns = 50\n",
                ),
                _ => out.push_str(
                    "internal = [\"Read\", \"Glob\", \"Grep\", \"TodoWrite\"]\n\
                     max_turns = 30\n",
                ),
            }
        }
        // Layer 1: `[phases.agent_tools.<agent>]` on every third phase, for
        // the phase's first LLM agent.
        if i % 3 == 0 {
            let agent = agents[0];
            let _ = writeln!(out, "[phases.agent_tools.{agent}]");
            if agent == "codex" {
                // Codex confines writes at the OS level, so this is valid
                // whatever the mode, given tools its sandbox can enforce.
                out.push_str(
                    "internal = [\"Read\", \"Write\", \"Edit\", \"Glob\", \"Grep\", \"Bash\"]\n\
                     permission = \"workspace-write\"\nmax_turns = 30\n",
                );
            } else {
                out.push_str("max_turns = 20\n");
            }
        }
    }
    Generated {
        text: out,
        phases: n,
        invocations,
        edges,
        stages: stage.iter().max().map_or(0, |m| m + 1),
    }
}
