//! The command line: argument definitions and dispatch. Each subcommand
//! lives in its own file.

mod completions;
mod config;
mod discover;
mod doctor;
mod error;
mod explain;
mod export;
mod init;
mod learnings;
mod load;
mod mcp;
mod output;
mod plan;
mod prompt;
mod reports;
mod run;
mod runs;
mod schema;
mod state;
mod validate;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

pub(crate) use output::Exit;

#[derive(Debug, Parser)]
#[command(
    name = "orch",
    version,
    about = "Run declarative pipelines of AI coding agents, with tool restrictions the agents' own runtimes enforce",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Settings given on the command line (the highest settings layer).
#[derive(Debug, clap::Args)]
pub(crate) struct GlobalArgs {
    /// Directory for run state (`state.db`, logs) [default: the
    /// repository's own, outside it: ~/.local/state/orch/<repo>-<hash>]
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Agent processes at once: over the pipeline's `max_parallel`, which is over the settings'
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_parallel: Option<u32>,
    /// Program for an agent kind, like `claude=/opt/bin/claude` (repeatable)
    #[arg(long = "agent-binary", global = true, value_name = "KIND=PATH")]
    pub(crate) agent_binaries: Vec<String>,
    /// When to use colour in diagnostics
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub(crate) color: Color,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write a starter pipeline.toml (an audit and a fix phase) for your agent CLIs
    Init(init::Args),
    /// Check pipeline files and report every problem with its position
    Validate(validate::Args),
    /// Run a pipeline (or some of its phases) and record everything
    Run(run::Args),
    /// Show the phases as stages and dependency edges
    Plan(plan::Args),
    /// Show each agent's resolved tools in each phase, and where each came from
    Explain(explain::Args),
    /// Print the system and user prompts of one agent in one phase, with their sizes
    Prompt(prompt::Args),
    /// Print the JSON Schema of pipeline files
    Schema(schema::Args),
    /// Print the effective settings and where each value came from
    Config(config::Args),
    /// Check the installed agent CLIs, or probe a pipeline's command lines
    Doctor(doctor::Args),
    /// Internal: kill registered process groups when orch dies
    #[command(hide = true)]
    KeepGroups,
    /// The recorded runs: list them, show one, print its events
    Runs(runs::Args),
    /// Write the pipeline as CI jobs, one per phase (GitHub Actions, GitLab CI)
    Export(export::Args),
    /// Move runs between state directories (CI jobs): export one, import many
    State(state::Args),
    /// orch's MCP server, which every agent reports through
    Mcp(mcp::Args),
    /// The learnings agents recorded, across every run
    Learnings(learnings::Args),
    /// Print shell completions (bash, zsh, fish, powershell, elvish)
    Completions(completions::CompletionsArgs),
    /// Print orch's man page, or write one per command with --dir
    Man(completions::ManArgs),
}

/// Parse the command line, run, and map the outcome to an exit code (an
/// error is rendered there, once: see [`error::finish`]).
pub fn main() -> ExitCode {
    // Started by a confined CLI as its shell: before anything else, which
    // could touch what the shell inherits.
    #[cfg(target_os = "linux")]
    if let Some(code) = crate::confine::shell::run_if_started_as_shell() {
        return code;
    }
    crate::confine::keep_inherited_descriptors();
    let cli = Cli::parse();
    let color = output::use_color(cli.global.color);
    let result = match &cli.command {
        Command::Init(args) => init::run(args, &cli.global, color),
        Command::Validate(args) => validate::run(args, &cli.global, color),
        Command::Run(args) => run::run(args, &cli.global, color),
        Command::Plan(args) => plan::run(args, &cli.global, color),
        Command::Explain(args) => explain::run(args, &cli.global, color),
        Command::Prompt(args) => prompt::run(args, &cli.global, color),
        Command::Schema(args) => schema::run(args),
        Command::Config(args) => config::run(args, &cli.global),
        Command::Doctor(args) => doctor::run(args, &cli.global, color),
        Command::KeepGroups => {
            crate::engine::keeper::serve();
            Ok(Exit::Success)
        }
        Command::Runs(args) => runs::run(args, &cli.global),
        Command::Export(args) => export::run(args, &cli.global, color),
        Command::State(args) => state::run(args, &cli.global, color),
        Command::Mcp(args) => mcp::run(args),
        Command::Learnings(args) => learnings::run(args, &cli.global),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
    };
    error::finish(result, color)
}
