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

/// Why an agent's `env` may not set a variable: orch sets it itself.
pub(super) const ORCH_SETS: &str = "orch sets it for each attempt";

/// Why an agent's `env` may not set a variable: it widens what the CLI may do.
pub(super) const WIDENS: &str = "it changes what the CLI allows, which tools it offers or which configuration, plugins, hooks or MCP servers it loads";

/// Every fact about one CLI that is a table, written in its adapter's own
/// file (its `TABLE`, returned by [`super::adapter::Adapter::table`]):
/// updating a CLI's flags, environment or package touches that file only.
/// [`CliFacts`] reads them.
#[derive(Debug)]
pub struct CliTable {
    /// The CLI's npm package (none for a plain command); its pinned
    /// version is read from `ci/agent-clis/package.json`.
    pub(crate) npm_package: Option<&'static str>,
    /// The credentials this CLI reads (the first is the usual one).
    pub(crate) credentials: &'static [&'static str],
    /// The variables the CLI reads to reach its model, passed through
    /// unless settings say otherwise.
    pub(crate) default_pass_env: &'static [&'static str],
    /// Raw flags the ToolSet translation controls, with their field (a
    /// name ending in `*` stands for every flag it starts).
    pub(crate) controlled_flags: &'static [(&'static str, FieldName)],
    /// Variables an agent's `env` may not set, with why (a name ending in
    /// `*` stands for every name it starts).
    pub(crate) controlled_env: &'static [(&'static str, &'static str)],
    /// Config keys of a `key=value` override the ToolSet owns.
    pub(crate) controlled_config_prefixes: &'static [(&'static str, FieldName)],
    /// The option that takes a `key=value` config override, long and
    /// short (Codex's `--config`, `-c`).
    pub(crate) config_option: Option<(&'static str, char)>,
    /// Bare words in raw flags the CLI reads as more than a prompt word: a
    /// subcommand, an address that dispatches one (a word ending in `*`
    /// stands for every word it starts).
    pub(crate) controlled_words: &'static [&'static str],
    /// Whether the CLI parses its command line with yargs.
    pub(crate) yargs: bool,
    /// Whether the CLI confines writes at the OS level below
    /// `full-access` (Codex's own sandbox).
    pub(crate) confines_writes: bool,
    /// Variables naming the shell the CLI starts the model's commands
    /// with (it looks `bash` up on `PATH` otherwise): a confined CLI's
    /// point at orch's (see [`crate::confine::shell`]).
    pub(crate) shell_vars: &'static [&'static str],
    /// Folders of its own (relative to the attempt's directory) that the
    /// git the CLI starts writes, besides the commands' (OpenCode's
    /// snapshot repository): made before it starts.
    pub(crate) git_writes: &'static [&'static str],
    /// Variables naming folders the CLI loads and runs code from, which
    /// a user may set (Copilot CLI's unpacked package, with the ripgrep it
    /// runs): one the agent may write, or that leads into such a folder,
    /// keeps the attempt from starting.
    pub(crate) code_from: &'static [&'static str],
}

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
        self.table().default_pass_env
    }

    fn npm_package(self) -> Option<&'static str> {
        self.table().npm_package
    }

    fn pinned_version(self) -> Option<&'static str> {
        static PINS: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
            serde_json::from_str(CLIS_PACKAGE_JSON).unwrap_or_default()
        });
        PINS["dependencies"][self.npm_package()?].as_str()
    }

    fn credentials(self) -> &'static [&'static str] {
        self.table().credentials
    }

    fn default_binary(self) -> Option<&'static str> {
        self.is_llm().then(|| self.as_str())
    }

    fn confines_writes(self, permission: Permission) -> bool {
        self.table().confines_writes && permission != Permission::FullAccess
    }

    fn controlled_flags(self) -> &'static [(&'static str, FieldName)] {
        self.table().controlled_flags
    }

    fn controlled_env(self) -> &'static [(&'static str, &'static str)] {
        self.table().controlled_env
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
        self.table().controlled_config_prefixes
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
        if !self.is_llm() {
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
            if self
                .table()
                .config_option
                .is_some_and(|(long, _)| long == name)
            {
                return self.config_field(value.or(next)?);
            }
            return None;
        }
        let short = flag.strip_prefix('-').filter(|s| !s.is_empty())?;
        for (i, c) in short.char_indices() {
            if !c.is_ascii_alphanumeric() {
                break;
            }
            if self
                .table()
                .config_option
                .is_some_and(|(_, short)| short == c)
            {
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
    /// The facts of its adapter's table.
    fn table(self) -> &'static CliTable {
        super::adapter::adapter(self).table()
    }

    /// Whether the CLI parses its command line with yargs, which also
    /// accepts each `--kebab-case` option as `--camelCase` and a boolean
    /// one as `--no-option`.
    fn yargs(self) -> bool {
        self.table().yargs
    }

    /// A bare word in raw flags that the CLI reads as more than a prompt
    /// word (see [`CliTable::controlled_words`]).
    fn controlled_word(self, word: &str) -> Option<FieldName> {
        self.table()
            .controlled_words
            .iter()
            .any(|w| match w.strip_suffix('*') {
                Some(prefix) => word.starts_with(prefix),
                None => word == *w,
            })
            .then_some("output")
    }

    /// For a `key=value` config override (Codex's `-c`), the field its key belongs
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
