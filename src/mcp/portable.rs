//! Tool input schemas every CLI accepts. schemars writes `$defs` with
//! `$ref`s to them and `["string", "null"]` for an `Option`; Gemini CLI
//! rejects `$ref`, some model gateways reject type arrays. So: every
//! `$ref` is replaced by the definition it names, `$defs` and `$schema`
//! go, a `null` alternative goes (optional means "not required"), and
//! integer formats schemars invents (`uint32`, ...) go.

use serde_json::{Map, Value};

/// `schema` made portable (see the module's doc).
pub(super) fn portable(schema: &Map<String, Value>) -> Map<String, Value> {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = schema.clone();
    out.remove("$defs");
    out.remove("$schema");
    let mut v = Value::Object(out);
    rewrite(&mut v, &defs, 0);
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// How deep definitions may nest into each other (a recursive type would
/// otherwise never end; orch's tools have none).
const MAX_DEPTH: usize = 16;

fn rewrite(v: &mut Value, defs: &Map<String, Value>, depth: usize) {
    match v {
        Value::Object(m) => {
            // `anyOf: [{...}, {type: null}]` -> the one alternative.
            for key in ["anyOf", "oneOf"] {
                if let Some(Value::Array(alts)) = m.get(key) {
                    let kept: Vec<Value> = alts
                        .iter()
                        .filter(|a| a.get("type").is_none_or(|t| t != "null"))
                        .cloned()
                        .collect();
                    m.remove(key);
                    if kept.len() == 1 {
                        if let Value::Object(one) = kept[0].clone() {
                            for (k, val) in one {
                                m.entry(k).or_insert(val);
                            }
                        }
                    } else {
                        m.insert(key.into(), Value::Array(kept));
                    }
                }
            }
            if let Some(Value::String(r)) = m.get("$ref")
                && let Some(target) = r.strip_prefix("#/$defs/").and_then(|n| defs.get(n))
                && depth < MAX_DEPTH
            {
                let mut target = target.clone();
                m.remove("$ref");
                rewrite(&mut target, defs, depth + 1);
                if let Value::Object(t) = target {
                    for (k, val) in t {
                        m.entry(k).or_insert(val);
                    }
                }
            }
            // `type: ["string", "null"]` -> `type: "string"`.
            if let Some(Value::Array(types)) = m.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                let new = match kept.len() {
                    1 => kept[0].clone(),
                    _ => Value::Array(kept),
                };
                m.insert("type".into(), new);
            }
            if m.get("default") == Some(&Value::Null) {
                m.remove("default");
            }
            if let Some(Value::String(f)) = m.get("format")
                && matches!(
                    f.as_str(),
                    "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "float"
                        | "double"
                )
            {
                m.remove("format");
            }
            for (_, child) in m.iter_mut() {
                rewrite(child, defs, depth);
            }
        }
        Value::Array(items) => {
            for item in items {
                rewrite(item, defs, depth);
            }
        }
        _ => {}
    }
}

/// What keeps `schema` from being portable, if anything: the checks the
/// tests run on every tool.
#[cfg(test)]
pub(crate) fn problems(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, "", &mut out);
    out
}

#[cfg(test)]
fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let here = format!("{at}/{k}");
                match k.as_str() {
                    "$ref" | "$defs" | "$schema" | "definitions" => out.push(here.clone()),
                    "type" if child.is_array() => out.push(format!("{here}: a type array")),
                    "format" if child.as_str().is_some_and(|f| f.contains("int")) => {
                        out.push(format!("{here}: {child}"))
                    }
                    _ => {}
                }
                walk(child, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refs_are_inlined_and_nulls_dropped() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {
                "Kind": {"type": "string", "enum": ["a", "b"]},
                "Outer": {"type": "object", "properties": {"k": {"$ref": "#/$defs/Kind"}}}
            },
            "type": "object",
            "properties": {
                "o": {"$ref": "#/$defs/Outer", "description": "d"},
                "n": {"type": ["integer", "null"], "format": "uint32", "default": null},
                "m": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}]}
            }
        });
        let out = Value::Object(portable(s.as_object().unwrap()));
        assert!(problems(&out).is_empty(), "{:?}", problems(&out));
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "o": {"description": "d", "type": "object",
                          "properties": {"k": {"type": "string", "enum": ["a", "b"]}}},
                    "n": {"type": "integer"},
                    "m": {"type": "string", "enum": ["a", "b"]}
                }
            })
        );
        assert_eq!(problems(&s).len(), 7, "{:?}", problems(&s));
    }
}
