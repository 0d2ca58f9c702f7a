//! The kinds of agent orch can drive: the names a pipeline file uses. What
//! orch knows of each CLI (its flags, environment, credentials) lives with
//! its adapter in `agents`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use strum::{VariantArray, VariantNames};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
    strum::VariantNames,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Copilot,
    Command,
}

impl AgentKind {
    /// Every kind, in declaration order.
    pub(crate) const ALL: &'static [Self] = <Self as VariantArray>::VARIANTS;

    /// Their names, as a pipeline file spells them.
    pub(crate) const NAMES: &'static [&'static str] = <Self as VariantNames>::VARIANTS;

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A kind usable by name in `agents = [...]` without an `[agents.X]` table.
    pub(crate) fn builtin(name: &str) -> Option<Self> {
        Self::parse(name).filter(|k| *k != AgentKind::Command)
    }

    /// Whether this kind is an LLM agent (it needs a prompt and gets tools).
    pub(crate) fn is_llm(self) -> bool {
        self != AgentKind::Command
    }
}
