//! The kinds of agent orch can drive.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::toolset::Permission;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Copilot,
    Command,
}

/// What a raw flag would interfere with: a ToolSet field, or `model` /
/// `output` (the model and the event stream orch sets itself).
pub type FieldName = &'static str;

impl AgentKind {
    pub const ALL: [AgentKind; 6] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Opencode,
        AgentKind::Copilot,
        AgentKind::Command,
    ];
    pub const NAMES: &'static [&'static str] = &[
        "claude", "codex", "gemini", "opencode", "copilot", "command",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Opencode => "opencode",
            AgentKind::Copilot => "copilot",
            AgentKind::Command => "command",
        }
    }

    /// A kind usable by name in `agents = [...]` without an `[agents.X]` table.
    pub fn builtin(name: &str) -> Option<Self> {
        Self::parse(name).filter(|k| *k != AgentKind::Command)
    }

    /// Whether this kind is an LLM agent (it needs a prompt and gets tools).
    pub fn is_llm(self) -> bool {
        self != AgentKind::Command
    }

    /// The program looked up on PATH when the agent names no `binary`.
    pub fn default_binary(self) -> Option<&'static str> {
        match self {
            AgentKind::Command => None,
            other => Some(other.as_str()),
        }
    }

    /// Whether the CLI confines writes at the operating-system level for this
    /// permission, so a write tool under it cannot escape (agent-clis.md rule 4).
    pub fn confines_writes(self, permission: Permission) -> bool {
        matches!(self, AgentKind::Codex) && permission != Permission::FullAccess
    }

    /// Raw flags the ToolSet translation controls for this CLI, with the
    /// field they belong to. A mode's `flags` may not contain them.
    pub fn controlled_flags(self) -> &'static [(&'static str, FieldName)] {
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
                ("--acp", "output"),
                ("--output-format", "output"),
                ("-p", "output"),
                ("--prompt", "output"),
                ("--model", "model"),
            ],
            AgentKind::Command => &[],
        }
    }

    /// Environment variables an agent's `env` may not set, with why: orch
    /// sets them itself (its own home, temporary folder and the CLI's config
    /// directory, so nothing of the user's is read), or they change what the
    /// CLI allows, which configuration, plugins, hooks or MCP servers it
    /// loads, which tools it offers, or where it runs commands (read from
    /// each pinned CLI's own code). A name ending in `*` stands for every
    /// name it starts.
    pub fn controlled_env(self) -> &'static [(&'static str, &'static str)] {
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
            ],
            AgentKind::Command => &[("ORCH_PROMPT_FILE", ORCH)],
        }
    }

    /// Why an agent's `env` may not set `name`, if it may not (see
    /// [`AgentKind::controlled_env`]).
    pub fn controlled_env_reason(self, name: &str) -> Option<&'static str> {
        self.controlled_env()
            .iter()
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *pattern,
            })
            .map(|(_, why)| *why)
    }

    /// For `-c key=value` style config overrides (Codex), the config keys the
    /// ToolSet translation owns.
    pub fn controlled_config_prefixes(self) -> &'static [(&'static str, FieldName)] {
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
            ],
            _ => &[],
        }
    }

    /// Whether the CLI parses its command line with yargs, which also
    /// accepts each `--kebab-case` option as `--camelCase` and a boolean
    /// one as `--no-option`.
    fn yargs(self) -> bool {
        matches!(self, AgentKind::Gemini | AgentKind::Opencode)
    }

    /// If a raw flag touches something the ToolSet controls, the field it
    /// belongs to. Flags are matched the way the CLI's parser reads them:
    /// `--flag value` and `--flag=value`; for yargs CLIs also `--camelCase`
    /// and `--no-flag`; short options alone, run together (`-ab`) or with
    /// their value attached (`-sVALUE`, `-s=VALUE`); and for Codex every
    /// spelling of `-c key=value` (`-c=k=v`, `-ck=v`, `--config=k=v`),
    /// checked by key. A bare `--` is refused too: it would turn orch's own
    /// arguments after it into plain words.
    pub fn controlled_field(self, flag: &str, next: Option<&str>) -> Option<FieldName> {
        let find = |name: &str| {
            self.controlled_flags()
                .iter()
                .find(|(f, _)| *f == name)
                .map(|(_, field)| *field)
        };
        if self == AgentKind::Command {
            return None;
        }
        if flag == "--" {
            return Some("output");
        }
        if let Some(long) = flag.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let mut spellings = vec![name.to_string()];
            if self.yargs() {
                let kebab = kebab_case(name);
                spellings.push(kebab.clone());
                if let Some(positive) = kebab.strip_prefix("no-") {
                    spellings.push(positive.to_string());
                }
            }
            if let Some(field) = spellings.iter().find_map(|s| find(&format!("--{s}"))) {
                return Some(field);
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

/// `approvalMode` as `approval-mode` (yargs accepts both).
fn kebab_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn only_codex_confines_writes() {
        assert!(AgentKind::Codex.confines_writes(Permission::ReadOnly));
        assert!(!AgentKind::Claude.confines_writes(Permission::ReadOnly));
    }
}
