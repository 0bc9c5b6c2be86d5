//! The node's launch template: a fleet launches only from one, so what every instance of the
//! node shares (security groups, instance profile, key, root volume, metadata options, the
//! shutdown behaviour) lives in one template, made on the first fleet launch. Its name carries
//! the cluster's id and a digest of all of that content, so a changed config makes a new
//! template instead of launching from a stale one, and two clusters in one account never
//! share one.
//!
//! # Launched only from what orca made or verified
//! A name proves nothing: anyone may make a template under orca's name, or add a version to
//! it (with termination protection, say). Fleets name the template by id and exact version,
//! never `$Latest` or `$Default`: the version `CreateLaunchTemplate` answered, or, when the
//! name exists already (an earlier process made it, or someone else did), the oldest version
//! whose content `DescribeLaunchTemplateVersions` shows equal to orca's, setting by setting
//! (versions never change once made). When none is, orca launches nothing from it: the pod
//! fails with the template and each differing setting named, and the node's log says the
//! same. Making a fresh, uniquely named template instead would need finding it again after a
//! restart (by a tag anyone can copy, so verified all the same), would leave one template per
//! process behind, and would change the request a restarted process replays (see `fleet.rs`).
//! What differs per pod (AMI, user data, types, subnets, tags) travels in each fleet request.

mod verify;

use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::api::{
    ApiError, Ec2Api, LaunchTemplateRef, LaunchTemplateSpec, MetadataOptions, RootVolume,
    ShutdownBehaviour,
};
use super::classify::class_of;
use crate::config::AwsConfig;
use crate::provider::{ErrorClass, ProviderError};

pub(super) use self::verify::{Difference, sorted_list};
use self::verify::{Verdict, verdict};

/// EC2 allows 128 characters in a template name.
const MAX_NODE_PART: usize = 100;

/// Why the node's template cannot be launched from.
#[derive(Debug, thiserror::Error)]
pub(super) enum TemplateError {
    #[error("creating the launch template {name} failed: {source}")]
    CreateFailed {
        name: String,
        #[source]
        source: ApiError,
    },
    #[error("reading the versions of the launch template {name} failed: {source}")]
    DescribeFailed {
        name: String,
        #[source]
        source: ApiError,
    },
    /// EC2 says the name is taken but shows no template of that name yet (eventual
    /// consistency).
    #[error(
        "EC2 says a launch template named {name} exists but does not show it yet; asking again"
    )]
    NotVisible { name: String },
    #[error(
        "the launch template {name} ({id}) was not made by orca for this node: none of its \
         {versions} version(s) holds what orca puts in it; version {version}{default} has {}; \
         orca launches only from a version it made or verified: delete the template \
         (aws ec2 delete-launch-template --launch-template-name {name}) and orca makes its own",
        differences.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        default = if *default { " (its default)" } else { "" }
    )]
    NotOrcas {
        name: String,
        id: String,
        /// The version the differences are against: the default one.
        version: u64,
        default: bool,
        versions: usize,
        differences: Vec<Difference>,
    },
}

impl From<TemplateError> for ProviderError {
    fn from(error: TemplateError) -> ProviderError {
        let (class, code) = match &error {
            TemplateError::CreateFailed { source, .. }
            | TemplateError::DescribeFailed { source, .. } => {
                (class_of(source), source.code.clone())
            }
            TemplateError::NotVisible { .. } => {
                (ErrorClass::Transient, "LaunchTemplateNotVisible".to_owned())
            }
            TemplateError::NotOrcas { .. } => {
                (ErrorClass::Permanent, "LaunchTemplateMismatch".to_owned())
            }
        };
        ProviderError {
            class,
            code,
            message: error.to_string(),
        }
    }
}

pub(super) struct NodeTemplate {
    spec: LaunchTemplateSpec,
    /// The version this process launches from, once made or verified.
    ready: Mutex<Option<LaunchTemplateRef>>,
}

impl NodeTemplate {
    pub fn new(node: &str, cluster_id: &str, config: &AwsConfig) -> NodeTemplate {
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
                delete_on_termination: true,
            }),
            metadata: MetadataOptions {
                tokens_required: true,
                endpoint_enabled: true,
                hop_limit: 1,
            },
            // The bootstrap powers off when the workload ends: that ends the instance.
            shutdown: ShutdownBehaviour::Terminate,
        };
        // Every setting, and the cluster: two clusters in one account never share a name.
        let mut hasher = Sha256::new();
        hasher.update(format!("cluster-id={cluster_id}\n"));
        for (setting, value) in spec.settings() {
            hasher.update(format!("{setting}={value}\n"));
        }
        let digest = hasher.finalize();
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
            ready: Mutex::new(None),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The exact version to launch from: made, or found made and verified, unless this
    /// process has it already. Launches wait for each other here, so a burst makes it once.
    ///
    /// # Errors
    /// The calls failed (classified as their EC2 error is), EC2 does not show the template
    /// yet ([`TemplateError::NotVisible`], transient), or the name holds no version with
    /// orca's content ([`TemplateError::NotOrcas`], permanent, naming the template and each
    /// differing setting).
    pub async fn ensure(&self, api: &dyn Ec2Api) -> Result<LaunchTemplateRef, TemplateError> {
        let mut ready = self.ready.lock().await;
        if let Some(version) = ready.as_ref() {
            return Ok(version.clone());
        }
        let name = &self.spec.name;
        let version = match api.create_launch_template(&self.spec).await {
            Ok(made) => {
                tracing::info!(template = %name, id = %made.id, version = made.version, "launch template made");
                made
            }
            Err(error) if error.code.contains("AlreadyExists") => self.verify(api).await?,
            Err(source) => {
                return Err(TemplateError::CreateFailed {
                    name: name.clone(),
                    source,
                });
            }
        };
        *ready = Some(version.clone());
        Ok(version)
    }

    /// The oldest version of the template already under the node's name that holds exactly
    /// what orca would put in it.
    async fn verify(&self, api: &dyn Ec2Api) -> Result<LaunchTemplateRef, TemplateError> {
        let name = &self.spec.name;
        let versions = match api.describe_launch_template_versions(name).await {
            Ok(versions) => versions,
            Err(error) if is_template_missing(&error.code) => {
                return Err(TemplateError::NotVisible { name: name.clone() });
            }
            Err(source) => {
                return Err(TemplateError::DescribeFailed {
                    name: name.clone(),
                    source,
                });
            }
        };
        match verdict(&self.spec.settings(), &versions) {
            Verdict::Use(found) => {
                tracing::info!(template = %name, id = %found.id, version = found.version, "launch template found under the node's name and verified: launching from that version");
                Ok(found)
            }
            Verdict::NoneShown => Err(TemplateError::NotVisible { name: name.clone() }),
            Verdict::NotOrcas {
                compared,
                differences,
            } => {
                let error = TemplateError::NotOrcas {
                    name: name.clone(),
                    id: compared.template.id.clone(),
                    version: compared.template.version,
                    default: compared.default,
                    versions: versions.len(),
                    differences,
                };
                tracing::error!(template = %name, %error, "refusing to launch from a launch template orca did not make");
                Err(error)
            }
        }
    }

    /// A fleet said the template does not exist (deleted by hand, or not yet visible): the
    /// next launch makes it again, or verifies what holds the name then.
    pub async fn forget(&self) {
        *self.ready.lock().await = None;
    }
}

/// Codes with which EC2 says a fleet's launch template does not exist.
pub(super) fn is_template_missing(code: &str) -> bool {
    code.starts_with("InvalidLaunchTemplateName.NotFound")
        || code.starts_with("InvalidLaunchTemplateId.NotFound")
        || code.starts_with("InvalidLaunchTemplateId.VersionNotFound")
}

#[cfg(test)]
mod tests;
