//! The checked-in JSON Schema and the `#:schema` links to it.

use crate::support::{example_pipelines, root, run, stdout};

#[test]
fn checked_in_schema_is_current() {
    let out = run(&["schema"]);
    assert!(out.status.success());
    let generated = stdout(&out);
    let path = root().join("schemas/pipeline.schema.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        generated == checked_in,
        "schemas/pipeline.schema.json is stale; regenerate it with\n  cargo run -- schema > schemas/pipeline.schema.json"
    );
}

#[test]
fn schema_describes_every_key_the_loader_accepts() {
    let schema: serde_json::Value =
        serde_json::from_str(&stdout(&run(&["schema"]))).expect("schema is JSON");
    let props = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    let sorted = |k: &[&str]| {
        let mut v: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    use orch::pipeline::raw::keys;
    let defs = &schema["definitions"];
    assert_eq!(props(&schema), sorted(keys::PIPELINE));
    assert_eq!(props(&defs["Defaults"]), sorted(keys::DEFAULTS));
    assert_eq!(props(&defs["Agent"]), sorted(keys::AGENT));
    assert_eq!(props(&defs["ModeSettings"]), sorted(keys::MODE_SETTINGS));
    assert_eq!(props(&defs["McpServer"]), sorted(keys::MCP_SERVER));
    assert_eq!(props(&defs["ToolSet"]), sorted(keys::TOOLSET));
    assert_eq!(props(&defs["Phase"]), sorted(keys::PHASE));
    for def in [
        "Defaults",
        "Agent",
        "ModeSettings",
        "McpServer",
        "ToolSet",
        "Phase",
    ] {
        assert_eq!(
            defs[def]["additionalProperties"],
            serde_json::Value::Bool(false),
            "{def} must reject unknown keys, as the loader does"
        );
    }
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false)
    );
}

#[test]
fn every_example_links_the_schema() {
    for path in example_pipelines() {
        let text = std::fs::read_to_string(root().join(&path)).unwrap();
        assert!(
            text.starts_with("#:schema ../schemas/pipeline.schema.json\n"),
            "{path} must start with `#:schema ../schemas/pipeline.schema.json`"
        );
    }
}

#[test]
fn checked_in_capability_table_is_current() {
    let out = run(&["doctor", "--capabilities"]);
    assert!(out.status.success());
    let checked_in =
        std::fs::read_to_string(root().join("docs/capabilities.md")).unwrap_or_default();
    assert!(
        stdout(&out) == checked_in,
        "docs/capabilities.md is stale; regenerate it with\n  cargo run -- doctor --capabilities > docs/capabilities.md"
    );
}
