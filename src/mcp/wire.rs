//! The messages of one connection before the protocol library sees them:
//! JSON-RPC lines, each answered even when it is broken. A line that is
//! not JSON gets a parse error (`-32700`), one that is not a JSON-RPC
//! request an invalid-request error (`-32600`), a request whose `params`
//! or `params._meta` is not an object, or a `tools/call` whose parameters
//! are not a tool name and an object of arguments, an invalid-params error
//! (`-32602`) with the request's id, a line over [`MAX_MESSAGE`] bytes an
//! error too; the connection goes on in every case, so a client never
//! waits for an answer that will not come. Bytes that are not UTF-8 are
//! replaced (U+FFFD) so that the message is still answered and the tool
//! refuses the damaged text by name.

use serde_json::{Value, json};

/// The longest message orch reads; the rest of a longer line is skipped.
pub(super) const MAX_MESSAGE: usize = 4 << 20;

/// What to do with one line the client sent.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// Pass it on (a message, newline-terminated, valid UTF-8).
    Pass(String),
    /// Answer it with this error (a JSON-RPC response, newline-terminated).
    Answer(String),
    /// Nothing to do (a blank line, a broken notification).
    Skip,
}

/// Judge one line (without its newline); `cut` says it was longer than
/// [`MAX_MESSAGE`] and this is its beginning.
pub(super) fn judge(bytes: &[u8], cut: bool) -> Line {
    let text = String::from_utf8_lossy(bytes);
    if cut {
        return Line::Answer(error(
            sniff_id(&text),
            -32600,
            &format!("the message is longer than {MAX_MESSAGE} bytes; it was not read"),
        ));
    }
    if text.trim().is_empty() {
        return Line::Skip;
    }
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            return Line::Answer(error(sniff_id(&text), -32700, &format!("parse error: {e}")));
        }
    };
    let Some(obj) = value.as_object() else {
        return Line::Answer(error(
            Value::Null,
            -32600,
            "invalid request: a message is one JSON object (batches are not supported)",
        ));
    };
    let id = obj.get("id").cloned();
    let valid_id = id
        .as_ref()
        .is_none_or(|i| i.is_string() || i.is_i64() || i.is_u64());
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !valid_id {
        return Line::Answer(error(
            id.filter(|_| valid_id).unwrap_or(Value::Null),
            -32600,
            "invalid request: give \"jsonrpc\": \"2.0\" and an id that is a string or an integer",
        ));
    }
    match obj.get("method") {
        Some(Value::String(method)) => {
            let problem = params_problem(obj.get("params")).or_else(|| {
                (method == "tools/call")
                    .then(|| tools_call_problem(obj.get("params")))
                    .flatten()
            });
            if let Some(problem) = problem {
                return match id {
                    Some(id) => Line::Answer(error(id, -32602, &problem)),
                    None => Line::Skip,
                };
            }
        }
        Some(_) => {
            return match id {
                Some(id) => {
                    Line::Answer(error(id, -32600, "invalid request: `method` is a string"))
                }
                None => Line::Skip,
            };
        }
        // A response to something the server asked, or nothing at all.
        None if obj.contains_key("result") || obj.contains_key("error") => {}
        None => {
            return Line::Answer(error(
                id.unwrap_or(Value::Null),
                -32600,
                "invalid request: no `method`",
            ));
        }
    }
    let mut line = text.into_owned();
    line.push('\n');
    Line::Pass(line)
}

/// What is wrong with a request's parameters, whatever its method: when
/// given, they are an object, and so is their `_meta`. (The protocol
/// library answers neither a `params` of another type nor a `_meta` that
/// is not an object with the request's id, or at all.)
fn params_problem(params: Option<&Value>) -> Option<String> {
    match params {
        None => None,
        Some(Value::Object(p)) => match p.get("_meta") {
            None | Some(Value::Object(_)) => None,
            Some(_) => Some("invalid params: `_meta` is an object".into()),
        },
        Some(_) => Some("invalid params: `params` is an object".into()),
    }
}

/// What is wrong with a `tools/call`'s parameters, if anything.
fn tools_call_problem(params: Option<&Value>) -> Option<String> {
    let Some(Value::Object(p)) = params else {
        return Some("invalid params: `tools/call` takes an object with `name`".into());
    };
    if !matches!(p.get("name"), Some(Value::String(_))) {
        return Some("invalid params: `name` (the tool) is a string".into());
    }
    if !matches!(
        p.get("arguments"),
        None | Some(Value::Object(_)) | Some(Value::Null)
    ) {
        return Some("invalid params: `arguments` is an object".into());
    }
    None
}

fn error(id: Value, code: i64, message: &str) -> String {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string();
    line.push('\n');
    line
}

/// The request id of a message that does not parse, when it can still be
/// read (so the client learns which of its requests failed); else null.
fn sniff_id(text: &str) -> Value {
    let mut rest = text;
    while let Some(at) = rest.find("\"id\"") {
        rest = &rest[at + 4..];
        let Some(after) = rest.trim_start().strip_prefix(':') else {
            continue;
        };
        let mut values =
            serde_json::Deserializer::from_str(after.trim_start()).into_iter::<Value>();
        if let Some(Ok(v)) = values.next()
            && (v.is_string() || v.is_i64() || v.is_u64())
        {
            return v;
        }
    }
    Value::Null
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match judge(line.as_bytes(), false) {
            Line::Answer(a) => serde_json::from_str(&a).unwrap(),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn every_broken_message_is_answered() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"x","params":{"t":"\ud800"}}"#,
                3,
                -32700,
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"x","params":{"n":1e400}}"#,
                4,
                -32700,
            ),
            ("{not json", -1, -32700),
            (r#"[{"jsonrpc":"2.0","id":5,"method":"x"}]"#, -1, -32600),
            (r#"{"jsonrpc":"1.0","id":6,"method":"x"}"#, 6, -32600),
            (r#"{"jsonrpc":"2.0","id":7}"#, 7, -32600),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}"#,
                8,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
                9,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":10,"method":"tools/call"}"#,
                10,
                -32602,
            ),
            // `params` and its `_meta` are objects, for every method.
            (
                r#"{"jsonrpc":"2.0","id":12,"method":"tools/list","params":5}"#,
                12,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":13,"method":"ping","params":[]}"#,
                13,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":5}}"#,
                14,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":15,"method":"initialize","params":5}"#,
                15,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":16,"method":"tools/list","params":{"_meta":"x"}}"#,
                16,
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":17,"method":"ping","params":null}"#,
                17,
                -32602,
            ),
        ];
        for (line, id, code) in cases {
            let a = answer(line);
            assert_eq!(a["error"]["code"], code, "{line}: {a}");
            if id >= 0 {
                assert_eq!(a["id"], id, "{line}");
            } else {
                assert!(a["id"].is_null(), "{line}");
            }
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":11,"method":"x","params":{}{}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(answer(&deep)["error"]["code"], -32700);
        assert_eq!(answer(&deep)["id"], 11);
        let big = match judge(
            br#"{"jsonrpc":"2.0","id":"big","method":"x","params":"aaaa"#,
            true,
        ) {
            Line::Answer(a) => serde_json::from_str::<Value>(&a).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (big["id"].as_str(), big["error"]["code"].as_i64()),
            (Some("big"), Some(-32600))
        );
    }

    #[test]
    fn good_messages_pass_and_bad_bytes_are_replaced() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"x"}}}"#;
        assert_eq!(judge(ok.as_bytes(), false), Line::Pass(format!("{ok}\n")));
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(judge(note.as_bytes(), false), Line::Pass(_)));
        let resp = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(matches!(judge(resp.as_bytes(), false), Line::Pass(_)));
        assert_eq!(judge(b"  ", false), Line::Skip);
        let bad = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":{\"t\":\"a\xffb\"}}";
        match judge(bad, false) {
            Line::Pass(l) => assert!(l.contains('\u{FFFD}')),
            other => panic!("{other:?}"),
        }
        // A broken notification has no one to answer.
        let n = r#"{"jsonrpc":"2.0","method":"tools/call","params":{}}"#;
        assert_eq!(judge(n.as_bytes(), false), Line::Skip);
        let n = r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":5}"#;
        assert_eq!(judge(n.as_bytes(), false), Line::Skip);
        // Parameters and `_meta` that are objects pass, for any method.
        let ok = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"progressToken":1}}}"#;
        assert!(matches!(judge(ok.as_bytes(), false), Line::Pass(_)));
    }
}
