//! `onError`: what each kind of failed answer from a plugin means for the pod: fail it, or ask
//! the next plugin in the hook's chain.
//!
//! ```yaml
//! onError: fail          # every kind fails the pod, except a decline (the next plugin is asked)
//! onError: fallback      # every kind asks the next plugin
//! onError:               # per kind; kinds not listed take `default` (fail when not given),
//!   default: fail        # a decline falls through unless `declined: fail`
//!   unsupported: fallback
//!   timedOut: fallback
//! ```

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// What one kind of failure does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnErrorAction {
    /// The pod fails with reason `PolicyError` (or `InvalidAnnotation`) and the plugin's
    /// message.
    Fail,
    /// The next plugin in the chain is asked; after the last, the pod fails.
    Fallback,
}

/// Every way a plugin's turn in a chain can end without an answer orca uses.
///
/// Read by name (`noMatch`, as under `onError`) from `orca plugin test` cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema, Deserialize)]
#[schemars(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// The plugin answered `declined`: not its pod (orca:policy 0.2.0).
    Declined,
    /// The plugin does not implement the hook (not in its `info`, or it answered
    /// `unsupported`).
    Unsupported,
    /// No plugin of that name is embedded or in the plugins directory.
    NotLoaded,
    /// `no-match`: nothing satisfies the pod.
    NoMatch,
    /// `invalid-annotation`: a pod annotation the plugin cannot use.
    InvalidAnnotation,
    /// `invalid-settings`: the chain step's settings are wrong.
    InvalidSettings,
    /// `failed`: any other refusal by the plugin.
    Failed,
    /// The plugin answered, but orca's checks refused the answer (an unknown type, a bad tag).
    InvalidAnswer,
    /// The plugin trapped (a panic, out of memory).
    Crashed,
    /// The plugin ran out of time, or every sandbox slot was busy.
    TimedOut,
}

impl FailureKind {
    pub const ALL: [FailureKind; 10] = [
        FailureKind::Declined,
        FailureKind::Unsupported,
        FailureKind::NotLoaded,
        FailureKind::NoMatch,
        FailureKind::InvalidAnnotation,
        FailureKind::InvalidSettings,
        FailureKind::Failed,
        FailureKind::InvalidAnswer,
        FailureKind::Crashed,
        FailureKind::TimedOut,
    ];

    /// The key under `onError` and in decision records.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Declined => "declined",
            FailureKind::Unsupported => "unsupported",
            FailureKind::NotLoaded => "notLoaded",
            FailureKind::NoMatch => "noMatch",
            FailureKind::InvalidAnnotation => "invalidAnnotation",
            FailureKind::InvalidSettings => "invalidSettings",
            FailureKind::Failed => "failed",
            FailureKind::InvalidAnswer => "invalidAnswer",
            FailureKind::Crashed => "crashed",
            FailureKind::TimedOut => "timedOut",
        }
    }

    /// The kind a decision record names (`as_str`'s words).
    pub fn parse(text: &str) -> Option<FailureKind> {
        FailureKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// Whether the plugin broke rather than passed the pod on: it failed, crashed, ran out of
    /// time or answered what orca refused. A decline, `unsupported` and `no-match` are a
    /// plugin's word that the pod is not its to decide; `notLoaded` is no plugin at all.
    pub fn is_fault(self) -> bool {
        !matches!(
            self,
            FailureKind::Declined
                | FailureKind::Unsupported
                | FailureKind::NoMatch
                | FailureKind::NotLoaded
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A chain step's `onError`: an action for each [`FailureKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnError {
    actions: [OnErrorAction; FailureKind::ALL.len()],
}

impl OnError {
    /// `onError: fail`: every failure fails the pod; a decline asks the next plugin (it is
    /// the plugin saying the pod is not its to decide, not a failure).
    pub const FAIL: OnError = OnError::with_default(OnErrorAction::Fail);
    /// `onError: fallback`: every failure asks the next plugin.
    pub const FALLBACK: OnError = OnError::with_default(OnErrorAction::Fallback);

    const fn with_default(default: OnErrorAction) -> OnError {
        let mut actions = [default; FailureKind::ALL.len()];
        actions[FailureKind::Declined as usize] = OnErrorAction::Fallback;
        OnError { actions }
    }

    pub fn action(self, kind: FailureKind) -> OnErrorAction {
        self.actions[kind.index()]
    }

    #[must_use]
    pub fn with(mut self, kind: FailureKind, action: OnErrorAction) -> OnError {
        self.actions[kind.index()] = action;
        self
    }
}

impl Default for OnError {
    fn default() -> Self {
        OnError::FAIL
    }
}

/// The per-kind form, as written in config.yaml.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PerKind {
    default: Option<OnErrorAction>,
    declined: Option<OnErrorAction>,
    unsupported: Option<OnErrorAction>,
    not_loaded: Option<OnErrorAction>,
    no_match: Option<OnErrorAction>,
    invalid_annotation: Option<OnErrorAction>,
    invalid_settings: Option<OnErrorAction>,
    failed: Option<OnErrorAction>,
    invalid_answer: Option<OnErrorAction>,
    crashed: Option<OnErrorAction>,
    timed_out: Option<OnErrorAction>,
}

impl PerKind {
    fn on_error(&self) -> OnError {
        let mut on_error = OnError::with_default(self.default.unwrap_or(OnErrorAction::Fail));
        for (kind, action) in [
            (FailureKind::Declined, self.declined),
            (FailureKind::Unsupported, self.unsupported),
            (FailureKind::NotLoaded, self.not_loaded),
            (FailureKind::NoMatch, self.no_match),
            (FailureKind::InvalidAnnotation, self.invalid_annotation),
            (FailureKind::InvalidSettings, self.invalid_settings),
            (FailureKind::Failed, self.failed),
            (FailureKind::InvalidAnswer, self.invalid_answer),
            (FailureKind::Crashed, self.crashed),
            (FailureKind::TimedOut, self.timed_out),
        ] {
            if let Some(action) = action {
                on_error = on_error.with(kind, action);
            }
        }
        on_error
    }
}

impl<'de> Deserialize<'de> for OnError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<OnError, D::Error> {
        struct OnErrorVisitor;

        impl<'de> Visitor<'de> for OnErrorVisitor {
            type Value = OnError;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "`fail`, `fallback`, or a map from failure kinds (default, declined, \
                     unsupported, notLoaded, noMatch, invalidAnnotation, invalidSettings, \
                     failed, invalidAnswer, crashed, timedOut) to fail or fallback",
                )
            }

            fn visit_str<E: de::Error>(self, word: &str) -> Result<OnError, E> {
                match word {
                    "fail" => Ok(OnError::FAIL),
                    "fallback" => Ok(OnError::FALLBACK),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<OnError, M::Error> {
                let per_kind = PerKind::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(per_kind.on_error())
            }
        }

        deserializer.deserialize_any(OnErrorVisitor)
    }
}

impl Serialize for OnError {
    /// `fail` or `fallback` when it is one of them, else the map form over `default: fail`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if *self == OnError::FAIL {
            return serializer.serialize_str("fail");
        }
        if *self == OnError::FALLBACK {
            return serializer.serialize_str("fallback");
        }
        let changed: Vec<FailureKind> = FailureKind::ALL
            .into_iter()
            .filter(|kind| self.action(*kind) != OnError::FAIL.action(*kind))
            .collect();
        let mut map = serializer.serialize_map(Some(changed.len() + 1))?;
        map.serialize_entry("default", &OnErrorAction::Fail)?;
        for kind in changed {
            map.serialize_entry(kind.as_str(), &self.action(kind))?;
        }
        map.end()
    }
}

impl JsonSchema for OnError {
    fn schema_name() -> Cow<'static, str> {
        "OnError".into()
    }

    /// The three forms [`OnError`]'s `Deserialize` takes; the map's keys and their meanings
    /// come from [`FailureKind`]'s own schema, so a kind added there is documented here.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let action = generator.subschema_for::<OnErrorAction>();
        let with_description = |description: &str| {
            let mut schema = action.clone();
            schema.insert("description".to_owned(), description.into());
            schema
        };
        let mut kinds = serde_json::Map::new();
        kinds.insert(
            "default".to_owned(),
            with_description("The action of every kind not listed (fail when not given).").into(),
        );
        let kind_schema = FailureKind::json_schema(generator);
        let variants = kind_schema
            .get("oneOf")
            .and_then(|variants| variants.as_array())
            .into_iter()
            .flatten();
        for variant in variants {
            if let (Some(kind), Some(description)) = (
                variant.get("const").and_then(|v| v.as_str()),
                variant.get("description").and_then(|v| v.as_str()),
            ) {
                kinds.insert(kind.to_owned(), with_description(description).into());
            }
        }
        json_schema!({
            "description": "What each kind of failed answer from a plugin means for the pod: \
                fail it, or ask the next plugin in the hook's chain.",
            "oneOf": [
                {
                    "type": "string",
                    "const": "fail",
                    "description": "Every kind fails the pod, except a decline (the next \
                        plugin is asked).",
                },
                {
                    "type": "string",
                    "const": "fallback",
                    "description": "Every kind asks the next plugin.",
                },
                {
                    "type": "object",
                    "description": "Per kind of failure; kinds not listed take `default`, and \
                        a decline falls through unless `declined: fail`.",
                    "properties": kinds,
                    "additionalProperties": false,
                },
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<OnError, String> {
        serde_saphyr::from_str::<OnError>(yaml).map_err(|error| error.to_string())
    }

    #[test]
    fn fail_fails_every_kind_but_a_decline() {
        let on_error = parse("fail").unwrap();
        assert_eq!(on_error, OnError::FAIL);
        assert_eq!(on_error, OnError::default());
        for kind in FailureKind::ALL {
            let expected = if kind == FailureKind::Declined {
                OnErrorAction::Fallback
            } else {
                OnErrorAction::Fail
            };
            assert_eq!(on_error.action(kind), expected, "{kind}");
        }
    }

    #[test]
    fn fallback_falls_through_on_every_kind() {
        let on_error = parse("fallback").unwrap();
        assert!(
            FailureKind::ALL
                .iter()
                .all(|kind| on_error.action(*kind) == OnErrorAction::Fallback)
        );
    }

    #[test]
    fn a_map_sets_kinds_over_its_default() {
        let on_error = parse("{unsupported: fallback, timedOut: fallback}").unwrap();
        assert_eq!(
            on_error.action(FailureKind::Unsupported),
            OnErrorAction::Fallback
        );
        assert_eq!(
            on_error.action(FailureKind::TimedOut),
            OnErrorAction::Fallback
        );
        assert_eq!(
            on_error.action(FailureKind::Declined),
            OnErrorAction::Fallback
        );
        assert_eq!(on_error.action(FailureKind::NoMatch), OnErrorAction::Fail);

        let on_error = parse("{default: fallback, noMatch: fail, declined: fail}").unwrap();
        assert_eq!(on_error.action(FailureKind::NoMatch), OnErrorAction::Fail);
        assert_eq!(on_error.action(FailureKind::Declined), OnErrorAction::Fail);
        assert_eq!(
            on_error.action(FailureKind::Crashed),
            OnErrorAction::Fallback
        );
    }

    #[test]
    fn unknown_words_and_kinds_are_refused_by_name() {
        let error = parse("retry").unwrap_err();
        assert!(
            error.contains("retry") && error.contains("fallback"),
            "{error}"
        );
        let error = parse("{nomatch: fail}").unwrap_err();
        assert!(
            error.contains("nomatch") && error.contains("noMatch"),
            "{error}"
        );
        let error = parse("{noMatch: retry}").unwrap_err();
        assert!(error.contains("retry"), "{error}");
    }

    #[test]
    fn kind_names_are_the_keys_of_the_map_form() {
        for kind in FailureKind::ALL {
            let on_error = parse(&format!("{{default: fallback, {kind}: fail}}")).unwrap();
            for other in FailureKind::ALL {
                let expected = if other == kind {
                    OnErrorAction::Fail
                } else {
                    OnErrorAction::Fallback
                };
                assert_eq!(on_error.action(other), expected, "{kind} → {other}");
            }
        }
    }

    #[test]
    fn the_schema_names_every_kind_and_accepts_what_deserialize_accepts() {
        let schema = serde_json::to_value(schemars::schema_for!(OnError)).unwrap();
        let keys: Vec<&str> = schema["oneOf"][2]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for kind in FailureKind::ALL {
            assert!(
                keys.contains(&kind.as_str()),
                "{kind} missing from {keys:?}"
            );
        }
        assert_eq!(keys.len(), FailureKind::ALL.len() + 1, "{keys:?}");
        let validator = jsonschema::validator_for(&schema).unwrap();
        for yaml in [
            "fail",
            "fallback",
            "retry",
            "{}",
            "{default: fallback, noMatch: fail}",
            "{nomatch: fail}",
            "{noMatch: retry}",
            "{timedOut: fallback, crashed: fallback}",
            "[fail]",
            "3",
        ] {
            let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
            assert_eq!(
                validator.is_valid(&value),
                serde_json::from_value::<OnError>(value.clone()).is_ok(),
                "{yaml}"
            );
        }
    }

    #[test]
    fn every_on_error_serializes_to_a_form_that_parses_back_to_it() {
        let mixed = OnError::FAIL
            .with(FailureKind::TimedOut, OnErrorAction::Fallback)
            .with(FailureKind::Declined, OnErrorAction::Fail);
        for on_error in [OnError::FAIL, OnError::FALLBACK, mixed] {
            let value = serde_json::to_value(on_error).unwrap();
            let back: OnError = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(back, on_error, "{value}");
        }
        assert_eq!(serde_json::to_value(OnError::FAIL).unwrap(), "fail");
    }
}
