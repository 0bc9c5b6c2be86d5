//! The script checked by bash itself: `bash -n` for syntax, and whole runs against stand-ins
//! for Docker, IMDS, the AWS CLI, `mount`, `umount`, `blkid`, `mkfs`, `mdadm`, `df`,
//! `systemctl`, `shutdown` and `nvidia-smi` (`fakes/`) that record what they were asked and
//! play back what a test sets up, and trees of files for the cgroups, `/dev` and `/sys`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::config::{LogDelivery, LogsConfig};
use crate::provider::aws::workload::console::{container_exit_codes, container_lines, exit_code};
use crate::provider::aws::workload::metric_publishing::{
    DIMENSION_CONTAINER, DIMENSION_GPU, DIMENSION_POD, METRIC_CPU, METRIC_GPU_MEMORY,
    METRIC_GPU_UTILIZATION, METRIC_MEMORY,
};
use crate::workload::source::fake::FakeSource;
use crate::workload::workload_spec;

mod scratch;

/// Survives any shell that would interpret it: quotes, `$()`, backticks, a newline.
const HOSTILE: &str =
    "it's $(touch \"$FAKE_DIR/pwned\") `touch \"$FAKE_DIR/pwned\"` \"q\"\nline 2 ${HOME} \\";

const FAKES: [(&str, &str); 12] = [
    ("blkid", include_str!("fakes/blkid")),
    ("mkfs", include_str!("fakes/mkfs")),
    ("docker", include_str!("fakes/docker")),
    ("curl", include_str!("fakes/curl")),
    ("aws", include_str!("fakes/aws")),
    ("shutdown", include_str!("fakes/shutdown")),
    ("mount", include_str!("fakes/mount")),
    ("systemctl", include_str!("fakes/systemctl")),
    ("nvidia-smi", include_str!("fakes/nvidia-smi")),
    ("mdadm", include_str!("fakes/mdadm")),
    ("umount", include_str!("fakes/umount")),
    ("df", include_str!("fakes/df")),
];

fn source() -> FakeSource {
    FakeSource::default()
        .config_map(
            "settings",
            &[("app.yaml", "lr: 0.1\nname: it's\n"), ("empty", "")],
        )
        .secret("wandb", &[("api-key", HOSTILE)])
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1"},
        "spec": spec,
    }))
    .unwrap()
}

/// An init container, a sidecar, and two containers sharing an emptyDir and a configMap.
fn training_pod(restart_policy: &str) -> Value {
    json!({
        "restartPolicy": restart_policy,
        "initContainers": [
            {"name": "fetch", "image": "amazon/aws-cli:2.15.0",
             "command": ["sh", "-c", "echo fetched > /data/marker"],
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            {"name": "logship", "image": "fluent/fluent-bit:3.0", "restartPolicy": "Always"},
        ],
        "containers": [
            {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
             "command": ["python", "-u"],
             "args": ["train.py", "--host=$(HOST_IP)", "--token=$(WANDB_API_KEY)"],
             "env": [
                 {"name": "WANDB_API_KEY",
                  "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}},
                 {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                 {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
             ],
             "resources": {"limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}},
             "volumeMounts": [
                 {"name": "data", "mountPath": "/data", "subPath": "run-1"},
                 {"name": "cfg", "mountPath": "/etc/app"},
                 {"name": "shm", "mountPath": "/dev/shm"},
             ]},
            {"name": "eval", "image": "python:3.12", "command": ["python", "eval.py"]},
        ],
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 0o640}},
            {"name": "kube-api-access-x1", "projected": {"sources": []}},
        ],
    })
}

async fn script_for(spec: Value) -> String {
    script_with(spec, None, None).await
}

async fn script_shipping(spec: Value, shipping: Option<&LogShipping>) -> String {
    script_with(spec, shipping, None).await
}

async fn script_with(
    spec: Value,
    shipping: Option<&LogShipping>,
    publishing: Option<&MetricPublishing>,
) -> String {
    let options = UserDataOptions {
        shipping,
        publishing,
        ..UserDataOptions::default()
    };
    let spec = workload_spec(&pod(spec), &source()).await.unwrap();
    user_data(&spec, &options).unwrap()
}

/// Shipping to a group whose name needs quoting, for the pod `u-1`.
fn shipping(delivery: LogDelivery) -> LogShipping {
    let logs = LogsConfig {
        group: "/orca/pods#1".to_owned(),
        retention_days: 30,
        delivery,
        buffer_size: "4Mi".to_owned(),
        endpoint_url: None,
    };
    LogShipping::of(&logs, "u-1")
}

/// Publishing every `interval_seconds` to a namespace that needs quoting, for the pod `u-1`.
fn publishing(interval_seconds: u32) -> MetricPublishing {
    MetricPublishing {
        namespace: "Orca/Pods #1".to_owned(),
        interval_seconds,
        pod_uid: "u-1".to_owned(),
    }
}

/// One run of a script against the fakes.
struct Run {
    dir: tempfile::TempDir,
    status: i32,
    console: String,
    /// What cloud-init would log.
    stdout: String,
    elapsed: Duration,
}

impl Run {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    /// The arguments `docker create` got for a container.
    fn docker_args(&self, container: &str) -> Vec<String> {
        let raw = self.read(&format!("{container}.args"));
        let mut args: Vec<String> = raw.split('\0').map(str::to_owned).collect();
        args.pop();
        args
    }

    /// Whether `docker create` got `flag value` for a container.
    fn has_option(&self, container: &str, flag: &str, value: &str) -> bool {
        self.docker_args(container)
            .windows(2)
            .any(|pair| pair == [flag, value])
    }

    fn output(&self, container: &str) -> Vec<String> {
        container_lines(&self.console, Some(container))
            .into_iter()
            .map(|(_, line)| line)
            .collect()
    }

    /// The metric data of each `put-metric-data` call, in the order of the calls.
    fn published(&self) -> Vec<Vec<Value>> {
        let Ok(files) = std::fs::read_dir(self.path("metric-data")) else {
            return Vec::new();
        };
        let mut calls: Vec<(u32, PathBuf)> = files
            .map(|file| file.unwrap().path())
            .filter_map(|path| Some((path.file_stem()?.to_str()?.parse().ok()?, path)))
            .collect();
        calls.sort();
        calls
            .into_iter()
            .map(|(call, path)| {
                let data = std::fs::read_to_string(path).unwrap();
                serde_json::from_str(&data).unwrap_or_else(|e| panic!("call {call}: {e}: {data}"))
            })
            .collect()
    }

    /// Every datum published, across calls and samples.
    fn data(&self) -> Vec<Value> {
        self.published().into_iter().flatten().collect()
    }
}

/// The data named `metric` whose dimensions are exactly `dimensions`.
fn data_of<'a>(data: &'a [Value], metric: &str, dimensions: &[(&str, &str)]) -> Vec<&'a Value> {
    let dimensions: Vec<Value> = dimensions
        .iter()
        .map(|(name, value)| json!({"Name": name, "Value": value}))
        .collect();
    data.iter()
        .filter(|datum| datum["MetricName"] == metric && datum["Dimensions"] == json!(dimensions))
        .collect()
}

/// Runs `script` with the fakes first on PATH; `prepare` writes their behaviour files.
fn run(script: &str, prepare: impl FnOnce(&Path)) -> Run {
    run_with(script, &[], prepare)
}

fn run_with(script: &str, env: &[(&str, &str)], prepare: impl FnOnce(&Path)) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (name, text) in FAKES {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    prepare(dir.path());
    let script_path = dir.path().join("user-data");
    std::fs::write(&script_path, script).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let output = Command::new("timeout")
        .arg("60")
        .arg("bash")
        .arg(&script_path)
        .env("PATH", path)
        .env("FAKE_DIR", dir.path())
        .env("ORCA_ROOT", dir.path().join("root"))
        .env("ORCA_CONSOLE", dir.path().join("console"))
        .env("ORCA_IMDS", "http://imds.test")
        .env("ORCA_BACKOFF_SECONDS", "0")
        .env("ORCA_CGROUP", dir.path().join("cgroup"))
        .env("ORCA_DEV", dir.path().join("dev"))
        .env("ORCA_SYS", dir.path().join("sys"))
        .env("ORCA_DOCKER_ROOT", dir.path().join("docker-root"))
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let elapsed = started.elapsed();
    let status = output.status.code().expect("the script exits by itself");
    assert_ne!(status, 124, "the script timed out: {output:?}");
    let console = std::fs::read_to_string(dir.path().join("console")).unwrap_or_default();
    Run {
        dir,
        status,
        console,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        elapsed,
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test]
async fn a_realistic_pod_becomes_valid_bash_within_the_size_limit() {
    // With everything the config can add, too: the awslogs options and the metric sampler.
    let shipped = script_with(
        training_pod("Never"),
        Some(&shipping(LogDelivery::NonBlocking)),
        Some(&publishing(60)),
    )
    .await;
    assert!(shipped.len() <= USER_DATA_LIMIT, "{} bytes", shipped.len());
    let output = Command::new("bash")
        .args(["-n", "-c", &shipped])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");

    let script = script_for(training_pod("Never")).await;
    assert!(script.starts_with("#!/bin/bash\n"));
    assert!(script.len() <= USER_DATA_LIMIT, "{} bytes", script.len());
    let output = Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(script.contains("nvcr.io/nvidia/pytorch:24.05-py3"));
    // The secret appears only single-quoted: bash sees it as one literal word.
    assert!(script.contains(&format!("-e WANDB_API_KEY={} ", quote(HOSTILE))));
    assert_eq!(
        script.matches("$(touch").count(),
        2,
        "only inside that one word"
    );
}

/// The training pod (`restartPolicy: Never`) run with its trainer failing with 3, the eval
/// succeeding and the sidecar running until it is stopped.
async fn failed_training_run() -> Run {
    let script = script_for(training_pod("Never")).await;
    run(&script, prepare_failed_training)
}

fn prepare_failed_training(dir: &Path) {
    write(dir, "fetch.out", "fetched\n");
    write(dir, "logship.block", "");
    write(dir, "trainer.out", "epoch 1\n  loss=0.5 \n");
    write(dir, "trainer.exits", "3\n");
    write(dir, "eval.exits", "0\n");
}

/// Every container of the training pod, init containers and the sidecar included.
const TRAINING_CONTAINERS: [&str; 4] = ["fetch", "logship", "trainer", "eval"];

/// What the console must show of the failed training run, however its output is kept.
fn assert_failed_training_console(run: &Run) {
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    assert_eq!(exit_code(&run.console), Some(3));
    assert_eq!(
        container_exit_codes(&run.console),
        std::collections::BTreeMap::from(
            [("eval", 0), ("fetch", 0), ("logship", 143), ("trainer", 3)]
                .map(|(k, v)| (k.to_owned(), v))
        )
    );
    assert_eq!(run.output("trainer"), ["epoch 1", "  loss=0.5 "]);
    assert_eq!(run.output("fetch"), ["fetched"]);
}

#[tokio::test]
async fn the_pod_runs_in_order_and_reports_the_first_failure() {
    let run = failed_training_run().await;

    assert_failed_training_console(&run);
    let first = &container_lines(&run.console, Some("trainer"))[0].0;
    assert_eq!(
        *first,
        "2024-05-01T10:00:00.000000001Z"
            .parse::<Timestamp>()
            .unwrap()
    );

    // The init container ran before the others were created; the sidecar was stopped last.
    let calls = run.read("docker.calls");
    let at = |call: &str| {
        calls
            .find(call)
            .unwrap_or_else(|| panic!("{call} in {calls}"))
    };
    assert!(at("wait orca-fetch") < at("create --name orca-logship"));
    assert!(at("create --name orca-logship") < at("create --name orca-trainer"));
    assert!(at("wait orca-trainer") < at("stop -t 10 orca-logship"));
}

#[tokio::test]
async fn a_container_gets_exactly_the_arguments_the_pod_asked_for() {
    let run = failed_training_run().await;
    // Exactly the arguments the pod asked for, the secret byte for byte, instance facts filled.
    let args = run.docker_args("trainer");
    let has = |pair: &[&str]| args.windows(2).any(|w| w == pair);
    assert!(
        has(&["-e", &format!("WANDB_API_KEY={HOSTILE}")]),
        "{args:?}"
    );
    assert!(has(&["-e", "HOST_IP=10.1.2.3"]), "{args:?}");
    assert!(
        has(&["--gpus", "all"]) && has(&["--memory", "1073741824"]),
        "{args:?}"
    );
    assert!(has(&["--network", "host"]), "{args:?}");
    let cpus = args[args.iter().position(|a| a == "--cpus").unwrap() + 1].clone();
    assert!(
        ["1.000", "2.000"].contains(&cpus.as_str()),
        "capped at the host: {cpus}"
    );
    assert!(args.iter().any(|a| a.starts_with("CPUS=")));
    assert!(has(&["--entrypoint", "python"]), "{args:?}");
    let tail = &args[args.len() - 5..];
    assert_eq!(
        tail,
        [
            "nvcr.io/nvidia/pytorch:24.05-py3",
            "-u",
            "train.py",
            "--host=10.1.2.3",
            &format!("--token={HOSTILE}")
        ]
    );
    assert!(!run.path("pwned").exists(), "a value was run by the shell");
}

#[tokio::test]
async fn volumes_are_prepared_with_their_modes_and_mounted_into_the_containers() {
    let run = failed_training_run().await;
    let args = run.docker_args("trainer");
    // Volumes: files with their modes, the emptyDir subPath created, the tmpfs mounted.
    let root = run.path("root/volumes");
    let config = root.join("cfg/app.yaml");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "lr: 0.1\nname: it's\n"
    );
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert_eq!(std::fs::read_to_string(root.join("cfg/empty")).unwrap(), "");
    assert!(root.join("data/run-1").is_dir());
    assert!(
        run.read("mount.calls")
            .contains("-t tmpfs -o size=1073741824 tmpfs")
    );
    let source = format!("source={}/data/run-1", root.display());
    assert!(args.iter().any(|a| a.contains(&source)), "{args:?}");
}

#[tokio::test]
async fn the_end_is_tagged_on_the_instance_before_it_powers_off() {
    let run = failed_training_run().await;
    // The end is tagged on the instance (found over IMDSv2), then the instance powers off.
    let aws: Vec<String> = run.read("aws.args").lines().map(str::to_owned).collect();
    assert_eq!(
        aws[..6],
        [
            "ec2",
            "create-tags",
            "--region",
            "eu-west-1",
            "--resources",
            "i-0123456789abcdef0"
        ]
    );
    let tags: Value = serde_json::from_str(&aws[7]).unwrap();
    assert_eq!(tags[0], json!({"Key": TAG_EXIT_CODE, "Value": "3"}));
    assert_eq!(tags[1]["Key"], TAG_FINISHED_AT);
    tags[1]["Value"]
        .as_str()
        .unwrap()
        .parse::<Timestamp>()
        .unwrap();
    assert!(
        run.read("curl.calls")
            .contains("PUT http://imds.test/latest/api/token")
    );
    assert_eq!(run.read("shutdown.calls"), "-h now\n");
}

#[tokio::test]
async fn on_failure_restarts_a_failed_container_until_it_succeeds() {
    let script = script_for(json!({
        "restartPolicy": "OnFailure",
        "containers": [{"name": "trainer", "image": "python:3.12"}],
    }))
    .await;
    let run = run(&script, |dir| write(dir, "trainer.exits", "1\n1\n0\n"));
    assert_eq!(run.status, 0, "console:\n{}", run.console);
    assert_eq!(run.console.matches("orca-exit[trainer]=").count(), 3);
    assert!(run.output("trainer")[0].contains("exited with code 1; restarting"));
    assert_eq!(exit_code(&run.console), Some(0));
}

#[tokio::test]
async fn a_failed_init_container_fails_the_pod_before_any_container_starts() {
    let script = script_for(json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "fetch", "image": "busybox:1.36"}],
        "containers": [{"name": "trainer", "image": "python:3.12"}],
    }))
    .await;
    let run = run(&script, |dir| write(dir, "fetch.exits", "2\n"));
    assert_eq!(run.status, 2);
    assert_eq!(exit_code(&run.console), Some(2));
    assert!(!run.read("docker.calls").contains("orca-trainer"));
}

#[tokio::test]
async fn an_image_that_does_not_pull_fails_with_125_and_says_why() {
    let script = script_for(json!({
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "private/model:1"}],
    }))
    .await;
    let run = run(&script, |dir| write(dir, "pull-fails", ""));
    assert_eq!(run.status, 125);
    assert_eq!(exit_code(&run.console), Some(125));
    let output = run.output("trainer");
    assert!(
        output[0].contains("pulling image private/model:1 failed"),
        "{output:?}"
    );
    assert!(output[1].contains("pull access denied"), "{output:?}");
    assert_eq!(run.read("docker.calls").matches("pull -q").count(), 5);
}

#[tokio::test]
async fn a_container_docker_cannot_create_ends_with_125_and_dockers_words() {
    let script = script_for(json!({
        "restartPolicy": "Never",
        "containers": [
            {"name": "trainer", "image": "python:3.12",
             "resources": {"limits": {"nvidia.com/gpu": "1"}}},
            {"name": "eval", "image": "python:3.12"},
        ],
    }))
    .await;
    let run = run(&script, |dir| {
        write(
            dir,
            "trainer.create-fails",
            "Error response from daemon: could not select device driver \"\" with \
             capabilities: [[gpu]]\n",
        );
    });
    assert_eq!(run.status, 125);
    assert_eq!(
        container_exit_codes(&run.console),
        std::collections::BTreeMap::from([("eval".to_owned(), 0), ("trainer".to_owned(), 125)])
    );
    let output = run.output("trainer");
    assert!(
        output[0].ends_with("docker could not run the container:"),
        "{output:?}"
    );
    assert!(
        output[1].contains("could not select device driver"),
        "{output:?}"
    );
}

#[tokio::test]
async fn a_volume_that_cannot_be_prepared_fails_the_pod_in_the_first_containers_log() {
    let script = script_for(json!({
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "python:3.12"}],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }))
    .await;
    let run = run(&script, |dir| write(dir, "mount-fails", ""));
    assert_eq!(run.status, 125);
    assert_eq!(exit_code(&run.console), Some(125));
    assert!(run.read("mount.calls").contains("size=50%"));
    let output = run.output("trainer");
    assert!(
        output[0].ends_with("preparing the pod's volumes failed:"),
        "{output:?}"
    );
    assert!(
        output[1].ends_with("mount: only root can do that"),
        "{output:?}"
    );
    assert!(!run.read("docker.calls").contains("create"));
    assert_eq!(run.read("shutdown.calls"), "-h now\n");
}

#[tokio::test]
async fn a_log_backlog_does_not_keep_the_instance_running() {
    let script = script_for(json!({
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "python:3.12"}],
    }))
    .await;
    let run = run_with(&script, &[("ORCA_DRAIN_SECONDS", "1")], |dir| {
        write(dir, "trainer.out", "first\n");
        write(dir, "trainer.slow-logs", "");
    });
    assert_eq!(run.status, 0);
    let output = run.output("trainer");
    assert_eq!(output[0], "first");
    assert_eq!(output[1], "backlog");
    let last = output.last().unwrap();
    assert!(
        last.ends_with("output after this point was not copied to the console"),
        "{last}"
    );
    assert_eq!(exit_code(&run.console), Some(0));
}

#[tokio::test]
async fn without_shipping_docker_keeps_each_containers_output_in_rotated_json_files() {
    let run = failed_training_run().await;
    for container in TRAINING_CONTAINERS {
        let args = run.docker_args(container);
        assert!(
            run.has_option(container, "--log-driver", "json-file")
                && run.has_option(container, "--log-opt", "max-size=100m")
                && run.has_option(container, "--log-opt", "max-file=3"),
            "{container}: {args:?}"
        );
        assert!(
            !args.iter().any(|arg| arg.contains("awslogs")),
            "{container}: {args:?}"
        );
    }
    assert_failed_training_console(&run);
}

#[tokio::test]
async fn a_shipped_pod_writes_each_container_to_its_own_stream_and_still_to_the_console() {
    let shipping = shipping(LogDelivery::NonBlocking);
    let script = script_shipping(training_pod("Never"), Some(&shipping)).await;
    assert!(script.len() <= USER_DATA_LIMIT, "{} bytes", script.len());
    let run = run(&script, prepare_failed_training);

    for container in TRAINING_CONTAINERS {
        let args = run.docker_args(container);
        let stream = format!("awslogs-stream=u-1/{container}");
        for (flag, value) in [
            ("--network", "host"),
            ("--log-driver", "awslogs"),
            ("--log-opt", "awslogs-group=/orca/pods#1"),
            ("--log-opt", "awslogs-create-group=false"),
            ("--log-opt", "cache-disabled=false"),
            ("--log-opt", stream.as_str()),
            ("--log-opt", "awslogs-region=eu-west-1"),
            ("--log-opt", "mode=non-blocking"),
            ("--log-opt", "max-buffer-size=4194304"),
        ] {
            assert!(
                run.has_option(container, flag, value),
                "{container}: {flag} {value} in {args:?}"
            );
        }
        assert!(
            !args.iter().any(|arg| arg == "json-file"),
            "{container}: {args:?}"
        );
        assert_eq!(
            args.iter().filter(|arg| *arg == "--log-driver").count(),
            1,
            "{container}: {args:?}"
        );
    }
    // The log options come before the image: the container's command line is untouched.
    let trainer = run.docker_args("trainer");
    assert_eq!(
        trainer[trainer.len() - 5],
        "nvcr.io/nvidia/pytorch:24.05-py3"
    );
    assert!(
        run.read("curl.calls")
            .contains("GET http://imds.test/latest/meta-data/placement/region")
    );
    assert_failed_training_console(&run);
}

#[tokio::test]
async fn blocking_delivery_has_no_buffer_to_size() {
    let shipping = shipping(LogDelivery::Blocking);
    let script = script_shipping(
        json!({
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "python:3.12"}],
        }),
        Some(&shipping),
    )
    .await;
    let run = run(&script, |dir| write(dir, "trainer.out", "step 1\n"));
    assert_eq!(run.status, 0, "console:\n{}", run.console);
    let args = run.docker_args("trainer");
    assert!(
        run.has_option("trainer", "--log-opt", "mode=blocking"),
        "{args:?}"
    );
    assert!(
        run.has_option("trainer", "--log-opt", "awslogs-stream=u-1/trainer"),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|arg| arg.starts_with("max-buffer-size=")),
        "{args:?}"
    );
    assert_eq!(run.output("trainer"), ["step 1"]);
    assert_eq!(exit_code(&run.console), Some(0));
}

#[tokio::test]
async fn without_a_region_from_imds_docker_is_left_to_find_its_own() {
    let shipping = shipping(LogDelivery::NonBlocking);
    let script = script_shipping(
        json!({
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "python:3.12"}],
        }),
        Some(&shipping),
    )
    .await;
    let run = run(&script, |dir| {
        write(dir, "imds-no-region", "");
        write(dir, "trainer.out", "step 1\n");
    });
    assert_eq!(run.status, 0, "console:\n{}", run.console);
    let args = run.docker_args("trainer");
    assert!(
        run.has_option("trainer", "--log-opt", "awslogs-stream=u-1/trainer"),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|arg| arg.starts_with("awslogs-region")),
        "{args:?}"
    );
    assert_eq!(run.output("trainer"), ["step 1"]);
    assert_eq!(exit_code(&run.console), Some(0));
}

/// Three containers that run for 4 s: `trainer` (exit code 3) in the cgroup Docker's systemd
/// driver gives it, `eval` in its cgroupfs one, with more inactive file cache than memory (the
/// two files are read at different moments), and `probe`, whose cgroup files are gone.
fn metrics_pod() -> Value {
    json!({
        "restartPolicy": "Never",
        "containers": [
            {"name": "trainer", "image": "python:3.12"},
            {"name": "eval", "image": "python:3.12"},
            {"name": "probe", "image": "busybox:1.36"},
        ],
    })
}

fn prepare_metrics(dir: &Path) {
    for container in ["trainer", "eval", "probe"] {
        write(dir, &format!("{container}.seconds"), "4");
    }
    write(dir, "trainer.out", "step 1\n");
    write(dir, "trainer.exits", "3\n");
    cgroup(
        dir,
        "system.slice/docker-trainer-id.scope",
        2_500_000,
        1_000_000,
        250_000,
    );
    cgroup(dir, "docker/eval-id", 1, 1_000, 5_000);
}

/// A container's cgroup (v2) files at `path` of the fake `/sys/fs/cgroup`, with look-alike
/// lines around the ones that count.
fn cgroup(dir: &Path, path: &str, usage_usec: u64, current: u64, inactive_file: u64) {
    let cgroup = dir.join("cgroup").join(path);
    std::fs::create_dir_all(&cgroup).unwrap();
    let cpu = format!("usage_usec {usage_usec}\nuser_usec 7\nsystem_usec 9\nnr_periods 0\n");
    write(&cgroup, "cpu.stat", &cpu);
    write(&cgroup, "memory.current", &format!("{current}\n"));
    let memory = format!(
        "anon 4096\nfile 99\ninactive_anon 11\nactive_file 13\ninactive_file {inactive_file}\n"
    );
    write(&cgroup, "memory.stat", &memory);
}

/// `nvidia-smi`'s answer for `gpus` GPUs: GPU i at i % 101 percent, using i MiB.
fn gpus(dir: &Path, gpus: usize) {
    let lines: String = (0..gpus)
        .map(|i| format!("{i}, {}, {i}\n", i % 101))
        .collect();
    write(dir, "nvidia-smi.out", &lines);
}

fn value(datum: &Value) -> f64 {
    datum["Value"].as_f64().unwrap_or_else(|| panic!("{datum}"))
}

#[tokio::test]
async fn a_published_pod_sends_each_running_containers_cpu_time_and_working_set() {
    let script = script_with(metrics_pod(), None, Some(&publishing(1))).await;
    let run = run(&script, prepare_metrics);
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    let data = run.data();

    let pod = (DIMENSION_POD, "u-1");
    let trainer = [pod, (DIMENSION_CONTAINER, "trainer")];
    let eval = [pod, (DIMENSION_CONTAINER, "eval")];
    // usage_usec in seconds; memory.current less inactive_file, and never below 0.
    let cases = [
        (METRIC_CPU, trainer, "Seconds", 2.5),
        (METRIC_MEMORY, trainer, "Bytes", 750_000.0),
        (METRIC_CPU, eval, "Seconds", 0.000_001),
        (METRIC_MEMORY, eval, "Bytes", 0.0),
    ];
    for (metric, dimensions, unit, expected) in cases {
        let found = data_of(&data, metric, &dimensions);
        assert!(!found.is_empty(), "{metric} {dimensions:?} in {data:?}");
        for datum in found {
            assert_eq!(value(datum), expected, "{datum}");
            assert_eq!(datum["Unit"], unit, "{datum}");
        }
    }
    // Every second while the containers run: more than one sample of each.
    let samples: std::collections::BTreeSet<&str> = data_of(&data, METRIC_CPU, &trainer)
        .iter()
        .map(|datum| datum["Timestamp"].as_str().unwrap())
        .collect();
    assert!(samples.len() >= 2, "{samples:?}");
    // High resolution below a minute; the time of the sample, in UTC.
    for datum in &data {
        assert_eq!(datum["StorageResolution"], 1, "{datum}");
        let time = datum["Timestamp"].as_str().unwrap();
        assert!(time.ends_with('Z'), "{datum}");
        time.parse::<Timestamp>().unwrap();
    }
    // Nothing for `probe`, whose cgroup is gone, and no GPU figures where nvidia-smi fails.
    assert_eq!(
        data.len(),
        data_of(&data, METRIC_CPU, &trainer).len()
            + data_of(&data, METRIC_MEMORY, &trainer).len()
            + data_of(&data, METRIC_CPU, &eval).len()
            + data_of(&data, METRIC_MEMORY, &eval).len(),
        "{data:?}"
    );
    assert!(
        run.read("nvidia-smi.calls").contains(
            "--query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits"
        )
    );
    // Each call names the namespace (one argument) and the instance's region.
    let calls = run.read("cloudwatch.calls");
    assert!(
        calls.lines().all(|call| call.starts_with(
            "cloudwatch put-metric-data --region eu-west-1 --namespace Orca/Pods #1 --metric-data file://"
        )),
        "{calls}"
    );
    assert_eq!(run.output("trainer"), ["step 1"]);
}

#[tokio::test]
async fn gpu_figures_are_published_per_gpu_and_for_the_pod_where_nvidia_smi_answers() {
    let script = script_with(metrics_pod(), None, Some(&publishing(1))).await;
    let run = run(&script, |dir| {
        prepare_metrics(dir);
        write(dir, "nvidia-smi.out", "0, 50, 1024\n1, 100, 2048\n");
    });
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    let data = run.data();
    let pod = (DIMENSION_POD, "u-1");
    let gpu = |index| vec![pod, (DIMENSION_GPU, index)];
    const MIB: f64 = 1024.0 * 1024.0;
    let cases = [
        (METRIC_GPU_UTILIZATION, gpu("0"), "Percent", 50.0),
        (METRIC_GPU_UTILIZATION, gpu("1"), "Percent", 100.0),
        (METRIC_GPU_MEMORY, gpu("0"), "Bytes", 1024.0 * MIB),
        (METRIC_GPU_MEMORY, gpu("1"), "Bytes", 2048.0 * MIB),
        // The pod's: the mean utilization, the memory in all.
        (METRIC_GPU_UTILIZATION, vec![pod], "Percent", 75.0),
        (METRIC_GPU_MEMORY, vec![pod], "Bytes", 3072.0 * MIB),
    ];
    for (metric, dimensions, unit, expected) in cases {
        let found = data_of(&data, metric, &dimensions);
        assert!(!found.is_empty(), "{metric} {dimensions:?} in {data:?}");
        for datum in found {
            assert_eq!(value(datum), expected, "{datum}");
            assert_eq!(datum["Unit"], unit, "{datum}");
            assert_eq!(datum["StorageResolution"], 1, "{datum}");
        }
    }
    // The containers' figures as without GPUs.
    let trainer = [pod, (DIMENSION_CONTAINER, "trainer")];
    assert!(!data_of(&data, METRIC_CPU, &trainer).is_empty(), "{data:?}");

    // The sampler ended with the pod: with every sample published, no call comes after.
    let calls = run.read("cloudwatch.calls").lines().count();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(run.read("cloudwatch.calls").lines().count(), calls);
}

#[tokio::test]
async fn a_minute_interval_publishes_standard_resolution_data_and_does_not_delay_the_end() {
    let script = script_with(metrics_pod(), None, Some(&publishing(60))).await;
    let run = run(&script, |dir| {
        prepare_metrics(dir);
        gpus(dir, 2);
    });
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    assert_eq!(exit_code(&run.console), Some(3));
    // The first sample is taken at once, the GPUs' at least.
    let data = run.data();
    let pod = [(DIMENSION_POD, "u-1")];
    assert!(
        !data_of(&data, METRIC_GPU_MEMORY, &pod).is_empty(),
        "{data:?}"
    );
    for datum in &data {
        assert!(datum.get("StorageResolution").is_none(), "{datum}");
    }
    // The pod's 4 s, not the sampler's minute.
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
}

#[tokio::test]
async fn more_than_1000_data_are_published_in_several_calls() {
    let script = script_with(metrics_pod(), None, Some(&publishing(60))).await;
    let run = run(&script, |dir| {
        prepare_metrics(dir);
        gpus(dir, 600);
    });
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    let published = run.published();
    assert!(published.iter().all(|call| call.len() <= 1000));
    // The first sample: 1202 GPU figures (and maybe the containers'), in two calls.
    let first = &published[0][0]["Timestamp"];
    let sample: Vec<&Value> = published
        .iter()
        .flatten()
        .filter(|datum| datum["Timestamp"] == *first)
        .collect();
    assert_eq!(published[0].len(), 1000);
    assert_eq!(published[1][0]["Timestamp"], *first);
    let gpu =
        |datum: &&&Value| datum["MetricName"] != METRIC_CPU && datum["MetricName"] != METRIC_MEMORY;
    assert_eq!(sample.iter().filter(gpu).count(), 1202);
    let pod = [(DIMENSION_POD, "u-1")];
    let all: Vec<Value> = sample.into_iter().cloned().collect();
    // GPU i uses i MiB: 0 + 1 + … + 599.
    let memory = data_of(&all, METRIC_GPU_MEMORY, &pod);
    assert_eq!(value(memory[0]), (599.0 * 600.0 / 2.0) * 1024.0 * 1024.0);
}

#[tokio::test]
async fn a_failed_publish_is_reported_and_changes_nothing_of_the_pod() {
    let script = script_with(metrics_pod(), None, Some(&publishing(1))).await;
    let run = run(&script, |dir| {
        prepare_metrics(dir);
        gpus(dir, 2);
        write(dir, "cloudwatch-fails", "");
    });
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    assert_eq!(exit_code(&run.console), Some(3));
    assert_eq!(
        container_exit_codes(&run.console),
        std::collections::BTreeMap::from(
            [("eval", 0), ("probe", 0), ("trainer", 3)].map(|(k, v)| (k.to_owned(), v))
        )
    );
    assert_eq!(run.output("trainer"), ["step 1"]);
    assert!(run.output("eval").is_empty() && run.output("probe").is_empty());
    assert!(!run.console.contains("metric"), "{}", run.console);
    // Reported on cloud-init's output, each time (every sample has the GPUs'): the sampler went
    // on.
    let failed = "orca: publishing the pod's metrics failed: An error occurred (AccessDenied)";
    assert!(run.stdout.matches(failed).count() >= 2, "{}", run.stdout);
    assert_eq!(run.read("shutdown.calls"), "-h now\n");
}

#[tokio::test]
async fn without_publishing_nothing_is_sampled_or_published() {
    let script = script_for(metrics_pod()).await;
    assert!(!script.contains("orca_sample()"));
    let run = run(&script, |dir| {
        prepare_metrics(dir);
        gpus(dir, 2);
    });
    assert_eq!(run.status, 3, "console:\n{}", run.console);
    assert!(!run.read("aws.args").contains("cloudwatch"));
    assert!(!run.path("metric-data").exists());
    assert_eq!(run.read("nvidia-smi.calls"), "");
    assert!(!run.read("docker.calls").contains("inspect -f"));
}

/// A namespace where claim `data` is bound to the EBS volume `vol-0123456789abcdef0` (ext4)
/// and claim `archive` to the read-only `vol-0fedcba9876543210`.
fn ebs_source() -> FakeSource {
    let csi = |id: &str, read_only: bool| json!({"driver": "ebs.csi.aws.com", "volumeHandle": id, "fsType": "ext4", "readOnly": read_only});
    source()
        .with_bound_claim("data", csi("vol-0123456789abcdef0", false))
        .with_bound_claim("archive", csi("vol-0fedcba9876543210", true))
}

async fn ebs_script(volumes: Value, mounts: Value) -> String {
    let spec = json!({
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "python:3.12", "volumeMounts": mounts}],
        "volumes": volumes,
    });
    let spec = workload_spec(&pod(spec), &ebs_source()).await.unwrap();
    user_data(&spec, &UserDataOptions::default()).unwrap()
}

/// The EBS volume `id` attached as NVMe disk `name` (its serial the id without the dash).
fn nvme(dir: &Path, name: &str, id: &str) {
    nvme_disk(
        dir,
        name,
        "Amazon Elastic Block Store",
        &id.replace('-', ""),
    );
}

/// NVMe disk `name` in the fake `/sys` and `/dev`, its model and serial padded with spaces as
/// the kernel shows them.
fn nvme_disk(dir: &Path, name: &str, model: &str, serial: &str) {
    let device = dir.join(format!("sys/block/{name}/device"));
    std::fs::create_dir_all(&device).unwrap();
    write(&device, "serial", &format!("{serial:<20}\n"));
    write(&device, "model", &format!("{model:<40}\n"));
    std::fs::create_dir_all(dir.join("dev")).unwrap();
    write(&dir.join("dev"), name, "");
}

#[tokio::test]
async fn an_ebs_volume_is_found_by_its_serial_formatted_when_blank_and_mounted() {
    let script = ebs_script(
        json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "again", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}},
        ]),
        json!([
            {"name": "data", "mountPath": "/ckpt", "subPath": "run-1"},
            {"name": "again", "mountPath": "/seen"},
        ]),
    )
    .await;
    let run = run(&script, |dir| {
        // Another EBS volume is attached too; the pod's is the second NVMe disk.
        nvme(dir, "nvme1n1", "vol-0000000000000000a");
        nvme(dir, "nvme2n1", "vol-0123456789abcdef0");
        write(dir, "trainer.exits", "0\n");
    });
    assert_eq!(run.status, 0, "{}", run.console);
    let device = run.path("dev/nvme2n1").display().to_string();
    let root = run.path("root/volumes");
    assert_eq!(run.read("mkfs.calls"), format!("-t ext4 {device}\n"));
    let mounts = run.read("mount.calls");
    assert!(
        mounts.contains(&format!("-t ext4 -o rw {device} {}/data", root.display())),
        "{mounts}"
    );
    assert!(
        mounts.contains(&format!(
            "--bind {}/data {}/again",
            root.display(),
            root.display()
        )),
        "{mounts}"
    );
    assert!(root.join("data/run-1").is_dir());
    let args = run.docker_args("trainer");
    let source = format!("source={}/data/run-1", root.display());
    assert!(args.iter().any(|a| a.contains(&source)), "{args:?}");
    assert!(
        args.iter()
            .any(|a| a.contains(&format!("source={}/again", root.display()))
                && a.ends_with("readonly")),
        "{args:?}"
    );
}

#[tokio::test]
async fn a_volume_with_a_filesystem_is_mounted_as_it_is_and_never_formatted() {
    let script = ebs_script(
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        json!([{"name": "data", "mountPath": "/ckpt"}]),
    )
    .await;
    let run = run(&script, |dir| {
        nvme(dir, "nvme1n1", "vol-0123456789abcdef0");
        std::fs::create_dir_all(dir.join("blkid")).unwrap();
        write(
            &dir.join("blkid"),
            "nvme1n1",
            "DEVNAME=/dev/nvme1n1\nTYPE=xfs\n",
        );
        write(dir, "trainer.exits", "0\n");
    });
    assert_eq!(run.status, 0, "{}", run.console);
    assert!(!run.path("mkfs.calls").exists());
    assert!(run.read("mount.calls").contains("-t xfs -o rw"));
}

#[tokio::test]
async fn a_xen_device_that_appears_late_is_waited_for() {
    let script = ebs_script(
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        json!([{"name": "data", "mountPath": "/ckpt"}]),
    )
    .await;
    let run = run(&script, |dir| {
        write(dir, "trainer.exits", "0\n");
        let dev = dir.join("dev");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            std::fs::create_dir_all(&dev).unwrap();
            std::fs::write(dev.join("xvdf"), "").unwrap();
        });
    });
    assert_eq!(run.status, 0, "{}", run.console);
    let device = run.path("dev/xvdf").display().to_string();
    assert!(run.read("mount.calls").contains(&format!("-o rw {device}")));
}

#[tokio::test]
async fn a_volume_that_cannot_be_used_safely_fails_the_pod_and_is_never_formatted() {
    let claim = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    let archive = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "archive"}}]);
    let mounts = json!([{"name": "data", "mountPath": "/ckpt"}]);
    type Prepare = Box<dyn FnOnce(&Path)>;
    /// The claims, the environment, what the test prepares, and what the pod's log says.
    type Case = (
        Value,
        &'static [(&'static str, &'static str)],
        Prepare,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            claim.clone(),
            &[("ORCA_ATTACH_SECONDS", "1")],
            Box::new(|_: &Path| {}),
            "EBS volume vol-0123456789abcdef0 was not attached to this instance within 1 s",
        ),
        (
            archive,
            &[],
            Box::new(|dir: &Path| nvme(dir, "nvme1n1", "vol-0fedcba9876543210")),
            "has no filesystem and is mounted read-only, so it is not formatted",
        ),
        (
            claim.clone(),
            &[],
            Box::new(|dir: &Path| {
                nvme(dir, "nvme1n1", "vol-0123456789abcdef0");
                std::fs::create_dir_all(dir.join("blkid")).unwrap();
                write(&dir.join("blkid"), "nvme1n1", "PTTYPE=gpt\n");
            }),
            "holds a gpt partition table and no filesystem",
        ),
        (
            claim,
            &[],
            Box::new(|dir: &Path| {
                nvme(dir, "nvme1n1", "vol-0123456789abcdef0");
                write(dir, "blkid-fails", "4");
            }),
            "could not read EBS volume vol-0123456789abcdef0",
        ),
    ];
    for (volumes, env, prepare, says) in cases {
        let script = ebs_script(volumes, mounts.clone()).await;
        let run = run_with(&script, env, prepare);
        assert_eq!(run.status, 125, "{says}: {}", run.console);
        assert!(!run.path("mkfs.calls").exists(), "{says}");
        let output = run.output("trainer").join("\n");
        assert!(output.contains(says), "{says}: {output}");
        assert!(!run.read("docker.calls").contains("create"), "{says}");
    }
}

/// A namespace where claim `shared` is bound to EFS `handle`.
async fn efs_script(handle: &str, read_only: bool) -> String {
    let source = source().with_bound_claim(
        "shared",
        json!({"driver": "efs.csi.aws.com", "volumeHandle": handle, "readOnly": read_only}),
    );
    let spec = json!({
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "python:3.12",
                        "volumeMounts": [{"name": "datasets", "mountPath": "/datasets"}]}],
        "volumes": [{"name": "datasets", "persistentVolumeClaim": {"claimName": "shared"}}],
    });
    let spec = workload_spec(&pod(spec), &source).await.unwrap();
    user_data(&spec, &UserDataOptions::default()).unwrap()
}

#[tokio::test]
async fn an_efs_claim_is_mounted_over_nfs_in_the_instances_region_or_with_tls_by_the_helper() {
    let script = efs_script("fs-0123456789abcdef0:/datasets", false).await;
    let plain = run(&script, |dir| write(dir, "trainer.exits", "0\n"));
    assert_eq!(plain.status, 0, "{}", plain.console);
    let dir = plain.path("root/volumes/datasets").display().to_string();
    assert_eq!(
        plain.read("mount.calls"),
        format!(
            "-t nfs4 -o nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,\
             noresvport,rw fs-0123456789abcdef0.efs.eu-west-1.amazonaws.com:/datasets {dir}\n"
        )
    );
    let args = plain.docker_args("trainer");
    assert!(
        args.iter().any(|a| a.contains(&format!("source={dir}"))),
        "{args:?}"
    );

    // With amazon-efs-utils' helper: TLS, and an access point.
    let script = efs_script("fs-0123456789abcdef0::fsap-0123456789abcdef0", true).await;
    let helped = run(&script, |dir| {
        write(dir, "trainer.exits", "0\n");
        let helper = dir.join("bin/mount.efs");
        std::fs::write(&helper, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    });
    assert_eq!(helped.status, 0, "{}", helped.console);
    let dir = helped.path("root/volumes/datasets").display().to_string();
    assert_eq!(
        helped.read("mount.calls"),
        format!(
            "-t efs -o tls,ro,accesspoint=fsap-0123456789abcdef0 fs-0123456789abcdef0:/ {dir}\n"
        )
    );
}

#[tokio::test]
async fn an_efs_access_point_without_the_helper_fails_the_pod_saying_so() {
    let script = efs_script("fs-0123456789abcdef0::fsap-0123456789abcdef0", false).await;
    let run = run(&script, |dir| write(dir, "trainer.exits", "0\n"));
    assert_eq!(run.status, 125, "{}", run.console);
    let output = run.output("trainer").join("\n");
    assert!(
        output.contains("EFS access point fsap-0123456789abcdef0 needs amazon-efs-utils"),
        "{output}"
    );
    assert!(!run.path("mount.calls").exists());
}
