//! The configuration reference (`docs/src/reference/configuration.md`), rendered from the
//! config schema ([`super::schema`]): one heading per field, its description (the doc
//! comment), its type, default and allowed values. The page is generated, never edited, so
//! it cannot disagree with the code.

use std::fmt::Write;

use serde_json::{Map, Value};

/// Where the page is committed, relative to the repository root.
pub const REFERENCE_PATH: &str = "docs/src/reference/configuration.md";

/// The value formats shared by many fields, described once at the end of the page.
/// Each is the schema's name for it, its heading and the heading's anchor.
const FORMATS: [(&str, &str, &str); 3] = [
    ("Duration", "Duration", "duration"),
    ("Quantity", "Quantity", "quantity"),
    ("QuantityString", "Quantity (text)", "quantity-text"),
];

/// The reference page for `schema` (the value of [`super::schema::json_schema`]).
pub fn markdown(schema: &Value) -> String {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let page = Page { defs };
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         <!-- Generated from the config types (host/src/config) with their doc comments; do not \
         edit. Regenerate: ORCA_BLESS=1 cargo test -p orca --test config_schema -->\n\n",
    );
    if let Some(description) = description(schema) {
        out.push_str(&paragraph(description));
    }
    out.push_str(
        "orca reads one YAML file, `--config` (default `config.yaml`, or `$ORCA_CONFIG`). Every \
         field is optional unless marked *required*; an absent field takes its default. An \
         unknown field stops startup with its path, so a typo never falls back to a default \
         silently. Values that parse but are not acceptable (an AMI id of the wrong form, a \
         port used twice) are also refused at startup, naming the field and what it accepts.\n\n\
         The same schema is published as JSON Schema in `deploy/config.schema.json` (and \
         printed by `orca config schema`). Editors with the YAML language server check and \
         complete a config file that starts with:\n\n\
         ```yaml\n# yaml-language-server: $schema=deploy/config.schema.json\n```\n\n\
         (the path relative to the config file).\n\n",
    );
    for (name, property) in properties(schema) {
        page.section(&mut out, name, property);
    }
    out.push_str("## Value formats\n\n");
    for (def, heading, _) in FORMATS {
        if let Some(format) = page.defs.get(def) {
            let _ = write!(out, "### {heading}\n\n");
            if let Some(description) = description(format) {
                out.push_str(&paragraph(description));
            }
            if let Some(pattern) = format.get("pattern").and_then(Value::as_str) {
                let _ = write!(out, "Pattern: `{pattern}`\n\n");
            }
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

struct Page {
    defs: Map<String, Value>,
}

impl Page {
    /// A top-level section: its heading, then every field under it.
    fn section(&self, out: &mut String, name: &str, property: &Value) {
        let _ = write!(out, "## `{name}`\n\n");
        self.body(out, property, false);
        self.children(out, name, property);
    }

    /// One field's heading and body, then the fields inside it.
    fn field(&self, out: &mut String, path: &str, property: &Value, required: bool) {
        let _ = write!(out, "### `{path}`\n\n");
        self.body(out, property, required);
        self.children(out, path, property);
    }

    fn body(&self, out: &mut String, property: &Value, required: bool) {
        let target = self.resolve(property);
        if let Some(text) = description(property).or_else(|| description(target)) {
            out.push_str(&paragraph(text));
        }
        let mut facts = vec![format!("Type: {}", self.type_name(property))];
        if required {
            facts.push("*Required.*".to_owned());
        }
        if let Some(default) = property.get("default")
            && !has_fields(target)
        {
            facts.push(format!("Default: {}", show(default)));
        }
        for fact in facts {
            let _ = writeln!(out, "- {fact}");
        }
        for Allowed {
            value,
            meaning,
            nested,
        } in self.values(target)
        {
            let indent = if nested { "  " } else { "" };
            let _ = match meaning {
                Some(meaning) => writeln!(out, "{indent}- `{value}`: {}", one_line(&meaning)),
                None => writeln!(out, "{indent}- `{value}`"),
            };
        }
        out.push('\n');
    }

    /// The fields of an object, of a list's entries (`path[].field`) and of a map's values
    /// (`path.<name>.field`).
    fn children(&self, out: &mut String, path: &str, property: &Value) {
        let target = self.resolve(property);
        let (prefix, holder) = if has_fields(target) {
            (path.to_owned(), target)
        } else if let Some(items) = target.get("items").map(|items| self.resolve(items))
            && has_fields(items)
        {
            (format!("{path}[]"), items)
        } else if let Some(values) = target
            .get("additionalProperties")
            .filter(|values| values.is_object())
            .map(|values| self.resolve(values))
            && has_fields(values)
        {
            (format!("{path}.<name>"), values)
        } else {
            return;
        };
        let required: Vec<&str> = holder
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (name, child) in properties(holder) {
            let child_path = format!("{prefix}.{name}");
            self.field(out, &child_path, child, required.contains(&name));
        }
    }

    /// `schema` with a `$ref` followed and an optional's `null` branch set aside.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        if let Some(name) = ref_name(schema) {
            return self.defs.get(name).map_or(schema, |def| self.resolve(def));
        }
        if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
            let real: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
            if let [only] = real.as_slice() {
                return self.resolve(only);
            }
        }
        schema
    }

    /// What a reader writes: `string`, `duration`, `list of string`, `map of …`, with `or
    /// null` for an optional that accepts null.
    fn type_name(&self, schema: &Value) -> String {
        if let Some(name) = ref_name(schema) {
            if let Some((_, heading, anchor)) = FORMATS.iter().find(|(def, ..)| *def == name) {
                return format!("[{}](#{anchor})", heading.to_lowercase());
            }
            return self
                .defs
                .get(name)
                .map_or_else(|| name.to_owned(), |def| self.type_name(def));
        }
        if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
            let names: Vec<String> = branches.iter().map(|b| self.type_name(b)).collect();
            return names.join(" or ");
        }
        if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
            let mut names: Vec<String> = Vec::new();
            for branch in branches {
                let name = if branch.get("const").is_some() {
                    "string".to_owned()
                } else {
                    self.type_name(branch)
                };
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            return names.join(" or ");
        }
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty) {
            return "any".to_owned();
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec!["any"],
        };
        let names: Vec<String> = types
            .into_iter()
            .map(|kind| match kind {
                "array" => format!(
                    "list of {}",
                    schema
                        .get("items")
                        .map_or_else(|| "any".to_owned(), |items| self.type_name(items))
                ),
                "object" if has_fields(schema) => "object".to_owned(),
                "object" => format!(
                    "map of {}",
                    schema
                        .get("additionalProperties")
                        .filter(|values| values.is_object())
                        .map_or_else(|| "any".to_owned(), |values| self.type_name(values))
                ),
                "integer" => match (
                    schema.get("minimum").and_then(Value::as_i64),
                    schema.get("maximum").and_then(Value::as_i64),
                ) {
                    (Some(min), Some(max)) => format!("integer ({min} to {max})"),
                    (Some(min), None) => format!("integer (from {min})"),
                    _ => "integer".to_owned(),
                },
                other => other.to_owned(),
            })
            .collect();
        names.join(" or ")
    }

    /// The values an enumeration allows, with their meanings; for `onError`'s map form, its
    /// keys, nested under it.
    fn values(&self, schema: &Value) -> Vec<Allowed> {
        let entry = |value: String, meaning: Option<&str>, nested: bool| Allowed {
            value,
            meaning: meaning.map(str::to_owned),
            nested,
        };
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return values
                .iter()
                .map(|v| entry(plain(v), None, false))
                .collect();
        }
        let Some(branches) = schema.get("oneOf").and_then(Value::as_array) else {
            return Vec::new();
        };
        let mut values = Vec::new();
        for branch in branches {
            if let Some(value) = branch.get("const") {
                values.push(entry(plain(value), description(branch), false));
            } else if has_fields(branch) {
                values.push(entry("{…}".to_owned(), description(branch), false));
                for (name, key) in properties(branch) {
                    let meaning = format!(
                        "{} ({})",
                        description(key).unwrap_or_default(),
                        self.type_name(key)
                    );
                    values.push(entry(name.to_owned(), Some(meaning.as_str()), true));
                }
            }
        }
        values
    }
}

/// One allowed value of an enumeration, or a key of a map form (nested under it).
struct Allowed {
    value: String,
    meaning: Option<String>,
    nested: bool,
}

fn properties(schema: &Value) -> impl Iterator<Item = (&str, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.as_str(), value))
}

fn has_fields(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|fields| !fields.is_empty())
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

fn description(schema: &Value) -> Option<&str> {
    schema.get("description").and_then(Value::as_str)
}

/// A doc comment as a Markdown paragraph: its line breaks are the source's wrapping.
fn paragraph(text: &str) -> String {
    format!("{}\n\n", text.trim())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A value as it is written in YAML: strings bare, the rest as compact JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn show(default: &Value) -> String {
    match default {
        Value::Null => "unset".to_owned(),
        Value::String(text) if text.is_empty() => "`\"\"`".to_owned(),
        other => format!("`{}`", plain(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_gets_a_heading_with_its_type_default_and_values() {
        let page = markdown(&super::super::schema::json_schema());
        for expected in [
            "## `node`\n",
            "### `node.cpu`\n",
            "### `node.taints[].effect`\n",
            "### `nodes[].name`\n",
            "### `policy.pluginLimits.<name>.maxMemory`\n",
            "### `provider.aws.rootVolume.sizeGib`\n",
            "- Default: `10250`\n",
            "- `NoSchedule`",
            "- `RAID0`: ",
            "- Type: [duration](#duration)\n",
            "### Duration\n",
            "  - `timedOut`: ",
        ] {
            assert!(page.contains(expected), "missing {expected:?}");
        }
        let taint_effect = &page[page.find("### `node.taints[].effect`").unwrap()..];
        assert!(
            taint_effect[..taint_effect[4..].find("### ").unwrap()].contains("*Required.*"),
            "{taint_effect}"
        );
    }
}
