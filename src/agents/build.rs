//! From a validated pipeline to Invocations: pick the program, the MCP
//! servers the ToolSet names (and orch's own), the prompt, the directories,
//! and hand them to the kind's adapter.

use std::path::{Path, PathBuf};

use super::AgentKind;
use super::adapter::{McpServerSpec, Request, adapter, invocation_dir};
use super::env;
use super::invocation::{EnvValue, Invocation};
use crate::pipeline::{Agent, Phase, Pipeline};
use crate::settings::{Settings, default_pass_env};
use crate::toolset::{ORCH_MCP_SERVER, ToolSet};

/// Where and how invocations are built.
#[derive(Debug, Clone)]
pub struct Context {
    pub settings: Settings,
    /// The workspace agents work in (orch's working directory).
    pub workdir: PathBuf,
    /// How orch itself is invoked, for its MCP server entry.
    pub orch_exe: String,
}

impl Context {
    pub fn new(settings: Settings, workdir: PathBuf) -> Self {
        let orch_exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "orch".into());
        Self {
            settings,
            workdir,
            orch_exe,
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        let s = &self.settings.state_dir;
        if s.is_absolute() {
            s.clone()
        } else {
            self.workdir.join(s)
        }
    }
}

/// The program an agent runs: the pipeline's `binary`, else the settings'
/// binary for the kind, else the command's first word.
pub fn program(agent: &Agent, settings: &Settings) -> String {
    if let Some(b) = &agent.binary {
        return b.clone();
    }
    if let Some(cmd) = &agent.command {
        return cmd.first().cloned().unwrap_or_default();
    }
    kind_program(agent.kind, settings)
}

/// The program for a kind when the pipeline names none: the settings'
/// binary, else the kind's default name.
pub fn kind_program(kind: AgentKind, settings: &Settings) -> String {
    settings
        .agents
        .get(&kind)
        .map(|a| a.binary.clone())
        .or_else(|| kind.default_binary().map(str::to_string))
        .unwrap_or_default()
}

/// The MCP servers a ToolSet names, with the tools it allows on each.
pub fn mcp_servers(
    pipeline: &Pipeline,
    toolset: &ToolSet,
    phase: &Phase,
    agent: &Agent,
    ctx: &Context,
) -> Vec<McpServerSpec> {
    let mut out: Vec<McpServerSpec> = Vec::new();
    for m in &toolset.mcp {
        let i = match out.iter().position(|s| s.name == m.server) {
            Some(i) => i,
            None => {
                let spec = if m.server == ORCH_MCP_SERVER {
                    McpServerSpec {
                        name: ORCH_MCP_SERVER.into(),
                        command: vec![
                            ctx.orch_exe.clone(),
                            "mcp".into(),
                            "serve".into(),
                            "--pipeline".into(),
                            absolute(&ctx.workdir, &pipeline.path).display().to_string(),
                            "--phase".into(),
                            phase.name.clone(),
                            "--agent".into(),
                            agent.name.clone(),
                        ],
                        env: vec![(
                            "ORCH_STATE_DIR".into(),
                            EnvValue::Plain(ctx.state_dir().display().to_string()),
                        )],
                        tools: Some(Vec::new()),
                    }
                } else {
                    let Some(server) = pipeline.mcp_servers.iter().find(|s| s.name == m.server)
                    else {
                        continue;
                    };
                    McpServerSpec {
                        name: server.name.clone(),
                        command: server.command.clone(),
                        env: server
                            .env
                            .iter()
                            .map(|(k, v)| (k.clone(), env::classify(k, v)))
                            .collect(),
                        tools: Some(Vec::new()),
                    }
                };
                out.push(spec);
                out.len() - 1
            }
        };
        match (&m.tool, &mut out[i].tools) {
            (None, tools) => *tools = None,
            (Some(t), Some(tools)) if !tools.contains(t) => tools.push(t.clone()),
            _ => {}
        }
    }
    out
}

fn absolute(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The prompt text of a phase: its own prompt, else its profile's body.
pub fn prompt(phase: &Phase) -> String {
    phase
        .prompt
        .as_ref()
        .map(|p| p.text().to_string())
        .or_else(|| phase.profile.as_ref().map(|p| p.body.clone()))
        .unwrap_or_default()
}

/// The Invocation for `agent` in `phase`.
pub fn invocation(pipeline: &Pipeline, phase: &Phase, agent: &Agent, ctx: &Context) -> Invocation {
    let resolved = pipeline.resolve(phase, agent);
    let toolset = resolved.toolset;
    let pass_env = ctx
        .settings
        .agents
        .get(&agent.kind)
        .map(|a| a.pass_env.clone())
        .unwrap_or_else(|| default_pass_env(agent.kind));
    let prompt = prompt(phase);
    // A profile's body is the system prompt when the phase has its own
    // prompt; otherwise it is the prompt itself.
    let system = phase
        .prompt
        .as_ref()
        .and(phase.profile.as_ref())
        .map(|p| p.body.clone())
        .filter(|b| !b.trim().is_empty());
    let no_flags = Vec::new();
    let req = Request {
        phase,
        agent,
        program: program(agent, &ctx.settings),
        toolset: &toolset,
        prompt: &prompt,
        system_prompt: system.as_deref(),
        mcp_servers: mcp_servers(pipeline, &toolset, phase, agent, ctx),
        workdir: ctx.workdir.clone(),
        dir: invocation_dir(&ctx.state_dir(), &phase.name, &agent.name),
        pass_env,
        flags: agent
            .mode(phase.mode)
            .map(|m| &m.flags)
            .unwrap_or(&no_flags),
    };
    adapter(agent.kind).invocation(&req)
}
