//! Claude Code (`claude -p`).
//!
//! Restriction is three things together, as the real CLI showed
//! (docs/enforcement.md): `--tools`
//! sets what the model sees, `--disallowedTools` removes every writing tool
//! the ToolSet does not grant, and the permission mode refuses anything not
//! explicitly allowed (`dontAsk` for read-only, `acceptEdits` for
//! workspace-write). `--allowedTools` only auto-approves.

use serde_json::{Value, json};

use super::adapter::{Adapter, PermissionReasons, Probe, Request, shell_bound_permission, unique};
use super::env;
use super::invocation::{Enforced, Enforcement, Invocation, InvocationFile, Stdin};
use super::kind::{CliTable, ORCH_SETS, WIDENS};
use crate::events::{Event, RateLimit, looks_rate_limited};
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Permission, ToolSet};

pub(super) struct Claude;

/// Claude's name for a canonical tool; `Bash(<pattern>)` shows as `Bash`.
fn tool_name(t: &InternalTool) -> &'static str {
    match t {
        InternalTool::Read => "Read",
        InternalTool::Write => "Write",
        InternalTool::Edit => "Edit",
        InternalTool::Glob => "Glob",
        InternalTool::Grep => "Grep",
        InternalTool::Bash | InternalTool::BashPattern(_) => "Bash",
        InternalTool::WebFetch => "WebFetch",
        InternalTool::WebSearch => "WebSearch",
        InternalTool::Agent => "Task",
        InternalTool::TodoWrite => "TodoWrite",
        InternalTool::NotebookEdit => "NotebookEdit",
    }
}

/// Built-in tools that change things; each one the ToolSet does not grant
/// is denied outright.
const WRITING_TOOLS: &[&str] = &["Write", "Edit", "NotebookEdit", "Bash"];

/// What orch knows of Claude Code's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: Some("@anthropic-ai/claude-code"),
    credentials: &["ANTHROPIC_API_KEY"],
    default_pass_env: &[
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ],
    controlled_flags: &[
        ("--tools", "internal"),
        ("--allowedTools", "internal"),
        ("--allowed-tools", "internal"),
        ("--disallowedTools", "internal"),
        ("--disallowed-tools", "internal"),
        ("--permission-mode", "permission"),
        ("--dangerously-skip-permissions", "permission"),
        ("--allow-dangerously-skip-permissions", "permission"),
        ("--max-turns", "max_turns"),
        ("--mcp-config", "mcp"),
        ("--strict-mcp-config", "mcp"),
        ("--settings", "permission"),
        ("--add-dir", "permission"),
        ("--setting-sources", "permission"),
        ("--bare", "internal"),
        // Sub-agents, plugins and settings of their own, and ways to
        // approve or reach beyond the ToolSet (from 2.1.197's own
        // option table, hidden options included).
        ("--agent", "internal"),
        ("--agents", "internal"),
        ("--plugin-dir", "internal"),
        ("--plugin-dir-no-mcp", "internal"),
        ("--plugin-url", "internal"),
        ("--init", "internal"),
        ("--init-only", "internal"),
        ("--permission-prompt-tool", "permission"),
        ("--managed-settings", "permission"),
        ("--sandbox", "permission"),
        ("--no-sandbox", "permission"),
        ("--trusted", "permission"),
        ("--dangerously-load-development-channels", "permission"),
        ("--dangerously-allow-browser-network-access", "permission"),
        ("--remote", "permission"),
        ("--remote-control", "permission"),
        ("--teleport", "permission"),
        ("--worktree", "permission"),
        ("-w", "permission"),
        ("--tmux", "permission"),
        ("--bg", "permission"),
        ("--background", "permission"),
        ("--channels", "mcp"),
        ("--chrome", "mcp"),
        ("--claude-in-chrome-mcp", "mcp"),
        ("--computer-use-mcp", "mcp"),
        ("--ide", "mcp"),
        ("--sdk-url", "output"),
        ("--maintenance", "internal"),
        ("--rc", "permission"),
        ("--cloud", "permission"),
        ("--handle-uri", "permission"),
        ("--safe-mode", "mcp"),
        ("--enable-auto-mode", "permission"),
        ("--plan-mode-required", "permission"),
        ("--teammate-mode", "permission"),
        ("--agent-type", "internal"),
        ("--agent-id", "internal"),
        ("--agent-name", "internal"),
        ("--team-name", "internal"),
        ("--rewind-files", "permission"),
        ("--include-partial-messages", "output"),
        ("--include-hook-events", "output"),
        ("--replay-user-messages", "output"),
        ("--session-mirror", "output"),
        ("--json-schema", "output"),
        ("-p", "output"),
        ("--print", "output"),
        ("--output-format", "output"),
        ("--input-format", "output"),
        ("--model", "model"),
    ],
    controlled_env: &[
        ("HOME", ORCH_SETS),
        ("TMPDIR", ORCH_SETS),
        ("CLAUDE_CONFIG_DIR", ORCH_SETS),
        ("DISABLE_AUTOUPDATER", ORCH_SETS),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", ORCH_SETS),
        ("XDG_CONFIG_HOME", WIDENS),
        ("IS_SANDBOX", WIDENS),
        ("ANTHROPIC_CONFIG_DIR", WIDENS),
        ("CLAUDE_CODE_MANAGED_SETTINGS_PATH", WIDENS),
        ("CLAUDE_CODE_REMOTE_SETTINGS*", WIDENS),
        ("CLAUDE_CODE_MOCK_REMOTE_SETTINGS", WIDENS),
        ("CLAUDE_BG_SESSION_PERMISSION_RULES*", WIDENS),
        ("CLAUDE_CODE_AUTO_MODE_EXTERNAL_PERMISSIONS", WIDENS),
        ("CLAUDE_CHROME_PERMISSION_MODE", WIDENS),
        ("CLAUDE_CODE_PLUGIN_*", WIDENS),
        ("CLAUDE_CODE_SYNC_PLUGIN*", WIDENS),
        ("CLAUDE_CODE_USE_COWORK_PLUGINS", WIDENS),
        ("CLAUDE_CODE_ENABLE_BACKGROUND_PLUGIN_REFRESH", WIDENS),
        ("CLAUDE_PLUGIN_*", WIDENS),
        ("CLAUDE_CODE_SHELL", ORCH_SETS),
        ("CLAUDE_CODE_SHELL_PREFIX", WIDENS),
        ("CLAUDE_CODE_GIT_BASH_PATH", WIDENS),
        ("CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD", WIDENS),
        ("CLAUDE_CODE_MCP_*", WIDENS),
        ("CLAUDE_CODE_ENABLE_DESIGN_MCP", WIDENS),
        ("CLAUDE_CODE_TERMINAL_MCP_TOOLS", WIDENS),
        ("CLAUDE_IN_CHROME_MCP_SERVER_NAME", WIDENS),
        ("CLAUDE_CODE_USE_POWERSHELL_TOOL", WIDENS),
        ("CLAUDE_CODE_EXPERIMENTAL_*", WIDENS),
        ("CLAUDE_SECURESTORAGE_CONFIG_DIR", WIDENS),
        ("CLAUDE_CODE_SANDBOXED", WIDENS),
        ("CLAUDE_CODE_FORCE_SANDBOX", WIDENS),
        ("CLAUDE_AGENT*", WIDENS),
        ("CLAUDE_CODE_AGENT*", WIDENS),
        ("CLAUDE_PROJECT_DIR", WIDENS),
        ("CLAUDE_CODE_BUBBLEWRAP", WIDENS),
        ("CLAUDE_CODE_SIMPLE", WIDENS),
        ("CLAUDE_CODE_SAFE_MODE", WIDENS),
        ("CLAUDE_CODE_SESSION_KIND", WIDENS),
        ("CLAUDE_ENV_FILE", WIDENS),
    ],
    controlled_config_prefixes: &[],
    config_option: None,
    controlled_words: &["cc://*", "cc+unix://*"],
    yargs: false,
    confines_writes: false,
    shell_vars: &["SHELL", "CLAUDE_CODE_SHELL"],
    git_writes: &[],
    code_from: &[],
};

impl Adapter for Claude {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Claude
    }

    fn enforcement(&self, ts: &ToolSet) -> Enforcement {
        let permission = shell_bound_permission(
            ts,
            PermissionReasons {
                read_only: "dontAsk refuses every tool not allowed; no writing tool is offered",
                shell_escapes: "writes are allowed inside the workspace only (Write(./**)), but unrestricted Bash can write anywhere; use Bash(<pattern>) rules",
                workspace_write: "dontAsk with Write(./**) and Edit(./**): writes only inside the workspace; Bash runs only the allowed patterns",
                full_access: "dontAsk with every granted tool allowed, anywhere",
            },
        );
        Enforcement {
            internal: Enforced::cli(
                "--tools sets the built-in tools the model sees; --disallowedTools removes the writing ones not granted",
            ),
            mcp: Enforced::cli(
                "--strict-mcp-config loads only orch's servers; tools not in --allowedTools are refused",
            ),
            permission,
            max_turns: Enforced::cli("--max-turns stops the session at the limit"),
        }
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let ts = req.toolset;
        let tools: Vec<&str> = unique(ts.internal.iter().map(tool_name));
        let mut disallowed: Vec<&str> = WRITING_TOOLS
            .iter()
            .copied()
            .filter(|w| !tools.contains(w))
            .collect();
        if ts.permission == Permission::ReadOnly {
            // Defence in depth: validation already refused writers here.
            disallowed = unique(
                disallowed
                    .into_iter()
                    .chain(["Write", "Edit", "NotebookEdit"]),
            );
        }
        // Auto-approve exactly what the ToolSet grants; everything else is
        // refused by the permission mode.
        let mut allowed: Vec<String> = Vec::new();
        for t in ts.internal.iter() {
            match t {
                InternalTool::BashPattern(p) => allowed.push(format!("Bash({p})")),
                InternalTool::Write | InternalTool::Edit | InternalTool::NotebookEdit
                    if ts.permission == Permission::ReadOnly => {}
                // Under workspace-write, file writes are allowed inside the
                // working directory only (gitignore-style path rules).
                InternalTool::Write | InternalTool::Edit | InternalTool::NotebookEdit
                    if ts.permission == Permission::WorkspaceWrite =>
                {
                    allowed.push(format!("{}(./**)", tool_name(t)))
                }
                other => allowed.push(tool_name(other).to_string()),
            }
        }
        let mut allowed = unique(allowed);
        for m in ts.mcp.iter() {
            allowed.push(m.to_string());
        }
        // dontAsk at every level: only what the allow rules name runs, so
        // the ToolSet is the whole grant (acceptEdits let writes outside the
        // workspace and unlisted shell commands through; bypassPermissions
        // let every MCP tool through).
        let mode = "dontAsk";

        let mcp_path = req.file_in_dir("mcp.json");
        let mut servers = serde_json::Map::new();
        for s in &req.mcp_servers {
            let entry = match &s.remote {
                Some(r) => json!({"type": "http", "url": r.url,
                                  "headers": r.headers_json(super::env::EnvRef::Dollar)}),
                None => {
                    let mut entry = s.json_entry();
                    entry["type"] = "stdio".into();
                    entry
                }
            };
            servers.insert(s.name.clone(), entry);
        }
        let mut files = vec![InvocationFile {
            path: mcp_path.clone(),
            content: pretty(&json!({ "mcpServers": servers })),
        }];

        let mut args: Vec<String> = vec![
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            // Only orch's (empty) user settings: a repo's .claude/settings.json
            // must not widen what the ToolSet grants.
            "--setting-sources".into(),
            "user".into(),
        ];
        if let Some(model) = req.model {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        args.extend(["--tools".into(), tools.join(",")]);
        if !disallowed.is_empty() {
            args.extend(["--disallowedTools".into(), disallowed.join(",")]);
        }
        if !allowed.is_empty() {
            args.extend(["--allowedTools".into(), allowed.join(",")]);
        }
        args.extend(["--permission-mode".into(), mode.into()]);
        args.extend(["--max-turns".into(), ts.max_turns.to_string()]);
        args.extend([
            "--mcp-config".into(),
            mcp_path.display().to_string(),
            "--strict-mcp-config".into(),
        ]);
        if let Some(system) = &req.prompts.system {
            let path = req.file_in_dir("system-prompt.md");
            args.extend([
                "--append-system-prompt-file".into(),
                path.display().to_string(),
            ]);
            files.push(InvocationFile {
                path,
                content: system.to_string(),
            });
        }
        args.extend(req.flags.iter().cloned());

        let mut environment = env::base(req);
        environment.extend(env::own_dirs(req, &[("CLAUDE_CONFIG_DIR", "claude")]));
        environment.push(env::plain("DISABLE_AUTOUPDATER", "1"));
        environment.push(env::plain("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"));

        req.cli_invocation(
            args,
            environment,
            Stdin::Text(req.prompts.user.clone()),
            files,
            self.enforcement(ts),
        )
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        let s = |v: &Value| v.as_str().map(str::to_string);
        match v["type"].as_str() {
            Some("system") if v["subtype"] == "init" => vec![Event::SessionStart {
                session_id: s(&v["session_id"]),
                model: s(&v["model"]),
                tools: strings(&v["tools"]),
                mcp_servers: v["mcp_servers"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|m| s(&m["name"])).collect())
                    .unwrap_or_default(),
                permission_mode: s(&v["permissionMode"]),
            }],
            Some("assistant") => {
                let mut out = Vec::new();
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") => out.push(Event::AssistantText {
                            text: s(&block["text"]).unwrap_or_default(),
                        }),
                        Some("tool_use") => out.push(Event::ToolCall {
                            id: s(&block["id"]),
                            name: s(&block["name"]).unwrap_or_default(),
                            input: block["input"].clone(),
                        }),
                        _ => {}
                    }
                }
                out
            }
            Some("user") => {
                let mut out = Vec::new();
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        out.push(Event::ToolResult {
                            id: s(&block["tool_use_id"]),
                            is_error: block["is_error"].as_bool().unwrap_or(false),
                            output: text_of(&block["content"]),
                        });
                    }
                }
                if !out.is_empty() {
                    out.push(Event::TurnEnd);
                }
                out
            }
            // A subscription limit: when it lifts, exactly (the result's
            // text that follows gives it in minutes, in the local zone).
            // (Not while Claude goes on on overage: the session continues.)
            Some("rate_limit_event")
                if v["rate_limit_info"]["status"] == "rejected"
                    && v["rate_limit_info"]["isUsingOverage"] != true
                    && v["rate_limit_info"]["overageStatus"] != "allowed" =>
            {
                let info = &v["rate_limit_info"];
                let which = s(&info["rateLimitType"]).unwrap_or_else(|| "usage".into());
                let reset = info["resetsAt"]
                    .as_u64()
                    .and_then(|at| at.checked_mul(1000))
                    .map(|unix_ms| RateLimit::At { unix_ms });
                vec![Event::rate_limit_error(
                    format!("rate limit reached ({which})"),
                    reset,
                )]
            }
            Some("result") => {
                let mut out: Vec<Event> = v["permission_denials"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| Event::PermissionDenied {
                        tool: s(&d["tool_name"]).unwrap_or_default(),
                        reason: None,
                    })
                    .collect();
                let is_error = v["is_error"].as_bool().unwrap_or(false);
                let text = s(&v["result"]);
                if v["subtype"] == "error_max_turns" {
                    // The bare subtype is all Claude says.
                    out.push(Event::error(
                        "turn limit reached (enforced by claude)".into(),
                    ));
                } else if is_error && let Some(t) = &text {
                    if v["api_error_status"] == 429 {
                        out.push(Event::rate_limit_error(t.clone(), None));
                    } else if looks_rate_limited(t) {
                        out.push(Event::error(t.clone()));
                    }
                }
                out.push(Event::Result {
                    is_error,
                    subtype: s(&v["subtype"]),
                    text,
                    num_turns: v["num_turns"].as_u64().map(|n| n as u32),
                    session_id: s(&v["session_id"]),
                    tokens_in: v["usage"]["input_tokens"].as_u64(),
                    tokens_out: v["usage"]["output_tokens"].as_u64(),
                    cost_usd: v["total_cost_usd"].as_f64(),
                });
                out
            }
            _ => Vec::new(),
        }
    }

    fn weakened(&self, line: &str) -> Option<&'static str> {
        line.contains("Ignoring --allowedTools rule")
            .then_some("claude ignored an --allowedTools rule")
            .or_else(|| {
                line.contains("Ignoring --disallowedTools rule")
                    .then_some("claude ignored a --disallowedTools rule")
            })
    }

    fn probe(&self, inv: &Invocation) -> Probe {
        Probe {
            args: inv.args.clone(),
            // No credentials and a closed loopback endpoint: nothing leaves
            // the machine, and an accepted argv still prints system/init.
            env: vec![
                ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
                ("ANTHROPIC_API_KEY".into(), String::new()),
                ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
            ],
            verdict: |_, stdout, stderr| {
                let first = stdout.lines().next().unwrap_or("");
                let init = serde_json::from_str::<Value>(first)
                    .is_ok_and(|v| v["type"] == "system" && v["subtype"] == "init");
                if init {
                    Ok(())
                } else {
                    Err(super::adapter::first_message(stderr))
                }
            },
        }
    }
}

pub(super) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Text of a tool result's content (a string or a list of text blocks).
pub(super) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub(super) fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_that_say_why_the_run_failed() {
        // The turn limit: Claude gives only the subtype.
        let events = Claude.parse_line(
            r#"{"type":"result","subtype":"error_max_turns","is_error":false,"num_turns":3,"session_id":"s"}"#,
        );
        assert!(matches!(
            &events[0],
            Event::Error { message, rate_limit: None } if message == "turn limit reached (enforced by claude)"
        ));
        // A 429 is a rate limit whatever the text says.
        let events = Claude.parse_line(
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: Request rejected"}"#,
        );
        assert!(matches!(
            &events[0],
            Event::Error {
                rate_limit: Some(RateLimit::Unknown),
                ..
            }
        ));
        // A subscription limit lifts at resetsAt.
        let events = Claude.parse_line(
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795318713,"rateLimitType":"five_hour"}}"#,
        );
        assert!(matches!(
            &events[0],
            Event::Error { message, rate_limit: Some(RateLimit::At { unix_ms: 1_795_318_713_000 }) }
                if message == "rate limit reached (five_hour)"
        ));
        // An allowed one is not an error.
        assert!(
            Claude
                .parse_line(r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}"#)
                .is_empty()
        );
    }
}
