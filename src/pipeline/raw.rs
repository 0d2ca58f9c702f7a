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
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

/// Declares one table of the file, once: its struct (each field documented,
/// with the schema's attributes: `schemas/pipeline.schema.json` is
/// generated from it), the keys it accepts ([`keys`], in the order written
/// here, which is the order the docs and an unknown key's message list
/// them) and how each key's value is decoded: a function of the decoder,
/// the key, the value and where the table is (`at`, for the tables
/// inside it). Adding a key to a table is one entry here; its check
/// and its place in the model follow (ARCHITECTURE.md).
macro_rules! table {
    (
        $(#[$meta:meta])*
        struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $(@$required:ident)?
                $field:ident: $ty:ty = $decode:expr,
            )*
        }
        $(beside {
            $( $(#[$xmeta:meta])* $xfield:ident: $xty:ty, )*
        })?
    ) => {
        #[derive(Debug, Default, JsonSchema)]
        $(#[$meta])*
        pub(crate) struct $name {
            $( $(#[$fmeta])* $(#[schemars($required)])? pub(crate) $field: $ty, )*
            $($( $(#[$xmeta])* pub(crate) $xfield: $xty, )*)?
        }

        impl Table for $name {
            const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];
            const REQUIRED: &'static [Option<&'static str>] =
                &[$( required!($($required)? ; $field) ),*];

            // Each key's decoder is written beside its field, as a closure
            // this calls.
            #[allow(clippy::redundant_closure_call)]
            fn decode_key(&mut self, d: &mut Decoder<'_>, key: &str, v: &Value<'_>, at: &str) -> bool {
                match key {
                    $(
                        stringify!($field) => {
                            let decode: fn(&mut Decoder<'_>, &str, &Value<'_>, &str) -> $ty = $decode;
                            self.$field = decode(d, key, v, at);
                            true
                        }
                    )*
                    _ => false,
                }
            }
        }
    };
}

/// `Some(key)` for a field marked `@required` in [`table!`].
macro_rules! required {
    (required ; $field:ident) => {
        Some(stringify!($field))
    };
    ( ; $field:ident) => {
        None
    };
}

/// A table of the file, declared with [`table!`].
pub(crate) trait Table: Default {
    /// The keys the table accepts, in order.
    const KEYS: &'static [&'static str];
    /// Per key, whether it must be there (its name) or not (`None`): a
    /// field marked `@required`, which the schema requires too.
    const REQUIRED: &'static [Option<&'static str>];

    /// The keys that must be there.
    fn required() -> impl Iterator<Item = &'static str> {
        Self::REQUIRED.iter().flatten().copied()
    }

    /// Decode `v`, the value of `key`, into its field; false when the
    /// table has no such key. `at` is where the table is, for the tables
    /// within it (`phases.<name>`, an agent's name).
    fn decode_key(&mut self, d: &mut Decoder<'_>, key: &str, v: &Value<'_>, at: &str) -> bool;
}

table! {
    /// An orch pipeline file (version 1).
    #[schemars(deny_unknown_fields, title = "orch pipeline")]
    struct RawPipeline {
        /// Format version; must be `1`.
        #[schemars(range(min = 1, max = 1))]
        @required version: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
        /// Pipeline name, `[a-z0-9][a-z0-9_-]*`.
        #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
        @required name: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Free text.
        description: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Values every phase inherits.
        defaults: Option<RawDefaults> = |d, k, v, _| {
            d.table(k, v).map(|t| d.fields(t, "", || "`[defaults]`".to_string()))
        },
        /// Agent configuration; built-in kinds work without a table.
        #[schemars(with = "Option<BTreeMap<String, RawAgent>>")]
        agents: SpannedMap<RawAgent> = |d, k, v, _| d.map(k, v, |d, name, v| d.agent(name, v)),
        /// MCP servers orch hands to agents per invocation.
        #[schemars(with = "Option<BTreeMap<String, RawMcpServer>>")]
        mcp_servers: SpannedMap<RawMcpServer> = |d, k, v, _| d.map(k, v, |d, name, v| d.mcp_server(name, v)),
        /// The phases of the DAG.
        #[schemars(length(min = 1))]
        @required phases: Option<Spanned<Vec<Box<RawPhase>>>> = |d, _, v, _| d.phases(v),
    }
}

table! {
    /// Values every phase inherits.
    #[schemars(deny_unknown_fields, rename = "Defaults")]
    struct RawDefaults {
        /// `plan`, `fix`, `audit` or `review` (default `fix`).
        #[schemars(with = "Option<Mode>")]
        mode: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Wall clock per agent attempt, like "90s", "30m", "2h".
        #[schemars(with = "Option<String>")]
        timeout: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// No output for this long kills the attempt.
        #[schemars(with = "Option<String>")]
        stall_timeout: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Extra attempts after a failed one.
        #[schemars(with = "Option<u32>")]
        retries: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
        /// Agent processes running at once, pipeline-wide.
        #[schemars(with = "Option<u32>", range(min = 1))]
        max_parallel: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
        /// `strict` (default) or `best-effort`.
        #[schemars(with = "Option<crate::pipeline::model::Enforcement>")]
        enforcement: Option<SpStr> = |d, k, v, _| d.string(k, v),
    }
}

table! {
    /// One agent in the registry.
    #[schemars(deny_unknown_fields, rename = "Agent")]
    struct RawAgent {
        /// `claude`, `codex`, `gemini`, `opencode`, `copilot` or `command`;
        /// defaults to the table name when that is a kind.
        #[schemars(with = "Option<crate::model::AgentKind>")]
        kind: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Program looked up on PATH.
        binary: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Model name passed to the CLI.
        model: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Extra environment variables for the agent.
        #[schemars(with = "Option<BTreeMap<String, String>>")]
        env: SpannedMap<SpStr> = |d, k, v, _| d.map(k, v, |d, key, v| d.string(key, v)),
        /// The argv of a `command` agent.
        #[schemars(with = "Option<Vec<String>>")]
        command: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// Per-mode tools and raw flags (resolution layer 4).
        #[schemars(with = "Option<BTreeMap<Mode, RawModeSettings>>")]
        modes: SpannedMap<RawModeSettings> = |d, k, v, agent| {
            d.map(k, v, |d, mode, v| d.mode_settings(agent, mode, v))
        },
    }
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

table! {
    /// An MCP server orch passes to agents.
    #[schemars(deny_unknown_fields, rename = "McpServer")]
    struct RawMcpServer {
        /// The server's argv (stdio transport). Give `command` or `url`.
        #[schemars(with = "Option<Vec<String>>", length(min = 1))]
        command: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// Environment for the server; `${VAR}` is taken from orch's environment.
        #[schemars(with = "Option<BTreeMap<String, String>>")]
        env: SpannedMap<SpStr> = |d, k, v, _| d.map(k, v, |d, key, v| d.string(key, v)),
        /// A remote server's address (streamable HTTP transport): `https://` or
        /// `http://`. Give `command` or `url`.
        #[schemars(with = "Option<String>")]
        url: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// HTTP headers sent to a remote server; `${VAR}` is taken from orch's
        /// environment. Their values never go into a config file.
        #[schemars(with = "Option<BTreeMap<String, String>>")]
        headers: SpannedMap<SpStr> = |d, k, v, _| d.map(k, v, |d, key, v| d.string(key, v)),
        /// The pipeline's word that the server's tools only read. Needed to
        /// grant them in a `read-only` phase where orch cannot confine the
        /// server (see `orch explain`); not checked by orch.
        #[schemars(with = "Option<bool>")]
        read_only: Option<Spanned<bool>> = |d, k, v, _| d.boolean(k, v),
    }
}

table! {
    /// A ToolSet table: what an agent may use.
    #[schemars(deny_unknown_fields, rename = "ToolSet")]
    struct RawToolSet {
        /// The agent's own tools, in orch's canonical vocabulary.
        #[schemars(with = "Option<Vec<String>>")]
        internal: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// MCP tools, `mcp__<server>__<tool>` or `mcp__<server>__*`.
        #[schemars(with = "Option<Vec<String>>")]
        mcp: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// `read-only`, `workspace-write` or `full-access`.
        #[schemars(with = "Option<Permission>")]
        permission: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Conversation depth limit, at least 1.
        #[schemars(with = "Option<u32>", range(min = 1))]
        max_turns: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
    }
}

table! {
    /// One phase of the DAG.
    #[schemars(deny_unknown_fields, rename = "Phase")]
    struct RawPhase {
        /// Unique phase name, `[a-z0-9][a-z0-9_-]*`.
        #[schemars(with = "String", regex(pattern = r"^[a-z0-9][a-z0-9_-]*$"))]
        @required name: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Agents that run in this phase.
        #[schemars(with = "Vec<String>", length(min = 1))]
        @required agents: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// `plan`, `fix`, `audit` or `review`.
        #[schemars(with = "Option<Mode>")]
        mode: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Run this phase's agents at the same time.
        #[schemars(with = "Option<bool>")]
        parallel: Option<Spanned<bool>> = |d, k, v, _| d.boolean(k, v),
        /// A failed required phase fails the run.
        #[schemars(with = "Option<bool>")]
        required: Option<Spanned<bool>> = |d, k, v, _| d.boolean(k, v),
        /// Phases that must finish first.
        #[schemars(with = "Option<Vec<String>>")]
        depends_on: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// The prompt text.
        prompt: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// A file holding the prompt, relative to the pipeline file.
        prompt_file: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// A profile, `profiles/<name>.md`.
        profile: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// The model every agent of the phase uses (over its profile's and the
        /// agent's own).
        model: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Wall clock per agent attempt.
        #[schemars(with = "Option<String>")]
        timeout: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// No output for this long kills the attempt.
        #[schemars(with = "Option<String>")]
        stall_timeout: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Extra attempts after a failed one.
        #[schemars(with = "Option<u32>")]
        retries: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
        /// Paths the phase must leave behind.
        #[schemars(with = "Option<Vec<String>>")]
        artifacts: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// The phase's contract: the Markdown artifact it must write, a path
        /// template with `{run}` and `{phase}` (relative to the workspace).
        artifact: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Level-2 headings (`## Name`) the artifact must have.
        #[schemars(with = "Option<Vec<String>>")]
        required_sections: Option<SpList> = |d, k, v, _| d.strings(k, v),
        /// How the artifact is checked: `structural` (it exists, with every
        /// required section), `judge` (then a judge approves or rejects it) or
        /// `trust` (the checks only warn).
        #[schemars(with = "Option<String>", extend("enum" = ["structural", "judge", "trust"]))]
        validation: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// The agent that judges the artifact (`validation = "judge"`); not one
        /// of the phase's own agents.
        judge: Option<SpStr> = |d, k, v, _| d.string(k, v),
        /// Rounds of work and judgement before a rejected phase fails.
        #[schemars(with = "Option<u32>", range(min = 1, max = 10))]
        max_attempts: Option<Spanned<i64>> = |d, k, v, _| d.integer(k, v),
        /// Tools for every agent of the phase (layer 2).
        #[schemars(with = "Option<RawToolSet>")]
        tools: Option<Box<RawToolSet>> = |d, _, v, at| d.toolset(&format!("{at}.tools"), v).map(Box::new),
        /// Tools for one agent of the phase (layer 1).
        #[schemars(with = "Option<BTreeMap<String, RawToolSet>>")]
        agent_tools: SpannedMap<RawToolSet> = |d, k, v, at| {
            d.map(k, v, |d, agent, v| d.toolset(&format!("{at}.agent_tools.{agent}"), v))
        },
    }
    beside {
        #[schemars(skip)]
        span: Range<usize>,
    }
}

/// Keys each table accepts, in the order they are documented.
pub mod keys {
    use super::Table;
    pub const PIPELINE: &[&str] = super::RawPipeline::KEYS;
    pub const DEFAULTS: &[&str] = super::RawDefaults::KEYS;
    pub const AGENT: &[&str] = super::RawAgent::KEYS;
    /// A ToolSet's keys and `flags` (the ToolSet is flattened in).
    pub const MODE_SETTINGS: &[&str] = &{
        const N: usize = super::RawToolSet::KEYS.len();
        let mut out = [""; N + 1];
        let mut i = 0;
        while i < N {
            out[i] = super::RawToolSet::KEYS[i];
            i += 1;
        }
        out[N] = "flags";
        out
    };
    pub const MCP_SERVER: &[&str] = super::RawMcpServer::KEYS;
    pub const TOOLSET: &[&str] = super::RawToolSet::KEYS;
    pub const PHASE: &[&str] = super::RawPhase::KEYS;
}

/// Parse and decode a pipeline file. Syntax errors stop here; otherwise the
/// raw pipeline comes back with every structural problem found.
pub(crate) fn decode(source: &Arc<SourceFile>) -> (Option<RawPipeline>, Vec<Diagnostic>) {
    if source.text.len() >= SPLIT_FROM
        && let Some(stretches) = phase_stretches(&source.text)
        && let Some(decoded) = decode_by_phase(source, &stretches)
    {
        return decoded;
    }
    decode_whole(source)
}

/// [`decode`] from the TOML tree of the whole file.
fn decode_whole(source: &Arc<SourceFile>) -> (Option<RawPipeline>, Vec<Diagnostic>) {
    let mut d = Decoder {
        source,
        diags: Vec::new(),
        offset: 0,
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

/// From what size a file is decoded phase by phase. The whole file's
/// tokens, events and tree are large allocations touched once: at 1,000
/// phases the process touched 2,390 pages parsing whole and 915 phase by
/// phase, and ran 10-25% faster (`scripts/measure-validate.sh`). Below
/// this, the file is a few hundred phases and both ways cost the same.
const SPLIT_FROM: usize = 64 << 10;

/// Where each `[[phases]]` table of a file starts, when the file is laid
/// out as pipelines are (everything else first, then the phases, each
/// with only its own `[phases.*]` tables after it): then the head and
/// each phase can be parsed on their own, so the TOML tree of only one
/// phase per decoding thread is in memory at a time, not the whole file's
/// (a 100,000-phase file's tree took over 400 MB). `None` when no line is a `[[phases]]`
/// header; whether the file is laid out so is decided as the stretches
/// are parsed.
///
/// Found line by line, not with the TOML lexer (a second lexer pass was
/// 5% of validating 1,000 phases): a line inside a multi-line string or
/// array may look like a header. That is safe because the stretches are
/// parsed one by one ([`decode_by_phase`]): a stretch cut inside a string,
/// array or inline table ends with it unclosed and does not parse, a
/// stretch holding another table is refused, and anything unexpected
/// falls back to parsing the file whole. A lookalike costs the split,
/// never the meaning.
fn phase_stretches(text: &str) -> Option<Vec<usize>> {
    let mut starts = Vec::new();
    let mut line_start = 0;
    while line_start < text.len() {
        let rest = &text[line_start..];
        let len = memchr::memchr(b'\n', rest.as_bytes()).map_or(rest.len(), |n| n + 1);
        let line = rest[..len].trim_start_matches([' ', '\t']);
        // Only the `[[phases]]` headers: any other table after them (or a
        // quoted header) stays in a stretch, which then holds more than
        // its phase and is refused when it is parsed.
        let header = line.split('#').next().unwrap_or("").trim_end();
        if header
            .strip_prefix("[[")
            .and_then(|h| h.strip_suffix("]]"))
            .is_some_and(|inner| inner.trim() == "phases")
        {
            starts.push(line_start);
        }
        line_start += len;
    }
    (!starts.is_empty()).then_some(starts)
}

/// [`decode`] of the head and of each phase's stretch on its own. `None`
/// when a stretch does not parse cleanly or holds more than its phase (or
/// the head holds `phases`): the caller parses the file whole, so errors
/// and structure are reported exactly as for any file.
fn decode_by_phase(
    source: &Arc<SourceFile>,
    starts: &[usize],
) -> Option<(Option<RawPipeline>, Vec<Diagnostic>)> {
    let text = &source.text;
    let mut d = Decoder {
        source,
        diags: Vec::new(),
        offset: 0,
    };
    let (root, errors) = DeTable::parse_recoverable(&text[..starts[0]]);
    // An empty head leaves its missing keys reported where the first phase
    // starts, in another order than the whole file's: parsed whole.
    if !errors.is_empty() || root.get_ref().contains_key("phases") || root.get_ref().is_empty() {
        return None;
    }
    let mut raw = d.pipeline(root.get_ref());
    drop(root);
    // `pipeline` found `phases` missing from the head: they are below.
    let missing_phases = d
        .diags
        .iter()
        .position(|g| matches!(&g.problem, Problem::MissingKey { key: "phases", .. }));
    if let Some(i) = missing_phases {
        d.diags.remove(i);
    }
    // The stretches are decoded in chunks by two threads at once when
    // there are enough of them, each taking the next chunk when done with
    // one: a helper that starts late (an idle CPU can take a millisecond
    // to wake) leaves more of them to this thread, never less done. Each
    // chunk's phases go to its own slot, so the order is the file's
    // whichever thread decoded it.
    let (ends, text_len) = (&starts[1..], text.len());
    let bounds = |i: usize| (starts[i], ends.get(i).copied().unwrap_or(text_len));
    let slots: Vec<OnceLock<Option<Decoded>>> = std::iter::repeat_with(OnceLock::new)
        .take(starts.len().div_ceil(CHUNK))
        .collect();
    let (next, failed) = (AtomicUsize::new(0), AtomicBool::new(false));
    let decode_chunks = || {
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            // Once a stretch failed the file is parsed whole: stop.
            let Some(slot) = slots.get(c).filter(|_| !failed.load(Ordering::Relaxed)) else {
                return;
            };
            let which = c * CHUNK..((c + 1) * CHUNK).min(starts.len());
            let decoded = decode_phases(source, which, bounds);
            failed.fetch_or(decoded.is_none(), Ordering::Relaxed);
            let _ = slot.set(decoded);
        }
    };
    if starts.len() >= PARALLEL_FROM {
        std::thread::scope(|scope| {
            // No thread to be had: this one does it all.
            let helper = std::thread::Builder::new()
                .name("orch-decode".into())
                .spawn_scoped(scope, decode_chunks)
                .ok();
            decode_chunks();
            if let Some(helper) = helper {
                // A panic in the helper is the same bug as one here.
                helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
        });
    } else {
        decode_chunks();
    }
    let mut phases = Vec::with_capacity(starts.len());
    for slot in slots {
        // A slot left empty: a stretch before it failed.
        let decoded = slot.into_inner().flatten()?;
        phases.extend(decoded.phases);
        d.diags.extend(decoded.diags);
    }
    // The array's span, as the whole file's tree gives it: its first
    // header's.
    let first_span = phases.first()?.span.clone();
    raw.phases = Some(Spanned::new(phases, first_span));
    Some((Some(raw), d.diags))
}

/// From how many phases [`decode_by_phase`] decodes on two threads: below
/// it, starting a thread costs about what it saves.
const PARALLEL_FROM: usize = 64;

/// Phases a thread of [`decode_by_phase`] decodes at a time.
const CHUNK: usize = 16;

/// The phases of some stretches of a file, decoded.
#[derive(Default)]
struct Decoded {
    /// Boxed as `RawPipeline::phases` holds them.
    #[allow(clippy::vec_box)]
    phases: Vec<Box<RawPhase>>,
    diags: Vec<Diagnostic>,
}

/// Decode the phases of stretches `which` (`stretch` gives each one's byte
/// range); `None` when one does not parse cleanly or holds more than its
/// phase.
fn decode_phases(
    source: &Arc<SourceFile>,
    which: Range<usize>,
    stretch: impl Fn(usize) -> (usize, usize),
) -> Option<Decoded> {
    let mut d = Decoder {
        source,
        diags: Vec::new(),
        offset: 0,
    };
    let mut out = Decoded {
        phases: Vec::with_capacity(which.len()),
        ..Decoded::default()
    };
    for i in which {
        let (start, end) = stretch(i);
        let (root, errors) = DeTable::parse_recoverable(&source.text[start..end]);
        let root = root.get_ref();
        if !errors.is_empty() || root.len() != 1 {
            return None;
        }
        let DeValue::Array(items) = root.get("phases")?.get_ref() else {
            return None;
        };
        if items.len() != 1 {
            return None;
        }
        let item = items.iter().next()?;
        let DeValue::Table(t) = item.get_ref() else {
            return None;
        };
        d.offset = start;
        let span = d.at(item.span());
        out.phases.push(d.phase(t, span));
    }
    out.diags = d.diags;
    Some(out)
}

fn first_line(s: &str) -> String {
    s.trim().lines().next().unwrap_or("").to_string()
}

/// Walks the TOML tree, records problems, and fills the raw types.
pub(crate) struct Decoder<'s> {
    pub(crate) source: &'s Arc<SourceFile>,
    pub(crate) diags: Vec<Diagnostic>,
    /// Where in `source` the text the tree was parsed from starts (a
    /// phase's stretch of the file, see [`phase_stretches`]; else 0).
    pub(crate) offset: usize,
}

type Value<'i> = TomlSpanned<DeValue<'i>>;

impl Decoder<'_> {
    /// A span of the parsed text as a span of the file.
    fn at(&self, span: Range<usize>) -> Range<usize> {
        span.start + self.offset..span.end + self.offset
    }

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
            self.at(key.span()),
        );
    }

    fn wrong_type(&mut self, key: &str, expected: &'static str, value: &Value<'_>) {
        self.error(
            Problem::WrongType {
                key: key.to_string(),
                expected,
                found: type_name(value.get_ref()),
            },
            self.at(value.span()),
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
            DeValue::String(s) => Some(Spanned::new(s.to_string(), self.at(v.span()))),
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
                    Ok(n) => Some(Spanned::new(n, self.at(v.span()))),
                    Err(_) => {
                        // Only overflow gets here: the TOML parser checked the digits.
                        let found = self.source.text[self.at(v.span())].to_string();
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
                        self.error(problem, self.at(v.span()));
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
            DeValue::Boolean(b) => Some(Spanned::new(*b, self.at(v.span()))),
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
                DeValue::String(s) => out.push(Spanned::new(s.to_string(), self.at(item.span()))),
                _ => {
                    self.wrong_type(&format!("{key}[]"), "a string", item);
                    ok = false;
                }
            }
        }
        ok.then(|| Spanned::new(out, self.at(v.span())))
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
            out.0.reserve_exact(t.len());
            for (k, val) in t.iter() {
                let name = k.get_ref().to_string();
                if let Some(item) = each(self, &name, val) {
                    out.0.push((Spanned::new(name, self.at(k.span())), item));
                }
            }
        }
        out
    }

    /// The table `t` decoded into `T` (its tables within at `at`), each
    /// key it does not accept reported as one of `table` (made only then).
    fn fields<T: Table>(&mut self, t: &DeTable<'_>, at: &str, table: impl Fn() -> String) -> T {
        let mut out = T::default();
        for (k, v) in t.iter() {
            if !out.decode_key(self, k.get_ref(), v, at) {
                self.unknown_key(k, T::KEYS, &table());
            }
        }
        out
    }

    fn pipeline(&mut self, root: &DeTable<'_>) -> RawPipeline {
        let p: RawPipeline = self.fields(root, "", || "the pipeline".to_string());
        // A key that is there with a wrong value has been reported already.
        let head = first_content_line(&self.source.text);
        for key in RawPipeline::required() {
            if !root.contains_key(key) {
                self.missing(key, "the pipeline", head.clone());
            }
        }
        p
    }

    fn agent(&mut self, name: &str, v: &Value<'_>) -> Option<RawAgent> {
        let t = self.table(&format!("agents.{name}"), v)?;
        Some(self.fields(t, name, || format!("`[agents.{name}]`")))
    }

    fn mode_settings(&mut self, agent: &str, mode: &str, v: &Value<'_>) -> Option<RawModeSettings> {
        let t = self.table(&format!("agents.{agent}.modes.{mode}"), v)?;
        let mut m = RawModeSettings::default();
        for (k, v) in t.iter() {
            let key = k.get_ref().as_ref();
            if key == "flags" {
                m.flags = self.strings("flags", v);
            } else if !m.tools.decode_key(self, key, v, "") {
                let ctx = format!("`[agents.{agent}.modes.{mode}]`");
                self.unknown_key(k, keys::MODE_SETTINGS, &ctx);
            }
        }
        Some(m)
    }

    fn mcp_server(&mut self, name: &str, v: &Value<'_>) -> Option<RawMcpServer> {
        let t = self.table(&format!("mcp_servers.{name}"), v)?;
        let ctx = || format!("`[mcp_servers.{name}]`");
        let s: RawMcpServer = self.fields(t, "", ctx);
        let has = |key: &str| t.iter().any(|(k, _)| k.get_ref() == key);
        if !has("command") && !has("url") {
            self.missing("command", &ctx(), self.at(v.span()));
        }
        Some(s)
    }

    /// Decode a ToolSet table (shared by `tools`, `agent_tools.X`, profiles).
    pub(crate) fn toolset(&mut self, ctx: &str, v: &Value<'_>) -> Option<RawToolSet> {
        let t = self.table(ctx, v)?;
        Some(self.fields(t, "", || format!("`[{ctx}]`")))
    }

    #[expect(
        clippy::vec_box,
        reason = "validation frees each raw phase as it goes (`Decoder::phase`)"
    )]
    fn phases(&mut self, v: &Value<'_>) -> Option<Spanned<Vec<Box<RawPhase>>>> {
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
            out.push(self.phase(t, self.at(item.span())));
        }
        Some(Spanned::new(out, self.at(v.span())))
    }

    /// A phase, boxed: validation frees each raw phase as it makes the
    /// model's (`Validator::pipeline`), so a long pipeline's raw phases
    /// and model phases are not in memory at once.
    fn phase(&mut self, t: &DeTable<'_>, span: Range<usize>) -> Box<RawPhase> {
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
        let mut p: RawPhase = self.fields(t, &prefix, ctx);
        p.span = span.clone();
        for key in RawPhase::required() {
            if !t.contains_key(key) {
                self.missing(key, &ctx(), span.clone());
            }
        }
        Box::new(p)
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

    /// Decoding phase by phase gives what decoding the whole file gives,
    /// spans and problems included, for every pipeline in the repository
    /// and for layouts made to mislead the split; the layouts it cannot
    /// split are parsed whole.
    #[test]
    fn decoding_phase_by_phase_matches_decoding_the_whole_file() {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut texts: Vec<(String, String)> = Vec::new();
        let mut dirs = vec![
            std::path::PathBuf::from(root).join("pipelines"),
            std::path::PathBuf::from(root).join("tests"),
        ];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "toml")
                    && let Ok(text) = std::fs::read_to_string(&p)
                {
                    texts.push((p.display().to_string(), text));
                }
            }
        }
        assert!(texts.len() > 20, "the repository's pipelines were found");
        let head =
            "version = 1\nname = \"x\"\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n";
        let made = [
            // Split: plain phases, their own tables, comments between.
            (
                "split",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\"a\"]\n[phases.tools]\npermission = \"read-only\"\n# c\n\n  [[phases]] # d\nname = \"b\"\nagents = [\"a\"]\ndepends_on = [\"a\"]\nbogus = 1\n[phases.agent_tools.a]\nmax_turns = 3\n"
                ),
            ),
            // A phase without its name, a wrong type, an unknown key.
            (
                "problems",
                format!(
                    "{head}[[phases]]\nagents = \"a\"\n[[phases]]\nname = 3\nagents = [\"a\"]\nx = 1\n"
                ),
            ),
            // Array lines and strings that look like headers: found
            // line by line, they cost the split, not the meaning.
            (
                "lookalikes",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\n[\"a\"],\n]\nprompt = \"\"\"\n[[phases]]\nname = \\\"b\\\"\n\"\"\"\n[[phases]]\nname = \"c\"\nagents = [\"a\"]\n"
                ),
            ),
            (
                "string lookalike",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nprompt = \"\"\"\n  [[phases]]\nname = \\\"b\\\"\n\"\"\"\n[[phases]]\nname = \"c\"\nagents = [\"a\"]\nprompt = \'\'\'\n[[phases]] # x\n[phases.tools]\n\'\'\'\n"
                ),
            ),
            (
                "prompt and array lines",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\n\"a\",\n]\nflags = [\n[\"x\"],\n]\nprompt = \"\"\"\n[1]: http://example.com\n[phases.x]\n\"\"\"\n[[phases]]\nname = \"c\"\nagents = [\"a\"]\n"
                ),
            ),
            (
                "inline table lookalike",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\"a\"]\nenv = {{ A = \"\"\"\n[[phases]]\n\"\"\" }}\n[[phases]]\nname = \"c\"\n"
                ),
            ),
            // Not split: a table after the phases, phases in the head,
            // a quoted header, a syntax error in a phase.
            (
                "after",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\"a\"]\n[agents.b]\nkind = \"command\"\ncommand = [\"true\"]\n"
                ),
            ),
            (
                "in head",
                "version = 1\nname = \"x\"\nphases = []\n[[phases]]\nname = \"a\"\n".to_string(),
            ),
            (
                "quoted",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\"a\"]\n[[\"phases\"]]\nname = \"b\"\nagents = [\"a\"]\n"
                ),
            ),
            (
                "syntax",
                format!(
                    "{head}[[phases]]\nname = \"a\"\nagents = [\"a\"\n[[phases]]\nname = \"b\"\n"
                ),
            ),
            (
                "twice",
                format!("{head}[[phases]]\nname = \"a\"\nname = \"b\"\n"),
            ),
            (
                "table then array",
                format!("{head}[[phases]]\nname = \"a\"\n[phases]\nx = 1\n"),
            ),
            (
                "empty head",
                "[[phases]]\nname = 3\n[[phases]]\nx = 1\n".to_string(),
            ),
            // Layouts that split as well.
            (
                "crlf",
                format!("{head}[[phases]]\nname = \"a\"\nagents = [\"a\"]\n[[phases]]\nname = 1\n")
                    .replace('\n', "\r\n"),
            ),
            (
                "bom tabs spaces",
                format!(
                    "\u{feff}{head}\t[[phases]]\nname = \"a\"\nagents = [\"a\"]\n[[ phases ]] # b\nname = \"b\"\nagents = [\"a\"]\nx.y = 1"
                ),
            ),
        ];
        let many: String = (0..300)
            .map(|i| format!("[[phases]]\nname = \"p{i}\"\nagents = [\"a\"]\ndepends_on = [\"p{}\"]\n[phases.tools]\nmax_turns = {i}\n\n", i.max(1) - 1))
            .collect();
        // Enough phases to be decoded by two threads: problems spread over
        // every chunk come back in file order, and a stretch deep in the
        // second half that does not decode alone sends the file whole.
        let many_problems: String = (0..300)
            .map(|i| {
                let bad = if i % 37 == 5 { "bogus = 1\n" } else { "" };
                format!("[[phases]]\nname = \"p{i}\"\n{bad}agents = [\"a\"]\n")
            })
            .collect();
        let many_late_lookalike = many.replace(
            "name = \"p250\"\n",
            "name = \"p250\"\nprompt = \"\"\"\n[[phases]]\n\"\"\"\n",
        );
        texts.extend(made.iter().map(|(n, t)| (n.to_string(), t.clone())));
        texts.push(("many".into(), format!("{head}{many}")));
        texts.push(("many problems".into(), format!("{head}{many_problems}")));
        texts.push((
            "many late lookalike".into(),
            format!("{head}{many_late_lookalike}"),
        ));
        let mut split = 0;
        for (name, text) in &texts {
            let source = SourceFile::new(name.as_str(), text.clone());
            let by_phase = format!(
                "{:?}",
                phase_stretches(text)
                    .and_then(|s| decode_by_phase(&source, &s))
                    .unwrap_or_else(|| decode_whole(&source))
            );
            let whole = format!("{:?}", decode_whole(&source));
            assert_eq!(by_phase, whole, "{name}");
            split += usize::from(
                phase_stretches(text).is_some_and(|s| decode_by_phase(&source, &s).is_some()),
            );
        }
        // Which crafted layouts are split, and which parsed whole.
        for (name, split) in [
            ("split", true),
            ("problems", true),
            ("lookalikes", false),
            ("string lookalike", false),
            ("inline table lookalike", false),
            ("prompt and array lines", true),
            ("many", true),
            ("many problems", true),
            ("many late lookalike", false),
            ("crlf", true),
            ("bom tabs spaces", true),
            ("after", false),
            ("in head", false),
            ("quoted", false),
            ("syntax", false),
            ("twice", false),
            ("table then array", false),
            ("empty head", false),
        ] {
            let text = &texts.iter().find(|(n, _)| n == name).unwrap().1;
            let source = SourceFile::new(name, text.clone());
            let parsed = phase_stretches(text).and_then(|s| decode_by_phase(&source, &s));
            assert_eq!(parsed.is_some(), split, "{name}: split {split}");
        }
        assert!(
            split > 10,
            "most of the repository's pipelines are split ({split})"
        );
    }

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
