//! orch's integration tests: one test binary that drives the built `orch`
//! executable and compares its output.

mod agents;
mod architecture;
mod ci;
mod cli;
mod confinement;
mod contracts;
mod diagnostics;
mod docs;
mod e2e;
mod events;
mod examples;
mod forged;
mod mcp;
mod profiles;
mod prompts;
mod reproduce;
mod robustness;
mod run;
mod runs;
mod schema;
mod shown;
mod support;
