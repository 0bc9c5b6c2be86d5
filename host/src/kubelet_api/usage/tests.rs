use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::provider::{ContainerUsage, PodKey, PodUsage, Sample};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn sample(second: i64, value: f64) -> Sample {
    Sample {
        at: at(second),
        value,
    }
}

/// `web` with containers `app` (CPU and memory figures) and `proxy` (memory only), `app`
/// running since 1_799_999_000.
fn web() -> Covered {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-web"},
        "spec": {"containers": [{"name": "app", "image": "a"}, {"name": "proxy", "image": "p"}]},
        "status": {
            "phase": "Running",
            "startTime": "2027-01-15T07:50:00Z",
            "containerStatuses": [{
                "name": "app", "image": "a", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2027-01-15T07:50:00Z"}},
            }],
        },
    }))
    .unwrap();
    Covered {
        pod: Arc::new(pod),
        usage: PodUsage {
            pod: PodKey {
                namespace: "shop".to_owned(),
                name: "web".to_owned(),
                uid: "u-web".to_owned(),
            },
            containers: vec![
                ContainerUsage {
                    name: "app".to_owned(),
                    cpu: vec![sample(60, 90.0), sample(0, 60.0)],
                    memory: Some(sample(60, 5.0e8)),
                },
                ContainerUsage {
                    name: "proxy".to_owned(),
                    cpu: vec![],
                    memory: Some(sample(0, 2.0e7)),
                },
            ],
            gpu: None,
        },
    }
}

#[test]
fn the_resource_metrics_are_the_kubelets_families_with_each_samples_time() {
    let text = resource_text(
        &[web()],
        Some(&NodeTotals {
            name: "orca".to_owned(),
        }),
    );
    let ms = at(60).as_millisecond();
    let started = Timestamp::from_second(1_800_000_000 - 600).unwrap();
    assert_eq!(
        started.to_string(),
        "2027-01-15T07:50:00Z",
        "the fixture's start"
    );
    for line in [
        "# TYPE container_cpu_usage_seconds_total counter".to_owned(),
        format!(
            "container_cpu_usage_seconds_total{{container=\"app\",namespace=\"shop\",pod=\"web\"}} 90 {ms}"
        ),
        format!(
            "container_memory_working_set_bytes{{container=\"app\",namespace=\"shop\",pod=\"web\"}} 500000000 {ms}"
        ),
        format!(
            "container_memory_working_set_bytes{{container=\"proxy\",namespace=\"shop\",pod=\"web\"}} 20000000 {}",
            at(0).as_millisecond()
        ),
        format!(
            "container_start_time_seconds{{container=\"app\",namespace=\"shop\",pod=\"web\"}} 1799999400 {ms}"
        ),
        format!("node_cpu_usage_seconds_total 90 {ms}"),
        format!("node_memory_working_set_bytes 520000000 {ms}"),
        format!("pod_cpu_usage_seconds_total{{namespace=\"shop\",pod=\"web\"}} 90 {ms}"),
        format!("pod_memory_working_set_bytes{{namespace=\"shop\",pod=\"web\"}} 520000000 {ms}"),
        "scrape_error 0".to_owned(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(
        !text.contains("container_cpu_usage_seconds_total{container=\"proxy\""),
        "{text}"
    );
    assert!(
        !text.contains("container_start_time_seconds{container=\"proxy\""),
        "no status for proxy"
    );
}

#[test]
fn without_one_node_to_total_no_node_figures_are_given() {
    let text = resource_text(&[web()], None);
    assert!(!text.contains("node_cpu_usage_seconds_total"), "{text}");
    assert!(text.contains("pod_cpu_usage_seconds_total{"), "{text}");
    let empty = resource_text(
        &[],
        Some(&NodeTotals {
            name: "orca".to_owned(),
        }),
    );
    assert!(
        !empty.lines().any(|l| l.starts_with("node_cpu")),
        "nothing to total: {empty}"
    );
}

#[test]
fn label_values_are_escaped_as_the_text_format_wants() {
    assert_eq!(escaped("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

#[test]
fn the_summary_has_each_pods_containers_with_rates_where_two_samples_tell_one() {
    let summary = summary(
        &[web()],
        Some(&NodeTotals {
            name: "orca".to_owned(),
        }),
    );
    assert_eq!(summary["node"]["nodeName"], "orca");
    assert_eq!(
        summary["node"]["memory"]["workingSetBytes"],
        520_000_000_u64
    );
    let pod = &summary["pods"][0];
    assert_eq!(
        pod["podRef"],
        json!({"name": "web", "namespace": "shop", "uid": "u-web"})
    );
    assert_eq!(pod["startTime"], "2027-01-15T07:50:00Z");
    let app = &pod["containers"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(app["cpu"]["usageCoreNanoSeconds"], 90_000_000_000_u64);
    assert_eq!(
        app["cpu"]["usageNanoCores"], 500_000_000_u64,
        "30 s of CPU in 60 s"
    );
    assert_eq!(app["cpu"]["time"], at(60).to_string());
    assert_eq!(app["startTime"], "2027-01-15T07:50:00Z");
    let proxy = &pod["containers"][1];
    assert_eq!(proxy["cpu"], serde_json::Value::Null);
    assert_eq!(proxy["memory"]["workingSetBytes"], 20_000_000_u64);
    assert_eq!(
        pod["cpu"].get("usageNanoCores"),
        None,
        "proxy has no rate, so the pod has none"
    );
    let alone = summary_without_node();
    assert_eq!(alone["node"], json!({}));
}

fn summary_without_node() -> serde_json::Value {
    summary(&[web()], None)
}
