//! `orch mcp serve`: orch's MCP server for one agent, over stdio. The
//! adapters start it through each CLI's MCP configuration.

use clap::Subcommand;

use super::output::{CmdResult, Exit};
use crate::mcp::ServeArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve orch's tools to one agent over stdio (the CLIs start this)
    Serve(ServeArgs),
}

pub fn run(args: &Args) -> CmdResult {
    match &args.command {
        McpCommand::Serve(a) => match crate::mcp::serve(a.clone()) {
            Ok(()) => Ok(Exit::Success),
            Err(message) => {
                eprintln!("error: orch mcp serve: {message}");
                Ok(Exit::Failed)
            }
        },
    }
}
