//! The kinds of agent orch can drive: the names a pipeline file uses. What
//! orch knows of each CLI (its flags, environment, credentials) lives with
//! its adapter in `agents`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Copilot,
    Command,
}

impl AgentKind {
    pub const ALL: [AgentKind; 6] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Opencode,
        AgentKind::Copilot,
        AgentKind::Command,
    ];

    pub const NAMES: &'static [&'static str] = &[
        "claude", "codex", "gemini", "opencode", "copilot", "command",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Opencode => "opencode",
            AgentKind::Copilot => "copilot",
            AgentKind::Command => "command",
        }
    }

    /// A kind usable by name in `agents = [...]` without an `[agents.X]` table.
    pub fn builtin(name: &str) -> Option<Self> {
        Self::parse(name).filter(|k| *k != AgentKind::Command)
    }

    /// Whether this kind is an LLM agent (it needs a prompt and gets tools).
    pub fn is_llm(self) -> bool {
        self != AgentKind::Command
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
