//! Gemini CLI (`gemini -p`).
//!
//! Per invocation, `GEMINI_CLI_HOME` points at orch's own settings
//! (`tools.core` allow-list, MCP servers with `includeTools`, the turn limit)
//! and `--policy` at orch's own policy file; the approval mode follows the
//! permission. Gemini keeps running when its policy or settings are broken
//! and only says so on stderr: those lines fail the attempt.

use serde_json::{Value, json};

use super::adapter::{
    Adapter, PermissionReasons, Probe, Request, not_a_prefix, shell_bound_permission, unique,
};
use super::claude::pretty;
use super::env;
use super::invocation::{
    Enforced, Enforcement, EnvValue, EnvVar, Invocation, InvocationFile, Stdin,
};
use super::kind::{CliTable, ORCH_SETS, WIDENS};
use crate::events::Event;
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Mode, Permission, ToolSet};

pub(super) struct Gemini;

/// Gemini's names for a canonical tool.
fn tool_names(t: &InternalTool) -> Vec<String> {
    let names: &[&str] = match t {
        InternalTool::Read => &["read_file", "read_many_files", "list_directory"],
        InternalTool::Write => &["write_file"],
        InternalTool::Edit => &["replace"],
        InternalTool::Glob => &["glob", "list_directory"],
        InternalTool::Grep => &["grep_search"],
        InternalTool::Bash => &["run_shell_command"],
        InternalTool::BashPattern(p) => return vec![format!("run_shell_command({p})")],
        InternalTool::WebFetch => &["web_fetch"],
        InternalTool::WebSearch => &["google_web_search"],
        InternalTool::Agent => &["invoke_agent"],
        InternalTool::TodoWrite => &["write_todos"],
        InternalTool::NotebookEdit => &[],
    };
    names.iter().map(|s| s.to_string()).collect()
}

/// A `run_shell_command` prefix for a `Bash(<pattern>)` rule: the pattern up
/// to its first wildcard.
fn command_prefix(pattern: &str) -> String {
    pattern
        .split('*')
        .next()
        .unwrap_or("")
        .trim_end()
        .to_string()
}

/// Variables Gemini CLI would take from a `.env` of the workspace
/// (`.gemini/.env` or `.env` in its working folder or one above it: it
/// copies each one it lacks, whatever its flags say) that make it run a
/// program, leave orch's confinement, send its requests (and its key)
/// elsewhere, or replace what orch tells it. orch sets each one (to the
/// value that means "off", empty for most) unless the agent's `env` or
/// `pass_env` gives it, so no such file can.
const PINNED_AGAINST_DOTENV: &[(&str, &str)] = &[
    // A container or sandbox of Gemini's own, which a daemon outside the
    // confinement would start.
    ("GEMINI_SANDBOX", ""),
    ("GEMINI_SANDBOX_IMAGE", ""),
    ("GEMINI_SANDBOX_PROXY_COMMAND", ""),
    ("SANDBOX", ""),
    ("SANDBOX_ENV", ""),
    ("SANDBOX_FLAGS", ""),
    ("SANDBOX_MOUNTS", ""),
    ("SANDBOX_PORTS", ""),
    ("SANDBOX_SET_UID_GID", ""),
    ("SEATBELT_PROFILE", ""),
    ("BUILD_SANDBOX", ""),
    // Programs it starts: an IDE companion, the ripgrep of its search
    // (`--pre` in a config file), an auth executable, an editor.
    ("GEMINI_CLI_IDE_SERVER_STDIO_COMMAND", ""),
    ("GEMINI_CLI_IDE_SERVER_STDIO_ARGS", ""),
    ("GEMINI_CLI_IDE_SERVER_PORT", ""),
    ("GEMINI_CLI_IDE_WORKSPACE_PATH", ""),
    ("GEMINI_CLI_IDE_AUTH_TOKEN", ""),
    ("GEMINI_CLI_IDE_PID", ""),
    ("RIPGREP_CONFIG_PATH", ""),
    ("GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES", ""),
    ("GOOGLE_APPLICATION_CREDENTIALS", ""),
    ("EDITOR", ""),
    ("VISUAL", ""),
    ("BROWSER", ""),
    // Its settings, trust and rules (with every exact name of
    // `controlled_env`, added below).
    ("GEMINI_CLI_TRUST_WORKSPACE", ""),
    // Debug output (what it read, into the record) and its log files.
    ("DEBUG", ""),
    ("DEBUG_MODE", ""),
    ("GEMINI_DEBUG_LOG_FILE", ""),
    ("GEMINI_CLI_ACTIVITY_LOG_TARGET", ""),
    ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", ""),
    ("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", ""),
    ("GEMINI_CLI_TRUSTED_FOLDERS_PATH", ""),
    ("GEMINI_CLI_EXTENSION_REGISTRY_URI", ""),
    ("GEMINI_YOLO_MODE", ""),
    ("GEMINI_CLI_APPROVAL_MODE", ""),
    ("GEMINI_CLI_ACTIVE_APPROVAL_MODE", ""),
    ("GEMINI_EXP", ""),
    ("GEMINI_CLI_EXP_AGENT", ""),
    ("GEMINI_CLI_INTEGRATION_TEST", ""),
    ("VITEST", ""),
    ("GEMINI_SYSTEM_MD", ""),
    ("GEMINI_WRITE_SYSTEM_MD", ""),
    // Where its requests go, with what, and which certificates it trusts.
    ("GOOGLE_GEMINI_BASE_URL", ""),
    ("CODE_ASSIST_ENDPOINT", ""),
    ("GCE_METADATA_HOST", ""),
    ("GOOGLE_VERTEX_BASE_URL", ""),
    ("GOOGLE_GENAI_USE_VERTEXAI", ""),
    ("GOOGLE_GENAI_USE_GCA", ""),
    ("GEMINI_CLI_USE_COMPUTE_ADC", ""),
    ("CLOUD_SHELL", ""),
    ("GEMINI_CLI_CUSTOM_HEADERS", ""),
    ("HTTPS_PROXY", ""),
    ("https_proxy", ""),
    ("HTTP_PROXY", ""),
    ("http_proxy", ""),
    ("ALL_PROXY", ""),
    ("all_proxy", ""),
    ("NODE_TLS_REJECT_UNAUTHORIZED", ""),
    ("NODE_EXTRA_CA_CERTS", ""),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
    // Its telemetry, which sends the conversation (prompts, what the tools
    // read) to the endpoint or file it names: every variable of Gemini's
    // (off: an empty target or protocol is an error to it) and of the
    // OpenTelemetry SDK it bundles (0.61).
    ("GEMINI_TELEMETRY_ENABLED", "false"),
    ("GEMINI_TELEMETRY_TARGET", "local"),
    ("GEMINI_TELEMETRY_OTLP_ENDPOINT", ""),
    ("GEMINI_TELEMETRY_OTLP_PROTOCOL", "grpc"),
    ("GEMINI_TELEMETRY_LOG_PROMPTS", "false"),
    ("GEMINI_TELEMETRY_OUTFILE", ""),
    ("GEMINI_TELEMETRY_USE_COLLECTOR", "false"),
    ("GEMINI_TELEMETRY_USE_CLI_AUTH", "false"),
    ("GEMINI_TELEMETRY_TRACES_ENABLED", "false"),
    ("OTEL_ATTRIBUTE_COUNT_LIMIT", ""),
    ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", ""),
    ("OTEL_BLRP_EXPORT_TIMEOUT", ""),
    ("OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", ""),
    ("OTEL_BLRP_MAX_QUEUE_SIZE", ""),
    ("OTEL_BLRP_SCHEDULE_DELAY", ""),
    ("OTEL_BSP_EXPORT_TIMEOUT", ""),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", ""),
    ("OTEL_BSP_MAX_QUEUE_SIZE", ""),
    ("OTEL_BSP_SCHEDULE_DELAY", ""),
    ("OTEL_CONFIG_FILE", ""),
    ("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", ""),
    ("OTEL_EXPORTER_OTLP_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_CLIENT_KEY", ""),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", ""),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_HEADERS", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", ""),
    ("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", ""),
    (
        "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
        "",
    ),
    ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", ""),
    ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", ""),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", ""),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", ""),
    ("OTEL_EXPORTER_PROMETHEUS_HOST", ""),
    ("OTEL_EXPORTER_PROMETHEUS_PORT", ""),
    ("OTEL_EXPORTER_ZIPKIN_ENDPOINT", ""),
    ("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", ""),
    ("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", ""),
    ("OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT", ""),
    ("OTEL_LOGS_EXPORTER", ""),
    ("OTEL_LOG_LEVEL", ""),
    ("OTEL_METRICS_EXEMPLAR_FILTER", ""),
    ("OTEL_METRICS_EXPORTER", ""),
    ("OTEL_METRIC_EXPORT_INTERVAL", ""),
    ("OTEL_METRIC_EXPORT_TIMEOUT", ""),
    ("OTEL_NODE_EXPERIMENTAL_SDK_METRICS", ""),
    ("OTEL_NODE_RESOURCE_DETECTORS", ""),
    ("OTEL_PROPAGATORS", ""),
    ("OTEL_RESOURCE_ATTRIBUTES", ""),
    ("OTEL_SDK_DISABLED", ""),
    ("OTEL_SERVICE_NAME", ""),
    ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", ""),
    ("OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT", ""),
    ("OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT", ""),
    ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", ""),
    ("OTEL_SPAN_EVENT_COUNT_LIMIT", ""),
    ("OTEL_SPAN_LINK_COUNT_LIMIT", ""),
    ("OTEL_TRACES_EXPORTER", ""),
    ("OTEL_TRACES_SAMPLER", ""),
    ("OTEL_TRACES_SAMPLER_ARG", ""),
];

/// What orch knows of Gemini CLI's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: Some("@google/gemini-cli"),
    credentials: &["GEMINI_API_KEY"],
    default_pass_env: &[
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
    ],
    controlled_flags: &[
        ("--approval-mode", "permission"),
        ("-y", "permission"),
        ("--yolo", "permission"),
        ("-s", "permission"),
        ("--sandbox", "permission"),
        ("--policy", "internal"),
        ("--allowed-tools", "internal"),
        ("--allowed-mcp-server-names", "mcp"),
        ("-e", "mcp"),
        ("--extensions", "mcp"),
        ("--include-directories", "permission"),
        ("--admin-policy", "internal"),
        ("-w", "permission"),
        ("--worktree", "permission"),
        ("--acp", "output"),
        ("--experimental-acp", "output"),
        ("--skip-trust", "permission"),
        // The model replaced by (or recorded to) a file.
        ("--fake-responses", "model"),
        ("--fake-responses-non-strict", "model"),
        ("--record-responses", "output"),
        ("-r", "permission"),
        ("--resume", "permission"),
        ("--session-file", "permission"),
        ("-o", "output"),
        ("--output-format", "output"),
        ("--raw-output", "output"),
        ("-p", "output"),
        ("--prompt", "output"),
        ("-i", "output"),
        ("--prompt-interactive", "output"),
        ("-m", "model"),
        ("--model", "model"),
    ],
    controlled_env: &[
        ("HOME", ORCH_SETS),
        ("TMPDIR", ORCH_SETS),
        ("GEMINI_CLI_HOME", ORCH_SETS),
        ("GEMINI_CLI_NO_RELAUNCH", ORCH_SETS),
        ("XDG_CONFIG_HOME", WIDENS),
        ("GEMINI_CLI_TRUST*", WIDENS),
        ("GEMINI_CLI_SYSTEM_*", WIDENS),
        ("GEMINI_CLI_USER_SETTINGS", WIDENS),
        ("GEMINI_CLI_IDE_*", WIDENS),
        ("GEMINI_CLI_APPROVAL_MODE", WIDENS),
        ("GEMINI_CLI_ACTIVE_APPROVAL_MODE", WIDENS),
        ("GEMINI_YOLO_MODE", WIDENS),
        ("GEMINI_SANDBOX*", WIDENS),
        ("GEMINI_RESTRICTED_MODE", WIDENS),
        ("SANDBOX*", WIDENS),
        ("SEATBELT_PROFILE", WIDENS),
        ("GEMINI_EXP", WIDENS),
        ("GEMINI_CLI_EXP_AGENT", WIDENS),
        ("GEMINI_CLI_INTEGRATION_TEST", WIDENS),
        ("VITEST", WIDENS),
        ("GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES", WIDENS),
    ],
    controlled_config_prefixes: &[],
    config_option: None,
    controlled_words: &[],
    yargs: true,
    confines_writes: false,
    shell_vars: &["SHELL"],
    git_writes: &[],
    code_from: &[],
};

/// Every variable orch sets against a workspace `.env`, with its "off"
/// value: [`PINNED_AGAINST_DOTENV`], what orch refuses in an agent's `env`
/// (a pattern's known members are in the list), and the credentials and
/// variables passed through by default, for a `pass_env` of the user's that
/// leaves them out.
fn pinned() -> impl Iterator<Item = (&'static str, &'static str)> {
    let exact_controlled = TABLE
        .controlled_env
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !name.ends_with('*'));
    let off = exact_controlled
        .chain(TABLE.credentials.iter().copied())
        .chain(TABLE.default_pass_env.iter().copied())
        .map(|name| (name, ""));
    PINNED_AGAINST_DOTENV.iter().copied().chain(off)
}

/// Keep a workspace `.env` from setting what [`PINNED_AGAINST_DOTENV`]
/// names, or a credential or other variable orch passes through when
/// orch's environment lacks it (the file's `GEMINI_API_KEY` would send the
/// session to another account): each is set, empty when orch has no value.
fn pin_against_dotenv(environment: &mut Vec<EnvVar>) {
    for var in environment.iter_mut() {
        if matches!(var.value, EnvValue::PassThrough) && !env::BASICS.contains(&var.name.as_str()) {
            var.value = EnvValue::PassThroughOrEmpty;
        }
    }
    for (name, off) in pinned() {
        env::add_missing(environment, env::plain(name, off));
    }
}

impl Adapter for Gemini {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Gemini
    }

    fn enforcement(&self, ts: &ToolSet) -> Enforcement {
        let permission = shell_bound_permission(
            ts,
            PermissionReasons {
                read_only: "headless default approval offers no writing tool; the policy denies write_file, replace and the shell",
                shell_escapes: "auto_edit keeps edits in the workspace, but an allowed shell can write anywhere; use Bash(<pattern>) rules",
                workspace_write: "auto_edit allows edits inside the workspace only; the shell runs only allowed prefixes",
                full_access: "yolo: nothing is withheld",
            },
        );
        Enforcement {
            internal: match not_a_prefix(ts) {
                Some(p) => Enforced::none(format!(
                    "gemini's policy matches a command by its prefix: `Bash({p})` would allow every command starting `{}`; write a prefix ending in its only `*`, like `Bash(git log *)`",
                    command_prefix(p)
                )),
                None => Enforced::cli("settings tools.core is the allow-list of built-in tools"),
            },
            mcp: Enforced::cli(
                "only orch's servers are configured, with includeTools; policy allows only those tools",
            ),
            permission,
            max_turns: Enforced::cli("settings model.maxSessionTurns (exit 53 at the limit)"),
        }
    }

    fn supports(&self, tool: &InternalTool) -> bool {
        // What `tool_names` answers with no name, without building the
        // names (validation asks this for every tool of every invocation).
        !matches!(tool, InternalTool::NotebookEdit)
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let ts = req.toolset;
        let core: Vec<String> = unique(ts.internal.iter().flat_map(tool_names));
        let approval = match ts.permission {
            Permission::ReadOnly => "default",
            Permission::WorkspaceWrite => "auto_edit",
            Permission::FullAccess => "yolo",
        };

        // Policy: allow the granted shell patterns and MCP tools; deny
        // writers under read-only whatever else is configured.
        let mut rules = String::from("# written by orch for this invocation\n");
        let mut priority = 900;
        let mut rule = |body: String| {
            rules.push_str(&format!("\n[[rule]]\n{body}priority = {priority}\n"));
            priority -= 1;
        };
        if ts.permission == Permission::ReadOnly {
            let patterns = ts
                .internal
                .iter()
                .any(|t| matches!(t, InternalTool::BashPattern(_)));
            let mut denied = vec!["write_file", "replace"];
            if !patterns {
                denied.push("run_shell_command");
            }
            for w in denied {
                rule(format!("toolName = \"{w}\"\ndecision = \"deny\"\n"));
            }
        }
        for t in ts.internal.iter() {
            match t {
                InternalTool::BashPattern(p) => rule(format!(
                    "toolName = \"run_shell_command\"\ncommandPrefix = {}\ndecision = \"allow\"\n",
                    toml::Value::String(command_prefix(p))
                )),
                InternalTool::Bash => {
                    rule("toolName = \"run_shell_command\"\ndecision = \"allow\"\n".into())
                }
                InternalTool::WebFetch
                | InternalTool::WebSearch
                | InternalTool::Agent
                | InternalTool::TodoWrite => {
                    for n in tool_names(t) {
                        rule(format!("toolName = \"{n}\"\ndecision = \"allow\"\n"));
                    }
                }
                _ => {}
            }
        }
        for s in &req.mcp_servers {
            match &s.tools {
                // Every tool of the server. `toolName` is required: a rule
                // without it makes gemini 0.61 drop the whole policy file.
                None => rule(format!(
                    "mcpName = \"{}\"\ntoolName = \"*\"\ndecision = \"allow\"\n",
                    s.name
                )),
                Some(tools) => {
                    for tool in tools {
                        rule(format!(
                            "mcpName = \"{}\"\ntoolName = \"{tool}\"\ndecision = \"allow\"\n",
                            s.name
                        ));
                    }
                }
            }
        }

        let mut servers = serde_json::Map::new();
        for s in &req.mcp_servers {
            let mut entry = match &s.remote {
                // `httpUrl`: streamable HTTP (`url` would be SSE).
                Some(r) => json!({"httpUrl": r.url,
                                  "headers": r.headers_json(super::env::EnvRef::Dollar)}),
                None => s.json_entry(),
            };
            entry["trust"] = false.into();
            if let Some(tools) = &s.tools {
                entry["includeTools"] = json!(tools);
            }
            servers.insert(s.name.clone(), entry);
        }
        let home = req.path_in_dir("gemini");
        let mut settings = json!({
            "tools": { "core": core },
            "mcpServers": servers,
            "model": { "maxSessionTurns": ts.max_turns },
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
            "privacy": { "usageStatisticsEnabled": false },
            "telemetry": { "enabled": false },
        });
        if req.mode == Mode::Review {
            // A reviewer (a judge) reads what the work left, all of it:
            // an ignore file the work planted (`.geminiignore`, or a
            // `.gitignore` over a file it added) would have Gemini's file
            // tools refuse to read or list what it names.
            settings["context"] = json!({
                "fileFiltering": { "respectGeminiIgnore": false, "respectGitIgnore": false }
            });
        }
        let settings_path = home.join(".gemini").join("settings.json");
        let policy_path = req.file_in_dir("policy.toml");
        let files = vec![
            InvocationFile {
                path: settings_path,
                content: pretty(&settings),
            },
            InvocationFile {
                path: policy_path.clone(),
                content: rules,
            },
        ];

        let mut args: Vec<String> = vec![
            "--skip-trust".into(),
            "-o".into(),
            "stream-json".into(),
            "--approval-mode".into(),
            approval.into(),
            "--policy".into(),
            policy_path.display().to_string(),
        ];
        if let Some(model) = req.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        if ts.permission == Permission::FullAccess {
            // Gemini's file tools stay inside the workspace unless told.
            args.extend(["--include-directories".into(), "/".into()]);
        }
        args.extend(req.flags.iter().cloned());
        // Gemini's system prompt can only be replaced whole (GEMINI_SYSTEM_MD),
        // which would drop its tool instructions: orch's part leads the prompt.
        // No way to give a system prompt for one run: both in one text.
        let prompt = req.prompts.joined();
        args.extend(["-p".into(), prompt]);

        let mut environment = env::base(req);
        environment.push(env::plain("GEMINI_CLI_HOME", home.display().to_string()));
        environment.push(env::plain("GEMINI_CLI_NO_RELAUNCH", "true"));
        pin_against_dotenv(&mut environment);

        req.cli_invocation(args, environment, Stdin::Null, files, self.enforcement(ts))
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        let s = |v: &Value| v.as_str().map(str::to_string);
        match v["type"].as_str() {
            Some("init") => vec![Event::SessionStart {
                session_id: s(&v["session_id"]),
                model: s(&v["model"]),
                tools: Vec::new(),
                mcp_servers: Vec::new(),
                permission_mode: None,
            }],
            Some("message") if v["role"] == "assistant" => vec![Event::AssistantText {
                text: s(&v["content"]).unwrap_or_default(),
            }],
            Some("tool_use") => vec![Event::ToolCall {
                id: s(&v["tool_id"]),
                name: s(&v["tool_name"]).unwrap_or_default(),
                input: v["parameters"].clone(),
            }],
            Some("tool_result") => {
                let is_error = v["status"] != "success";
                let output = s(&v["output"])
                    .or_else(|| s(&v["error"]["message"]))
                    .unwrap_or_default();
                let mut out = vec![Event::ToolResult {
                    id: s(&v["tool_id"]),
                    is_error,
                    output: output.clone(),
                }];
                let refused = v["error"]["type"] == "tool_not_registered"
                    || output.contains("denied")
                    || output.contains("policy");
                if is_error && refused {
                    // Ids are `<tool>__<tool>_<n>_<k>`.
                    let id = s(&v["tool_id"]).unwrap_or_default();
                    out.push(Event::PermissionDenied {
                        tool: id.split("__").next().unwrap_or(&id).to_string(),
                        reason: Some(output),
                    });
                }
                out.push(Event::TurnEnd);
                out
            }
            Some("result") => {
                let stats = &v["stats"];
                let is_error = v["status"] != "success";
                let mut out = Vec::new();
                if is_error {
                    let message = if v["error"]["type"] == "FatalTurnLimitedError" {
                        // Gemini's own message says to raise maxSessionTurns
                        // in settings.json, a file orch writes from max_turns.
                        "turn limit reached (enforced by gemini)".into()
                    } else {
                        s(&v["error"]["message"]).unwrap_or_else(|| "failed".into())
                    };
                    out.push(Event::error(message));
                }
                out.push(Event::Result {
                    is_error,
                    subtype: s(&v["status"]),
                    text: None,
                    num_turns: None,
                    session_id: None,
                    tokens_in: stats["input_tokens"].as_u64(),
                    tokens_out: stats["output_tokens"].as_u64(),
                    cost_usd: None,
                });
                out
            }
            Some("error") => {
                let message = s(&v["message"]).unwrap_or_default();
                vec![Event::error(message)]
            }
            _ => Vec::new(),
        }
    }

    fn weakened(&self, line: &str) -> Option<&'static str> {
        if line.contains("Policy file error") {
            Some("gemini could not read orch's policy file")
        } else if line.contains("Invalid configuration in") {
            Some("gemini found orch's settings invalid")
        } else if line.contains("Approval mode overridden") {
            Some("gemini overrode the approval mode")
        } else {
            None
        }
    }

    fn probe(&self, inv: &Invocation) -> Probe {
        Probe {
            args: inv.args.clone(),
            env: vec![
                ("GOOGLE_GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into()),
                ("GEMINI_API_KEY".into(), String::new()),
            ],
            // No credentials: 41 for an accepted argv, 1 for a rejected one.
            verdict: |code, _stdout, stderr| match code {
                Some(1) | None => Err(super::adapter::first_message(stderr)),
                _ => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No workspace `.env` can set what orch pins; what the pipeline gives
    /// (a `pass_env`, an agent's `env`) wins over the "off" value.
    #[test]
    fn pinning_against_dotenv_keeps_what_the_pipeline_gives() {
        let mut environment = vec![
            EnvVar::pass_through("PATH"),
            EnvVar::pass_through("GEMINI_API_KEY"),
            EnvVar::pass_through("HTTPS_PROXY"),
            env::plain("EDITOR", "vim"),
        ];
        pin_against_dotenv(&mut environment);
        let value = |name: &str| {
            let found: Vec<&EnvVar> = environment.iter().filter(|v| v.name == name).collect();
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            found[0].clone()
        };
        // Passed through, else empty: shown so, and so resolved.
        for name in ["GEMINI_API_KEY", "HTTPS_PROXY"] {
            let v = value(name);
            assert_eq!(v.value, EnvValue::PassThroughOrEmpty, "{name}");
            assert_eq!(v.shown(), format!("${{{name}:-}}"));
            assert_eq!(v.resolve(|_| None).as_deref(), Some(""));
            assert_eq!(v.resolve(|_| Some("x".into())).as_deref(), Some("x"));
        }
        // The basics stay as they were (an empty TZ is not an unset one).
        assert_eq!(value("PATH").value, EnvValue::PassThrough);
        assert_eq!(value("EDITOR").value, EnvValue::Plain("vim".into()));
        // Everything pinned, controlled or passed by default is set.
        for (name, _) in pinned() {
            let v = value(name);
            if name != "EDITOR" && name != "HTTPS_PROXY" && name != "GEMINI_API_KEY" {
                assert!(matches!(v.value, EnvValue::Plain(_)), "{name}: {v:?}");
            }
        }
        assert_eq!(
            value("GEMINI_TELEMETRY_TARGET").value,
            EnvValue::Plain("local".into())
        );
        assert_eq!(
            value("GOOGLE_API_KEY").value,
            EnvValue::Plain(String::new())
        );
    }

    #[test]
    fn supports_exactly_the_tools_with_gemini_names() {
        use InternalTool::*;
        for tool in [
            Read,
            Write,
            Edit,
            Glob,
            Grep,
            Bash,
            BashPattern("cargo test *".into()),
            WebFetch,
            WebSearch,
            Agent,
            TodoWrite,
            NotebookEdit,
        ] {
            assert_eq!(
                Gemini.supports(&tool),
                !tool_names(&tool).is_empty(),
                "{tool:?}"
            );
        }
    }
}
