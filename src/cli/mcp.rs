//! `orch mcp relay SOCKET`: the stdio MCP server each CLI starts for orch's
//! tools; it hands its standard input and output over to the attempt's
//! endpoint in `orch run` and waits.

use std::path::PathBuf;

use clap::Subcommand;

use super::error::CliError;
use super::output::Exit;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Carry an agent's MCP messages to its attempt's endpoint in `orch run`
    /// (the CLIs start this; it serves only the attempt it belongs to)
    Relay {
        /// The attempt's endpoint (a Unix socket in its own folder)
        #[arg(value_name = "SOCKET")]
        socket: PathBuf,
    },
}

pub(super) fn run(args: &Args) -> Result<Exit, CliError> {
    match &args.command {
        McpCommand::Relay { socket } => crate::mcp::relay::relay(socket)?,
    }
    Ok(Exit::Success)
}
