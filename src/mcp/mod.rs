//! orch's MCP tools: served by `orch run` itself to each attempt through
//! its own endpoint ([`host`]), reached by the CLI through `orch mcp
//! relay` ([`relay`]). One file per tool family, their argument rules,
//! portable schemas, who calls ([`caller`]) and what reaches the engine
//! ([`ledger`]).

mod caller;
mod check;
mod handover;
pub(crate) mod host;
mod knowledge;
pub(crate) mod ledger;
mod peer;
mod phase;
mod portable;
mod proxy;
pub(crate) mod relay;
mod remote;
mod server;
mod wire;
mod work;
mod workspace;

pub(crate) use caller::{Caller, Judging};
pub use host::{Endpoint, Host};
pub(crate) use host::{ServerSpawn, ServerTransport, server_socket};
pub use ledger::Ledger;
pub use phase::sha256_hex;
#[cfg(test)]
use portable::problems as schema_problems;
pub(crate) use remote::settle as settle_remote_sessions;
#[cfg(test)]
use server::OrchServer;

#[cfg(test)]
mod tests;
