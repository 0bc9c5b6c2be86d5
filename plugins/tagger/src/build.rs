//! Building the tags, independent of the host so it is unit-tested natively.

use std::collections::BTreeMap;

use orca_plugin_sdk::tags::{MAX_TAGS, validate_tag};
use orca_plugin_sdk::{AnnotationError, Pod, PodExt, PolicyError, Tag, TagContext};
use serde::Deserialize;

pub const TAGS_ANNOTATION: &str = "orca.research/tags";
/// Keys orca sets itself; neither settings nor pods may replace them.
const RESERVED_PREFIX: &str = "orca.research/";
const RESERVED_KEYS: [&str; 2] = ["ManagedBy", "Name"];

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Tags every instance gets.
    pub extra_tags: BTreeMap<String, String>,
}

impl Settings {
    /// # Errors
    /// `invalid-settings` naming the bad tag or field.
    pub fn parse(json: &str) -> Result<Settings, PolicyError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        let settings: Settings = serde_json::from_str(json)
            .map_err(|error| PolicyError::InvalidSettings(format!("tagger settings: {error}")))?;
        for (key, value) in &settings.extra_tags {
            check_user_tag(key, value).map_err(|message| {
                PolicyError::InvalidSettings(format!("tagger settings: extraTags: {message}"))
            })?;
        }
        Ok(settings)
    }
}

fn check_user_tag(key: &str, value: &str) -> Result<(), String> {
    if key.starts_with(RESERVED_PREFIX) || RESERVED_KEYS.contains(&key) {
        return Err(format!(
            "tag key {key:?} is set by orca and cannot be replaced"
        ));
    }
    validate_tag(key, value)
}

/// # Errors
/// `invalid-annotation` for a malformed `orca.research/tags` or a tag AWS would refuse.
pub fn build(
    pod: &Pod,
    settings: &Settings,
    context: &TagContext,
) -> Result<Vec<Tag>, PolicyError> {
    let own = [
        ("ManagedBy", "ORCA".to_owned()),
        ("Name", format!("{}/{}", pod.namespace, pod.name)),
        ("orca.research/node", context.node_name.clone()),
        ("orca.research/cluster", context.cluster_name.clone()),
        ("orca.research/pod-namespace", pod.namespace.clone()),
        ("orca.research/pod-name", pod.name.clone()),
        ("orca.research/pod-uid", pod.uid.clone()),
    ];
    let mut tags: BTreeMap<String, String> = BTreeMap::new();
    tags.extend(settings.extra_tags.clone());
    if let Some(text) = pod.annotation(TAGS_ANNOTATION) {
        let invalid = |expected: String| {
            PolicyError::InvalidAnnotation(AnnotationError {
                annotation: TAGS_ANNOTATION.to_owned(),
                value: text.to_owned(),
                expected,
            })
        };
        let user: BTreeMap<String, String> = serde_json::from_str(text).map_err(|error| {
            invalid(format!(
                "a JSON object of string tags, such as {{\"team\": \"ml\"}} ({error})"
            ))
        })?;
        for (key, value) in &user {
            check_user_tag(key, value)
                .map_err(|message| invalid(format!("tags EC2 accepts: {message}")))?;
        }
        tags.extend(user);
    }
    let own_count = own.len();
    for (key, value) in own {
        if !value.is_empty() {
            tags.insert(key.to_owned(), value);
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(PolicyError::InvalidAnnotation(AnnotationError {
            annotation: TAGS_ANNOTATION.to_owned(),
            value: pod
                .annotation(TAGS_ANNOTATION)
                .unwrap_or_default()
                .to_owned(),
            expected: format!(
                "at most {MAX_TAGS} tags in all, counting orca's {} and the settings' {}",
                own_count,
                settings.extra_tags.len()
            ),
        }));
    }
    Ok(tags
        .into_iter()
        .map(|(key, value)| Tag { key, value })
        .collect())
}

#[cfg(test)]
mod tests {
    use orca_plugin_sdk::Market;
    use orca_plugin_sdk::testing::pod_with_annotations;

    use super::*;

    fn context() -> TagContext {
        TagContext {
            node_name: "orca-aws-node".into(),
            cluster_name: "research".into(),
            instance_type: "p5.48xlarge".into(),
            market: Market::Spot,
        }
    }

    fn tags(
        annotations: &[(&str, &str)],
        settings: &Settings,
    ) -> Result<BTreeMap<String, String>, PolicyError> {
        build(&pod_with_annotations(annotations), settings, &context())
            .map(|tags| tags.into_iter().map(|t| (t.key, t.value)).collect())
    }

    #[test]
    fn orca_tags_identify_the_pod_node_and_cluster() {
        let tags = tags(&[], &Settings::default()).unwrap();
        assert_eq!(tags["ManagedBy"], "ORCA");
        assert_eq!(tags["Name"], "ns/p");
        assert_eq!(tags["orca.research/pod-uid"], "u");
        assert_eq!(tags["orca.research/node"], "orca-aws-node");
        assert_eq!(tags["orca.research/cluster"], "research");
    }

    #[test]
    fn pod_and_settings_tags_are_added() {
        let settings = Settings {
            extra_tags: [("CostCenter".to_owned(), "1234".to_owned())].into(),
        };
        let tags = tags(
            &[(TAGS_ANNOTATION, r#"{"team": "ml", "CostCenter": "9"}"#)],
            &settings,
        )
        .unwrap();
        assert_eq!(
            (tags["team"].as_str(), tags["CostCenter"].as_str()),
            ("ml", "9")
        );
    }

    #[test]
    fn malformed_or_refused_pod_tags_are_invalid_annotations() {
        for value in [
            r#"team=ml"#,
            r#"{"aws:owner": "x"}"#,
            r#"{"team": "a;b"}"#,
            r#"{"ManagedBy": "me"}"#,
            r#"{"orca.research/pod-uid": "x"}"#,
        ] {
            match tags(&[(TAGS_ANNOTATION, value)], &Settings::default()) {
                Err(PolicyError::InvalidAnnotation(error)) => {
                    assert_eq!(error.annotation, TAGS_ANNOTATION, "{value}")
                }
                other => panic!("{value}: expected invalid-annotation, got {other:?}"),
            }
        }
    }

    #[test]
    fn more_than_fifty_tags_are_refused() {
        let many: BTreeMap<String, String> =
            (0..44).map(|i| (format!("k{i}"), "v".to_owned())).collect();
        let annotation = serde_json::to_string(&many).unwrap();
        assert!(
            matches!(tags(&[(TAGS_ANNOTATION, &annotation)], &Settings::default()), Err(PolicyError::InvalidAnnotation(e)) if e.expected.contains("at most 50"))
        );
    }

    #[test]
    fn bad_settings_are_reported() {
        assert!(
            matches!(Settings::parse(r#"{"extraTags": {"aws:x": "y"}}"#), Err(PolicyError::InvalidSettings(m)) if m.contains("aws:"))
        );
    }
}
