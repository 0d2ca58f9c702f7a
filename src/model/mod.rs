//! The domain's vocabulary, shared by every layer and importing none of
//! them: the kinds of agent, modes, permissions, ToolSets and how they are
//! resolved in layers, and where in a file a value was written.

mod agent;
mod confinement;
mod source;
pub(crate) mod toolset;

pub use agent::AgentKind;
pub use confinement::ConfinementMode;
pub(crate) use source::{Location, suggest};
pub(crate) use toolset::{Layer, ORCH_MCP_SERVER, Permission, Resolved, ToolSet};
