//! What an instance runs for a pod, resolved at launch: each container with its image, command
//! line and environment, and the pod's volumes. Everything the cluster knows is settled here;
//! only facts of the instance itself (its IP, CPUs) are left for the instance to fill in.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde::{Deserialize, Serialize};

use super::env::{EnvError, ResolvedEnv, resolve_env};
use super::fields::{millis, units};
use super::source::{EnvSource, Objects};
use super::value::{EnvValue, expand};
use super::volumes::{Mount, VolumeError, VolumeSpec, Volumes, container_mounts, plan_volumes};
use crate::config::is_dns_label;

/// The extended resource that asks for NVIDIA GPUs.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// A pod resolved for an instance: nothing in it refers to the cluster any more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadSpec {
    /// `namespace/name`, for the script's own messages.
    pub pod: String,
    pub restart_policy: RestartPolicy,
    /// Run in order before `containers`; sidecars among them keep running beside them.
    pub init_containers: Vec<ContainerSpec>,
    /// Run together; the pod ends when all have ended.
    pub containers: Vec<ContainerSpec>,
    pub volumes: Vec<VolumeSpec>,
    /// Whether any container asks for `nvidia.com/gpu` (the instance then needs GPUs its
    /// containers can use).
    pub gpu: bool,
    /// What the kubelet would report as Warning Events; orca reports them on the pod when it
    /// launches it (the pod launches all the same).
    pub warnings: Vec<WorkloadWarning>,
}

/// Something of the pod's spec that its instance does not do as a node would, told as a
/// Warning Event on the pod; the pod launches all the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkloadWarning {
    /// `imagePullSecrets` are set: instances pull with their own credentials.
    PullSecretsUnused,
    /// `envFrom` keys that are not valid environment variable names, skipped as the kubelet
    /// skips them.
    InvalidEnvNames {
        container: String,
        keys: Vec<String>,
    },
}

impl WorkloadWarning {
    /// The Event's reason: the kubelet's own where it has one.
    pub fn reason(&self) -> &'static str {
        match self {
            WorkloadWarning::PullSecretsUnused => "ImagePullSecretsUnused",
            WorkloadWarning::InvalidEnvNames { .. } => "InvalidEnvironmentVariableNames",
        }
    }
}

impl std::fmt::Display for WorkloadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadWarning::PullSecretsUnused => f.write_str(
                "imagePullSecrets are not used on orca nodes; instances pull images with their \
                 own credentials (the instance profile, for ECR)",
            ),
            WorkloadWarning::InvalidEnvNames { container, keys } => write!(
                f,
                "container {container:?}: envFrom keys [{}] were skipped since they are not \
                 valid environment variable names",
                keys.join(", ")
            ),
        }
    }
}

/// The pod's `restartPolicy` (Kubernetes' default is `Always`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

/// A container's `imagePullPolicy`, defaulted as the apiserver does when unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }

    /// `Always` for `:latest` or an untagged image, else `IfNotPresent`.
    fn default_for(image: &str) -> PullPolicy {
        if image.contains('@') {
            return PullPolicy::IfNotPresent;
        }
        let last = image.rsplit('/').next().unwrap_or(image);
        match last.split_once(':') {
            Some((_, "latest")) | None => PullPolicy::Always,
            Some(_) => PullPolicy::IfNotPresent,
        }
    }
}

/// One container as the instance will run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// A DNS label, so safe in names and paths on the instance.
    pub name: String,
    pub image: String,
    pub pull_policy: PullPolicy,
    /// An init container with `restartPolicy: Always`: started in order, kept running, and
    /// stopped once the regular containers have ended (Kubernetes sidecars).
    pub sidecar: bool,
    /// Replaces the image's entrypoint when not empty; `$(VAR)` already expanded.
    pub command: Vec<EnvValue>,
    /// Replaces the image's command when not empty (or when `command` is set).
    pub args: Vec<EnvValue>,
    pub working_dir: Option<String>,
    pub env: Vec<(String, EnvValue)>,
    pub cpu_limit_millis: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    /// Asks for `nvidia.com/gpu`; gets every GPU of the instance.
    pub gpus: bool,
    /// `runAsUser[:runAsGroup]` from the container's or the pod's security context.
    pub user: Option<String>,
    pub privileged: bool,
    pub mounts: Vec<Mount>,
}

/// Why a pod cannot be run on an instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("pod has no spec")]
    NoSpec,
    #[error("pod has no containers")]
    NoContainers,
    #[error("container {container:?} has no image")]
    NoImage { container: String },
    #[error("container name {container:?} is not a DNS label (a-z, 0-9 and -)")]
    BadContainerName { container: String },
    #[error("container {container:?}: {field} {value:?} is not a usable quantity")]
    BadQuantity {
        container: String,
        field: &'static str,
        value: String,
    },
    #[error(
        "container {container:?}: restartPolicy {value:?} is not supported; a container's \
         restartPolicy may only be Always, on an init container (a sidecar)"
    )]
    BadContainerRestartPolicy { container: String, value: String },
    #[error("restartPolicy {value:?} is not one of Always, OnFailure or Never")]
    BadRestartPolicy { value: String },
    #[error(
        "container {container:?}: imagePullPolicy {value:?} is not one of Always, \
         IfNotPresent or Never"
    )]
    BadPullPolicy { container: String, value: String },
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

impl WorkloadError {
    /// Whether launching again later may work with the pod unchanged: a ConfigMap, Secret or
    /// key it needs may yet be created (the kubelet waits for them), or the apiserver may answer.
    /// Everything else is about the pod itself.
    pub fn may_resolve_later(&self) -> bool {
        match self {
            WorkloadError::Env(error) => error.may_resolve_later(),
            WorkloadError::Volume(error) => error.may_resolve_later(),
            _ => false,
        }
    }
}

/// Resolves everything the instance needs to run the pod: environments (ConfigMaps and
/// Secrets read through `env`, each once), command lines with `$(VAR)` expanded, limits,
/// volumes with their file contents.
///
/// # Errors
/// [`WorkloadError`] for a pod orca cannot run (see [`WorkloadError::may_resolve_later`] for
/// which may work on a later try).
pub async fn workload_spec(pod: &Pod, env: &dyn EnvSource) -> Result<WorkloadSpec, WorkloadError> {
    let spec = pod.spec.as_ref().ok_or(WorkloadError::NoSpec)?;
    if spec.containers.is_empty() {
        return Err(WorkloadError::NoContainers);
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut objects = Objects::new(env, namespace);
    let volumes = plan_volumes(pod, &mut objects).await?;
    let restart_policy = match spec.restart_policy.as_deref() {
        None | Some("Always") => RestartPolicy::Always,
        Some("OnFailure") => RestartPolicy::OnFailure,
        Some("Never") => RestartPolicy::Never,
        Some(other) => {
            return Err(WorkloadError::BadRestartPolicy {
                value: other.to_owned(),
            });
        }
    };
    let mut warnings = Vec::new();
    if spec
        .image_pull_secrets
        .as_ref()
        .is_some_and(|s| !s.is_empty())
    {
        warnings.push(WorkloadWarning::PullSecretsUnused);
    }
    let mut init_containers = Vec::new();
    let mut containers = Vec::new();
    let all = (spec.init_containers.iter().flatten().map(|c| (c, true)))
        .chain(spec.containers.iter().map(|c| (c, false)));
    for (container, init) in all {
        let resolved = resolve_env(pod, container, &mut objects).await?;
        if !resolved.skipped_keys.is_empty() {
            warnings.push(WorkloadWarning::InvalidEnvNames {
                container: container.name.clone(),
                keys: resolved.skipped_keys.clone(),
            });
        }
        let built = container_spec(spec, container, init, resolved, &volumes)?;
        if init {
            init_containers.push(built);
        } else {
            containers.push(built);
        }
    }
    let gpu = init_containers.iter().chain(&containers).any(|c| c.gpus);
    Ok(WorkloadSpec {
        pod: format!(
            "{namespace}/{}",
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        restart_policy,
        init_containers,
        containers,
        volumes: volumes.specs,
        gpu,
        warnings,
    })
}

/// One container resolved: its name checked, image and pull policy, sidecar or not, command
/// and args expanded from its environment, limits, user and mounts.
fn container_spec(
    pod: &PodSpec,
    container: &Container,
    init: bool,
    env: ResolvedEnv,
    volumes: &Volumes,
) -> Result<ContainerSpec, WorkloadError> {
    let name = &container.name;
    if !is_dns_label(name) {
        return Err(WorkloadError::BadContainerName {
            container: name.clone(),
        });
    }
    let (image, pull_policy) = image_of(container)?;
    let sidecar = is_sidecar(container, init)?;
    // The kubelet expands $(VAR) in command and args from the container's final environment.
    let expand_all = |words: &Option<Vec<String>>| -> Vec<EnvValue> {
        words
            .iter()
            .flatten()
            .map(|word| expand(word, |var| env.lookup(var)))
            .collect()
    };
    let command = expand_all(&container.command);
    let args = expand_all(&container.args);
    let limits = limits_of(container)?;
    let security = container.security_context.as_ref();
    Ok(ContainerSpec {
        name: name.clone(),
        image,
        pull_policy,
        sidecar,
        command,
        args,
        working_dir: container.working_dir.clone().filter(|w| !w.is_empty()),
        env: env.vars,
        cpu_limit_millis: limits.cpu_millis,
        memory_limit_bytes: limits.memory_bytes,
        gpus: limits.gpus,
        user: user_of(pod, container),
        privileged: security.and_then(|s| s.privileged) == Some(true),
        mounts: container_mounts(container, volumes)?,
    })
}

/// The container's image, which it must name, and its pull policy (the kubelet's default
/// for the image when unset).
fn image_of(container: &Container) -> Result<(String, PullPolicy), WorkloadError> {
    let name = &container.name;
    let image = container
        .image
        .clone()
        .filter(|image| !image.trim().is_empty())
        .ok_or_else(|| WorkloadError::NoImage {
            container: name.clone(),
        })?;
    let pull_policy = match container.image_pull_policy.as_deref() {
        None | Some("") => PullPolicy::default_for(&image),
        Some("Always") => PullPolicy::Always,
        Some("IfNotPresent") => PullPolicy::IfNotPresent,
        Some("Never") => PullPolicy::Never,
        Some(other) => {
            return Err(WorkloadError::BadPullPolicy {
                container: name.clone(),
                value: other.to_owned(),
            });
        }
    };
    Ok((image, pull_policy))
}

/// Whether the container is a sidecar: an init container with `restartPolicy: Always`, the
/// only container restart policy there is.
fn is_sidecar(container: &Container, init: bool) -> Result<bool, WorkloadError> {
    match container.restart_policy.as_deref() {
        None => Ok(false),
        Some("Always") if init => Ok(true),
        Some(other) => Err(WorkloadError::BadContainerRestartPolicy {
            container: container.name.clone(),
            value: other.to_owned(),
        }),
    }
}

/// What a container's resources limit it to.
struct Limits {
    cpu_millis: Option<u64>,
    memory_bytes: Option<u64>,
    /// Whether it asks for a GPU, by limit or request.
    gpus: bool,
}

/// The container's CPU and memory limits, and whether it asks for `nvidia.com/gpu`.
fn limits_of(container: &Container) -> Result<Limits, WorkloadError> {
    let resources = container.resources.as_ref();
    let limit = |resource: &str| resources.and_then(|r| r.limits.as_ref()?.get(resource));
    let request = |resource: &str| resources.and_then(|r| r.requests.as_ref()?.get(resource));
    let quantity = |field: &'static str, text: &str, parse: fn(&str) -> Option<u64>| {
        parse(text).ok_or_else(|| WorkloadError::BadQuantity {
            container: container.name.clone(),
            field,
            value: text.to_owned(),
        })
    };
    let cpu_millis = limit("cpu")
        .map(|q| quantity("limits.cpu", &q.0, millis))
        .transpose()?;
    let memory_bytes = limit("memory")
        .map(|q| quantity("limits.memory", &q.0, units))
        .transpose()?;
    let gpus = limit(GPU_RESOURCE)
        .or_else(|| request(GPU_RESOURCE))
        .map(|q| quantity("limits.nvidia.com/gpu", &q.0, units))
        .transpose()?
        .is_some_and(|count| count > 0);
    Ok(Limits {
        cpu_millis,
        memory_bytes,
        gpus,
    })
}

/// The user the container runs as, `uid` or `uid:gid`, the container's security context
/// before the pod's.
fn user_of(pod: &PodSpec, container: &Container) -> Option<String> {
    let pod_security = pod.security_context.as_ref();
    let security = container.security_context.as_ref();
    let run_as_user = security
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_security.and_then(|s| s.run_as_user));
    let run_as_group = security
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_security.and_then(|s| s.run_as_group));
    run_as_user.map(|uid| match run_as_group {
        Some(gid) => format!("{uid}:{gid}"),
        None => uid.to_string(),
    })
}

#[cfg(test)]
mod tests;
