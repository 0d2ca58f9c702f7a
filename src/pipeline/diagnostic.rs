//! Diagnostics for pipeline files: what went wrong, where, and how to fix it.
//!
//! Every problem found while loading or validating a pipeline is one
//! [`Diagnostic`]: a [`Problem`] (the message, code and help), the file it is
//! in, the byte span it points at, and a severity. They render through miette
//! (underlined source, help line) or as JSON (`orch validate --format json`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use miette::{LabeledSpan, MietteSpanContents, SourceCode, SourceSpan, SpanContents};
use serde::Serialize;

use crate::model::Location;

/// A source file that diagnostics point into: its display name and text.
#[derive(Debug)]
pub struct SourceFile {
    pub name: Arc<str>,
    pub(crate) text: String,
    /// Where each line starts, 32-bit (a pipeline file is under 4 GiB:
    /// `load` refuses more; in a larger text, a profile say, every start
    /// past 4 GiB reads as the largest, so positions there show the last
    /// line, but nothing breaks).
    line_starts: Vec<u32>,
    /// The text as shown in rendered diagnostics, when it differs: control
    /// and bidirectional-override characters are replaced (same byte
    /// length) so a hostile file cannot send escape sequences to a terminal.
    shown: Option<String>,
    /// The line of the last offset asked about: validation asks in file
    /// order, so the next answer is usually on it or a few lines below (a
    /// binary search over a 100,000-phase file's million lines missed the
    /// cache on every step: 3% of validating it).
    last_line: LastLine,
}

/// [`SourceFile::line_col`]'s hint: not part of what the file is, so not
/// shown (two decodes of one text compare equal whatever they asked).
#[derive(Default)]
struct LastLine(AtomicUsize);

impl fmt::Debug for LastLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("_")
    }
}

/// Lines [`SourceFile::line_col`] looks down from the last one before it
/// searches.
const LINES_AHEAD: usize = 16;

/// Characters never echoed to a terminal from a file.
pub(crate) fn unsafe_to_show(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A byte that may start a char [`unsafe_to_show`] names, without a branch.
fn suspect_byte(b: u8) -> bool {
    ((b < 0x20) & (b != b'\n') & (b != b'\t') & (b != b'\r'))
        | (b == 0x7f)
        | (b == 0xc2)
        | (b == 0xe2)
}

impl SourceFile {
    pub(crate) fn new(name: impl Into<Arc<str>>, text: impl Into<String>) -> Arc<Self> {
        let text = text.into();
        // Counted first, so the index is allocated once and exactly (a
        // guess grew it to twice its size on long files).
        let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        let mut line_starts = Vec::with_capacity(lines + 1);
        line_starts.push(0);
        line_starts.extend(
            memchr::memchr_iter(b'\n', text.as_bytes())
                .map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX)),
        );
        // A byte scan first (decoding every char showed in profiles): every
        // char `unsafe_to_show` names is a C0 byte, DEL, or starts with 0xC2
        // (C1 controls) or 0xE2 (the bidi controls). Branch-free over
        // blocks, so it vectorises: `any` over bytes stops at each one and
        // did not (7 instructions a byte under callgrind).
        let suspect = text.as_bytes().chunks(4096).any(|block| {
            block
                .iter()
                .fold(false, |found, &b| found | suspect_byte(b))
        });
        let shown = (suspect && text.chars().any(unsafe_to_show)).then(|| {
            text.chars()
                .map(|c| {
                    if unsafe_to_show(c) {
                        "?".repeat(c.len_utf8())
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        });
        Arc::new(Self {
            name: name.into(),
            text,
            line_starts,
            shown,
            last_line: LastLine::default(),
        })
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let starts = &self.line_starts;
        // The line that holds `offset`: the last whose start is at or
        // before it.
        let holds = |l: usize| {
            starts.get(l).is_some_and(|&s| s as usize <= offset)
                && starts.get(l + 1).is_none_or(|&s| s as usize > offset)
        };
        let last = self.last_line.0.load(Ordering::Relaxed);
        let line = (last..last.saturating_add(LINES_AHEAD))
            // (An offset above the last line: searched at once.)
            .take_while(|&l| starts.get(l).is_some_and(|&s| s as usize <= offset))
            .find(|&l| holds(l))
            .unwrap_or_else(|| {
                starts
                    .partition_point(|&s| s as usize <= offset)
                    .saturating_sub(1)
            });
        self.last_line.0.store(line, Ordering::Relaxed);
        let start = (self.line_starts[line] as usize).min(offset);
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }

    /// A [`Location`] for a byte span of this file.
    pub(crate) fn location(&self, span: &Range<usize>) -> Location {
        Location::new(Arc::clone(&self.name), self.line_col(span.start), span)
    }
}

impl SourceCode for SourceFile {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, miette::MietteError> {
        let shown: &str = self.shown.as_deref().unwrap_or(&self.text);
        let inner = shown.read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.to_string(),
            inner.data(),
            *inner.span(),
            inner.line(),
            inner.column(),
            inner.line_count(),
        )))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Error,
    Warning,
}

/// What is wrong. The message is the `Display`; [`Problem::code`] and
/// [`Problem::help`] complete it.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Problem {
    #[error("could not read `{path}`: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("`{path}` is not UTF-8 text")]
    NotUtf8 { path: String },
    #[error("invalid TOML: {message}")]
    Syntax { message: String },
    #[error("unknown key `{key}` in {table}")]
    UnknownKey {
        key: String,
        table: String,
        suggestion: Option<String>,
        known: &'static [&'static str],
    },
    #[error("`{key}` must be {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("missing required key `{key}` in {table}")]
    MissingKey { key: &'static str, table: String },
    #[error("unsupported pipeline version {found}")]
    Version { found: String },
    #[error("invalid {what} name `{name}`")]
    BadName { what: &'static str, name: String },
    #[error("`{key}` must not be empty")]
    Empty { key: &'static str },
    #[error("phase `{name}` is defined more than once")]
    DuplicatePhase { name: String },
    #[error("agent `{name}` is listed more than once in phase `{phase}`")]
    DuplicateAgent { name: String, phase: String },
    #[error("unknown agent `{name}`")]
    UnknownAgent {
        name: String,
        suggestion: Option<String>,
    },
    #[error("unknown {what} `{value}`")]
    UnknownValue {
        what: &'static str,
        value: String,
        suggestion: Option<String>,
        allowed: &'static [&'static str],
    },
    #[error("agent `{name}` needs a `kind`")]
    MissingKind { name: String },
    #[error("agent `{name}` of kind `command` needs a `command`")]
    MissingCommand { name: String },
    #[error("`command` is only for agents of kind `command`, not `{kind}`")]
    CommandOnNonCommand { kind: String },
    #[error(
        "`binary` does not apply to agent `{name}` of kind `command`: its `command` names the program"
    )]
    BinaryOnCommand { name: String },
    #[error("phase `{phase}`'s contract: {reason}")]
    Contract { phase: String, reason: String },
    #[error("phase `{phase}` sets both `prompt` and `prompt_file`")]
    PromptConflict { phase: String },
    #[error("phase `{phase}` has no prompt for agent `{agent}`")]
    MissingPrompt { phase: String, agent: String },
    #[error("prompt file `{path}` cannot be read: {reason}")]
    PromptFile { path: String, reason: String },
    #[error("profile `{name}` not found (looked for {looked})")]
    ProfileMissing { name: String, looked: String },
    #[error("phase `{phase}` depends on unknown phase `{name}`")]
    UnknownDependency {
        phase: String,
        name: String,
        suggestion: Option<String>,
    },
    #[error("phase `{phase}` depends on itself")]
    SelfDependency { phase: String },
    #[error(
        "phase `{phase}` must leave `{path}` behind, but none of its agents may write: every one is read-only"
    )]
    UnwritableArtifact { phase: String, path: String },
    #[error("dependency cycle: {path}")]
    Cycle { path: String },
    #[error("`agent_tools.{agent}` names an agent that phase `{phase}` does not list")]
    AgentToolsNotInPhase { agent: String, phase: String },
    #[error("unknown tool `{name}`")]
    UnknownTool {
        name: String,
        suggestion: Option<String>,
    },
    #[error("malformed MCP tool name `{name}`: {reason}")]
    BadMcpName { name: String, reason: &'static str },
    #[error("`{name}`: orch's server has no tool `{tool}`")]
    UnknownOrchTool {
        name: String,
        tool: String,
        suggestion: Option<String>,
    },
    #[error("MCP tool `{name}` names server `{server}`, which is not declared")]
    UnknownMcpServer {
        name: String,
        server: String,
        suggestion: Option<String>,
        /// Where orch looked, for the help.
        looked: String,
    },
    #[error("{reason}")]
    Template { reason: String },
    #[error("`.mcp.json` cannot be read: {reason}")]
    McpJson { reason: String },
    #[error(
        "MCP tool `{name}` names server `{server}` from `.mcp.json`, which orch cannot pass on: {reason}"
    )]
    McpJsonEntry {
        name: String,
        server: String,
        reason: String,
    },
    #[error("MCP server `{server}`: {reason}")]
    BadMcpServer { server: String, reason: String },
    #[error("`{key}` must be at least {min}, found {found}")]
    TooSmall {
        key: String,
        min: i64,
        found: String,
    },
    #[error("`{key}` must be at most {max}, found {found}")]
    TooLarge {
        key: String,
        max: i64,
        found: String,
    },
    #[error("invalid duration `{value}`: {reason}")]
    BadDuration { value: String, reason: String },
    #[error(
        "read-only ToolSet for agent `{agent}` in phase `{phase}` includes `{tool}`, which writes"
    )]
    ReadOnlyWrites {
        agent: String,
        phase: String,
        tool: String,
        from_defaults: bool,
    },
    #[error("raw flag `{flag}` is controlled by orch for {kind} agents")]
    ControlledFlag {
        flag: String,
        kind: String,
        field: &'static str,
    },
    #[error("`{name}` in the environment of a {kind} agent is controlled by orch: {why}")]
    ControlledEnv {
        name: String,
        kind: String,
        why: String,
    },
    #[error("`{field}` is not enforced for agent `{agent}` ({kind}) in phase `{phase}`: {reason}")]
    Unenforceable {
        field: &'static str,
        agent: String,
        phase: String,
        kind: String,
        reason: String,
        strict: bool,
    },
    #[error(
        "judge `{judge}` of phase `{phase}` may start programs (`{tool}`), and {writer} may write the workspace before it judges: what the work planted there (a build script, a test, a hook) would run in the judge's process tree, which holds its verdict tools"
    )]
    JudgeRunsTheWork {
        judge: String,
        phase: String,
        tool: String,
        /// "`agent` (phase `p`)".
        writer: String,
        /// The judge is Codex, which reads through its shell.
        codex: bool,
        strict: bool,
    },
    #[error("{kind} has no tool for `{tool}` (agent `{agent}` in phase `{phase}`)")]
    UnsupportedTool {
        tool: String,
        kind: String,
        agent: String,
        phase: String,
    },
    #[error("{kind} would reject model `{model}`: {reason}")]
    BadModel {
        model: String,
        kind: String,
        reason: String,
    },
    #[error("invalid front matter in profile `{name}`: {reason}")]
    ProfileFrontMatter { name: String, reason: String },
}

impl Problem {
    /// The stable diagnostic code, `orch::pipeline::<class>`.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Problem::Unreadable { .. } => "orch::pipeline::unreadable",
            Problem::NotUtf8 { .. } => "orch::pipeline::not_utf8",
            Problem::Syntax { .. } => "orch::pipeline::syntax",
            Problem::UnknownKey { .. } => "orch::pipeline::unknown_key",
            Problem::WrongType { .. } => "orch::pipeline::wrong_type",
            Problem::MissingKey { .. } => "orch::pipeline::missing_key",
            Problem::Version { .. } => "orch::pipeline::version",
            Problem::BadName { .. } => "orch::pipeline::bad_name",
            Problem::Empty { .. } => "orch::pipeline::empty",
            Problem::DuplicatePhase { .. } => "orch::pipeline::duplicate_phase",
            Problem::DuplicateAgent { .. } => "orch::pipeline::duplicate_agent",
            Problem::UnknownAgent { .. } => "orch::pipeline::unknown_agent",
            Problem::UnknownValue { .. } => "orch::pipeline::unknown_value",
            Problem::MissingKind { .. } => "orch::pipeline::missing_kind",
            Problem::MissingCommand { .. } => "orch::pipeline::missing_command",
            Problem::CommandOnNonCommand { .. } => "orch::pipeline::command_on_agent",
            Problem::BinaryOnCommand { .. } => "orch::pipeline::binary_on_command",
            Problem::PromptConflict { .. } => "orch::pipeline::prompt_conflict",
            Problem::Contract { .. } => "orch::pipeline::contract",
            Problem::MissingPrompt { .. } => "orch::pipeline::missing_prompt",
            Problem::PromptFile { .. } => "orch::pipeline::prompt_file",
            Problem::ProfileMissing { .. } => "orch::pipeline::profile_missing",
            Problem::UnknownDependency { .. } => "orch::pipeline::unknown_dependency",
            Problem::SelfDependency { .. } => "orch::pipeline::self_dependency",
            Problem::UnwritableArtifact { .. } => "orch::pipeline::unwritable_artifact",
            Problem::Cycle { .. } => "orch::pipeline::cycle",
            Problem::AgentToolsNotInPhase { .. } => "orch::pipeline::agent_tools_key",
            Problem::UnknownTool { .. } => "orch::pipeline::unknown_tool",
            Problem::BadMcpName { .. } => "orch::pipeline::mcp_name",
            Problem::UnknownMcpServer { .. } => "orch::pipeline::unknown_mcp_server",
            Problem::McpJson { .. } => "orch::pipeline::mcp_json",
            Problem::Template { .. } => "orch::pipeline::template",
            Problem::McpJsonEntry { .. } => "orch::pipeline::mcp_json_entry",
            Problem::BadMcpServer { .. } => "orch::pipeline::mcp_server",
            Problem::UnknownOrchTool { .. } => "orch::pipeline::unknown_orch_tool",
            Problem::TooSmall { .. } => "orch::pipeline::too_small",
            Problem::TooLarge { .. } => "orch::pipeline::too_large",
            Problem::BadDuration { .. } => "orch::pipeline::duration",
            Problem::ReadOnlyWrites { .. } => "orch::pipeline::read_only_writes",
            Problem::ControlledFlag { .. } => "orch::pipeline::controlled_flag",
            Problem::ControlledEnv { .. } => "orch::pipeline::controlled_env",
            Problem::ProfileFrontMatter { .. } => "orch::pipeline::profile_front_matter",
            Problem::Unenforceable { .. } => "orch::pipeline::unenforceable",
            Problem::UnsupportedTool { .. } => "orch::pipeline::unsupported_tool",
            Problem::JudgeRunsTheWork { .. } => "orch::pipeline::judge_runs_the_work",
            Problem::BadModel { .. } => "orch::pipeline::bad_model",
        }
    }

    /// One line that says how to fix it, when the fix is clear.
    pub(crate) fn help(&self) -> Option<String> {
        let did_you_mean = |s: &Option<String>| s.as_ref().map(|s| format!("did you mean `{s}`?"));
        match self {
            Problem::Syntax { .. } => Some("see https://toml.io for the TOML syntax".into()),
            Problem::UnknownKey {
                suggestion, known, ..
            } => did_you_mean(suggestion).or_else(|| Some(format!("known keys: {}", known.join(", ")))),
            Problem::WrongType { expected, .. } => match *expected {
                "a string" => Some("put the value in double quotes, like \"...\"".into()),
                "an integer" => Some("write a whole number without quotes, like 3".into()),
                "true or false" => Some("write `true` or `false`, without quotes".into()),
                "an array of strings" => {
                    Some("write a list of strings in brackets, like [\"a\", \"b\"]".into())
                }
                "a table" => Some("write a `[section]` or an inline table `{ key = ... }`".into()),
                _ if expected.contains("[[phases]]") => {
                    Some("write each phase as its own `[[phases]]` table".into())
                }
                _ => None,
            },
            Problem::MissingKey { key, .. } => Some(format!("add `{key} = ...`")),
            Problem::Version { .. } => Some("this orch reads `version = 1`".into()),
            Problem::BadName { .. } => Some(
                "names start with a lowercase letter or digit, then lowercase letters, digits, `_` or `-`"
                    .into(),
            ),
            Problem::Empty { .. } => Some("list at least one entry".into()),
            Problem::DuplicatePhase { .. } => Some("give each phase a unique `name`".into()),
            Problem::DuplicateAgent { .. } => Some("remove the repeated entry".into()),
            Problem::UnknownAgent { suggestion, .. } => did_you_mean(suggestion).or_else(|| {
                Some("use a built-in kind (claude, codex, gemini, opencode, copilot) or declare it under `[agents.<name>]`".into())
            }),
            Problem::UnknownValue {
                suggestion,
                allowed,
                ..
            } => did_you_mean(suggestion).or_else(|| Some(format!("expected one of: {}", allowed.join(", ")))),
            Problem::MissingKind { .. } => Some(
                "set `kind` to one of: claude, codex, gemini, opencode, copilot, command".into(),
            ),
            Problem::MissingCommand { .. } => {
                Some("add `command = [\"program\", \"arg\", ...]`".into())
            }
            Problem::CommandOnNonCommand { .. } => {
                Some("set `kind = \"command\"` or remove `command`".into())
            }
            Problem::BinaryOnCommand { .. } => {
                Some("remove `binary` and put the program first in `command`".into())
            }
            Problem::PromptConflict { .. } => Some("keep one of `prompt` and `prompt_file`".into()),
            Problem::Contract { .. } => Some(
                "a contract is `artifact = \"plans/{run}/{phase}.md\"`, optional `required_sections`, `validation = \"structural\" | \"judge\" | \"trust\"`, `judge = \"<agent>\"` (with judge), `max_attempts` (1 to 10)".into(),
            ),
            Problem::MissingPrompt { .. } => {
                Some("add `prompt = \"...\"`, `prompt_file = \"...\"` or a `profile`".into())
            }
            Problem::PromptFile { .. } => {
                Some("`prompt_file` is relative to the pipeline file and must stay inside its repository".into())
            }
            Problem::ProfileMissing { .. } => {
                Some("create the profile file or fix the name".into())
            }
            Problem::UnknownDependency { suggestion, .. } => did_you_mean(suggestion)
                .or_else(|| Some("`depends_on` lists names of phases in this file".into())),
            Problem::SelfDependency { .. } => Some("remove the phase from its own `depends_on`".into()),
            Problem::UnwritableArtifact { .. } => Some(
                "give the agent that writes it `permission = \"workspace-write\"` and `Write` in the phase's tools, or have a read-only phase report through orch's MCP server (`add_finding`) instead".into(),
            ),
            Problem::Cycle { .. } => Some(
                "`x -> y` means `x` depends on `y`; remove one of these dependencies to break the cycle"
                    .into(),
            ),
            Problem::AgentToolsNotInPhase { phase, .. } => Some(format!(
                "add the agent to `agents` of phase `{phase}` or remove this table"
            )),
            Problem::UnknownTool { suggestion, .. } => did_you_mean(suggestion).or_else(|| {
                Some("tools: Read, Write, Edit, Glob, Grep, Bash, Bash(<pattern>), WebFetch, WebSearch, Agent, TodoWrite, NotebookEdit".into())
            }),
            Problem::BadMcpName { .. } => Some(
                "write `mcp__<server>__<tool>` or `mcp__<server>__*`".into(),
            ),
            Problem::UnknownOrchTool { suggestion, .. } => did_you_mean(suggestion).or_else(|| {
                Some(format!(
                    "orch's tools: {} (or `mcp__orch__*` for all)",
                    crate::catalog::ORCH_TOOLS.join(", ")
                ))
            }),
            Problem::UnknownMcpServer {
                suggestion,
                server,
                looked,
                ..
            } => did_you_mean(suggestion).or_else(|| {
                Some(format!(
                    "orch looked in the pipeline's `[mcp_servers]` and in {looked}; only `orch` is built in. Declare it in the pipeline: `[mcp_servers.{server}]` with `command = [\"npx\", \"-y\", \"<package>\"]` or `url = \"https://...\"`"
                ))
            }),
            Problem::Template { .. } => Some(
                "prompts may use `{{run_id}}`, `{{phase}}`, `{{artifacts.<phase>}}` (a phase this one depends on, with `artifacts`) and `{{inputs.<name>}}` (given with `orch run --input name=value`)".into(),
            ),
            Problem::McpJson { .. } => Some(
                "orch reads the workspace's `.mcp.json` (Claude Code's project format: {\"mcpServers\": {NAME: {command, args, env} | {type: \"http\", url, headers}}}) for servers the pipeline does not declare; fix it or move it away".into(),
            ),
            Problem::McpJsonEntry { server, .. } => Some(format!(
                "declare the server in the pipeline instead (it wins over `.mcp.json`): `[mcp_servers.{server}]` with `command = [...]` or `url = \"https://...\"`"
            )),
            Problem::BadMcpServer { .. } => Some(
                "give `command = [\"program\", \"arg\"]` (a stdio server) or `url = \"https://...\"` with optional `headers` (a remote one), not both".into(),
            ),
            Problem::TooSmall { min, .. } => Some(format!("use a value of {min} or more")),
            Problem::TooLarge { max, .. } => Some(format!("use a value of {max} or less")),
            Problem::BadDuration { .. } => {
                Some("write a number and a unit, like \"90s\", \"30m\" or \"2h\"".into())
            }
            Problem::ReadOnlyWrites { from_defaults, .. } => Some(if *from_defaults {
                "the mode's default tools write; set `internal` to read-only tools (Read, Glob, Grep) or raise `permission`".into()
            } else {
                "remove the tool or raise `permission`: without OS confinement nothing holds a writing tool or a shell under `read-only`".into()
            }),
            Problem::ControlledFlag { field, .. } => Some(match *field {
                "model" => "remove the flag and set `model` in the agent's table".into(),
                "output" => "remove the flag: orch sets the prompt and output format it reads".into(),
                _ => format!("remove the flag and set `{field}` in a ToolSet instead"),
            }),
            Problem::ProfileFrontMatter { .. } => Some(
                "front matter is TOML between `+++` lines (`description`, `model`, a `[tools]` table) or YAML between `---` lines (Claude Code's sub-agent format: `description`, `tools`, `disallowedTools`, `maxTurns`, `model`, and orch's `permission`)".into(),
            ),
            Problem::ControlledEnv { .. } => Some(
                "remove it: what it would change is set by the ToolSet (or the agent's `binary` and `model`)".into(),
            ),
            Problem::Unenforceable { strict: true, .. } => Some(
                "change the ToolSet, use another agent, or set `enforcement = \"best-effort\"` in `[defaults]` to run with a warning".into(),
            ),
            Problem::Unenforceable { strict: false, .. } => Some(
                "`enforcement = \"best-effort\"`: this runs, but the field is not enforced".into(),
            ),
            Problem::JudgeRunsTheWork {
                judge,
                codex,
                strict: true,
                ..
            } => Some(format!(
                "give the judge no shell (`internal = {}` in `[agents.{judge}.modes.review]`) and keep it `read-only` (OpenCode loads plugins from a workspace it may read whole): it judges the changes it is shown; run the tests as a plain command (in a phase before it, or as the judge); or set `enforcement = \"best-effort\"` in `[defaults]` to run with a warning",
                if *codex {
                    "[]"
                } else {
                    r#"["Read", "Glob", "Grep"]"#
                }
            )),
            Problem::JudgeRunsTheWork { strict: false, .. } => Some(
                "`enforcement = \"best-effort\"`: this runs, but the judged work could give the judge's verdict".into(),
            ),
            Problem::UnsupportedTool { .. } => {
                Some("remove the tool for this agent (in `agent_tools`) or use another agent".into())
            }
            Problem::BadModel { kind, .. } if kind == "opencode" => {
                Some("opencode models are `provider/model`, like `anthropic/claude-sonnet-4-5`".into())
            }
            Problem::BadModel { .. } => Some("write the model name as the CLI expects it".into()),
            Problem::NotUtf8 { .. } => Some("save the file with the UTF-8 encoding".into()),
            Problem::Unreadable { .. } => None,
        }
    }
}

/// One problem at one place.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub(crate) problem: Problem,
    pub(crate) severity: Severity,
    pub source: Arc<SourceFile>,
    pub span: Range<usize>,
    pub(crate) label: Option<String>,
}

impl Diagnostic {
    pub(crate) fn error(problem: Problem, source: &Arc<SourceFile>, span: Range<usize>) -> Self {
        Self {
            problem,
            severity: Severity::Error,
            source: Arc::clone(source),
            span,
            label: None,
        }
    }

    pub(crate) fn warning(problem: Problem, source: &Arc<SourceFile>, span: Range<usize>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(problem, source, span)
        }
    }

    pub(crate) fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The JSON form used by `orch validate --format json`.
    pub(crate) fn to_json(&self) -> DiagnosticJson {
        let (line, column) = self.source.line_col(self.span.start);
        let (end_line, end_column) = self.source.line_col(self.span.end);
        DiagnosticJson {
            file: self.source.name.to_string(),
            line,
            column,
            end_line,
            end_column,
            severity: self.severity,
            code: self.problem.code(),
            message: self.problem.to_string(),
            label: self.label.clone(),
            help: self.problem.help(),
        }
    }

    /// Render with miette, without colour, at a fixed width (for snapshots
    /// and for output that is not a terminal).
    pub fn render_plain(&self, width: usize) -> String {
        let mut out = String::new();
        let handler =
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
                .with_width(width)
                .with_links(false);
        // Writing to a String cannot fail.
        let _ = handler.render_report(&mut out, self);
        out
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct DiagnosticJson {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) end_line: usize,
    pub(crate) end_column: usize,
    pub(crate) severity: Severity,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) label: Option<String>,
    pub(crate) help: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.problem.fmt(f)
    }
}

impl std::error::Error for Diagnostic {}

impl miette::Diagnostic for Diagnostic {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.problem.code()))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.problem
            .help()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&*self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = SourceSpan::from(self.span.start..self.span.end.max(self.span.start));
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(self.label.clone(), span),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line and column by counting, the slow way.
    fn counted(text: &str, offset: usize) -> (usize, usize) {
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[start..].chars().count() + 1)
    }

    #[test]
    fn line_and_column_whatever_order_they_are_asked_in() {
        let text = "a = 1\n\nnamé = \"ü\"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nx\r\nlast";
        let offsets: Vec<usize> = (0..=text.len())
            .filter(|&o| text.is_char_boundary(o))
            .collect();
        let forward = offsets.clone();
        let backward: Vec<usize> = offsets.iter().rev().copied().collect();
        // A fixed shuffle: every 7th, wrapping.
        let scattered: Vec<usize> = (0..offsets.len())
            .map(|i| offsets[(i * 7) % offsets.len()])
            .collect();
        for order in [forward, backward, scattered] {
            let src = SourceFile::new("f.toml", text);
            for &o in &order {
                assert_eq!(src.line_col(o), counted(text, o), "offset {o}");
            }
        }
        // Past the end: the end.
        let src = SourceFile::new("f.toml", text);
        assert_eq!(src.line_col(text.len() + 10), counted(text, text.len()));
        let empty = SourceFile::new("e.toml", "");
        assert_eq!(empty.line_col(0), (1, 1));
    }

    #[test]
    fn suspect_bytes_cover_every_char_never_shown() {
        // Every char `unsafe_to_show` names starts with a suspect byte...
        for c in (0..=0x10_FFFF).filter_map(char::from_u32) {
            if unsafe_to_show(c) {
                let mut buf = [0; 4];
                let first = c.encode_utf8(&mut buf).as_bytes()[0];
                assert!(suspect_byte(first), "{c:?} starts with {first:#x}");
            }
        }
        // ... and the suspect bytes are exactly the ones the scan named.
        for b in 0..=u8::MAX {
            let named = (b < 0x20 && !matches!(b, b'\n' | b'\t' | b'\r'))
                || matches!(b, 0x7f | 0xc2 | 0xe2);
            assert_eq!(suspect_byte(b), named, "{b:#x}");
        }
    }

    #[test]
    fn unsafe_chars_are_masked_past_the_first_scan_block() {
        let text = format!("{}\u{202E}x\u{1b}", "a".repeat(5000));
        let src = SourceFile::new("f.toml", text);
        let shown = src.shown.as_deref().expect("masked");
        assert_eq!(shown.len(), src.text.len());
        assert!(shown.ends_with("???x?"));
    }

    #[test]
    fn line_col_counts_characters() {
        let src = SourceFile::new("f.toml", "a = 1\nbé = 2\n");
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(6), (2, 1));
        // after "bé " (é is two bytes) the column is 4
        assert_eq!(src.line_col(10), (2, 4));
        assert_eq!(src.line_col(1000), (3, 1));
    }

    #[test]
    fn control_characters_are_never_shown() {
        let src = SourceFile::new("f.toml", "a = \"\u{1b}[2J\u{202E}x\"\n");
        let d = Diagnostic::error(
            Problem::Syntax {
                message: "m".into(),
            },
            &src,
            4..9,
        );
        let out = d.render_plain(80);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{202E}'),
            "{out:?}"
        );
        assert!(out.contains("a = \"?[2J???x\""), "{out}");
    }
}
