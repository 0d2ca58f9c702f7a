//! orch: run declarative pipelines of AI coding agents whose tool
//! restrictions are enforced by the agent runtimes themselves.
//!
//! The layers, what each may import and where a new pipeline key or agent
//! CLI goes are in `ARCHITECTURE.md` at the repository's root; a test holds
//! the imports to it. In short: a pipeline file is decoded with spans
//! ([`pipeline::raw`]), validated into a span-free model (`pipeline::model`
//! over the vocabulary in [`model`]), each (phase, agent) ToolSet is
//! resolved layer by layer with provenance (`model::toolset`), and the
//! phases form a DAG ([`pipeline::graph`]); the engine runs it through the
//! adapters, confined, recording into the store.
pub mod agents;
mod beneath;
mod blocking;
mod catalog;
mod children;
pub mod cli;
mod clock;
pub mod confine;
pub mod engine;
pub mod events;
mod export;
mod git;
mod lines;
pub mod mcp;
pub mod model;
mod path_env;
pub mod pipeline;
mod prompt;
mod report;

pub mod settings;
pub mod store;
