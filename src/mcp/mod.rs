//! orch's MCP tools: served by `orch run` itself to each attempt through
//! its own endpoint ([`host`]), reached by the CLI through `orch mcp
//! relay` ([`relay`]). One file per tool family, their argument rules,
//! portable schemas, who calls ([`caller`]) and what reaches the engine
//! ([`ledger`]).

mod caller;
mod check;
mod handover;
pub mod host;
mod knowledge;
pub mod ledger;
mod peer;
mod phase;
mod portable;
mod proxy;
pub mod relay;
mod remote;
mod server;
mod wire;
mod work;
mod workspace;

pub use caller::{Caller, Judging, VERDICT_TOOLS};
pub use host::{Endpoint, Host, ServerSpawn, ServerTransport, server_socket};
pub use ledger::Ledger;
pub use phase::sha256_hex;
pub use portable::problems as schema_problems;
pub use server::OrchServer;

#[cfg(test)]
mod tests;
