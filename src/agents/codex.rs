//! Codex (`codex exec`).
//!
//! The restriction is the operating-system sandbox (`-s read-only`,
//! `-s workspace-write`), which maps one-to-one onto the permission levels.
//! Codex reads through its shell and writes through `apply_patch`, which
//! cannot be removed; the shell and web search can. There is no turn limit:
//! orch counts turns in the event stream and stops the process.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::adapter::{Adapter, OwnProgram, Probe, Request};
use super::claude::strings;
use super::env;
use super::invocation::{Enforced, Enforcement, Invocation, Stdin};
use super::kind::{CliTable, ORCH_SETS, WIDENS};
use crate::events::Event;
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Permission, ToolSet};

pub(super) struct Codex;

/// What a ToolSet asks of codex's two tools: its shell (through which it
/// also reads) and apply_patch. Decided once, for the argv and the report.
struct Tools {
    /// The shell is offered (reading, or any Bash).
    shell: bool,
    /// Unrestricted Bash is granted.
    bash: bool,
    /// A writing tool is granted.
    writes: bool,
}

impl Tools {
    fn of(ts: &ToolSet) -> Self {
        let any = |f: fn(&InternalTool) -> bool| ts.internal.iter().any(f);
        Tools {
            shell: any(through_the_shell),
            bash: any(|t| *t == InternalTool::Bash),
            writes: any(|t| {
                matches!(
                    t,
                    InternalTool::Write | InternalTool::Edit | InternalTool::NotebookEdit
                )
            }),
        }
    }
}

/// Whether codex does what the tool grants through its shell.
fn through_the_shell(t: &InternalTool) -> bool {
    matches!(
        t,
        InternalTool::Read
            | InternalTool::Glob
            | InternalTool::Grep
            | InternalTool::Bash
            | InternalTool::BashPattern(_)
    )
}

fn sandbox(p: Permission) -> &'static str {
    match p {
        Permission::ReadOnly => "read-only",
        Permission::WorkspaceWrite => "workspace-write",
        Permission::FullAccess => "danger-full-access",
    }
}

/// A TOML string literal for a `-c key=value` override.
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn toml_list(items: &[String]) -> String {
    toml::Value::Array(
        items
            .iter()
            .map(|s| toml::Value::String(s.clone()))
            .collect(),
    )
    .to_string()
}

/// What orch knows of Codex's command line, environment and
/// package (see [`CliTable`]).
const TABLE: CliTable = CliTable {
    npm_package: Some("@openai/codex"),
    credentials: &["OPENAI_API_KEY", "CODEX_API_KEY"],
    default_pass_env: &["OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"],
    controlled_flags: &[
        ("-s", "permission"),
        ("--sandbox", "permission"),
        ("--full-auto", "permission"),
        ("--dangerously-bypass-approvals-and-sandbox", "permission"),
        ("--yolo", "permission"),
        ("-a", "permission"),
        ("--ask-for-approval", "permission"),
        ("--add-dir", "permission"),
        ("--enable", "internal"),
        ("--disable", "internal"),
        ("-p", "permission"),
        ("--profile", "permission"),
        ("-C", "permission"),
        ("--cd", "permission"),
        ("--trust", "permission"),
        ("--approve-for-me", "permission"),
        ("--dangerously-bypass-hook-trust", "permission"),
        ("--not-so-yolo", "permission"),
        // Files the codex process itself (outside its sandbox) reads
        // or writes.
        ("-o", "permission"),
        ("--output-last-message", "permission"),
        ("-i", "permission"),
        ("--image", "permission"),
        ("--output-schema", "output"),
        ("--worktree", "permission"),
        ("--json", "output"),
        ("-m", "model"),
        ("--model", "model"),
        ("--oss", "model"),
        ("--local-provider", "model"),
    ],
    controlled_env: &[
        ("HOME", ORCH_SETS),
        ("TMPDIR", ORCH_SETS),
        ("CODEX_HOME", ORCH_SETS),
        ("XDG_CONFIG_HOME", WIDENS),
        ("CODEX_SANDBOX*", WIDENS),
        ("CODEX_EXEC_SERVER_URL", WIDENS),
        ("CODEX_MANAGED_PACKAGE_ROOT", WIDENS),
        ("CODEX_SQLITE_HOME", WIDENS),
        ("CODEX_BWRAP_SHA256", WIDENS),
    ],
    controlled_config_prefixes: &[
        ("sandbox", "permission"),
        ("approval_policy", "permission"),
        ("mcp_servers", "mcp"),
        ("features", "internal"),
        ("tools", "internal"),
        ("web_search", "internal"),
        ("shell_environment_policy", "permission"),
        // A profile can hold any of the above; a trusted project
        // loads its own .codex/config.toml; notify and hooks run
        // commands.
        ("profile", "permission"),
        ("profiles", "permission"),
        ("projects", "permission"),
        ("notify", "permission"),
        ("hooks", "permission"),
        ("approvals_reviewer", "permission"),
        ("auto_review", "permission"),
        ("permissions", "permission"),
        ("default_permissions", "permission"),
        ("agents", "internal"),
        ("apps", "internal"),
        ("plugins", "internal"),
        ("marketplaces", "internal"),
        ("skills", "internal"),
        ("memories", "internal"),
        ("orchestrator", "internal"),
        ("allow_login_shell", "permission"),
        ("js_repl_node_path", "permission"),
        ("mcp_oauth", "mcp"),
        ("mcp_enterprise_managed_auth", "mcp"),
        ("mcp_optional_startup_grace_ms", "mcp"),
        ("developer_instructions", "output"),
        ("model_instructions_file", "output"),
    ],
    config_option: Some(("config", 'c')),
    controlled_words: &["review", "resume", "fork", "help", "apply", "mcp"],
    yargs: false,
    confines_writes: true,
    shell_vars: &["SHELL"],
    git_writes: &[],
    code_from: &[],
};

impl Adapter for Codex {
    fn table(&self) -> &'static CliTable {
        &TABLE
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Codex
    }

    fn enforcement(&self, ts: &ToolSet) -> Enforcement {
        let Tools {
            shell,
            bash,
            writes,
        } = Tools::of(ts);
        let sandbox = sandbox(ts.permission);
        let pattern = ts
            .internal
            .iter()
            .any(|t| matches!(t, InternalTool::BashPattern(_)));
        let internal = match ts.permission {
            Permission::ReadOnly if pattern => Enforced::none(
                "codex's shell cannot be limited to commands: a Bash(<pattern>) would be its whole shell; grant Bash (nothing is written under read-only) or leave the pattern out",
            ),
            Permission::ReadOnly => Enforced::cli(
                "the read-only sandbox stops every write; codex reads through its shell",
            ),
            _ if !writes => Enforced::none(
                "apply_patch cannot be removed from codex and the sandbox lets it write; add Write/Edit or use read-only",
            ),
            _ if shell && !bash => Enforced::none(
                "codex's shell cannot be limited to commands or to reading; add Bash or use read-only",
            ),
            _ => Enforced::cli("codex's shell and apply_patch match the granted tools"),
        };
        Enforcement {
            internal,
            mcp: Enforced::cli("only orch's servers are configured, each with enabled_tools"),
            permission: Enforced::cli(format!("the OS sandbox `-s {sandbox}`")),
            max_turns: Enforced::orch(
                "codex has no turn limit; orch counts its tool calls in the event stream and stops it at the limit",
            ),
        }
    }

    fn starts_programs(&self, ts: &ToolSet, _confined: bool) -> Option<String> {
        // Codex reads, lists and searches through its shell.
        let Tools { shell, .. } = Tools::of(ts);
        shell.then(|| {
            let granted: Vec<String> = ts
                .internal
                .iter()
                .filter(|t| through_the_shell(t))
                .map(ToString::to_string)
                .collect();
            format!("{} (codex's shell)", granted.join(", "))
        })
    }

    fn supports(&self, tool: &InternalTool) -> bool {
        // Codex searches the web but has no tool that fetches a page.
        *tool != InternalTool::WebFetch
    }

    fn invocation(&self, req: &Request<'_>) -> Invocation {
        let ts = req.toolset;
        let shell = Tools::of(ts).shell;
        // Inside orch's confinement codex's own sandbox cannot start: it is
        // bubblewrap, which must write a new user namespace's uid map (a
        // file in /proc that Landlock keeps read-only), and its Landlock
        // fallback insists on bubblewrap too. orch's confinement holds the
        // permission instead, for codex's shell and its MCP servers alike.
        let sandbox = if req.confined {
            sandbox(Permission::FullAccess)
        } else {
            sandbox(ts.permission)
        };
        let mut args: Vec<String> = vec![
            "exec".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
            "--ignore-user-config".into(),
            "--ignore-rules".into(),
            "--strict-config".into(),
            "-s".into(),
            sandbox.into(),
            "-C".into(),
            req.workdir.display().to_string(),
        ];
        if let Some(model) = req.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        let mut config = |k: &str, v: String| {
            args.push("-c".into());
            args.push(format!("{k}={v}"));
        };
        if ts.permission == Permission::WorkspaceWrite && !req.confined {
            // By default the sandbox also lets /tmp and $TMPDIR be written:
            // workspace-write means the workspace.
            config("sandbox_workspace_write.exclude_slash_tmp", "true".into());
            config(
                "sandbox_workspace_write.exclude_tmpdir_env_var",
                "true".into(),
            );
        }
        if !shell {
            config("features.shell_tool", "false".into());
            config("features.unified_exec", "false".into());
        }
        if !ts.internal.contains(&InternalTool::WebSearch) {
            config("web_search", toml_str("disabled"));
        }
        if !ts.internal.contains(&InternalTool::Agent) {
            config("features.multi_agent", "false".into());
        }
        // Never offered: tools that reach outside the sandbox (apps, browser,
        // computer use); plugin sync, which contacts github.com and
        // chatgpt.com at start-up; and retrying a dead network forever.
        for feature in [
            "apps",
            "browser_use",
            "browser_use_external",
            "computer_use",
            "plugins",
            "unbounded_connection_retries",
        ] {
            config(&format!("features.{feature}"), "false".into());
        }
        if let Some(system) = &req.prompts.system {
            config("developer_instructions", toml_str(system));
        }
        for s in &req.mcp_servers {
            let key = format!("mcp_servers.{}", s.name);
            if let Some(r) = &s.remote {
                config(&format!("{key}.url"), toml_str(&r.url));
                // Each header from the variable orch sets for it.
                if !r.headers.is_empty() {
                    let pairs: Vec<String> = r
                        .headers
                        .iter()
                        .map(|h| format!("{} = {}", toml_str(&h.name), toml_str(&h.var)))
                        .collect();
                    config(
                        &format!("{key}.env_http_headers"),
                        format!("{{ {} }}", pairs.join(", ")),
                    );
                }
            } else {
                config(&format!("{key}.command"), toml_str(s.program()));
                config(&format!("{key}.args"), toml_list(s.args()));
                let vars: Vec<String> = s.env.iter().map(|(k, _)| k.clone()).collect();
                if !vars.is_empty() {
                    config(&format!("{key}.env_vars"), toml_list(&vars));
                }
            }
            if let Some(tools) = &s.tools {
                config(&format!("{key}.enabled_tools"), toml_list(tools));
            }
            // Codex gives a server 10 s to start by default; a loaded
            // machine takes longer to start orch's relay or a pipeline
            // server, and the model then works without its tools.
            config(&format!("{key}.startup_timeout_sec"), "60".into());
            // Under read-only and workspace-write an MCP call otherwise
            // "requires approval, but approval policy is never".
            config(
                &format!("{key}.default_tools_approval_mode"),
                toml_str("approve"),
            );
        }
        args.extend(req.flags.iter().cloned());
        // The prompt goes on stdin (`-`), so no argv length limit applies.
        args.push("-".into());

        let mut environment = env::base(req);
        environment.extend(env::own_dirs(req, &[("CODEX_HOME", "codex")]));
        // MCP servers get their variables from codex's environment by name.
        for s in &req.mcp_servers {
            for (name, value) in &s.env {
                env::add_missing(
                    &mut environment,
                    super::invocation::EnvVar {
                        name: name.clone(),
                        value: value.clone(),
                    },
                );
            }
        }

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
        match v["type"].as_str() {
            Some("thread.started") => vec![Event::SessionStart {
                session_id: s(&v["thread_id"]),
                model: None,
                tools: strings(&v["tools"]),
                mcp_servers: Vec::new(),
                permission_mode: None,
            }],
            // A turn is a tool call (see `turn.completed` below), counted as
            // it starts: a budget then stops the first call past it, also
            // when several start at once.
            Some("item.started") => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("command_execution") => vec![
                        Event::ToolCall {
                            id: s(&item["id"]),
                            name: "exec_command".into(),
                            input: serde_json::json!({ "command": item["command"] }),
                        },
                        Event::TurnEnd,
                    ],
                    Some("mcp_tool_call") => vec![
                        Event::ToolCall {
                            id: s(&item["id"]),
                            name: format!(
                                "mcp__{}__{}",
                                item["server"].as_str().unwrap_or(""),
                                item["tool"].as_str().unwrap_or("")
                            ),
                            input: item["arguments"].clone(),
                        },
                        Event::TurnEnd,
                    ],
                    _ => Vec::new(),
                }
            }
            Some("item.completed") => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("agent_message") => vec![Event::AssistantText {
                        text: s(&item["text"]).unwrap_or_default(),
                    }],
                    Some("command_execution") => vec![Event::ToolResult {
                        id: s(&item["id"]),
                        is_error: item["status"] != "completed"
                            || item["exit_code"].as_i64().is_some_and(|c| c != 0),
                        output: s(&item["aggregated_output"]).unwrap_or_default(),
                    }],
                    // A patch shows only once applied.
                    Some("file_change") => vec![
                        Event::ToolCall {
                            id: s(&item["id"]),
                            name: "apply_patch".into(),
                            input: item["changes"].clone(),
                        },
                        Event::TurnEnd,
                        Event::ToolResult {
                            id: s(&item["id"]),
                            is_error: item["status"] != "completed",
                            output: String::new(),
                        },
                    ],
                    Some("mcp_tool_call") => vec![Event::ToolResult {
                        id: s(&item["id"]),
                        is_error: item["status"] != "completed" || !item["error"].is_null(),
                        output: item["result"].to_string(),
                    }],
                    Some("error") => error_event(s(&item["message"]).unwrap_or_default()),
                    _ => Vec::new(),
                }
            }
            // One `turn` here is a whole prompt; model turns are counted by
            // the tool calls above.
            // `exec` runs one turn: its end is the session's result.
            Some("turn.completed") => vec![
                Event::Usage {
                    tokens_in: v["usage"]["input_tokens"].as_u64().unwrap_or(0),
                    tokens_out: v["usage"]["output_tokens"].as_u64().unwrap_or(0),
                    cost_usd: None,
                },
                Event::Result {
                    is_error: false,
                    subtype: Some("turn.completed".into()),
                    text: None,
                    num_turns: None,
                    session_id: None,
                    tokens_in: None,
                    tokens_out: None,
                    cost_usd: None,
                },
            ],
            Some("turn.failed") => {
                let message = s(&v["error"]["message"]).unwrap_or_else(|| "turn failed".into());
                let mut out = error_event(message.clone());
                out.push(Event::Result {
                    is_error: true,
                    subtype: Some("turn.failed".into()),
                    text: Some(message),
                    num_turns: None,
                    session_id: None,
                    tokens_in: None,
                    tokens_out: None,
                    cost_usd: None,
                });
                out
            }
            Some("error") => error_event(s(&v["message"]).unwrap_or_default()),
            _ => Vec::new(),
        }
    }

    fn parse_stderr_line(&self, line: &str) -> Vec<Event> {
        // `ERROR codex_core::tools::router: error=patch rejected: writing is
        // blocked by read-only sandbox; ...`: the call never shows in --json.
        let Some((_, message)) = line.split_once("codex_core::tools::router: error=") else {
            return Vec::new();
        };
        let message = message.trim().to_string();
        if message.contains("sandbox")
            || message.contains("rejected")
            || message.contains("Read-only file system")
        {
            let tool = if message.contains("patch") {
                "apply_patch"
            } else {
                "exec_command"
            };
            vec![Event::PermissionDenied {
                tool: tool.into(),
                reason: Some(message),
            }]
        } else {
            error_event(message)
        }
    }

    fn weakened(&self, _line: &str) -> Option<&'static str> {
        None
    }

    fn starts_undumpable(&self) -> bool {
        true
    }

    fn own_program(&self, found: &Path) -> Result<OwnProgram, String> {
        if let Some(program) = native_program(found) {
            // `vendor/<target>`: its `codex-path` and helpers.
            let package = program
                .parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf);
            return Ok(OwnProgram { program, package });
        }
        let mut magic = [0u8; 4];
        let elf = std::fs::File::open(found)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok()
            && magic == *b"\x7fELF";
        if elf {
            Ok(OwnProgram {
                program: found.to_path_buf(),
                package: None,
            })
        } else {
            Err(format!(
                "`{}` is neither Codex's own program nor npm's launcher for it (a script or a \
                 version manager's shim?): orch starts Codex from a copy of its own program \
                 that no one may read, which a script cannot run from (docs/confinement.md, \
                 \"Codex\"); give the program's path as `agents.<name>.binary`",
                found.display()
            ))
        }
    }

    fn probe(&self, inv: &Invocation) -> Probe {
        // A provider on a closed loopback port with retries off: an accepted
        // argv fails its first turn at once instead of retrying forever.
        let mut args: Vec<String> = inv.args.clone();
        let at = args.len().saturating_sub(1);
        let extra = [
            "model_provider=\"orch-probe\"",
            "model_providers.orch-probe.name=\"orch-probe\"",
            "model_providers.orch-probe.base_url=\"http://127.0.0.1:9/v1\"",
            // Left unset: the turn fails before codex opens a socket.
            "model_providers.orch-probe.env_key=\"ORCH_PROBE_NO_KEY\"",
            "model_providers.orch-probe.wire_api=\"responses\"",
            "model_providers.orch-probe.request_max_retries=0",
            "model_providers.orch-probe.stream_max_retries=0",
        ];
        for (i, kv) in extra.iter().enumerate() {
            args.insert(at + 2 * i, "-c".into());
            args.insert(at + 2 * i + 1, (*kv).into());
        }
        Probe {
            args,
            env: Vec::new(),
            verdict: |code, stdout, stderr| {
                // Parse errors exit 2; config errors exit 1 with a message;
                // an accepted argv starts a thread and then fails its turn.
                if stdout.contains("\"thread.started\"") || stdout.contains("\"turn.failed\"") {
                    Ok(())
                } else {
                    let first = stderr
                        .lines()
                        .find(|l| !l.trim().is_empty() && !l.starts_with("WARNING"))
                        .unwrap_or("rejected");
                    Err(format!(
                        "exit {}: {}",
                        code.map_or("?".into(), |c| c.to_string()),
                        first.trim()
                    ))
                }
            },
        }
    }
}

/// Codex's own program, when `found` (a real path) is the launcher npm
/// installs (`@openai/codex`'s `bin/codex.js`): the native program of the
/// package for this platform, found as the launcher finds it (Node's
/// lookup of `@openai/codex-<platform>` from the launcher's folder up,
/// else the package's own `vendor`). Codex runs every command in its own
/// domain (docs/confinement.md, "Codex"): the launcher, which Node before
/// 22.15 keeps as the parent of Codex's program with the same
/// environment and orch's sockets for its stream, must not be there.
fn native_program(found: &Path) -> Option<PathBuf> {
    let (triple, package) = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("x86_64-unknown-linux-musl", "codex-linux-x64"),
        ("linux", "aarch64") => ("aarch64-unknown-linux-musl", "codex-linux-arm64"),
        ("macos", "x86_64") => ("x86_64-apple-darwin", "codex-darwin-x64"),
        ("macos", "aarch64") => ("aarch64-apple-darwin", "codex-darwin-arm64"),
        _ => return None,
    };
    if found.file_name()? != "codex.js" {
        return None;
    }
    let bin = found.parent()?;
    let root = bin.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("package.json")).ok()?).ok()?;
    if manifest.get("name").and_then(Value::as_str) != Some("@openai/codex") {
        return None;
    }
    // Node looks in `node_modules` of the folder and of each above it, but
    // for a folder that is itself called `node_modules`.
    let vendor = bin
        .ancestors()
        .filter(|d| d.file_name().is_none_or(|n| n != "node_modules"))
        .map(|d| d.join("node_modules").join("@openai").join(package))
        .find(|p| p.join("package.json").is_file())
        .map_or_else(|| root.join("vendor"), |p| p.join("vendor"));
    let program = vendor.join(triple).join("bin").join("codex");
    program.is_file().then_some(program)
}

fn error_event(message: String) -> Vec<Event> {
    vec![Event::error(message)]
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// An npm install of Codex in `modules`: the launcher's package, and
    /// the platform package at `platform` (a `node_modules` folder) when
    /// given; the launcher's real path.
    fn install(modules: &Path, platform: Option<&Path>) -> PathBuf {
        let root = modules.join("@openai").join("codex");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("package.json"), r#"{"name":"@openai/codex"}"#).unwrap();
        std::fs::write(root.join("bin").join("codex.js"), "// launcher").unwrap();
        if let Some(platform) = platform {
            let package = platform.join("@openai").join("codex-linux-x64");
            let bin = package.join("vendor/x86_64-unknown-linux-musl/bin");
            std::fs::create_dir_all(&bin).unwrap();
            std::fs::write(package.join("package.json"), "{}").unwrap();
            std::fs::write(bin.join("codex"), "native").unwrap();
        }
        root.join("bin").join("codex.js")
    }

    #[test]
    fn the_native_program_is_found_where_the_launcher_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        // Beside the launcher's package (npm's usual layout).
        let modules = dir.path().join("a").join("node_modules");
        let launcher = install(&modules, Some(&modules));
        assert_eq!(
            native_program(&launcher).unwrap(),
            modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
        );
        // Nested in the launcher's own package, which Node looks in first.
        let modules = dir.path().join("b").join("node_modules");
        let nested = modules.join("@openai").join("codex").join("node_modules");
        let launcher = install(&modules, Some(&nested));
        assert!(native_program(&launcher).unwrap().starts_with(&nested));
        // In the package's own `vendor`, when no platform package is found.
        let modules = dir.path().join("c").join("node_modules");
        let launcher = install(&modules, None);
        assert_eq!(native_program(&launcher), None, "nothing there yet");
        let own = modules.join("@openai/codex/vendor/x86_64-unknown-linux-musl/bin");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("codex"), "native").unwrap();
        assert_eq!(native_program(&launcher).unwrap(), own.join("codex"));
    }

    #[test]
    fn only_codexs_own_launcher_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("node_modules");
        let launcher = install(&modules, Some(&modules));
        // Another package's `bin/codex.js`.
        std::fs::write(
            modules.join("@openai/codex/package.json"),
            r#"{"name":"not-codex"}"#,
        )
        .unwrap();
        assert_eq!(native_program(&launcher), None);
        // A native program, or anything else, is started as it is.
        let native =
            modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
        assert_eq!(native_program(&native), None);
        assert_eq!(native_program(Path::new("/usr/bin/codex")), None);
    }

    #[test]
    fn codex_starts_from_its_own_program_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let modules = dir.path().join("node_modules");
        let launcher = install(&modules, Some(&modules));
        // npm's launcher: the native program, with its package folder.
        let own = Codex.own_program(&launcher).unwrap();
        let vendor = modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl");
        assert_eq!(own.program, vendor.join("bin").join("codex"));
        assert_eq!(own.package, Some(vendor));
        // A native program found directly (a release download, a
        // package manager's): itself.
        let native = dir.path().join("codex");
        std::fs::copy(which::which("true").unwrap(), &native).unwrap();
        let own = Codex.own_program(&native).unwrap();
        assert_eq!((own.program, own.package), (native, None));
        // A script (a version manager's shim): refused, with why.
        let shim = dir.path().join("shim");
        std::fs::write(&shim, "#!/bin/sh\nexec codex \"$@\"\n").unwrap();
        let why = Codex.own_program(&shim).unwrap_err();
        assert!(why.contains("neither Codex's own program"), "{why}");
    }
}
