//! orch's MCP server: the tools agents report through (one file per
//! family), their argument rules, portable schemas, and the scope.

mod args;
mod check;
mod knowledge;
mod phase;
mod portable;
mod server;
mod work;
mod workspace;

pub use args::ServeArgs;
pub use phase::sha256_hex;
pub use portable::problems as schema_problems;
pub use server::{OrchServer, serve, tool_names};

#[cfg(test)]
mod tests;
