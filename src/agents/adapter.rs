//! The Adapter trait: one implementation per agent CLI.

use std::path::{Path, PathBuf};

use crate::events::Event;
use crate::model::toolset::{InternalTool, Mode, Permission, ToolSet};
use crate::pipeline::Agent;

use super::invocation::{
    Enforced, Enforcement, EnvValue, EnvVar, Invocation, InvocationFile, Stdin,
};
use crate::model::AgentKind;

/// The folder of an invocation's directory that holds the files orch
/// writes for the CLI.
pub(crate) const ORCH_FILES: &str = "orch";

/// An MCP server one invocation gets: the pipeline's servers the ToolSet
/// names, and orch's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpServerSpec {
    pub(crate) name: String,
    /// A stdio server's argv (empty for a remote one).
    pub(crate) command: Vec<String>,
    pub(crate) env: Vec<(String, EnvValue)>,
    /// A remote server (streamable HTTP) instead of a process.
    pub(crate) remote: Option<RemoteSpec>,
    /// The tools the ToolSet allows on this server; `None` means all (`*`).
    pub(crate) tools: Option<Vec<String>>,
    /// The pipeline vouches that the server's tools only read.
    pub(crate) read_only: bool,
}

/// A remote MCP server as the CLIs get it: its address, and each header
/// by the variable of the CLI's environment that carries its value (orch
/// sets it; a header's value never goes into a config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteSpec {
    pub(crate) url: String,
    pub(crate) headers: Vec<RemoteHeader>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteHeader {
    pub(crate) name: String,
    /// The variable of the CLI's environment that carries the value.
    pub(crate) var: String,
    pub(crate) value: EnvValue,
}

impl RemoteSpec {
    /// The headers as a JSON object of references, in `syntax`.
    pub(crate) fn headers_json(&self, syntax: super::env::EnvRef) -> serde_json::Value {
        self.headers
            .iter()
            .map(|h| {
                (
                    h.name.clone(),
                    serde_json::Value::String(super::env::reference(&h.var, syntax)),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

impl McpServerSpec {
    pub(crate) fn program(&self) -> &str {
        self.command.first().map_or("", String::as_str)
    }

    pub(crate) fn args(&self) -> &[String] {
        self.command.get(1..).unwrap_or(&[])
    }

    /// The stdio entry the CLIs' JSON configs share (command, args, and an
    /// env whose secrets are `${VAR}` references); adapters add their keys.
    pub(crate) fn json_entry(&self) -> serde_json::Value {
        serde_json::json!({
            "command": self.program(),
            "args": self.args(),
            "env": super::env::config_env(&self.env, super::env::EnvRef::Dollar),
        })
    }
}

/// What a CLI says it does at each permission level, for
/// [`shell_bound_permission`].
pub(crate) struct PermissionReasons {
    pub(crate) read_only: &'static str,
    /// Why an unrestricted shell escapes the workspace under this CLI.
    pub(crate) shell_escapes: &'static str,
    pub(crate) workspace_write: &'static str,
    pub(crate) full_access: &'static str,
}

/// The permission level's enforcement for a CLI whose shell has no sandbox
/// (all but Codex): `workspace-write` with unrestricted `Bash` is `none`,
/// since the shell can write anywhere and these CLIs can only hold it to
/// command patterns, which a command does not foresee; every other case the
/// CLI enforces.
pub(crate) fn shell_bound_permission(ts: &ToolSet, reasons: PermissionReasons) -> Enforced {
    match ts.permission {
        Permission::ReadOnly => Enforced::cli(reasons.read_only),
        Permission::WorkspaceWrite if ts.internal.contains(&InternalTool::Bash) => {
            Enforced::none(reasons.shell_escapes)
        }
        Permission::WorkspaceWrite => Enforced::cli(reasons.workspace_write),
        Permission::FullAccess => Enforced::cli(reasons.full_access),
    }
}

/// The first `Bash(<pattern>)` that is not a command prefix: one `*`, at
/// its end. CLIs that match a command by prefix (Gemini's policy,
/// Copilot's `:*` rules) hold nothing else: `Bash(git * --oneline)` would
/// become every `git` command, and `Bash(git status)` every `git status
/// ...`.
pub(crate) fn not_a_prefix(ts: &ToolSet) -> Option<&str> {
    ts.internal.iter().find_map(|t| match t {
        InternalTool::BashPattern(p)
            if !p.ends_with('*') || p.trim_end_matches('*').contains('*') =>
        {
            Some(p.as_str())
        }
        _ => None,
    })
}

/// Items in first-seen order without repeats.
pub(crate) fn unique<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Everything an adapter needs to build an Invocation.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub(crate) agent: &'a Agent,
    /// The program to run (the agent's `binary`, else the settings' binary
    /// for the kind).
    pub(crate) program: String,
    pub(crate) toolset: &'a ToolSet,
    /// What the agent is told; the adapter chooses how to deliver it.
    pub(crate) prompts: &'a crate::prompt::Prompts,
    /// The model: the phase's profile's, else the agent's own.
    pub(crate) model: Option<&'a str>,
    pub(crate) mcp_servers: Vec<McpServerSpec>,
    /// The workspace the agent works in.
    pub(crate) workdir: PathBuf,
    /// The invocation's own directory: temporary home and config files.
    pub(crate) dir: PathBuf,
    /// Names of variables passed through from orch's environment.
    pub(crate) pass_env: Vec<String>,
    /// The real user's home (toolchains that default to a folder in it,
    /// like rustup, are pointed there).
    pub(crate) user_home: Option<PathBuf>,
    /// Whether orch confines the process tree at the OS level (a CLI's own
    /// sandbox must then work inside it).
    pub(crate) confined: bool,
    /// Extra raw flags from the agent's mode settings.
    pub(crate) flags: &'a [String],
    /// The phase's mode (`review` for a judge).
    pub(crate) mode: Mode,
}

impl Request<'_> {
    /// The invocation of an agent CLI for this request: run in the
    /// workspace with exactly `env` (nothing inherited from orch).
    pub(crate) fn cli_invocation(
        &self,
        args: Vec<String>,
        env: Vec<EnvVar>,
        stdin: Stdin,
        files: Vec<InvocationFile>,
        enforcement: Enforcement,
    ) -> Invocation {
        Invocation {
            program: self.program.clone(),
            args,
            env,
            stdin,
            cwd: self.workdir.clone(),
            dir: self.dir.clone(),
            files,
            enforcement,
            inherit_env: false,
            confinement: None,
            prompt_tokens: Default::default(),
            shown: None,
            git: None,
            shells: None,
            undumpable: None,
        }
    }

    /// A folder of the CLI's own in the invocation's directory (its home,
    /// config directory, temporary files): the CLI may write there.
    pub(crate) fn path_in_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The folder of orch's shells for the CLI (see
    /// [`crate::confine::shell`]), among orch's files for it.
    pub(crate) fn shell_folder(dir: &Path) -> PathBuf {
        dir.join(ORCH_FILES).join("bin")
    }

    /// A file orch writes for the CLI (MCP configuration, policy, system
    /// prompt): in `orch/` of the invocation's directory, which a confined
    /// CLI may read but not change.
    pub(crate) fn file_in_dir(&self, name: &str) -> PathBuf {
        self.dir.join(ORCH_FILES).join(name)
    }
}

/// How to run an invocation's offline argument probe and read its verdict.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Arguments to use instead of the invocation's.
    pub(crate) args: Vec<String>,
    /// Extra environment for the probe (dummy keys, closed endpoints).
    pub(crate) env: Vec<(String, String)>,
    /// Decides from (exit code, stdout, stderr) whether the CLI accepted the
    /// argv; `Err` carries the CLI's own message.
    pub(crate) verdict: fn(Option<i32>, &str, &str) -> Result<(), String>,
}

/// One agent CLI.
pub trait Adapter: Sync {
    fn kind(&self) -> AgentKind;

    /// Every fact about the CLI that is a table: its package, credentials,
    /// the flags and environment orch controls.
    fn table(&self) -> &'static super::kind::CliTable;

    /// The capability table: how this CLI enforces each field of a ToolSet.
    /// Validation consults it (strict: a `none` is an error).
    fn enforcement(&self, toolset: &ToolSet) -> Enforcement;

    /// Folders (by name) the CLI loads code from in the workspace and its
    /// ancestors whatever orch's flags say: hidden from it under
    /// `read-only`, where orch confines it.
    fn loads_code_from(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether the CLI runs the model's commands in its own domain, so
    /// that orch, where it confines, starts it undumpable from a copy of
    /// its own program (see [`crate::confine::undumpable`]), or not at
    /// all (Codex).
    fn starts_undumpable(&self) -> bool {
        false
    }

    /// For a CLI that [`Adapter::starts_undumpable`]: its own program,
    /// given `found` (the real path of what its name finds: the program, or
    /// a launcher that starts it), or why there is none to copy (a script
    /// cannot run from a copy no one may read).
    fn own_program(&self, found: &Path) -> Result<OwnProgram, String> {
        Ok(OwnProgram {
            program: found.to_path_buf(),
            package: None,
        })
    }

    /// The granted tool through which the agent may start programs (a
    /// shell), if any, or the code the CLI loads from the workspace
    /// ([`Adapter::loads_code_from`]) when it is not hidden from it: above
    /// `read-only` (the workspace is readable whole), or where the OS does
    /// not confine it (`confined` false). What either starts runs in its
    /// process tree, with its tools.
    fn starts_programs(&self, toolset: &ToolSet, confined: bool) -> Option<String> {
        let shell = toolset
            .internal
            .iter()
            .find(|t| matches!(t, InternalTool::Bash | InternalTool::BashPattern(_)))
            .map(ToString::to_string);
        let loads = self.loads_code_from();
        let visible = toolset.permission != Permission::ReadOnly || !confined;
        shell.or_else(|| {
            (visible && !loads.is_empty()).then(|| {
                format!(
                    "the code it loads from {} in the workspace, {}",
                    loads.join(", "),
                    if toolset.permission != Permission::ReadOnly {
                        format!("readable at {}", toolset.permission)
                    } else {
                        "not hidden without confinement".to_string()
                    }
                )
            })
        })
    }

    /// Whether the CLI has a tool for a canonical name.
    fn supports(&self, _tool: &InternalTool) -> bool {
        true
    }

    /// Whether the CLI would accept this model string (checked before
    /// anything is spawned).
    fn check_model(&self, model: &str) -> Result<(), String> {
        if model.trim().is_empty() || model.chars().any(char::is_whitespace) {
            Err("a model name has no spaces".into())
        } else {
            Ok(())
        }
    }

    /// Whether an agent `env` variable is one the CLI may be given as
    /// written (beyond [`AgentKind::controlled_env`], which no kind may
    /// set): `Err` says why not.
    fn check_env(&self, _name: &str, _value: &str) -> Result<(), String> {
        Ok(())
    }

    /// The ToolSet as a command line, environment and files, with how each
    /// field is enforced.
    fn invocation(&self, req: &Request<'_>) -> Invocation;

    /// Parse one line of the CLI's JSON event stream. Lines that are not
    /// events give nothing.
    fn parse_line(&self, line: &str) -> Vec<Event>;

    /// Events a CLI reports only on stderr (Codex's sandbox refusals never
    /// reach its JSON stream).
    fn parse_stderr_line(&self, _line: &str) -> Vec<Event> {
        Vec::new()
    }

    /// Whether a stderr line says the CLI runs with weaker rules than asked
    /// (it could not apply a restriction orch asked for and went on
    /// without it); such an attempt has failed.
    fn weakened(&self, stderr_line: &str) -> Option<&'static str>;

    /// The offline argument probe for an invocation.
    fn probe(&self, inv: &Invocation) -> Probe;
}

/// The adapter for a kind.
pub fn adapter(kind: AgentKind) -> &'static dyn Adapter {
    match kind {
        AgentKind::Claude => &super::claude::Claude,
        AgentKind::Codex => &super::codex::Codex,
        AgentKind::Gemini => &super::gemini::Gemini,
        AgentKind::Opencode => &super::opencode::Opencode,
        AgentKind::Copilot => &super::copilot::Copilot,
        AgentKind::Command => &super::command::Command,
    }
}

/// A CLI's own program (see [`Adapter::own_program`]), and the folder
/// of the package it comes in, whose other files it finds beside itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnProgram {
    pub program: PathBuf,
    pub package: Option<PathBuf>,
}

/// The CLI's own message for a rejected argv: its first non-empty stderr
/// line (or `rejected` when it said nothing).
pub(crate) fn first_message(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("rejected")
        .trim()
        .to_string()
}
