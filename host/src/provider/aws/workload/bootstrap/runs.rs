//! The script checked by bash itself: `bash -n` for syntax, and whole runs against stand-ins
//! for Docker, IMDS, the AWS CLI, `mount` and `shutdown` (`fakes/`) that record what they were
//! asked and play back what a test sets up.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::config::{LogDelivery, LogsConfig};
use crate::provider::aws::workload::console::{container_exit_codes, container_lines, exit_code};
use crate::workload::source::fake::FakeSource;
use crate::workload::workload_spec;

/// Survives any shell that would interpret it: quotes, `$()`, backticks, a newline.
const HOSTILE: &str =
    "it's $(touch \"$FAKE_DIR/pwned\") `touch \"$FAKE_DIR/pwned\"` \"q\"\nline 2 ${HOME} \\";

const FAKES: [(&str, &str); 6] = [
    ("docker", include_str!("fakes/docker")),
    ("curl", include_str!("fakes/curl")),
    ("aws", include_str!("fakes/aws")),
    ("shutdown", include_str!("fakes/shutdown")),
    ("mount", include_str!("fakes/mount")),
    ("systemctl", include_str!("fakes/systemctl")),
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
    script_shipping(spec, None).await
}

async fn script_shipping(spec: Value, shipping: Option<&LogShipping>) -> String {
    let spec = workload_spec(&pod(spec), &source()).await.unwrap();
    user_data(&spec, shipping).unwrap()
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

/// One run of a script against the fakes.
struct Run {
    dir: tempfile::TempDir,
    status: i32,
    console: String,
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
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let status = output.status.code().expect("the script exits by itself");
    assert_ne!(status, 124, "the script timed out: {output:?}");
    let console = std::fs::read_to_string(dir.path().join("console")).unwrap_or_default();
    Run {
        dir,
        status,
        console,
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test]
async fn a_realistic_pod_becomes_valid_bash_within_the_size_limit() {
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
