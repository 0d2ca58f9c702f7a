//! A profile's YAML front matter (between `---` lines), the format Claude
//! Code sub-agent files use, so such a file loads unchanged:
//!
//! ```yaml
//! ---
//! name: code-reviewer
//! description: Reviews code for quality and security.
//! tools: Read, Grep, Glob, Bash
//! model: inherit
//! ---
//! ```
//!
//! `tools` (a comma-separated string or a list) becomes the ToolSet's
//! `internal` tools, its `mcp__...` entries its `mcp` tools;
//! `disallowedTools` is taken out of them; `maxTurns` is `max_turns`;
//! `model` is the profile's model (`inherit`: none); `permission`
//! (orch's own key: `read-only`, `workspace-write`, `full-access`) is the
//! ToolSet's permission. Keys Claude Code has
//! and orch decides itself (`color`, `permissionMode`, `hooks`, `skills`,
//! `mcpServers`, `memory`) are accepted and not used; any other key is an
//! error. Parsed with `saphyr` (maintained, pure Rust, with positions).

use std::ops::Range;

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::raw::{RawToolSet, SpStr, Spanned};

/// Keys orch reads.
pub(crate) const KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "disallowedTools",
    "maxTurns",
    "model",
    "permission",
    "omit",
];
/// Claude Code keys orch accepts and leaves to itself.
pub(crate) const CLAUDE_ONLY: &[&str] = &[
    "color",
    "permissionMode",
    "hooks",
    "skills",
    "mcpServers",
    "memory",
];

/// What the front matter says.
#[derive(Debug, Default)]
pub(crate) struct Front {
    pub(crate) description: Option<String>,
    /// `None` for `inherit` (or no `model`).
    pub(crate) model: Option<SpStr>,
    /// System prompt layers the profile does without (orch's own key).
    pub(crate) omit: Vec<SpStr>,
    pub(crate) tools: Option<RawToolSet>,
}

/// A problem at a byte range of the file.
pub(crate) type Problem = (String, Range<usize>);

/// Parse `yaml`, which starts at byte `offset` of the file.
pub(crate) fn parse(yaml: &str, offset: usize) -> (Front, Vec<Problem>) {
    let mut out = Front::default();
    let mut problems = Vec::new();
    let at = |chars: usize| offset + byte_of(yaml, chars);
    let docs = match MarkedYaml::load_from_str(yaml) {
        Ok(d) => d,
        Err(e) => {
            let p = at(e.marker().index());
            problems.push((format!("it is not YAML: {}", e.info()), p..p));
            return (out, problems);
        }
    };
    let Some(doc) = docs.first() else {
        return (out, problems);
    };
    let span = |n: &MarkedYaml| {
        at(n.span.start.index())..at(n.span.end.index()).max(at(n.span.start.index()))
    };
    let YamlData::Mapping(map) = &doc.data else {
        if !matches!(doc.data, YamlData::Value(Scalar::Null)) {
            problems.push((
                "the front matter must be `key: value` lines".into(),
                span(doc),
            ));
        }
        return (out, problems);
    };
    let mut internal: Option<Spanned<Vec<SpStr>>> = None;
    let mut mcp: Option<Spanned<Vec<SpStr>>> = None;
    let mut disallowed: Vec<SpStr> = Vec::new();
    let mut max_turns = None;
    let mut permission = None;
    for (k, v) in map.iter() {
        let Some(key) = k.data.as_str() else {
            problems.push(("a key must be a word".into(), span(k)));
            continue;
        };
        match key {
            "name" => {}
            "description" => match v.data.as_str() {
                Some(s) => out.description = Some(s.to_string()),
                None => problems.push(("`description` must be text".into(), span(v))),
            },
            "model" => match v.data.as_str() {
                Some("inherit") => {}
                Some(s) => out.model = Some(Spanned::new(s.to_string(), span(v))),
                None => problems.push(("`model` must be text".into(), span(v))),
            },
            "tools" | "disallowedTools" => {
                let Some(items) = tool_list(v, &span, &mut problems) else {
                    continue;
                };
                if key == "disallowedTools" {
                    disallowed = items;
                    continue;
                }
                let (m, i): (Vec<SpStr>, Vec<SpStr>) = items
                    .into_iter()
                    .partition(|t| t.value.starts_with("mcp__"));
                internal = Some(Spanned::new(i, span(v)));
                if !m.is_empty() {
                    mcp = Some(Spanned::new(m, span(v)));
                }
            }
            "omit" => {
                if let Some(items) = tool_list(v, &span, &mut problems) {
                    out.omit = items;
                }
            }
            "permission" => match v.data.as_str() {
                Some(s) => permission = Some(Spanned::new(s.to_string(), span(v))),
                None => problems.push(("`permission` must be text".into(), span(v))),
            },
            "maxTurns" => match v.data.as_integer() {
                Some(n) => max_turns = Some(Spanned::new(n, span(v))),
                None => problems.push(("`maxTurns` must be a whole number".into(), span(v))),
            },
            k if CLAUDE_ONLY.contains(&k) => {}
            other => {
                let hint = crate::model::suggest(other, KEYS.iter().copied())
                    .map(|s| format!(": did you mean `{s}`?"))
                    .unwrap_or_else(|| format!(": orch reads {}", KEYS.join(", ")));
                problems.push((format!("unknown key `{other}`{hint}"), span(k)));
            }
        }
    }
    if !disallowed.is_empty() {
        match internal.as_mut() {
            Some(list) => list
                .value
                .retain(|t| !disallowed.iter().any(|d| d.value == t.value)),
            // Claude Code reads this as "every tool but these"; orch will
            // not guess what every tool is.
            None => problems.push((
                "`disallowedTools` without `tools`: list the tools the agent may use in `tools` (orch does not take \"all but these\")".into(),
                disallowed[0].span.clone(),
            )),
        }
    }
    if internal.is_some() || mcp.is_some() || max_turns.is_some() || permission.is_some() {
        out.tools = Some(RawToolSet {
            internal,
            mcp,
            permission,
            max_turns,
        });
    }
    (out, problems)
}

/// `Read, Grep` or `[Read, Grep]` as spanned names.
fn tool_list(
    v: &MarkedYaml,
    span: &impl Fn(&MarkedYaml) -> Range<usize>,
    problems: &mut Vec<Problem>,
) -> Option<Vec<SpStr>> {
    match &v.data {
        YamlData::Sequence(items) => {
            let mut out = Vec::new();
            for item in items {
                match item.data.as_str() {
                    Some(s) => out.push(Spanned::new(s.trim().to_string(), span(item))),
                    None => problems.push(("a tool must be a name".into(), span(item))),
                }
            }
            Some(out)
        }
        _ => match v.data.as_str() {
            // One span for the whole string: the names are inside it.
            Some(s) => Some(
                s.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(|t| Spanned::new(t.to_string(), span(v)))
                    .collect(),
            ),
            None => {
                problems.push(("a tool list is `Read, Grep` or a YAML list".into(), span(v)));
                None
            }
        },
    }
}

/// The byte offset of character `chars` of `s`.
fn byte_of(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_code_sub_agent_reads_as_a_toolset() {
        let yaml = "name: code-reviewer\ndescription: Expert code reviewer.\ntools: Read, Grep, Glob, Bash, mcp__github__get_issue\nmodel: inherit\ncolor: blue\n";
        let (f, p) = parse(yaml, 4);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(f.description.as_deref(), Some("Expert code reviewer."));
        assert_eq!(f.model, None, "inherit");
        let t = f.tools.unwrap();
        let names: Vec<&str> = t
            .internal
            .as_ref()
            .unwrap()
            .value
            .iter()
            .map(|s| s.value.as_str())
            .collect();
        assert_eq!(names, ["Read", "Grep", "Glob", "Bash"]);
        assert_eq!(t.mcp.unwrap().value[0].value, "mcp__github__get_issue");
        // Spans are in the file (4 bytes of `---\n` before the YAML).
        let s = &t.internal.unwrap().span;
        assert_eq!(&format!("----{yaml}")[s.start..s.start + 4], "Read");
    }

    #[test]
    fn lists_disallowed_tools_turns_and_mistakes() {
        let yaml = "tools:\n  - Read\n  - Write\n  - Edit\ndisallowedTools: Write\nmaxTurns: 12\nmodel: sonnet\n";
        let (f, p) = parse(yaml, 0);
        assert!(p.is_empty(), "{p:?}");
        let t = f.tools.unwrap();
        let internal = t.internal.unwrap();
        let names: Vec<&str> = internal.value.iter().map(|s| s.value.as_str()).collect();
        assert_eq!(names, ["Read", "Edit"]);
        assert_eq!(t.max_turns.unwrap().value, 12);
        assert_eq!(f.model.map(|m| m.value).as_deref(), Some("sonnet"));

        let (_, p) = parse("descripton: x\n", 0);
        assert!(p[0].0.contains("did you mean `description`"), "{p:?}");
        let (_, p) = parse("disallowedTools: Bash\n", 0);
        assert!(p[0].0.contains("without `tools`"), "{p:?}");
        let (_, p) = parse("tools: [Read\n", 10);
        assert!(p[0].0.contains("not YAML"), "{p:?}");
        assert!(p[0].1.start >= 10);
        let (_, p) = parse("maxTurns: many\n", 0);
        assert!(p[0].0.contains("whole number"), "{p:?}");
    }
}
