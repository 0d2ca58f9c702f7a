//! What orch knows of each CLI, by kind: the flags and environment the
//! ToolSet translation controls, credentials, the default program.

use crate::model::{AgentKind, Permission};

/// What a raw flag would interfere with: a ToolSet field, or `model` /
/// `output` (the model and the event stream orch sets itself).
pub(crate) type FieldName = &'static str;

/// The agent CLIs orch is tested with, at their pins: the one place their
/// versions are written (`scripts/install-agent-clis.sh` installs them,
/// exported CI jobs install them from its lock).
pub(crate) const CLIS_PACKAGE_JSON: &str = include_str!("../../ci/agent-clis/package.json");

/// What orch knows of each CLI's command line, environment and
/// credentials, asked of an [`AgentKind`]. These facts belong to the agent
/// CLIs, so they live here and not in the model: bring the trait into scope
/// (`use crate::agents::CliFacts`) to ask them.
pub(crate) trait CliFacts: Copy {
    /// The credentials this CLI reads (the first is the usual one).
    fn credentials(self) -> &'static [&'static str];

    /// The program looked up on PATH when the agent names no `binary`.
    fn default_binary(self) -> Option<&'static str>;

    /// The variables the CLI reads to reach its model (credentials, base
    /// URLs), passed through to it unless settings say otherwise.
    fn default_pass_env(self) -> &'static [&'static str];

    /// The CLI's npm package.
    fn npm_package(self) -> Option<&'static str>;

    /// The version orch is tested with: its pin in
    /// `ci/agent-clis/package.json`, read when orch was built.
    fn pinned_version(self) -> Option<&'static str>;

    /// Whether the CLI confines writes at the operating-system level for this
    /// permission, so a write tool under it cannot escape (Codex's own
    /// sandbox, docs/enforcement.md).
    fn confines_writes(self, permission: Permission) -> bool;

    /// Raw flags the ToolSet translation controls for this CLI, with the
    /// field they belong to. A mode's `flags` may not contain them.
    fn controlled_flags(self) -> &'static [(&'static str, FieldName)];

    /// Environment variables an agent's `env` may not set, with why: orch
    /// sets them itself (its own home, temporary folder and the CLI's config
    /// directory, so nothing of the user's is read), or they change what the
    /// CLI allows, which configuration, plugins, hooks or MCP servers it
    /// loads, which tools it offers, or where it runs commands (read from
    /// each pinned CLI's own code). A name ending in `*` stands for every
    /// name it starts.
    fn controlled_env(self) -> &'static [(&'static str, &'static str)];

    /// Why an agent's `env` may not set `name`, if it may not (see
    /// [`AgentKind::controlled_env`]). Besides each CLI's own list, no LLM
    /// agent may be given variables that load code into it or into the
    /// programs it starts at startup (`NODE_OPTIONS`, `LD_PRELOAD`, git's
    /// configuration by environment).
    fn controlled_env_reason(self, name: &str) -> Option<&'static str>;

    /// For `-c key=value` style config overrides (Codex), the config keys the
    /// ToolSet translation owns.
    fn controlled_config_prefixes(self) -> &'static [(&'static str, FieldName)];

    /// If a raw flag touches something the ToolSet controls, the field it
    /// belongs to. Flags are matched the way the CLI's parser reads them:
    /// `--flag value` and `--flag=value`; for yargs CLIs also `--camelCase`
    /// and `--no-flag`; short options alone, run together (`-ab`) or with
    /// their value attached (`-sVALUE`, `-s=VALUE`); and for Codex every
    /// spelling of `-c key=value` (`-c=k=v`, `-ck=v`, `--config=k=v`),
    /// checked by key. A bare `--` is refused too: it would turn orch's own
    /// arguments after it into plain words.
    fn controlled_field(self, flag: &str, next: Option<&str>) -> Option<FieldName>;
}

impl CliFacts for AgentKind {
    fn default_pass_env(self) -> &'static [&'static str] {
        match self {
            AgentKind::Claude => &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            AgentKind::Codex => &["OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"],
            AgentKind::Gemini => &[
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "GOOGLE_GEMINI_BASE_URL",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
            ],
            AgentKind::Opencode => &[
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "GEMINI_API_KEY",
                "OPENROUTER_API_KEY",
            ],
            AgentKind::Copilot => &[
                "COPILOT_GITHUB_TOKEN",
                "GH_TOKEN",
                "GITHUB_TOKEN",
                "COPILOT_OFFLINE",
                "COPILOT_PROVIDER_BASE_URL",
                "COPILOT_PROVIDER_API_KEY",
                "COPILOT_PROVIDER_TYPE",
                "COPILOT_MODEL",
            ],
            AgentKind::Command => &[],
        }
    }

    fn npm_package(self) -> Option<&'static str> {
        Some(match self {
            AgentKind::Claude => "@anthropic-ai/claude-code",
            AgentKind::Codex => "@openai/codex",
            AgentKind::Gemini => "@google/gemini-cli",
            AgentKind::Opencode => "opencode-ai",
            AgentKind::Copilot => "@github/copilot",
            AgentKind::Command => return None,
        })
    }

    fn pinned_version(self) -> Option<&'static str> {
        static PINS: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
            serde_json::from_str(CLIS_PACKAGE_JSON).unwrap_or_default()
        });
        PINS["dependencies"][self.npm_package()?].as_str()
    }

    fn credentials(self) -> &'static [&'static str] {
        match self {
            AgentKind::Claude => &["ANTHROPIC_API_KEY"],
            AgentKind::Codex => &["OPENAI_API_KEY", "CODEX_API_KEY"],
            AgentKind::Gemini => &["GEMINI_API_KEY"],
            // OpenCode reads the key of the provider its model uses.
            AgentKind::Opencode => &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
            AgentKind::Copilot => &["COPILOT_GITHUB_TOKEN"],
            AgentKind::Command => &[],
        }
    }

    fn default_binary(self) -> Option<&'static str> {
        match self {
            AgentKind::Command => None,
            other => Some(other.as_str()),
        }
    }

    fn confines_writes(self, permission: Permission) -> bool {
        matches!(self, AgentKind::Codex) && permission != Permission::FullAccess
    }

    fn controlled_flags(self) -> &'static [(&'static str, FieldName)] {
        match self {
            AgentKind::Claude => &[
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
            AgentKind::Codex => &[
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
            AgentKind::Gemini => &[
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
            AgentKind::Opencode => &[
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
            AgentKind::Copilot => &[
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
            AgentKind::Command => &[],
        }
    }

    fn controlled_env(self) -> &'static [(&'static str, &'static str)] {
        const ORCH: &str = "orch sets it for each attempt";
        const WIDENS: &str = "it changes what the CLI allows, which tools it offers or which configuration, plugins, hooks or MCP servers it loads";
        match self {
            AgentKind::Claude => &[
                ("HOME", ORCH),
                ("TMPDIR", ORCH),
                ("CLAUDE_CONFIG_DIR", ORCH),
                ("DISABLE_AUTOUPDATER", ORCH),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", ORCH),
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
                ("CLAUDE_CODE_SHELL", WIDENS),
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
            AgentKind::Codex => &[
                ("HOME", ORCH),
                ("TMPDIR", ORCH),
                ("CODEX_HOME", ORCH),
                ("XDG_CONFIG_HOME", WIDENS),
                ("CODEX_SANDBOX*", WIDENS),
                ("CODEX_EXEC_SERVER_URL", WIDENS),
                ("CODEX_MANAGED_PACKAGE_ROOT", WIDENS),
                ("CODEX_SQLITE_HOME", WIDENS),
                ("CODEX_BWRAP_SHA256", WIDENS),
            ],
            AgentKind::Gemini => &[
                ("HOME", ORCH),
                ("TMPDIR", ORCH),
                ("GEMINI_CLI_HOME", ORCH),
                ("GEMINI_CLI_NO_RELAUNCH", ORCH),
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
            AgentKind::Opencode => &[
                ("HOME", ORCH),
                ("TMPDIR", ORCH),
                ("OPENCODE_CONFIG_CONTENT", ORCH),
                ("OPENCODE_DISABLE_*", ORCH),
                ("XDG_CONFIG_HOME", ORCH),
                ("XDG_DATA_HOME", ORCH),
                ("XDG_CACHE_HOME", ORCH),
                ("XDG_STATE_HOME", ORCH),
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
            AgentKind::Copilot => &[
                ("HOME", ORCH),
                ("TMPDIR", ORCH),
                ("COPILOT_HOME", ORCH),
                ("COPILOT_AUTO_UPDATE", ORCH),
                ("COPILOT_CACHE_HOME", ORCH),
                ("XDG_CONFIG_HOME", ORCH),
                ("XDG_STATE_HOME", ORCH),
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
            AgentKind::Command => &[("ORCH_PROMPT_FILE", ORCH)],
        }
    }

    fn controlled_env_reason(self, name: &str) -> Option<&'static str> {
        const INJECTS: &str = "it loads code into the CLI or the programs it starts";
        const EVERY_LLM: &[(&str, &str)] = &[
            ("NODE_OPTIONS", INJECTS),
            ("BUN_OPTIONS", INJECTS),
            ("LD_PRELOAD", INJECTS),
            ("LD_AUDIT", INJECTS),
            ("LD_LIBRARY_PATH", INJECTS),
            ("GIT_CONFIG*", INJECTS),
            ("GIT_EXEC_PATH", INJECTS),
        ];
        let shared: &[(&str, &str)] = if self.is_llm() { EVERY_LLM } else { &[] };
        self.controlled_env()
            .iter()
            .chain(shared)
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *pattern,
            })
            .map(|(_, why)| *why)
    }

    fn controlled_config_prefixes(self) -> &'static [(&'static str, FieldName)] {
        match self {
            AgentKind::Codex => &[
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
            _ => &[],
        }
    }

    fn controlled_field(self, flag: &str, next: Option<&str>) -> Option<FieldName> {
        let find = |name: &str| {
            self.controlled_flags()
                .iter()
                .find(|(f, _)| match f.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => *f == name,
                })
                .map(|(_, field)| *field)
        };
        if self == AgentKind::Command {
            return None;
        }
        if flag == "--" {
            return Some("output");
        }
        if !flag.starts_with('-') {
            return self.controlled_word(flag);
        }
        if let Some(long) = flag.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if let Some(field) = find(&format!("--{name}")) {
                return Some(field);
            }
            if self.yargs() {
                // yargs reads any spelling whose camelCase is an option's
                // (`--ADMIN-POLICY`, `--admin--policy`, `--adminPolicy`), and
                // `--no-x` for every option x.
                let name = name.strip_prefix("no-").unwrap_or(name);
                let camel = yargs_camel_case(name);
                if let Some((_, field)) = self.controlled_flags().iter().find(|(f, _)| {
                    f.strip_prefix("--")
                        .is_some_and(|long| yargs_camel_case(long) == camel)
                }) {
                    return Some(field);
                }
            }
            if self == AgentKind::Codex && name == "config" {
                return self.config_field(value.or(next)?);
            }
            return None;
        }
        let short = flag.strip_prefix('-').filter(|s| !s.is_empty())?;
        for (i, c) in short.char_indices() {
            if !c.is_ascii_alphanumeric() {
                break;
            }
            if self == AgentKind::Codex && c == 'c' {
                let rest = &short[i + c.len_utf8()..];
                let value = rest.strip_prefix('=').unwrap_or(rest);
                return self.config_field(if value.is_empty() { next? } else { value });
            }
            if let Some(field) = find(&format!("-{c}")) {
                return Some(field);
            }
        }
        None
    }
}

impl AgentKind {
    /// Whether the CLI parses its command line with yargs, which also
    /// accepts each `--kebab-case` option as `--camelCase` and a boolean
    /// one as `--no-option`.
    fn yargs(self) -> bool {
        matches!(self, AgentKind::Gemini | AgentKind::Opencode)
    }

    /// A bare word in raw flags that the CLI reads as more than a prompt
    /// word: a Codex subcommand (`review`, `resume`, `fork`, `help`), or a
    /// `cc://` address that makes Claude dispatch its subcommands.
    fn controlled_word(self, word: &str) -> Option<FieldName> {
        match self {
            AgentKind::Codex
                if ["review", "resume", "fork", "help", "apply", "mcp"].contains(&word) =>
            {
                Some("output")
            }
            AgentKind::Claude if word.starts_with("cc://") || word.starts_with("cc+unix://") => {
                Some("output")
            }
            _ => None,
        }
    }

    /// For a Codex `key=value` config override, the field its key belongs
    /// to (keys compared without quotes and spaces).
    fn config_field(self, kv: &str) -> Option<FieldName> {
        let key: String = kv
            .split('=')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
            .collect();
        self.controlled_config_prefixes()
            .iter()
            .find(|(p, _)| {
                key == *p || key.starts_with(&format!("{p}.")) || key.starts_with(&format!("{p}_"))
            })
            .map(|(_, f)| *f)
    }
}

/// An option name as yargs-parser's `camelCase` turns it: a name in one
/// case throughout is lower-cased first; then every `-` and `_` is dropped
/// and the letter after it upper-cased (`approval-mode`, `APPROVAL-MODE`,
/// `approval--mode` and `approvalMode` all give `approvalMode`).
fn yargs_camel_case(name: &str) -> String {
    let mixed = name != name.to_lowercase() && name != name.to_uppercase();
    let name = if mixed {
        name.to_string()
    } else {
        name.to_lowercase()
    };
    if !name.contains(['-', '_']) {
        return name;
    }
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for (i, c) in name.chars().enumerate() {
        if upper {
            upper = false;
            let c = c.to_ascii_uppercase();
            if i != 0 && (c == '-' || c == '_') {
                upper = true;
            } else if c != '-' && c != '_' {
                out.push(c);
            }
            continue;
        }
        if i != 0 && (c == '-' || c == '_') {
            upper = true;
        } else if c != '-' && c != '_' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cli_has_its_package_and_pin_and_a_command_has_none() {
        for kind in AgentKind::ALL {
            let facts = (kind.npm_package(), kind.pinned_version());
            if kind.is_llm() {
                assert!(facts.0.is_some() && facts.1.is_some(), "{kind}");
                assert!(!kind.default_pass_env().is_empty(), "{kind}");
            } else {
                assert_eq!(facts, (None, None));
            }
        }
        let pkg: serde_json::Value = serde_json::from_str(CLIS_PACKAGE_JSON).unwrap();
        assert_eq!(
            AgentKind::Claude.pinned_version(),
            pkg["dependencies"]["@anthropic-ai/claude-code"].as_str()
        );
    }

    #[test]
    fn controlled_flags_are_found_in_every_spelling() {
        let c = AgentKind::Claude;
        assert_eq!(c.controlled_field("--allowedTools", None), Some("internal"));
        assert_eq!(c.controlled_field("--max-turns=3", None), Some("max_turns"));
        assert_eq!(c.controlled_field("--effort", Some("high")), None);
        let x = AgentKind::Codex;
        assert_eq!(
            x.controlled_field("-c", Some("sandbox_mode=\"danger-full-access\"")),
            Some("permission")
        );
        assert_eq!(
            x.controlled_field("-c", Some("model_reasoning_effort=high")),
            None
        );
        assert_eq!(
            x.controlled_field("--config=mcp_servers.x.command=\"y\"", None),
            Some("mcp")
        );
    }

    #[test]
    fn flags_spelled_around_are_found_as_each_parser_reads_them() {
        let x = AgentKind::Codex;
        for (flag, next) in [
            ("-c=sandbox_mode=danger-full-access", None),
            ("-csandbox_mode=danger-full-access", None),
            ("-c", Some("'sandbox_mode'=x")),
            ("-c", Some(" sandbox_mode =x")),
            ("--config", Some("profile=evil")),
            (
                "-c",
                Some("profiles.evil.sandbox_mode=\"danger-full-access\""),
            ),
            ("-sdanger-full-access", None),
            ("-s=danger-full-access", None),
            ("--sandbox=danger-full-access", None),
        ] {
            assert_eq!(
                x.controlled_field(flag, next),
                Some("permission"),
                "{flag} {next:?}"
            );
        }
        assert_eq!(
            x.controlled_field("-c", Some("model_reasoning_effort=high")),
            None
        );
        let g = AgentKind::Gemini;
        assert_eq!(
            g.controlled_field("--adminPolicy", Some("p.toml")),
            Some("internal")
        );
        assert_eq!(
            g.controlled_field("--approvalMode=yolo", None),
            Some("permission")
        );
        assert_eq!(g.controlled_field("--no-sandbox", None), Some("permission"));
        assert_eq!(g.controlled_field("-y", None), Some("permission"));
        assert_eq!(
            g.controlled_field("-dy", None),
            Some("permission"),
            "run together"
        );
        assert_eq!(
            AgentKind::Opencode.controlled_field("--dangerouslySkipPermissions", None),
            Some("permission")
        );
        assert_eq!(
            AgentKind::Copilot.controlled_field("--trust-folder", Some(".")),
            Some("permission")
        );
        for kind in [AgentKind::Claude, AgentKind::Gemini, AgentKind::Copilot] {
            assert_eq!(kind.controlled_field("--", None), Some("output"), "{kind}");
        }
        assert_eq!(
            AgentKind::Claude.controlled_field("--effort", Some("high")),
            None
        );
    }

    #[test]
    fn controlled_env_names_and_prefixes() {
        assert!(
            AgentKind::Copilot
                .controlled_env_reason("COPILOT_ALLOW_ALL")
                .is_some()
        );
        assert!(
            AgentKind::Claude
                .controlled_env_reason("CLAUDE_CODE_PLUGIN_SEED_DIR")
                .is_some()
        );
        assert!(
            AgentKind::Opencode
                .controlled_env_reason("OPENCODE_EXPERIMENTAL_LSP_TOOL")
                .is_some()
        );
        assert!(
            AgentKind::Gemini
                .controlled_env_reason("GEMINI_CLI_IDE_SERVER_STDIO_COMMAND")
                .is_some()
        );
        // What a pipeline legitimately sets stays allowed.
        for (kind, name) in [
            (AgentKind::Claude, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"),
            (AgentKind::Claude, "CLAUDE_CODE_MAX_RETRIES"),
            (AgentKind::Claude, "DISABLE_TELEMETRY"),
            (AgentKind::Codex, "MOCK_API_KEY"),
            (AgentKind::Opencode, "OPENCODE_CONFIG"),
            (AgentKind::Copilot, "COPILOT_MODEL"),
        ] {
            assert_eq!(kind.controlled_env_reason(name), None, "{kind} {name}");
        }
    }

    #[test]
    fn the_bypasses_found_in_the_pinned_clis_are_refused() {
        let g = AgentKind::Gemini;
        for flag in [
            "--ADMIN-POLICY",
            "--admin-Policy",
            "--admin--policy",
            "--admin-policy-",
            "--admin-_policy",
            "--APPROVAL-MODE",
            "--INCLUDE-DIRECTORIES",
            "--no-skip-trust",
            "--fake-responses",
        ] {
            assert!(g.controlled_field(flag, Some("x")).is_some(), "{flag}");
        }
        // Spellings yargs does not read as an option are not options.
        assert_eq!(g.controlled_field("--Admin-policy", Some("x")), None);
        let o = AgentKind::Opencode;
        for flag in [
            "--yolo",
            "-f",
            "--file=/etc/hostname",
            "--no-pure",
            "--port",
        ] {
            assert!(o.controlled_field(flag, Some("x")).is_some(), "{flag}");
        }
        let x = AgentKind::Codex;
        assert!(
            x.controlled_field("-c", Some("approvals_reviewer=\"auto_review\""))
                .is_some()
        );
        assert!(x.controlled_field("--not-so-yolo", None).is_some());
        assert!(x.controlled_field("review", None).is_some(), "a subcommand");
        assert!(x.controlled_field("-o/tmp/f", None).is_some());
        let c = AgentKind::Copilot;
        for flag in [
            "--config-dir",
            "--prefer-version",
            "--ahp-host",
            "--server",
            "--no-sandbox",
        ] {
            assert!(c.controlled_field(flag, Some("x")).is_some(), "{flag}");
        }
        let cl = AgentKind::Claude;
        for flag in [
            "--safe-mode",
            "--rc",
            "--cloud",
            "--handle-uri",
            "cc://127.0.0.1:1",
        ] {
            assert!(cl.controlled_field(flag, Some("x")).is_some(), "{flag}");
        }
        assert_eq!(cl.controlled_field("hello", None), None, "a prompt word");
        for (kind, name) in [
            (AgentKind::Claude, "CLAUDE_CODE_SAFE_MODE"),
            (AgentKind::Claude, "CLAUDE_CODE_BUBBLEWRAP"),
            (AgentKind::Claude, "BUN_OPTIONS"),
            (AgentKind::Gemini, "NODE_OPTIONS"),
            (AgentKind::Codex, "GIT_CONFIG_PARAMETERS"),
            (AgentKind::Copilot, "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS"),
            (AgentKind::Copilot, "COPILOT_PKG_CACHE_HOME"),
            (AgentKind::Opencode, "OPENCODE_AUTH_CONTENT"),
        ] {
            assert!(kind.controlled_env_reason(name).is_some(), "{kind} {name}");
        }
        // A plain command is the author's own program: its env is its own.
        assert_eq!(
            AgentKind::Command.controlled_env_reason("NODE_OPTIONS"),
            None
        );
    }

    #[test]
    fn only_codex_confines_writes() {
        assert!(AgentKind::Codex.confines_writes(Permission::ReadOnly));
        assert!(!AgentKind::Claude.confines_writes(Permission::ReadOnly));
    }
}
