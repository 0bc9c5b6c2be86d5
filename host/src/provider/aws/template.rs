//! The node's launch template: a fleet launches only from one, so what every instance of the
//! node shares (security groups, instance profile, key, root volume, metadata options, the
//! shutdown behaviour) lives in one template, made on the first fleet launch. Its name carries
//! a digest of its content, so a changed config makes a new template instead of launching
//! from a stale one, and a repeated create after a restart finds its own template
//! (`AlreadyExists` is success). What differs per pod (AMI, user data, types, subnets, tags)
//! travels in each fleet request.

use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::api::{Ec2Api, LaunchTemplateSpec, RootVolume};
use super::classify::provider_error;
use crate::config::AwsConfig;
use crate::provider::ProviderError;

/// EC2 allows 128 characters in a template name.
const MAX_NODE_PART: usize = 100;

pub(super) struct NodeTemplate {
    spec: LaunchTemplateSpec,
    /// Whether EC2 has the template, as far as this process knows.
    made: Mutex<bool>,
}

impl NodeTemplate {
    pub fn new(node: &str, config: &AwsConfig) -> NodeTemplate {
        let volume = &config.root_volume;
        let mut spec = LaunchTemplateSpec {
            name: String::new(),
            security_group_ids: config.security_group_ids.clone(),
            instance_profile: config.instance_profile.clone(),
            key_name: config.key_name.clone(),
            root_volume: Some(RootVolume {
                device_name: volume.device_name.clone(),
                size_gib: volume.size_gib,
                volume_type: volume.volume_type.clone(),
                encrypted: volume.encrypted,
            }),
        };
        let digest = Sha256::digest(format!("{spec:?}"));
        let hex: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
        let node: String = node
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "().-_".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .take(MAX_NODE_PART)
            .collect();
        spec.name = format!("orca-{node}-{hex}");
        NodeTemplate {
            spec,
            made: Mutex::new(false),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Makes the template unless this process already did. Launches wait for each other here,
    /// so a burst makes it once.
    pub async fn ensure(&self, api: &dyn Ec2Api) -> Result<(), ProviderError> {
        let mut made = self.made.lock().await;
        if *made {
            return Ok(());
        }
        match api.create_launch_template(&self.spec).await {
            Ok(()) => {}
            Err(error) if error.code.contains("AlreadyExists") => {}
            Err(error) => return Err(provider_error(error)),
        }
        tracing::info!(template = %self.spec.name, "launch template ready");
        *made = true;
        Ok(())
    }

    /// A fleet said the template does not exist (deleted by hand, or not yet visible): the
    /// next launch makes it again.
    pub async fn forget(&self) {
        *self.made.lock().await = false;
    }
}

/// Codes with which EC2 says a fleet's launch template does not exist.
pub(super) fn is_template_missing(code: &str) -> bool {
    code.starts_with("InvalidLaunchTemplateName.NotFound")
        || code.starts_with("InvalidLaunchTemplateId.NotFound")
        || code.starts_with("InvalidLaunchTemplateId.VersionNotFound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_follows_the_content_and_stays_within_ec2s_rules() {
        let config = AwsConfig::default();
        let first = NodeTemplate::new("orca-aws-node", &config);
        assert!(first.name().starts_with("orca-orca-aws-node-"));
        assert_eq!(
            first.name(),
            NodeTemplate::new("orca-aws-node", &config).name()
        );
        let changed = AwsConfig {
            key_name: Some("ops".into()),
            ..AwsConfig::default()
        };
        assert_ne!(
            first.name(),
            NodeTemplate::new("orca-aws-node", &changed).name()
        );
        let long = NodeTemplate::new(&"n:".repeat(200), &config);
        assert!(long.name().len() <= 128, "{}", long.name());
        assert!(
            long.name()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "().-_/".contains(c))
        );
    }
}
