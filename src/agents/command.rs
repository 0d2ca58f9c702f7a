//! Plain commands (`kind = "command"`): the phase's argv as written.
//!
//! A command is not a model: it runs what the pipeline author wrote, with
//! the author's environment, and ToolSets do not apply to it. The prompt, if
//! any, is handed over in a file named by `ORCH_PROMPT_FILE`.

use super::adapter::{Adapter, Probe, Request};
use super::env;
use super::invocation::{Enforced, Enforcement, Invocation, InvocationFile, Stdin};
use super::kind::{CliTable, ORCH_SETS};
use crate::events::Event;
use crate::model::AgentKind;
use crate::model::ToolSet;

pub(super) struct Command;

/// What orch knows of a plain command's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: None,
    credentials: &[],
    default_pass_env: &[],
    controlled_flags: &[],
    controlled_env: &[("ORCH_PROMPT_FILE", ORCH_SETS)],
    controlled_config_prefixes: &[],
    config_option: None,
    controlled_words: &[],
    yargs: false,
    confines_writes: false,
    shell_vars: &[],
    git_writes: &[],
    code_from: &[],
};

impl Adapter for Command {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Command
    }

    fn enforcement(&self, _ts: &ToolSet) -> Enforcement {
        let na = || Enforced::none("a plain command runs as written; ToolSets do not apply");
        Enforcement {
            internal: na(),
            mcp: na(),
            permission: na(),
            max_turns: na(),
        }
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let argv = req.agent.command.clone().unwrap_or_default();
        // The prompt, when there is one, in a file of the attempt's own.
        let mut environment = Vec::new();
        let mut files = Vec::new();
        if !req.prompts.user.is_empty() {
            let path = req.file_in_dir("prompt.md");
            environment.push(env::plain("ORCH_PROMPT_FILE", path.display().to_string()));
            files.push(InvocationFile {
                path,
                content: req.prompts.user.clone(),
            });
        }
        for (name, value) in &req.agent.env {
            environment.push(super::invocation::EnvVar {
                name: name.clone(),
                value: env::classify(name, value),
            });
        }
        Invocation {
            program: argv.first().cloned().unwrap_or_default(),
            args: argv.iter().skip(1).cloned().collect(),
            env: environment,
            stdin: Stdin::Null,
            cwd: req.workdir.clone(),
            dir: req.dir.clone(),
            files,
            enforcement: self.enforcement(req.toolset),
            inherit_env: true,
            confinement: None,
            prompt_tokens: Default::default(),
            shown: None,
            git: None,
            shells: None,
            undumpable: None,
        }
    }

    fn parse_line(&self, _line: &str) -> Vec<Event> {
        Vec::new()
    }

    fn weakened(&self, _line: &str) -> Option<&'static str> {
        None
    }

    fn probe(&self, inv: &Invocation) -> Probe {
        Probe {
            args: inv.args.clone(),
            env: Vec::new(),
            verdict: |_, _, _| Ok(()),
        }
    }
}
