//! The JSON Schema of pipeline files, generated from the raw types.

use serde_json::Value;

use super::raw::RawPipeline;

/// The schema as pretty JSON with a trailing newline; this is exactly
/// `schemas/pipeline.schema.json`.
pub(crate) fn pipeline_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let schema = generator.into_root_schema_for::<RawPipeline>();
    let mut value = schema.to_value();
    strip_null(&mut value);
    let mut out = serde_json::to_string_pretty(&value).unwrap_or_default();
    out.push('\n');
    out
}

/// TOML has no null: an absent key is how a value is left out. schemars
/// describes `Option<T>` as "T or null"; take the null back out.
fn strip_null(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = map.get_mut("anyOf") {
                any.retain(|s| s.get("type").is_none_or(|t| t != "null"));
                if any.len() == 1 {
                    let only = any.remove(0);
                    map.remove("anyOf");
                    if let Value::Object(inner) = only {
                        for (k, val) in inner {
                            map.entry(k).or_insert(val);
                        }
                    }
                }
            }
            map.values_mut().for_each(strip_null);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null),
        _ => {}
    }
}
