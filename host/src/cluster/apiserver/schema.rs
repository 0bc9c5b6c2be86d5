//! The fields the apiserver's types have, read from its OpenAPI v3 documents, and what an
//! object orca writes keeps of itself once the fields the server does not know are taken out.
//!
//! A server-side apply that names a field the server's schema lacks is refused whole (`.status.
//! declaredFeatures: field not declared in schema` from an apiserver older than 1.35), and a
//! strategic merge patch drops it with a warning. So orca prunes what it writes to the schema
//! of the server it writes to. Only the shape is kept of each document: which properties a
//! definition has and what each holds; descriptions and everything else are skipped as they
//! are read.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

/// What each definition of the documents read holds, by its OpenAPI name
/// (`io.k8s.api.core.v1.NodeStatus`).
#[derive(Debug, Default)]
pub struct Schema {
    definitions: HashMap<Box<str>, Definition>,
}

/// The properties an object may have; `None` for an object the schema leaves open (no
/// properties listed, or `x-kubernetes-preserve-unknown-fields`), where nothing is pruned.
#[derive(Debug, Clone, PartialEq)]
struct Definition {
    properties: Option<BTreeMap<Box<str>, Shape>>,
}

/// What one property holds.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// A string, number or boolean, or anything the schema does not describe further.
    Leaf,
    /// An object of the named definition.
    Named(Box<str>),
    /// An object described in place.
    Inline(Definition),
    List(Box<Shape>),
    /// An object whose keys are free (labels, capacity), each holding this.
    Map(Box<Shape>),
}

/// Why a document could not be read as an OpenAPI v3 document.
#[derive(Debug, thiserror::Error)]
#[error("reading the apiserver's OpenAPI document {document}")]
pub struct SchemaUnreadable {
    pub document: String,
    #[source]
    pub source: serde_json::Error,
}

impl Schema {
    /// Adds the definitions of one OpenAPI v3 document (`/openapi/v3/api/v1`); the documents
    /// of several group-versions share their common definitions (`ObjectMeta`), which the
    /// last one read keeps.
    ///
    /// # Errors
    /// [`SchemaUnreadable`] for a body that is not JSON of an OpenAPI document's shape.
    pub fn read(&mut self, document: &str, body: &[u8]) -> Result<(), SchemaUnreadable> {
        let read: Document = serde_json::from_slice(body).map_err(|source| SchemaUnreadable {
            document: document.to_owned(),
            source,
        })?;
        self.definitions.extend(
            read.components
                .schemas
                .into_iter()
                .map(|(name, raw)| (name.into_boxed_str(), raw.definition())),
        );
        Ok(())
    }

    /// Whether definition `name` was read.
    pub fn has(&self, name: &str) -> bool {
        self.definitions.contains_key(name)
    }

    /// Takes out of `value` (an object of definition `root`, whole or a patch of it) every
    /// field the schema does not have, and answers their paths (`status.declaredFeatures`,
    /// `status.conditions[].observedGeneration`). Strategic merge patch directives (keys
    /// beginning with `$`) stay. A definition the schema lacks, or leaves open, is not pruned.
    pub fn prune(&self, root: &str, value: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Some(definition) = self.definitions.get(root) {
            self.prune_object(definition, value, "", &mut dropped);
        }
        dropped
    }

    fn prune_object(
        &self,
        definition: &Definition,
        value: &mut Value,
        path: &str,
        dropped: &mut Vec<String>,
    ) {
        let (Some(properties), Value::Object(object)) = (&definition.properties, value) else {
            return;
        };
        object.retain(|key, child| {
            if key.starts_with('$') {
                return true;
            }
            let here = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match properties.get(key.as_str()) {
                Some(shape) => {
                    self.prune_shape(shape, child, &here, dropped);
                    true
                }
                None => {
                    dropped.push(here);
                    false
                }
            }
        });
    }

    fn prune_shape(&self, shape: &Shape, value: &mut Value, path: &str, dropped: &mut Vec<String>) {
        match (shape, value) {
            (Shape::Named(name), value) => {
                if let Some(definition) = self.definitions.get(name) {
                    self.prune_object(definition, value, path, dropped);
                }
            }
            (Shape::Inline(definition), value) => {
                self.prune_object(definition, value, path, dropped);
            }
            (Shape::List(item), Value::Array(items)) => {
                let here = format!("{path}[]");
                for each in items {
                    self.prune_shape(item, each, &here, dropped);
                }
            }
            (Shape::Map(item), Value::Object(entries)) => {
                let here = format!("{path}.*");
                for each in entries.values_mut() {
                    self.prune_shape(item, each, &here, dropped);
                }
            }
            _ => {}
        }
    }
}

/// Takes the field at `path` (as [`Schema::prune`] names them: `.` between keys, `[]` for
/// every item of a list, `*` for every value of a map) out of `value`; true when one was there.
pub fn remove_field(value: &mut Value, path: &str) -> bool {
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    remove_at(value, &segments)
}

fn remove_at(value: &mut Value, segments: &[&str]) -> bool {
    let (Some((first, rest)), Value::Object(object)) = (segments.split_first(), value) else {
        return false;
    };
    let (key, every_item) = match first.strip_suffix("[]") {
        Some(key) => (key, true),
        None => (*first, false),
    };
    if rest.is_empty() && !every_item && key != "*" {
        return object.remove(key).is_some();
    }
    let children: Vec<&mut Value> = if key == "*" {
        object.values_mut().collect()
    } else {
        object.get_mut(key).into_iter().collect()
    };
    let mut removed = false;
    for child in children {
        match (every_item, child) {
            (true, Value::Array(items)) => {
                for item in items {
                    removed |= remove_at(item, rest);
                }
            }
            (true, _) => {}
            (false, child) => removed |= remove_at(child, rest),
        }
    }
    removed
}

/// An OpenAPI v3 document, as far as orca reads it.
#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    components: Components,
}

#[derive(Deserialize, Default)]
struct Components {
    #[serde(default)]
    schemas: HashMap<String, RawSchema>,
}

/// One schema object as the apiserver writes it: a `$ref` (alone, or as the only member of an
/// `allOf`, which Kubernetes uses to give a reference a default or description), or a type
/// with `properties`, `items` or `additionalProperties`.
#[derive(Deserialize, Default)]
struct RawSchema {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    #[serde(rename = "allOf", default)]
    all_of: Vec<RawSchema>,
    #[serde(rename = "type")]
    kind: Option<String>,
    properties: Option<BTreeMap<String, RawSchema>>,
    items: Option<Box<RawSchema>>,
    #[serde(rename = "additionalProperties")]
    additional: Option<Additional>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields", default)]
    preserve_unknown: bool,
}

/// `additionalProperties`: a schema, or `true`/`false`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Additional {
    Schema(Box<RawSchema>),
    Allowed(#[allow(dead_code)] bool),
}

const REFERENCE_PREFIX: &str = "#/components/schemas/";

impl RawSchema {
    fn definition(self) -> Definition {
        match self.shape() {
            Shape::Inline(definition) => definition,
            _ => Definition { properties: None },
        }
    }

    fn shape(self) -> Shape {
        if let Some(name) = self.referenced() {
            return Shape::Named(name.into_boxed_str());
        }
        if self.preserve_unknown {
            return Shape::Leaf;
        }
        if let Some(items) = self.items {
            return Shape::List(Box::new(items.shape()));
        }
        if let Some(properties) = self.properties.filter(|p| !p.is_empty()) {
            return Shape::Inline(Definition {
                properties: Some(
                    properties
                        .into_iter()
                        .map(|(name, raw)| (name.into_boxed_str(), raw.shape()))
                        .collect(),
                ),
            });
        }
        match self.additional {
            Some(Additional::Schema(values)) => Shape::Map(Box::new(values.shape())),
            _ if self.kind.as_deref() == Some("array") => Shape::List(Box::new(Shape::Leaf)),
            _ => Shape::Leaf,
        }
    }

    /// The definition this schema only points at: `$ref`, or an `allOf` of one `$ref`.
    fn referenced(&self) -> Option<String> {
        let reference = match (&self.reference, self.all_of.as_slice()) {
            (Some(reference), _) => reference,
            (None, [only]) if only.properties.is_none() => only.reference.as_ref()?,
            _ => return None,
        };
        Some(
            reference
                .strip_prefix(REFERENCE_PREFIX)
                .unwrap_or(reference)
                .to_owned(),
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A slice of `/openapi/v3/api/v1` as a 1.31 apiserver serves it: a Node whose status has
    /// no `declaredFeatures`, conditions by reference inside `allOf`, capacity as a map.
    pub(crate) fn core_v1_of_1_31() -> Value {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.31.14"},
            "components": {"schemas": {
                "io.k8s.api.core.v1.Node": {
                    "description": "Node is a worker node in Kubernetes.",
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                        "spec": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeSpec"}]},
                        "status": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeStatus"}]}
                    }
                },
                "io.k8s.api.core.v1.NodeSpec": {"type": "object", "properties": {"podCIDR": {"type": "string"}}},
                "io.k8s.api.core.v1.NodeStatus": {
                    "type": "object",
                    "properties": {
                        "addresses": {"type": "array", "items": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeAddress"}]}, "x-kubernetes-list-type": "map"},
                        "capacity": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
                        "conditions": {"type": "array", "items": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeCondition"}]}},
                        "nodeInfo": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.NodeSystemInfo"}]},
                        "volumesInUse": {"type": "array", "items": {"type": "string", "default": ""}}
                    }
                },
                "io.k8s.api.core.v1.NodeAddress": {"type": "object", "required": ["type", "address"], "properties": {"address": {"type": "string"}, "type": {"type": "string"}}},
                "io.k8s.api.core.v1.NodeCondition": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}}},
                "io.k8s.api.core.v1.NodeSystemInfo": {"type": "object", "properties": {"kubeletVersion": {"type": "string"}}},
                "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                    "managedFields": {"type": "array", "items": {"default": {}, "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"}]}}
                }},
                "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry": {"type": "object", "properties": {
                    "fieldsV1": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"}]}
                }},
                "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": {"type": "object", "description": "FieldsV1 stores a set of fields."},
                "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        })
    }

    pub(crate) fn schema_of(documents: &[Value]) -> Schema {
        let mut schema = Schema::default();
        for (index, document) in documents.iter().enumerate() {
            schema
                .read(&format!("doc{index}"), document.to_string().as_bytes())
                .unwrap();
        }
        schema
    }

    #[test]
    fn fields_the_server_lacks_are_taken_out_and_named_wherever_they_are() {
        let schema = schema_of(&[core_v1_of_1_31()]);
        let cases = [
            // (what orca writes, what is sent, what is named)
            (
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                       "status": {"capacity": {"cpu": "1"}, "declaredFeatures": ["ExtendWebSocketsToKubelet"]}}),
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                       "status": {"capacity": {"cpu": "1"}}}),
                vec!["status.declaredFeatures"],
            ),
            // Inside list items, behind an allOf reference.
            (
                json!({"status": {"conditions": [
                    {"type": "Ready", "status": "True", "observedGeneration": 3},
                    {"type": "DiskPressure", "status": "False"}]}}),
                json!({"status": {"conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "DiskPressure", "status": "False"}]}}),
                vec!["status.conditions[].observedGeneration"],
            ),
            // Nested objects, several at once, in the order met.
            (
                json!({"spec": {"podCIDR": "10.0.0.0/24", "newSpecField": true},
                       "status": {"nodeInfo": {"kubeletVersion": "v1", "swap": {"capacity": 1}}}}),
                json!({"spec": {"podCIDR": "10.0.0.0/24"},
                       "status": {"nodeInfo": {"kubeletVersion": "v1"}}}),
                vec!["spec.newSpecField", "status.nodeInfo.swap"],
            ),
            // Map keys are the writer's own (labels, capacity): never pruned.
            (
                json!({"metadata": {"labels": {"anything/goes": "x"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}),
                json!({"metadata": {"labels": {"anything/goes": "x"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}),
                vec![],
            ),
            // Strategic merge patch directives stay; open objects (FieldsV1) are not looked into.
            (
                json!({"status": {"$setElementOrder/conditions": [{"type": "Ready"}], "conditions": [{"type": "Ready", "$patch": "replace"}]},
                       "metadata": {"managedFields": [{"fieldsV1": {"f:status": {}}}]}}),
                json!({"status": {"$setElementOrder/conditions": [{"type": "Ready"}], "conditions": [{"type": "Ready", "$patch": "replace"}]},
                       "metadata": {"managedFields": [{"fieldsV1": {"f:status": {}}}]}}),
                vec![],
            ),
            // A value of another shape than the schema's is left to the server to judge.
            (
                json!({"status": {"conditions": "not a list", "addresses": [5]}}),
                json!({"status": {"conditions": "not a list", "addresses": [5]}}),
                vec![],
            ),
        ];
        for (written, sent, named) in cases {
            let mut value = written.clone();
            let dropped = schema.prune("io.k8s.api.core.v1.Node", &mut value);
            assert_eq!(value, sent, "{written}");
            assert_eq!(dropped, named, "{written}");
        }
    }

    #[test]
    fn a_definition_the_schema_lacks_is_sent_as_it_is() {
        let schema = schema_of(&[core_v1_of_1_31()]);
        let mut lease = json!({"spec": {"holderIdentity": "n", "strategy": "x"}});
        let dropped = schema.prune("io.k8s.api.coordination.v1.Lease", &mut lease);
        assert!(dropped.is_empty());
        assert_eq!(lease["spec"]["strategy"], "x");
        assert!(!schema.has("io.k8s.api.coordination.v1.Lease"));
        assert!(schema.has("io.k8s.api.core.v1.NodeStatus"));
    }

    #[test]
    fn documents_that_are_not_openapi_are_refused_naming_the_document() {
        let mut schema = Schema::default();
        let error = schema
            .read("/openapi/v3/api/v1", b"<html>not json</html>")
            .unwrap_err();
        assert!(error.to_string().contains("/openapi/v3/api/v1"), "{error}");
        // Valid JSON without components reads as no definitions, not as an error.
        schema.read("/openapi/v3/api/v1", b"{}").unwrap();
        assert!(!schema.has("io.k8s.api.core.v1.Node"));
    }

    #[test]
    fn a_named_field_is_removed_where_the_path_leads() {
        let cases = [
            (
                "status.declaredFeatures",
                json!({"status": {"declaredFeatures": ["A"], "capacity": {}}}),
                json!({"status": {"capacity": {}}}),
                true,
            ),
            (
                "status.conditions[].observedGeneration",
                json!({"status": {"conditions": [{"type": "Ready", "observedGeneration": 1}, {"type": "X"}]}}),
                json!({"status": {"conditions": [{"type": "Ready"}, {"type": "X"}]}}),
                true,
            ),
            (
                "status.absent",
                json!({"status": {"capacity": {}}}),
                json!({"status": {"capacity": {}}}),
                false,
            ),
            (
                "status.capacity.*.unit",
                json!({"status": {"capacity": {"cpu": {"unit": "m", "n": 1}}}}),
                json!({"status": {"capacity": {"cpu": {"n": 1}}}}),
                true,
            ),
            ("", json!({"a": 1}), json!({"a": 1}), false),
        ];
        for (path, mut value, after, removed) in cases {
            assert_eq!(remove_field(&mut value, path), removed, "{path}");
            assert_eq!(value, after, "{path}");
        }
    }
}
