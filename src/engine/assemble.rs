//! From a validated pipeline to Invocations: pick the program, the MCP
//! servers the ToolSet names (and orch's own), the prompt, the directories,
//! and hand them to the kind's adapter.

use std::path::{Path, PathBuf};

use crate::agents::CliFacts;
use crate::agents::adapter::{McpServerSpec, RemoteHeader, RemoteSpec, Request, adapter};
use crate::agents::capability::{self, Reach};
use crate::agents::env;
use crate::agents::invocation::{EnvValue, Invocation, Shown};
use crate::confine::undumpable::ExecOnlyCopy;
use crate::confine::{Availability, Confinement, Places, Policy, policy, shell};
use crate::model::AgentKind;
use crate::model::toolset::{Layer, ORCH_MCP_SERVER, Permission, Resolved, ToolSet};
use crate::pipeline::model::McpTransport;
use crate::pipeline::{Agent, Phase, Pipeline};
use crate::settings::Settings;

/// Where and how invocations are built.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) settings: Settings,
    /// The workspace agents work in (orch's working directory).
    pub(crate) workdir: PathBuf,
    /// How orch itself is invoked, for its MCP server entry.
    pub orch_exe: String,
    /// Whether the OS can confine agents here, as the settings allow.
    pub confinement: Availability,
    /// The real user's home, resolved: confined agents cannot read it.
    pub(crate) home: Option<PathBuf>,
    /// Other paths the home is mounted at (bind mounts).
    pub(crate) home_aliases: Vec<PathBuf>,
    /// `orch run --input name=value`: what `{{inputs.name}}` stands for.
    pub(crate) inputs: std::collections::BTreeMap<String, String>,
    /// What every prompt reads, read once: the workspace's branch and the
    /// run history.
    facts: std::sync::Arc<SharedFacts>,
    /// orch's program for the shells of confined CLIs (see
    /// [`crate::confine::shell::Program`]), named for the run.
    shell_program: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<shell::Program>>>,
}

/// See [`Context::branch`], [`Context::history`] and [`Context::approved`].
#[derive(Debug, Default)]
struct SharedFacts {
    branch: std::sync::OnceLock<Option<String>>,
    history: std::sync::OnceLock<Option<crate::store::Reader>>,
    approved: std::sync::Mutex<std::collections::BTreeMap<String, Snapshot>>,
}

/// A phase's contract artifact as orch read, checked and (for a judged
/// phase) had it approved: the bytes later phases are given, whatever
/// happens to the file afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Relative to the workspace.
    pub(crate) path: String,
    pub(crate) sha256: String,
    pub(crate) text: String,
}

impl Context {
    pub fn new(settings: Settings, workdir: PathBuf) -> Self {
        let orch_exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "orch".into());
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .and_then(|h| std::fs::canonicalize(h).ok());
        // Bytes: a mount point need not be UTF-8 (see `parse_mountinfo`).
        let home_aliases = match (&home, std::fs::read("/proc/self/mountinfo")) {
            (Some(h), Ok(text)) => policy::home_aliases(h, &policy::parse_mountinfo(text)),
            _ => Vec::new(),
        };
        Self {
            confinement: Availability::detect(settings.confinement),
            settings,
            workdir,
            orch_exe,
            home,
            home_aliases,
            inputs: Default::default(),
            facts: Default::default(),
            shell_program: Default::default(),
        }
    }

    /// The program the shells of confined CLIs are (see
    /// [`crate::confine::shell::Program`]): one per run, in the attempts'
    /// folder, named for the run (`run_id`: a preview's is a placeholder,
    /// and a preview makes none).
    fn shell_program(&self, run_id: &str) -> std::sync::Arc<shell::Program> {
        self.shell_program
            .get_or_init(|| {
                let path = self.attempts_root().join(format!("orch-{run_id}"));
                std::sync::Arc::new(shell::Program::new(path))
            })
            .clone()
    }

    /// The workspace's git branch (read once).
    pub(crate) fn branch(&self) -> Option<&str> {
        self.facts
            .branch
            .get_or_init(|| crate::git::branch(&self.workdir))
            .as_deref()
    }

    /// The run history, for prompts (opened once; `None` before there is
    /// one).
    pub(crate) fn history(&self) -> Option<&crate::store::Reader> {
        self.facts
            .history
            .get_or_init(|| crate::store::Reader::open(&self.state_dir()).ok().flatten())
            .as_ref()
    }

    /// Keep `phase`'s contract artifact as it was accepted: later phases'
    /// prompts quote this text, not the file as it is then.
    pub(crate) fn accept(&self, phase: &str, snapshot: Snapshot) {
        self.facts
            .approved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(phase.to_string(), snapshot);
    }

    /// `phase`'s accepted contract artifact, if it has one in this run.
    pub(crate) fn approved(&self, phase: &str) -> Option<Snapshot> {
        self.facts
            .approved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(phase)
            .cloned()
    }

    /// Every accepted contract artifact, by phase.
    pub(crate) fn all_approved(&self) -> Vec<(String, Snapshot)> {
        self.facts
            .approved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// orch's folder in the user's cache, outside any workspace:
    /// `$XDG_CACHE_HOME/orch` (by default `~/.cache/orch`).
    fn cache_root(&self) -> PathBuf {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| self.home.as_ref().map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("orch")
    }

    /// Where each attempt's own directory is made: `attempts` in
    /// [`Context::cache_root`].
    pub(crate) fn attempts_root(&self) -> PathBuf {
        self.cache_root().join("attempts")
    }

    /// Where the undumpable copies of CLIs' programs are made (see
    /// [`crate::confine::undumpable`]): `programs` in
    /// [`Context::cache_root`].
    pub(crate) fn programs_root(&self) -> PathBuf {
        self.cache_root().join("programs")
    }

    /// The own directory of one attempt of `agent` in `phase`: a new path
    /// no one can guess, made when the attempt needs it (see [`OwnDir`]).
    pub fn attempt_dir(&self, phase: &str, agent: &str) -> OwnDir {
        OwnDir {
            path: self
                .attempts_root()
                .join(format!("{phase}-{agent}-{}", unguessable())),
        }
    }

    /// The directory previews show for an attempt (`explain`, `--dry-run`):
    /// each real attempt gets a fresh one with a random suffix.
    pub(crate) fn planned_dir(&self, phase: &str, agent: &str) -> PathBuf {
        self.attempts_root()
            .join(format!("{phase}-{agent}-{PREVIEW_ATTEMPT_ID}"))
    }

    /// Where runs are recorded: the `state_dir` setting (relative to the
    /// workspace), else the repository's own folder outside it (see
    /// [`default_state_dir`]).
    pub(crate) fn state_dir(&self) -> PathBuf {
        match &self.settings.state_dir {
            Some(s) if s.is_absolute() => s.clone(),
            Some(s) => self.workdir.join(s),
            None => default_state_dir(&self.workdir, self.home.as_deref()),
        }
    }
}

/// The state directory of the repository `workdir` is in, when no setting
/// names one: `$XDG_STATE_HOME/orch/<name>-<hash>` (by default
/// `~/.local/state/orch/...`), where `<name>` is the repository's folder
/// name and `<hash>` 16 hex digits of the SHA-256 of its real path. The
/// repository is the nearest folder at or above `workdir` that holds
/// `.git`; outside one, `workdir` itself. Outside the workspace, so that
/// no agent that may write the workspace can reach the run history, and
/// the same from every folder of the repository.
pub(crate) fn default_state_dir(workdir: &Path, home: Option<&Path>) -> PathBuf {
    let real = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let repo = real
        .ancestors()
        .find(|a| a.join(".git").symlink_metadata().is_ok())
        .unwrap_or(&real);
    let name: String = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let hash = crate::mcp::sha256_hex(repo.as_os_str().as_encoded_bytes());
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| h.join(".local").join("state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("orch").join(format!("{name}-{}", &hash[..16]))
}

/// Why the state directory is not out of the agents' reach, if it is not:
/// it is inside the workspace (or holds it) while an agent of the pipeline
/// may write the workspace (Landlock cannot keep a folder inside a
/// writable tree from the process that may write the tree, and a CLI's own
/// rules let it write anywhere in the workspace). An agent with
/// `full-access` is not confined at all: it is not counted here.
pub(crate) fn state_dir_problem(pipeline: &Pipeline, ctx: &Context) -> Option<String> {
    let state = real_or_lexical(&ctx.state_dir());
    let workspace = real_or_lexical(&ctx.workdir);
    if !(state.starts_with(&workspace) || workspace.starts_with(&state)) {
        return None;
    }
    // Judges included: one given `workspace-write` writes the workspace.
    let writer = pipeline.runs().find(|(phase, agent)| {
        let resolved = pipeline.resolve(phase, agent);
        let level = resolved.toolset.permission;
        let set = resolved.provenance.permission.layer != Layer::Default;
        level == Permission::WorkspaceWrite && (agent.kind.is_llm() || set)
    })?;
    Some(format!(
        "the state directory `{}` is {} the workspace `{}`, which agent `{}` of phase `{}` may write: it could change the run history and the judges' verdicts",
        state.display(),
        if state.starts_with(&workspace) {
            "inside"
        } else {
            "above"
        },
        workspace.display(),
        writer.1.name,
        writer.0.name,
    ))
}

/// `p` with links resolved as far as it exists, the rest appended as
/// written (a state directory that does not exist yet).
fn real_or_lexical(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut rest = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |acc, c| acc.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return abs,
        }
    }
}

/// One attempt's own directory (its home, CLI config, temporary files): a
/// path under [`Context::attempts_root`] that no one can guess, created
/// exclusively (so nothing from an earlier phase or attempt can be in it:
/// orch alone fills it) by [`super::probe::write_files`] when the
/// invocation needs it, and removed with everything in it when dropped.
#[derive(Debug)]
pub struct OwnDir {
    path: PathBuf,
}

impl OwnDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        let _ = std::fs::remove_dir_all(servers_dir(&self.path));
    }
}

/// Where the pipeline's MCP servers orch starts for the attempt in `dir`
/// keep their files: a folder beside it (`<dir>.servers`), which the
/// agent cannot read or write (it sees only its own directory of the
/// attempts'), so nothing it plants there runs in a server with the
/// server's credentials.
pub(crate) fn servers_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".servers");
    dir.with_file_name(name)
}

/// The own folder of `server` started for the attempt in `dir`: its
/// working directory, with its `home` and `tmp` in it.
pub(crate) fn server_dir(dir: &Path, server: &str) -> PathBuf {
    servers_dir(dir).join(server)
}

/// 16 hex digits no one can guess: a hash keyed with the process's random
/// SipHash keys (a fresh key for every call) of the time and a counter.
fn unguessable() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// The program an agent runs: the pipeline's `binary`, else the settings'
/// binary for the kind, else the command's first word.
pub(crate) fn program(agent: &Agent, settings: &Settings) -> String {
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
pub(crate) fn kind_program(kind: AgentKind, settings: &Settings) -> String {
    settings
        .agents
        .get(&kind)
        .map(|a| a.binary.clone())
        .or_else(|| kind.default_binary().map(str::to_string))
        .unwrap_or_default()
}

/// The MCP servers a ToolSet names, with the tools it allows on each.
pub(crate) fn mcp_servers(
    pipeline: &Pipeline,
    toolset: &ToolSet,
    ctx: &Context,
    slot: &Slot<'_>,
) -> Vec<McpServerSpec> {
    let mut out: Vec<McpServerSpec> = Vec::new();
    for m in toolset.mcp.iter() {
        let i = match out.iter().position(|s| s.name == m.server) {
            Some(i) => i,
            None => {
                let spec = if m.server == ORCH_MCP_SERVER {
                    // The command line is written once the scope is known
                    // (below).
                    McpServerSpec {
                        name: ORCH_MCP_SERVER.into(),
                        command: Vec::new(),
                        env: Vec::new(),
                        remote: None,
                        tools: Some(Vec::new()),
                        read_only: false,
                    }
                } else {
                    let Some(server) = pipeline.mcp_servers.iter().find(|s| s.name == m.server)
                    else {
                        continue;
                    };
                    let (command, env, remote) = match &server.transport {
                        McpTransport::Stdio { command, env } => (
                            command.clone(),
                            env.iter()
                                .map(|(k, v)| (k.clone(), env::classify(k, v)))
                                .collect(),
                            None,
                        ),
                        McpTransport::Http { url, headers } => (
                            Vec::new(),
                            Vec::new(),
                            Some(RemoteSpec {
                                url: url.clone(),
                                headers: headers
                                    .iter()
                                    .enumerate()
                                    .map(|(i, (h, v))| RemoteHeader {
                                        name: h.clone(),
                                        var: env::header_var(&server.name, i),
                                        value: env::header_value(v),
                                    })
                                    .collect(),
                            }),
                        ),
                    };
                    McpServerSpec {
                        name: server.name.clone(),
                        command,
                        env,
                        remote,
                        tools: Some(Vec::new()),
                        read_only: server.read_only,
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
    // orch's own tools are served by `orch run` itself, at the attempt's
    // endpoint, and so are the pipeline's stdio servers (orch starts them,
    // with their own environment, never the agent's); the CLI starts only
    // a relay to each, which carries no identity (see `crate::mcp::host`).
    for spec in out.iter_mut() {
        let socket = if spec.name == ORCH_MCP_SERVER {
            endpoint_path(slot.dir)
        } else {
            server_endpoint_path(slot.dir, &spec.name)
        };
        spec.command = vec![
            ctx.orch_exe.clone(),
            "mcp".into(),
            "relay".into(),
            socket.display().to_string(),
        ];
        spec.env = Vec::new();
        // A remote server too: orch posts to it with its headers.
        spec.remote = None;
    }
    out
}

/// Where orch serves the pipeline's stdio server `server` to the attempt
/// whose own directory is `dir`.
pub(crate) fn server_endpoint_path(dir: &Path, server: &str) -> PathBuf {
    dir.join(crate::agents::adapter::ORCH_FILES)
        .join(crate::mcp::server_socket(server))
}

/// The pipeline's servers `toolset` grants, as orch serves them to the
/// attempt of `inv` (whose own directory is `dir`): a stdio server's
/// command, what it needs to run (`PATH`, the locale, the toolchains, the
/// attempt's home and temporary folder) and its own `env` filled in from
/// orch's environment, never the agent's, confined as the agent is; a
/// remote server's address and headers, filled in the same way.
pub fn server_spawns(
    pipeline: &Pipeline,
    toolset: &ToolSet,
    ctx: &Context,
    inv: &Invocation,
    dir: &Path,
) -> Vec<(PathBuf, crate::mcp::ServerSpawn)> {
    let lookup = |n: &str| std::env::var(n).ok();
    let mut out: Vec<(PathBuf, crate::mcp::ServerSpawn)> = Vec::new();
    for m in toolset.mcp.iter() {
        if m.server == ORCH_MCP_SERVER || out.iter().any(|(_, s)| s.name == m.server) {
            continue;
        }
        let Some(server) = pipeline.mcp_servers.iter().find(|s| s.name == m.server) else {
            continue;
        };
        let transport = match &server.transport {
            McpTransport::Stdio { command, env: own } => {
                let mut env: Vec<(String, String)> = env::BASICS
                    .iter()
                    .filter_map(|n| lookup(n).map(|v| (n.to_string(), v)))
                    .collect();
                for (var, folder) in env::TOOLCHAIN_HOMES {
                    match lookup(var) {
                        Some(v) => env.push((var.to_string(), v)),
                        None => {
                            if let Some(home) = &ctx.home
                                && home.join(folder).is_dir()
                            {
                                env.push((
                                    var.to_string(),
                                    home.join(folder).display().to_string(),
                                ));
                            }
                        }
                    }
                }
                let folder = server_dir(dir, &server.name);
                env.push(("HOME".into(), folder.join("home").display().to_string()));
                env.push(("TMPDIR".into(), folder.join("tmp").display().to_string()));
                // Not its working directory (see server_dir): where the
                // workspace is, for a server that works on it.
                env.push(("ORCH_WORKSPACE".into(), ctx.workdir.display().to_string()));
                // A git directory of its own, like an agent's: no config an
                // agent planted in `.git` runs in a server that runs git in
                // the workspace, with the server's credentials.
                let git = crate::git::agents::AgentGit::plan(
                    &ctx.workdir,
                    ctx.home.as_deref(),
                    folder.join("git"),
                );
                env.extend(git.env());
                for (k, v) in own {
                    env.retain(|(name, _)| name != k);
                    let var = crate::agents::invocation::EnvVar {
                        name: k.clone(),
                        value: env::classify(k, v),
                    };
                    if let Some(value) = var.resolve(lookup) {
                        env.push((k.clone(), value));
                    }
                }
                crate::mcp::ServerTransport::Stdio {
                    argv: command.clone(),
                    env,
                    confinement: inv.confinement.as_ref().map(|c| Confinement {
                        policy: c.policy.beside(&folder),
                        abi: c.abi,
                    }),
                    own: folder,
                    git: Box::new(git),
                }
            }
            McpTransport::Http { url, headers } => crate::mcp::ServerTransport::Http {
                url: url.clone(),
                headers: headers
                    .iter()
                    .filter_map(|(h, v)| {
                        let var = crate::agents::invocation::EnvVar {
                            name: h.clone(),
                            value: env::header_value(v),
                        };
                        var.resolve(lookup).map(|value| (h.clone(), value))
                    })
                    .collect(),
            },
        };
        let tools = toolset
            .mcp
            .iter()
            .filter(|t| t.server == server.name)
            .try_fold(Vec::new(), |mut acc, t| {
                acc.push(t.tool.clone()?);
                Some(acc)
            });
        out.push((
            server_endpoint_path(dir, &server.name),
            crate::mcp::ServerSpawn {
                name: server.name.clone(),
                transport,
                tools,
            },
        ));
    }
    out
}

/// The tools of orch's own server `agent` may call with `toolset`: `None`
/// when it gets none (a plain command speaks no MCP), `Some(None)` for all
/// (`mcp__orch__*`), else the names.
pub(crate) fn orch_tools(agent: &Agent, toolset: &ToolSet) -> Option<Option<Vec<String>>> {
    if !agent.kind.is_llm() {
        return None;
    }
    let mut granted: Option<Option<Vec<String>>> = None;
    for m in toolset.mcp.iter().filter(|m| m.server == ORCH_MCP_SERVER) {
        granted = Some(match (granted, &m.tool) {
            (_, None) | (Some(None), _) => None,
            (None, Some(t)) => Some(vec![t.clone()]),
            (Some(Some(mut v)), Some(t)) => {
                if !v.contains(t) {
                    v.push(t.clone());
                }
                Some(v)
            }
        });
    }
    granted
}

/// Where orch listens for the attempt whose own directory is `dir`.
pub(crate) fn endpoint_path(dir: &Path) -> PathBuf {
    dir.join(crate::agents::adapter::ORCH_FILES)
        .join(crate::mcp::host::SOCKET)
}

/// The model an agent uses in a phase, and where that came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ModelChoice {
    /// `None`: the CLI's own default.
    pub(crate) value: Option<String>,
    /// `phase`, `profile`, `agent`, `settings` or `cli default`.
    pub(crate) layer: &'static str,
    /// Where it is written (`file:line:col`, or the settings key).
    pub(crate) at: Option<String>,
}

/// The model an agent uses in a phase: the phase's `model`, else its
/// profile's (unless the profile says `inherit`), else the agent's own
/// `model`, else the settings' `agents.<kind>.model`, else the CLI's
/// default.
pub(crate) fn model(phase: &Phase, agent: &Agent, settings: &Settings) -> ModelChoice {
    let at = |l: &Option<crate::model::Location>| l.as_ref().map(|l| l.to_string());
    if let Some((m, l)) = &phase.model {
        return ModelChoice {
            value: Some(m.clone()),
            layer: "phase",
            at: Some(l.to_string()),
        };
    }
    if let Some(p) = &phase.profile
        && let Some(m) = &p.model
    {
        return ModelChoice {
            value: Some(m.clone()),
            layer: "profile",
            at: at(&p.model_at),
        };
    }
    if let Some(m) = &agent.model {
        return ModelChoice {
            value: Some(m.clone()),
            layer: "agent",
            at: at(&agent.model_at),
        };
    }
    if let Some(m) = settings
        .agents
        .get(&agent.kind)
        .and_then(|a| a.model.clone())
    {
        return ModelChoice {
            value: Some(m),
            layer: "settings",
            at: Some(format!("agents.{}.model", agent.kind)),
        };
    }
    ModelChoice {
        value: None,
        layer: "cli default",
        at: None,
    }
}

/// What to show and store of `real`, `req`'s invocation, when the
/// pipeline's argvs in it (a plain command's `command`, an MCP server's)
/// hold a secret: the adapter builds the invocation again from the same
/// request with those secrets redacted ([`env::shown_argv`]), so a secret
/// is redacted wherever the CLI gets it (an argument, a `--config` value,
/// a variable, a configuration file). `None` when there is nothing to
/// redact.
fn shown(req: &Request<'_>, real: &Invocation, ctx: &Context) -> Option<Shown> {
    let agent = req.agent.command.as_ref().map(|c| Agent {
        command: Some(env::shown_argv(c)),
        ..req.agent.clone()
    });
    let servers: Vec<McpServerSpec> = req
        .mcp_servers
        .iter()
        .map(|s| McpServerSpec {
            // orch's own server's command is orch's.
            command: if s.name == ORCH_MCP_SERVER {
                s.command.clone()
            } else {
                env::shown_argv(&s.command)
            },
            ..s.clone()
        })
        .collect();
    let agent = agent.filter(|a| a.command != req.agent.command);
    if agent.is_none() && servers == req.mcp_servers {
        return None;
    }
    let agent = agent.as_ref().unwrap_or(req.agent);
    let redacted = adapter(agent.kind).invocation(&Request {
        agent,
        program: program(agent, &ctx.settings),
        mcp_servers: servers,
        ..req.clone()
    });
    Some(Shown::between(real, redacted))
}

/// Where orch leaves the workspace marker of an attempt whose own
/// directory is `dir` (readable, not writable, by the agent).
pub(crate) fn marker_path(dir: &Path) -> PathBuf {
    dir.join(crate::agents::adapter::ORCH_FILES)
        .join("workspace.json")
}

/// The marker `verify_workspace` checks: which attempt the agent is, and
/// the workspace it must work in.
fn marker(
    ctx: &Context,
    phase: &Phase,
    agent: &Agent,
    slot: &Slot<'_>,
) -> crate::agents::invocation::InvocationFile {
    let workspace = std::fs::canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone());
    let content = serde_json::json!({
        "run": slot.run_id, "phase": phase.name, "agent": agent.name,
        "attempt": slot.attempt, "workspace": workspace,
    });
    crate::agents::invocation::InvocationFile {
        path: marker_path(slot.dir),
        content: format!("{content:#}\n"),
    }
}

/// The level the OS holds `agent` to in `phase`, if it confines it: an LLM
/// agent's permission; a command's when a layer sets one, else
/// `workspace-write` when an agent may have written the workspace before
/// it runs ([`Pipeline::writer_before`]); never full access.
fn confined_level(
    pipeline: &Pipeline,
    phase: &Phase,
    agent: &Agent,
    resolved: &Resolved,
) -> Option<Permission> {
    let level = resolved.toolset.permission;
    let set = resolved.provenance.permission.layer != Layer::Default;
    if !agent.kind.is_llm() && !set {
        return pipeline
            .writer_before(phase)
            .map(|_| Permission::WorkspaceWrite);
    }
    (level != Permission::FullAccess).then_some(level)
}

/// The confinement of an invocation whose own directory is `dir`, and,
/// for a CLI that needs one, the undumpable copy of its own program it
/// starts from or why it cannot start (see [`own_program`]).
fn confinement(
    ctx: &Context,
    kind: AgentKind,
    level: Permission,
    inv: &Invocation,
    dir: &Path,
) -> Option<(Confinement, Option<Result<ExecOnlyCopy, String>>)> {
    let abi = ctx.confinement.abi()?;
    let program = inv.program.as_str();
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect()
        })
        .unwrap_or_default();
    // Found as the attempt will start it: an agent CLI on its own `PATH`
    // past folders that lead into the workspace (see
    // `Invocation::start_command`), so that a program an agent put there
    // cannot choose which folders of the home are read; a plain command as
    // a shell finds it.
    let program = if kind.is_llm() {
        let path = inv
            .path_value(|n| std::env::var(n).ok())
            .map(std::ffi::OsString::from)
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        crate::path_env::Trees::new([ctx.workdir.clone()]).find(program, &path, &ctx.workdir)
    } else {
        which::which(program).ok()
    }
    .and_then(|p| std::fs::canonicalize(p).ok());
    let own = own_program(ctx, kind, program.as_deref());
    let mut home_readable = match &ctx.home {
        Some(home) => policy::home_readable(
            home,
            &ctx.settings.allow_read,
            &path_dirs,
            program.as_deref(),
        ),
        None => Vec::new(),
    };
    // The copy's folder, and the package its links name.
    if let Some(Ok(copy)) = &own {
        home_readable.push(copy.folder().to_path_buf());
        home_readable.extend(copy.package().map(Path::to_path_buf));
    }
    // What the CLI would load code from, in the workspace and above it.
    let workspace = std::fs::canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone());
    let also_hidden = adapter(kind)
        .loads_code_from()
        .iter()
        .flat_map(|name| workspace.ancestors().map(move |a| a.join(name)))
        // A link too, whatever it names: the policy refuses it.
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    // The CLI's own folders (those its environment names): writable; the
    // rest of its directory (orch's files for it) is not.
    let own_writable = inv
        .env
        .iter()
        .filter_map(|v| match &v.value {
            // (Not a list of folders, one per line.)
            EnvValue::Plain(p) if !p.contains('\n') => Some(PathBuf::from(p)),
            _ => None,
        })
        .filter(|p| {
            p.starts_with(dir)
                && p != dir
                && !p.starts_with(dir.join(crate::agents::adapter::ORCH_FILES))
        })
        .collect();
    let places = Places {
        workspace: ctx.workdir.clone(),
        own_dir: dir.to_path_buf(),
        own_writable,
        home: ctx.home.clone(),
        home_readable,
        also_writable: Vec::new(),
        also_hidden,
        state_dir: Some(std::fs::canonicalize(ctx.state_dir()).unwrap_or_else(|_| ctx.state_dir())),
    };
    Policy::for_permission(level, &places, &ctx.home_aliases)
        .map(|policy| (Confinement { policy, abi }, own))
}

/// For a CLI that runs the model's commands in its own domain (Codex):
/// the undumpable copy of its own program it is started from (see
/// [`crate::confine::undumpable`]), planned from `found` (the real path its
/// name finds), or why it cannot start. `None` for the other CLIs.
fn own_program(
    ctx: &Context,
    kind: AgentKind,
    found: Option<&Path>,
) -> Option<Result<ExecOnlyCopy, String>> {
    let cli = adapter(kind);
    if !cli.starts_undumpable() {
        return None;
    }
    let Some(found) = found else {
        return Some(Err(format!(
            "`{}` was not found on PATH past the folders an agent may write or that lead into \
             one (is it installed? give its path as `agents.<name>.binary`)",
            kind_program(kind, &ctx.settings)
        )));
    };
    if let Some(why) = crate::confine::undumpable::machine() {
        return Some(Err(why));
    }
    Some(cli.own_program(found).and_then(|own| {
        ExecOnlyCopy::plan(&own.program, own.package.as_deref(), &ctx.programs_root()).ok_or_else(
            || {
                format!(
                    "cannot read `{}` to copy it (docs/confinement.md, \"Codex\")",
                    own.program.display()
                )
            },
        )
    }))
}

/// Give a confined CLI orch's shells (see [`crate::confine::shell`]): first
/// on its `PATH` and in the variables it names its shell by (in its own
/// directory, which it may read), with the folders its commands may write: the
/// policy's, but for the CLI's own (its settings and sessions; the home,
/// temporary folder and git directory are the commands' too). None if the
/// agent could change them (its attempt's directory in a tree it may
/// write): the attempt does not start.
fn shells(
    ctx: &Context,
    kind: AgentKind,
    policy: &Policy,
    vars: &mut Vec<crate::agents::invocation::EnvVar>,
    dir: &Path,
    run_id: &str,
    own: Option<&Result<ExecOnlyCopy, String>>,
) -> crate::agents::invocation::Shells {
    let folder = Request::shell_folder(dir);
    // Where an agent may write: the workspace (this phase's or another's)
    // and the policy's trees.
    let writable: Vec<PathBuf> = policy
        .writable
        .iter()
        .chain([&ctx.workdir])
        .cloned()
        .collect();
    let trees = crate::path_env::Trees::new(writable.iter().cloned());
    // Folders the CLI runs code from that its environment names, as the
    // process gets them.
    let code_from = adapter(kind).table().code_from.iter().find_map(|name| {
        let var = vars.iter().rfind(|v| v.name == *name)?;
        let value = PathBuf::from(var.resolve(|n| std::env::var(n).ok())?);
        trees
            .may_lead_into(&value)
            .then(|| format!("{name} ({})", value.display()))
    });
    let program = if trees.may_lead_into(&folder) {
        Err(format!(
            "the attempt's own directory `{}` lies in (or leads through a link into) the \
             workspace or another folder an agent may write, so an agent could change the \
             shell its CLI starts (set XDG_CACHE_HOME outside it)",
            dir.display(),
        ))
    } else if let Some(Err(why)) = own {
        Err(why.clone())
    } else if let Some(Ok(own)) = own.filter(|own| {
        own.as_ref().is_ok_and(|c| {
            [Some(c.source()), c.package(), Some(c.folder())]
                .into_iter()
                .flatten()
                .any(|p| trees.may_lead_into(p))
        })
    }) {
        Err(format!(
            "the CLI's own program `{}`, or orch's copy of it in `{}`, lies in (or leads \
             through a link into) the workspace or another folder an agent may write, so an \
             agent could change the program the CLI runs (install it, or set XDG_CACHE_HOME, \
             outside them)",
            own.source().display(),
            own.folder().display(),
        ))
    } else if let Some(named) = code_from {
        Err(format!(
            "{named} names a folder the CLI runs code from that lies in (or leads through a \
             link into) the workspace or another folder an agent may write, so an agent \
             could change what the CLI runs (set it outside them, or unset it)"
        ))
    } else {
        Ok(ctx.shell_program(run_id))
    };
    let bash = folder.join("bash").display().to_string();
    for var in adapter(kind).table().shell_vars {
        vars.push(env::plain(var, bash.clone()));
    }
    // What orch's shells read to give the commands the folders left out of
    // the CLI's `PATH`: set (filled as the CLI starts when folders are
    // left out), so a CLI that copies variables from a workspace file
    // (Gemini's `.env`) cannot take them from there.
    for var in [shell::CLI_PATH, shell::COMMAND_PATH] {
        vars.push(env::plain(var, ""));
    }
    // First on the PATH the CLI would have had (the agent's own, else
    // orch's); never an empty entry (the working directory).
    let first = folder.display().to_string();
    let path = match vars
        .iter()
        .rev()
        .find(|v| v.name == "PATH")
        .map(|v| &v.value)
    {
        Some(EnvValue::Plain(p)) => EnvValue::Plain(format!("{first}:{p}")),
        Some(EnvValue::Template(t)) => EnvValue::Template(format!("{first}:{t}")),
        Some(EnvValue::Secret(p)) => EnvValue::Secret(format!("{first}:{p}")),
        Some(EnvValue::PassThrough | EnvValue::PassThroughOrEmpty) | None => {
            match std::env::var_os("PATH") {
                Some(_) => EnvValue::Template(format!("{first}:${{PATH}}")),
                None => EnvValue::Plain(format!("{first}:/usr/local/bin:/usr/bin:/bin")),
            }
        }
    };
    vars.push(crate::agents::invocation::EnvVar {
        name: "PATH".into(),
        value: path,
    });
    let named = |name: &str| {
        vars.iter()
            .rev()
            .find(|v| v.name == name)
            .and_then(|v| match &v.value {
                EnvValue::Plain(p) => Some(PathBuf::from(p)),
                _ => None,
            })
    };
    let commands: Vec<PathBuf> = ["HOME", "TMPDIR", "GIT_DIR"]
        .into_iter()
        .filter_map(named)
        .collect();
    let writes: Vec<String> = policy
        .writable
        .iter()
        .filter(|w| !w.starts_with(dir) || commands.contains(w))
        .map(|w| w.display().to_string())
        .collect();
    let git_dirs: Vec<PathBuf> = adapter(kind)
        .table()
        .git_writes
        .iter()
        .map(|d| dir.join(d))
        .collect();
    let git_writes: Vec<String> = writes
        .iter()
        .cloned()
        .chain(git_dirs.iter().map(|d| d.display().to_string()))
        .collect();
    vars.push(env::plain(crate::confine::shell::WRITES, writes.join("\n")));
    vars.push(env::plain(
        crate::confine::shell::GIT_WRITES,
        git_writes.join("\n"),
    ));
    crate::agents::invocation::Shells {
        folder,
        program,
        git_dirs,
        writable,
    }
}

/// One variable per name, the last one set: what the process gets (its
/// environment is set in order), so that what is shown and stored is what
/// runs.
fn last_of_each_name(env: &mut Vec<crate::agents::invocation::EnvVar>) {
    let mut seen = std::collections::HashSet::new();
    let mut keep: Vec<bool> = env
        .iter()
        .rev()
        .map(|v| seen.insert(v.name.clone()))
        .collect();
    keep.reverse();
    let mut k = keep.into_iter();
    env.retain(|_| k.next().unwrap_or(true));
}

/// Which attempt an invocation is for: its own directory (a fresh
/// [`Context::attempt_dir`] to run it, [`Context::planned_dir`] to show
/// it), and the run and attempt number orch's MCP server records under.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) run_id: &'a str,
    /// From 1.
    pub(crate) attempt: u32,
    /// A judge's rejection of the previous round, for the prompt.
    pub(crate) feedback: Option<&'a str>,
    /// The attempt is a judge's (its context has the workspace's changes).
    pub(crate) judging: bool,
}

/// What previews show for the run id (each run gets its own).
pub(crate) const PREVIEW_RUN: &str = "<run>";
/// What stands for an attempt's random id in a previewed directory.
pub(crate) const PREVIEW_ATTEMPT_ID: &str = "XXXXXXXXXXXXXXXX";

impl<'a> Slot<'a> {
    /// A preview's slot (`explain`, `--dry-run`, `doctor --probe`).
    pub fn preview(dir: &'a Path) -> Slot<'a> {
        Slot {
            dir,
            run_id: PREVIEW_RUN,
            attempt: 1,
            feedback: None,
            judging: false,
        }
    }
}

/// The prompts `agent` gets in `phase` for the attempt `slot`: variables
/// filled, and, for an LLM agent, the system prompt in layers made from
/// the workspace, the project's instructions and earlier runs' learnings.
pub(crate) fn prompts(
    pipeline: &Pipeline,
    phase: &Phase,
    agent: &Agent,
    ctx: &Context,
    slot: &Slot<'_>,
) -> crate::prompt::Prompts {
    let vars = crate::prompt::Vars {
        run_id: slot.run_id,
        inputs: &ctx.inputs,
        feedback: slot.feedback,
    };
    // An LLM agent's system prompt is in layers made from the workspace,
    // the project's instructions and the learnings of earlier runs.
    let (branch, learnings) = if agent.kind.is_llm() {
        (
            ctx.branch(),
            crate::prompt::learnings::conventions(ctx.history(), phase),
        )
    } else {
        (None, Vec::new())
    };
    let workdir = std::fs::canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone());
    let profile_name = phase.profile.as_ref().map(|p| p.name.as_str());
    let instructions = profile_name
        .and_then(|n| ctx.settings.instructions.get(n))
        .or_else(|| ctx.settings.instructions.get("*"))
        .map(String::as_str);
    // The context sections, within the budget (an LLM agent's).
    let sections = if agent.kind.is_llm() {
        let plain = crate::prompt::Prompts::of(pipeline, phase, vars);
        let approved = |p: &str| ctx.approved(p).map(|s| s.text);
        let context = crate::prompt::context::gather(&crate::prompt::context::Sources {
            pipeline,
            phase,
            run_id: slot.run_id,
            history: ctx.history(),
            workdir: &workdir,
            prompt: &plain.user,
            judging: slot.judging,
            now_ms: crate::clock::now_ms(),
            approved: &approved,
        });
        let shares = if slot.judging {
            crate::prompt::budget::JUDGE
        } else {
            crate::prompt::budget::WORKER
        };
        crate::prompt::budget::sections(&context, &shares, ctx.settings.prompt_tokens)
    } else {
        Vec::new()
    };
    crate::prompt::Prompts::with_facts(
        pipeline,
        phase,
        vars,
        crate::prompt::Facts {
            workdir: agent.kind.is_llm().then_some(workdir.as_path()),
            branch,
            run_id: slot.run_id,
            instructions,
            learnings: &learnings,
            sections: &sections,
        },
    )
}

/// The Invocation for `agent` in `phase`, for the attempt `slot`.
pub fn invocation(
    pipeline: &Pipeline,
    phase: &Phase,
    agent: &Agent,
    ctx: &Context,
    slot: &Slot<'_>,
) -> Invocation {
    let dir = slot.dir;
    let resolved = pipeline.resolve(phase, agent);
    let mut reach = Reach::of(pipeline, &resolved);
    reach.after_writer = pipeline.writer_before(phase).map(|(w, _)| w);
    let level = confined_level(pipeline, phase, agent, &resolved);
    let toolset = &resolved.toolset;
    let pass_env = ctx
        .settings
        .agents
        .get(&agent.kind)
        .map(|a| a.pass_env.clone())
        .unwrap_or_else(|| {
            agent
                .kind
                .default_pass_env()
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
    let prompts = prompts(pipeline, phase, agent, ctx, slot);
    let model = model(phase, agent, &ctx.settings);
    let no_flags = Vec::new();
    let req = Request {
        agent,
        program: program(agent, &ctx.settings),
        toolset,
        prompts: &prompts,
        model: model.value.as_deref(),
        mcp_servers: mcp_servers(pipeline, toolset, ctx, slot),
        workdir: ctx.workdir.clone(),
        dir: dir.to_path_buf(),
        pass_env,
        user_home: ctx.home.clone(),
        confined: level.is_some() && ctx.confinement.is_available(),
        flags: agent
            .mode(phase.mode)
            .map(|m| &m.flags)
            .unwrap_or(&no_flags),
        mode: phase.mode,
    };
    // A plain command speaks no MCP: no server, so no marker for it.
    let with_orch =
        agent.kind.is_llm() && req.mcp_servers.iter().any(|s| s.name == ORCH_MCP_SERVER);
    let mut inv = adapter(agent.kind).invocation(&req);
    inv.shown = shown(&req, &inv, ctx);
    inv.prompt_tokens = prompts.tokens();
    if with_orch {
        inv.files.push(marker(ctx, phase, agent, slot));
    }
    inv.enforcement = capability::enforcement(agent.kind, toolset, &reach, &ctx.confinement);
    if agent.kind.is_llm() {
        // The CLI's git reads the repository under a git directory of
        // orch's own: no config an agent planted in `.git` runs in it.
        let git =
            crate::git::agents::AgentGit::plan(&ctx.workdir, ctx.home.as_deref(), dir.join("git"));
        inv.env
            .extend(git.env().into_iter().map(|(k, v)| env::plain(&k, v)));
        inv.git = Some(git);
    }
    if level.is_some() && ctx.confinement.is_available() && inv.inherit_env {
        // A confined command writes its temporary files in its own folder.
        inv.env
            .push(env::plain("TMPDIR", dir.join("tmp").display().to_string()));
    }
    let (confined, own) = level
        .and_then(|level| confinement(ctx, agent.kind, level, &inv, dir))
        .map_or((None, None), |(c, own)| (Some(c), own));
    inv.confinement = confined;
    if let Some(Ok(copy)) = &own {
        inv.program = copy.path().display().to_string();
        if let Some(first) = inv.shown.as_mut().and_then(|s| s.argv.first_mut()) {
            first.clone_from(&inv.program);
        }
    }
    if agent.kind.is_llm()
        && let Some(confinement) = &inv.confinement
    {
        inv.shells = Some(shells(
            ctx,
            agent.kind,
            &confinement.policy,
            &mut inv.env,
            dir,
            slot.run_id,
            own.as_ref(),
        ));
    }
    inv.undumpable = own.and_then(Result::ok).map(std::sync::Arc::new);
    last_of_each_name(&mut inv.env);
    inv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::invocation::EnvVar;

    /// `text` loaded as pipeline file `name`, checked for a machine that
    /// confines as `os` says.
    fn load(name: &str, text: impl Into<String>, os: &Availability) -> crate::pipeline::Loaded {
        crate::pipeline::load_str(
            name,
            text.into(),
            Path::new("."),
            &crate::agents::checks::Checks::new(os),
        )
        .unwrap()
    }

    #[test]
    fn the_last_value_of_a_name_is_the_one_kept() {
        let mut env = vec![
            EnvVar::plain("A", "1"),
            EnvVar::plain("B", "x"),
            EnvVar::plain("A", "2"),
        ];
        last_of_each_name(&mut env);
        assert_eq!(env, vec![EnvVar::plain("B", "x"), EnvVar::plain("A", "2")]);
    }

    #[test]
    fn no_agent_may_read_or_write_the_state_directory() {
        let text = "version = 1\nname = \"d\"\n[agents.lint]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"a\"\nagents = [\"claude\", \"lint\"]\nmode = \"audit\"\nprompt = \"x\"\n[phases.tools]\npermission = \"read-only\"\n[[phases]]\nname = \"b\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"x\"\n[phases.tools]\nmcp = []\n".to_string();
        let os = Availability::Available { abi: 7 };
        let loaded = load("d.toml", text, &os);
        let p = &loaded.pipeline;
        let ctx = Context {
            confinement: os,
            ..Context::new(Settings::default(), PathBuf::from("/w"))
        };
        let state = ctx.state_dir();
        for (ph, a) in p.invocations() {
            let inv = invocation(p, ph, a, &ctx, &Slot::preview(Path::new("/own")));
            let c = inv.confinement.expect("confined");
            assert!(
                !c.policy.writable.iter().any(|w| w.starts_with(&state)),
                "{}/{}: {:?}",
                ph.name,
                a.name,
                c.policy.writable
            );
            assert!(c.policy.hidden.contains(&state), "{:?}", c.policy.hidden);
        }
    }

    #[test]
    fn an_agent_with_orchs_server_gets_the_workspace_marker_it_names() {
        let text = "version = 1\nname = \"d\"\n[[phases]]\nname = \"a\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"x\"\n[[phases]]\nname = \"b\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"x\"\n[phases.tools]\nmcp = []\n".to_string();
        let os = Availability::Unavailable {
            reason: "test".into(),
        };
        let loaded = load("d.toml", text, &os);
        let p = &loaded.pipeline;
        let ctx = Context::new(Settings::default(), PathBuf::from("/w"));
        let slot = Slot {
            dir: Path::new("/own"),
            run_id: "r7",
            attempt: 2,
            feedback: None,
            judging: false,
        };
        let marker = |phase: &str| {
            let ph = p.phases.iter().find(|x| x.name == phase).unwrap();
            let inv = invocation(p, ph, p.agent("claude").unwrap(), &ctx, &slot);
            // The server's command line is in the CLI's MCP config (a file
            // for Claude Code).
            let config: String = inv
                .files
                .iter()
                .filter(|f| !f.path.ends_with("workspace.json"))
                .map(|f| f.content.clone())
                .chain(inv.args.iter().cloned())
                .collect();
            let named = config.contains(r#""relay","/own/orch/orch.sock""#)
                || config.contains(
                    r#""relay",
        "/own/orch/orch.sock""#,
                );
            let file = inv
                .files
                .iter()
                .find(|f| f.path.ends_with("workspace.json"));
            (named, file.cloned())
        };
        let (named, file) = marker("a");
        let file = file.expect("the marker is written");
        assert!(named, "the relay is told where the endpoint is");
        assert_eq!(file.path, Path::new("/own/orch/workspace.json"));
        let v: serde_json::Value = serde_json::from_str(&file.content).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"run": "r7", "phase": "a", "agent": "claude", "attempt": 2, "workspace": "/w"})
        );
        assert_eq!(marker("b"), (false, None), "no orch server, no marker");
        // A plain command speaks no MCP: its attempt gets no marker.
        let text = "version = 1\nname = \"c\"\n[agents.t]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"a\"\nagents = [\"t\"]\n".to_string();
        let loaded = load("c.toml", text, &os);
        let p = &loaded.pipeline;
        let inv = invocation(p, &p.phases[0], p.agent("t").unwrap(), &ctx, &slot);
        assert!(inv.files.is_empty(), "{:?}", inv.files);
    }

    #[test]
    fn every_invocation_sets_each_variable_once() {
        let text = ["claude", "codex", "gemini", "opencode", "copilot"]
            .iter()
            .map(|a| format!("[[phases]]\nname = \"p-{a}\"\nagents = [\"{a}\"]\nprompt = \"x\"\n[phases.tools]\nmcp = [\"mcp__orch__*\"]\n"))
            .fold("version = 1\nname = \"e\"\n".to_string(), |a, p| a + &p);
        let os = Availability::Available { abi: 7 };
        let loaded = load("e.toml", text, &os);
        let p = &loaded.pipeline;
        let ctx = Context::new(Settings::default(), PathBuf::from("/w"));
        for (phase, agent) in p.invocations() {
            let inv = invocation(p, phase, agent, &ctx, &Slot::preview(Path::new("/own")));
            let mut names: Vec<&str> = inv.env.iter().map(|v| v.name.as_str()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "{}: {:?}", agent.name, inv.env);
        }
    }

    /// An MCP server's command reaches each CLI with its secret as written
    /// (an argument, a variable, a file), and is shown redacted in each of
    /// those places; with nothing to redact, nothing is shown otherwise.
    #[test]
    fn a_servers_command_and_its_secret_stay_with_the_server() {
        let secret = "mcp-literal-key-77";
        let text = ["claude", "codex", "gemini", "opencode", "copilot"]
            .iter()
            .map(|a| format!("[[phases]]\nname = \"p-{a}\"\nagents = [\"{a}\"]\nprompt = \"x\"\n[phases.tools]\nmcp = [\"mcp__orch__*\", \"mcp__s__*\"]\n"))
            .fold(
                format!("version = 1\nname = \"e\"\n[mcp_servers.s]\ncommand = [\"s-mcp\", \"--api-key\", \"{secret}\"]\n"),
                |a, p| a + &p,
            );
        let os = Availability::Available { abi: 7 };
        let loaded = load("e.toml", text, &os);
        let p = &loaded.pipeline;
        let ctx = Context::new(Settings::default(), PathBuf::from("/w"));
        for (phase, agent) in p.invocations() {
            let own = Path::new("/own");
            let inv = invocation(p, phase, agent, &ctx, &Slot::preview(own));
            // The CLI gets a relay to orch's endpoint for the server, not
            // the server's command.
            let real: String = inv
                .argv()
                .into_iter()
                .chain(inv.env.iter().filter_map(|v| v.resolve(|_| None)))
                .chain(inv.files.iter().map(|f| f.content.clone()))
                .collect();
            assert!(!real.contains(secret), "{}: {inv:?}", agent.name);
            assert!(real.contains("mcp-s.sock"), "{}: {real}", agent.name);
            // orch starts it, as written.
            let spawns = server_spawns(p, &p.resolve(phase, agent).toolset, &ctx, &inv, own);
            assert_eq!(spawns.len(), 1);
            let crate::mcp::ServerTransport::Stdio { argv, .. } = &spawns[0].1.transport else {
                panic!("a stdio server");
            };
            assert_eq!(argv, &["s-mcp", "--api-key", secret]);
            assert_eq!(spawns[0].0, own.join("orch/mcp-s.sock"));
        }
        let plain = "version = 1\nname = \"e\"\n[mcp_servers.s]\ncommand = [\"s-mcp\", \"--region\", \"eu\"]\n[[phases]]\nname = \"p\"\nagents = [\"opencode\"]\nprompt = \"x\"\n[phases.tools]\nmcp = [\"mcp__s__*\"]\n";
        let loaded = load("e.toml", plain, &os);
        let p = &loaded.pipeline;
        let (phase, agent) = p.invocations().next().unwrap();
        let inv = invocation(p, phase, agent, &ctx, &Slot::preview(Path::new("/own")));
        assert_eq!(inv.shown, None);
    }
}
