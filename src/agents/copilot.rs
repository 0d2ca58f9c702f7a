//! GitHub Copilot CLI (`copilot -p`).
//!
//! `--available-tools` sets what the model sees; with no `--allow-tool`
//! flags, shell, writes and MCP calls are refused, and paths outside the
//! working directory need `--allow-all-paths`, which orch gives only for
//! full access. Tool names depend on the model family, so both families'
//! names are listed. There is no turn limit: orch enforces it.

use serde_json::{Map, Value, json};

use super::adapter::{
    Adapter, PermissionReasons, Probe, Request, not_a_prefix, shell_bound_permission, unique,
};
use super::claude::pretty;
use super::env;
use super::invocation::{Enforced, Enforcement, EnvVar, Invocation, InvocationFile, Stdin};
use super::kind::{CliTable, ORCH_SETS, WIDENS};
use crate::events::Event;
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Permission, ToolSet};

pub(super) struct Copilot;

/// Copilot's names for a canonical tool (Claude-family and GPT-family).
fn tool_names(t: &InternalTool) -> &'static [&'static str] {
    match t {
        InternalTool::Read => &["view"],
        InternalTool::Write => &["create", "apply_patch"],
        InternalTool::Edit => &["edit", "apply_patch"],
        InternalTool::Glob => &["glob"],
        InternalTool::Grep => &["grep", "rg"],
        InternalTool::Bash | InternalTool::BashPattern(_) => &["bash"],
        InternalTool::WebFetch => &["web_fetch"],
        InternalTool::WebSearch => &[],
        InternalTool::Agent => &["task"],
        InternalTool::TodoWrite => &["update_todo"],
        InternalTool::NotebookEdit => &[],
    }
}

/// `Bash(git status *)` as a Copilot shell rule, `shell(git status:*)`.
fn shell_rule(pattern: &str) -> String {
    match pattern
        .strip_suffix(" *")
        .or_else(|| pattern.strip_suffix('*'))
    {
        Some(prefix) => format!("shell({}:*)", prefix.trim_end()),
        None => format!("shell({pattern})"),
    }
}

/// What orch knows of Copilot CLI's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: Some("@github/copilot"),
    credentials: &["COPILOT_GITHUB_TOKEN"],
    default_pass_env: &[
        "COPILOT_GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "COPILOT_OFFLINE",
        "COPILOT_PROVIDER_BASE_URL",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_TYPE",
        "COPILOT_MODEL",
    ],
    controlled_flags: &[
        ("--available-tools", "internal"),
        ("--excluded-tools", "internal"),
        ("--allow-tool", "internal"),
        ("--deny-tool", "internal"),
        ("--allow-all-tools", "permission"),
        ("--allow-all", "permission"),
        ("--yolo", "permission"),
        ("--allow-all-paths", "permission"),
        ("--add-dir", "permission"),
        ("--additional-mcp-config", "mcp"),
        ("--disable-builtin-mcps", "mcp"),
        ("--agent", "permission"),
        ("--allow-all-urls", "permission"),
        // Trusting the folder loads the repository's hooks and MCP servers.
        ("--trust-folder", "permission"),
        // Other folders, plugins, extra MCP servers and tools, modes
        // that approve on their own, remote sessions, sharing.
        ("-C", "permission"),
        ("--plugin-dir", "internal"),
        ("--extension-sdk-path", "internal"),
        ("--enable-all-github-mcp-tools", "mcp"),
        ("--add-github-mcp-toolset", "mcp"),
        ("--add-github-mcp-tool", "mcp"),
        ("--mcp-github-auth", "mcp"),
        ("--enable-mcp-server", "mcp"),
        ("--allow-all-mcp-server-instructions", "mcp"),
        ("--allow-url", "permission"),
        ("--mode", "permission"),
        ("--autopilot", "permission"),
        ("--plan", "permission"),
        ("--experimental", "permission"),
        ("--assisted-approval", "permission"),
        ("--fleet", "permission"),
        ("--bash-env", "permission"),
        ("--remote", "permission"),
        ("--remote-export", "permission"),
        ("--environment-host", "permission"),
        ("--environment-compute-id", "permission"),
        ("--connect", "permission"),
        ("--share", "permission"),
        ("--share-gist", "permission"),
        // Hidden options: another config directory or package
        // version, its own sandbox, worktrees and remote or server
        // modes (`--ahp-*` included), resumed sessions.
        ("--config-dir", "permission"),
        ("--prefer-version", "permission"),
        ("--sandbox", "permission"),
        ("--no-sandbox", "permission"),
        ("--worktree", "permission"),
        ("--cloud", "permission"),
        ("-r", "permission"),
        ("--resume", "permission"),
        ("--continue", "permission"),
        ("--session-id", "permission"),
        ("--new-session-id", "permission"),
        ("--server", "output"),
        ("--ui-server", "output"),
        ("--stdio", "output"),
        ("--port", "output"),
        ("--managed-server", "output"),
        ("--embedded-host", "output"),
        ("--ahp*", "output"),
        ("--relay", "output"),
        ("--environment-id", "permission"),
        ("--disable-mcp-server", "mcp"),
        ("--auth-token-env", "permission"),
        ("--additional-content-exclusion-policies", "permission"),
        ("--attachment", "permission"),
        ("--stream", "output"),
        ("--acp", "output"),
        ("--output-format", "output"),
        ("-p", "output"),
        ("--prompt", "output"),
        ("--model", "model"),
    ],
    controlled_env: &[
        ("HOME", ORCH_SETS),
        ("TMPDIR", ORCH_SETS),
        ("COPILOT_HOME", ORCH_SETS),
        ("COPILOT_BASH_PATH", ORCH_SETS),
        ("COPILOT_AUTO_UPDATE", ORCH_SETS),
        ("COPILOT_CACHE_HOME", ORCH_SETS),
        ("XDG_CONFIG_HOME", ORCH_SETS),
        ("XDG_STATE_HOME", ORCH_SETS),
        ("XDG_CACHE_HOME", ORCH_SETS),
        ("COPILOT_ALLOW_ALL", WIDENS),
        ("COPILOT_ASSISTED_APPROVAL", WIDENS),
        ("COPILOT_PLAN_THEN_AUTOPILOT", WIDENS),
        ("COPILOT_CUSTOM_INSTRUCTIONS_DIRS", WIDENS),
        ("COPILOT_ENABLE_BUILTIN_GITHUB_MCP", WIDENS),
        ("COPILOT_DYNAMIC_RETRIEVAL_*", WIDENS),
        ("COPILOT_MCP_*", WIDENS),
        ("COPILOT_HOOK_*", WIDENS),
        ("COPILOT_PLUGIN_*", WIDENS),
        ("COPILOT_BROWSER_*", WIDENS),
        ("COPILOT_PROVIDERS_CONFIG", WIDENS),
        ("COPILOT_CLI_*", WIDENS),
        ("COPILOT_EXP_*", WIDENS),
        ("COPILOT_E2E_*", WIDENS),
        ("COPILOT_DETACHED_*", WIDENS),
        ("GITHUB_COPILOT_PROMPT_MODE_*", WIDENS),
        ("COPILOT_PKG_CACHE_HOME", WIDENS),
        ("COPILOT_SKILLS_DIRS", WIDENS),
        ("COPILOT_PROVIDER_API_KEY_COMMAND", WIDENS),
    ],
    controlled_config_prefixes: &[],
    config_option: None,
    controlled_words: &[],
    yargs: false,
    confines_writes: false,
    shell_vars: &["SHELL", "COPILOT_BASH_PATH"],
    git_writes: &[],
    code_from: &["COPILOT_CACHE_HOME", "COPILOT_PKG_CACHE_HOME"],
};

impl Adapter for Copilot {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Copilot
    }

    fn enforcement(&self, ts: &ToolSet) -> Enforcement {
        let permission = shell_bound_permission(
            ts,
            PermissionReasons {
                read_only: "no --allow-tool for writes or the shell, and `write` is denied: such calls are refused",
                shell_escapes: "an allowed shell can write outside the workspace; use Bash(<pattern>) rules",
                workspace_write: "writes are allowed inside the working directory only (no --allow-all-paths)",
                full_access: "--allow-all: nothing is withheld",
            },
        );
        Enforcement {
            internal: match not_a_prefix(ts) {
                Some(p) => Enforced::none(format!(
                    "copilot's shell rules match a command prefix (`shell(git log:*)`): `Bash({p})` is not one; write a prefix ending in its only `*`, like `Bash(git log *)`"
                )),
                None => Enforced::cli("--available-tools is the set of tools the model sees"),
            },
            mcp: Enforced::cli(
                "--available-tools lists only the granted MCP tools; calls need --allow-tool per tool",
            ),
            permission,
            max_turns: Enforced::orch("copilot has no turn limit; orch counts turns and stops it"),
        }
    }

    fn supports(&self, tool: &InternalTool) -> bool {
        !tool_names(tool).is_empty()
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let ts = req.toolset;
        let available: Vec<&str> = unique(
            ts.internal
                .iter()
                .flat_map(|t| tool_names(t).iter().copied()),
        );
        let mut args: Vec<String> = vec![
            "--output-format".into(),
            "json".into(),
            "--no-auto-update".into(),
            "--no-custom-instructions".into(),
            "--disable-builtin-mcps".into(),
        ];
        if let Some(model) = req.model {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        // MCP tools are in the same allow-list: `server-tool`, or `server`
        // for every tool of a server.
        let mcp_available: Vec<String> = ts
            .mcp
            .iter()
            .map(|m| match &m.tool {
                Some(tool) => format!("{}-{tool}", m.server),
                None => m.server.clone(),
            })
            .collect();
        args.push("--available-tools".into());
        args.extend(available.iter().map(|s| s.to_string()));
        args.extend(mcp_available);
        let mut allow: Vec<String> = Vec::new();
        match ts.permission {
            Permission::FullAccess => args.push("--allow-all".into()),
            level => {
                let writes = ts
                    .internal
                    .iter()
                    .any(|t| matches!(t, InternalTool::Write | InternalTool::Edit));
                if level == Permission::WorkspaceWrite && writes {
                    allow.push("write".into());
                }
                for t in ts.internal.iter() {
                    match t {
                        InternalTool::Bash if level == Permission::WorkspaceWrite => {
                            allow.push("shell".into())
                        }
                        InternalTool::BashPattern(p) => allow.push(shell_rule(p)),
                        _ => {}
                    }
                }
                for m in ts.mcp.iter() {
                    allow.push(match &m.tool {
                        Some(tool) => format!("{}({tool})", m.server),
                        None => m.server.clone(),
                    });
                }
                if level == Permission::ReadOnly {
                    args.extend(["--deny-tool".into(), "write".into()]);
                }
            }
        }
        for a in &allow {
            args.push(format!("--allow-tool={a}"));
        }

        let mut files = Vec::new();
        if !req.mcp_servers.is_empty() {
            let mut servers = Map::new();
            for s in &req.mcp_servers {
                let mut entry = match &s.remote {
                    Some(r) => json!({"type": "http", "url": r.url,
                                      "headers": r.headers_json(super::env::EnvRef::Dollar)}),
                    None => {
                        let mut entry = s.json_entry();
                        entry["type"] = "local".into();
                        entry
                    }
                };
                entry["tools"] = json!(s.tools.clone().unwrap_or_else(|| vec!["*".into()]));
                servers.insert(s.name.clone(), entry);
            }
            let path = req.file_in_dir("mcp.json");
            args.push("--additional-mcp-config".into());
            args.push(format!("@{}", path.display()));
            files.push(InvocationFile {
                path,
                content: pretty(&json!({ "mcpServers": servers })),
            });
        }
        args.extend(req.flags.iter().cloned());
        // No way to give a system prompt for one run: both in one text.
        let prompt = req.prompts.joined();
        args.extend(["-p".into(), prompt]);

        let mut environment = env::base(req);
        environment.extend(env::own_dirs(req, &[("COPILOT_HOME", "copilot")]));
        // Never swap in a newer cached copilot than the one installed.
        environment.push(env::plain("COPILOT_AUTO_UPDATE", "false"));
        // Copilot unpacks ~235 MB into its cache on first run; share it.
        environment.push(EnvVar::pass_through("COPILOT_CACHE_HOME"));
        // Its cache (where it unpacks its package when COPILOT_CACHE_HOME
        // is not set, and runs its ripgrep from) is its own: the model's
        // commands may write the home, not this.
        environment.extend(env::own_dirs(
            req,
            &[
                ("XDG_CONFIG_HOME", "config"),
                ("XDG_STATE_HOME", "state"),
                ("XDG_CACHE_HOME", "cache"),
            ],
        ));

        req.cli_invocation(args, environment, Stdin::Null, files, self.enforcement(ts))
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        let s = |v: &Value| v.as_str().map(str::to_string);
        let data = &v["data"];
        match v["type"].as_str() {
            Some("session.start") | Some("session.tools_updated") => vec![Event::SessionStart {
                session_id: s(&data["sessionId"]),
                model: s(&data["selectedModel"]).or_else(|| s(&data["model"])),
                tools: Vec::new(),
                mcp_servers: Vec::new(),
                permission_mode: None,
            }],
            Some("assistant.message") => {
                let mut out = Vec::new();
                if let Some(text) = s(&data["content"]).filter(|t| !t.is_empty()) {
                    out.push(Event::AssistantText { text });
                }
                out
            }
            Some("tool.execution_start") => vec![Event::ToolCall {
                id: s(&data["toolCallId"]),
                name: s(&data["toolName"]).unwrap_or_default(),
                input: data["arguments"].clone(),
            }],
            Some("tool.execution_complete") => {
                let ok = data["success"].as_bool().unwrap_or(data["error"].is_null());
                let output = s(&data["result"]["content"])
                    .or_else(|| s(&data["error"]["message"]))
                    .unwrap_or_default();
                let mut out = vec![Event::ToolResult {
                    id: s(&data["toolCallId"]),
                    is_error: !ok,
                    output: output.clone(),
                }];
                if !ok && (output.contains("denied") || output.contains("Permission")) {
                    out.push(Event::PermissionDenied {
                        tool: s(&data["toolName"]).unwrap_or_default(),
                        reason: Some(output),
                    });
                }
                out
            }
            Some("assistant.turn_end") => vec![Event::TurnEnd],
            Some("result") => vec![Event::Result {
                is_error: v["exitCode"].as_i64().is_some_and(|c| c != 0),
                subtype: None,
                text: None,
                num_turns: None,
                session_id: s(&v["sessionId"]),
                tokens_in: None,
                tokens_out: None,
                cost_usd: None,
            }],
            Some("session.error") | Some("error") => {
                let message = s(&data["message"])
                    .or_else(|| s(&v["message"]))
                    .unwrap_or_default();
                if data["errorType"] == "rate_limit" || data["statusCode"] == 429 {
                    vec![Event::rate_limit_error(message, None)]
                } else {
                    vec![Event::error(message)]
                }
            }
            _ => Vec::new(),
        }
    }

    fn weakened(&self, _line: &str) -> Option<&'static str> {
        None
    }

    fn probe(&self, inv: &Invocation) -> Probe {
        // Appending --help makes copilot check the argv and exit: 0 if valid.
        let mut args = inv.args.clone();
        args.push("--help".into());
        Probe {
            args,
            env: vec![("COPILOT_OFFLINE".into(), "true".into())],
            verdict: |code, _stdout, stderr| {
                if code == Some(0) {
                    Ok(())
                } else {
                    Err(super::adapter::first_message(stderr))
                }
            },
        }
    }
}
