//! Whether a launch template version holds what orca would put in it: both sides as
//! [`TemplateSettings`], compared setting by setting, so a version that sets anything orca
//! does not (termination protection, user data, a network interface) or sets something
//! otherwise is never launched from, and the difference can be named.

use std::fmt;

use super::super::api::{
    LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, ShutdownBehaviour,
    TemplateSettings,
};

impl LaunchTemplateSpec {
    /// The template's content as `DescribeLaunchTemplateVersions` shows a template made from
    /// this spec (see [`TemplateSettings`] for the keys).
    pub fn settings(&self) -> TemplateSettings {
        let mut settings = TemplateSettings::new();
        let mut set = |key: &str, value: String| {
            settings.insert(key.to_owned(), value);
        };
        if !self.security_group_ids.is_empty() {
            set("SecurityGroupIds", sorted_list(&self.security_group_ids));
        }
        if let Some(profile) = &self.instance_profile {
            let key = if profile.starts_with("arn:") {
                "IamInstanceProfile.Arn"
            } else {
                "IamInstanceProfile.Name"
            };
            set(key, profile.clone());
        }
        if let Some(key_name) = &self.key_name {
            set("KeyName", key_name.clone());
        }
        if let Some(volume) = &self.root_volume {
            let ebs =
                |field: &str| format!("BlockDeviceMappings.{}.Ebs.{field}", volume.device_name);
            set(&ebs("VolumeSize"), volume.size_gib.to_string());
            set(&ebs("VolumeType"), volume.volume_type.clone());
            set(&ebs("Encrypted"), volume.encrypted.to_string());
            set(
                &ebs("DeleteOnTermination"),
                volume.delete_on_termination.to_string(),
            );
        }
        let metadata = &self.metadata;
        let tokens = if metadata.tokens_required {
            "required"
        } else {
            "optional"
        };
        set("MetadataOptions.HttpTokens", tokens.to_owned());
        let endpoint = if metadata.endpoint_enabled {
            "enabled"
        } else {
            "disabled"
        };
        set("MetadataOptions.HttpEndpoint", endpoint.to_owned());
        set(
            "MetadataOptions.HttpPutResponseHopLimit",
            metadata.hop_limit.to_string(),
        );
        let shutdown = match self.shutdown {
            ShutdownBehaviour::Stop => "stop",
            ShutdownBehaviour::Terminate => "terminate",
        };
        set("InstanceInitiatedShutdownBehavior", shutdown.to_owned());
        settings
    }
}

/// A list setting in one canonical spelling: EC2 keeps no order that matters for these.
pub(in super::super) fn sorted_list(items: &[String]) -> String {
    let mut items = items.to_vec();
    items.sort();
    items.join(",")
}

/// One setting a version has otherwise than orca would make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub setting: String,
    /// What orca sets; `None`: orca leaves it unset.
    pub orca: Option<String>,
    /// What the version has; `None`: unset there.
    pub found: Option<String>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let found = self.found.as_deref().unwrap_or("unset");
        match &self.orca {
            Some(orca) => write!(f, "{} {found} where orca sets {orca}", self.setting),
            None => write!(f, "{} {found}, which orca leaves unset", self.setting),
        }
    }
}

/// What to do with the versions found under the node's template name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Launch from this version: it holds exactly what orca would put in the template.
    Use(LaunchTemplateRef),
    /// EC2 listed no version (a template too new to show them yet).
    NoneShown,
    /// No version holds orca's content; `compared` (the default version, else the newest)
    /// differs by `differences`.
    NotOrcas {
        compared: LaunchTemplateVersion,
        differences: Vec<Difference>,
    },
}

/// The oldest version whose settings equal `orca`'s, so that every process picks the same one
/// (a restart replays fleet requests naming it); else why none will do.
pub(super) fn verdict(orca: &TemplateSettings, versions: &[LaunchTemplateVersion]) -> Verdict {
    if let Some(same) = versions
        .iter()
        .filter(|version| version.settings == *orca)
        .min_by_key(|version| version.template.version)
    {
        return Verdict::Use(same.template.clone());
    }
    let compared = versions.iter().find(|version| version.default).or_else(|| {
        versions
            .iter()
            .max_by_key(|version| version.template.version)
    });
    let Some(compared) = compared else {
        return Verdict::NoneShown;
    };
    Verdict::NotOrcas {
        compared: compared.clone(),
        differences: differences(orca, &compared.settings),
    }
}

/// Every setting that differs, in the settings' order.
fn differences(orca: &TemplateSettings, found: &TemplateSettings) -> Vec<Difference> {
    let mut keys: Vec<&String> = orca.keys().chain(found.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| orca.get(*key) != found.get(*key))
        .map(|key| Difference {
            setting: key.clone(),
            orca: orca.get(key).cloned(),
            found: found.get(key).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orca() -> TemplateSettings {
        [
            ("InstanceInitiatedShutdownBehavior", "terminate"),
            ("MetadataOptions.HttpTokens", "required"),
            ("SecurityGroupIds", "sg-1,sg-2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn version(
        number: u64,
        default: bool,
        changes: &[(&str, Option<&str>)],
    ) -> LaunchTemplateVersion {
        let mut settings = orca();
        for (key, value) in changes {
            match value {
                Some(value) => settings.insert((*key).to_owned(), (*value).to_owned()),
                None => settings.remove(*key),
            };
        }
        LaunchTemplateVersion {
            template: LaunchTemplateRef {
                id: "lt-0123456789abcdef0".to_owned(),
                version: number,
            },
            default,
            settings,
        }
    }

    fn uses(number: u64) -> Verdict {
        Verdict::Use(LaunchTemplateRef {
            id: "lt-0123456789abcdef0".to_owned(),
            version: number,
        })
    }

    fn differs(
        compared: LaunchTemplateVersion,
        differences: &[(&str, Option<&str>, Option<&str>)],
    ) -> Verdict {
        Verdict::NotOrcas {
            compared,
            differences: differences
                .iter()
                .map(|(setting, orca, found)| Difference {
                    setting: (*setting).to_owned(),
                    orca: orca.map(str::to_owned),
                    found: found.map(str::to_owned),
                })
                .collect(),
        }
    }

    /// Issue 39, case 6: a template under orca's name counted as orca's whatever it held.
    #[test]
    fn only_a_version_holding_exactly_orcas_content_is_launched_from() {
        let protected = [("DisableApiTermination", Some("true"))];
        let optional = [("MetadataOptions.HttpTokens", Some("optional"))];
        let no_groups = [("SecurityGroupIds", None)];
        let cases: Vec<(&str, Vec<LaunchTemplateVersion>, Verdict)> = vec![
            ("orca's own", vec![version(1, true, &[])], uses(1)),
            (
                "someone's later default does not move orca off its version",
                vec![version(1, false, &[]), version(2, true, &protected)],
                uses(1),
            ),
            (
                "the oldest of several equal versions, whichever is the default",
                vec![
                    version(1, false, &optional),
                    version(3, false, &[]),
                    version(2, true, &[]),
                ],
                uses(2),
            ),
            ("nothing listed yet", vec![], Verdict::NoneShown),
            (
                "a setting orca leaves unset",
                vec![version(1, true, &protected)],
                differs(
                    version(1, true, &protected),
                    &[("DisableApiTermination", None, Some("true"))],
                ),
            ),
            (
                "a setting of orca's changed, and one missing, against the default",
                vec![
                    version(1, false, &protected),
                    version(2, true, &[optional[0], no_groups[0]]),
                    version(3, false, &protected),
                ],
                differs(
                    version(2, true, &[optional[0], no_groups[0]]),
                    &[
                        (
                            "MetadataOptions.HttpTokens",
                            Some("required"),
                            Some("optional"),
                        ),
                        ("SecurityGroupIds", Some("sg-1,sg-2"), None),
                    ],
                ),
            ),
            (
                "no default flagged: against the newest",
                vec![version(1, false, &optional), version(2, false, &protected)],
                differs(
                    version(2, false, &protected),
                    &[("DisableApiTermination", None, Some("true"))],
                ),
            ),
        ];
        for (situation, versions, expected) in cases {
            assert_eq!(verdict(&orca(), &versions), expected, "{situation}");
        }
    }

    #[test]
    fn a_difference_reads_as_what_the_template_has_against_what_orca_sets() {
        let changed = Difference {
            setting: "MetadataOptions.HttpTokens".to_owned(),
            orca: Some("required".to_owned()),
            found: Some("optional".to_owned()),
        };
        assert_eq!(
            changed.to_string(),
            "MetadataOptions.HttpTokens optional where orca sets required"
        );
        let extra = Difference {
            setting: "DisableApiTermination".to_owned(),
            orca: None,
            found: Some("true".to_owned()),
        };
        assert_eq!(
            extra.to_string(),
            "DisableApiTermination true, which orca leaves unset"
        );
    }
}
