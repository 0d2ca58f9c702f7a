//! orch: run declarative pipelines of AI coding agents whose tool
//! restrictions are enforced by the agent runtimes themselves.
//!
//! The flow (see `docs/architecture.md` beside the repo): a pipeline file is
//! decoded with spans ([`pipeline::raw`]), validated into a span-free model
//! ([`pipeline::model`]), each (phase, agent) ToolSet is resolved layer by
//! layer with provenance ([`toolset`]), and the phases form a DAG
//! ([`graph`]). Later stages (adapters, engine, store, MCP) build on these.

pub mod agents;
pub mod beneath;
pub mod children;
pub mod cli;
pub mod clock;
pub mod confine;
pub mod engine;
pub mod events;
pub mod export;
pub mod git;
pub mod graph;
pub mod lines;
pub mod mcp;
pub mod model;
pub mod pipeline;
pub mod prompt;
pub mod report;
pub mod schema;
pub mod settings;
pub mod store;
