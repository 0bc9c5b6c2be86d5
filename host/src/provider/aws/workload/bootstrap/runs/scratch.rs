//! Runs on instances with NVMe instance-store disks: the scratch the bootstrap makes of them
//! (one disk, or several striped into RAID0) for Docker's data root and the pod's emptyDir
//! volumes, what it undoes when a step fails, and the user data without it.

use std::path::Path;

use serde_json::{Value, json};

use super::{Run, nvme, nvme_disk, pod, run, source, write};
use crate::config::InstanceStorePolicy;
use crate::provider::aws::workload::bootstrap::{UserDataOptions, user_data};
use crate::provider::aws::workload::console::exit_code;
use crate::workload::workload_spec;

/// A pod with an emptyDir and a memory volume whose container is told the ephemeral-storage
/// capacity (its limit is unset: the instance's).
fn scratch_pod() -> Value {
    json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "trainer", "image": "python:3.12",
            "env": [{"name": "DISK",
                     "valueFrom": {"resourceFieldRef": {"resource": "limits.ephemeral-storage"}}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                             {"name": "shm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [{"name": "data", "emptyDir": {}},
                    {"name": "shm", "emptyDir": {"medium": "Memory"}}],
    })
}

/// The user data of [`scratch_pod`] under `instance_store`.
async fn scratch_script(instance_store: InstanceStorePolicy) -> String {
    let spec = workload_spec(&pod(scratch_pod()), &source()).await.unwrap();
    let options = UserDataOptions {
        instance_store,
        ..UserDataOptions::default()
    };
    user_data(&spec, &options).unwrap()
}

/// An NVMe instance-store disk `name`, as the instance types with local disks have them.
fn instance_store_disk(dir: &Path, name: &str) {
    nvme_disk(
        dir,
        name,
        "Amazon EC2 NVMe Instance Storage",
        "AWS1A2B3C4D5E6F7A8B9",
    );
}

/// The root EBS volume as `nvme0n1`, then instance-store disks `nvme1n1`… (`disks` of them),
/// and a Docker data root holding a pre-pulled image's metadata.
fn instance_with_disks(dir: &Path, disks: usize) {
    nvme(dir, "nvme0n1", "vol-0aaaaaaaaaaaaaaaa");
    for disk in 1..=disks {
        instance_store_disk(dir, &format!("nvme{disk}n1"));
    }
    let images = dir.join("docker-root/image/overlay2");
    std::fs::create_dir_all(&images).unwrap();
    write(&images, "repositories.json", "{\"Repositories\":{}}");
}

/// The sizes the `df` stand-in answers: the root volume's, and any other path's (the scratch).
const ROOT_DISK_BYTES: &str = "53687091200";
const SCRATCH_DISK_BYTES: &str = "7500000000000";

impl Run {
    /// What the bootstrap's `mount`, `umount`, `systemctl` and `mdadm` calls were, in order,
    /// with the run's directory written as `$DIR`.
    fn timeline(&self) -> Vec<String> {
        let dir = self.dir.path().display().to_string();
        (self.read("timeline").lines())
            .map(|line| line.replace(&dir, "$DIR"))
            .collect()
    }

    /// The value `docker create` got for environment variable `name` of a container.
    fn env(&self, container: &str, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        self.docker_args(container)
            .windows(2)
            .find_map(|pair| (pair[0] == "-e").then(|| pair[1].strip_prefix(&prefix))?)
            .map(str::to_owned)
    }

    /// The targets of the instance store's mounts (the scratch, Docker's data root, the
    /// volumes' directory) that are still mounted at the end, by the timeline.
    fn scratch_mounts_left(&self) -> Vec<String> {
        let scratch = ["$DIR/root/scratch", "$DIR/docker-root", "$DIR/root/volumes"];
        let mut mounted: Vec<String> = Vec::new();
        for line in self.timeline() {
            let target = line.rsplit(' ').next().unwrap_or_default().to_owned();
            if !scratch.contains(&target.as_str()) {
                continue;
            }
            if line.starts_with("mount ") {
                mounted.push(target);
            } else if line.starts_with("umount ") {
                mounted.retain(|left| *left != target);
            }
        }
        mounted
    }
}

#[tokio::test]
async fn several_instance_store_disks_are_striped_and_hold_docker_and_the_emptydir_volumes() {
    let script = scratch_script(InstanceStorePolicy::Raid0).await;
    let run = run(&script, |dir| instance_with_disks(dir, 2));
    assert_eq!(run.status, 0, "{}", run.console);
    // Exactly the two instance-store disks: never the root EBS volume.
    assert_eq!(
        run.timeline(),
        [
            "mdadm --create $DIR/dev/md/orca-scratch --level=0 --raid-devices=2 --run --force \
             $DIR/dev/nvme1n1 $DIR/dev/nvme2n1",
            "mount -t xfs $DIR/dev/md/orca-scratch $DIR/root/scratch",
            "systemctl stop docker.socket docker",
            "mount --bind $DIR/root/scratch/docker $DIR/docker-root",
            "mount --bind $DIR/root/scratch/volumes $DIR/root/volumes",
            "systemctl start docker",
            // The memory volume still mounts on its own directory.
            "mount -t tmpfs -o size=50% tmpfs $DIR/root/volumes/shm",
        ]
    );
    let md = run.path("dev/md/orca-scratch").display().to_string();
    assert_eq!(run.read("mkfs.calls"), format!("-t xfs {md}\n"));
    // What Docker held is on the scratch, under its data root; so is the emptyDir.
    let scratch = run.path("root/scratch");
    assert_eq!(
        std::fs::read_to_string(scratch.join("docker/image/overlay2/repositories.json")).unwrap(),
        "{\"Repositories\":{}}"
    );
    assert_eq!(
        std::fs::read_link(run.path("docker-root")).unwrap(),
        scratch.join("docker")
    );
    assert!(scratch.join("volumes/data").is_dir());
    assert!(run.has_option(
        "trainer",
        "--mount",
        &format!(
            "type=bind,source={},target=/data",
            run.path("root/volumes/data").display()
        )
    ));
    // The scratch's size is the pod's ephemeral-storage capacity.
    assert_eq!(
        run.env("trainer", "DISK").as_deref(),
        Some(SCRATCH_DISK_BYTES)
    );
    let disks = format!(
        "{} {}",
        run.path("dev/nvme1n1").display(),
        run.path("dev/nvme2n1").display()
    );
    let said = format!(
        "orca: instance store {disks} in RAID0 as {md} mounted at {}, for Docker's data root \
         and the pod's emptyDir volumes\n",
        scratch.display()
    );
    assert!(run.stdout.contains(&said), "{}", run.stdout);
    // A success is no news in the pod's log.
    assert!(
        run.output("trainer").is_empty(),
        "{:?}",
        run.output("trainer")
    );
}

#[tokio::test]
async fn one_instance_store_disk_gets_the_filesystem_itself_without_an_array() {
    let script = scratch_script(InstanceStorePolicy::Raid0).await;
    let run = run(&script, |dir| instance_with_disks(dir, 1));
    assert_eq!(run.status, 0, "{}", run.console);
    let disk = run.path("dev/nvme1n1").display().to_string();
    assert!(!run.path("mdadm.calls").exists());
    assert_eq!(run.read("mkfs.calls"), format!("-t xfs {disk}\n"));
    assert_eq!(
        run.timeline()[..3],
        [
            "mount -t xfs $DIR/dev/nvme1n1 $DIR/root/scratch",
            "systemctl stop docker.socket docker",
            "mount --bind $DIR/root/scratch/docker $DIR/docker-root",
        ]
    );
    assert!(run.path("root/scratch/volumes/data").is_dir());
    assert!(
        run.stdout.contains(&format!(
            "orca: instance store {disk} (one disk) mounted at "
        )),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.env("trainer", "DISK").as_deref(),
        Some(SCRATCH_DISK_BYTES)
    );
}

#[tokio::test]
async fn without_instance_store_disks_nothing_is_done_or_said() {
    let script = scratch_script(InstanceStorePolicy::Raid0).await;
    // An instance with only its root EBS volume.
    let run = run(&script, |dir| instance_with_disks(dir, 0));
    assert_eq!(run.status, 0, "{}", run.console);
    assert_root_disk_only(&run);
    assert!(!run.stdout.contains("instance store"), "{}", run.stdout);
    assert!(
        run.output("trainer").is_empty(),
        "{:?}",
        run.output("trainer")
    );
}

/// Docker and the volumes on the root disk, the instance store untouched.
fn assert_root_disk_only(run: &Run) {
    assert!(!run.path("mdadm.calls").exists());
    assert!(!run.path("mkfs.calls").exists());
    assert_eq!(
        run.timeline(),
        ["mount -t tmpfs -o size=50% tmpfs $DIR/root/volumes/shm"]
    );
    assert!(run.path("root/volumes/data").is_dir());
    assert!(!run.path("root/scratch/volumes").exists());
    assert_eq!(run.env("trainer", "DISK").as_deref(), Some(ROOT_DISK_BYTES));
}

#[tokio::test]
async fn with_the_policy_none_the_user_data_leaves_the_instance_store_alone() {
    let script = scratch_script(InstanceStorePolicy::None).await;
    assert!(!script.contains("orca_scratch"));
    assert!(script.len() < scratch_script(InstanceStorePolicy::Raid0).await.len());
    let run = run(&script, |dir| instance_with_disks(dir, 2));
    assert_eq!(run.status, 0, "{}", run.console);
    assert_root_disk_only(&run);
    assert!(!run.stdout.contains("instance store"), "{}", run.stdout);
    assert!(
        run.output("trainer").is_empty(),
        "{:?}",
        run.output("trainer")
    );
}

#[tokio::test]
async fn an_instance_store_that_cannot_be_set_up_is_undone_and_the_pod_runs_on_the_root_disk() {
    let script = scratch_script(InstanceStorePolicy::Raid0).await;
    // The file that makes a step fail and its text, the step the pod's log names and the
    // tool's words it quotes, and whether Docker was stopped by then.
    let cases = [
        (
            ("mdadm-fails", ""),
            "creating the RAID0 array",
            "mdadm: cannot open ",
            false,
        ),
        (
            ("mount-fails", "scratch/docker"),
            "mounting $DIR/root/scratch/docker at $DIR/docker-root",
            "mount: only root can do that",
            true,
        ),
        (
            ("mount-fails", "scratch/volumes"),
            "mounting $DIR/root/scratch/volumes at $DIR/root/volumes",
            "mount: only root can do that",
            true,
        ),
    ];
    for ((file, text), step, words, stopped) in cases {
        let run = run(&script, |dir| {
            instance_with_disks(dir, 2);
            write(dir, file, text);
        });
        assert_eq!(run.status, 0, "{step}: {}", run.console);
        assert_eq!(exit_code(&run.console), Some(0), "{step}");
        assert!(
            run.read("docker.calls")
                .contains("create --name orca-trainer")
        );
        let dir = run.dir.path().display().to_string();
        let output: Vec<String> = (run.output("trainer").iter())
            .map(|line| line.replace(&dir, "$DIR"))
            .collect();
        assert_eq!(
            output[0],
            format!(
                "orca: {step} failed, so the instance store ($DIR/dev/nvme1n1 $DIR/dev/nvme2n1) \
                 is not used and Docker and the pod's volumes stay on the root disk:"
            )
        );
        assert!(
            output[1].starts_with(&format!("orca: {words}")),
            "{output:?}"
        );
        assert!(
            !run.stdout.contains("orca: instance store"),
            "{}",
            run.stdout
        );
        // Nothing of the scratch is left mounted; Docker runs again, on the root disk.
        assert_eq!(run.scratch_mounts_left(), Vec::<String>::new(), "{step}");
        let timeline = run.timeline();
        let at = |call: &str| timeline.iter().position(|line| line == call);
        let stop = at("systemctl stop docker.socket docker");
        assert_eq!(stop.is_some(), stopped, "{step}: {timeline:?}");
        if stopped {
            assert!(at("systemctl start docker") > stop, "{step}: {timeline:?}");
        }
        assert!(!run.path("docker-root").is_symlink());
        assert!(
            run.path("docker-root/image/overlay2/repositories.json")
                .is_file()
        );
        assert!(run.path("root/volumes/data").is_dir() && !run.path("root/volumes").is_symlink());
        assert_eq!(
            run.env("trainer", "DISK").as_deref(),
            Some(ROOT_DISK_BYTES),
            "{step}"
        );
    }
}
