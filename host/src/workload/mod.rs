//! The Kubernetes half of a launch: a pod resolved, once, into what its instance runs
//! ([`workload_spec`]), and the whole of what a provider is given to launch it
//! ([`launch_request`]). Providers know nothing of pods: each turns a [`WorkloadSpec`] into
//! whatever runs it (the aws provider: user data, see `provider::aws::workload`).
//!
//! # What is resolved
//!
//! - Each container: its image and pull policy, command and args with `$(VAR)` expanded,
//!   working directory, environment, CPU and memory limits, `nvidia.com/gpu`,
//!   `runAsUser`/`runAsGroup` and `privileged`; init containers apart, sidecars (init
//!   containers with `restartPolicy: Always`) marked.
//! - The environment as the kubelet resolves it, ConfigMaps and Secrets read from the
//!   apiserver with orca's own client, each once per launch (see [`env`](mod@env)); downward
//!   API fields, those only the instance knows (its IP, CPUs) left for it to fill in.
//! - The pod's volumes, configMap and secret contents included (see [`volumes`]).
//!
//! Not honoured on instances: probes, lifecycle hooks, `activeDeadlineSeconds`, service-link
//! environment variables, ephemeral containers, and the service-account token (instances are
//! outside the cluster network).
//!
//! # Caveats
//! The resolved values, Secret values included, are handed to the provider whole, which
//! carries them to the instance (the aws provider: in the user data, which has its own
//! caveats).

pub mod env;
mod fields;
mod kube_source;
mod request;
pub(crate) mod source;
mod spec;
mod value;
pub mod volumes;

pub use env::EnvError;
pub use fields::FieldError;
pub use kube_source::KubeEnvSource;
pub use request::{AMI_ANNOTATION, RequestError, launch_request};
pub use source::{EnvSource, EnvSourceError, NoObjects, ObjectData, ObjectKind};
pub use spec::{
    ContainerSpec, PullPolicy, RestartPolicy, WorkloadError, WorkloadSpec, WorkloadWarning,
    workload_spec,
};
pub use value::{EnvPart, EnvValue, InstanceFact};
pub use volumes::{EbsVolume, EfsVolume, FsType, Mount, VolumeError, VolumeFile, VolumeSpec};

#[cfg(test)]
pub(crate) use request::testing;
