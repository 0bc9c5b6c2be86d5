//! The JSON Schema of `config.yaml`, generated from the config types: what serde accepts
//! (field names, defaults, unknown fields refused, the forms of durations, quantities and
//! `onError`), with the types' doc comments as descriptions. Published as
//! `deploy/config.schema.json` for editors and printed by `orca config schema`; the
//! configuration reference (`docs/src/reference/configuration.md`) is rendered from it.

use schemars::generate::SchemaSettings;

use super::Config;

/// Where the schema is committed, relative to the repository root.
pub const SCHEMA_PATH: &str = "deploy/config.schema.json";

/// The schema as a JSON value (JSON Schema draft 2020-12).
pub fn json_schema() -> serde_json::Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<Config>();
    schema.insert("title".to_owned(), "orca config.yaml".into());
    schema.to_value()
}

/// The schema as committed: pretty-printed, ending with a newline.
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema())
        .expect("a JSON value always serializes to text");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_refuses_unknown_fields_and_knows_the_renamed_ones() {
        let schema = json_schema();
        assert_eq!(schema["additionalProperties"], false);
        let node = &schema["$defs"]["NodeConfig"];
        assert_eq!(node["additionalProperties"], false);
        assert!(node["properties"]["internalIP"].is_object(), "{node}");
        assert!(node["properties"]["daemonPort"].is_object(), "{node}");
        assert_eq!(node["properties"]["daemonPort"]["default"], 10250);
        let mut required: Vec<&str> = schema["$defs"]["TaintConfig"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["effect", "key"]);
    }
}
