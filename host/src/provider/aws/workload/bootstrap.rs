//! The instance's user data: `bootstrap.sh` (the logic, the same for every pod) with the pod's
//! data (containers, arguments, volume contents) rendered as shell words in front of its main
//! function. Comment lines and indentation of the template are dropped, as EC2 allows only
//! 16 KiB of user data, and so are its instance store's helpers when the configuration leaves
//! instance stores alone, its claims' helpers for pods without EBS or EFS claims and its metric
//! sampler for pods that do not publish their usage.

use std::fmt::Write as _;

use super::attachments::{Attachment, TooManyVolumes, attachments};
use super::docker_args::docker_args;
use super::log_shipping::LogShipping;
use super::metric_publishing::MetricPublishing;
use super::quote::quote;
use crate::config::InstanceStorePolicy;
use crate::workload::{ContainerSpec, EnvPart, EnvValue, VolumeSpec, WorkloadSpec};

/// The instance tag the bootstrap sets to the pod's exit code when the workload ends.
pub const TAG_EXIT_CODE: &str = "orca.research/exit-code";
/// The instance tag the bootstrap sets to the RFC 3339 time the workload ended.
pub const TAG_FINISHED_AT: &str = "orca.research/finished-at";
/// EC2's limit on user data, in bytes before base64 encoding.
pub const USER_DATA_LIMIT: usize = 16 * 1024;

const TEMPLATE: &str = include_str!("bootstrap.sh");
/// Where in the template the pod's data goes.
const WORKLOAD_MARKER: &str = "# @WORKLOAD@\n";
/// Where the instance store's helpers start: from there to the claims' helpers, the template is
/// only for [`InstanceStorePolicy::Raid0`].
const SCRATCH_MARKER: &str = "# @SCRATCH@\n";
/// Where the claims' helpers start: from there to the sampler, the template is only for pods
/// with EBS or EFS claims.
const CLAIMS_MARKER: &str = "# @CLAIMS@\n";
/// Where the metric sampler starts: from there to the pod's data, the template is only for pods
/// that publish their usage.
const SAMPLER_MARKER: &str = "# @SAMPLER@\n";

/// Why a workload cannot be turned into user data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error(
        "the instance's user data would be {bytes} bytes, over EC2's limit of {limit}; the \
         largest part is {largest}. orca carries environment values and configMap and secret \
         volume contents in the user data (no other volume kinds are supported to move large \
         configuration into), so shorten or drop some of them"
    )]
    TooLarge {
        bytes: usize,
        limit: usize,
        largest: String,
    },
    #[error("{place} contains a NUL byte, which cannot be passed to a container")]
    NulByte { place: String },
    #[error(transparent)]
    TooManyVolumes(#[from] TooManyVolumes),
}

/// What the configuration adds to every pod's user data: where containers' output and usage go,
/// and what the instance store is for. The default ships and publishes nothing and uses the
/// instance store (as `provider.aws` does by default).
#[derive(Debug, Clone, Copy, Default)]
pub struct UserDataOptions<'a> {
    /// Every container's output also to CloudWatch Logs (Docker's `awslogs` driver, one stream
    /// per container); without, Docker keeps it in rotated `json-file` logs. Either way it is
    /// copied to the serial console.
    pub shipping: Option<&'a LogShipping>,
    /// The instance samples its containers' and GPUs' usage every interval and publishes it to
    /// CloudWatch.
    pub publishing: Option<&'a MetricPublishing>,
    /// With [`InstanceStorePolicy::Raid0`], an instance with local NVMe instance-store disks
    /// makes them (striped into RAID0 when there are several, with xfs) the home of Docker's
    /// data root and the pod's emptyDir volumes, and the pod's ephemeral-storage capacity;
    /// with [`InstanceStorePolicy::None`] the user data has no such code.
    pub instance_store: InstanceStorePolicy,
}

/// The user data (a `#!/bin/bash` script for cloud-init) that runs `spec` on an instance, with
/// what `options` add (see [`UserDataOptions`]).
///
/// # Guarantees
/// - Every value from the pod reaches Docker as one argument, byte for byte; none is
///   interpreted by the shell.
/// - The result is at most [`USER_DATA_LIMIT`] bytes.
/// - With [`InstanceStorePolicy::Raid0`], a failure to set up the instance store never fails
///   the pod: the instance runs it on its root volume and the first container's log says which
///   step failed and why. With [`InstanceStorePolicy::None`], the script never touches the
///   instance store.
///
/// # Errors
/// [`BootstrapError::TooLarge`] past EC2's limit (naming the largest part);
/// [`BootstrapError::NulByte`] for a value bash cannot carry.
pub fn user_data(spec: &WorkloadSpec, options: &UserDataOptions) -> Result<String, BootstrapError> {
    check_nul(spec)?;
    let attachments = attachments(spec)?;
    let (head, tail) = TEMPLATE
        .split_once(WORKLOAD_MARKER)
        .expect("bootstrap.sh has the workload marker");
    let (head, sampler) = head
        .split_once(SAMPLER_MARKER)
        .expect("bootstrap.sh has the sampler marker");
    let (head, claims) = head
        .split_once(CLAIMS_MARKER)
        .expect("bootstrap.sh has the claims marker");
    let (head, scratch) = head
        .split_once(SCRATCH_MARKER)
        .expect("bootstrap.sh has the scratch marker");
    let mut parts = Vec::new();
    match options.instance_store {
        InstanceStorePolicy::Raid0 => {
            parts.push(("the instance store's helpers".to_owned(), minify(scratch)));
        }
        InstanceStorePolicy::None => {}
    }
    let claimed = (spec.volumes.iter())
        .any(|volume| matches!(volume, VolumeSpec::Ebs { .. } | VolumeSpec::Efs { .. }));
    if claimed {
        parts.push(("the claims' helpers".to_owned(), minify(claims)));
    }
    if options.publishing.is_some() {
        parts.push(("the metric sampler".to_owned(), minify(sampler)));
    }
    parts.extend(workload_parts(
        spec,
        &attachments,
        options.shipping,
        options.publishing,
    ));
    let mut script = minify(head);
    for (_, text) in &parts {
        script.push_str(text);
    }
    script.push_str(&minify(tail));
    if script.len() > USER_DATA_LIMIT {
        let largest = parts
            .iter()
            .max_by_key(|(_, text)| text.len())
            .map(|(label, text)| format!("{label} ({} bytes)", text.len()))
            .unwrap_or_default();
        return Err(BootstrapError::TooLarge {
            bytes: script.len(),
            limit: USER_DATA_LIMIT,
            largest,
        });
    }
    Ok(script)
}

/// The pod's data as shell assignments and functions, each with a label for size reports.
fn workload_parts(
    spec: &WorkloadSpec,
    attachments: &[Attachment],
    shipping: Option<&LogShipping>,
    publishing: Option<&MetricPublishing>,
) -> Vec<(String, String)> {
    let all: Vec<(&ContainerSpec, &str)> = spec
        .init_containers
        .iter()
        .map(|c| (c, if c.sidecar { "sidecar" } else { "init" }))
        .chain(spec.containers.iter().map(|c| (c, "main")))
        .collect();
    let list = |words: Vec<String>| words.join(" ");
    let mut pod = String::new();
    let _ = writeln!(pod, "orca_pod={}", quote(&spec.pod));
    let _ = writeln!(pod, "orca_restart_policy={}", spec.restart_policy.as_str());
    let _ = writeln!(pod, "orca_tag_exit_code={}", quote(TAG_EXIT_CODE));
    let _ = writeln!(pod, "orca_tag_finished_at={}", quote(TAG_FINISHED_AT));
    let default = spec.containers.first().map_or("", |c| c.name.as_str());
    let _ = writeln!(pod, "orca_default={}", quote(default));
    let _ = writeln!(
        pod,
        "orca_names=({})",
        list(all.iter().map(|(c, _)| quote(&c.name)).collect())
    );
    let _ = writeln!(
        pod,
        "orca_kinds=({})",
        list(all.iter().map(|(_, kind)| (*kind).to_owned()).collect())
    );
    let _ = writeln!(
        pod,
        "orca_images=({})",
        list(all.iter().map(|(c, _)| quote(&c.image)).collect())
    );
    let _ = writeln!(
        pod,
        "orca_pulls=({})",
        list(
            all.iter()
                .map(|(c, _)| c.pull_policy.as_str().to_owned())
                .collect()
        )
    );
    let mut parts = vec![("the pod's settings".to_owned(), pod)];
    if let Some(shipping) = shipping {
        parts.push(("the log options".to_owned(), log_lines(shipping, &all)));
    }
    if let Some(publishing) = publishing {
        parts.push(("the metric options".to_owned(), metric_lines(publishing)));
    }

    parts.push((
        "the volume helpers".to_owned(),
        "orca_volumes() {\n:\n".to_owned(),
    ));
    for volume in &spec.volumes {
        parts.push((
            format!("volume {:?}", volume.name()),
            volume_lines(volume, attachments),
        ));
    }
    parts.push((
        "the volume helpers".to_owned(),
        sub_path_lines(spec) + "}\n",
    ));

    for (index, (container, _)) in all.iter().enumerate() {
        let args = docker_args(container).join(" ");
        parts.push((
            format!("container {:?}", container.name),
            format!("orca_args_{index}() {{\norca_a=({args})\n}}\n"),
        ));
    }
    parts
}

/// `shipping`'s Docker options in place of the script's `json-file` ones, and each container's
/// stream in the order of `orca_names`, which the script passes with the instance's region.
fn log_lines(shipping: &LogShipping, all: &[(&ContainerSpec, &str)]) -> String {
    let options: Vec<String> = shipping.docker_options().iter().map(|o| quote(o)).collect();
    let streams: Vec<String> = all
        .iter()
        .map(|(container, _)| quote(&shipping.stream(&container.name)))
        .collect();
    format!(
        "orca_log=({})\norca_streams=({})\n",
        options.join(" "),
        streams.join(" ")
    )
}

/// What the script's sampler publishes, and how often; it runs only when these are set.
fn metric_lines(publishing: &MetricPublishing) -> String {
    format!(
        "orca_metrics_namespace={}\norca_metrics_interval={}\norca_metrics_pod_uid={}\n",
        quote(&publishing.namespace),
        publishing.interval_seconds,
        quote(&publishing.pod_uid)
    )
}

/// The lines of `orca_volumes` that create one volume on the instance.
fn volume_lines(volume: &VolumeSpec, attachments: &[Attachment]) -> String {
    let name = quote(volume.name());
    match volume {
        VolumeSpec::Ebs { volume: ebs, .. } => {
            let Some(attachment) = attachments
                .iter()
                .find(|attachment| attachment.volume_id == ebs.volume_id)
            else {
                return String::new();
            };
            if attachment.volume == volume.name() {
                let mode = if attachment.read_only { "ro" } else { "rw" };
                format!(
                    "orca_ebs {name} {} {} {} {mode}\n",
                    quote(&attachment.volume_id),
                    attachment.letter,
                    attachment.fs_type.as_str()
                )
            } else {
                // Another of the pod's volumes of the same EBS volume: the same filesystem.
                format!("orca_bind {} {name}\n", quote(&attachment.volume))
            }
        }
        VolumeSpec::Efs { volume: efs, .. } => {
            let mode = if efs.read_only { "ro" } else { "rw" };
            format!(
                "orca_efs {name} {} {} {} {mode}\n",
                quote(&efs.file_system_id),
                quote(&efs.path),
                quote(efs.access_point.as_deref().unwrap_or(""))
            )
        }
        VolumeSpec::Directory { .. } => format!("orca_dir {name}\n"),
        VolumeSpec::Memory { size_bytes, .. } => {
            let size = size_bytes.map_or_else(|| "50%".to_owned(), |bytes| bytes.to_string());
            format!("orca_tmpfs {name} {size}\n")
        }
        VolumeSpec::Files { files, .. } => {
            let mut lines = format!("orca_dir {name}\n");
            for file in files {
                let _ = writeln!(
                    lines,
                    "orca_file {name} {} {:04o} {}",
                    quote(&file.path),
                    file.mode,
                    quote(&base64(file.content.as_bytes()))
                );
            }
            lines
        }
    }
}

/// Directories for `subPath` mounts of emptyDir and writable EBS volumes, which the kubelet
/// creates too (after the volumes are mounted).
fn sub_path_lines(spec: &WorkloadSpec) -> String {
    let mut lines = String::new();
    let containers = spec.init_containers.iter().chain(&spec.containers);
    for mount in containers.flat_map(|c| &c.mounts) {
        // The kubelet makes a missing subPath of a writable volume.
        let writable = spec.volumes.iter().any(|v| {
            v.name() == mount.volume
                && match v {
                    VolumeSpec::Directory { .. } | VolumeSpec::Memory { .. } => true,
                    VolumeSpec::Ebs { volume, .. } => !volume.read_only,
                    VolumeSpec::Efs { volume, .. } => !volume.read_only,
                    VolumeSpec::Files { .. } => false,
                }
        });
        if let (true, Some(sub_path)) = (writable, &mount.sub_path) {
            let _ = writeln!(
                lines,
                "orca_dir {}",
                quote(&format!("{}/{sub_path}", mount.volume))
            );
        }
    }
    lines
}

/// Rejects text bash cannot carry, naming where it is.
fn check_nul(spec: &WorkloadSpec) -> Result<(), BootstrapError> {
    let nul = |place: String, text: &str| {
        if text.contains('\0') {
            Err(BootstrapError::NulByte { place })
        } else {
            Ok(())
        }
    };
    let value_nul = |place: String, value: &EnvValue| match value
        .parts()
        .iter()
        .any(|part| matches!(part, EnvPart::Literal(text) if text.contains('\0')))
    {
        true => Err(BootstrapError::NulByte { place }),
        false => Ok(()),
    };
    for container in spec.init_containers.iter().chain(&spec.containers) {
        let at = |what: &str| format!("container {:?}: {what}", container.name);
        nul(at("image"), &container.image)?;
        for (name, value) in &container.env {
            nul(at(&format!("env {name}")), name)?;
            value_nul(at(&format!("env {name}")), value)?;
        }
        for word in &container.command {
            value_nul(at("command"), word)?;
        }
        for word in &container.args {
            value_nul(at("args"), word)?;
        }
        nul(
            at("workingDir"),
            container.working_dir.as_deref().unwrap_or(""),
        )?;
        nul(
            at("securityContext"),
            container.user.as_deref().unwrap_or(""),
        )?;
        for mount in &container.mounts {
            let place = at(&format!("volumeMount {}", mount.volume));
            nul(place.clone(), &mount.container_path)?;
            nul(place, mount.sub_path.as_deref().unwrap_or(""))?;
        }
    }
    for volume in &spec.volumes {
        if let VolumeSpec::Files { name, files } = volume {
            for file in files {
                nul(format!("volume {name:?}: {}", file.path), &file.path)?;
            }
        }
    }
    Ok(())
}

/// The template without comment lines, blank lines and indentation (the shebang is kept).
fn minify(template: &str) -> String {
    let mut out = String::with_capacity(template.len() / 2);
    for (number, line) in template.lines().enumerate() {
        let line = line.trim_start();
        let keep =
            (number == 0 && line.starts_with("#!")) || !(line.is_empty() || line.starts_with('#'));
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Standard base64 with padding, for file contents the bootstrap decodes with `base64 -d`.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod runs;
#[cfg(test)]
mod tests;
