//! The workspace's `.mcp.json`, Claude Code's project format, read as a
//! source of MCP servers below the pipeline's own `[mcp_servers]` (the
//! pipeline wins on a clash):
//!
//! ```json
//! {"mcpServers": {"NAME": {"command": "npx", "args": ["-y", "x"], "env": {}},
//!                 "REMOTE": {"type": "http", "url": "https://...", "headers": {}}}}
//! ```
//!
//! A file that is not such JSON is an error with its position. An entry orch
//! cannot use (an SSE server, a missing `url`, ...) is an error only when a
//! ToolSet names its server: a team's file may hold servers orch never runs.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::diagnostic::{Diagnostic, Problem, SourceFile};
use super::model::McpTransport;

/// The file's name, in the workspace.
pub(crate) const FILE: &str = ".mcp.json";

/// One server the file declares.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    /// How to reach it, or why orch cannot.
    pub(crate) transport: Result<McpTransport, String>,
}

/// A read `.mcp.json`.
#[derive(Debug, Clone)]
pub(crate) struct ProjectServers {
    pub(crate) path: PathBuf,
    pub(crate) entries: Vec<Entry>,
}

impl ProjectServers {
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// Read `<workspace>/.mcp.json`: `Ok(None)` when there is none.
pub(crate) fn read(workspace: &Path) -> Result<Option<ProjectServers>, Box<Diagnostic>> {
    let path = workspace.join(FILE);
    let shown = PathBuf::from(format!("./{FILE}"));
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            let source = Arc::new(SourceFile::new(shown.display().to_string(), String::new()));
            return Err(Box::new(Diagnostic::error(
                Problem::McpJson {
                    reason: super::load::io_reason(&e),
                },
                &source,
                0..0,
            )));
        }
    };
    let source = Arc::new(SourceFile::new(shown.display().to_string(), text));
    parse(&source)
        .map(|entries| {
            Some(ProjectServers {
                path: shown.clone(),
                entries,
            })
        })
        .map_err(|(reason, at)| {
            Box::new(Diagnostic::error(Problem::McpJson { reason }, &source, at))
        })
}

/// The entries of a `.mcp.json` text, or what is wrong and where.
fn parse(source: &SourceFile) -> Result<Vec<Entry>, (String, Range<usize>)> {
    let text = &source.text;
    let v: Value = serde_json::from_str(text).map_err(|e| {
        let at = offset(text, e.line(), e.column());
        // The position is the diagnostic's; the message need not repeat it.
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        (format!("it is not valid JSON: {message}"), at..at)
    })?;
    let whole = 0..text.len().min(1);
    let servers = match v.get("mcpServers") {
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err((
                "`mcpServers` must be an object of servers by name".into(),
                key_span(text, "mcpServers"),
            ));
        }
        None if v.is_object() => return Ok(Vec::new()),
        None => return Err(("the file must be a JSON object".into(), whole)),
    };
    Ok(servers
        .iter()
        .map(|(name, entry)| Entry {
            name: name.clone(),
            transport: transport(entry),
        })
        .collect())
}

/// What a server entry says, as orch passes servers on.
fn transport(entry: &Value) -> Result<McpTransport, String> {
    let Some(obj) = entry.as_object() else {
        return Err("the entry is not an object".into());
    };
    let strings = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match obj.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(s) => check_refs(s).map(|_| (k.clone(), s.to_string())),
                    None => Err(format!("`{key}.{k}` is not a string")),
                })
                .collect(),
            Some(_) => Err(format!("`{key}` is not an object of strings")),
        }
    };
    let kind = obj.get("type").and_then(Value::as_str);
    let url = obj.get("url").and_then(Value::as_str);
    match (kind, url) {
        (Some("sse"), _) => Err(
            "it is an SSE server (`type: sse`, deprecated in MCP): orch passes streamable HTTP servers (`type: http`) and stdio servers".into(),
        ),
        (Some("http") | None, Some(url)) => {
            check_url(url)?;
            Ok(McpTransport::Http {
                url: url.to_string(),
                headers: strings("headers")?.into_iter().collect(),
            })
        }
        (Some("http"), None) => Err("a `type: http` server needs a `url`".into()),
        (Some("stdio") | None, None) => {
            let Some(command) = obj.get("command").and_then(Value::as_str) else {
                return Err("the entry has neither `command` nor `url`".into());
            };
            check_refs(command)?;
            let mut argv = vec![command.to_string()];
            match obj.get("args") {
                None => {}
                Some(Value::Array(a)) => {
                    for x in a {
                        let s = x.as_str().ok_or("`args` holds a value that is not a string")?;
                        check_refs(s)?;
                        argv.push(s.to_string());
                    }
                }
                Some(_) => return Err("`args` is not an array of strings".into()),
            }
            Ok(McpTransport::Stdio {
                command: argv,
                env: strings("env")?.into_iter().collect(),
            })
        }
        (Some("stdio"), Some(_)) => Err("a `type: stdio` server has a `url`".into()),
        (Some(other), _) => Err(format!("its `type` `{other}` is not one orch knows (stdio, http)")),
    }
}

/// A remote server's address: `http://` or `https://`, with no `${...}`
/// (a credential belongs in a header, whose value never goes into a file).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(format!("`{url}` is not an http:// or https:// address"));
    }
    if url.contains("${") {
        return Err(format!(
            "`{url}` has a `${{...}}` reference: orch writes a server's address into the CLI's config file, so put a credential in a header instead (`headers`)"
        ));
    }
    Ok(())
}

/// orch expands `${VAR}`; Claude Code's `${VAR:-default}` it does not.
fn check_refs(s: &str) -> Result<(), String> {
    if s.contains("${")
        && s.split("${")
            .skip(1)
            .any(|r| r.split('}').next().is_some_and(|n| n.contains(":-")))
    {
        return Err(format!(
            "`{s}` uses `${{VAR:-default}}`, which orch does not expand: use `${{VAR}}`"
        ));
    }
    Ok(())
}

/// The byte offset of 1-based `line`, `column` (serde_json's position).
fn offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let mut at = (start + column.saturating_sub(1)).min(text.len());
    // On a character's start, whatever serde_json counted in.
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Where `"key"` is first written as an object key.
fn key_span(text: &str, key: &str) -> Range<usize> {
    let quoted = serde_json::to_string(key).unwrap_or_default();
    let mut from = 0;
    while let Some(i) = text[from..].find(&quoted) {
        let at = from + i;
        let after = text[at + quoted.len()..].trim_start();
        if after.starts_with(':') {
            return at..at + quoted.len();
        }
        from = at + quoted.len();
    }
    0..0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Result<Vec<Entry>, (String, Range<usize>)> {
        parse(&SourceFile::new(".mcp.json", text.to_string()))
    }

    #[test]
    fn stdio_and_http_servers_are_read_and_others_say_why_not() {
        let text = r#"{"mcpServers": {
  "tavily": {"command": "npx", "args": ["-y", "tavily-mcp"], "env": {"TAVILY_API_KEY": "${TAVILY_API_KEY}"}},
  "exa": {"type": "http", "url": "https://mcp.exa.ai/mcp", "headers": {"x-api-key": "${EXA_API_KEY}"}},
  "old": {"type": "sse", "url": "https://x/sse"},
  "templated": {"type": "http", "url": "https://x/mcp?key=${K}"},
  "defaulted": {"command": "x", "env": {"A": "${A:-1}"}}
}}"#;
        let e = entries(text).unwrap();
        let get = |n: &str| e.iter().find(|x| x.name == n).unwrap();
        assert_eq!(
            get("tavily").transport,
            Ok(McpTransport::Stdio {
                command: vec!["npx".into(), "-y".into(), "tavily-mcp".into()],
                env: vec![("TAVILY_API_KEY".into(), "${TAVILY_API_KEY}".into())],
            })
        );
        assert_eq!(
            get("exa").transport,
            Ok(McpTransport::Http {
                url: "https://mcp.exa.ai/mcp".into(),
                headers: vec![("x-api-key".into(), "${EXA_API_KEY}".into())],
            })
        );
        assert!(get("old").transport.as_ref().unwrap_err().contains("SSE"));
        assert!(
            get("templated")
                .transport
                .as_ref()
                .unwrap_err()
                .contains("header")
        );
        assert!(
            get("defaulted")
                .transport
                .as_ref()
                .unwrap_err()
                .contains(":-default")
        );
    }

    #[test]
    fn a_position_after_wide_characters_is_on_a_character() {
        let text = "{\"mcpServers\": {\"é\": {\"command\": \"ü\",}}}";
        let (_, at) = entries(text).unwrap_err();
        assert!(text.is_char_boundary(at.start), "{at:?}");
    }

    #[test]
    fn malformed_json_is_refused_where_it_breaks() {
        let text = "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",}\n}}";
        let (why, at) = entries(text).unwrap_err();
        assert!(why.contains("not valid JSON"), "{why}");
        assert_eq!(&text[at.start..at.start + 1], "}", "{at:?}");
        let (why, _) = entries("{\"mcpServers\": []}").unwrap_err();
        assert!(why.contains("object"), "{why}");
        assert_eq!(entries("{}").unwrap().len(), 0);
    }
}
