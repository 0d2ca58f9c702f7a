//! The raw pipeline: the file as written, every value with its byte span.
//!
//! Decoding walks the span-carrying TOML tree (`toml::de::DeTable`) by hand so
//! that every unknown key, wrong type and missing key in a file is reported,
//! not just the first one serde would stop at. The same types derive
//! `JsonSchema`, so `schemas/pipeline.schema.json` is generated from them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use schemars::JsonSchema;
use toml::de::{DeTable, DeValue};

use super::diagnostic::{Diagnostic, Problem, SourceFile};
use crate::model::suggest;
use crate::model::toolset::{Mode, Permission};

type TomlSpanned<T> = toml::Spanned<T>;

/// A value and the byte span it was written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Range<usize>,
}

impl<T> Spanned<T> {
    pub(crate) fn new(value: T, span: Range<usize>) -> Self {
        Self { value, span }
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// A TOML table keyed by user-chosen names, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpannedMap<T>(pub(crate) Vec<(Spanned<String>, T)>);

impl<T> Default for SpannedMap<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: JsonSchema> JsonSchema for SpannedMap<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("Map_of_{}", T::schema_name()).into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let inner = generator.subschema_for::<T>();
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": inner,
        })
    }
}

pub(crate) type SpStr = Spanned<String>;
type SpList = Spanned<Vec<SpStr>>;

/// An orch pipeline file (version 1).
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, title = "orch pipeline")]
pub(crate) struct RawPipeline {
    /// Format version; must be `1`.
    #[schemars(required, range(min = 1, max = 1))]
    pub(crate) version: Option<Spanned<i64>>,
    /// Pipeline name, `[a-z0-9][a-z0-9_-]*`.
    #[schemars(required, regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) name: Option<SpStr>,
    /// Free text.
    pub(crate) description: Option<SpStr>,
    /// Values every phase inherits.
    pub(crate) defaults: Option<RawDefaults>,
    /// Agent configuration; built-in kinds work without a table.
    #[schemars(with = "Option<BTreeMap<String, RawAgent>>")]
    pub(crate) agents: SpannedMap<RawAgent>,
    /// MCP servers orch hands to agents per invocation.
    #[schemars(with = "Option<BTreeMap<String, RawMcpServer>>")]
    pub(crate) mcp_servers: SpannedMap<RawMcpServer>,
    /// The phases of the DAG.
    #[schemars(required, length(min = 1))]
    pub(crate) phases: Option<Spanned<Vec<RawPhase>>>,
}

/// Values every phase inherits.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "Defaults")]
pub(crate) struct RawDefaults {
    /// `plan`, `fix`, `audit` or `review` (default `fix`).
    #[schemars(with = "Option<Mode>")]
    pub(crate) mode: Option<SpStr>,
    /// Wall clock per agent attempt, like "90s", "30m", "2h".
    #[schemars(with = "Option<String>")]
    pub(crate) timeout: Option<SpStr>,
    /// No output for this long kills the attempt.
    #[schemars(with = "Option<String>")]
    pub(crate) stall_timeout: Option<SpStr>,
    /// Extra attempts after a failed one.
    #[schemars(with = "Option<u32>")]
    pub(crate) retries: Option<Spanned<i64>>,
    /// Agent processes running at once, pipeline-wide.
    #[schemars(with = "Option<u32>", range(min = 1))]
    pub(crate) max_parallel: Option<Spanned<i64>>,
    /// `strict` (default) or `best-effort`.
    #[schemars(with = "Option<crate::pipeline::model::Enforcement>")]
    pub(crate) enforcement: Option<SpStr>,
}

/// One agent in the registry.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "Agent")]
pub(crate) struct RawAgent {
    /// `claude`, `codex`, `gemini`, `opencode`, `copilot` or `command`;
    /// defaults to the table name when that is a kind.
    #[schemars(with = "Option<crate::model::AgentKind>")]
    pub(crate) kind: Option<SpStr>,
    /// Program looked up on PATH.
    pub(crate) binary: Option<SpStr>,
    /// Model name passed to the CLI.
    pub(crate) model: Option<SpStr>,
    /// Extra environment variables for the agent.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub(crate) env: SpannedMap<SpStr>,
    /// The argv of a `command` agent.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) command: Option<SpList>,
    /// Per-mode tools and raw flags (resolution layer 4).
    #[schemars(with = "Option<BTreeMap<Mode, RawModeSettings>>")]
    pub(crate) modes: SpannedMap<RawModeSettings>,
}

/// An agent's settings for one mode.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "ModeSettings")]
pub(crate) struct RawModeSettings {
    #[schemars(flatten)]
    pub(crate) tools: RawToolSet,
    /// Extra raw arguments, appended after the generated ones.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) flags: Option<SpList>,
}

/// An MCP server orch passes to agents.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "McpServer")]
pub(crate) struct RawMcpServer {
    /// The server's argv (stdio transport). Give `command` or `url`.
    #[schemars(with = "Option<Vec<String>>", length(min = 1))]
    pub(crate) command: Option<SpList>,
    /// A remote server's address (streamable HTTP transport): `https://` or
    /// `http://`. Give `command` or `url`.
    #[schemars(with = "Option<String>")]
    pub(crate) url: Option<SpStr>,
    /// HTTP headers sent to a remote server; `${VAR}` is taken from orch's
    /// environment. Their values never go into a config file.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub(crate) headers: SpannedMap<SpStr>,
    /// Environment for the server; `${VAR}` is taken from orch's environment.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub(crate) env: SpannedMap<SpStr>,
    /// The pipeline's word that the server's tools only read. Needed to
    /// grant them in a `read-only` phase where orch cannot confine the
    /// server (see `orch explain`); not checked by orch.
    #[schemars(with = "Option<bool>")]
    pub(crate) read_only: Option<Spanned<bool>>,
}

/// A ToolSet table: what an agent may use.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "ToolSet")]
pub(crate) struct RawToolSet {
    /// The agent's own tools, in orch's canonical vocabulary.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) internal: Option<SpList>,
    /// MCP tools, `mcp__<server>__<tool>` or `mcp__<server>__*`.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) mcp: Option<SpList>,
    /// `read-only`, `workspace-write` or `full-access`.
    #[schemars(with = "Option<Permission>")]
    pub(crate) permission: Option<SpStr>,
    /// Conversation depth limit, at least 1.
    #[schemars(with = "Option<u32>", range(min = 1))]
    pub(crate) max_turns: Option<Spanned<i64>>,
}

/// One phase of the DAG.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields, rename = "Phase")]
pub(crate) struct RawPhase {
    /// Unique phase name, `[a-z0-9][a-z0-9_-]*`.
    #[schemars(required, with = "String", regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) name: Option<SpStr>,
    /// Agents that run in this phase.
    #[schemars(required, with = "Vec<String>", length(min = 1))]
    pub(crate) agents: Option<SpList>,
    /// `plan`, `fix`, `audit` or `review`.
    #[schemars(with = "Option<Mode>")]
    pub(crate) mode: Option<SpStr>,
    /// Run this phase's agents at the same time.
    #[schemars(with = "Option<bool>")]
    pub(crate) parallel: Option<Spanned<bool>>,
    /// A failed required phase fails the run.
    #[schemars(with = "Option<bool>")]
    pub(crate) required: Option<Spanned<bool>>,
    /// Phases that must finish first.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) depends_on: Option<SpList>,
    /// The prompt text.
    pub(crate) prompt: Option<SpStr>,
    /// A file holding the prompt, relative to the pipeline file.
    pub(crate) prompt_file: Option<SpStr>,
    /// A profile, `profiles/<name>.md`.
    pub(crate) profile: Option<SpStr>,
    /// The model every agent of the phase uses (over its profile's and the
    /// agent's own).
    pub(crate) model: Option<SpStr>,
    /// Wall clock per agent attempt.
    #[schemars(with = "Option<String>")]
    pub(crate) timeout: Option<SpStr>,
    /// No output for this long kills the attempt.
    #[schemars(with = "Option<String>")]
    pub(crate) stall_timeout: Option<SpStr>,
    /// Extra attempts after a failed one.
    #[schemars(with = "Option<u32>")]
    pub(crate) retries: Option<Spanned<i64>>,
    /// Paths the phase must leave behind.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) artifacts: Option<SpList>,
    /// The phase's contract: the Markdown artifact it must write, a path
    /// template with `{run}` and `{phase}` (relative to the workspace).
    pub(crate) artifact: Option<SpStr>,
    /// Level-2 headings (`## Name`) the artifact must have.
    #[schemars(with = "Option<Vec<String>>")]
    pub(crate) required_sections: Option<SpList>,
    /// How the artifact is checked: `structural` (it exists, with every
    /// required section), `judge` (then a judge approves or rejects it) or
    /// `trust` (the checks only warn).
    #[schemars(with = "Option<String>", extend("enum" = ["structural", "judge", "trust"]))]
    pub(crate) validation: Option<SpStr>,
    /// The agent that judges the artifact (`validation = "judge"`); not one
    /// of the phase's own agents.
    pub(crate) judge: Option<SpStr>,
    /// Rounds of work and judgement before a rejected phase fails.
    #[schemars(with = "Option<u32>", range(min = 1, max = 10))]
    pub(crate) max_attempts: Option<Spanned<i64>>,
    /// Tools for every agent of the phase (layer 2).
    pub(crate) tools: Option<RawToolSet>,
    /// Tools for one agent of the phase (layer 1).
    #[schemars(with = "Option<BTreeMap<String, RawToolSet>>")]
    pub(crate) agent_tools: SpannedMap<RawToolSet>,
    #[schemars(skip)]
    pub(crate) span: Range<usize>,
}

/// Keys each table accepts, in the order they are documented.
pub mod keys {
    pub const PIPELINE: &[&str] = &[
        "version",
        "name",
        "description",
        "defaults",
        "agents",
        "mcp_servers",
        "phases",
    ];
    pub const DEFAULTS: &[&str] = &[
        "mode",
        "timeout",
        "stall_timeout",
        "retries",
        "max_parallel",
        "enforcement",
    ];
    pub const AGENT: &[&str] = &["kind", "binary", "model", "env", "command", "modes"];
    pub const MODE_SETTINGS: &[&str] = &["internal", "mcp", "permission", "max_turns", "flags"];
    pub const MCP_SERVER: &[&str] = &["command", "env", "url", "headers", "read_only"];
    pub const TOOLSET: &[&str] = &["internal", "mcp", "permission", "max_turns"];
    pub const PHASE: &[&str] = &[
        "name",
        "agents",
        "mode",
        "parallel",
        "required",
        "depends_on",
        "prompt",
        "prompt_file",
        "profile",
        "model",
        "timeout",
        "stall_timeout",
        "retries",
        "artifacts",
        "artifact",
        "required_sections",
        "validation",
        "judge",
        "max_attempts",
        "tools",
        "agent_tools",
    ];
}

/// Parse and decode a pipeline file. Syntax errors stop here; otherwise the
/// raw pipeline comes back with every structural problem found.
pub(crate) fn decode(source: &Arc<SourceFile>) -> (Option<RawPipeline>, Vec<Diagnostic>) {
    let mut d = Decoder {
        source,
        diags: Vec::new(),
    };
    let (root, errors) = DeTable::parse_recoverable(&source.text);
    if !errors.is_empty() {
        // The parser recovers and goes on, but one mistake often yields a
        // burst of follow-on errors on the same line (an unclosed `[` makes
        // the next line's `=` "unexpected", its string "unquoted", ...).
        // Report errors in file order, the first one of each line.
        let mut errors: Vec<_> = errors
            .into_iter()
            .map(|e| (e.span().unwrap_or(0..0), first_line(e.message())))
            .collect();
        errors.sort_by_key(|(span, _)| span.start);
        let mut last_line = None;
        for (span, message) in errors {
            let line = source.line_col(span.start).0;
            if last_line.replace(line) == Some(line) {
                continue;
            }
            d.diags
                .push(Diagnostic::error(Problem::Syntax { message }, source, span));
        }
        return (None, d.diags);
    }
    let raw = d.pipeline(root.get_ref());
    (Some(raw), d.diags)
}

fn first_line(s: &str) -> String {
    s.trim().lines().next().unwrap_or("").to_string()
}

/// Walks the TOML tree, records problems, and fills the raw types.
pub(crate) struct Decoder<'s> {
    pub(crate) source: &'s Arc<SourceFile>,
    pub(crate) diags: Vec<Diagnostic>,
}

type Value<'i> = TomlSpanned<DeValue<'i>>;

impl Decoder<'_> {
    fn error(&mut self, problem: Problem, span: Range<usize>) {
        self.diags
            .push(Diagnostic::error(problem, self.source, span));
    }

    fn unknown_key(
        &mut self,
        key: &TomlSpanned<Cow<'_, str>>,
        known: &'static [&'static str],
        table: &str,
    ) {
        let suggestion = suggest(key.get_ref(), known.iter().copied());
        self.error(
            Problem::UnknownKey {
                key: key.get_ref().to_string(),
                table: table.to_string(),
                suggestion,
                known,
            },
            key.span(),
        );
    }

    fn wrong_type(&mut self, key: &str, expected: &'static str, value: &Value<'_>) {
        self.error(
            Problem::WrongType {
                key: key.to_string(),
                expected,
                found: type_name(value.get_ref()),
            },
            value.span(),
        );
    }

    fn missing(&mut self, key: &'static str, table: &str, span: Range<usize>) {
        self.error(
            Problem::MissingKey {
                key,
                table: table.to_string(),
            },
            span,
        );
    }

    pub(crate) fn string(&mut self, key: &str, v: &Value<'_>) -> Option<SpStr> {
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(s.to_string(), v.span())),
            _ => {
                self.wrong_type(key, "a string", v);
                None
            }
        }
    }

    pub(crate) fn integer(&mut self, key: &str, v: &Value<'_>) -> Option<Spanned<i64>> {
        match v.get_ref() {
            DeValue::Integer(i) => {
                match i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()) {
                    Ok(n) => Some(Spanned::new(n, v.span())),
                    Err(_) => {
                        // Only overflow gets here: the TOML parser checked the digits.
                        let found = self.source.text[v.span()].to_string();
                        let problem = if found.starts_with('-') {
                            Problem::TooSmall {
                                key: key.to_string(),
                                min: i64::MIN,
                                found,
                            }
                        } else {
                            Problem::TooLarge {
                                key: key.to_string(),
                                max: i64::MAX,
                                found,
                            }
                        };
                        self.error(problem, v.span());
                        None
                    }
                }
            }
            _ => {
                self.wrong_type(key, "an integer", v);
                None
            }
        }
    }

    pub(crate) fn boolean(&mut self, key: &str, v: &Value<'_>) -> Option<Spanned<bool>> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Spanned::new(*b, v.span())),
            _ => {
                self.wrong_type(key, "true or false", v);
                None
            }
        }
    }

    pub(crate) fn strings(&mut self, key: &str, v: &Value<'_>) -> Option<SpList> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(key, "an array of strings", v);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push(Spanned::new(s.to_string(), item.span())),
                _ => {
                    self.wrong_type(&format!("{key}[]"), "a string", item);
                    ok = false;
                }
            }
        }
        ok.then(|| Spanned::new(out, v.span()))
    }

    fn table<'t, 'i>(&mut self, key: &str, v: &'t Value<'i>) -> Option<&'t DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(key, "a table", v);
                None
            }
        }
    }

    fn map<T>(
        &mut self,
        key: &str,
        v: &Value<'_>,
        mut each: impl FnMut(&mut Self, &str, &Value<'_>) -> Option<T>,
    ) -> SpannedMap<T> {
        let mut out = SpannedMap::default();
        if let Some(t) = self.table(key, v) {
            for (k, val) in t.iter() {
                let name = k.get_ref().to_string();
                if let Some(item) = each(self, &name, val) {
                    out.0.push((Spanned::new(name, k.span()), item));
                }
            }
        }
        out
    }

    fn pipeline(&mut self, root: &DeTable<'_>) -> RawPipeline {
        let mut p = RawPipeline {
            ..Default::default()
        };
        for (k, v) in root.iter() {
            match k.get_ref().as_ref() {
                "version" => p.version = self.integer("version", v),
                "name" => p.name = self.string("name", v),
                "description" => p.description = self.string("description", v),
                "defaults" => p.defaults = self.table("defaults", v).map(|t| self.defaults(t)),
                "agents" => p.agents = self.map("agents", v, |d, name, v| d.agent(name, v)),
                "mcp_servers" => {
                    p.mcp_servers = self.map("mcp_servers", v, |d, name, v| d.mcp_server(name, v))
                }
                "phases" => p.phases = self.phases(v),
                _ => self.unknown_key(k, keys::PIPELINE, "the pipeline"),
            }
        }
        // A key that is there with a wrong value has been reported already.
        let head = first_content_line(&self.source.text);
        for key in ["version", "name", "phases"] {
            if !root.contains_key(key) {
                self.missing(key, "the pipeline", head.clone());
            }
        }
        p
    }

    fn defaults(&mut self, t: &DeTable<'_>) -> RawDefaults {
        let mut d = RawDefaults::default();
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                "mode" => d.mode = self.string("mode", v),
                "timeout" => d.timeout = self.string("timeout", v),
                "stall_timeout" => d.stall_timeout = self.string("stall_timeout", v),
                "retries" => d.retries = self.integer("retries", v),
                "max_parallel" => d.max_parallel = self.integer("max_parallel", v),
                "enforcement" => d.enforcement = self.string("enforcement", v),
                _ => self.unknown_key(k, keys::DEFAULTS, "`[defaults]`"),
            }
        }
        d
    }

    fn agent(&mut self, name: &str, v: &Value<'_>) -> Option<RawAgent> {
        let t = self.table(&format!("agents.{name}"), v)?;
        let mut a = RawAgent {
            ..Default::default()
        };
        let ctx = format!("`[agents.{name}]`");
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                "kind" => a.kind = self.string("kind", v),
                "binary" => a.binary = self.string("binary", v),
                "model" => a.model = self.string("model", v),
                "env" => a.env = self.map("env", v, |d, key, v| d.string(key, v)),
                "command" => a.command = self.strings("command", v),
                "modes" => {
                    a.modes = self.map("modes", v, |d, mode, v| d.mode_settings(name, mode, v))
                }
                _ => self.unknown_key(k, keys::AGENT, &ctx),
            }
        }
        Some(a)
    }

    fn mode_settings(&mut self, agent: &str, mode: &str, v: &Value<'_>) -> Option<RawModeSettings> {
        let t = self.table(&format!("agents.{agent}.modes.{mode}"), v)?;
        let mut m = RawModeSettings {
            tools: RawToolSet {
                ..Default::default()
            },
            flags: None,
        };
        let ctx = format!("`[agents.{agent}.modes.{mode}]`");
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                "flags" => m.flags = self.strings("flags", v),
                key if keys::TOOLSET.contains(&key) => self.toolset_field(&mut m.tools, key, v),
                _ => self.unknown_key(k, keys::MODE_SETTINGS, &ctx),
            }
        }
        Some(m)
    }

    fn mcp_server(&mut self, name: &str, v: &Value<'_>) -> Option<RawMcpServer> {
        let t = self.table(&format!("mcp_servers.{name}"), v)?;
        let mut s = RawMcpServer {
            ..Default::default()
        };
        let ctx = format!("`[mcp_servers.{name}]`");
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                "command" => s.command = self.strings("command", v),
                "env" => s.env = self.map("env", v, |d, key, v| d.string(key, v)),
                "url" => s.url = self.string("url", v),
                "headers" => s.headers = self.map("headers", v, |d, key, v| d.string(key, v)),
                "read_only" => s.read_only = self.boolean("read_only", v),
                _ => self.unknown_key(k, keys::MCP_SERVER, &ctx),
            }
        }
        let has = |key: &str| t.iter().any(|(k, _)| k.get_ref() == key);
        if !has("command") && !has("url") {
            self.missing("command", &ctx, v.span());
        }
        Some(s)
    }

    /// Decode a ToolSet table (shared by `tools`, `agent_tools.X`, profiles).
    pub(crate) fn toolset(&mut self, ctx: &str, v: &Value<'_>) -> Option<RawToolSet> {
        let t = self.table(ctx, v)?;
        let mut ts = RawToolSet {
            ..Default::default()
        };
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                key if keys::TOOLSET.contains(&key) => self.toolset_field(&mut ts, key, v),
                _ => self.unknown_key(k, keys::TOOLSET, &format!("`[{ctx}]`")),
            }
        }
        Some(ts)
    }

    fn toolset_field(&mut self, ts: &mut RawToolSet, key: &str, v: &Value<'_>) {
        match key {
            "internal" => ts.internal = self.strings("internal", v),
            "mcp" => ts.mcp = self.strings("mcp", v),
            "permission" => ts.permission = self.string("permission", v),
            "max_turns" => ts.max_turns = self.integer("max_turns", v),
            _ => unreachable!("toolset_field is called with ToolSet keys only"),
        }
    }

    fn phases(&mut self, v: &Value<'_>) -> Option<Spanned<Vec<RawPhase>>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type("phases", "an array of tables (`[[phases]]`)", v);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            // The key is only named in the error: no `format!` per phase.
            let DeValue::Table(t) = item.get_ref() else {
                self.wrong_type(&format!("phases[{i}]"), "a table", item);
                continue;
            };
            out.push(self.phase(t, item.span()));
        }
        Some(Spanned::new(out, v.span()))
    }

    fn phase(&mut self, t: &DeTable<'_>, span: Range<usize>) -> RawPhase {
        let mut p = RawPhase {
            span: span.clone(),
            ..Default::default()
        };
        let name = t
            .get("name")
            .and_then(|v| v.get_ref().as_str())
            .map(str::to_string);
        // Named only in errors: made when one is reported.
        let ctx = || match &name {
            Some(n) => format!("phase `{n}`"),
            None => "a phase".to_string(),
        };
        let prefix = format!("phases.{}", name.as_deref().unwrap_or("?"));
        for (k, v) in t.iter() {
            match k.get_ref().as_ref() {
                "name" => p.name = self.string("name", v),
                "agents" => p.agents = self.strings("agents", v),
                "mode" => p.mode = self.string("mode", v),
                "parallel" => p.parallel = self.boolean("parallel", v),
                "required" => p.required = self.boolean("required", v),
                "depends_on" => p.depends_on = self.strings("depends_on", v),
                "prompt" => p.prompt = self.string("prompt", v),
                "prompt_file" => p.prompt_file = self.string("prompt_file", v),
                "profile" => p.profile = self.string("profile", v),
                "model" => p.model = self.string("model", v),
                "timeout" => p.timeout = self.string("timeout", v),
                "stall_timeout" => p.stall_timeout = self.string("stall_timeout", v),
                "retries" => p.retries = self.integer("retries", v),
                "artifacts" => p.artifacts = self.strings("artifacts", v),
                "artifact" => p.artifact = self.string("artifact", v),
                "required_sections" => p.required_sections = self.strings("required_sections", v),
                "validation" => p.validation = self.string("validation", v),
                "judge" => p.judge = self.string("judge", v),
                "max_attempts" => p.max_attempts = self.integer("max_attempts", v),
                "tools" => p.tools = self.toolset(&format!("{prefix}.tools"), v),
                "agent_tools" => {
                    p.agent_tools = self.map("agent_tools", v, |d, agent, v| {
                        d.toolset(&format!("{prefix}.agent_tools.{agent}"), v)
                    })
                }
                _ => self.unknown_key(k, keys::PHASE, &ctx()),
            }
        }
        if !t.contains_key("name") {
            self.missing("name", &ctx(), span.clone());
        }
        if !t.contains_key("agents") {
            self.missing("agents", &ctx(), span);
        }
        p
    }
}

/// The span of the first line that is neither blank nor a comment (where a
/// missing top-level key is reported), else of the first line.
fn first_content_line(text: &str) -> Range<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            let start = offset + (body.len() - trimmed.len());
            return start..offset + body.len();
        }
        offset += line.len();
    }
    0..text.find('\n').unwrap_or(text.len())
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<(usize, String)> {
        let source = SourceFile::new("t.toml", text);
        let (_, diags) = decode(&source);
        diags
            .iter()
            .map(|d| (source.line_col(d.span.start).0, d.problem.to_string()))
            .collect()
    }

    #[test]
    fn one_syntax_error_per_line_in_file_order() {
        // An unclosed `[` makes the parser report several errors on line 4;
        // the duplicate key on line 2 comes first.
        let found = problems("name = \"x\"\nname = \"y\"\nagents = [\"a\"\nprompt = \"p\"\n");
        let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, vec![2, 4], "{found:?}");
    }

    #[test]
    fn a_present_key_of_the_wrong_type_is_not_also_missing() {
        let found = problems("version = \"1\"\nname = 3\nphases = \"x\"\n");
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found.iter().all(|(_, m)| m.contains("must be")),
            "{found:?}"
        );
    }

    #[test]
    fn integer_overflow_names_the_key_and_the_value() {
        let found = problems(
            "version = 99999999999999999999\n[defaults]\nretries = -99999999999999999999\n",
        );
        let messages: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
        assert!(
            messages.contains(
                &"`version` must be at most 9223372036854775807, found 99999999999999999999"
            ),
            "{messages:?}"
        );
        assert!(
            messages.contains(
                &"`retries` must be at least -9223372036854775808, found -99999999999999999999"
            ),
            "{messages:?}"
        );
    }
}
