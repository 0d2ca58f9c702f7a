//! The command line of `orch mcp serve`, defined once: the CLI parses it
//! and the adapters write it into each CLI's MCP configuration with
//! [`ServeArgs::to_argv`], so the two cannot drift.

use std::path::PathBuf;

/// Serve orch's MCP tools to one agent over stdio
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ServeArgs {
    /// The run every record belongs to
    #[arg(long, value_name = "RUN")]
    pub run: String,
    /// The phase the agent works in
    #[arg(long, value_name = "PHASE")]
    pub phase: String,
    /// The agent (its name in the pipeline)
    #[arg(long, value_name = "AGENT")]
    pub agent: String,
    /// The agent's attempt in the phase, from 1
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: u32,
    /// The state directory holding the run history (`state.db`)
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// The workspace the agent works in (artifacts, git, memory files)
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// The tools this agent may list and call, comma-separated; all when
    /// absent (the ToolSet's `mcp__orch__*`)
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// The pipeline file, for `get_phase` (the phase's prompt)
    #[arg(long, value_name = "FILE")]
    pub pipeline: Option<PathBuf>,
    /// The project documents `search_knowledge` searches: a glob relative
    /// to the workspace (repeatable; the `knowledge` setting)
    #[arg(long = "knowledge", value_name = "GLOB")]
    pub knowledge: Vec<String>,
    /// The workspace marker orch wrote for this attempt, which
    /// `verify_workspace` checks
    #[arg(long, value_name = "FILE")]
    pub marker: Option<PathBuf>,
}

impl ServeArgs {
    /// The arguments after `orch`: `mcp serve --run ...`.
    pub fn to_argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "mcp".into(),
            "serve".into(),
            "--run".into(),
            self.run.clone(),
            "--phase".into(),
            self.phase.clone(),
            "--agent".into(),
            self.agent.clone(),
            "--attempt".into(),
            self.attempt.to_string(),
            "--state-dir".into(),
            self.state_dir.display().to_string(),
            "--workspace".into(),
            self.workspace.display().to_string(),
        ];
        if let Some(tools) = &self.tools {
            argv.push("--tools".into());
            argv.push(tools.join(","));
        }
        if let Some(p) = &self.pipeline {
            argv.push("--pipeline".into());
            argv.push(p.display().to_string());
        }
        for k in &self.knowledge {
            argv.push("--knowledge".into());
            argv.push(k.clone());
        }
        if let Some(m) = &self.marker {
            argv.push("--marker".into());
            argv.push(m.display().to_string());
        }
        argv
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: Cmd,
    }
    #[derive(clap::Subcommand)]
    enum Cmd {
        Mcp {
            #[command(subcommand)]
            cmd: Sub,
        },
    }
    #[derive(clap::Subcommand)]
    enum Sub {
        Serve(ServeArgs),
    }

    fn parse(argv: &[String]) -> ServeArgs {
        let cli =
            Cli::try_parse_from(std::iter::once("orch".to_string()).chain(argv.to_vec())).unwrap();
        let Cmd::Mcp { cmd: Sub::Serve(a) } = cli.cmd;
        a
    }

    #[test]
    fn what_the_adapters_write_parses_back_to_the_same_arguments() {
        let all = ServeArgs {
            run: "20261124-abc".into(),
            phase: "audit, with a comma? no: a space".into(),
            agent: "claude".into(),
            attempt: 3,
            state_dir: "/tmp/st ate".into(),
            workspace: "/w".into(),
            tools: Some(vec!["log_decision".into(), "start_task".into()]),
            pipeline: Some("/w/p.toml".into()),
            knowledge: vec!["README.md".into(), "docs/**/*.md".into()],
            marker: Some("/a/orch/workspace.json".into()),
        };
        assert_eq!(parse(&all.to_argv()), all);
        let bare = ServeArgs {
            tools: None,
            pipeline: None,
            knowledge: Vec::new(),
            marker: None,
            ..all
        };
        assert_eq!(parse(&bare.to_argv()), bare);
    }
}
