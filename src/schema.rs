//! The JSON Schema of pipeline files, generated from the raw types.

use crate::pipeline::raw::RawPipeline;

/// The schema as pretty JSON with a trailing newline; this is exactly
/// `schemas/pipeline.schema.json`.
pub fn pipeline_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let mut schema = generator.into_root_schema_for::<RawPipeline>();
    schema.insert(
        "$id".into(),
        "https://orch.dev/schemas/pipeline.schema.json".into(),
    );
    let mut out = serde_json::to_string_pretty(&schema).unwrap_or_default();
    out.push('\n');
    out
}
