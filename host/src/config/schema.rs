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

/// Asserts that `T`'s schema accepts each case's text exactly when `parses` (the parser orca
/// uses, named `parser` in a failure) does, and that `cases` say which.
#[cfg(test)]
pub(super) fn assert_schema_agrees_with<T: schemars::JsonSchema>(
    parser: &str,
    parses: impl Fn(&str) -> bool,
    cases: &[(&str, bool)],
) {
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for &(text, expected) in cases {
        assert_eq!(parses(text), expected, "{parser} on {text:?}");
        assert_eq!(
            validator.is_valid(&serde_json::json!(text)),
            expected,
            "the schema on {text:?}"
        );
    }
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
