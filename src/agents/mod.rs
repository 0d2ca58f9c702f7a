//! Agent CLIs: one adapter per CLI turns a resolved ToolSet into the flags,
//! environment and files that make the CLI enforce it, reports how each
//! field is enforced, and parses the CLI's event stream.

pub mod adapter;

pub mod capability;
pub mod checks;
mod claude;
mod codex;
mod command;
mod copilot;
pub mod env;
mod gemini;
pub mod invocation;
mod kind;
mod opencode;
pub mod probe;

pub use adapter::{Adapter, McpServerSpec, Request, adapter};
pub use invocation::{By, Enforced, Enforcement, Invocation};
pub use kind::{CLIS_PACKAGE_JSON, CliFacts, FieldName};
