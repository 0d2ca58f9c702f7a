//! ToolSets: the canonical tool vocabulary, permission levels, and the
//! field-by-field, five-layer resolution with provenance.
//!
//! Resolution (docs/pipeline.md, "How an agent's tools are resolved"): each of `internal`, `mcp`, `permission`
//! and `max_turns` is taken from the first layer that sets it, in the order
//! `agent_tools` > `tools` > `profile` > `mode` > `default`. Lists replace;
//! they never merge.

use std::fmt;
use std::sync::{Arc, LazyLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use strum::VariantNames;

use super::source::Location;

/// A phase's mode.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum Mode {
    Plan,
    Fix,
    Audit,
    Review,
}

impl Mode {
    pub(crate) const NAMES: &'static [&'static str] = <Self as VariantNames>::VARIANTS;

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How far an agent may reach outside reading.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum Permission {
    ReadOnly,
    WorkspaceWrite,
    FullAccess,
}

impl Permission {
    pub(crate) const NAMES: &'static [&'static str] = <Self as VariantNames>::VARIANTS;

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    #[cfg(test)]
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// An agent's own tool, in orch's canonical vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InternalTool {
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    /// Unrestricted shell.
    Bash,
    /// Shell restricted to commands matching a pattern, `Bash(cargo test *)`.
    BashPattern(String),
    WebFetch,
    WebSearch,
    /// Sub-agents (`Task` is accepted as the old name).
    Agent,
    TodoWrite,
    NotebookEdit,
}

/// Why a tool name was not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownToolName {
    pub(crate) suggestion: Option<String>,
}

impl InternalTool {
    /// The plain names of the vocabulary, for suggestions and docs.
    pub(crate) const NAMES: &'static [&'static str] = &[
        "Read",
        "Write",
        "Edit",
        "Glob",
        "Grep",
        "Bash",
        "WebFetch",
        "WebSearch",
        "Agent",
        "TodoWrite",
        "NotebookEdit",
    ];

    pub(crate) fn parse(s: &str) -> Result<Self, UnknownToolName> {
        Ok(match s {
            "Read" => InternalTool::Read,
            "Write" => InternalTool::Write,
            "Edit" => InternalTool::Edit,
            "Glob" => InternalTool::Glob,
            "Grep" => InternalTool::Grep,
            "Bash" => InternalTool::Bash,
            "WebFetch" => InternalTool::WebFetch,
            "WebSearch" => InternalTool::WebSearch,
            "Agent" | "Task" => InternalTool::Agent,
            "TodoWrite" => InternalTool::TodoWrite,
            "NotebookEdit" => InternalTool::NotebookEdit,
            _ => {
                if let Some(inner) = s.strip_prefix("Bash(").and_then(|r| r.strip_suffix(')')) {
                    let pattern = inner.trim();
                    // A pattern that matches every command is no restriction:
                    // it is plain `Bash` (and must be treated as such: a `*`
                    // rule would also override the CLIs' own deny-all rules).
                    if !pattern.is_empty() && pattern.chars().all(|c| c == '*' || c.is_whitespace())
                    {
                        return Ok(InternalTool::Bash);
                    }
                    if !pattern.is_empty() && !pattern.contains(['(', ')']) {
                        return Ok(InternalTool::BashPattern(pattern.to_string()));
                    }
                    return Err(UnknownToolName {
                        suggestion: Some("Bash(<command pattern>)".into()),
                    });
                }
                let head = s.split('(').next().unwrap_or(s);
                let suggestion =
                    super::source::suggest(head, Self::NAMES.iter().copied().chain(["Task"]))
                        .map(|n| if n == "Task" { "Agent".to_string() } else { n });
                return Err(UnknownToolName { suggestion });
            }
        })
    }

    /// Whether the tool can change files (or anything else) by itself.
    pub(crate) fn writes(&self) -> bool {
        matches!(
            self,
            InternalTool::Write
                | InternalTool::Edit
                | InternalTool::NotebookEdit
                | InternalTool::Bash
        )
    }
}

impl fmt::Display for InternalTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InternalTool::Read => f.write_str("Read"),
            InternalTool::Write => f.write_str("Write"),
            InternalTool::Edit => f.write_str("Edit"),
            InternalTool::Glob => f.write_str("Glob"),
            InternalTool::Grep => f.write_str("Grep"),
            InternalTool::Bash => f.write_str("Bash"),
            InternalTool::BashPattern(p) => write!(f, "Bash({p})"),
            InternalTool::WebFetch => f.write_str("WebFetch"),
            InternalTool::WebSearch => f.write_str("WebSearch"),
            InternalTool::Agent => f.write_str("Agent"),
            InternalTool::TodoWrite => f.write_str("TodoWrite"),
            InternalTool::NotebookEdit => f.write_str("NotebookEdit"),
        }
    }
}

impl Serialize for InternalTool {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An MCP tool reference: `mcp__<server>__<tool>` or `mcp__<server>__*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct McpTool {
    pub(crate) server: String,
    /// `None` means every tool of the server (`*`).
    pub(crate) tool: Option<String>,
}

/// The server name of orch's own tracking MCP server.
pub(crate) const ORCH_MCP_SERVER: &str = "orch";

impl McpTool {
    pub(crate) fn parse(s: &str) -> Result<Self, &'static str> {
        let rest = s
            .strip_prefix("mcp__")
            .ok_or("it must start with `mcp__`")?;
        let (server, tool) = rest
            .split_once("__")
            .ok_or("it must have a `__` between server and tool")?;
        let valid = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !valid(server) || server.starts_with('_') || server.ends_with('_') {
            return Err("the server name must be letters, digits, `_` or `-`");
        }
        if tool == "*" {
            return Ok(McpTool {
                server: server.into(),
                tool: None,
            });
        }
        if !valid(tool) {
            return Err("the tool name must be letters, digits, `_` or `-`, or `*`");
        }
        Ok(McpTool {
            server: server.into(),
            tool: Some(tool.into()),
        })
    }
}

impl fmt::Display for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tool {
            Some(t) => write!(f, "mcp__{}__{}", self.server, t),
            None => write!(f, "mcp__{}__*", self.server),
        }
    }
}

impl Serialize for McpTool {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The tools one agent gets in one phase, fully resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSet {
    /// Shared with the layer that set it (and the defaults): a pipeline
    /// resolves every (phase, agent), and cloning is a count.
    pub(crate) internal: Arc<[InternalTool]>,
    pub(crate) mcp: Arc<[McpTool]>,
    pub(crate) permission: Permission,
    pub max_turns: u32,
}

impl ToolSet {
    /// Layer 5's permission for a mode.
    pub(crate) fn default_permission(mode: Mode) -> Permission {
        match mode {
            Mode::Plan | Mode::Audit | Mode::Review => Permission::ReadOnly,
            Mode::Fix => Permission::WorkspaceWrite,
        }
    }

    /// Layer 5: the built-in defaults for a mode.
    pub(crate) fn default_for(mode: Mode) -> Self {
        static READ_ONLY: LazyLock<ToolSet> = LazyLock::new(|| ToolSet::built_in(Mode::Plan));
        static FIX: LazyLock<ToolSet> = LazyLock::new(|| ToolSet::built_in(Mode::Fix));
        match mode {
            Mode::Plan | Mode::Audit | Mode::Review => READ_ONLY.clone(),
            Mode::Fix => FIX.clone(),
        }
    }

    fn built_in(mode: Mode) -> Self {
        use InternalTool::*;
        let permission = Self::default_permission(mode);
        let internal: Arc<[InternalTool]> = match mode {
            Mode::Plan | Mode::Audit | Mode::Review => Arc::new([Read, Glob, Grep]),
            Mode::Fix => Arc::new([Read, Write, Edit, Glob, Grep, Bash]),
        };
        ToolSet {
            internal,
            mcp: Arc::new([McpTool {
                server: ORCH_MCP_SERVER.into(),
                tool: None,
            }]),
            permission,
            max_turns: 25,
        }
    }
}

/// A value set in a file, with where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field<T> {
    pub(crate) value: T,
    pub(crate) at: Location,
}

/// One layer's partial ToolSet: each field set or not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolSetLayer {
    pub(crate) internal: Option<Field<Arc<[InternalTool]>>>,
    pub(crate) mcp: Option<Field<Arc<[McpTool]>>>,
    pub(crate) permission: Option<Field<Permission>>,
    pub(crate) max_turns: Option<Field<u32>>,
}

/// The resolution layers, highest priority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::Display)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub(crate) enum Layer {
    AgentTools,
    Tools,
    Profile,
    Mode,
    Default,
}

impl Layer {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where a resolved field came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) layer: Layer,
    pub(crate) at: Option<Location>,
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Origin", 2)?;
        st.serialize_field("layer", &self.layer)?;
        st.serialize_field("at", &self.at.as_ref().map(|l| l.to_string()))?;
        st.end()
    }
}

/// The origin of each resolved field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Provenance {
    pub(crate) internal: Origin,
    pub(crate) mcp: Origin,
    pub(crate) permission: Origin,
    pub(crate) max_turns: Origin,
}

/// A resolved ToolSet and where each of its fields came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    pub toolset: ToolSet,
    pub(crate) provenance: Provenance,
}

/// The four file layers of one (phase, agent), highest priority first,
/// each possibly absent.
pub(crate) type Layers<'a> = [(Layer, Option<&'a ToolSetLayer>); 4];

/// The first layer that sets a field, and the field (borrowed).
pub(crate) fn first_set<'a, T>(
    layers: &Layers<'a>,
    get: impl Fn(&'a ToolSetLayer) -> Option<&'a Field<T>>,
) -> Option<(Layer, &'a Field<T>)> {
    layers
        .iter()
        .find_map(|(layer, set)| set.and_then(&get).map(|f| (*layer, f)))
}

/// The `permission` [`resolve`] would give, alone (no lists copied).
pub(crate) fn resolve_permission(layers: Layers<'_>, mode: Mode) -> Permission {
    first_set(&layers, |l| l.permission.as_ref())
        .map_or_else(|| ToolSet::default_permission(mode), |(_, f)| f.value)
}

/// Resolve field by field; `mode` picks the built-in defaults.
pub(crate) fn resolve(layers: Layers<'_>, mode: Mode) -> Resolved {
    let defaults = ToolSet::default_for(mode);
    fn pick<'a, T: Clone + 'a>(
        layers: &Layers<'a>,
        get: impl Fn(&'a ToolSetLayer) -> Option<&'a Field<T>>,
        default: T,
    ) -> (T, Origin) {
        match first_set(layers, get) {
            Some((layer, field)) => (
                field.value.clone(),
                Origin {
                    layer,
                    at: Some(field.at.clone()),
                },
            ),
            None => (
                default,
                Origin {
                    layer: Layer::Default,
                    at: None,
                },
            ),
        }
    }
    let (internal, internal_o) = pick(&layers, |l| l.internal.as_ref(), defaults.internal);
    let (mcp, mcp_o) = pick(&layers, |l| l.mcp.as_ref(), defaults.mcp);
    let (permission, permission_o) = pick(&layers, |l| l.permission.as_ref(), defaults.permission);
    let (max_turns, max_turns_o) = pick(&layers, |l| l.max_turns.as_ref(), defaults.max_turns);
    Resolved {
        toolset: ToolSet {
            internal,
            mcp,
            permission,
            max_turns,
        },
        provenance: Provenance {
            internal: internal_o,
            mcp: mcp_o,
            permission: permission_o,
            max_turns: max_turns_o,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names pipeline files, `orch explain` and JSON output use, the
    /// same for strum (parse, display) and serde.
    #[test]
    fn every_name_is_spelt_one_way() {
        use crate::model::AgentKind;
        assert_eq!(Mode::NAMES, ["plan", "fix", "audit", "review"]);
        assert_eq!(
            Permission::NAMES,
            ["read-only", "workspace-write", "full-access"]
        );
        assert_eq!(
            AgentKind::NAMES,
            [
                "claude", "codex", "gemini", "opencode", "copilot", "command"
            ]
        );
        for (i, k) in AgentKind::ALL.iter().enumerate() {
            assert_eq!(k.as_str(), AgentKind::NAMES[i]);
            assert_eq!(k.to_string(), k.as_str());
            assert_eq!(AgentKind::parse(k.as_str()), Some(*k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        for m in [Mode::Plan, Mode::Fix, Mode::Audit, Mode::Review] {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
            assert_eq!(m.to_string(), m.as_str());
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        for p in [
            Permission::ReadOnly,
            Permission::WorkspaceWrite,
            Permission::FullAccess,
        ] {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
            assert_eq!(p.to_string(), p.as_str());
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        for l in [
            Layer::AgentTools,
            Layer::Tools,
            Layer::Profile,
            Layer::Mode,
            Layer::Default,
        ] {
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
            assert_eq!(l.to_string(), l.as_str());
        }
        assert_eq!(Layer::AgentTools.as_str(), "agent_tools");
        assert_eq!(Mode::parse("Plan"), None, "names are case-sensitive");
        assert_eq!(AgentKind::parse("Claude"), None);
    }

    fn at(line: u32) -> Location {
        Location {
            path: "p.toml".into(),
            line,
            column: 1,
            offset: 0,
            len: 0,
        }
    }

    #[test]
    fn vocabulary_parses_and_suggests() {
        assert_eq!(InternalTool::parse("Task"), Ok(InternalTool::Agent));
        assert_eq!(
            InternalTool::parse("Bash(cargo test *)"),
            Ok(InternalTool::BashPattern("cargo test *".into()))
        );
        assert_eq!(
            InternalTool::parse("Raed")
                .unwrap_err()
                .suggestion
                .as_deref(),
            Some("Read")
        );
        assert!(InternalTool::parse("Bash()").is_err());
        for star in ["Bash(*)", "Bash( * )", "Bash(**)", "Bash(* *)"] {
            assert_eq!(InternalTool::parse(star), Ok(InternalTool::Bash), "{star}");
        }
        assert!(
            InternalTool::parse("read").is_err(),
            "names are case-sensitive"
        );
    }

    #[test]
    fn mcp_names() {
        assert_eq!(
            McpTool::parse("mcp__tavily__tavily_search")
                .unwrap()
                .tool
                .as_deref(),
            Some("tavily_search")
        );
        assert_eq!(McpTool::parse("mcp__orch__*").unwrap().tool, None);
        for bad in [
            "tavily_search",
            "mcp__tavily",
            "mcp____x",
            "mcp__a__",
            "mcp__a b__c",
        ] {
            assert!(McpTool::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn resolution_is_field_by_field() {
        let phase_tools = ToolSetLayer {
            internal: Some(Field {
                value: vec![InternalTool::Read, InternalTool::Agent].into(),
                at: at(2),
            }),
            permission: Some(Field {
                value: Permission::ReadOnly,
                at: at(3),
            }),
            max_turns: Some(Field {
                value: 50,
                at: at(4),
            }),
            ..Default::default()
        };
        let agent_tools = ToolSetLayer {
            permission: Some(Field {
                value: Permission::WorkspaceWrite,
                at: at(7),
            }),
            ..Default::default()
        };
        let r = resolve(
            [
                (Layer::AgentTools, Some(&agent_tools)),
                (Layer::Tools, Some(&phase_tools)),
                (Layer::Profile, None),
                (Layer::Mode, None),
            ],
            Mode::Audit,
        );
        assert_eq!(
            r.toolset.internal,
            vec![InternalTool::Read, InternalTool::Agent].into()
        );
        assert_eq!(r.provenance.internal.layer, Layer::Tools);
        assert_eq!(r.toolset.permission, Permission::WorkspaceWrite);
        assert_eq!(r.provenance.permission.at, Some(at(7)));
        assert_eq!(r.toolset.max_turns, 50);
        assert_eq!(r.provenance.mcp.layer, Layer::Default);
        assert_eq!(r.toolset.mcp[0].to_string(), "mcp__orch__*");
    }

    #[test]
    fn lists_replace_not_merge() {
        let mode = ToolSetLayer {
            internal: Some(Field {
                value: vec![InternalTool::Grep].into(),
                at: at(1),
            }),
            ..Default::default()
        };
        let r = resolve(
            [
                (Layer::AgentTools, None),
                (Layer::Tools, None),
                (Layer::Profile, None),
                (Layer::Mode, Some(&mode)),
            ],
            Mode::Fix,
        );
        assert_eq!(*r.toolset.internal, [InternalTool::Grep]);
        assert_eq!(r.toolset.permission, Permission::WorkspaceWrite);
    }
}
