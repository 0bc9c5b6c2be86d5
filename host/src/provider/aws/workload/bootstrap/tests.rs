use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::config::{LogDelivery, LogsConfig};
use crate::provider::aws::workload::quote::bash_words;
use crate::workload::source::fake::FakeSource;
use crate::workload::workload_spec;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1"},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test]
async fn too_much_data_names_the_largest_part() {
    let big = "x".repeat(USER_DATA_LIMIT);
    let source = FakeSource::default().config_map("big", &[("weights.txt", &big)]);
    let spec = workload_spec(
        &pod(json!({
            "containers": [{"name": "trainer", "image": "python:3.12"}],
            "volumes": [{"name": "model", "configMap": {"name": "big"}}],
        })),
        &source,
    )
    .await
    .unwrap();
    let error = user_data(&spec, &UserDataOptions::default()).unwrap_err();
    let BootstrapError::TooLarge {
        bytes,
        limit,
        largest,
    } = &error
    else {
        panic!("{error}");
    };
    assert!(*bytes > USER_DATA_LIMIT && *limit == USER_DATA_LIMIT);
    assert!(largest.starts_with("volume \"model\" ("), "{largest}");
    assert!(error.to_string().contains("shorten or drop"), "{error}");
}

#[tokio::test]
async fn a_nul_byte_is_refused_with_its_place() {
    let source = FakeSource::default().secret("s", &[("k", "a\0b")]);
    let spec = workload_spec(
        &pod(
            json!({"containers": [{"name": "trainer", "image": "x", "env": [
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
        ),
        &source,
    )
    .await
    .unwrap();
    assert_eq!(
        user_data(&spec, &UserDataOptions::default())
            .unwrap_err()
            .to_string(),
        r#"container "trainer": env K contains a NUL byte, which cannot be passed to a container"#
    );
}

/// The words bash makes of `expression` after running the last line of `script` that assigns
/// `variable` (the pod's data comes after the template's defaults).
fn assigned_words(script: &str, variable: &str, expression: &str) -> Vec<String> {
    let line = script
        .lines()
        .rfind(|line| line.starts_with(&format!("{variable}=(")))
        .unwrap_or_else(|| panic!("no {variable} in the script"));
    bash_words(line, expression)
}

#[tokio::test]
async fn the_log_options_reach_bash_as_one_word_per_value() {
    let spec = workload_spec(
        &pod(json!({
            "initContainers": [{"name": "fetch", "image": "busybox:1.36"}],
            "containers": [{"name": "trainer", "image": "python:3.12"}],
        })),
        &FakeSource::default(),
    )
    .await
    .unwrap();
    let logs = LogsConfig {
        group: "/orca/pods#it's".to_owned(),
        retention_days: 30,
        delivery: LogDelivery::NonBlocking,
        buffer_size: "1Mi".to_owned(),
        endpoint_url: None,
    };
    let shipping = LogShipping::of(&logs, "u-1");
    let options = UserDataOptions {
        shipping: Some(&shipping),
        ..UserDataOptions::default()
    };
    let script = user_data(&spec, &options).unwrap();
    assert_eq!(
        assigned_words(&script, "orca_log", r#""${orca_log[@]}""#),
        shipping.docker_options()
    );
    assert_eq!(
        assigned_words(&script, "orca_streams", r#""${orca_streams[@]}""#),
        ["u-1/fetch", "u-1/trainer"]
    );

    // Without shipping the pod's data sets neither: the script's json-file default stays.
    let plain = user_data(&spec, &UserDataOptions::default()).unwrap();
    let (_, data) = plain.split_once("orca_pod=").unwrap();
    assert!(!data.contains("orca_log=") && !data.contains("orca_streams=("));
    assert!(plain.contains("orca_log=(--log-driver json-file --log-opt max-size=100m"));
}

#[tokio::test]
async fn the_metric_options_reach_bash_only_when_the_pod_publishes() {
    let spec = workload_spec(
        &pod(json!({"containers": [{"name": "trainer", "image": "python:3.12"}]})),
        &FakeSource::default(),
    )
    .await
    .unwrap();
    let publishing = |namespace: &str, interval_seconds| MetricPublishing {
        namespace: namespace.to_owned(),
        interval_seconds,
        pod_uid: "0f8e4a3c-5b7d-4e21-9c6a-1d2e3f4a5b6c".to_owned(),
    };
    // The interval, the namespace and the pod's UID; an interval of 0 keeps the sampler off.
    let cases = [
        (None, ["0", "unset", "unset"]),
        (
            Some(publishing("Orca/Pods", 60)),
            ["60", "Orca/Pods", "0f8e4a3c-5b7d-4e21-9c6a-1d2e3f4a5b6c"],
        ),
        (
            Some(publishing("team #1: it's $(pods)", 1)),
            [
                "1",
                "team #1: it's $(pods)",
                "0f8e4a3c-5b7d-4e21-9c6a-1d2e3f4a5b6c",
            ],
        ),
    ];
    for (publishing, expected) in cases {
        let options = UserDataOptions {
            publishing: publishing.as_ref(),
            ..UserDataOptions::default()
        };
        let script = user_data(&spec, &options).unwrap();
        // Everything but the call of orca_main: the template's defaults, then the pod's data.
        let setup = script.strip_suffix("orca_main\n").unwrap();
        let words = bash_words(
            setup,
            r#""$orca_metrics_interval" "${orca_metrics_namespace-unset}" "${orca_metrics_pod_uid-unset}""#,
        );
        assert_eq!(words, expected, "{publishing:?}");
        assert_eq!(
            script.contains("orca_sample() {"),
            publishing.is_some(),
            "the sampler only with {publishing:?}"
        );
    }
}

#[test]
fn the_template_leaves_room_for_the_pod_and_survives_minifying() {
    let (head, tail) = TEMPLATE.split_once(WORKLOAD_MARKER).unwrap();
    let (head, sampler) = head.split_once(SAMPLER_MARKER).unwrap();
    let (head, claims) = head.split_once(CLAIMS_MARKER).unwrap();
    let (head, scratch) = head.split_once(SCRATCH_MARKER).unwrap();
    let logic = minify(head).len() + minify(tail).len();
    // Only user data for RAID0 carries the instance store's helpers, which hook themselves in.
    let scratch = minify(scratch);
    assert!(
        scratch.len() < 2 * 1024,
        "the instance store's helpers are {} bytes",
        scratch.len()
    );
    assert!(
        scratch.starts_with("orca_try() {\n")
            && scratch.ends_with("}\norca_disk_setup=orca_scratch\n")
    );
    assert!(!minify(head).contains("orca_scratch") && !minify(tail).contains("orca_scratch"));
    // Only pods with EBS or EFS claims carry their helpers.
    let claims = minify(claims);
    assert!(
        claims.len() < 3 * 1024,
        "the claims' helpers are {} bytes",
        claims.len()
    );
    assert!(claims.starts_with("orca_ebs_device() {\n") && claims.ends_with("}\n"));
    assert!(logic < 8 * 1024, "the fixed part is {logic} bytes");
    // Only pods that publish their usage carry the sampler.
    let sampler = minify(sampler);
    assert!(
        sampler.len() < 2 * 1024,
        "the sampler is {} bytes",
        sampler.len()
    );
    assert!(sampler.starts_with("orca_sample() {\n") && sampler.ends_with("}\n"));
    // Stripping indentation is only safe without heredocs or multi-line strings.
    assert!(!TEMPLATE.contains("<<"));
    assert!(TEMPLATE.contains(r#"printf 'orca[%s] %s orca: %s\n'"#));
    assert!(TEMPLATE.contains(r#"sed -u "s/^/orca[$name] /""#));
    assert!(TEMPLATE.contains(r#"orca_mark "orca-exit-code=$code""#));
}

#[test]
fn minify_keeps_the_shebang_and_drops_comments_and_indentation() {
    assert_eq!(
        minify("#!/bin/bash\n# note\n\n  f() {\n    # inner\n    echo '#x'\n  }\n"),
        "#!/bin/bash\nf() {\necho '#x'\n}\n"
    );
}
