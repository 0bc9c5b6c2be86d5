//! What runs on a pod's instance: the user data that runs the pod, resolved at launch
//! ([`crate::workload::WorkloadSpec`]), with Docker ([`user_data`]), and reading its output
//! back from the console ([`console`]).
//!
//! # What the AMI must provide
//!
//! The user data is a `#!/bin/bash` script that cloud-init runs once at first boot. It needs:
//!
//! - **cloud-init**, **bash** 4.3 or later and GNU coreutils (`base64`, `date`, `df`, `nproc`),
//!   `sed` and `awk`;
//! - **Docker** (the daemon may be stopped; the script starts it with `systemctl`);
//! - **curl**, for the instance metadata service (IMDSv2 only: a session token first; a hop
//!   limit of 1 is enough, since containers use the host's network);
//! - the **AWS CLI v2** and an **instance profile** allowed `ec2:CreateTags` on the instance
//!   itself, to tag it with [`TAG_EXIT_CODE`] and [`TAG_FINISHED_AT`] when the workload ends
//!   (without it the exit code is still on the console, which orca also reads);
//! - with `provider.aws.logs`: Docker 20.10 or later (its dual-logging cache lets `docker logs`
//!   read a container that logs to CloudWatch), and an instance profile also allowed
//!   `logs:CreateLogStream` and `logs:PutLogEvents` on the group
//!   (statement `ShipTheContainersLogs` of `deploy/iam/workload.json`);
//! - with `provider.aws.metrics`: **cgroup v2** (Amazon Linux 2023 has it), where the bootstrap
//!   reads each container's `cpu.stat`, `memory.current` and `memory.stat` under
//!   `/sys/fs/cgroup/system.slice/docker-<full id>.scope` (Docker's systemd cgroup driver), or
//!   else `/sys/fs/cgroup/docker/<full id>` (its cgroupfs driver); `nvidia-smi` on GPU AMIs
//!   for the GPU figures (without it they are left out); and an instance profile also allowed
//!   `cloudwatch:PutMetricData` for the namespace (statement `PublishThePodsMetrics` of
//!   `deploy/iam/workload.json`), which the AWS CLI v2 uses;
//! - for pods with EBS claims: `blkid` (util-linux), `mkfs.ext4` / `mkfs.xfs` (e2fsprogs,
//!   xfsprogs) for the filesystem a blank volume gets, and the kernel's view of the volume in
//!   `/sys/block/nvme*/device/serial` (Nitro) or as `/dev/xvdX` (Xen);
//! - on instance types with NVMe instance-store disks, with `provider.aws.instanceStorePolicy`
//!   `RAID0` (the default): `mkfs.xfs` (xfsprogs), `mdadm` where there are several disks,
//!   the disks' model in `/sys/block/nvme*/device/model`, and Docker's data root at
//!   `/var/lib/docker` with `docker.socket` and `docker` units (without them the pod runs on
//!   the root volume, its log saying why);
//! - for pods that ask for `nvidia.com/gpu`: the NVIDIA driver and container toolkit, so that
//!   `docker run --gpus all` works;
//! - for `kubectl exec`: the **SSM agent**, running and registered with Systems Manager (an
//!   instance profile allowed what `AmazonSSMManagedInstanceCore` allows, and a route to the
//!   `ssm`, `ssmmessages` and `ec2messages` endpoints); orca runs `docker exec` through Run
//!   Command (see [`crate::provider::aws::exec`]). Without it, exec fails naming the cause and
//!   nothing else changes;
//! - for private registries: credentials Docker finds on its own (e.g. the Amazon ECR credential
//!   helper with the instance profile); `imagePullSecrets` are not used.
//!
//! Amazon's ECS-optimized Amazon Linux 2023 AMI has all of this (the ECS GPU-optimized variant
//! for GPU pods); add the AWS CLI where it is missing. orca launches instances to terminate on
//! shutdown, and the script powers the instance off when the workload ends.
//!
//! # How a pod runs
//!
//! - Init containers run one at a time, in order; each must exit 0. Sidecars (init containers
//!   with `restartPolicy: Always`) start in order and keep running until the regular
//!   containers have ended, then are stopped.
//! - Regular containers run together, with Docker (`docker create` + `start`), as
//!   `orca-<container>`, on the host's network (the pod IP is the instance's IP), with their
//!   image, command, args, working directory, environment, CPU and memory limits,
//!   `runAsUser`/`runAsGroup` and `privileged`. `imagePullPolicy` is honoured (five pull tries).
//! - `restartPolicy` is honoured: `Never` runs each container once; `OnFailure` restarts a
//!   failed one, `Always` any one that ends, with the kubelet's backoff (10 s doubling to
//!   5 min). So a pod with `Always` (Kubernetes' default) runs until it is deleted.
//! - The pod's exit code is the first non-zero exit code among the regular containers, in
//!   the order they ended, else 0; a failed init container's code when one fails. 125 means
//!   Docker could not run a container (image pull, missing Docker, volume setup); the
//!   container's log says why.
//! - Each container's output goes to the serial console as `orca[<container>] <time> <line>`
//!   (see [`console`]); the end is reported as `orca-exit-code=<N>` on the console and by
//!   the instance tags.
//! - With `provider.aws.logs`, each container's output also goes to CloudWatch Logs, stream
//!   `<pod UID>/<container>` ([`log_stream`]) of the configured group, through Docker's
//!   `awslogs` driver ([`LogShipping`]); without, Docker keeps it in rotated `json-file` logs
//!   (3 × 100 MB).
//! - With `provider.aws.metrics`, every interval (on the clock's multiples of it) the bootstrap
//!   samples each running container's CPU time and working set from its cgroup, and the GPUs'
//!   utilization and memory with `nvidia-smi`, and publishes them to the configured namespace
//!   with `aws cloudwatch put-metric-data` ([`MetricPublishing`], where the names are). A
//!   failed publish is only reported on cloud-init's output; sampling stops with the pod.
//! - A volume is a directory of the instance (`/var/lib/orca/volumes/<name>`), bind-mounted
//!   into the containers that mount it; configMap and secret files are written at boot from
//!   the content the user data carries. An EBS claim's volume is waited for (orca attaches it
//!   once the instance runs, at the device [`attachments`] chose), given a filesystem only when
//!   `blkid` finds none and it is mounted read-write, and mounted there.
//! - With `provider.aws.instanceStorePolicy: RAID0`, an instance with NVMe instance-store disks
//!   first makes them (one disk, or all striped into RAID0, with xfs) the home of Docker's data
//!   root and of the volumes' directory, so image pulls and emptyDir volumes use them; a failed
//!   step is undone and reported in the first container's log, and the pod runs on the root
//!   volume ([`UserDataOptions::instance_store`]).
//!
//! What is resolved, and what is not honoured, is described in [`crate::workload`], with
//! volumes and environment in [`crate::workload::volumes`] and [`crate::workload::env`].
//!
//! # Caveats
//! Environment values, Secret values included, and configMap/secret volume contents travel in
//! the user data, which anyone allowed `ec2:DescribeInstanceAttribute` can read, and which
//! processes on the instance can read from IMDS. User data is limited to 16 KiB.

mod attachments;
mod bootstrap;
pub mod console;
mod docker_args;
mod log_shipping;
mod metric_publishing;
mod quote;

pub use attachments::{Attachment, TAG_VOLUME_PREFIX, TooManyVolumes, attachments, wanted_volumes};
pub use bootstrap::{
    BootstrapError, TAG_EXIT_CODE, TAG_FINISHED_AT, USER_DATA_LIMIT, UserDataOptions, user_data,
};
pub use console::{CONSOLE_PREFIX, EXIT_CODE_MARKER};
pub use log_shipping::{LogShipping, log_stream};
pub use metric_publishing::{
    DIMENSION_CONTAINER, DIMENSION_GPU, DIMENSION_POD, METRIC_CPU, METRIC_GPU_MEMORY,
    METRIC_GPU_UTILIZATION, METRIC_MEMORY, MetricPublishing,
};
pub(crate) use quote::quote;

/// The Docker name of a pod's container on its instance.
pub fn container_name(container: &str) -> String {
    format!("orca-{container}")
}

/// Where volumes live on the instance.
pub const VOLUMES_DIR: &str = "/var/lib/orca/volumes";
