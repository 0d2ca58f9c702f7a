//! OpenCode (`opencode run`).
//!
//! The whole configuration travels in `OPENCODE_CONFIG_CONTENT` (project
//! config off). Restrictions sit in the top-level `permission` map, where a
//! flat `deny` removes a tool from what the model sees and `ask` is
//! auto-rejected in `run`. orch's own agent carries the system prompt and
//! the step limit; an unknown agent would fall back to the full-permission
//! one with only a warning, which fails the attempt.

use serde_json::{Map, Value, json};

use super::adapter::{Adapter, PermissionReasons, Probe, Request, shell_bound_permission};
use super::env::{self, EnvRef};
use super::invocation::{Enforced, Enforcement, EnvValue, EnvVar, Invocation, Stdin};
use super::kind::{CliTable, ORCH_SETS, WIDENS};
use crate::events::{Event, rate_limit};
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Permission, ToolSet};

pub(super) struct Opencode;

/// The keys of a user's `OPENCODE_CONFIG` file orch passes on: where models
/// come from. Anything else there could load code (`plugin`), add MCP
/// servers, agents or commands, or change permissions, so a file with more
/// is refused, and at run time only these keys are taken from it (into
/// orch's own `OPENCODE_CONFIG_CONTENT`; `OPENCODE_CONFIG` itself is not
/// passed on).
const PROVIDER_KEYS: &[&str] = &[
    "$schema",
    "provider",
    "model",
    "small_model",
    "enabled_providers",
    "disabled_providers",
];

/// The provider settings of an `OPENCODE_CONFIG` file, or why they cannot
/// be used.
fn provider_settings(path: &str) -> Result<Map<String, Value>, String> {
    if path.contains("${") {
        return Err("`OPENCODE_CONFIG` must name a file, not a `${VAR}` reference".into());
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let Value::Object(map) =
        serde_json::from_str::<Value>(&text).map_err(|e| format!("`{path}` is not JSON: {e}"))?
    else {
        return Err(format!("`{path}` is not a JSON object"));
    };
    let other: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !PROVIDER_KEYS.contains(k))
        .collect();
    if !other.is_empty() {
        return Err(format!(
            "`{path}` may only hold provider settings ({}), not {}",
            PROVIDER_KEYS.join(", "),
            other
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(map)
}

/// The agent orch defines for each invocation.
const AGENT: &str = "orch";

/// OpenCode's permission keys and the canonical tools that grant them.
fn granted(key: &str, tools: &[InternalTool]) -> bool {
    tools.iter().any(|t| match key {
        "read" => *t == InternalTool::Read,
        "list" => matches!(t, InternalTool::Read | InternalTool::Glob),
        "glob" => *t == InternalTool::Glob,
        "grep" => *t == InternalTool::Grep,
        "edit" => matches!(
            t,
            InternalTool::Write | InternalTool::Edit | InternalTool::NotebookEdit
        ),
        "task" => *t == InternalTool::Agent,
        "webfetch" => *t == InternalTool::WebFetch,
        "websearch" => *t == InternalTool::WebSearch,
        "todowrite" => *t == InternalTool::TodoWrite,
        _ => false,
    })
}

/// What orch knows of OpenCode's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: Some("opencode-ai"),
    // OpenCode reads the key of the provider its model uses.
    credentials: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
    default_pass_env: &[
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    ],
    controlled_flags: &[
        ("--agent", "permission"),
        ("--auto", "permission"),
        ("--dangerously-skip-permissions", "permission"),
        ("--attach", "permission"),
        ("--dir", "permission"),
        ("--share", "permission"),
        ("-i", "output"),
        ("--interactive", "output"),
        // `--yolo` is a hidden alias of `--auto`; `--file` reads any
        // file into the prompt with no permission check.
        ("--yolo", "permission"),
        ("-f", "permission"),
        ("--file", "permission"),
        ("--pure", "internal"),
        ("--command", "internal"),
        ("--port", "permission"),
        ("-p", "permission"),
        ("--password", "permission"),
        ("-u", "permission"),
        ("--username", "permission"),
        ("-c", "permission"),
        ("--continue", "permission"),
        ("-s", "permission"),
        ("--session", "permission"),
        ("--fork", "permission"),
        ("--format", "output"),
        ("-m", "model"),
        ("--model", "model"),
    ],
    controlled_env: &[
        ("HOME", ORCH_SETS),
        ("TMPDIR", ORCH_SETS),
        ("OPENCODE_CONFIG_CONTENT", ORCH_SETS),
        ("OPENCODE_DISABLE_*", ORCH_SETS),
        ("XDG_CONFIG_HOME", ORCH_SETS),
        ("XDG_DATA_HOME", ORCH_SETS),
        ("XDG_CACHE_HOME", ORCH_SETS),
        ("XDG_STATE_HOME", ORCH_SETS),
        ("OPENCODE_PERMISSION", WIDENS),
        ("OPENCODE_CONFIG_DIR", WIDENS),
        ("OPENCODE_TUI_CONFIG", WIDENS),
        ("OPENCODE_PLUGIN_META_FILE", WIDENS),
        ("OPENCODE_TEST_*", WIDENS),
        ("OPENCODE_DB", WIDENS),
        ("OPENCODE_EXPERIMENTAL*", WIDENS),
        ("OPENCODE_ENABLE_*", WIDENS),
        ("OPENCODE_FAKE_VCS", WIDENS),
        ("OPENCODE_AUTH_CONTENT", WIDENS),
        ("OPENCODE_DANGEROUSLY_SKIP_PERMISSIONS", WIDENS),
    ],
    controlled_config_prefixes: &[],
    config_option: None,
    controlled_words: &[],
    yargs: true,
    confines_writes: false,
    shell_vars: &["SHELL"],
    git_writes: &["data/opencode/snapshot"],
    code_from: &[],
};

impl Adapter for Opencode {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Opencode
    }

    fn enforcement(&self, ts: &ToolSet) -> Enforcement {
        let permission_enf = shell_bound_permission(
            ts,
            PermissionReasons {
                read_only: "edit and bash are denied, which removes them from the model",
                shell_escapes: "opencode never sandboxes bash, so an allowed shell can write anywhere; use Bash(<pattern>) rules",
                workspace_write: "edits are allowed, external_directory is denied; bash runs only allowed patterns",
                full_access: "everything granted is allowed",
            },
        );
        Enforcement {
            internal: Enforced::cli(
                "tools not granted are denied in the permission map, which hides them",
            ),
            mcp: Enforced::cli("only orch's servers are configured; tools not granted are denied"),
            permission: permission_enf,
            max_turns: Enforced::orch(
                "opencode's step limit is soft; orch counts steps and stops it at the limit",
            ),
        }
    }

    fn loads_code_from(&self) -> &'static [&'static str] {
        // `.opencode/{plugin,plugins}/*.{js,ts}` (and its agents, commands
        // and skills) load despite `--pure` and
        // OPENCODE_DISABLE_PROJECT_CONFIG=1: a plugin's top-level code runs.
        &[".opencode"]
    }

    fn check_env(&self, name: &str, value: &str) -> Result<(), String> {
        if name == "OPENCODE_CONFIG" {
            provider_settings(value)?;
        }
        Ok(())
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        match model.split_once('/') {
            Some((provider, name))
                if !provider.is_empty()
                    && !name.is_empty()
                    && !model.contains(char::is_whitespace) =>
            {
                Ok(())
            }
            _ => Err("opencode needs `provider/model`".into()),
        }
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let ts = req.toolset;
        let allow_or_deny = |yes: bool| Value::from(if yes { "allow" } else { "deny" });
        let mut permission = Map::new();
        for key in [
            "read",
            "list",
            "glob",
            "grep",
            "task",
            "webfetch",
            "websearch",
            "todowrite",
        ] {
            permission.insert(key.into(), allow_or_deny(granted(key, &ts.internal)));
        }
        let edits = granted("edit", &ts.internal) && ts.permission != Permission::ReadOnly;
        permission.insert("edit".into(), allow_or_deny(edits));
        permission.insert("skill".into(), "deny".into());
        permission.insert(
            "external_directory".into(),
            allow_or_deny(ts.permission == Permission::FullAccess),
        );
        let unrestricted_bash = ts.internal.contains(&InternalTool::Bash);
        let patterns: Vec<&str> = ts
            .internal
            .iter()
            .filter_map(|t| match t {
                InternalTool::BashPattern(p) => Some(p.as_str()),
                _ => None,
            })
            .collect();
        let bash = if unrestricted_bash {
            "allow".into()
        } else if patterns.is_empty() {
            "deny".into()
        } else {
            // Last matching rule wins: deny everything, then allow patterns.
            let mut rules = Map::new();
            rules.insert("*".into(), "deny".into());
            for p in &patterns {
                rules.insert((*p).into(), "allow".into());
            }
            Value::Object(rules)
        };
        permission.insert("bash".into(), bash);

        let mut mcp = Map::new();
        for s in &req.mcp_servers {
            // OpenCode spells environment references `{env:NAME}`.
            let entry = match &s.remote {
                Some(r) => json!({
                    "type": "remote",
                    "url": r.url,
                    "headers": r.headers_json(EnvRef::Braced),
                    "enabled": true,
                }),
                None => json!({
                    "type": "local",
                    "command": s.command,
                    "environment": env::config_env(&s.env, EnvRef::Braced),
                    "enabled": true,
                }),
            };
            mcp.insert(s.name.clone(), entry);
            match &s.tools {
                None => {
                    permission.insert(format!("{}_*", s.name), "allow".into());
                }
                Some(tools) => {
                    permission.insert(format!("{}_*", s.name), "deny".into());
                    for t in tools {
                        permission.insert(format!("{}_{t}", s.name), "allow".into());
                    }
                }
            }
        }
        // The agent repeats the permission map: agent-level rules win over
        // top-level ones, so a config file the user passes cannot widen it.
        let mut agent = json!({
            "mode": "primary",
            "steps": ts.max_turns,
            "permission": permission.clone(),
        });
        if let Some(system) = &req.prompts.system {
            agent["prompt"] = system.as_str().into();
        }
        // A user's provider settings first; orch's keys after, so they win.
        let mut config = Map::new();
        if let Some((_, path)) = req.agent.env.iter().find(|(k, _)| k == "OPENCODE_CONFIG")
            && let Ok(providers) = provider_settings(path)
        {
            config.extend(providers);
        }
        let ours = json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false,
            "share": "disabled",
            // No language server or formatter: OpenCode starts them from
            // the workspace (a planted `node_modules/.bin` entry would run
            // beside a judge's read tools). Off by its own default today;
            // said here so that it is orch's word, not OpenCode's.
            "lsp": false,
            "formatter": false,
            "permission": permission,
            "mcp": mcp,
            "agent": { AGENT: agent },
        });
        if let Value::Object(ours) = ours {
            config.extend(ours);
        }
        let config = Value::Object(config);

        let mut args: Vec<String> = vec![
            "run".into(),
            // Without --pure opencode npm-installs plugins in the background.
            "--pure".into(),
            "--format".into(),
            "json".into(),
            "--agent".into(),
            AGENT.into(),
        ];
        if let Some(model) = req.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        args.extend(req.flags.iter().cloned());

        let mut environment = env::base(req);
        // Its provider settings are in the content above; the file itself
        // could hold anything by the time opencode reads it.
        environment.retain(|v| v.name != "OPENCODE_CONFIG");
        environment.push(EnvVar {
            name: "OPENCODE_CONFIG_CONTENT".into(),
            value: EnvValue::Plain(config.to_string()),
        });
        environment.push(env::plain("OPENCODE_DISABLE_PROJECT_CONFIG", "1"));
        for switch in [
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_CLAUDE_CODE",
        ] {
            environment.push(env::plain(switch, "1"));
        }
        environment.extend(env::own_dirs(
            req,
            &[
                ("XDG_CONFIG_HOME", "config"),
                ("XDG_DATA_HOME", "data"),
                ("XDG_CACHE_HOME", "cache"),
                ("XDG_STATE_HOME", "state"),
            ],
        ));

        req.cli_invocation(
            args,
            environment,
            Stdin::Text(req.prompts.user.clone()),
            Vec::new(),
            self.enforcement(ts),
        )
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        let s = |v: &Value| v.as_str().map(str::to_string);
        let part = &v["part"];
        match v["type"].as_str() {
            Some("step_start") => {
                if v["sessionID"].is_string() || part["sessionID"].is_string() {
                    vec![Event::SessionStart {
                        session_id: s(&v["sessionID"]).or_else(|| s(&part["sessionID"])),
                        model: None,
                        tools: Vec::new(),
                        mcp_servers: Vec::new(),
                        permission_mode: None,
                    }]
                } else {
                    Vec::new()
                }
            }
            Some("text") => vec![Event::AssistantText {
                text: s(&part["text"]).unwrap_or_default(),
            }],
            // A call to a tool the permission map hides comes back as a call
            // to opencode's `invalid` tool: the model was refused.
            Some("tool_use") if part["tool"] == "invalid" => {
                let state = &part["state"];
                let message = s(&state["output"])
                    .or_else(|| s(&state["input"]["error"]))
                    .unwrap_or_default();
                let tool = message
                    .split("unavailable tool '")
                    .nth(1)
                    .and_then(|r| r.split('\'').next())
                    .unwrap_or("unknown")
                    .to_string();
                vec![
                    Event::ToolCall {
                        id: s(&part["callID"]),
                        name: tool.clone(),
                        input: state["input"].clone(),
                    },
                    Event::ToolResult {
                        id: s(&part["callID"]),
                        is_error: true,
                        output: message.clone(),
                    },
                    Event::PermissionDenied {
                        tool,
                        reason: Some(message),
                    },
                ]
            }
            Some("tool_use") => {
                let state = &part["state"];
                let status = state["status"].as_str().unwrap_or("");
                let mut out = vec![Event::ToolCall {
                    id: s(&part["callID"]),
                    name: s(&part["tool"]).unwrap_or_default(),
                    input: state["input"].clone(),
                }];
                if status == "completed" || status == "error" {
                    let output = s(&state["output"])
                        .or_else(|| s(&state["error"]))
                        .unwrap_or_default();
                    out.push(Event::ToolResult {
                        id: s(&part["callID"]),
                        is_error: status == "error",
                        output: output.clone(),
                    });
                    if status == "error"
                        && (output.contains("rejected") || output.contains("denied"))
                    {
                        out.push(Event::PermissionDenied {
                            tool: s(&part["tool"]).unwrap_or_default(),
                            reason: Some(output),
                        });
                    }
                }
                out
            }
            Some("step_finish") => {
                let mut out = vec![
                    Event::Usage {
                        tokens_in: part["tokens"]["input"].as_u64().unwrap_or(0),
                        tokens_out: part["tokens"]["output"].as_u64().unwrap_or(0),
                        cost_usd: part["cost"].as_f64(),
                    },
                    Event::TurnEnd,
                ];
                // The model stopped of its own accord (not to call a
                // tool): `run` ends here, so this is the session's result.
                if part["reason"] == "stop" {
                    out.push(Event::Result {
                        is_error: false,
                        subtype: Some("stop".into()),
                        text: None,
                        num_turns: None,
                        session_id: s(&v["sessionID"]),
                        tokens_in: None,
                        tokens_out: None,
                        cost_usd: None,
                    });
                }
                out
            }
            Some("error") => {
                let message = s(&v["error"]["data"]["message"])
                    .or_else(|| s(&v["error"]["message"]))
                    .or_else(|| s(&v["message"]))
                    .unwrap_or_else(|| v["error"].to_string());
                let data = &v["error"]["data"];
                if data["statusCode"] == 429 {
                    // OpenCode passes the provider's headers on: the reset
                    // is there when the text does not give it.
                    let reset = rate_limit::from_headers(&data["responseHeaders"]);
                    vec![Event::rate_limit_error(message, reset)]
                } else {
                    vec![Event::error(message)]
                }
            }
            _ => Vec::new(),
        }
    }

    fn weakened(&self, line: &str) -> Option<&'static str> {
        line.contains("Falling back to default agent")
            .then_some("opencode fell back to its default (full-permission) agent")
    }

    fn probe(&self, _inv: &Invocation) -> Probe {
        // `opencode debug config` loads exactly the configuration the run
        // would use and fails on a bad one.
        Probe {
            args: vec!["debug".into(), "config".into()],
            env: Vec::new(),
            verdict: |code, stdout, stderr| {
                if code == Some(0) && stdout.contains("\"permission\"") {
                    Ok(())
                } else {
                    Err(super::adapter::first_message(stderr))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_provider_settings_are_taken_from_a_users_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.json");
        std::fs::write(&ok, r#"{"model": "m/x", "provider": {"m": {"npm": "p"}}}"#).unwrap();
        let map = provider_settings(ok.to_str().unwrap()).unwrap();
        assert!(map.contains_key("provider"));
        let bad = dir.path().join("bad.json");
        std::fs::write(
            &bad,
            r#"{"provider": {}, "plugin": ["./x.js"], "mcp": {"s": {"type": "local"}}}"#,
        )
        .unwrap();
        let e = provider_settings(bad.to_str().unwrap()).unwrap_err();
        assert!(e.contains("`plugin`") && e.contains("`mcp`"), "{e}");
        assert!(provider_settings("${CFG}").is_err());
        assert!(provider_settings("/no/such/file.json").is_err());
    }
}
