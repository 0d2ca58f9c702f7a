//! Agent CLIs: one adapter per CLI turns a resolved ToolSet into the flags,
//! environment and files that make the CLI enforce it, reports how each
//! field is enforced, and parses the CLI's event stream.

pub mod adapter;

pub(crate) mod capability;
pub mod checks;
mod claude;
mod codex;
mod command;
mod copilot;
pub(crate) mod env;
mod gemini;
pub mod invocation;
mod kind;
mod opencode;
pub mod probe;

pub use adapter::adapter;
pub(crate) use invocation::{By, Enforcement};
pub(crate) use kind::{CLIS_PACKAGE_JSON, CliFacts};
