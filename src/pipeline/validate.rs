//! Validation: raw pipeline in, span-free [`Pipeline`] out, every problem
//! in the file reported together.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::clis::{CliChecks, PhaseRanges, Spans};
use super::diagnostic::{Diagnostic, Problem, SourceFile};
use super::load::{self, Files};
use super::mcp_json;
use super::model::*;
use super::raw::{RawMcpServer, RawPipeline, RawToolSet, SpStr, Spanned, SpannedMap};
use super::template;
use crate::model::AgentKind;
use crate::model::Location;
use crate::model::suggest;
use crate::model::toolset::{
    Field, InternalTool, Layer, McpTool, Mode, ORCH_MCP_SERVER, Permission, ToolSetLayer,
};
use crate::pipeline::graph::{Cycle, PhaseGraph};

/// Above this many candidates, "did you mean" is not computed (it would make
/// huge broken files quadratic to diagnose).
const MAX_SUGGESTION_CANDIDATES: usize = 2_000;

pub(crate) struct Validator<'s> {
    source: &'s Arc<SourceFile>,
    /// What loading read for it: prompt files, profiles, `.mcp.json`.
    files: &'s Files,
    pub(crate) diags: Vec<Diagnostic>,
    /// Other files diagnostics may point into (profiles).
    extra_sources: Vec<Arc<SourceFile>>,
    /// What only the agent CLIs and this machine can answer.
    clis: &'s dyn CliChecks,
}

/// A prompt text and where it is written, to point at its variables.
struct TextAt {
    source: Arc<SourceFile>,
    place: Place,
    text: String,
}

enum Place {
    /// The text starts at this byte of the source.
    Offset(usize),
    /// The text is not in the source verbatim (a TOML string with escapes):
    /// point at the whole string.
    Whole(Range<usize>),
}

impl TextAt {
    /// A prompt string of `source`, written at `span`.
    fn inline(source: &Arc<SourceFile>, value: &str, span: &Range<usize>) -> TextAt {
        let written = source.text.get(span.clone()).unwrap_or("");
        // Usually the value follows the opening quote verbatim: check there
        // before searching (building a searcher for every prompt showed in
        // profiles). A value that starts with neither quote cannot match at
        // 0, where the quote is, so a match at 1 is the first one.
        let at_one = !value.is_empty()
            && written.starts_with(['"', '\''])
            && !value.starts_with(['"', '\''])
            && written.get(1..).is_some_and(|w| w.starts_with(value));
        let found = if at_one { Some(1) } else { written.find(value) };
        let place = match found {
            Some(i) => Place::Offset(span.start + i),
            None => Place::Whole(span.clone()),
        };
        TextAt {
            source: Arc::clone(source),
            place,
            text: value.to_string(),
        }
    }

    /// A prompt file, as its own source.
    fn file(name: &str, text: &str) -> TextAt {
        TextAt {
            source: SourceFile::new(name, text.to_string()),
            place: Place::Offset(0),
            text: text.to_string(),
        }
    }

    /// Where a variable at `span` of the text is in the source.
    fn span(&self, span: &Range<usize>) -> Range<usize> {
        match &self.place {
            Place::Offset(o) => o + span.start..o + span.end,
            Place::Whole(r) => r.clone(),
        }
    }
}

fn is_valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Why a duration did not parse, in words that name the offending text
/// (humantime's own messages give byte offsets).
fn duration_reason(text: &str, e: &humantime::DurationError) -> String {
    use humantime::DurationError as E;
    let word_at = |i: usize| {
        text.get(i..)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("")
            .to_string()
    };
    match e {
        E::Empty => "it is empty".into(),
        E::NumberExpected(i) => format!("expected a number, found `{}`", word_at(*i)),
        E::InvalidCharacter(i) => match text.get(*i..).and_then(|r| r.chars().next()) {
            Some(c) => format!("unexpected character `{c}`"),
            None => e.to_string(),
        },
        E::UnknownUnit { unit, .. } => {
            format!("unknown unit `{unit}` (use s, m, h or d, or their long names)")
        }
        E::NumberOverflow => "the number is too large".into(),
    }
}

fn suggest_among<'a>(
    word: &str,
    candidates: impl ExactSizeIterator<Item = &'a str>,
) -> Option<String> {
    if candidates.len() > MAX_SUGGESTION_CANDIDATES {
        return None;
    }
    suggest(word, candidates)
}

impl<'s> Validator<'s> {
    pub(crate) fn new(
        source: &'s Arc<SourceFile>,
        files: &'s Files,
        clis: &'s dyn CliChecks,
    ) -> Self {
        Self {
            source,
            files,
            diags: Vec::new(),
            extra_sources: Vec::new(),
            clis,
        }
    }

    /// How a CLI reaches the pipeline's server `name`: a `command` or a
    /// `url` (with `headers`), never both.
    fn mcp_transport(&mut self, name: &str, s: &RawMcpServer) -> Option<McpTransport> {
        let bad = |reason: &str| Problem::BadMcpServer {
            server: name.to_string(),
            reason: reason.to_string(),
        };
        let pairs = |m: &SpannedMap<SpStr>| -> Vec<(String, String)> {
            m.0.iter()
                .map(|(k, v)| (k.value.clone(), v.value.clone()))
                .collect()
        };
        match (&s.command, &s.url) {
            (Some(_), Some(url)) => {
                self.error(bad("it has both `command` and `url`"), url.span.clone());
                None
            }
            (Some(cmd), None) => {
                if cmd.value.is_empty() {
                    self.error(Problem::Empty { key: "command" }, cmd.span.clone());
                }
                if let Some((k, _)) = s.headers.0.first() {
                    self.error(
                        bad("`headers` are for a remote server (`url`); a stdio server gets `env`"),
                        k.span.clone(),
                    );
                }
                Some(McpTransport::Stdio {
                    command: cmd.value.iter().map(|s| s.value.clone()).collect(),
                    env: pairs(&s.env),
                })
            }
            (None, Some(url)) => {
                if let Err(why) = mcp_json::check_url(&url.value) {
                    self.error(bad(&why), url.span.clone());
                    return None;
                }
                if let Some((k, _)) = s.env.0.first() {
                    self.error(
                        bad("`env` is for a stdio server (`command`); a remote server gets `headers`"),
                        k.span.clone(),
                    );
                }
                for (k, _) in &s.headers.0 {
                    let token = !k.value.is_empty()
                        && k.value
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                    if !token {
                        self.error(
                            bad(&format!("`{}` is not an HTTP header name", k.value)),
                            k.span.clone(),
                        );
                    }
                }
                Some(McpTransport::Http {
                    url: url.value.clone(),
                    headers: pairs(&s.headers),
                })
            }
            (None, None) => None,
        }
    }

    fn error(&mut self, problem: Problem, span: Range<usize>) {
        self.diags
            .push(Diagnostic::error(problem, self.source, span));
    }

    fn loc(&self, span: &Range<usize>) -> Location {
        self.source.location(span)
    }

    fn name(&mut self, what: &'static str, s: &Spanned<String>) -> bool {
        if is_valid_name(&s.value) {
            return true;
        }
        self.error(
            Problem::BadName {
                what,
                name: s.value.clone(),
            },
            s.span.clone(),
        );
        false
    }

    fn duration(&mut self, s: &Option<Spanned<String>>) -> Option<Duration> {
        let s = s.as_ref()?;
        match humantime::parse_duration(s.value.trim()) {
            Ok(d) if d.is_zero() => {
                self.error(
                    Problem::BadDuration {
                        value: s.value.clone(),
                        reason: "it must be longer than zero".into(),
                    },
                    s.span.clone(),
                );
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                self.error(
                    Problem::BadDuration {
                        value: s.value.clone(),
                        reason: duration_reason(s.value.trim(), &e),
                    },
                    s.span.clone(),
                );
                None
            }
        }
    }

    fn bounded(
        &mut self,
        key: &'static str,
        v: &Option<Spanned<i64>>,
        min: i64,
        max: i64,
    ) -> Option<u32> {
        let v = v.as_ref()?;
        if v.value < min {
            self.error(
                Problem::TooSmall {
                    key: key.to_string(),
                    min,
                    found: v.value.to_string(),
                },
                v.span.clone(),
            );
            None
        } else if v.value > max {
            self.error(
                Problem::TooLarge {
                    key: key.to_string(),
                    max,
                    found: v.value.to_string(),
                },
                v.span.clone(),
            );
            None
        } else {
            u32::try_from(v.value).ok()
        }
    }

    fn choice<T>(
        &mut self,
        what: &'static str,
        v: &Option<Spanned<String>>,
        allowed: &'static [&'static str],
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let v = v.as_ref()?;
        let parsed = parse(&v.value);
        if parsed.is_none() {
            self.error(
                Problem::UnknownValue {
                    what,
                    value: v.value.clone(),
                    suggestion: suggest(&v.value, allowed.iter().copied()),
                    allowed,
                },
                v.span.clone(),
            );
        }
        parsed
    }

    /// Turn a raw ToolSet table into a layer; `servers` are the MCP servers
    /// a tool may name.
    pub(crate) fn toolset(&mut self, raw: &RawToolSet, servers: &HashSet<&str>) -> ToolSetLayer {
        let mut layer = ToolSetLayer::default();
        if let Some(list) = &raw.internal {
            let mut tools = Vec::with_capacity(list.value.len());
            let mut ok = true;
            for item in &list.value {
                match InternalTool::parse(&item.value) {
                    Ok(t) => tools.push(t),
                    Err(e) => {
                        ok = false;
                        self.error(
                            Problem::UnknownTool {
                                name: item.value.clone(),
                                suggestion: e.suggestion,
                            },
                            item.span.clone(),
                        );
                    }
                }
            }
            if ok {
                layer.internal = Some(Field {
                    value: tools.into(),
                    at: self.loc(&list.span),
                });
            }
        }
        if let Some(list) = &raw.mcp {
            let mut tools = Vec::with_capacity(list.value.len());
            let mut ok = true;
            for item in &list.value {
                match McpTool::parse(&item.value) {
                    Ok(McpTool {
                        server,
                        tool: Some(tool),
                    }) if server == ORCH_MCP_SERVER
                        && !crate::catalog::ORCH_TOOLS.contains(&tool.as_str()) =>
                    {
                        ok = false;
                        self.error(
                            Problem::UnknownOrchTool {
                                name: item.value.clone(),
                                suggestion: suggest_among(
                                    &tool,
                                    crate::catalog::ORCH_TOOLS.iter().copied(),
                                ),
                                tool,
                            },
                            item.span.clone(),
                        );
                    }
                    Ok(t) if t.server == ORCH_MCP_SERVER || servers.contains(t.server.as_str()) => {
                        tools.push(t)
                    }
                    Ok(t) => {
                        ok = false;
                        let unusable = self
                            .files
                            .project
                            .as_ref()
                            .and_then(|p| p.get(&t.server))
                            .and_then(|e| e.transport.clone().err());
                        if let Some(reason) = unusable {
                            self.error(
                                Problem::McpJsonEntry {
                                    name: item.value.clone(),
                                    server: t.server,
                                    reason,
                                },
                                item.span.clone(),
                            );
                            continue;
                        }
                        let candidates: Vec<&str> =
                            servers.iter().copied().chain([ORCH_MCP_SERVER]).collect();
                        let looked = match &self.files.project {
                            Some(p) if p.entries.is_empty() => {
                                format!("`{}` (it declares no server)", p.path.display())
                            }
                            Some(p) => format!(
                                "`{}` (it declares {})",
                                p.path.display(),
                                p.entries
                                    .iter()
                                    .map(|e| format!("`{}`", e.name))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            None => format!("`./{}` (there is none)", mcp_json::FILE),
                        };
                        self.error(
                            Problem::UnknownMcpServer {
                                name: item.value.clone(),
                                suggestion: suggest_among(&t.server, candidates.into_iter()),
                                server: t.server,
                                looked,
                            },
                            item.span.clone(),
                        );
                    }
                    Err(reason) => {
                        ok = false;
                        self.error(
                            Problem::BadMcpName {
                                name: item.value.clone(),
                                reason,
                            },
                            item.span.clone(),
                        );
                    }
                }
            }
            if ok {
                layer.mcp = Some(Field {
                    value: tools.into(),
                    at: self.loc(&list.span),
                });
            }
        }
        if let Some(p) = self.choice(
            "permission",
            &raw.permission,
            Permission::NAMES,
            Permission::parse,
        ) {
            let span = raw
                .permission
                .as_ref()
                .map(|s| s.span.clone())
                .unwrap_or_default();
            layer.permission = Some(Field {
                value: p,
                at: self.loc(&span),
            });
        }
        if let Some(n) = self.bounded("max_turns", &raw.max_turns, 1, 100_000) {
            let span = raw
                .max_turns
                .as_ref()
                .map(|s| s.span.clone())
                .unwrap_or_default();
            layer.max_turns = Some(Field {
                value: n,
                at: self.loc(&span),
            });
        }
        layer
    }

    /// The pipeline `raw` describes, when it is valid. Each raw phase is
    /// dropped once its model phase is made.
    pub(crate) fn pipeline(&mut self, mut raw: RawPipeline) -> Option<Pipeline> {
        if let Some(v) = &raw.version
            && v.value != 1
        {
            self.error(
                Problem::Version {
                    found: v.value.to_string(),
                },
                v.span.clone(),
            );
        }
        if let Some(n) = &raw.name {
            self.name("pipeline", n);
        }

        let d = raw.defaults.as_ref();
        let defaults = Defaults {
            mode: d
                .and_then(|d| self.choice("mode", &d.mode, Mode::NAMES, Mode::parse))
                .unwrap_or(Mode::Fix),
            timeout: d.and_then(|d| self.duration(&d.timeout)),
            stall_timeout: d.and_then(|d| self.duration(&d.stall_timeout)),
            retries: d
                .and_then(|d| self.bounded("retries", &d.retries, 0, 100))
                .unwrap_or(0),
            max_parallel: d.and_then(|d| self.bounded("max_parallel", &d.max_parallel, 1, 4_096)),
            enforcement: d
                .and_then(|d| {
                    self.choice(
                        "enforcement",
                        &d.enforcement,
                        Enforcement::NAMES,
                        Enforcement::parse,
                    )
                })
                .unwrap_or_default(),
        };

        // MCP servers: the pipeline's, then the workspace's `.mcp.json`
        // for names the pipeline does not declare.
        let mut mcp_servers = Vec::new();
        for (name, s) in &raw.mcp_servers.0 {
            if self.name("MCP server", name) && name.value.contains("__") {
                self.error(
                    Problem::BadName {
                        what: "MCP server",
                        name: name.value.clone(),
                    },
                    name.span.clone(),
                );
            }
            if let Some(transport) = self.mcp_transport(&name.value, s) {
                mcp_servers.push(McpServer {
                    name: name.value.clone(),
                    transport,
                    read_only: s.read_only.as_ref().is_some_and(|r| r.value),
                    source: McpSource::Pipeline(self.loc(&name.span)),
                });
            }
        }
        let mut server_names: HashSet<&str> = raw
            .mcp_servers
            .0
            .iter()
            .map(|(n, _)| n.value.as_str())
            .collect();
        let project = self.files.project.clone();
        if let Some(project) = &project {
            for e in &project.entries {
                if let (Ok(t), false) = (&e.transport, server_names.contains(e.name.as_str())) {
                    mcp_servers.push(McpServer {
                        name: e.name.clone(),
                        transport: t.clone(),
                        read_only: false,
                        source: McpSource::ProjectFile(project.path.clone()),
                    });
                }
            }
            server_names.extend(
                project
                    .entries
                    .iter()
                    .filter(|e| e.transport.is_ok())
                    .map(|e| e.name.as_str()),
            );
        }

        // The agent registry.
        let mut agents: Vec<Agent> = Vec::new();
        for (name, a) in &raw.agents.0 {
            self.name("agent", name);
            let kind = match &a.kind {
                Some(k) => self.choice(
                    "agent kind",
                    &Some(k.clone()),
                    AgentKind::NAMES,
                    AgentKind::parse,
                ),
                None => {
                    let k = AgentKind::builtin(&name.value);
                    if k.is_none() {
                        self.error(
                            Problem::MissingKind {
                                name: name.value.clone(),
                            },
                            name.span.clone(),
                        );
                    }
                    k
                }
            };
            let Some(kind) = kind else { continue };
            let command: Option<Vec<String>> = a
                .command
                .as_ref()
                .map(|c| c.value.iter().map(|s| s.value.clone()).collect());
            match (&kind, &a.command) {
                (AgentKind::Command, None) => self.error(
                    Problem::MissingCommand {
                        name: name.value.clone(),
                    },
                    name.span.clone(),
                ),
                (AgentKind::Command, Some(c)) if c.value.is_empty() => {
                    self.error(Problem::Empty { key: "command" }, c.span.clone())
                }
                (k, Some(c)) if *k != AgentKind::Command => self.error(
                    Problem::CommandOnNonCommand {
                        kind: k.to_string(),
                    },
                    c.span.clone(),
                ),
                _ => {}
            }
            if let (AgentKind::Command, Some(b)) = (&kind, &a.binary) {
                self.error(
                    Problem::BinaryOnCommand {
                        name: name.value.clone(),
                    },
                    b.span.clone(),
                );
            }
            let mut modes = Vec::new();
            for (mode_name, settings) in &a.modes.0 {
                let Some(mode) =
                    self.choice("mode", &Some(mode_name.clone()), Mode::NAMES, Mode::parse)
                else {
                    continue;
                };
                let tools = self.toolset(&settings.tools, &server_names);
                let flags: Vec<String> = settings
                    .flags
                    .as_ref()
                    .map(|f| f.value.iter().map(|s| s.value.clone()).collect())
                    .unwrap_or_default();
                if let Some(f) = &settings.flags {
                    for (i, flag) in f.value.iter().enumerate() {
                        let next = f.value.get(i + 1).map(|n| n.value.as_str());
                        if let Some(field) = self.clis.controlled_flag(kind, &flag.value, next) {
                            self.error(
                                Problem::ControlledFlag {
                                    flag: flag.value.clone(),
                                    kind: kind.to_string(),
                                    field,
                                },
                                flag.span.clone(),
                            );
                        }
                    }
                }
                modes.push((mode, ModeSettings { tools, flags }));
            }
            for (k, v) in &a.env.0 {
                if let Err(why) = self.clis.check_env(kind, &k.value, &v.value) {
                    self.error(
                        Problem::ControlledEnv {
                            name: k.value.clone(),
                            kind: kind.to_string(),
                            why,
                        },
                        k.span.clone(),
                    );
                }
            }
            let binary = a.binary.as_ref().map(|b| b.value.clone());
            if let Some(m) = &a.model
                && let Err(reason) = self.clis.check_model(kind, &m.value)
            {
                self.error(
                    Problem::BadModel {
                        model: m.value.clone(),
                        kind: kind.to_string(),
                        reason,
                    },
                    m.span.clone(),
                );
            }
            agents.push(Agent {
                name: name.value.clone(),
                kind,
                binary,
                model: a.model.as_ref().map(|m| m.value.clone()),
                model_at: a.model.as_ref().map(|m| self.loc(&m.span)),
                env: a
                    .env
                    .0
                    .iter()
                    .map(|(k, v)| (k.value.clone(), v.value.clone()))
                    .collect(),
                command,
                modes,
            });
        }
        let declared: HashSet<String> = raw.agents.0.iter().map(|(n, _)| n.value.clone()).collect();

        // Phases.
        let mut raw_phases = match raw.phases.take() {
            Some(p) => {
                if p.value.is_empty() {
                    self.error(Problem::Empty { key: "phases" }, p.span);
                }
                p.value
            }
            None => Vec::new(),
        };
        // The names stay for the whole loop (dependencies are looked up
        // by name); the rest of each raw phase goes when it is used.
        let names: Vec<Option<Spanned<String>>> =
            raw_phases.iter_mut().map(|p| p.name.take()).collect();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            if let Some(n) = n {
                if !self.name("phase", n) {
                    continue;
                }
                if let Some(first) = index.insert(&n.value, i) {
                    let first_span = names[first].as_ref().map_or(0..0, |f| f.span.clone());
                    let line = self.source.line_col(first_span.start).0;
                    self.diags.push(
                        Diagnostic::error(
                            Problem::DuplicatePhase {
                                name: n.value.clone(),
                            },
                            self.source,
                            n.span.clone(),
                        )
                        .with_label(format!("first defined on line {line}")),
                    );
                    // The first definition keeps the name.
                    index.insert(&n.value, first);
                }
            }
        }

        // Grown as the raw phases are freed, not sized for all of them
        // while every raw phase is still here (the peak of a long file).
        let mut phases = Vec::new();
        let mut dep_spans = PhaseRanges::default();
        let mut agent_positions = PhaseRanges::default();
        // Phases whose prompt problem is reported already (`prompts` then
        // says nothing more of them).
        let mut prompt_reported_of: Vec<bool> = Vec::new();
        // Where each phase's prompt texts are written, for their variables.
        let mut prompt_places: Vec<Vec<TextAt>> = Vec::new();
        for (p, pname) in raw_phases.into_iter().zip(&names) {
            let p = &*p;
            let name = pname.as_ref().map(|n| n.value.clone()).unwrap_or_default();
            // Agents of the phase.
            let mut phase_agents = Vec::new();
            let mut spans = Vec::new();
            if let Some(list) = &p.agents {
                if list.value.is_empty() {
                    self.error(Problem::Empty { key: "agents" }, list.span.clone());
                }
                let mut seen = HashSet::new();
                for a in &list.value {
                    if !seen.insert(a.value.as_str()) {
                        self.error(
                            Problem::DuplicateAgent {
                                name: a.value.clone(),
                                phase: name.clone(),
                            },
                            a.span.clone(),
                        );
                        continue;
                    }
                    if declared.contains(&a.value) {
                        phase_agents.push(a.value.clone());
                        spans.push(a.span.clone());
                    } else if let Some(kind) = AgentKind::builtin(&a.value) {
                        if !agents.iter().any(|x| x.name == a.value) {
                            agents.push(Agent::builtin(&a.value, kind));
                        }
                        phase_agents.push(a.value.clone());
                        spans.push(a.span.clone());
                    } else {
                        let candidates: Vec<&str> = declared
                            .iter()
                            .map(String::as_str)
                            .chain(AgentKind::NAMES.iter().copied().filter(|n| *n != "command"))
                            .collect();
                        self.error(
                            Problem::UnknownAgent {
                                name: a.value.clone(),
                                suggestion: suggest_among(&a.value, candidates.into_iter()),
                            },
                            a.span.clone(),
                        );
                    }
                }
            }

            // Dependencies.
            let mut depends_on = Vec::new();
            let mut dspans = Vec::new();
            if let Some(list) = &p.depends_on {
                for dep in &list.value {
                    if dep.value == name {
                        self.error(
                            Problem::SelfDependency {
                                phase: name.clone(),
                            },
                            dep.span.clone(),
                        );
                    } else if !index.contains_key(dep.value.as_str()) {
                        let suggestion = suggest_among(&dep.value, index.keys().copied());
                        self.error(
                            Problem::UnknownDependency {
                                phase: name.clone(),
                                name: dep.value.clone(),
                                suggestion,
                            },
                            dep.span.clone(),
                        );
                    } else if !depends_on.contains(&dep.value) {
                        depends_on.push(dep.value.clone());
                        dspans.push(dep.span.clone());
                    }
                }
            }

            // Prompt and profile.
            let prompt = match (&p.prompt, &p.prompt_file) {
                (Some(_), Some(f)) => {
                    self.error(
                        Problem::PromptConflict {
                            phase: name.clone(),
                        },
                        f.span.clone(),
                    );
                    None
                }
                (Some(t), None) => Some(Prompt::Inline(t.value.clone())),
                (None, Some(f)) => match self.files.prompts.get(&f.value) {
                    Some(Ok((path, text))) => Some(Prompt::File {
                        path: path.clone(),
                        text: text.clone(),
                    }),
                    Some(Err(problem)) => {
                        self.error(problem.clone(), f.span.clone());
                        None
                    }
                    None => unreachable!("loading reads every prompt_file"),
                },
                (None, None) => None,
            };
            let profile = p.profile.as_ref().and_then(|n| {
                if !self.name("profile", n) {
                    return None;
                }
                let files = self.files;
                match files
                    .profiles
                    .get(&n.value)
                    .expect("loading reads every profile")
                {
                    Ok((source, raw_profile, diags)) => {
                        let mut diags = diags.clone();
                        let tools = raw_profile.tools.as_ref().map(|t| {
                            let mut v = Validator::new(source, files, self.clis);
                            let layer = v.toolset(t, &server_names);
                            diags.extend(v.diags);
                            layer
                        });
                        for o in &raw_profile.omit {
                            if !crate::catalog::OMITTABLE.contains(&o.value.as_str()) {
                                diags.push(Diagnostic::error(
                                    Problem::ProfileFrontMatter {
                                        name: n.value.clone(),
                                        reason: format!(
                                            "`omit` may name {} (the workspace boundary, the contract and the profile are always there), not `{}`",
                                            crate::catalog::OMITTABLE.join(", "),
                                            o.value
                                        ),
                                    },
                                    source,
                                    o.span.clone(),
                                ));
                            }
                        }
                        // Its model must suit every agent of the phase
                        // (unless the phase names its own).
                        if let Some(m) = raw_profile.model.as_ref().filter(|_| p.model.is_none()) {
                            for a in p.agents.iter().flat_map(|l| &l.value) {
                                let Some(kind) = agents
                                    .iter()
                                    .find(|x| x.name == a.value)
                                    .map(|x| x.kind)
                                    .or_else(|| AgentKind::builtin(&a.value))
                                else {
                                    continue;
                                };
                                if let Err(reason) =
                                    self.clis.check_model(kind, &m.value)
                                {
                                    diags.push(Diagnostic::error(
                                        Problem::BadModel {
                                            model: m.value.clone(),
                                            kind: kind.to_string(),
                                            reason,
                                        },
                                        source,
                                        m.span.clone(),
                                    ));
                                }
                            }
                        }
                        self.diags.extend(diags);
                        // Once per profile file, not per phase that uses it
                        // (the list is searched for each such phase).
                        if !self.extra_sources.iter().any(|s| Arc::ptr_eq(s, source)) {
                            self.extra_sources.push(Arc::clone(source));
                        }
                        Some(Box::new(Profile {
                            name: n.value.clone(),
                            path: raw_profile.path.clone(),
                            tools: tools.unwrap_or_default(),
                            model: raw_profile.model.as_ref().map(|m| m.value.clone()),
                            model_at: raw_profile.model.as_ref().map(|m| source.location(&m.span)),
                            omit: raw_profile.omit.iter().map(|o| o.value.clone()).collect(),
                            body: raw_profile.body.clone(),
                        }))
                    }
                    Err(_) => {
                        // State the lookup rule rather than list absolute
                        // paths: shorter, and the same on every machine.
                        let dir = match self.files.base.display().to_string() {
                            d if d.is_empty() => ".".to_string(),
                            d => d,
                        };
                        self.error(
                            Problem::ProfileMissing {
                                name: n.value.clone(),
                                looked: format!(
                                    "`profiles/{}.md` in `{dir}` and each directory above it up to the repository root (the nearest with a `.git`; without one, only `{dir}`)",
                                    n.value
                                ),
                            },
                            n.span.clone(),
                        );
                        None
                    }
                }
            });

            let tools = p
                .tools
                .as_ref()
                .map(|t| Box::new(self.toolset(t, &server_names)));
            let mut agent_tools = Vec::with_capacity(p.agent_tools.0.len());
            for (agent, t) in &p.agent_tools.0 {
                if p.agents.is_some()
                    && !p
                        .agents
                        .iter()
                        .flat_map(|l| &l.value)
                        .any(|a| a.value == agent.value)
                {
                    self.error(
                        Problem::AgentToolsNotInPhase {
                            agent: agent.value.clone(),
                            phase: name.clone(),
                        },
                        agent.span.clone(),
                    );
                }
                agent_tools.push((agent.value.clone(), self.toolset(t, &server_names)));
            }
            let mode = p
                .mode
                .as_ref()
                .and_then(|m| self.choice("mode", &Some(m.clone()), Mode::NAMES, Mode::parse))
                .unwrap_or(defaults.mode);
            let artifacts = p
                .artifacts
                .as_ref()
                .map(|a| {
                    a.value
                        .iter()
                        .filter_map(|s| {
                            if s.value.trim().is_empty() {
                                self.error(Problem::Empty { key: "artifacts[]" }, s.span.clone());
                                None
                            } else {
                                Some(s.value.clone())
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            // A prompt or profile that was given but is broken has been
            // reported already; "no prompt" on top of it would be wrong.
            let prompt_reported = ((p.prompt.is_some() || p.prompt_file.is_some())
                && prompt.is_none())
                || (p.profile.is_some() && profile.is_none());
            let contract = self.contract(&name, p, &phase_agents, &agents, &declared);
            // A judge named by its kind joins the registry like any agent.
            if let Some(j) = contract.as_ref().and_then(|c| c.judge.as_ref())
                && !agents.iter().any(|a| a.name == *j)
                && let Some(kind) = AgentKind::builtin(j)
            {
                agents.push(Agent::builtin(j, kind));
            }
            // The phase's model must suit every agent of the phase.
            let model = p.model.as_ref().map(|m| {
                for a in &phase_agents {
                    let Some(kind) = agents
                        .iter()
                        .find(|x| x.name == *a)
                        .map(|x| x.kind)
                        .or_else(|| AgentKind::builtin(a))
                    else {
                        continue;
                    };
                    if let Err(reason) = self.clis.check_model(kind, &m.value) {
                        self.error(
                            Problem::BadModel {
                                model: m.value.clone(),
                                kind: kind.to_string(),
                                reason,
                            },
                            m.span.clone(),
                        );
                    }
                }
                (m.value.clone(), self.loc(&m.span))
            });
            let phase = Phase {
                location: self.loc(&pname.as_ref().map_or(p.span.clone(), |n| n.span.clone())),
                model,
                name,
                agents: phase_agents,
                mode,
                parallel: p.parallel.as_ref().is_some_and(|b| b.value),
                required: p.required.as_ref().is_none_or(|b| b.value),
                depends_on,
                prompt,
                profile,
                timeout: self.duration(&p.timeout).or(defaults.timeout),
                stall_timeout: self.duration(&p.stall_timeout).or(defaults.stall_timeout),
                retries: self
                    .bounded("retries", &p.retries, 0, 100)
                    .unwrap_or(defaults.retries),
                artifacts,
                contract: contract.map(Box::new),
                tools,
                agent_tools,
            };
            phases.push(Box::new(phase));
            dep_spans.push(dspans);
            // `prompts` checks the agents at these spans; none when the
            // phase's prompt problem is already reported.
            agent_positions.push(spans);
            prompt_reported_of.push(prompt_reported);
            // Only texts that may hold a variable (with `{{`) are kept
            // for `templates`.
            let mut places = Vec::new();
            let this = phases.last().expect("just pushed");
            if let Some(t) = &p.prompt
                && template::may_hold_variables(&t.value)
            {
                places.push(TextAt::inline(self.source, &t.value, &t.span));
            }
            if let Some(Prompt::File { path, text }) = &this.prompt
                && template::may_hold_variables(text)
            {
                places.push(TextAt::file(&load::shown(path), text));
            }
            if let Some(prof) = &this.profile
                && template::may_hold_variables(&prof.body)
                && let Some(source) = self
                    .extra_sources
                    .iter()
                    .find(|s| prof.path.ends_with(&*s.name))
            {
                // The body is the end of the file.
                places.push(TextAt {
                    source: Arc::clone(source),
                    place: Place::Offset(source.text.len() - prof.body.len()),
                    text: prof.body.clone(),
                });
            }
            prompt_places.push(places);
        }

        drop(index);
        drop(names);
        let head = PipelineHead {
            path: Default::default(),
            name: raw
                .name
                .as_ref()
                .map(|n| n.value.clone())
                .unwrap_or_default(),
            description: raw.description.as_ref().map(|d| d.value.clone()),
            defaults,
        };
        let pipeline = Pipeline::new(head, agents, mcp_servers, phases);

        self.prompts(&pipeline, &agent_positions, &prompt_reported_of);
        // One graph for both checks, from the edges the pipeline keeps for
        // the enforcement pass (built once, not three times).
        let graph = PhaseGraph::of(pipeline.dependencies().clone());
        self.cycles(&pipeline, &graph, &dep_spans);
        self.templates(&pipeline, graph.as_ref().ok(), &prompt_places);
        let spans = Spans {
            source: self.source,
            profiles: &self.extra_sources,
            agents: &agent_positions,
        };
        let found = self.clis.enforcement(&pipeline, &spans);
        self.diags.extend(found);
        self.unwritable_artifacts(&pipeline);

        if self.diags.iter().any(Diagnostic::is_error) {
            None
        } else {
            Some(pipeline)
        }
    }

    /// A phase's contract: an artifact template with `{run}` and
    /// `{phase}`; a judge exactly when `validation = "judge"` (the default
    /// when a judge is named), an agent that is not one of the phase's own.
    fn contract(
        &mut self,
        phase: &str,
        p: &super::raw::RawPhase,
        phase_agents: &[String],
        agents: &[Agent],
        declared: &HashSet<String>,
    ) -> Option<Contract> {
        let given = p.required_sections.is_some()
            || p.validation.is_some()
            || p.judge.is_some()
            || p.max_attempts.is_some();
        let bad = |reason: &str| Problem::Contract {
            phase: phase.to_string(),
            reason: reason.to_string(),
        };
        let Some(artifact) = &p.artifact else {
            if given {
                let span = p
                    .validation
                    .as_ref()
                    .map(|v| v.span.clone())
                    .or_else(|| p.judge.as_ref().map(|j| j.span.clone()))
                    .or_else(|| p.required_sections.as_ref().map(|r| r.span.clone()))
                    .or_else(|| p.max_attempts.as_ref().map(|m| m.span.clone()))
                    .unwrap_or(p.span.clone());
                self.error(bad("it needs an `artifact`"), span);
            }
            return None;
        };
        let mut ok = true;
        let t = &artifact.value;
        let path = std::path::Path::new(t);
        if !t.contains("{run}") || !t.contains("{phase}") {
            self.error(
                bad("`artifact` must use `{run}` and `{phase}`, so every run and phase writes its own"),
                artifact.span.clone(),
            );
            ok = false;
        } else if path.is_absolute()
            || path
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            self.error(
                bad("`artifact` is a path inside the workspace (no `/` at the start, no `..`)"),
                artifact.span.clone(),
            );
            ok = false;
        }
        let sections: Vec<String> = p
            .required_sections
            .iter()
            .flat_map(|l| &l.value)
            .filter_map(|s| {
                let name = s.value.trim().trim_start_matches("## ").trim().to_string();
                if name.is_empty() {
                    self.error(
                        Problem::Empty {
                            key: "required_sections[]",
                        },
                        s.span.clone(),
                    );
                    None
                } else {
                    Some(name)
                }
            })
            .collect();
        let mut validation = self.choice(
            "validation",
            &p.validation,
            Validation::NAMES,
            Validation::parse,
        );
        if validation.is_none() && p.validation.is_some() {
            ok = false;
        }
        if validation.is_none() {
            validation = Some(if p.judge.is_some() {
                Validation::Judge
            } else {
                Validation::Structural
            });
        }
        let validation = validation.unwrap_or(Validation::Structural);
        let judge = match (&p.judge, validation) {
            (Some(j), Validation::Judge) => {
                let known = declared.contains(&j.value)
                    || agents.iter().any(|a| a.name == j.value)
                    || AgentKind::builtin(&j.value).is_some();
                if !known {
                    self.error(
                        Problem::UnknownAgent {
                            name: j.value.clone(),
                            suggestion: suggest(&j.value, declared.iter().map(String::as_str)),
                        },
                        j.span.clone(),
                    );
                    ok = false;
                } else if phase_agents.contains(&j.value) {
                    self.error(
                        bad("the judge is one of the phase's own agents: a judge must be independent of the work"),
                        j.span.clone(),
                    );
                    ok = false;
                }
                Some(j.value.clone())
            }
            (Some(j), _) => {
                self.error(
                    bad("`judge` needs `validation = \"judge\"`"),
                    j.span.clone(),
                );
                ok = false;
                None
            }
            (None, Validation::Judge) => {
                let span = p
                    .validation
                    .as_ref()
                    .map_or(artifact.span.clone(), |v| v.span.clone());
                self.error(
                    bad("`validation = \"judge\"` needs `judge = \"<agent>\"`"),
                    span,
                );
                ok = false;
                None
            }
            (None, _) => None,
        };
        let max_attempts = self
            .bounded("max_attempts", &p.max_attempts, 1, 10)
            .unwrap_or(3);
        ok.then(|| Contract {
            artifact: t.clone(),
            required_sections: sections,
            validation,
            judge,
            max_attempts,
        })
    }

    /// Every variable in a prompt names something that will have a value:
    /// `{{artifacts.X}}` an earlier phase (one this phase depends on) that
    /// declares artifacts.
    fn templates(
        &mut self,
        pipeline: &Pipeline,
        graph: Option<&PhaseGraph>,
        places: &[Vec<TextAt>],
    ) {
        use super::template::Meaning;
        for (i, (phase, places)) in pipeline.phases.iter().zip(places).enumerate() {
            for place in places {
                for v in template::variables(&place.text) {
                    let why = match template::meaning(&v.name) {
                        Err(why) => Some(why),
                        Ok(Meaning::Artifacts(p)) => {
                            let earlier = graph.map(|g| g.upstream(&[i]));
                            match pipeline.phases.iter().position(|x| x.name == p) {
                                None => {
                                    Some(format!("`{{{{{}}}}}`: there is no phase `{p}`", v.name))
                                }
                                Some(j)
                                    if j == i
                                        || earlier.as_ref().is_some_and(|e| !e.contains(&j)) =>
                                {
                                    Some(format!(
                                        "`{{{{{}}}}}`: phase `{}` does not depend on `{p}`, so its artifacts may not exist yet; add `{p}` to its `depends_on`",
                                        v.name, phase.name
                                    ))
                                }
                                Some(j) if pipeline.phases[j].artifacts.is_empty() => {
                                    Some(format!(
                                        "`{{{{{}}}}}`: phase `{p}` declares no `artifacts`",
                                        v.name
                                    ))
                                }
                                Some(_) => None,
                            }
                        }
                        Ok(_) => None,
                    };
                    if let Some(reason) = why {
                        let span = place.span(&v.span);
                        self.diags.push(Diagnostic::error(
                            Problem::Template { reason },
                            &place.source,
                            span,
                        ));
                    }
                }
            }
        }
    }

    /// Every LLM agent needs a prompt (inline, file, or a profile body).
    fn prompts(&mut self, pipeline: &Pipeline, agent_spans: &PhaseRanges, reported: &[bool]) {
        for (i, phase) in pipeline.phases.iter().enumerate() {
            if reported.get(i).copied().unwrap_or(true) {
                continue;
            }
            let spans = agent_spans.of(i);
            let has_prompt = phase.prompt.is_some()
                || phase
                    .profile
                    .as_ref()
                    .is_some_and(|p| !p.body.trim().is_empty());
            if has_prompt {
                continue;
            }
            for (agent, span) in phase.agents.iter().zip(spans) {
                if pipeline.agent(agent).is_some_and(|a| a.kind.is_llm()) {
                    self.error(
                        Problem::MissingPrompt {
                            phase: phase.name.clone(),
                            agent: agent.clone(),
                        },
                        span.clone(),
                    );
                }
            }
        }
    }

    fn cycles(
        &mut self,
        pipeline: &Pipeline,
        graph: &Result<PhaseGraph, Vec<Cycle>>,
        dep_spans: &PhaseRanges,
    ) {
        let Err(cycles) = graph else {
            return;
        };
        for cycle in cycles {
            // The path follows "depends on" (`a -> b`: `a` depends on `b`).
            // Point at its first step: the first phase's entry naming the
            // second one.
            let first = cycle[0];
            let next = cycle[1];
            let span = pipeline.phases[first]
                .depends_on
                .iter()
                .position(|d| *d == pipeline.phases[next].name)
                .and_then(|i| dep_spans.of(first).get(i).cloned())
                .unwrap_or_else(|| {
                    let l = &pipeline.phases[first].location;
                    l.span()
                });
            let label = format!(
                "`{}` depends on `{}` here",
                pipeline.phases[first].name, pipeline.phases[next].name
            );
            let path = cycle
                .iter()
                .map(|&i| pipeline.phases[i].name.as_str())
                .collect::<Vec<_>>()
                .join(" -> ");
            self.diags.push(
                Diagnostic::error(Problem::Cycle { path }, self.source, span).with_label(label),
            );
        }
    }

    /// A phase that must leave a file behind where none of its agents may
    /// write (read-only; a plain command without a `permission` runs
    /// unconfined and may): its agents cannot produce it. The contract's
    /// artifact is this run's and this phase's alone, so that is an error;
    /// a declared `artifacts` path is a warning, since an earlier phase
    /// may have left it there.
    fn unwritable_artifacts(&mut self, pipeline: &Pipeline) {
        for phase in &pipeline.phases {
            let (path, error) = match (&phase.contract, phase.artifacts.first()) {
                (Some(c), _) => (c.artifact.clone(), true),
                (None, Some(a)) => (a.clone(), false),
                (None, None) => continue,
            };
            let can_write = phase.agents.iter().any(|name| {
                pipeline.agent(name).is_none_or(|agent| {
                    let r = pipeline.resolve(phase, agent);
                    r.toolset.permission != Permission::ReadOnly
                        || (!agent.kind.is_llm() && r.provenance.permission.layer == Layer::Default)
                })
            });
            if !can_write {
                let span = phase.location.span();
                let problem = Problem::UnwritableArtifact {
                    phase: phase.name.clone(),
                    path,
                };
                self.diags.push(if error {
                    Diagnostic::error(problem, self.source, span)
                } else {
                    Diagnostic::warning(problem, self.source, span)
                });
            }
        }
    }
}
