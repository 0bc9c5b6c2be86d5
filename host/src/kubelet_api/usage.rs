//! The pods' usage as the kubelet serves it: `GET /metrics/resource` (the Prometheus text
//! metrics-server scrapes: each container's cumulative CPU seconds, working set and start time,
//! each pod's and the node's totals) and `GET /stats/summary` (the Summary API's JSON, for
//! older consumers). Both answer from [`PodUsages`], the figures the last period read; neither
//! waits on the provider.
//!
//! One listener answers for every node this process serves, and the request does not say
//! which node it was sent for: so the pods are those of every served node the caller may see,
//! and the node's totals are given only while this process serves one node (metrics-server
//! would otherwise give each node the sum of all).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::logs::refuse;
use super::state::{Admitted, ApiState};
use crate::provider::{ContainerUsage, PodUsage, Sample};

/// A pod the answer covers: its object (for its start times) and its usage.
pub struct Covered {
    pub pod: Arc<Pod>,
    pub usage: PodUsage,
}

/// The node's totals, when they are given.
pub struct NodeTotals {
    pub name: String,
}

/// `GET /metrics/resource`.
pub async fn resource_metrics(
    State(state): State<Arc<ApiState>>,
    admitted: Option<Extension<Admitted>>,
) -> Response {
    let Some((covered, node)) = covered(&state, admitted) else {
        return refuse(StatusCode::FORBIDDEN, "Forbidden".to_owned());
    };
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        resource_text(&covered, node.as_ref()),
    )
        .into_response()
}

/// `GET /stats/summary`.
pub async fn stats_summary(
    State(state): State<Arc<ApiState>>,
    admitted: Option<Extension<Admitted>>,
) -> Response {
    let Some((covered, node)) = covered(&state, admitted) else {
        return refuse(StatusCode::FORBIDDEN, "Forbidden".to_owned());
    };
    axum::Json(summary(&covered, node.as_ref())).into_response()
}

/// The pods of the admitted nodes that have figures, and the node totals if one node is
/// served. `None`: the gate admitted nothing.
fn covered(
    state: &ApiState,
    admitted: Option<Extension<Admitted>>,
) -> Option<(Vec<Covered>, Option<NodeTotals>)> {
    let Extension(admitted) = admitted?;
    let covered = state
        .served
        .pods_on(&admitted.nodes)
        .into_iter()
        .filter_map(|pod| {
            let uid = pod.metadata.uid.as_deref()?;
            let usage = state.usages.of(uid)?;
            Some(Covered { pod, usage })
        })
        .collect();
    let served = state.served.names();
    let node = match served.as_slice() {
        [only] if admitted.nodes.contains(only) => Some(NodeTotals { name: only.clone() }),
        _ => None,
    };
    Some((covered, node))
}

/// When the container last started, as the pod's status says.
fn started(pod: &Pod, container: &str) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|s| s.name == container)?
        .state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()
        .map(|time| time.0)
}

fn pod_started(pod: &Pod) -> Option<Timestamp> {
    pod.status.as_ref()?.start_time.as_ref().map(|time| time.0)
}

/// The sum of each container's newest figure, at the newest of their times.
fn total<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Option<Sample> {
    samples.into_iter().fold(None, |sum: Option<Sample>, s| {
        Some(match sum {
            None => *s,
            Some(sum) => Sample {
                at: sum.at.max(s.at),
                value: sum.value + s.value,
            },
        })
    })
}

fn pod_cpu(usage: &PodUsage) -> Option<Sample> {
    total(usage.containers.iter().filter_map(|c| c.cpu.first()))
}

fn pod_memory(usage: &PodUsage) -> Option<Sample> {
    total(usage.containers.iter().filter_map(|c| c.memory.as_ref()))
}

/// A label value as the text format escapes it.
fn escaped(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One family: its HELP and TYPE lines, then a line per labelled sample.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, Sample)]) {
    let _ = writeln!(out, "# HELP {name} [STABLE] {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, sample) in samples {
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(
            out,
            "{name}{braces} {} {}",
            sample.value,
            sample.at.as_millisecond()
        );
    }
}

/// The node's totals: each pod's summed.
fn node_totals(covered: &[Covered]) -> (Option<Sample>, Option<Sample>) {
    let cpu: Vec<Sample> = covered.iter().filter_map(|c| pod_cpu(&c.usage)).collect();
    let memory: Vec<Sample> = covered
        .iter()
        .filter_map(|c| pod_memory(&c.usage))
        .collect();
    (total(&cpu), total(&memory))
}

fn seconds(at: Timestamp) -> f64 {
    at.as_millisecond() as f64 / 1000.0
}

/// The `/metrics/resource` text: the families the kubelet serves there, in its order.
pub fn resource_text(covered: &[Covered], node: Option<&NodeTotals>) -> String {
    let pod_labels = |c: &Covered| {
        format!(
            "namespace=\"{}\",pod=\"{}\"",
            escaped(&c.usage.pod.namespace),
            escaped(&c.usage.pod.name)
        )
    };
    let (mut cpu, mut memory, mut start) = (Vec::new(), Vec::new(), Vec::new());
    for c in covered {
        for container in &c.usage.containers {
            let labels = format!(
                "container=\"{}\",{}",
                escaped(&container.name),
                pod_labels(c)
            );
            if let Some(sample) = container.cpu.first() {
                cpu.push((labels.clone(), *sample));
            }
            if let Some(sample) = container.memory {
                memory.push((labels.clone(), sample));
            }
            let newest = container.cpu.first().or(container.memory.as_ref());
            if let (Some(newest), Some(at)) = (newest, started(&c.pod, &container.name)) {
                let value = seconds(at);
                start.push((
                    labels,
                    Sample {
                        at: newest.at,
                        value,
                    },
                ));
            }
        }
    }
    let mut out = String::new();
    family(
        &mut out,
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
        &cpu,
    );
    family(
        &mut out,
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
        &memory,
    );
    family(
        &mut out,
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds",
        &start,
    );
    if node.is_some() {
        let (cpu, memory) = node_totals(covered);
        let one = |sample: Option<Sample>| -> Vec<(String, Sample)> {
            sample.map(|s| (String::new(), s)).into_iter().collect()
        };
        family(
            &mut out,
            "node_cpu_usage_seconds_total",
            "counter",
            "Cumulative cpu time consumed by the node in core-seconds",
            &one(cpu),
        );
        family(
            &mut out,
            "node_memory_working_set_bytes",
            "gauge",
            "Current working set of the node in bytes",
            &one(memory),
        );
    }
    let per_pod = |figure: fn(&PodUsage) -> Option<Sample>| -> Vec<(String, Sample)> {
        covered
            .iter()
            .filter_map(|c| figure(&c.usage).map(|s| (pod_labels(c), s)))
            .collect()
    };
    family(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
        &per_pod(pod_cpu),
    );
    family(
        &mut out,
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
        &per_pod(pod_memory),
    );
    out.push_str(
        "# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise\n\
         # TYPE scrape_error gauge\n\
         scrape_error 0\n",
    );
    out
}

fn time(at: Timestamp) -> String {
    at.to_string()
}

/// The Summary API's CPU stats from cumulative samples, newest first.
fn cpu_stats(newest: Option<&Sample>, rate: Option<f64>) -> Value {
    let Some(newest) = newest else {
        return Value::Null;
    };
    let mut stats = json!({
        "time": time(newest.at),
        "usageCoreNanoSeconds": (newest.value * 1e9) as u64,
    });
    if let Some(rate) = rate {
        stats["usageNanoCores"] = json!((rate * 1e9) as u64);
    }
    stats
}

fn memory_stats(sample: Option<&Sample>) -> Value {
    sample.map_or(
        Value::Null,
        |s| json!({"time": time(s.at), "workingSetBytes": s.value as u64}),
    )
}

/// The `/stats/summary` JSON.
pub fn summary(covered: &[Covered], node: Option<&NodeTotals>) -> Value {
    let pods: Vec<Value> = covered
        .iter()
        .map(|c| {
            let containers: Vec<Value> = c
                .usage
                .containers
                .iter()
                .map(|container| {
                    let mut value = json!({
                        "name": container.name,
                        "cpu": cpu_stats(container.cpu.first(), container.cpu_rate()),
                        "memory": memory_stats(container.memory.as_ref()),
                    });
                    if let Some(at) = started(&c.pod, &container.name) {
                        value["startTime"] = json!(time(at));
                    }
                    value
                })
                .collect();
            let rate: Option<f64> = c
                .usage
                .containers
                .iter()
                .map(ContainerUsage::cpu_rate)
                .sum();
            let mut value = json!({
                "podRef": {
                    "name": c.usage.pod.name,
                    "namespace": c.usage.pod.namespace,
                    "uid": c.usage.pod.uid,
                },
                "containers": containers,
                "cpu": cpu_stats(pod_cpu(&c.usage).as_ref(), rate),
                "memory": memory_stats(pod_memory(&c.usage).as_ref()),
            });
            if let Some(at) = pod_started(&c.pod) {
                value["startTime"] = json!(time(at));
            }
            value
        })
        .collect();
    let node_value = match node {
        Some(node) => {
            let (cpu, memory) = node_totals(covered);
            json!({
                "nodeName": node.name,
                "cpu": cpu_stats(cpu.as_ref(), None),
                "memory": memory_stats(memory.as_ref()),
            })
        }
        None => json!({}),
    };
    json!({"node": node_value, "pods": pods})
}

#[cfg(test)]
mod tests;
