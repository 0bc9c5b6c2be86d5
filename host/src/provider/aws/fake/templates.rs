//! The fake's launch templates: each keeps its versions' settings, so orca's verification
//! meets what EC2 would show; someone else's template (or version) can be put under any name.

use super::State;
use crate::provider::aws::api::{
    ApiError, LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, TemplateSettings,
};

/// A launch template: its versions' settings, version 1 first.
pub(super) struct Template {
    name: String,
    id: String,
    versions: Vec<TemplateSettings>,
    default: u64,
}

impl State {
    /// A new template named `name` holding `settings` as version 1, the default; its id.
    pub(super) fn put_template(&mut self, name: &str, settings: TemplateSettings) -> String {
        self.serial += 1;
        let id = format!("lt-{:017x}", self.serial);
        self.templates.push(Template {
            name: name.to_owned(),
            id: id.clone(),
            versions: vec![settings],
            default: 1,
        });
        id
    }

    /// A new version of the template named `name`, made the default; its number (0: no such
    /// template).
    pub(super) fn add_template_version(&mut self, name: &str, settings: TemplateSettings) -> u64 {
        let Some(template) = self.templates.iter_mut().find(|t| t.name == name) else {
            return 0;
        };
        template.versions.push(settings);
        template.default = template.versions.len() as u64;
        template.default
    }

    /// `CreateLaunchTemplate`.
    pub(super) fn create_template(
        &mut self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        if self.templates.iter().any(|t| t.name == spec.name) {
            return Err(ApiError::service(
                "InvalidLaunchTemplateName.AlreadyExistsException",
                format!("Launch template name already in use: {}", spec.name),
            ));
        }
        let id = self.put_template(&spec.name, spec.settings());
        Ok(LaunchTemplateRef { id, version: 1 })
    }

    /// `DescribeLaunchTemplateVersions` by name.
    pub(super) fn template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        let template = self
            .templates
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                ApiError::service(
                    "InvalidLaunchTemplateName.NotFoundException",
                    format!(
                        "The specified launch template, with template name {name}, does not exist."
                    ),
                )
            })?;
        Ok((1..)
            .zip(&template.versions)
            .map(|(version, settings)| LaunchTemplateVersion {
                template: LaunchTemplateRef {
                    id: template.id.clone(),
                    version,
                },
                default: version == template.default,
                settings: settings.clone(),
            })
            .collect())
    }

    /// What `CreateFleet` says, as a whole, of a template version it cannot launch from.
    pub(super) fn check_template(&self, named: &LaunchTemplateRef) -> Result<(), ApiError> {
        let Some(template) = self.templates.iter().find(|t| t.id == named.id) else {
            return Err(ApiError::service(
                "InvalidLaunchTemplateId.NotFound",
                format!(
                    "The specified launch template, with template ID {}, does not exist.",
                    named.id
                ),
            ));
        };
        if named.version == 0 || named.version > template.versions.len() as u64 {
            return Err(ApiError::service(
                "InvalidLaunchTemplateId.VersionNotFound",
                format!(
                    "Could not find the specified version {} for the launch template with ID {}.",
                    named.version, named.id
                ),
            ));
        }
        Ok(())
    }
}
