//! Agent kinds and what orch knows about each CLI.
//!
//! The per-CLI adapters (argv, environment, files, event parsing) build on
//! this; what lives here is the part validation consults: the kinds, their
//! default binaries, which raw flags the ToolSet translation owns, and which
//! CLIs confine writes at the operating-system level.

mod kind;

pub use kind::AgentKind;
