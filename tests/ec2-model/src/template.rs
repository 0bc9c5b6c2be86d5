//! Launch templates as EC2 keeps them: a name, an id, and numbered versions whose data never
//! change once made. The name is taken at once (a second CreateLaunchTemplate of it answers
//! `AlreadyExists` at once); the template itself, like any new resource, is unknown to
//! describes and to the fleets that name it until its visibility lag has passed.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::error::Ec2Error;

/// EC2's limit on a launch template's name.
const MAX_NAME_LENGTH: usize = 128;

/// A CreateLaunchTemplate request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateLaunchTemplate {
    pub name: String,
    /// The launch template data, opaque to the model: setting → value, answered back as
    /// given.
    pub data: BTreeMap<String, String>,
}

/// One version of one template, exactly: what a fleet names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplateRef {
    pub id: String,
    pub version: u64,
}

/// One version as DescribeLaunchTemplateVersions lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchTemplateVersion {
    pub template: LaunchTemplateRef,
    pub name: String,
    pub default: bool,
    pub data: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub(crate) struct TemplateRecord {
    pub id: String,
    pub name: String,
    /// Version 1 first.
    pub versions: Vec<BTreeMap<String, String>>,
    pub default: u64,
    /// Before this, no call but CreateLaunchTemplate's name check knows the template.
    pub visible_at: Timestamp,
}

impl TemplateRecord {
    pub fn visible(&self, at: Timestamp) -> bool {
        at >= self.visible_at
    }

    pub fn has_version(&self, version: u64) -> bool {
        version >= 1 && version <= self.versions.len() as u64
    }

    pub fn described(&self) -> Vec<LaunchTemplateVersion> {
        (1..)
            .zip(&self.versions)
            .map(|(version, data)| LaunchTemplateVersion {
                template: LaunchTemplateRef {
                    id: self.id.clone(),
                    version,
                },
                name: self.name.clone(),
                default: version == self.default,
                data: data.clone(),
            })
            .collect()
    }
}

impl CreateLaunchTemplate {
    /// # Errors
    /// `InvalidLaunchTemplateName.MalformedException` for a name that is empty, longer than
    /// 128 characters, or holds a character other than letters, digits and `().-/_`.
    pub(crate) fn validate(&self) -> Result<(), Ec2Error> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "().-/_".contains(c);
        if self.name.is_empty()
            || self.name.chars().count() > MAX_NAME_LENGTH
            || !self.name.chars().all(allowed)
        {
            return Err(Ec2Error::template_name_malformed(&self.name));
        }
        Ok(())
    }
}
